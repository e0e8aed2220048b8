/* `ropeqk config`: the named Hugging Face configs of tests/data/configs (written with their expected
 * flags and scores by scripts/gen_config_fixtures.py). For each case, (a) the printed flags are
 * exactly the expected ones, and (b) `ropeqk scores` with those flags on the case's q/k at the
 * model's long context matches the NumPy fp64 scores within 1e-5 (conventions metric), once on the
 * scalar path and once on the default OpenCL device (skipped without a platform). Then the key
 * reading rules (rope_type/type, su, default, head_dim, partial rotary, text_config, ...) and the
 * errors (exit 1 naming the key and the file; 2 for usage). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "npy.h"

#define CFG DATA_DIR "/configs"
#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static char tmp[512];

static void setup(void) { cr_assert(tmpdir_make(tmp, sizeof tmp)); }
static void teardown(void) { tmpdir_remove(tmp); }

static const char *tpath(const char *name)
{
    static char buf[8][768];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", tmp, name);
    return p;
}

static cli_result run(const char *const *args)
{
    cli_result r;
    cr_assert(cli_run(&r, NULL, NULL, 120, args), "cannot run " ROPEQK_EXE);
    if (r.status == 1 && strstr(r.err, "without cJSON")) {
        cli_result_free(&r);
        cr_skip_test("ropeqk built without cJSON");
    }
    return r;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    static char buf[8][4096];
    static int next;
    char *b = buf[next++ % 8];
    size_t n = fread(b, 1, sizeof buf[0] - 1, f);
    fclose(f);
    b[n] = '\0';
    while (n && (b[n - 1] == '\n' || b[n - 1] == ' '))
        b[--n] = '\0';
    return b;
}

/* Replaces every "@PREFIX@" of s by prefix. */
static void subst(const char *s, const char *prefix, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    while (*s && used + 1 < len) {
        if (strncmp(s, "@PREFIX@", 8) == 0) {
            used += (size_t)snprintf(out + used, len - used, "%s", prefix);
            s += 8;
        } else {
            out[used++] = *s++;
            out[used] = '\0';
        }
    }
}

/* Splits a line at spaces into argv (pointers into line, which is modified). */
static int split(char *line, char **argv, int max)
{
    int n = 0;
    for (char *t = strtok(line, " \n"); t && n < max; t = strtok(NULL, " \n"))
        argv[n++] = t;
    argv[n] = NULL;
    return n;
}

