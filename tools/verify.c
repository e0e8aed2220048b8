/* Verification against the scalar path, split into independent (batch, key head) groups: each group
 * is a view of Q (the G query heads that read one key head), of K and V (that key head) and of the
 * result, so the library's own functions do the work (ropeqk_scores_ref + ropeqk_max_error, or
 * ropeqk_attention_ref + ropeqk_attention_max_error) while a few threads share it. */
#include "cli.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_THREADS 16

typedef struct job job;
/* Checks group (b, hk) with a thread's scratch; adds to *e (error), *e2 (LSE error), *m (mismatches). */
typedef ropeqk_status (*group_fn)(const job *j, void *scratch, int64_t b, int64_t hk, double *e, double *e2,
                                  int64_t *m);

struct job {
    const ropeqk_params *p;
    const ropeqk_tensor *q, *k, *v, *s, *lse; /* s: the scores, or O for attention */
    const unsigned char *qd, *kd, *vd, *sd, *lsed;
    const int32_t *qpos, *kpos;
    int64_t B, Hkv, G;
    size_t scratch; /* bytes per thread */
    group_fn fn;
    atomic_llong next; /* next group to take */
    pthread_mutex_t lock;
    double max_err, max_err2;
    int64_t mismatch;
    ropeqk_status st;
};

static void keep_max(double *acc, double e)
{
    if (!(e <= *acc)) /* keeps NaN/inf */
        *acc = e;
}

/* The views of group (b, hk): G query heads, one key head. */
static void group_views(const job *j, int64_t b, int64_t hk, ropeqk_tensor *qv, ropeqk_tensor *kv,
                        ropeqk_tensor *sv, const unsigned char **qd, const unsigned char **kd, const unsigned char **sd)
{
    *qv = *j->q, *kv = *j->k, *sv = *j->s;
    qv->ne[0] = kv->ne[0] = sv->ne[0] = 1;
    qv->ne[1] = sv->ne[1] = j->G;
    kv->ne[1] = 1;
    *qd = j->qd + b * j->q->nb[0] + hk * j->G * j->q->nb[1];
    *kd = j->kd + b * j->k->nb[0] + hk * j->k->nb[1];
    *sd = j->sd + b * j->s->nb[0] + hk * j->G * j->s->nb[1];
}

static ropeqk_status scores_group(const job *j, void *scratch, int64_t b, int64_t hk, double *e, double *e2,
                                  int64_t *m)
{
    (void)e2;
    ropeqk_tensor qv, kv, sv;
    const unsigned char *qd, *kd, *sd;
    group_views(j, b, hk, &qv, &kv, &sv, &qd, &kd, &sd);
    ropeqk_tensor s64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, j->G, j->q->ne[2], j->k->ne[2]);
    ropeqk_status st = ropeqk_scores_ref(j->p, &qv, qd, &kv, kd, j->qpos, j->kpos, &s64, scratch);
    double err = 0.0;
    int64_t mm = 0;
    if (st == ROPEQK_SUCCESS)
        st = ropeqk_max_error(j->p, &qv, qd, &kv, kd, &sv, sd, &s64, scratch, &err, &mm);
    if (st == ROPEQK_SUCCESS) {
        keep_max(e, err);
        *m += mm;
    }
    return st;
}

static ropeqk_status attention_group(const job *j, void *scratch, int64_t b, int64_t hk, double *e, double *e2,
                                     int64_t *m)
{
    ropeqk_tensor qv, kv, ov, vv = *j->v, lv;
    const unsigned char *qd, *kd, *od;
    group_views(j, b, hk, &qv, &kv, &ov, &qd, &kd, &od);
    vv.ne[0] = vv.ne[1] = 1;
    const unsigned char *vd = j->vd + b * j->v->nb[0] + hk * j->v->nb[1], *ld = NULL;
    const int64_t Sq = j->q->ne[2], Dv = j->v->ne[3];
    ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, j->G, Sq, Dv);
    ropeqk_tensor l64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, j->G, Sq, 1);
    double *o64d = scratch, *l64d = o64d + j->G * Sq * Dv;
    if (j->lse) {
        lv = *j->lse;
        lv.ne[0] = 1;
        lv.ne[1] = j->G;
        ld = j->lsed + b * j->lse->nb[0] + hk * j->G * j->lse->nb[1];
    }
    /* this group's query heads hk*G .. hk*G + G-1 take their own sinks */
    ropeqk_params p = *j->p;
    if (p.sinks) {
        p.sinks += hk * j->G;
        p.n_sinks = (int32_t)j->G;
    }
    ropeqk_status st = ropeqk_attention_ref(&p, &qv, qd, &kv, kd, &vv, vd, j->qpos, j->kpos, &o64, o64d,
                                            j->lse ? &l64 : NULL, l64d);
    double err = 0.0, lerr = 0.0;
    int64_t mm = 0;
    if (st == ROPEQK_SUCCESS)
        st = ropeqk_attention_max_error(&vv, vd, &ov, od, &o64, o64d, j->lse ? &lv : NULL, ld, j->lse ? &l64 : NULL,
                                        j->lse ? l64d : NULL, &err, &lerr, &mm);
    if (st == ROPEQK_SUCCESS) {
        keep_max(e, err);
        keep_max(e2, lerr);
        *m += mm;
    }
    return st;
}

