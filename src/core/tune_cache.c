/* The per-user cache of tuned kernel configurations (written by ropeqk_tune, read by every context
 * at creation). One small text file per device:
 *   $XDG_CACHE_HOME/ropeqk/<fnv64(platform, device)>.tune   (else ~/.cache/ropeqk/)
 *     ropeqk-tune 4
 *     library 0.1.0
 *     platform <platform name>
 *     device <device name>
 *     driver <driver version>
 *     profile cpu|gpu
 *     tq 16 ... (one knob a line, every knob of rq_tuning; tile 0 = the tiled kernel off)
 * Format 4 added chunk_rows and dense_rows (the OpenCL crossovers); a format 3 file is still read,
 * and those two keep the values they had before the file (the profile's defaults or a shipped
 * entry). Formats 1 and 2 lack kernel knobs: stale. vk_cm_rows and vk_cm_keys (the Vulkan
 * tensor-core tile) came later in format 4 and are optional in any file (absent: kept as before).
 * A file that does not parse is corrupt; one whose platform/device lines differ from the device's
 * is foreign (a hash collision or a copied file); one from another library or driver version is
 * stale. Each is ignored with a note (ropeqk_ctx_config_source), never an error: the library then
 * uses its shipped entries or its heuristic. Files are written through a temporary name and a
 * rename, so a reader never sees half a file. No heap allocation: a context's creation stays free
 * of new failure points. */
#include "tuning.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RQ_TUNE_MAGIC "ropeqk-tune 4"
#define RQ_TUNE_MAGIC_PREV "ropeqk-tune 3" /* before chunk_rows and dense_rows: read, those two left as they were */
#define RQ_TUNE_MAGIC_OLD "ropeqk-tune 1" /* before the tiled kernel's and the Vulkan knobs */
#define RQ_TUNE_MAGIC_OLD2 "ropeqk-tune 2" /* before the GPU attention kernel's knobs */

static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return (h ^ 0xff) * 0x100000001b3ull; /* a separator, so ("ab","c") != ("a","bc") */
}

int rq_tune_cache_dir(char *buf, size_t len)
{
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (x && x[0] == '/')
        n = snprintf(buf, len, "%s/ropeqk", x);
    else if (home && *home)
        n = snprintf(buf, len, "%s/.cache/ropeqk", home);
    else
        return -1;
    return n > 0 && (size_t)n < len ? 0 : -1;
}

int rq_tune_cache_path(const rq_devinfo *dev, char *buf, size_t len)
{
    char dir[3072];
    if (rq_tune_cache_dir(dir, sizeof dir) != 0)
        return -1;
    uint64_t h = fnv1a(fnv1a(0xcbf29ce484222325ull, dev->platform), dev->name);
    int n = snprintf(buf, len, "%s/%016llx.tune", dir, (unsigned long long)h);
    return n > 0 && (size_t)n < len ? 0 : -1;
}

/* The knobs of a file, in file order; offsets into rq_tuning. */
static const struct {
    const char *key;
    size_t off;
    int lo, hi;
} knobs[] = {
    {"tq", offsetof(rq_tuning, tq), 1, 32},        {"wg", offsetof(rq_tuning, wg), 1, 1024},
    {"vk", offsetof(rq_tuning, vk), 1, 16},        {"dkb", offsetof(rq_tuning, dkb), 2, 1024},
    {"dwg", offsetof(rq_tuning, dwg), 1, 256},     {"decode", offsetof(rq_tuning, decode), 0, 1},
    {"rot_uwg", offsetof(rq_tuning, rot_uwg), 1, 256}, {"atq", offsetof(rq_tuning, atq), 1, 16},
    {"avk", offsetof(rq_tuning, avk), 1, 16},      {"awg", offsetof(rq_tuning, awg), 1, 1024},
    {"nv", offsetof(rq_tuning, nv), 1, 2},
    {"tile", offsetof(rq_tuning, tile), 0, 128},   {"rb", offsetof(rq_tuning, rb), 4, 8},
    {"tk", offsetof(rq_tuning, tk), 4, 64},
    {"vk_block", offsetof(rq_tuning, vk_block), 2, 8}, {"vk_tk", offsetof(rq_tuning, vk_tk), 8, 32},
    {"vk_rows", offsetof(rq_tuning, vk_rows), 32, 128},
    {"attn_tile", offsetof(rq_tuning, ga_bm), 0, 128}, {"attn_keys", offsetof(rq_tuning, ga_bn), 16, 128},
    {"attn_tk", offsetof(rq_tuning, ga_tk), 4, 64},   {"attn_rb", offsetof(rq_tuning, ga_rb), 1, 8},
    {"attn_dv", offsetof(rq_tuning, ga_dv), 16, 256},
    /* format 4 on (the last NEW4 entries: not required in a format 3 file) */
    {"chunk_rows", offsetof(rq_tuning, chunk_rows), 1, RQ_CHUNK_ROWS_MAX},
    {"dense_rows", offsetof(rq_tuning, dense_rows), 0, RQ_DENSE_ROWS_MAX},
    /* optional in every file (the last NOPT entries) */
    {"vk_cm_rows", offsetof(rq_tuning, vk_cm_rows), 32, 128}, {"vk_cm_keys", offsetof(rq_tuning, vk_cm_keys), 32, 128},
};
#define NKNOBS (sizeof knobs / sizeof knobs[0]) /* all required but the optional ones (format 1 files lack some: stale) */
#define NOPT 2
#define NEW4 2 /* the entries before the optional ones that format 3 files lack */

