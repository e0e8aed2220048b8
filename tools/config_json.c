/* Typed, strict access to a Hugging Face config.json (cJSON): see config_json.h. */
#include "config_json.h"
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define CJ_MAX_BYTES (64u << 20) /* config files are a few KB; refuse anything absurd */

int cj_fail(const cj_file *f, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_err("config: %s: %s", f->path, msg);
    return CLI_RUNTIME;
}

static int open_parse(cj_file *f, const char *path)
{
    memset(f, 0, sizeof f[0]);
    f->path = path;
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        cli_err("config: %s: cannot open: %s", path, strerror(errno));
        return CLI_RUNTIME;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (len + 1 >= cap) {
            char *nb = cap < CJ_MAX_BYTES ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t n = fread(buf + len, 1, cap - len - 1, fp);
        len += n;
        if (n == 0)
            break;
    }
    bool rerr = ferror(fp) != 0;
    fclose(fp);
    if (!buf || rerr) {
        free(buf);
        cli_err("config: %s: %s", path, rerr ? "read error" : "too large or out of memory");
        return CLI_RUNTIME;
    }
    buf[len] = '\0';
    f->text = buf;
    if (strlen(buf) != len)
        return cj_fail(f, "not a JSON text (contains a NUL byte)");
    f->root = cJSON_ParseWithLength(buf, len);
    if (!f->root) {
        const char *at = cJSON_GetErrorPtr();
        long line = 1;
        if (at && at >= buf && at <= buf + len)
            for (const char *c = buf; c < at; c++)
                line += *c == '\n';
        return cj_fail(f, "not valid JSON (error near line %ld)", line);
    }
    if (!cJSON_IsObject(f->root))
        return cj_fail(f, "the top level is not a JSON object");
    return CLI_OK;
}

int cj_open(cj_file *f, const char *path)
{
    int rc = open_parse(f, path);
    if (rc != CLI_OK)
        cj_close(f); /* nothing stays allocated on error */
    return rc;
}

void cj_close(cj_file *f)
{
    cJSON_Delete(f->root);
    free(f->text);
    f->root = NULL;
    f->text = NULL;
}

static const char *kind(const cJSON *j)
{
    return cJSON_IsString(j) ? "a string" : cJSON_IsBool(j) ? "a boolean" : cJSON_IsArray(j) ? "an array"
         : cJSON_IsObject(j) ? "an object" : cJSON_IsNumber(j) ? "a number" : "null";
}

/* "rope_scaling.factor" or "factor" */
static void key_name(const cj_obj *o, const char *key, char *buf, size_t len)
{
    if (o->name && *o->name)
        snprintf(buf, len, "%s.%s", o->name, key);
    else
        snprintf(buf, len, "%s", key);
}

/* The item at key, or NULL when absent or null (then a required key fails). */
static int lookup(const cj_file *f, const cj_obj *o, const char *key, bool required, const char *why,
                  const cJSON **out)
{
    *out = NULL;
    const cJSON *j = o->item ? cJSON_GetObjectItemCaseSensitive(o->item, key) : NULL;
    if (j && !cJSON_IsNull(j)) {
        *out = j;
        return CLI_OK;
    }
    if (!required)
        return CLI_OK;
    char k[160];
    key_name(o, key, k, sizeof k);
    if (why)
        return cj_fail(f, "missing key '%s' (%s)", k, why);
    return cj_fail(f, "missing key '%s'", k);
}

int cj_model_objects(const cj_file *f, cj_obj *lm, cj_obj *rs)
{
    memset(lm, 0, sizeof *lm);
    memset(rs, 0, sizeof *rs);
    lm->item = f->root;
    lm->name = "";
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(f->root, "text_config");
    if (!cJSON_GetObjectItemCaseSensitive(f->root, "num_attention_heads") && cJSON_IsObject(tc)) {
        lm->item = tc;
        lm->name = "text_config";
        lm->is_text_config = true;
    }
    static const char *const names[2][2] = {{"rope_scaling", "text_config.rope_scaling"},
                                            {"rope_parameters", "text_config.rope_parameters"}};
    for (int v = 0; v < 2; v++) {
        const char *key = v ? "rope_parameters" : "rope_scaling";
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(lm->item, key);
        if (!j || cJSON_IsNull(j))
            continue;
        if (!cJSON_IsObject(j))
            return cj_fail(f, "key '%s' must be an object or null, got %s", names[v][lm->is_text_config], kind(j));
        rs->item = j;
        rs->name = names[v][lm->is_text_config];
        rs->is_params = v == 1;
        return CLI_OK;
    }
    rs->name = "rope_scaling";
    return CLI_OK;
}

