/* The tuner and its per-user cache, on either backend: a search writes a file that the next context
 * loads (a hand-edited knob shows in the context's tuning and kernels, and the cached shape still
 * matches fp64; on OpenCL the crossover families run and their knobs round-trip; a file of the
 * previous format, without them, is still read); a missing, corrupt, stale, foreign or
 * other-profile file is ignored with a note (never an error); caller and environment values win
 * over the cache; an unwritable cache directory and a set ROPEQK_<knob> are errors of ropeqk_tune.
 * XDG_CACHE_HOME points into a fresh folder per test. */
#include "harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static bool vk; /* a Vulkan context: the shaders read the vk_* knobs, the build options name them */
/* The knob the edits of the file, the caller and the environment go through: OpenCL's tq where the
 * build has OpenCL's knobs (every context carries every built-in backend's), else Vulkan's vk_block
 * (a Vulkan-only build): a cached, a caller's and an environment value, and its override name. */
static bool cl_knobs, vk_knobs;
static const char *probe, *probe_env, *probe_ovr, *probe_cached, *probe_caller, *probe_envval;

static void setup(void)
{
    char why[256];
    ropeqk_ctx *x = th_ctx_or_skip_reason(why, sizeof why);
    if (!x)
        cr_skip_test("%s", why);
    vk = th_is_vulkan(x);
    ropeqk_ctx_destroy(x);
    cl_knobs = ropeqk_knob_count("opencl") > 0;
    vk_knobs = ropeqk_knob_count("vulkan") > 0;
    probe = cl_knobs ? "tq" : "vk_block", probe_env = cl_knobs ? "ROPEQK_TQ" : "ROPEQK_VK_BLOCK";
    probe_ovr = cl_knobs ? "overrides: TQ" : "overrides: VK_BLOCK";
    probe_cached = cl_knobs ? "3" : "8", probe_caller = cl_knobs ? "5" : "2", probe_envval = cl_knobs ? "6" : "4";
    cr_assert(th_cache_home_make(dir, sizeof dir), "cannot make %s", dir);
}

static void teardown(void)
{
    th_cache_home_remove(dir);
    th_leak_check();
}

TestSuite(tune, .init = setup, .fini = teardown, .timeout = 600);

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot read %s", path);
    static char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

/* text with the first line starting with `key ` replaced by `key value` */
static char *with_line(const char *text, const char *key, const char *value)
{
    static char out[4096];
    const char *p = strstr(text, key);
    cr_assert(p, "no %s line", key);
    const char *e = strchr(p, '\n');
    snprintf(out, sizeof out, "%.*s%s %s%s", (int)(p - text), text, key, value, e);
    return out;
}

static int32_t probe_of(const ropeqk_ctx *x)
{
    ropeqk_tuning t;
    int32_t v = 0;
    cr_assert_eq(ropeqk_ctx_tuning(x, &t, NULL), ROPEQK_SUCCESS);
    cr_assert_eq(ropeqk_tuning_get(&t, probe, &v), ROPEQK_SUCCESS);
    return v;
}

/* text without the line starting with `key ` */
static char *without_line(const char *text, const char *key)
{
    static char out[4096];
    const char *p = strstr(text, key);
    cr_assert(p, "no %s line", key);
    const char *e = strchr(p, '\n');
    snprintf(out, sizeof out, "%.*s%s", (int)(p - text), text, e + 1);
    return out;
}

static int lines, chunk_lines, dense_lines;
static void count(void *u, const char *line)
{
    (void)u;
    lines++;
    chunk_lines += strncmp(line, "chunk ", 6) == 0;
    dense_lines += strncmp(line, "dense ", 6) == 0;
}

