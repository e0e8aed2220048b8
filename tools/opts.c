/* Table-driven option parsing with strict numbers. A subcommand describes its options in an array
 * of cli_opt (name, kind, destination, constraints, help); adding a flag is adding a row. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int cli_parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0')
        return -1;
    if (errno == ERANGE)
        return -2;
    *out = (int64_t)v;
    return 0;
}

int cli_parse_f64(const char *s, double *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0')
        return -1;
    if (isnan(v))
        return -1;
    if (errno == ERANGE || isinf(v))
        return -2; /* overflow, underflow, or an explicit infinity */
    *out = v;
    return 0;
}

static const cli_opt *find_opt(const cli_opt *opts, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
            return &opts[i];
    return NULL;
}

static void list_choices(char *buf, size_t len, const char *const *choices)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int c = 0; choices[c]; c++) {
        int w = snprintf(buf + used, len - used, "%s%s", c ? ", " : "", choices[c]);
        if (w < 0 || (size_t)w >= len - used)
            break;
        used += (size_t)w;
    }
}

/* Stores `val` into the option's destination. Returns CLI_OK or CLI_USAGE (message printed). */
static int set_value(const char *cmd, const cli_opt *o, const char *val)
{
    switch (o->kind) {
    case OPT_FLAG:
        *(int *)o->dest = 1;
        return CLI_OK;
    case OPT_STR:
        if (!*val) {
            cli_err("%s: %s: empty value", cmd, o->name);
            return CLI_USAGE;
        }
        *(const char **)o->dest = val;
        return CLI_OK;
    case OPT_CHOICE:
        for (int c = 0; o->choices[c]; c++)
            if (strcmp(o->choices[c], val) == 0) {
                *(int *)o->dest = c;
                return CLI_OK;
            }
        {
            char list[256];
            list_choices(list, sizeof list, o->choices);
            cli_err("%s: %s: '%s' is not one of: %s", cmd, o->name, val, list);
        }
        return CLI_USAGE;
    case OPT_F64: {
        double v = 0.0;
        int r = cli_parse_f64(val, &v);
        if (r == -1) {
            cli_err("%s: %s: '%s' is not a number", cmd, o->name, val);
            return CLI_USAGE;
        }
        if (r == -2) {
            cli_err("%s: %s: '%s' is out of range (must be finite and representable as a double)", cmd,
                    o->name, val);
            return CLI_USAGE;
        }
        if ((o->flags & OPT_POSITIVE) && !(v > 0.0)) {
            cli_err("%s: %s: '%s' must be > 0", cmd, o->name, val);
            return CLI_USAGE;
        }
        if ((o->flags & OPT_NONZERO) && v == 0.0) {
            cli_err("%s: %s: '%s' must be non-zero", cmd, o->name, val);
            return CLI_USAGE;
        }
        *(double *)o->dest = v;
        return CLI_OK;
    }
    case OPT_I64: {
        int64_t v = 0;
        int r = cli_parse_i64(val, &v);
        if (r == -1) {
            cli_err("%s: %s: '%s' is not an integer", cmd, o->name, val);
            return CLI_USAGE;
        }
        bool ranged = o->lo != 0 || o->hi != 0;
        if (r == -2 || (ranged && (v < o->lo || v > o->hi))) {
            if (ranged)
                cli_err("%s: %s: '%s' is out of range [%lld, %lld]", cmd, o->name, val, (long long)o->lo,
                        (long long)o->hi);
            else
                cli_err("%s: %s: '%s' is out of range", cmd, o->name, val);
            return CLI_USAGE;
        }
        if ((o->flags & OPT_POSITIVE) && v <= 0) {
            cli_err("%s: %s: '%s' must be > 0", cmd, o->name, val);
            return CLI_USAGE;
        }
        if ((o->flags & OPT_NONZERO) && v == 0) {
            cli_err("%s: %s: '%s' must be non-zero", cmd, o->name, val);
            return CLI_USAGE;
        }
        if ((o->flags & OPT_EVEN) && v % 2 != 0) {
            cli_err("%s: %s: '%s' must be even", cmd, o->name, val);
            return CLI_USAGE;
        }
        *(int64_t *)o->dest = v;
        return CLI_OK;
    }
    }
    return CLI_USAGE;
}

