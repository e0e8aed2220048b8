/* The .npy header dict: a tiny tokenizer and recursive-descent parser for the Python literal
 * NumPy writes, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 *
 * Input is hostile (see npy.c): the region is checked for ASCII first, every token stays within
 * it, dimensions are parsed with overflow checks, and every failure leaves a one-line message. */
#include "npy_internal.h"

#include <stdarg.h>
#include <string.h>

/* Caps token echoes so a hostile header cannot flood the message. */
#define TOK_FMT(n) (int)((n) > 40 ? 40 : (n))

/* ---- header tokenizer ------------------------------------------------------------------ */

enum { T_EOF, T_LBRACE, T_RBRACE, T_LPAREN, T_RPAREN, T_LBRACK, T_RBRACK, T_COLON, T_COMMA,
       T_STR, T_INT, T_IDENT, T_ERR };

typedef struct {
    int kind;
    const char *s; /* token text; for strings, without the quotes */
    size_t n;
    size_t off; /* file offset, for messages */
} token;

typedef struct {
    const char *p;
    size_t n, pos, base;
    const npyi_ectx *e;
    token t; /* one token of lookahead */
} parser;

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Lexing errors are reported at once and leave a sticky T_ERR token. No grammar rule accepts
   T_ERR, so the parser unwinds through unexpected() without checking every next() call. */
NPY_PRINTF(2, 3)
static int lex_fail(parser *P, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    npyi_vfail(P->e, fmt, ap);
    va_end(ap);
    P->t.kind = T_ERR;
    return -1;
}

/* Returns -1 after a lexing error only so error paths can be one-liners; callers may ignore it. */
static int next(parser *P)
{
    token *t = &P->t;
    if (t->kind == T_ERR)
        return -1;
    while (P->pos < P->n && is_ws(P->p[P->pos]))
        P->pos++;
    t->off = P->base + P->pos;
    t->s = P->p + P->pos;
    t->n = 0;
    t->kind = T_EOF;
    if (P->pos == P->n)
        return 0;
    char c = P->p[P->pos];
    static const char punct[] = "{}()[]:,";
    const char *q = c ? strchr(punct, c) : NULL;
    size_t i = P->pos;
    if (q) {
        t->kind = T_LBRACE + (int)(q - punct);
        i++;
    } else if (c == '\'' || c == '"') {
        for (i++; i < P->n && P->p[i] != c && P->p[i] != '\n'; i++)
            if (P->p[i] == '\\')
                return lex_fail(P, "escape sequences are not supported in header strings (offset %zu)",
                                P->base + i);
        if (i == P->n || P->p[i] != c)
            return lex_fail(P, "unterminated string in header at offset %zu", t->off);
        t->kind = T_STR;
        t->s++;
        t->n = i - P->pos - 1;
        P->pos = i + 1;
        return 0;
    } else if (c == '-' || is_digit(c)) {
        for (i += c == '-'; i < P->n && is_digit(P->p[i]); i++)
            ;
        if (!is_digit(P->p[i - 1]))
            return lex_fail(P, "malformed number in header at offset %zu", t->off);
        t->kind = T_INT;
    } else if (is_alpha(c)) {
        while (i < P->n && (is_alpha(P->p[i]) || is_digit(P->p[i])))
            i++;
        t->kind = T_IDENT;
    } else {
        return lex_fail(P, "unexpected character '%c' in header at offset %zu", c, t->off);
    }
    t->n = i - P->pos;
    P->pos = i;
    return 0;
}

static int tok_is(const token *t, int kind, const char *s)
{
    return t->kind == kind && t->n == strlen(s) && memcmp(t->s, s, t->n) == 0;
}

/* A mismatch at end of input means the dict was cut short, which deserves a clearer
   message than "expected X". */
static int unexpected(const parser *P, const char *what)
{
    if (P->t.kind == T_ERR)
        return -1;
    if (P->t.kind == T_EOF)
        return npyi_fail(P->e, "unterminated header (no closing '}')");
    return npyi_fail(P->e, "malformed header: expected %s at offset %zu", what, P->t.off);
}

/* ---- header parser --------------------------------------------------------------------- */

static int parse_descr(parser *P, npy_array *h)
{
    const token *t = &P->t;
    if (t->kind == T_LBRACK)
        return npyi_fail(P->e, "unsupported dtype: structured (record) dtypes are not supported");
    if (t->kind != T_STR)
        return unexpected(P, "a string for 'descr'");
    for (size_t i = 0; i < NPYI_N_DTYPES; i++)
        if (tok_is(t, T_STR, npyi_dtypes[i].descr)) {
            h->dtype = (npy_dtype)i;
            next(P);
            return 0;
        }
    /* Same type with the wrong byte-order marker: say so, since the fix is obvious. */
    for (size_t i = 0; i < NPYI_N_DTYPES && t->n == 3; i++) {
        if (memcmp(t->s + 1, npyi_dtypes[i].descr + 1, 2) != 0)
            continue;
        if (t->s[0] == '>')
            return npyi_fail(P->e, "unsupported dtype '%.3s' (big-endian; convert with arr.astype('%s'))",
                             t->s, npyi_dtypes[i].descr);
        return npyi_fail(P->e, "unsupported dtype '%.3s' (byte-order marker must be '<')", t->s);
    }
    return npyi_fail(P->e, "unsupported dtype '%.*s' (supported: <f4 <f2 <f8 <i4 <i8 <u2)",
                     TOK_FMT(t->n), t->s);
}

