/* The line buffer `ropeqk config` builds its output in (config_model.h), shared by config.c and
 * config_variants.c: a file of its own so that neither calls into the other both ways. */
#include "cli.h"
#include "config_model.h"

#include <stdarg.h>
#include <stdio.h>

void sb_add(strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b->buf + b->len, sizeof b->buf - b->len, fmt, ap);
    va_end(ap);
    if (w > 0)
        b->len = b->len + (size_t)w < sizeof b->buf ? b->len + (size_t)w : sizeof b->buf - 1;
}

/* " --flag value" with the value as the shortest round-tripping number */
void flag_num(strbuf *b, const char *flag, double v)
{
    char num[64];
    cli_fmt_double(num, sizeof num, v);
    sb_add(b, " %s %s", flag, num);
}