int cli_parse(const char *cmd, const cli_opt *opts, size_t n, int argc, char **argv, bool *help)
{
    *help = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            *help = true;
            continue;
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            cli_err("%s: unexpected argument '%s' (see ropeqk %s --help)", cmd, a, cmd);
            return CLI_USAGE;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const cli_opt *o = find_opt(opts, n, a, len);
        if (!o) {
            cli_err("%s: unknown option '%.*s' (see ropeqk %s --help)", cmd, (int)len, a, cmd);
            return CLI_USAGE;
        }
        const char *val = NULL;
        if (o->kind == OPT_FLAG) {
            if (eq) {
                cli_err("%s: %s takes no value", cmd, o->name);
                return CLI_USAGE;
            }
        } else if (eq) {
            val = eq + 1;
        } else {
            /* a following "--flag" is taken as a missing value, not as a value */
            if (i + 1 >= argc || (strncmp(argv[i + 1], "--", 2) == 0 && argv[i + 1][2] != '\0')) {
                cli_err("%s: %s needs a value%s%s", cmd, o->name, o->metavar ? " " : "",
                        o->metavar ? o->metavar : "");
                return CLI_USAGE;
            }
            val = argv[++i];
        }
        int r = set_value(cmd, o, val);
        if (r != CLI_OK)
            return r;
        if (o->seen)
            *o->seen = 1;
    }
    return CLI_OK;
}

int cli_take_positional(const char *cmd, const cli_opt *opts, size_t n, int *argc, char **argv, const char **pos)
{
    *pos = NULL;
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) == 0 && a[2] != '\0') {
            argv[out++] = argv[i];
            const char *eq = strchr(a, '=');
            const cli_opt *o = eq ? NULL : find_opt(opts, n, a, strlen(a));
            /* a value-taking option: its value stays with it (unless it looks like an option) */
            if (o && o->kind != OPT_FLAG && i + 1 < *argc && strncmp(argv[i + 1], "--", 2) != 0)
                argv[out++] = argv[++i];
            continue;
        }
        if (strcmp(a, "-h") == 0 || a[0] == '-') { /* -h, or an error cli_parse will report */
            argv[out++] = argv[i];
            continue;
        }
        if (*pos) {
            cli_err("%s: unexpected argument '%s' (one file only: '%s' given already)", cmd, a, *pos);
            return CLI_USAGE;
        }
        *pos = a;
    }
    *argc = out;
    argv[out] = NULL;
    return CLI_OK;
}

void cli_print_help(FILE *f, const char *usage, const char *about, const cli_opt *opts, size_t n)
{
    fprintf(f, "usage: %s\n", usage);
    if (about && *about)
        fprintf(f, "\n%s\n", about);
    fprintf(f, "\noptions:\n");
    for (size_t i = 0; i < n; i++) {
        char left[96];
        if (opts[i].kind == OPT_CHOICE) {
            char list[64];
            size_t used = 0;
            list[0] = '\0';
            for (int c = 0; opts[i].choices[c]; c++) {
                int w = snprintf(list + used, sizeof list - used, "%s%s", c ? "|" : "", opts[i].choices[c]);
                if (w < 0 || (size_t)w >= sizeof list - used)
                    break;
                used += (size_t)w;
            }
            snprintf(left, sizeof left, "%s %s", opts[i].name, list);
        } else if (opts[i].metavar) {
            snprintf(left, sizeof left, "%s %s", opts[i].name, opts[i].metavar);
        } else {
            snprintf(left, sizeof left, "%s", opts[i].name);
        }
        if (strlen(left) > 26)
            fprintf(f, "  %s\n  %-26s  %s\n", left, "", opts[i].help);
        else
            fprintf(f, "  %-26s  %s\n", left, opts[i].help);
    }
    fprintf(f, "  %-26s  %s\n", "-h, --help", "show this help and exit");
}
