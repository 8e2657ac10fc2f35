/* json.c - a small strict JSON reader (RFC 8259).
 *
 * Choices worth knowing:
 *  - Input must be valid UTF-8; a leading UTF-8 byte order mark is skipped
 *    (RFC 8259 section 8.1 allows that).
 *  - \u escapes must form valid code points: a surrogate pair is combined, a
 *    lone high or low surrogate is an error. \u0000 is kept as a NUL byte.
 *  - Duplicate object keys are all kept; coli__json_get returns the LAST
 *    one, as most JSON readers (serde_json, Python) do.
 *  - Numbers: integers without fraction/exponent that fit int64 are converted
 *    exactly by hand; everything else goes through strtod under a private
 *    "C" locale (uselocale), so the caller's LC_NUMERIC cannot change '.'.
 *    A number whose magnitude overflows a double is an error.
 *  - Error positions: lines count '\n', columns count bytes, both from 1.
 *
 * Memory: two passes. The first only finds the structure: the number of
 * members of every container (in the order they open) and an upper bound
 * of the string bytes. The whole tree then takes one block of exactly
 * 16 bytes per node plus the strings, and the second pass parses every
 * value straight into its place, so nothing is held twice. Every
 * allocation is counted against coli__json_mem_limit before it is made. */
/* autoconf's config.h is force-included by the build (-include) */

#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/json.h"

#define JSON_MAX_DEPTH 256

_Static_assert(sizeof(coli__json) == 16, "a JSON node is 16 bytes");

struct coli__json_doc {
    void *block; /* the nodes, then the strings */
    coli__json *root;
    size_t mem_peak;
};

typedef struct parser {
    const unsigned char *start, *p, *end;
    const char *what;
    coli__err *err;
    size_t mem_cur, mem_peak, mem_limit; /* bytes allocated by this parse */
    uint32_t *counts;                    /* members of each container, in opening order */
    size_t ncounts, capcounts, next_count;
    coli__json *node_p, *node_end; /* the part of the block still free */
    char *str_p, *str_end;
    locale_t cloc; /* created on first use */
    int depth;
} parser;