/* Reads "key value" (value = rest of the line) from line; 0 if it has that key. */
static const char *value_of(const char *line, const char *key)
{
    size_t n = strlen(key);
    return strncmp(line, key, n) == 0 && line[n] == ' ' ? line + n + 1 : NULL;
}

rq_cache_result rq_tune_cache_load(const rq_devinfo *dev, ropeqk_profile prof, rq_tuning *t, char *note,
                                   size_t note_len)
{
    char path[3200];
    note[0] = '\0';
    if (rq_tune_cache_path(dev, path, sizeof path) != 0)
        return RQ_CACHE_NONE;
    FILE *f = fopen(path, "r");
    if (!f)
        return RQ_CACHE_NONE;
    char line[512];
    int lineno = 0;
    unsigned long long seen = 0;
    bool v3 = false;
    rq_tuning c = *t;
    rq_cache_result res = RQ_CACHE_OK;
    const char *why = "";
    char detail[300] = "";
    while (res == RQ_CACHE_OK && fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        if (n == 0 || line[n - 1] != '\n') {
            res = RQ_CACHE_CORRUPT;
            why = "a line is unterminated or too long";
            break;
        }
        line[n - 1] = '\0';
        const char *v;
        lineno++;
        if (lineno == 1) {
            if (!strcmp(line, RQ_TUNE_MAGIC_OLD) || !strcmp(line, RQ_TUNE_MAGIC_OLD2)) { /* fewer knobs */
                res = RQ_CACHE_STALE;
                snprintf(detail, sizeof detail, "an older file format, '%s'", line);
            } else if (!strcmp(line, RQ_TUNE_MAGIC_PREV)) {
                v3 = true;
            } else if (strcmp(line, RQ_TUNE_MAGIC) != 0) {
                res = RQ_CACHE_CORRUPT;
                why = "not a ropeqk tuning file";
            }
        } else if ((v = value_of(line, "library"))) {
            if (strcmp(v, ROPEQK_VERSION_STRING) != 0) {
                res = RQ_CACHE_STALE;
                snprintf(detail, sizeof detail, "written by library %.40s, this is %s", v, ROPEQK_VERSION_STRING);
            }
            seen |= 1;
        } else if ((v = value_of(line, "platform"))) {
            if (strcmp(v, dev->platform) != 0)
                res = RQ_CACHE_FOREIGN;
            seen |= 2;
        } else if ((v = value_of(line, "device"))) {
            if (strcmp(v, dev->name) != 0)
                res = RQ_CACHE_FOREIGN;
            seen |= 4;
        } else if ((v = value_of(line, "driver"))) {
            if (strcmp(v, dev->driver) != 0) {
                res = RQ_CACHE_STALE;
                snprintf(detail, sizeof detail, "written for driver %.100s, this is %.100s", v, dev->driver);
            }
            seen |= 8;
        } else if ((v = value_of(line, "profile"))) {
            ropeqk_profile p = !strcmp(v, "cpu") ? ROPEQK_PROFILE_CPU : !strcmp(v, "gpu") ? ROPEQK_PROFILE_GPU
                                                                                          : ROPEQK_PROFILE_AUTO;
            if (p == ROPEQK_PROFILE_AUTO) {
                res = RQ_CACHE_CORRUPT;
                why = "bad profile line";
            } else if (p != prof) {
                res = RQ_CACHE_OTHER_PROFILE;
            }
            seen |= 16;
        } else {
            size_t k = 0;
            while (k < NKNOBS && !(v = value_of(line, knobs[k].key)))
                k++;
            char *end = NULL;
            long x = k < NKNOBS ? strtol(v, &end, 10) : 0;
            if (k == NKNOBS || end == v || *end || x < knobs[k].lo || x > knobs[k].hi) {
                res = RQ_CACHE_CORRUPT;
                why = "an unknown key or a value out of range";
            } else {
                *(int *)((char *)&c + knobs[k].off) = (int)x;
                seen |= 32ull << k;
            }
        }
    }
    bool read_error = ferror(f) != 0;
    fclose(f);
    unsigned long long need = ((1ull << (5 + NKNOBS - NOPT)) - 1);
    if (v3) /* format 3: the newer knobs may be absent */
        need &= ~(((1ull << NEW4) - 1) << (5 + NKNOBS - NOPT - NEW4));
    if (res == RQ_CACHE_OK && (read_error || (seen & need) != need)) {
        res = RQ_CACHE_CORRUPT;
        why = read_error ? "read error" : "a required line is missing";
    }
    /* vector widths and even key blocks, as the API requires */
    if (res == RQ_CACHE_OK && ((c.vk & (c.vk - 1)) || c.vk == 2 || (c.avk & (c.avk - 1)) || c.avk == 2 || c.dkb % 2 ||
                               (c.tile && (c.tile & (c.tile - 1) || c.tile < 16)) || (c.rb & (c.rb - 1)) || c.tk % 4 ||
                               (c.vk_block & (c.vk_block - 1)) || (c.vk_tk & (c.vk_tk - 1)) ||
                               (c.vk_rows & (c.vk_rows - 1)) || (c.vk_cm_rows & (c.vk_cm_rows - 1)) ||
                               (c.vk_cm_keys & (c.vk_cm_keys - 1)) ||
                               (c.ga_bm && (c.ga_bm & (c.ga_bm - 1) || c.ga_bm < 16)) || (c.ga_bn & (c.ga_bn - 1)) ||
                               c.ga_tk % 4 || c.ga_bn % c.ga_tk || (c.ga_rb & (c.ga_rb - 1)) || c.ga_bm % c.ga_rb ||
                               c.ga_dv % c.ga_bn)) {
        res = RQ_CACHE_CORRUPT;
        why = "a vector width or key block not allowed";
    }
    switch (res) {
    case RQ_CACHE_OK:
        c.profile = t->profile;
        c.pocl_ext = t->pocl_ext;
        *t = c;
        snprintf(note, note_len, "%s", path);
        break;
    case RQ_CACHE_CORRUPT: snprintf(note, note_len, "ignored corrupt %s (%s)", path, why); break;
    case RQ_CACHE_FOREIGN: snprintf(note, note_len, "ignored %s: written for another device", path); break;
    case RQ_CACHE_STALE: snprintf(note, note_len, "ignored stale %s (%s)", path, detail); break;
    case RQ_CACHE_OTHER_PROFILE: snprintf(note, note_len, "ignored %s: tuned for the other profile", path); break;
    case RQ_CACHE_NONE: break;
    }
    return res;
}