static void *worker(void *arg)
{
    job *j = arg;
    void *buf = malloc(j->scratch);
    double worst = 0.0, worst2 = 0.0;
    int64_t bad = 0;
    ropeqk_status st = buf ? ROPEQK_SUCCESS : ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    for (;;) {
        long long g = atomic_fetch_add(&j->next, 1);
        if (st != ROPEQK_SUCCESS || g >= j->B * j->Hkv)
            break;
        st = j->fn(j, buf, g / j->Hkv, g % j->Hkv, &worst, &worst2, &bad);
    }
    free(buf);
    pthread_mutex_lock(&j->lock);
    keep_max(&j->max_err, worst);
    keep_max(&j->max_err2, worst2);
    j->mismatch += bad;
    if (st != ROPEQK_SUCCESS && j->st == ROPEQK_SUCCESS)
        j->st = st;
    pthread_mutex_unlock(&j->lock);
    return NULL;
}

/* Runs j->fn over every group on a few threads (one when `work` is small). */
static ropeqk_status run_groups(job *j, double work)
{
    atomic_init(&j->next, 0);
    if (pthread_mutex_init(&j->lock, NULL) != 0)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t groups = j->B * j->Hkv;
    int nt = (int)(ncpu < 1 ? 1 : ncpu > MAX_THREADS ? MAX_THREADS : ncpu);
    if (nt > groups)
        nt = (int)groups;
    if (work < 2e6) /* small problems: not worth a thread */
        nt = 1;
    pthread_t th[MAX_THREADS];
    int started = 0;
    for (int t = 1; t < nt; t++) {
        if (pthread_create(&th[started], NULL, worker, j) != 0)
            break;
        started++;
    }
    worker(j);
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    pthread_mutex_destroy(&j->lock);
    return j->st;
}

ropeqk_status cli_verify(const ropeqk_params *p, const ropeqk_tensor *q, const void *qd, const ropeqk_tensor *k,
                         const void *kd, const int32_t *qpos, const int32_t *kpos, const ropeqk_tensor *s,
                         const float *sd, double *max_err, int64_t *mismatch)
{
    *max_err = 0.0;
    *mismatch = 0;
    if (k->ne[1] < 1 || q->ne[1] % k->ne[1] != 0)
        return ROPEQK_ERR_BAD_HEADS;
    job j;
    memset(&j, 0, sizeof j);
    j.p = p;
    j.q = q, j.k = k, j.s = s;
    j.qd = qd, j.kd = kd, j.sd = (const unsigned char *)sd;
    j.qpos = qpos, j.kpos = kpos;
    j.B = q->ne[0], j.Hkv = k->ne[1], j.G = q->ne[1] / k->ne[1];
    ropeqk_tensor s64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, j.G, q->ne[2], k->ne[2]);
    j.scratch = ropeqk_tensor_extent(&s64);
    j.fn = scores_group;
    ropeqk_status st = run_groups(&j, (double)q->ne[1] * (double)q->ne[2] * (double)k->ne[2] * (double)q->ne[3]);
    *max_err = j.max_err;
    *mismatch = j.mismatch;
    return st;
}

ropeqk_status cli_verify_attention(const ropeqk_params *p, const ropeqk_tensor *q, const void *qd,
                                   const ropeqk_tensor *k, const void *kd, const ropeqk_tensor *v, const void *vd,
                                   const int32_t *qpos, const int32_t *kpos, const ropeqk_tensor *o, const void *od,
                                   const ropeqk_tensor *lse, const void *lsed, double *max_err, double *max_lse_rel,
                                   int64_t *mismatch)
{
    *max_err = *max_lse_rel = 0.0;
    *mismatch = 0;
    if (k->ne[1] < 1 || q->ne[1] % k->ne[1] != 0)
        return ROPEQK_ERR_BAD_HEADS;
    job j;
    memset(&j, 0, sizeof j);
    j.p = p;
    j.q = q, j.k = k, j.v = v, j.s = o, j.lse = lse;
    j.qd = qd, j.kd = kd, j.vd = vd, j.sd = od, j.lsed = lsed;
    j.qpos = qpos, j.kpos = kpos;
    j.B = q->ne[0], j.Hkv = k->ne[1], j.G = q->ne[1] / k->ne[1];
    /* O64 [1,G,Sq,Dv] then LSE64 [1,G,Sq,1], fp64 (sizes valid: O's own view was validated) */
    j.scratch = (size_t)(j.G * q->ne[2]) * (size_t)(v->ne[3] + 1) * sizeof(double);
    j.fn = attention_group;
    ropeqk_status st = run_groups(
        &j, (double)q->ne[1] * (double)q->ne[2] * (double)k->ne[2] * (double)(q->ne[3] + v->ne[3]));
    *max_err = j.max_err;
    *max_lse_rel = j.max_err2;
    *mismatch = j.mismatch;
    return st;
}
