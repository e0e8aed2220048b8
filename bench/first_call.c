/* ropeqk-bench: first-call latency (context creation + first op) of a new process, measured in
 * child processes of the bench: with an empty POCL_CACHE_DIR (cold) and with it populated (warm),
 * prefill-shaped call first and, in a second cold child, decode-shaped call first. */
#define _XOPEN_SOURCE 700
#include "first_call.h"

#include "benv.h"
#include "clock.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Child mode: a new process, as a user's program would be. Prints create, first prefill-shaped call,
 * first decode-shaped call (seconds), in that order; decode_first runs the decode-shaped call first. */
int first_call_child(bool decode_first)
{
    /* the scores checks' shapes (scores_bench.c): prefill-shaped and decode-shaped */
    static const struct {
        int Hq, Hkv, Sq, Sk, D, q_off;
    } sh[2] = {{4, 2, 33, 65, 64, 32}, {8, 1, 1, 300, 128, 299}};
    float *q = calloc(8 * 300 * 128, 4), *k = calloc(8 * 300 * 128, 4), *o = calloc(8 * 33 * 300, 4);
    if (!q || !k || !o)
        return 1;
    ropeqk_params p;
    ropeqk_default_params(&p);
    double t0 = rqs_now();
    ropeqk_ctx *ctx;
    int st = ropeqk_ctx_create(NULL, &ctx);
    if (st)
        return bench_fail("ropeqk_ctx_create", st);
    double t[3] = {rqs_now() - t0, 0, 0};
    for (int n = 0; n < 2; n++) {
        int i = decode_first ? 1 - n : n;
        ropeqk_tensor tq = ropeqk_tensor_bhsd(ROPEQK_F32, 1, sh[i].Hq, sh[i].Sq, sh[i].D);
        ropeqk_tensor tk = ropeqk_tensor_bhsd(ROPEQK_F32, 1, sh[i].Hkv, sh[i].Sk, sh[i].D);
        ropeqk_tensor to = ropeqk_tensor_bhsd(ROPEQK_F32, 1, sh[i].Hq, sh[i].Sq, sh[i].Sk);
        p.q_pos_offset = sh[i].q_off;
        double t1 = rqs_now();
        if ((st = ropeqk_scores(ctx, &p, &tq, q, &tk, k, NULL, NULL, &to, o)))
            return bench_fail("ropeqk_scores", st);
        t[i + 1] = rqs_now() - t1;
    }
    printf("%.6f %.6f %.6f\n", t[0], t[1], t[2]);
    ropeqk_ctx_destroy(ctx);
    free(q); free(k); free(o);
    return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

/* Runs this program in child mode with POCL_CACHE_DIR = dir; t[3] as printed by the child. */
static int spawn_child(const char *self, const char *dir, bool decode_first, double t[3])
{
    int fd[2];
    if (pipe(fd))
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        setenv("POCL_CACHE_DIR", dir, 1);
        execl(self, self, decode_first ? "--first-call-child-decode" : "--first-call-child", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[256] = {0};
    size_t len = 0;
    ssize_t r;
    while (len < sizeof buf - 1 && (r = read(fd[0], buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)r;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || sscanf(buf, "%lf %lf %lf", &t[0], &t[1], &t[2]) != 3)
        return -1;
    return 0;
}

/* out[0]: cold, prefill first; out[1]: warm, prefill first; out[2]: cold, decode first. */
void first_call_latency(const char *self, double out[3][3])
{
    char dir[2][40] = {"/tmp/ropeqk-bench-cache-XXXXXX", "/tmp/ropeqk-bench-cache-XXXXXX"};
    for (int i = 0; i < 3; i++)
        out[i][0] = NAN;
    if (!mkdtemp(dir[0]) || !mkdtemp(dir[1])) {
        printf("first call: cannot create a temporary cache dir (%s)\n", strerror(errno));
        return;
    }
    static const char *const label[3] = {"cold (empty POCL_CACHE_DIR)", "warm (cache populated, new process)",
                                         "cold, decode-shaped call first"};
    for (int i = 0; i < 3; i++) {
        if (spawn_child(self, dir[i == 2], i == 2, out[i])) {
            printf("first call %s: child failed\n", label[i]);
            out[i][0] = NAN;
            continue;
        }
        if (i < 2)
            printf("first call %-38s create %6.3f s + first prefill-shaped call %6.3f s = %6.3f s;"
                   " then first decode-shaped call %6.3f s\n",
                   label[i], out[i][0], out[i][1], out[i][0] + out[i][1], out[i][2]);
        else
            printf("first call %-38s create %6.3f s + first decode-shaped call %6.3f s = %6.3f s\n", label[i],
                   out[i][0], out[i][2], out[i][0] + out[i][2]);
    }
    for (int i = 0; i < 2; i++)
        nftw(dir[i], rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