Test(tune, search_writes_a_cache_the_next_context_loads_and_bad_files_are_ignored)
{
    ropeqk_ctx *x = th_ctx_tuned(NULL);
    ropeqk_tuning def; /* the defaults: dense_rows is 2 on a Vulkan CPU device (src/vulkan/vk_tune.c) */
    cr_assert_eq(ropeqk_ctx_tuning(x, &def, NULL), ROPEQK_SUCCESS);
    const char *fresh = vk ? "defaults (Vulkan" : "heuristic"; /* the source without a cache */
    cr_expect(strncmp(ropeqk_ctx_config_source(x), fresh, strlen(fresh)) == 0, "%s", ropeqk_ctx_config_source(x));
    ropeqk_tune_params p = {.budget_seconds = 0.01, .progress = count}; /* the first candidate of each family */
    ropeqk_tuning best;
    char path[4096];
    ropeqk_status st = ropeqk_tune(x, &p, &best, path, sizeof path);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s: %s", ropeqk_status_string(st), ropeqk_last_error());
    cr_expect(lines >= 2, "%d progress lines", lines); /* the first candidate of each family at least */
    /* OpenCL: the crossover families too (their first candidate, the knobs in effect) */
    cr_expect(vk || (chunk_lines == 1 && dense_lines == 1), "chunk %d, dense %d progress lines", chunk_lines,
              dense_lines);
    cr_expect(!vk || (chunk_lines == 0 && dense_lines == 0), "Vulkan has no crossover family");
    cr_expect(best.chunk_rows == 16 && best.dense_rows == def.dense_rows, "%d %d", best.chunk_rows, best.dense_rows);
    cr_expect(strstr(path, dir) == path && strstr(path, "/ropeqk/"), "%s", path);
    if (vk) /* the first candidate is the defaults */
        cr_expect(best.vk_block == 4 && best.vk_tk == 16, "%d %d", best.vk_block, best.vk_tk);
    ropeqk_ctx_destroy(x);

    /* a valid file is loaded: change knobs by hand and see them in the context's tuning and kernels,
     * which still match fp64 */
    char original[4096];
    snprintf(original, sizeof original, "%s", slurp(path));
    cr_assert(strstr(original, vk ? "platform Vulkan\n" : "platform "), "%s", original);
    char edited[4096];
    char dense_line[64];
    snprintf(dense_line, sizeof dense_line, "\ndense_rows %d\n", def.dense_rows);
    cr_assert(strstr(original, "\nchunk_rows 16\n") && strstr(original, dense_line), "%s", original);
    snprintf(edited, sizeof edited, "%s", cl_knobs ? with_line(original, "tq", "3") : original);
    snprintf(edited, sizeof edited, "%s", with_line(edited, "chunk_rows", "5"));
    snprintf(edited, sizeof edited, "%s", with_line(edited, "dense_rows", "0"));
    put(path, vk_knobs ? with_line(edited, "vk_block", "8") : edited);
    x = th_ctx_tuned(NULL);
    char want[4200];
    snprintf(want, sizeof want, "cache (%s)", path);
    cr_expect_str_eq(ropeqk_ctx_config_source(x), want);
    ropeqk_tuning got;
    cr_assert_eq(ropeqk_ctx_tuning(x, &got, NULL), ROPEQK_SUCCESS);
    cr_expect((!cl_knobs || got.tq == 3) && (!vk_knobs || got.vk_block == 8), "tq %d vk_block %d", got.tq,
              got.vk_block);
    cr_expect(got.chunk_rows == 5 && got.dense_rows == -1, "chunk_rows %d dense_rows %d (0 in the file: off)",
              got.chunk_rows, got.dense_rows);
    const char *opt = vk ? "scores block 8 " : "-DRQ_TQ=3 ";
    cr_expect(strstr(ropeqk_ctx_build_options(x), opt), "%s", ropeqk_ctx_build_options(x));
    th_case c;
    memset(&c, 0, sizeof c);
    ropeqk_default_params(&c.p);
    c.B = 1, c.Hq = 4, c.Hkv = 2, c.Sq = 133, c.Sk = 70, c.D = 72, c.dtype = ROPEQK_F32;
    c.p.causal = 1, c.p.q_pos_offset = 70 - 133 + 90;
    c.enqueue = true;
    th_result r = th_run(x, &c, 7);
    cr_expect(r.status == ROPEQK_SUCCESS && r.max_err <= 1e-5 && r.mismatch == 0 && r.guards_ok,
              "cached knobs: %s, error %.3g, %lld mismatches, guards %d", ropeqk_status_string(r.status), r.max_err,
              (long long)r.mismatch, r.guards_ok);
    ropeqk_ctx_destroy(x);
    put(path, with_line(original, probe, probe_cached));

    /* caller values and the environment win over the cache */
    ropeqk_tuning t;
    memset(&t, 0, sizeof t);
    cr_assert_eq(ropeqk_tuning_set(&t, probe, atoi(probe_caller)), ROPEQK_SUCCESS);
    x = th_ctx_tuned(&t);
    cr_expect_eq(probe_of(x), atoi(probe_caller));
    cr_expect(vk || strstr(ropeqk_ctx_build_options(x), "-DRQ_TQ=5 "), "%s", ropeqk_ctx_build_options(x));
    cr_expect(strstr(ropeqk_ctx_config_source(x), probe_ovr), "%s", ropeqk_ctx_config_source(x));
    ropeqk_ctx_destroy(x);
    setenv(probe_env, probe_envval, 1);
    x = th_ctx_tuned(&t);
    cr_expect_eq(probe_of(x), atoi(probe_envval));
    cr_expect(vk || strstr(ropeqk_ctx_build_options(x), "-DRQ_TQ=6 "), "%s", ropeqk_ctx_build_options(x));
    /* ... and a set knob makes the tuner refuse (it would override every candidate) */
    cr_expect_eq(ropeqk_tune(x, &p, NULL, NULL, 0), ROPEQK_ERR_BAD_CONFIG);
    cr_expect(strstr(ropeqk_last_error(), probe_env), "%s", ropeqk_last_error());
    ropeqk_ctx_destroy(x);
    unsetenv(probe_env);

    /* ignored with a note, never an error */
    static const struct {
        const char *key, *value, *note;
    } bad[] = {
        {"library", "0.0.1", "ignored stale"},       {"driver", "0.0-other", "ignored stale"},
        {"device", "Another Device", "another device"}, {"platform", "Other Platform", "another device"},
        {"tq", "99", "ignored corrupt"},             {"vk", "3", "ignored corrupt"},
        {"wg", "many", "ignored corrupt"},           {"ropeqk-tune", "9", "ignored corrupt"},
        {"vk_block", "3", "ignored corrupt"},        {"vk_tk", "64", "ignored corrupt"},
        {"vk_rows", "48", "ignored corrupt"},        {"tile", "48", "ignored corrupt"},
        {"ropeqk-tune", "1", "ignored stale"}, /* the format before the Vulkan knobs */
        {"ropeqk-tune", "2", "ignored stale"}, /* the format before the GPU attention kernel's knobs */
        {"attn_tile", "48", "ignored corrupt"},      {"attn_keys", "24", "ignored corrupt"},
        {"attn_tk", "12", "ignored corrupt"},        {"attn_rb", "3", "ignored corrupt"},
        {"attn_dv", "40", "ignored corrupt"},
        {"chunk_rows", "0", "ignored corrupt"},      {"chunk_rows", "1048577", "ignored corrupt"},
        {"dense_rows", "-1", "ignored corrupt"},     {"dense_rows", "1025", "ignored corrupt"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char line0[64];
        snprintf(line0, sizeof line0, "\n%s ", bad[i].key);
        if (strcmp(bad[i].key, "ropeqk-tune") && !strstr(original, line0))
            continue; /* a knob of a backend this build lacks */
        put(path, with_line(original, bad[i].key, bad[i].value));
        x = th_ctx_tuned(NULL);
        const char *src = ropeqk_ctx_config_source(x);
        cr_expect(strncmp(src, fresh, strlen(fresh)) == 0 && strstr(src, bad[i].note), "%s %s: %s", bad[i].key,
                  bad[i].value, src);
        cr_expect_neq(probe_of(x), atoi(probe_cached), "%s %s: the ignored file's %s is in use", bad[i].key,
                      bad[i].value, probe);
        ropeqk_ctx_destroy(x);
    }
    put(path, with_line(original, "ropeqk-tune", "1"));
    x = th_ctx_tuned(NULL);
    cr_expect(strstr(ropeqk_ctx_config_source(x), "older file format"), "%s", ropeqk_ctx_config_source(x));
    ropeqk_ctx_destroy(x);
    /* format 4 needs the crossovers' lines */
    put(path, without_line(original, "chunk_rows"));
    x = th_ctx_tuned(NULL);
    cr_expect(strstr(ropeqk_ctx_config_source(x), "ignored corrupt"), "%s", ropeqk_ctx_config_source(x));
    ropeqk_ctx_destroy(x);
    /* builds with other backend sets share the cache directory: another backend's knob may be absent
     * (the device's own are required, chunk_rows above), and a knob of a backend this build lacks is
     * skipped; a line that is no "name integer" is not */
    if (cl_knobs && vk_knobs) {
        put(path, without_line(original, vk ? "tq" : "vk_block"));
        x = th_ctx_tuned(NULL);
        cr_expect_str_eq(ropeqk_ctx_config_source(x), want);
        ropeqk_ctx_destroy(x);
    }
    char extra[4200];
    snprintf(extra, sizeof extra, "%sother_backend_knob 7\n", original);
    put(path, extra);
    x = th_ctx_tuned(NULL);
    cr_expect_str_eq(ropeqk_ctx_config_source(x), want);
    ropeqk_ctx_destroy(x);
    snprintf(extra, sizeof extra, "%sother_backend_knob seven\n", original);
    put(path, extra);
    x = th_ctx_tuned(NULL);
    cr_expect(strstr(ropeqk_ctx_config_source(x), "ignored corrupt"), "%s", ropeqk_ctx_config_source(x));
    ropeqk_ctx_destroy(x);
    /* a format 3 file (before the crossovers) is still read: its knobs are used, the crossovers keep
     * their defaults */
    char v3[4096];
    snprintf(v3, sizeof v3, "%s", with_line(original, "ropeqk-tune", "3"));
    snprintf(v3, sizeof v3, "%s", with_line(v3, probe, probe_cached));
    snprintf(v3, sizeof v3, "%s", without_line(v3, "chunk_rows"));
    put(path, without_line(v3, "dense_rows"));
    x = th_ctx_tuned(NULL);
    cr_expect_str_eq(ropeqk_ctx_config_source(x), want);
    cr_assert_eq(ropeqk_ctx_tuning(x, &got, NULL), ROPEQK_SUCCESS);
    int32_t pv = 0;
    ropeqk_tuning_get(&got, probe, &pv);
    cr_expect(pv == atoi(probe_cached) && got.chunk_rows == 16 && got.dense_rows == def.dense_rows,
              "format 3: %s %d chunk_rows %d dense_rows %d", probe, pv, got.chunk_rows, got.dense_rows);
    ropeqk_ctx_destroy(x);
    static const char *const garbage[] = {"", "ropeqk-tune 4\n", "\x01\x02 binary", "ropeqk-tune 3\nlibrary"};
    for (size_t i = 0; i < 4; i++) {
        put(path, garbage[i]);
        x = th_ctx_tuned(NULL);
        cr_expect(strstr(ropeqk_ctx_config_source(x), "ignored corrupt"), "garbage %zu: %s", i,
                  ropeqk_ctx_config_source(x));
        ropeqk_ctx_destroy(x);
    }
    /* a file for the other profile is not used */
    put(path, with_line(original, "profile", strstr(original, "profile cpu") ? "gpu" : "cpu"));
    x = th_ctx_tuned(NULL);
    cr_expect(strstr(ropeqk_ctx_config_source(x), "other profile"), "%s", ropeqk_ctx_config_source(x));
    ropeqk_ctx_destroy(x);
}

/* A cache directory that cannot be created: the search still reports its winners, the write fails
 * with a message, and nothing else changes. (Tests run as root, so a read-only mode would not stop
 * a write: XDG_CACHE_HOME names a regular file instead.) */
Test(tune, unwritable_cache_is_an_error_of_the_tuner_only)
{
    char file[300];
    snprintf(file, sizeof file, "%s/not-a-dir", dir);
    put(file, "x");
    setenv("XDG_CACHE_HOME", file, 1);
    ropeqk_ctx *x = th_ctx_tuned(NULL);
    cr_expect(strncmp(ropeqk_ctx_config_source(x), vk ? "defaults (Vulkan" : "heuristic", vk ? 16 : 9) == 0, "%s",
              ropeqk_ctx_config_source(x));
    ropeqk_tune_params p = {.budget_seconds = 0.01};
    ropeqk_tuning best;
    memset(&best, 0, sizeof best);
    cr_expect_eq(ropeqk_tune(x, &p, &best, NULL, 0), ROPEQK_ERR_BAD_CONFIG);
    cr_expect(strstr(ropeqk_last_error(), "not-a-dir"), "%s", ropeqk_last_error());
    cr_expect(vk ? best.vk_block > 0 : best.tq > 0, "the winners are reported even when the cache cannot be written");
    /* a dry run needs no cache */
    p.no_write = 1;
    cr_expect_eq(ropeqk_tune(x, &p, NULL, NULL, 0), ROPEQK_SUCCESS);
    ropeqk_ctx_destroy(x);
}