#ifdef __GNUC__
__attribute__((format(printf, 4, 5)))
#endif
static coli_status perr(parser *P, const unsigned char *at, coli_status st, const char *fmt, ...)
{
    char reason[256];
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(reason, sizeof reason, fmt, ap) < 0)
        reason[0] = '\0';
    va_end(ap);
    /* Positions are computed only on failure, keeping the hot path lean. */
    size_t line = 1, col = 1;
    for (const unsigned char *q = P->start; q < at && q < P->end; q++) {
        if (*q == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    return coli__fail(P->err, st, "%s: line %zu, column %zu: %s", P->what, line, col, reason);
}

static coli_status nomem(parser *P)
{
    return coli__fail(P->err, COLI_ENOMEM, "%s: out of memory while parsing JSON", P->what);
}

/* ---- memory accounting ------------------------------------------------- */

size_t coli__json_mem_limit(size_t len)
{
    if (len > (SIZE_MAX - COLI__JSON_MEM_SLACK) / COLI__JSON_MEM_PER_BYTE)
        return SIZE_MAX;
    return len * COLI__JSON_MEM_PER_BYTE + COLI__JSON_MEM_SLACK;
}

/* Books n more bytes, or fails naming the document. */
static coli_status mem_take(parser *P, size_t n)
{
    if (n > P->mem_limit || P->mem_cur > P->mem_limit - n)
        return coli__fail(P->err, COLI_EFORMAT,
                          "%s: parsing needs more than %zu bytes of memory, the limit for a JSON "
                          "document of %zu bytes (%d per byte plus %zu): too many small values",
                          P->what, P->mem_limit, (size_t)(P->end - P->start),
                          COLI__JSON_MEM_PER_BYTE, COLI__JSON_MEM_SLACK);
    P->mem_cur += n;
    if (P->mem_cur > P->mem_peak)
        P->mem_peak = P->mem_cur;
    return COLI_OK;
}

static void mem_give(parser *P, size_t n)
{
    P->mem_cur -= n;
}

/* ---- first pass: structure ------------------------------------------- */

typedef struct open_box {
    size_t idx;      /* into counts */
    uint32_t commas; /* at this level */
    unsigned char nonempty, is_obj;
} open_box;

static coli_status count_push(parser *P)
{
    if (P->ncounts == P->capcounts) {
        size_t cap = P->capcounts ? P->capcounts * 2 : 64;
        COLI_TRY(mem_take(P, (cap - P->capcounts) * sizeof *P->counts));
        uint32_t *n = realloc(P->counts, cap * sizeof *n);
        if (n == NULL)
            return nomem(P);
        P->counts = n;
        P->capcounts = cap;
    }
    P->counts[P->ncounts++] = 0;
    return COLI_OK;
}

/* Closes the innermost container: anything at its level means one member
 * more than its commas. Objects take a node for each key too. */
static void box_close(parser *P, const open_box *b, size_t *nodes)
{
    uint32_t n = b->nonempty ? b->commas + 1 : 0;
    P->counts[b->idx] = n;
    *nodes += (size_t)n * (b->is_obj ? 2 : 1);
}

/* Counts members and string bytes from P->p on. Exact for a valid document;
 * on an invalid one it stops where the second pass will fail at the latest
 * (an unterminated string, a stray bracket, too deep nesting), and what it
 * counted still bounds what that pass builds before it fails. */
static coli_status scan(parser *P, size_t *nodes_out, size_t *str_out)
{
    open_box stack[JSON_MAX_DEPTH];
    int sp = 0;
    size_t nodes = 1, strb = 0; /* the root */
    const unsigned char *p = P->p, *end = P->end;
    while (p < end) {
        unsigned c = *p;
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
            p++;
            continue;
        }
        if (sp > 0)
            stack[sp - 1].nonempty = 1;
        if (c == '"') {
            const unsigned char *q = p + 1;
            while (q < end && *q != '"') {
                if (*q == '\\' && end - q < 2)
                    q = end;
                else
                    q += (*q == '\\') ? 2 : 1;
            }
            if (q >= end)
                break;
            strb += (size_t)(q - p); /* the bytes between the quotes and a NUL */
            p = q + 1;
        } else if (c == '[' || c == '{') {
            if (sp == JSON_MAX_DEPTH)
                break;
            stack[sp].idx = P->ncounts;
            stack[sp].commas = 0;
            stack[sp].nonempty = 0;
            stack[sp].is_obj = c == '{';
            COLI_TRY(count_push(P));
            sp++;
            p++;
        } else if (c == ']' || c == '}') {
            if (sp == 0)
                break;
            box_close(P, &stack[--sp], &nodes);
            p++;
        } else {
            if (c == ',' && sp > 0)
                stack[sp - 1].commas++;
            p++;
        }
    }
    while (sp > 0)
        box_close(P, &stack[--sp], &nodes);
    *nodes_out = nodes;
    *str_out = strb;
    return COLI_OK;
}

/* ---- second pass: values --------------------------------------------- */

static void skip_ws(parser *P)
{
    const unsigned char *p = P->p, *end = P->end;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    P->p = p;
}

static coli_status unexpected(parser *P, const char *expected)
{
    if (P->p >= P->end)
        return perr(P, P->p, COLI_EFORMAT, "unexpected end of input, expected %s", expected);
    unsigned c = *P->p;
    if (c == '/')
        return perr(P, P->p, COLI_EFORMAT, "comments are not allowed in JSON");
    if (c >= 0x21 && c < 0x7f)
        return perr(P, P->p, COLI_EFORMAT, "unexpected '%c', expected %s", (int)c, expected);
    return perr(P, P->p, COLI_EFORMAT, "unexpected byte 0x%02X, expected %s", c, expected);
}

static int hexval(unsigned c)
{
    if (c >= '0' && c <= '9')
        return (int)(c - '0');
    if (c >= 'a' && c <= 'f')
        return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F')
        return (int)(c - 'A' + 10);
    return -1;
}

