/* Helpers of the `ropeqk` command tests. */
#include "cli_util.h"
#include "npy.h"
#include "ropeqk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *slurp_fd(int fd)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        return NULL;
    lseek(fd, 0, SEEK_SET);
    for (;;) {
        if (len + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return buf;
}

static int temp_fd(void)
{
    const char *t = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/ropeqk-cli-out-XXXXXX", t && *t ? t : "/tmp");
    int fd = mkstemp(path);
    if (fd >= 0)
        unlink(path);
    return fd;
}

bool cli_run(cli_result *r, const char *cwd, const char *const *env, int timeout_s, const char *const *args)
{
    memset(r, 0, sizeof *r);
    int fo = temp_fd(), fe = temp_fd();
    if (fo < 0 || fe < 0) {
        if (fo >= 0)
            close(fo);
        if (fe >= 0)
            close(fe);
        return false;
    }
    size_t n = 0;
    while (args[n])
        n++;
    const char **argv = calloc(n + 2, sizeof *argv);
    if (!argv) {
        close(fo);
        close(fe);
        return false;
    }
    argv[0] = ROPEQK_EXE;
    for (size_t i = 0; i < n; i++)
        argv[i + 1] = args[i];
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (cwd && chdir(cwd) != 0)
            _exit(126);
        for (size_t i = 0; env && env[i]; i++) {
            char kv[512];
            snprintf(kv, sizeof kv, "%s", env[i]);
            char *eq = strchr(kv, '=');
            if (eq) {
                *eq = '\0';
                setenv(kv, eq + 1, 1);
            }
        }
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        alarm((unsigned)timeout_s); /* survives exec: a hang ends as SIGALRM */
        execv(ROPEQK_EXE, (char *const *)argv);
        _exit(127);
    }
    free(argv);
    bool ok = pid > 0;
    if (ok) {
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        r->status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1000;
        r->out = slurp_fd(fo);
        r->err = slurp_fd(fe);
        if (!r->out || !r->err)
            ok = false;
    }
    close(fo);
    close(fe);
    if (!ok)
        cli_result_free(r);
    return ok;
}