static void run_case(const char *name, bool device)
{
    if (device && no_device())
        cr_skip_test("no device");
    char dir[600], p[700], prefix[700], want[4096], first[4096];
    snprintf(dir, sizeof dir, "%s/%s", CFG, name);
    snprintf(prefix, sizeof prefix, "%s/m", tmp);
    /* (a) ropeqk config MODEL.json --out-prefix tmp/m [extra] prints the expected flags */
    snprintf(p, sizeof p, "%s/config_args.txt", dir);
    char cfg_line[512], cfg_path[700];
    snprintf(cfg_line, sizeof cfg_line, "%s", slurp(p));
    char *ca[16];
    int nca = split(cfg_line, ca, 15);
    cr_assert(nca >= 1);
    snprintf(cfg_path, sizeof cfg_path, "%s/%s", CFG, ca[0]);
    const char *argv[64];
    int n = 0;
    argv[n++] = "config";
    argv[n++] = cfg_path;
    argv[n++] = "--out-prefix";
    argv[n++] = prefix;
    for (int i = 1; i < nca; i++)
        argv[n++] = ca[i];
    argv[n] = NULL;
    cli_result r = run(argv);
    cr_assert_eq(r.status, 0, "%s: config exit %d: %s", name, r.status, r.err);
    snprintf(p, sizeof p, "%s/flags.txt", dir);
    subst(slurp(p), prefix, want, sizeof want);
    const char *nl = strchr(r.out, '\n');
    cr_assert(nl, "%s: no line: %s", name, r.out);
    snprintf(first, sizeof first, "%.*s", (int)(nl - r.out), r.out);
    cr_expect_str_eq(first, want, "%s: flags differ:\n got  %s\n want %s", name, first, want);
    for (const char *l = nl + 1; *l; l = strchr(l, '\n') + 1) {
        cr_expect_eq(*l, '#', "%s: a line after the flags does not start with '#': %s", name, l);
        if (!strchr(l, '\n'))
            break;
    }
    snprintf(p, sizeof p, "%s/shapes.txt", dir);
    const char *shapes = slurp(p);
    cr_expect(strstr(r.out, shapes), "%s: output lacks '%s': %s", name, shapes, r.out);
    cr_expect(strstr(r.out, "# layout: half-split") && strstr(r.out, "interleaved"), "%s: %s", name, r.out);
    if (strstr(want, "longrope")) {
        cr_expect(file_exists(tpath("m.long_factors.npy")) && file_exists(tpath("m.short_factors.npy")));
        npy_array a = {0};
        char err[256];
        cr_assert_eq(npy_load(tpath("m.long_factors.npy"), &a, err, sizeof err), 0, "%s", err);
        cr_expect(a.dtype == NPY_F64 && a.ndim == 1 && a.shape[0] == 48, "long factors: %s [%lld]",
                  npy_dtype_descr(a.dtype), (long long)a.shape[0]);
        npy_free(&a);
    }
    cli_result_free(&r);
    /* (b) ropeqk scores with those flags matches the NumPy fp64 scores */
    char out[720], flags_buf[4096], extra[600];
    snprintf(out, sizeof out, "%s/s.npy", tmp);
    snprintf(flags_buf, sizeof flags_buf, "%s", first);
    snprintf(p, sizeof p, "%s/args.txt", dir);
    snprintf(extra, sizeof extra, "%s", slurp(p));
    char *fl[64];
    int nf = split(flags_buf, fl, 40);
    nf += split(extra, fl + nf, 63 - nf);
    n = 0;
    const char *sa[96];
    sa[n++] = "scores";
    sa[n++] = "--q";
    sa[n++] = "q.npy";
    sa[n++] = "--k";
    sa[n++] = "k.npy";
    sa[n++] = "--out";
    sa[n++] = out;
    for (int i = 0; i < nf; i++)
        sa[n++] = fl[i];
    if (!device) {
        sa[n++] = "--device";
        sa[n++] = "ref";
    }
    sa[n] = NULL;
    cr_assert(cli_run(&r, dir, NULL, 300, sa), "cannot run " ROPEQK_EXE);
    cr_assert_eq(r.status, 0, "%s: scores exit %d: %s", name, r.status, r.err);
    cli_result_free(&r);
    double err = 0.0;
    int64_t mism = 0;
    char msg[512] = "";
    cr_assert(compare_case(dir, fl, out, &err, &mism, msg, sizeof msg), "%s: %s", name, msg);
    cr_expect_eq(mism, 0, "%s: %lld mask mismatches", name, (long long)mism);
    cr_expect(err <= 1e-5, "%s: max error %.3g > 1e-5 (%s)", name, err, device ? "device" : "ref");
}