static int parse_fortran(parser *P)
{
    if (tok_is(&P->t, T_IDENT, "True"))
        return npyi_fail(P->e, "Fortran order not supported; use np.ascontiguousarray");
    if (!tok_is(&P->t, T_IDENT, "False"))
        return unexpected(P, "True or False for 'fortran_order'");
    next(P);
    return 0;
}

static int parse_dim(parser *P, int64_t *out)
{
    const token *t = &P->t;
    if (t->s[0] == '-')
        return npyi_fail(P->e, "negative dimension %.*s in shape", TOK_FMT(t->n), t->s);
    if (t->n > 1 && t->s[0] == '0')
        return npyi_fail(P->e, "malformed dimension '%.*s' in shape (leading zero)", TOK_FMT(t->n), t->s);
    int64_t v = 0;
    for (size_t i = 0; i < t->n; i++)
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, t->s[i] - '0', &v))
            return npyi_fail(P->e, "dimension %.*s in shape does not fit in int64", TOK_FMT(t->n), t->s);
    *out = v;
    next(P);
    return 0;
}

static int parse_shape(parser *P, npy_array *h)
{
    if (P->t.kind != T_LPAREN)
        return unexpected(P, "a tuple such as (2, 3) or (5,) for 'shape'");
    next(P);
    h->ndim = 0;
    while (P->t.kind != T_RPAREN) {
        if (P->t.kind != T_INT)
            return unexpected(P, "an integer dimension");
        if (h->ndim == NPY_MAX_DIMS)
            return npyi_fail(P->e, "shape has more than %d dimensions", NPY_MAX_DIMS);
        if (parse_dim(P, &h->shape[h->ndim++]))
            return -1;
        if (P->t.kind == T_COMMA)
            next(P);
        else if (P->t.kind != T_RPAREN)
            return unexpected(P, "',' or ')' in shape");
        else if (h->ndim == 1) /* in Python "(5)" is the int 5, not a tuple; NumPy rejects it too */
            return npyi_fail(P->e, "malformed shape: a 1-d shape needs a trailing comma, e.g. (5,)");
    }
    next(P);
    return 0;
}

static const char *const KEYS[3] = {"descr", "fortran_order", "shape"};

/* hdr[0..len) is the whole header region, including padding and the final newline. */
int npyi_parse_header(const unsigned char *hdr, size_t len, size_t base, const npyi_ectx *e, npy_array *h)
{
    if (len == 0 || hdr[len - 1] != '\n')
        return npyi_fail(e, "unterminated header (no newline at the end of its %zu bytes)", len);
    for (size_t i = 0; i < len; i++) {
        unsigned c = hdr[i];
        /* v3 allows utf-8, but nothing we accept needs it; ASCII keeps the lexer trivial. */
        if (c >= 0x80)
            return npyi_fail(e, "non-ASCII byte 0x%02x in header at offset %zu", c, base + i);
        if ((c < 0x20 || c == 0x7f) && !is_ws((char)c))
            return npyi_fail(e, "control byte 0x%02x in header at offset %zu", c, base + i);
    }
    parser P = {.p = (const char *)hdr, .n = len, .base = base, .e = e};
    unsigned seen = 0;
    next(&P);
    if (P.t.kind != T_LBRACE)
        return P.t.kind == T_ERR ? -1 : npyi_fail(e, "malformed header: expected '{' at offset %zu", P.t.off);
    next(&P);
    while (P.t.kind != T_RBRACE) {
        if (P.t.kind != T_STR)
            return unexpected(&P, "a quoted key");
        int k = 0;
        while (k < 3 && !tok_is(&P.t, T_STR, KEYS[k]))
            k++;
        if (k == 3)
            return npyi_fail(e, "unexpected key '%.*s' in header", TOK_FMT(P.t.n), P.t.s);
        if (seen & (1u << k))
            return npyi_fail(e, "duplicate key '%s' in header", KEYS[k]);
        seen |= 1u << k;
        next(&P);
        if (P.t.kind != T_COLON)
            return unexpected(&P, "':' after key");
        next(&P);
        if ((k == 0 ? parse_descr(&P, h) : k == 1 ? parse_fortran(&P) : parse_shape(&P, h)) != 0)
            return -1;
        if (P.t.kind == T_COMMA)
            next(&P);
        else if (P.t.kind != T_RBRACE)
            return unexpected(&P, "',' or '}'");
    }
    next(&P);
    if (P.t.kind != T_EOF)
        return P.t.kind == T_ERR ? -1 : npyi_fail(e, "unexpected text after the header dict at offset %zu", P.t.off);
    for (int k = 0; k < 3; k++)
        if (!(seen & (1u << k)))
            return npyi_fail(e, "header is missing key '%s'", KEYS[k]);
    return 0;
}