void cli_result_free(cli_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

bool tmpdir_make(char *buf, size_t len)
{
    const char *t = getenv("TMPDIR");
    snprintf(buf, len, "%s/ropeqk-cli-test-XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(buf) != NULL;
}

void tmpdir_remove(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

bool write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

bool no_backend_device(const char *backend)
{
    uint32_t n = 0;
    if (ropeqk_list_devices(NULL, 0, &n) != ROPEQK_SUCCESS)
        return true;
    ropeqk_device_info *l = calloc(n, sizeof *l);
    bool none = true;
    if (l && ropeqk_list_devices(l, n, &n) == ROPEQK_SUCCESS)
        for (uint32_t i = 0; i < n && none; i++)
            none = strcmp(l[i].backend, backend) != 0;
    free(l);
    return none;
}

bool no_opencl_platform(void) { return no_backend_device("OpenCL"); }

bool no_device_for(const char *spec)
{
    ropeqk_ctx *c = NULL;
    ropeqk_ctx_params p = {.device = spec};
    if (ropeqk_ctx_create(&p, &c) != ROPEQK_SUCCESS)
        return true;
    ropeqk_ctx_destroy(c);
    return false;
}

bool no_device(void) { return no_device_for(NULL); }

int read_args(const char *path, char ***out)
{
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char **v = calloc(65, sizeof *v);
    char tok[512];
    int n = 0;
    while (v && n < 64 && fscanf(f, "%511s", tok) == 1)
        v[n++] = strdup(tok);
    fclose(f);
    if (!v)
        return -1;
    *out = v;
    return n;
}

void free_args(char **args)
{
    for (int i = 0; args && args[i]; i++)
        free(args[i]);
    free(args);
}

/* The library's storage type of an input .npy ('<u2' files hold bf16 bits: --dtype bf16). */
static ropeqk_dtype input_dtype(const npy_array *a)
{
    return a->dtype == NPY_F16 ? ROPEQK_F16 : a->dtype == NPY_U16 ? ROPEQK_BF16 : ROPEQK_F32;
}

ropeqk_tensor input_view(const npy_array *a, bool bshd)
{
    return bshd ? ropeqk_tensor_bshd(input_dtype(a), a->shape[0], a->shape[1], a->shape[2], a->shape[3])
                : ropeqk_tensor_bhsd(input_dtype(a), a->shape[0], a->shape[1], a->shape[2], a->shape[3]);
}

bool compare_case(const char *case_dir, char *const *flags, const char *out_path, double *max_err,
                  int64_t *mask_mismatch, char *msg, size_t msglen)
{
    bool bshd = false;
    double scale = 0.0;
    for (int i = 0; flags[i]; i++) {
        if (strcmp(flags[i], "--format") == 0 && flags[i + 1])
            bshd = strcmp(flags[i + 1], "bshd") == 0;
        if (strcmp(flags[i], "--scale") == 0 && flags[i + 1])
            scale = strtod(flags[i + 1], NULL);
    }
    npy_array q = {0}, k = {0}, e = {0}, o = {0};
    char p[1024], err[512];
    bool ok = false;
    snprintf(p, sizeof p, "%s/q.npy", case_dir);
    if (npy_load(p, &q, err, sizeof err) != 0)
        goto fail;
    snprintf(p, sizeof p, "%s/k.npy", case_dir);
    if (npy_load(p, &k, err, sizeof err) != 0)
        goto fail;
    snprintf(p, sizeof p, "%s/expected.npy", case_dir);
    if (npy_load(p, &e, err, sizeof err) != 0)
        goto fail;
    if (npy_load(out_path, &o, err, sizeof err) != 0)
        goto fail;
    if (o.dtype != NPY_F32 || e.dtype != NPY_F64 || o.ndim != 4 || e.ndim != 4 || q.ndim != 4 || k.ndim != 4) {
        snprintf(err, sizeof err, "unexpected dtype or rank (out %s/%d, expected %s/%d)", npy_dtype_descr(o.dtype),
                 o.ndim, npy_dtype_descr(e.dtype), e.ndim);
        goto fail;
    }
    for (int i = 0; i < 4; i++)
        if (o.shape[i] != e.shape[i]) {
            snprintf(err, sizeof err, "output shape differs from expected in dim %d: %lld vs %lld", i,
                     (long long)o.shape[i], (long long)e.shape[i]);
            goto fail;
        }
    /* the conventions metric (docs/conventions.md) is ropeqk_max_error; only the scale matters to it */
    ropeqk_params prm;
    ropeqk_default_params(&prm);
    prm.scale = scale;
    ropeqk_tensor tq = input_view(&q, bshd), tk = input_view(&k, bshd);
    ropeqk_tensor to = ropeqk_tensor_bhsd(ROPEQK_F32, o.shape[0], o.shape[1], o.shape[2], o.shape[3]);
    ropeqk_tensor te = ropeqk_tensor_bhsd(ROPEQK_F64, e.shape[0], e.shape[1], e.shape[2], e.shape[3]);
    double worst = 0.0;
    int64_t bad = 0;
    ropeqk_status st = ropeqk_max_error(&prm, &tq, q.data, &tk, k.data, &to, o.data, &te, e.data, &worst, &bad);
    if (st != ROPEQK_SUCCESS) {
        snprintf(err, sizeof err, "ropeqk_max_error: %s", ropeqk_status_string(st));
        goto fail;
    }
    *max_err = worst;
    *mask_mismatch = bad;
    ok = true;
fail:
    if (!ok)
        snprintf(msg, msglen, "%s", err);
    npy_free(&q);
    npy_free(&k);
    npy_free(&e);
    npy_free(&o);
    return ok;
}