#define CASE(name)                                                                                            \
    Test(config_ref, name, .init = setup, .fini = teardown, .timeout = 300) { run_case(#name, false); }      \
    Test(config_device, name, .init = setup, .fini = teardown, .timeout = 300) { run_case(#name, true); }

CASE(llama31_128k)
CASE(qwen25_yarn_128k)
CASE(phi35_long)
CASE(phi35_short)
CASE(longchat_linear_32k)

TestSuite(config, .init = setup, .fini = teardown, .timeout = 120);

/* Writes a config to tmp/name and runs `ropeqk config` on it (plus extra args). */
static cli_result config_text(const char *name, const char *json, const char *extra1, const char *extra2)
{
    const char *path = tpath(name);
    cr_assert(write_bytes(path, json, strlen(json)));
    return run(ARGS("config", path, "--out-prefix", tpath("x"), extra1 ? extra1 : "--seq-len",
                    extra2 ? extra2 : "7"));
}

static void expect_config(const char *json, const char *line_part, const char *note)
{
    cli_result r = config_text("c.json", json, NULL, NULL);
    cr_expect_eq(r.status, 0, "exit %d: %s\n%s", r.status, r.err, json);
    const char *nl = strchr(r.out, '\n');
    cr_assert(nl, "%s", r.out);
    char first[2048];
    snprintf(first, sizeof first, "%.*s", (int)(nl - r.out), r.out);
    cr_expect(strstr(first, line_part), "flags '%s' lack '%s' (%s)", first, line_part, json);
    if (note)
        cr_expect(strstr(r.out, note), "output lacks '%s': %s", note, r.out);
    cli_result_free(&r);
}

static void expect_error(const char *json, int status, const char *n1, const char *n2)
{
    cli_result r = config_text("bad.json", json, NULL, NULL);
    cr_expect_eq(r.status, status, "exit %d, want %d: %s\n%s", r.status, status, r.err, json);
    cr_expect(strstr(r.err, "bad.json"), "message does not name the file: %s", r.err);
    cr_expect(strstr(r.err, n1), "message lacks '%s': %s", n1, r.err);
    if (n2)
        cr_expect(strstr(r.err, n2), "message lacks '%s': %s", n2, r.err);
    cr_expect_str_eq(r.out, "", "output on error: %s", r.out);
    cli_result_free(&r);
}

#define HEADS "\"hidden_size\": 256, \"num_attention_heads\": 4, "

Test(config, key_rules)
{
    /* no rope_scaling, no rope_theta: default RoPE, base 10000, D = hidden_size / heads */
    expect_config("{" HEADS "\"max_position_embeddings\": 2048}", "--layout half-split --base 10000 --rotary-dim 64",
                  "default 10000");
    /* "default" type, null rope_scaling, null head_dim */
    expect_config("{" HEADS "\"head_dim\": null, \"rope_scaling\": {\"rope_type\": \"default\"}}", "--rotary-dim 64",
                  "rope type: default");
    expect_config("{" HEADS "\"rope_scaling\": null, \"rope_theta\": 1e6}", "--base 1000000 --rotary-dim 64", NULL);
    /* explicit head_dim, partial rotary, GQA */
    expect_config("{" HEADS "\"head_dim\": 80, \"num_key_value_heads\": 2, \"partial_rotary_factor\": 0.4}",
                  "--rotary-dim 32", "Hq 4, Hkv 2, D 80");
    /* rope_type wins over type; dynamic with the length from --seq-len */
    expect_config("{" HEADS "\"max_position_embeddings\": 4096, \"rope_scaling\": {\"rope_type\": \"dynamic\", "
                  "\"type\": \"linear\", \"factor\": 2.0}}",
                  "--scaling dynamic --factor 2 --original-max-pos 4096 --seq-len 7", NULL);
    /* legacy "su" = longrope; top-level original_max_position_embeddings; explicit factor kept */
    expect_config("{" HEADS "\"head_dim\": 8, \"max_position_embeddings\": 8192, \"original_max_position_embeddings\": "
                  "1024, \"rope_scaling\": {\"type\": \"su\", \"factor\": 3.5, \"long_factor\": [1, 2, 3, 4], "
                  "\"short_factor\": [1, 1, 1, 1.5]}}",
                  "--scaling longrope --factor 3.5 --original-max-pos 1024 --seq-len 7", "legacy name of longrope");
    cr_expect(file_exists(tpath("x.long_factors.npy")) && file_exists(tpath("x.short_factors.npy")));
    /* yarn: L0 defaults to max_position_embeddings; betas; DeepSeek mscale = mscale_all_dim -> factor 1 */
    expect_config("{" HEADS "\"max_position_embeddings\": 4096, \"rope_scaling\": {\"type\": \"yarn\", \"factor\": "
                  "40, \"beta_fast\": 32, \"beta_slow\": 1, \"mscale\": 1.0, \"mscale_all_dim\": 1.0}}",
                  "--scaling yarn --factor 40 --original-max-pos 4096 --beta-fast 32 --beta-slow 1 "
                  "--attention-factor 1",
                  "#38224");
    /* multimodal: the language model in text_config; v5 rope_parameters */
    expect_config("{\"model_type\": \"x\", \"text_config\": {" HEADS "\"rope_parameters\": {\"rope_type\": "
                  "\"linear\", \"factor\": 4, \"rope_theta\": 50000}}}",
                  "--base 50000 --rotary-dim 64 --scaling linear --factor 4", "text_config");
    /* GPT-J: rotate_every_two (interleaved), rotary_dim */
    expect_config("{\"model_type\": \"gptj\", \"n_embd\": 256, \"n_head\": 4, \"n_positions\": 2048, "
                  "\"rotary_dim\": 16}",
                  "--layout interleaved --base 10000 --rotary-dim 16", "rotate_every_two");
    /* --seq-len where the length does not matter: a note */
    expect_config("{" HEADS "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2}}", "--factor 2",
                  "--seq-len 7 ignored");
    expect_config("{" HEADS "\"sliding_window\": 4096}", "--rotary-dim 64", "--window 4096");
}

/* The model-family variants (docs/conventions.md section 11) of real configs: the whole flag line,
 * and the notes a user needs for what the line cannot say (MLA's V, sinks from the weights). */
static void expect_file(const char *file, const char *want, const char *note1, const char *note2)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", CFG, file);
    cli_result r = run(ARGS("config", path));
    cr_expect_eq(r.status, 0, "%s: exit %d: %s", file, r.status, r.err);
    const char *nl = strchr(r.out, '\n');
    cr_assert(nl, "%s: %s", file, r.out);
    char first[2048];
    snprintf(first, sizeof first, "%.*s", (int)(nl - r.out), r.out);
    cr_expect_str_eq(first, want, "%s:\n got  %s\n want %s", file, first, want);
    cr_expect(strstr(r.out, note1), "%s: output lacks '%s': %s", file, note1, r.out);
    if (note2)
        cr_expect(strstr(r.out, note2), "%s: output lacks '%s': %s", file, note2, r.out);
    cli_result_free(&r);
}

Test(config, variants)
{
    /* Gemma 2 27B: 144^-1/2 = 1/12, not 1/sqrt(128) */
    expect_file("gemma-2-27b.json", "--layout half-split --base 10000 --rotary-dim 128 --softcap 50 --scale "
                                    "0.08333333333333333",
                "query_pre_attn_scalar 144", "--window 4096");
    expect_file("qwen2-vl-7b.json", "--layout half-split --base 1000000 --rotary-dim 128 --mrope-section 16,24,24",
                "rope type: mrope", "[3, S]");
    expect_file("qwen3-vl-8b.json",
                "--layout half-split --base 5000000 --rotary-dim 128 --mrope-section 24,20,20 --mrope-interleaved",
                "text_config", NULL);
    /* DeepSeek V3: D 576 = 512 + 64, MQA; scale 192^-1/2 (0.1 ln 40 + 1)^2 */
    expect_file("deepseek-v3.json", "--layout interleaved --base 10000 --rotary-dim 64 --scaling yarn --factor 40 "
                                    "--original-max-pos 4096 --beta-fast 32 --beta-slow 1 --attention-factor 1 "
                                    "--rotary-offset 512 --scale 0.1352337788608801",
                "Hq 128, Hkv 1, D 576", "--v-from-k --dv 512");
    expect_file("gpt-oss-20b.json", "--layout half-split --base 150000 --rotary-dim 64 --scaling yarn --factor 32 "
                                    "--original-max-pos 4096 --beta-fast 32 --beta-slow 1 --yarn-no-truncate",
                "--sinks FILE", "--window 128");
    /* Gemma 3: no soft-capping (null), the local layers' base */
    expect_config("{" HEADS "\"attn_logit_softcapping\": null, \"query_pre_attn_scalar\": 64, "
                  "\"rope_local_base_freq\": 10000, \"rope_theta\": 1e6}",
                  "--base 1000000 --rotary-dim 64 --scale 0.125", "--base 10000 without --scaling");
    /* MLA without rope_interleave false: half-split */
    expect_config("{" HEADS "\"kv_lora_rank\": 32, \"qk_rope_head_dim\": 16, \"qk_nope_head_dim\": 16, "
                  "\"rope_interleave\": false}",
                  "--layout half-split --base 10000 --rotary-dim 16 --rotary-offset 32 --scale 0.17677669529663687",
                  "D 48");
}

Test(config, variant_errors)
{
    expect_error("{" HEADS "\"rope_scaling\": {\"rope_type\": \"mrope\", \"mrope_section\": [8, 8, 8]}}", 1,
                 "rope_scaling.mrope_section", "not R/2 = 32");
    expect_error("{" HEADS "\"rope_scaling\": {\"rope_type\": \"default\", \"mrope_section\": [8, -1, 25]}}", 1,
                 "rope_scaling.mrope_section", "entry 1");
    expect_error("{" HEADS "\"rope_scaling\": {\"rope_type\": \"default\", \"mrope_interleaved\": true}}", 1,
                 "mrope_interleaved", "mrope_section");
    expect_error("{" HEADS "\"kv_lora_rank\": 32}", 1, "qk_rope_head_dim", NULL);
    expect_error("{" HEADS "\"kv_lora_rank\": 32, \"qk_rope_head_dim\": 7, \"qk_nope_head_dim\": 16}", 1,
                 "qk_rope_head_dim 7", NULL);
    expect_error("{" HEADS "\"kv_lora_rank\": 32, \"qk_rope_head_dim\": 16}", 1, "qk_nope_head_dim", NULL);
    expect_error("{" HEADS "\"attn_logit_softcapping\": -5}", 1, "attn_logit_softcapping", NULL);
    cr_expect_eq(dir_entries(tmp), 1, "files left besides bad.json");
}

Test(config, errors)
{
    expect_error("{\"hidden_size\": 256, \"max_position_embeddings\": 2048", 1, "not valid JSON", "line 1");
    expect_error("[1, 2]", 1, "object", NULL);
    expect_error("{\"hidden_size\": 256}", 1, "num_attention_heads", NULL);
    expect_error("{\"num_attention_heads\": 4}", 1, "hidden_size", NULL);
    expect_error("{" HEADS "\"rope_theta\": \"big\"}", 1, "rope_theta", "string");
    expect_error("{\"hidden_size\": 256, \"num_attention_heads\": 4.5}", 1, "num_attention_heads", NULL);
    expect_error("{" HEADS "\"num_key_value_heads\": 3}", 1, "num_key_value_heads", NULL);
    expect_error("{" HEADS "\"rope_scaling\": \"yarn\"}", 1, "rope_scaling", "string");
    expect_error("{" HEADS "\"rope_scaling\": {\"factor\": 2}}", 1, "rope_type", NULL);
    expect_error("{" HEADS "\"rope_scaling\": {\"type\": \"ntk-by-parts\", \"factor\": 2}}", 1, "ntk-by-parts", NULL);
    expect_error("{" HEADS "\"rope_scaling\": {\"rope_type\": \"mrope\", \"mrope_section\": [1]}}", 1, "mrope_section", NULL);
    expect_error("{" HEADS "\"rope_scaling\": {\"type\": \"linear\"}}", 1, "rope_scaling.factor", NULL);
    expect_error("{" HEADS "\"rope_scaling\": {\"type\": \"linear\", \"factor\": -2}}", 1, "rope_scaling.factor", NULL);
    expect_error("{" HEADS "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4}}", 1, "max_position_embeddings",
                 NULL);
    expect_error("{" HEADS "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, "
                 "\"original_max_position_embeddings\": 8192}}",
                 1, "rope_scaling.high_freq_factor", NULL);
    expect_error("{" HEADS "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, "
                 "\"high_freq_factor\": 4}}",
                 1, "original_max_position_embeddings", NULL);
    expect_error("{\"hidden_size\": 32, \"num_attention_heads\": 4, \"original_max_position_embeddings\": 64, "
                 "\"rope_scaling\": {\"type\": \"longrope\", \"long_factor\": [1, 2, 3], \"short_factor\": [1, 1]}}",
                 1, "rope_scaling.long_factor", "has 3 entries");
    expect_error("{\"hidden_size\": 32, \"num_attention_heads\": 4, \"original_max_position_embeddings\": 64, "
                 "\"rope_scaling\": {\"type\": \"longrope\", \"long_factor\": [1, 2, 3, 4], "
                 "\"short_factor\": [1, \"a\", 1, 1]}}",
                 1, "rope_scaling.short_factor", NULL);
    expect_error("{" HEADS "\"partial_rotary_factor\": 0.01}", 1, "rotary dim", NULL);
    cr_expect_eq(dir_entries(tmp), 1, "files left besides bad.json");
    /* a missing file; usage errors */
    cli_result r = run(ARGS("config", tpath("missing.json")));
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "missing.json"), "%s", r.err);
    cli_result_free(&r);
    r = run(ARGS("config"));
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "config.json"), "%s", r.err);
    cli_result_free(&r);
    r = run(ARGS("config", CFG "/llama-3.1-8b.json", CFG "/qwen2.5-7b-yarn.json"));
    cr_expect_eq(r.status, 2, "%s", r.err);
    cli_result_free(&r);
    r = run(ARGS("config", CFG "/llama-3.1-8b.json", "--seq-len", "0"));
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "--seq-len"), "%s", r.err);
    cli_result_free(&r);
    r = run(ARGS("config", "--bogus", CFG "/llama-3.1-8b.json"));
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "--bogus"), "%s", r.err);
    cli_result_free(&r);
    /* the factor files cannot be written: a runtime error naming the path */
    r = run(ARGS("config", CFG "/phi-3.5-mini-instruct.json", "--out-prefix", tpath("no/such/dir/p")));
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "no/such/dir/p.long_factors.npy"), "%s", r.err);
    cr_expect_str_eq(r.out, "");
    cli_result_free(&r);
}

Test(config, default_prefix_and_help)
{
    /* without --out-prefix the lists go next to the config: DIR/config.long_factors.npy */
    const char *src = CFG "/phi-3.5-mini-instruct.json";
    FILE *f = fopen(src, "rb");
    cr_assert(f);
    static char buf[16384];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cr_assert(write_bytes(tpath("config.json"), buf, n));
    cli_result r = run(ARGS("config", tpath("config.json")));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, tpath("config.long_factors.npy")) && file_exists(tpath("config.short_factors.npy")),
              "%s", r.out);
    cli_result_free(&r);
    r = run(ARGS("config", "--help"));
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "usage: ropeqk config") && strstr(r.out, "--out-prefix") && strstr(r.out, "--seq-len"),
              "%s", r.out);
    cli_result_free(&r);
}
