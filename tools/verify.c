/* Verification against the scalar path (ropeqk_scores_ref in fp64, ropeqk_max_error), split into
 * independent (batch, key head) groups: each group is a view of Q (the G query heads that read one
 * key head), of K (that key head) and of the scores, so the library's own functions do the work
 * while a few threads share it. */
#include "cli.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_THREADS 16

typedef struct {
    const ropeqk_params *p;
    const ropeqk_tensor *q, *k, *s;
    const unsigned char *qd, *kd, *sd;
    const int32_t *qpos, *kpos;
    int64_t B, Hkv, G;
    atomic_llong next;  /* next group to take */
    pthread_mutex_t lock;
    double max_err;
    int64_t mismatch;
    ropeqk_status st;
} job;

static void *worker(void *arg)
{
    job *j = arg;
    int64_t Sq = j->q->ne[2], Sk = j->k->ne[2];
    ropeqk_tensor s64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, j->G, Sq, Sk);
    double *buf = malloc(ropeqk_tensor_extent(&s64));
    double worst = 0.0;
    int64_t bad = 0;
    ropeqk_status st = buf ? ROPEQK_SUCCESS : ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    for (;;) {
        long long g = atomic_fetch_add(&j->next, 1);
        if (st != ROPEQK_SUCCESS || g >= j->B * j->Hkv)
            break;
        int64_t b = g / j->Hkv, hk = g % j->Hkv;
        ropeqk_tensor qv = *j->q, kv = *j->k, sv = *j->s;
        qv.ne[0] = kv.ne[0] = sv.ne[0] = 1;
        qv.ne[1] = sv.ne[1] = j->G;
        kv.ne[1] = 1;
        const unsigned char *qd = j->qd + b * j->q->nb[0] + hk * j->G * j->q->nb[1];
        const unsigned char *kd = j->kd + b * j->k->nb[0] + hk * j->k->nb[1];
        const unsigned char *sd = j->sd + b * j->s->nb[0] + hk * j->G * j->s->nb[1];
        st = ropeqk_scores_ref(j->p, &qv, qd, &kv, kd, j->qpos, j->kpos, &s64, buf);
        double e = 0.0;
        int64_t m = 0;
        if (st == ROPEQK_SUCCESS)
            st = ropeqk_max_error(j->p, &qv, qd, &kv, kd, &sv, sd, &s64, buf, &e, &m);
        if (st == ROPEQK_SUCCESS) {
            if (!(e <= worst)) /* keeps NaN/inf */
                worst = e;
            bad += m;
        }
    }
    free(buf);
    pthread_mutex_lock(&j->lock);
    if (!(worst <= j->max_err))
        j->max_err = worst;
    j->mismatch += bad;
    if (st != ROPEQK_SUCCESS && j->st == ROPEQK_SUCCESS)
        j->st = st;
    pthread_mutex_unlock(&j->lock);
    return NULL;
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
    j.q = q;
    j.k = k;
    j.s = s;
    j.qd = qd;
    j.kd = kd;
    j.sd = (const unsigned char *)sd;
    j.qpos = qpos;
    j.kpos = kpos;
    j.B = q->ne[0];
    j.Hkv = k->ne[1];
    j.G = q->ne[1] / k->ne[1];
    atomic_init(&j.next, 0);
    if (pthread_mutex_init(&j.lock, NULL) != 0)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t groups = j.B * j.Hkv;
    int nt = (int)(ncpu < 1 ? 1 : ncpu > MAX_THREADS ? MAX_THREADS : ncpu);
    if (nt > groups)
        nt = (int)groups;
    /* small problems: not worth a thread */
    if ((double)q->ne[1] * (double)q->ne[2] * (double)k->ne[2] * (double)q->ne[3] < 2e6)
        nt = 1;
    pthread_t th[MAX_THREADS];
    int started = 0;
    for (int t = 1; t < nt; t++) {
        if (pthread_create(&th[started], NULL, worker, &j) != 0)
            break;
        started++;
    }
    worker(&j);
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    pthread_mutex_destroy(&j.lock);
    *max_err = j.max_err;
    *mismatch = j.mismatch;
    return j.st;
}