int cj_num(const cj_file *f, const cj_obj *o, const char *key, bool required, double *out, bool *present)
{
    const cJSON *j;
    *present = false;
    int rc = lookup(f, o, key, required, NULL, &j);
    if (rc != CLI_OK || !j)
        return rc;
    char k[160];
    key_name(o, key, k, sizeof k);
    if (!cJSON_IsNumber(j))
        return cj_fail(f, "key '%s' must be a number, got %s", k, kind(j));
    if (!isfinite(j->valuedouble))
        return cj_fail(f, "key '%s' is not a finite number", k);
    *out = j->valuedouble;
    *present = true;
    return CLI_OK;
}

int cj_num_pos(const cj_file *f, const cj_obj *o, const char *key, bool required, double *out, bool *present)
{
    double v = 0.0;
    int rc = cj_num(f, o, key, required, &v, present);
    if (rc != CLI_OK || !*present)
        return rc;
    if (!(v > 0.0)) {
        char k[160];
        key_name(o, key, k, sizeof k);
        return cj_fail(f, "key '%s' must be > 0, got %g", k, v);
    }
    *out = v;
    return CLI_OK;
}

int cj_int(const cj_file *f, const cj_obj *o, const char *key, bool required, int64_t lo, int64_t hi, int64_t *out,
           bool *present, const char *why)
{
    const cJSON *j;
    *present = false;
    int rc = lookup(f, o, key, required, why, &j);
    if (rc != CLI_OK || !j)
        return rc;
    char k[160];
    key_name(o, key, k, sizeof k);
    if (!cJSON_IsNumber(j))
        return cj_fail(f, "key '%s' must be an integer, got %s", k, kind(j));
    double v = j->valuedouble;
    if (!(v == floor(v)) || v < (double)lo || v > (double)hi)
        return cj_fail(f, "key '%s' must be an integer in [%" PRId64 ", %" PRId64 "], got %g", k, lo, hi, v);
    *out = (int64_t)v;
    *present = true;
    return CLI_OK;
}

int cj_str(const cj_file *f, const cj_obj *o, const char *key, bool required, const char **out)
{
    const cJSON *j;
    int rc = lookup(f, o, key, required, NULL, &j);
    if (rc != CLI_OK || !j)
        return rc;
    if (!cJSON_IsString(j) || !j->valuestring) {
        char k[160];
        key_name(o, key, k, sizeof k);
        return cj_fail(f, "key '%s' must be a string, got %s", k, kind(j));
    }
    *out = j->valuestring;
    return CLI_OK;
}

int cj_bool(const cj_file *f, const cj_obj *o, const char *key, bool *out)
{
    const cJSON *j;
    int rc = lookup(f, o, key, false, NULL, &j);
    if (rc != CLI_OK || !j)
        return rc;
    if (!cJSON_IsBool(j)) {
        char k[160];
        key_name(o, key, k, sizeof k);
        return cj_fail(f, "key '%s' must be true or false, got %s", k, kind(j));
    }
    *out = cJSON_IsTrue(j);
    return CLI_OK;
}

int cj_list(const cj_file *f, const cj_obj *o, const char *key, int64_t want, int64_t R, double **out)
{
    const cJSON *j;
    *out = NULL;
    int rc = lookup(f, o, key, true, NULL, &j);
    if (rc != CLI_OK)
        return rc;
    char k[160];
    key_name(o, key, k, sizeof k);
    if (!cJSON_IsArray(j))
        return cj_fail(f, "key '%s' must be an array of numbers, got %s", k, kind(j));
    int n = cJSON_GetArraySize(j);
    if (n != want)
        return cj_fail(f, "key '%s' has %d entries, but rotary dim %" PRId64 " needs R/2 = %" PRId64, k, n, R, want);
    double *v = malloc((size_t)(want > 0 ? want : 1) * sizeof *v);
    if (!v)
        return cj_fail(f, "out of memory");
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, j)
    {
        if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || !(e->valuedouble > 0.0)) {
            free(v);
            return cj_fail(f, "key '%s': entry %d must be a positive number, got %s", k, i,
                           cJSON_IsNumber(e) ? "a number <= 0" : kind(e));
        }
        v[i++] = e->valuedouble;
    }
    *out = v;
    return CLI_OK;
}
