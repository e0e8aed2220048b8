/* The per-user cache of tuned kernel configurations (written by ropeqk_tune, read by every context
 * at creation). One small text file per device:
 *   $XDG_CACHE_HOME/ropeqk/<fnv64(platform, device)>.tune   (else ~/.cache/ropeqk/)
 *     ropeqk-tune 4
 *     library 0.1.0
 *     platform <platform name>
 *     device <device name>
 *     driver <driver version>
 *     profile cpu|gpu
 *     tq 16 ... (one knob a line: every knob with RQ_KNOB_CACHED of the backends built in, in
 *               their tables' order, knob.h; tile 0 = the tiled kernel off)
 * Format 4 added chunk_rows and dense_rows (the crossovers: RQ_KNOB_CACHE_V4); a format 3 file is
 * still read, and those two keep the values they had before the file (the profile's defaults or a
 * shipped entry). Formats 1 and 2 lack kernel knobs: stale. vk_cm_rows and vk_cm_keys (the Vulkan
 * tensor-core tile) came later in format 4 and are optional in any file (RQ_KNOB_CACHE_OPT; absent:
 * kept as before). The reader takes the lines in any order. A file holds the knobs of every backend
 * the writing build has; a reader requires those of the device's own backend, range-checks every
 * knob of the backends it has, and skips a "name integer" line of a backend it lacks (so builds
 * with other backend sets share a cache directory). Any other unknown line makes the file corrupt.
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

/* The knobs of a file (RQ_KNOB_CACHED), in the order written; at most 58 (bits of `seen`). */
static size_t cached_knobs(const rq_knob **out)
{
    const rq_knob *all[RQ_KNOBS_MAX];
    size_t n = 0;
    for (size_t i = 0, na = rq_knobs_all(all); i < na && n < 58; i++)
        if (all[i]->flags & RQ_KNOB_CACHED)
            out[n++] = all[i];
    return n;
}

/* Reads "key value" (value = rest of the line) from line; 0 if it has that key. */
static const char *value_of(const char *line, const char *key)
{
    size_t n = strlen(key);
    return strncmp(line, key, n) == 0 && line[n] == ' ' ? line + n + 1 : NULL;
}

/* Whether line is "<knob-like name> <integer>": a key of a backend this build lacks (skipped). */
static bool other_knob_line(const char *line)
{
    const char *s = line;
    while ((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_')
        s++;
    if (s == line || *s != ' ')
        return false;
    char *end = NULL;
    (void)strtol(s + 1, &end, 10);
    return end != s + 1 && *end == '\0';
}

static bool knob_in(const rq_knob *k, const rq_knob *own, size_t n_own)
{
    for (size_t i = 0; i < n_own; i++)
        if (!strcmp(own[i].name, k->name))
            return true;
    return false;
}

rq_cache_result rq_tune_cache_load(const rq_devinfo *dev, const rq_knob *own, size_t n_own, ropeqk_profile prof,
                                   rq_tuning *t, char *note, size_t note_len)
{
    char path[3200];
    note[0] = '\0';
    if (rq_tune_cache_path(dev, path, sizeof path) != 0)
        return RQ_CACHE_NONE;
    FILE *f = fopen(path, "r");
    if (!f)
        return RQ_CACHE_NONE;
    const rq_knob *kn[RQ_KNOBS_MAX];
    size_t nk = cached_knobs(kn);
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
            while (k < nk && !(v = value_of(line, kn[k]->name)))
                k++;
            char *end = NULL;
            long x = k < nk ? strtol(v, &end, 10) : 0;
            if (k == nk && other_knob_line(line)) {
                continue; /* another backend's knob (a build with more backends wrote it) */
            } else if (k == nk || end == v || *end || x < kn[k]->lo || x > kn[k]->hi) {
                res = RQ_CACHE_CORRUPT;
                why = "an unknown key or a value out of range";
            } else {
                RQ_KNOB_AT(&c, kn[k]) = (int)x;
                seen |= 32ull << k;
            }
        }
    }
    bool read_error = ferror(f) != 0;
    fclose(f);
    unsigned long long need = 31;
    for (size_t k = 0; k < nk; k++) /* the device's backend's knobs; another built-in backend's may be absent */
        if (knob_in(kn[k], own, n_own) && !(kn[k]->flags & RQ_KNOB_CACHE_OPT) &&
            !(v3 && (kn[k]->flags & RQ_KNOB_CACHE_V4)))
            need |= 32ull << k;
    if (res == RQ_CACHE_OK && (read_error || (seen & need) != need)) {
        res = RQ_CACHE_CORRUPT;
        why = read_error ? "read error" : "a required line is missing";
    }
    /* vector widths, even key blocks and shapes that hold together, as the API requires */
    char why_not[400];
    for (size_t k = 0; res == RQ_CACHE_OK && k < nk; k++)
        if (kn[k]->ok && !kn[k]->ok(RQ_KNOB_AT(&c, kn[k])))
            res = RQ_CACHE_CORRUPT;
    if (res == RQ_CACHE_OK && !rq_tuning_consistent(&c, why_not, sizeof why_not))
        res = RQ_CACHE_CORRUPT;
    if (res == RQ_CACHE_CORRUPT && !why[0])
        why = "a vector width or key block not allowed";
    switch (res) {
    case RQ_CACHE_OK:
        c.profile = t->profile; /* and every knob the file does not hold (vendor switch, modes) */
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
    const rq_knob *kn[RQ_KNOBS_MAX];
    for (size_t k = 0, nk = cached_knobs(kn); k < nk; k++)
        fprintf(f, "%s %d\n", kn[k]->name, RQ_KNOB_AT(t, kn[k]));
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        rq_set_error("tuning cache: cannot write %s: %s", path, strerror(errno));
        remove(tmp);
        return ROPEQK_ERR_BAD_CONFIG;
    }
    return ROPEQK_SUCCESS;
}