ropeqk_status rq_tune_cache_store(const rq_devinfo *dev, const rq_tuning *t, char *path, size_t path_len)
{
    char dir[3072], tmp[3300];
    if (rq_tune_cache_dir(dir, sizeof dir) != 0 || rq_tune_cache_path(dev, path, path_len) != 0) {
        rq_set_error("tuning cache: neither XDG_CACHE_HOME (absolute) nor HOME is set");
        return ROPEQK_ERR_BAD_CONFIG;
    }
    /* mkdir -p of .../ropeqk (its parent, ~/.cache, may not exist yet either) */
    for (char *s = dir + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
                rq_set_error("tuning cache: cannot create %s: %s", dir, strerror(errno));
                return ROPEQK_ERR_BAD_CONFIG;
            }
            *s = '/';
        }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        rq_set_error("tuning cache: cannot create %s: %s", dir, strerror(errno));
        return ROPEQK_ERR_BAD_CONFIG;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        rq_set_error("tuning cache: cannot write %s: %s", tmp, strerror(errno));
        return ROPEQK_ERR_BAD_CONFIG;
    }
    fprintf(f, "%s\nlibrary %s\nplatform %s\ndevice %s\ndriver %s\nprofile %s\n", RQ_TUNE_MAGIC,
            ROPEQK_VERSION_STRING, dev->platform, dev->name, dev->driver, rq_profile_name(t->profile));
    for (size_t k = 0; k < NKNOBS; k++)
        fprintf(f, "%s %d\n", knobs[k].key, *(const int *)((const char *)t + knobs[k].off));
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        rq_set_error("tuning cache: cannot write %s: %s", path, strerror(errno));
        remove(tmp);
        return ROPEQK_ERR_BAD_CONFIG;
    }
    return ROPEQK_SUCCESS;
}