/* Reads 4 hex digits at q (inside the string, bounded by lim). */
static long hex4(const unsigned char *q, const unsigned char *lim)
{
    if (lim - q < 4)
        return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(q[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

/* Length of the valid UTF-8 sequence at q, or 0 (RFC 3629: no overlongs,
 * no surrogates, nothing above U+10FFFF). */
static size_t utf8_len(const unsigned char *q, const unsigned char *lim)
{
    unsigned c = q[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if ((size_t)(lim - q) < n)
        return 0;
    if (q[1] < lo || q[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (q[i] < 0x80 || q[i] > 0xBF)
            return 0;
    return n;
}

static unsigned char *put_utf8(unsigned char *o, unsigned long cp)
{
    if (cp < 0x80) {
        *o++ = (unsigned char)cp;
    } else if (cp < 0x800) {
        *o++ = (unsigned char)(0xC0 | (cp >> 6));
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (unsigned char)(0xE0 | (cp >> 12));
        *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (unsigned char)(0xF0 | (cp >> 18));
        *o++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    }
    return o;
}

/* P->p is at the opening quote. */
static coli_status parse_string(parser *P, coli__json *v)
{
    const unsigned char *s = P->p + 1, *end = P->end, *q = s;
    /* First find the closing quote: the unescaped text is never longer than
     * the escaped one, so its length bounds the space taken. */
    while (q < end && *q != '"') {
        if (*q == '\\') {
            if (end - q < 2) {
                q = end; /* a final backslash escapes nothing */
                break;
            }
            q += 2;
        } else {
            q++;
        }
    }
    if (q >= end)
        return perr(P, P->p, COLI_EFORMAT, "unterminated string");
    const unsigned char *close = q;
    size_t need = (size_t)(close - s) + 1;
    if (need > (size_t)(P->str_end - P->str_p))
        return perr(P, P->p, COLI_EFORMAT, "malformed JSON structure");
    unsigned char *buf = (unsigned char *)P->str_p, *o = buf;
    q = s;
    while (q < close) {
        unsigned c = *q;
        if (c >= 0x20 && c < 0x80 && c != '\\') {
            *o++ = (unsigned char)c;
            q++;
        } else if (c < 0x20) {
            return perr(P, q, COLI_EFORMAT, "control character U+%04X in string (must be escaped)", c);
        } else if (c >= 0x80) {
            size_t n = utf8_len(q, close);
            if (n == 0)
                return perr(P, q, COLI_EFORMAT, "invalid UTF-8 byte 0x%02X in string", c);
            memcpy(o, q, n);
            o += n;
            q += n;
        } else { /* backslash */
            unsigned e = q[1];
            switch (e) {
            case '"': *o++ = '"'; break;
            case '\\': *o++ = '\\'; break;
            case '/': *o++ = '/'; break;
            case 'b': *o++ = '\b'; break;
            case 'f': *o++ = '\f'; break;
            case 'n': *o++ = '\n'; break;
            case 'r': *o++ = '\r'; break;
            case 't': *o++ = '\t'; break;
            case 'u': {
                long cp = hex4(q + 2, close);
                if (cp < 0)
                    return perr(P, q, COLI_EFORMAT, "invalid \\u escape (need 4 hex digits)");
                if (cp >= 0xDC00 && cp <= 0xDFFF)
                    return perr(P, q, COLI_EFORMAT, "unpaired low surrogate \\u%04lX", (unsigned long)cp);
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    long lo = -1;
                    if (close - q >= 12 && q[6] == '\\' && q[7] == 'u')
                        lo = hex4(q + 8, close);
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return perr(P, q, COLI_EFORMAT, "unpaired high surrogate \\u%04lX", (unsigned long)cp);
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    q += 6;
                }
                o = put_utf8(o, (unsigned long)cp);
                q += 4;
                break;
            }
            default:
                if (e >= 0x21 && e < 0x7f)
                    return perr(P, q, COLI_EFORMAT, "invalid escape '\\%c' in string", (int)e);
                return perr(P, q, COLI_EFORMAT, "invalid escape (byte 0x%02X after '\\') in string", e);
            }
            q += 2;
        }
    }
    *o = '\0';
    v->type = COLI_JSON_STRING;
    v->str = (const char *)buf;
    v->len = (uint32_t)(o - buf);
    P->str_p = (char *)o + 1;
    P->p = close + 1;
    return COLI_OK;
}

static int is_digit(unsigned c)
{
    return c >= '0' && c <= '9';
}

static coli_status parse_number(parser *P, coli__json *v)
{
    const unsigned char *start = P->p, *p = P->p, *end = P->end;
    int neg = 0, integral = 1;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end || !is_digit(*p)) {
        P->p = p;
        return unexpected(P, "a digit");
    }
    if (*p == '0') {
        p++;
        if (p < end && is_digit(*p))
            return perr(P, start, COLI_EFORMAT, "leading zero in number");
    } else {
        while (p < end && is_digit(*p))
            p++;
    }
    const unsigned char *int_end = p;
    if (p < end && *p == '.') {
        integral = 0;
        p++;
        if (p >= end || !is_digit(*p)) {
            P->p = p;
            return unexpected(P, "a digit after '.'");
        }
        while (p < end && is_digit(*p))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        integral = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || !is_digit(*p)) {
            P->p = p;
            return unexpected(P, "a digit in the exponent");
        }
        while (p < end && is_digit(*p))
            p++;
    }
    v->type = COLI_JSON_NUMBER;
    if (integral) {
        /* Exact conversion with overflow detection; -2^63 is allowed. */
        uint64_t mag = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        int fits = 1;
        for (const unsigned char *d = start + neg; d < int_end; d++) {
            unsigned dig = *d - '0';
            if (mag > (lim - dig) / 10) {
                fits = 0;
                break;
            }
            mag = mag * 10 + dig;
        }
        if (fits) {
            v->is_int = 1;
            if (neg)
                v->integer = mag == 0 ? 0 : (int64_t)(-(int64_t)(mag - 1) - 1);
            else
                v->integer = (int64_t)mag;
            v->neg_zero = neg && mag == 0;
            P->p = p;
            return COLI_OK;
        }
    }
    /* strtod needs a NUL-terminated copy, and a "C" locale so that the
     * decimal point is '.' whatever the application set. */
    size_t n = (size_t)(p - start);
    char small[128];
    char *buf = small;
    if (n >= sizeof small) {
        COLI_TRY(mem_take(P, n + 1));
        buf = malloc(n + 1);
        if (buf == NULL)
            return nomem(P);
    }
    memcpy(buf, start, n);
    buf[n] = '\0';
    if (P->cloc == (locale_t)0) {
        P->cloc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
        if (P->cloc == (locale_t)0) {
            if (buf != small) {
                free(buf);
                mem_give(P, n + 1);
            }
            return nomem(P);
        }
    }
    locale_t old = uselocale(P->cloc);
    double d = strtod(buf, NULL);
    uselocale(old);
    if (buf != small) {
        free(buf);
        mem_give(P, n + 1);
    }
    if (isinf(d))
        return perr(P, start, COLI_EFORMAT, "number out of the range of a double");
    v->dbl = d;
    v->is_int = 0;
    P->p = p;
    return COLI_OK;
}

static coli_status parse_literal(parser *P, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(P->end - P->p) < n || memcmp(P->p, word, n) != 0)
        return unexpected(P, "a JSON value");
    P->p += n;
    return COLI_OK;
}

/* The members of the next container to open, and room for their nodes. */
static coli_status take_items(parser *P, int is_obj, coli__json **items, size_t *cap)
{
    size_t n = P->next_count < P->ncounts ? P->counts[P->next_count] : 0;
    size_t k = is_obj ? 2 * n : n;
    P->next_count++;
    if (k > (size_t)(P->node_end - P->node_p))
        return perr(P, P->p, COLI_EFORMAT, "malformed JSON structure");
    *items = k ? P->node_p : NULL;
    P->node_p += k;
    *cap = n;
    return COLI_OK;
}

static coli_status parse_value(parser *P, coli__json *v);

/* Member i is about to be parsed. The first pass counted every member that
 * starts with a byte (members are separated by commas it has seen), so a
 * member it did not count starts at the end of the input or at a closing
 * bracket: parsing it into a scratch node gives the right error. */
static coli_status room_for(parser *P, size_t i, size_t cap)
{
    if (i < cap)
        return COLI_OK;
    coli__json scratch;
    COLI_TRY(parse_value(P, &scratch));
    return perr(P, P->p, COLI_EFORMAT, "malformed JSON structure");
}

static coli_status parse_array(parser *P, coli__json *v)
{
    size_t cap, n = 0;
    v->type = COLI_JSON_ARRAY;
    COLI_TRY(take_items(P, 0, &v->items, &cap));
    P->p++;
    skip_ws(P);
    if (P->p < P->end && *P->p == ']') {
        P->p++;
        return COLI_OK;
    }
    for (;;) {
        COLI_TRY(room_for(P, n, cap));
        COLI_TRY(parse_value(P, &v->items[n]));
        v->len = (uint32_t)++n;
        skip_ws(P);
        if (P->p < P->end && *P->p == ',') {
            P->p++;
            skip_ws(P);
            if (P->p < P->end && *P->p == ']')
                return perr(P, P->p, COLI_EFORMAT, "trailing comma in array");
            continue;
        }
        if (P->p < P->end && *P->p == ']') {
            P->p++;
            return COLI_OK;
        }
        return unexpected(P, "',' or ']'");
    }
}

static coli_status parse_object(parser *P, coli__json *v)
{
    size_t cap, n = 0;
    v->type = COLI_JSON_OBJECT;
    COLI_TRY(take_items(P, 1, &v->items, &cap));
    P->p++;
    skip_ws(P);
    if (P->p < P->end && *P->p == '}') {
        P->p++;
        return COLI_OK;
    }
    for (;;) {
        if (P->p >= P->end || *P->p != '"')
            return unexpected(P, "a string key");
        COLI_TRY(room_for(P, n, cap));
        coli__json *key = &v->items[cap + n];
        memset(key, 0, sizeof *key);
        COLI_TRY(parse_string(P, key));
        skip_ws(P);
        if (P->p >= P->end || *P->p != ':')
            return unexpected(P, "':'");
        P->p++;
        COLI_TRY(parse_value(P, &v->items[n]));
        n++;
        skip_ws(P);
        if (P->p < P->end && *P->p == ',') {
            P->p++;
            skip_ws(P);
            if (P->p < P->end && *P->p == '}')
                return perr(P, P->p, COLI_EFORMAT, "trailing comma in object");
            continue;
        }
        if (P->p < P->end && *P->p == '}') {
            P->p++;
            /* Keys follow the values directly (a no-op for valid input,
             * where the first pass counted exactly n). */
            if (n < cap)
                memmove(&v->items[n], &v->items[cap], n * sizeof *v->items);
            v->len = (uint32_t)n;
            return COLI_OK;
        }
        return unexpected(P, "',' or '}'");
    }
}

static coli_status parse_value(parser *P, coli__json *v)
{
    memset(v, 0, sizeof *v);
    skip_ws(P);
    if (P->p >= P->end)
        return unexpected(P, "a JSON value");
    switch (*P->p) {
    case '{':
    case '[': {
        if (P->depth >= JSON_MAX_DEPTH)
            return perr(P, P->p, COLI_EFORMAT, "nesting deeper than %d levels", JSON_MAX_DEPTH);
        P->depth++;
        coli_status st = *P->p == '{' ? parse_object(P, v) : parse_array(P, v);
        P->depth--;
        return st;
    }
    case '"':
        return parse_string(P, v);
    case 't':
        v->type = COLI_JSON_BOOL;
        v->boolean = 1;
        return parse_literal(P, "true");
    case 'f':
        v->type = COLI_JSON_BOOL;
        return parse_literal(P, "false");
    case 'n':
        v->type = COLI_JSON_NULL;
        return parse_literal(P, "null");
    default:
        if (*P->p == '-' || is_digit(*P->p))
            return parse_number(P, v);
        return unexpected(P, "a JSON value");
    }
}

void coli__json_free(coli__json_doc *doc)
{
    if (doc == NULL)
        return;
    free(doc->block);
    free(doc);
}

const coli__json *coli__json_root(const coli__json_doc *doc)
{
    return doc != NULL ? doc->root : NULL;
}

size_t coli__json_mem_used(const coli__json_doc *doc)
{
    return doc != NULL ? doc->mem_peak : 0;
}

/* Both passes over P->p..end; the tree goes to doc. */
static coli_status parse_doc(parser *P, coli__json_doc *doc)
{
    size_t nodes, strb;
    skip_ws(P);
    if (P->p >= P->end)
        return perr(P, P->p, COLI_EFORMAT, "empty document");
    COLI_TRY(scan(P, &nodes, &strb));
    if (nodes > SIZE_MAX / sizeof(coli__json) - strb)
        return nomem(P);
    size_t bytes = nodes * sizeof(coli__json) + strb;
    COLI_TRY(mem_take(P, bytes));
    doc->block = malloc(bytes);
    if (doc->block == NULL)
        return nomem(P);
    P->node_p = doc->block;
    P->node_end = P->node_p + nodes;
    P->str_p = (char *)P->node_end;
    P->str_end = P->str_p + strb;
    doc->root = P->node_p++;
    COLI_TRY(parse_value(P, doc->root));
    skip_ws(P);
    if (P->p < P->end)
        return perr(P, P->p, COLI_EFORMAT, "unexpected data after the JSON document");
    return COLI_OK;
}

coli_status coli__json_parse(const char *text, size_t len, const char *what,
                             coli__json_doc **out, coli__err *err)
{
    if (out == NULL)
        return coli__fail(err, COLI_EINVAL, "coli__json_parse: NULL output");
    *out = NULL;
    if (what == NULL)
        what = "<json>";
    if (text == NULL && len > 0)
        return coli__fail(err, COLI_EINVAL, "%s: NULL text", what);
    /* Lengths and counts are 32-bit in the tree. */
    if (len > UINT32_MAX)
        return coli__fail(err, COLI_EFORMAT, "%s: a JSON document of %zu bytes is too large (4 GiB at most)",
                          what, len);

    static const unsigned char empty[1] = {0};
    parser P;
    memset(&P, 0, sizeof P);
    P.start = text != NULL ? (const unsigned char *)text : empty;
    P.p = P.start;
    P.end = P.start + len;
    P.what = what;
    P.err = err;
    P.mem_limit = coli__json_mem_limit(len);

    coli__json_doc *doc = NULL;
    coli_status st = mem_take(&P, sizeof *doc);
    if (st == COLI_OK) {
        doc = calloc(1, sizeof *doc);
        st = doc != NULL ? COLI_OK : nomem(&P);
    }
    if (st == COLI_OK) {
        if (len >= 3 && memcmp(P.p, "\xEF\xBB\xBF", 3) == 0)
            P.p += 3;
        st = parse_doc(&P, doc);
    }
    free(P.counts);
    if (P.cloc != (locale_t)0)
        freelocale(P.cloc);
    if (st != COLI_OK) {
        coli__json_free(doc);
        return st;
    }
    doc->mem_peak = P.mem_peak;
    *out = doc;
    return COLI_OK;
}

coli_status coli__json_parse_file(const char *path, coli__json_doc **out, coli__err *err)
{
    return coli__json_parse_file_max(path, COLI__JSON_CONFIG_MAX, out, err);
}

static coli_status too_big(coli__err *err, const char *path, size_t max_bytes)
{
    if (max_bytes >= ((size_t)1 << 20) && max_bytes % ((size_t)1 << 20) == 0)
        return coli__fail(err, COLI_EFORMAT, "%s: file is larger than %zu MiB, the limit for this file",
                          path, max_bytes >> 20);
    return coli__fail(err, COLI_EFORMAT, "%s: file is larger than %zu bytes, the limit for this file",
                      path, max_bytes);
}

coli_status coli__json_parse_file_max(const char *path, size_t max_bytes, coli__json_doc **out,
                                      coli__err *err)
{
    if (out == NULL || path == NULL)
        return coli__fail(err, COLI_EINVAL, "coli__json_parse_file: NULL argument");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            return coli__fail(err, COLI_ENOENT, "%s: no such file", path);
        return coli__fail(err, COLI_EIO, "%s: cannot open: %s", path, strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return coli__fail(err, COLI_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        return coli__fail(err, COLI_EIO, "%s: is a directory", path);
    }
    if (S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > max_bytes) {
        close(fd);
        return too_big(err, path, max_bytes);
    }
    /* st_size is a hint only (pipes, files that grow): read until EOF, but
     * never past the limit. */
    size_t cap = (S_ISREG(sb.st_mode) && sb.st_size > 0) ? (size_t)sb.st_size + 1 : 4096;
    size_t n = 0;
    char *buf = malloc(cap);
    if (buf == NULL) {
        close(fd);
        return coli__fail(err, COLI_ENOMEM, "%s: out of memory reading the file", path);
    }
    for (;;) {
        if (n > max_bytes) {
            free(buf);
            close(fd);
            return too_big(err, path, max_bytes);
        }
        if (n == cap) {
            size_t ncap = cap * 2;
            char *nb = ncap > cap ? realloc(buf, ncap) : NULL;
            if (nb == NULL) {
                free(buf);
                close(fd);
                return coli__fail(err, COLI_ENOMEM, "%s: out of memory reading the file", path);
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            close(fd);
            return coli__fail(err, COLI_EIO, "%s: read error: %s", path, strerror(e));
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    coli_status st = coli__json_parse(buf, n, path, out, err);
    free(buf);
    return st;
}

/* ---- lookup ------------------------------------------------------------ */

const coli__json *coli__json_get(const coli__json *obj, const char *key)
{
    if (obj == NULL || key == NULL || obj->type != COLI_JSON_OBJECT || obj->len == 0)
        return NULL;
    size_t klen = strlen(key);
    const coli__json *keys = obj->items + obj->len;
    /* Backwards, so that the last of duplicate keys wins. */
    for (size_t i = obj->len; i-- > 0;)
        if (keys[i].len == klen && memcmp(keys[i].str, key, klen) == 0)
            return &obj->items[i];
    return NULL;
}

const coli__json *coli__json_key(const coli__json *obj, size_t i)
{
    return &obj->items[obj->len + i];
}

double coli__json_num(const coli__json *v)
{
    if (!v->is_int)
        return v->dbl;
    return v->neg_zero ? -0.0 : (double)v->integer;
}

int64_t coli__json_get_int(const coli__json *obj, const char *key, int64_t def)
{
    const coli__json *v = coli__json_get(obj, key);
    return (v != NULL && v->type == COLI_JSON_NUMBER && v->is_int) ? v->integer : def;
}

double coli__json_get_num(const coli__json *obj, const char *key, double def)
{
    const coli__json *v = coli__json_get(obj, key);
    return (v != NULL && v->type == COLI_JSON_NUMBER) ? coli__json_num(v) : def;
}

int coli__json_get_bool(const coli__json *obj, const char *key, int def)
{
    const coli__json *v = coli__json_get(obj, key);
    return (v != NULL && v->type == COLI_JSON_BOOL) ? v->boolean : def;
}

const char *coli__json_get_str(const coli__json *obj, const char *key, const char *def)
{
    const coli__json *v = coli__json_get(obj, key);
    return (v != NULL && v->type == COLI_JSON_STRING) ? v->str : def;
}
