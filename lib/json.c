/* json.c - a small strict JSON reader (RFC 8259).
 *
 * Choices worth knowing:
 *  - Input must be valid UTF-8; a leading UTF-8 byte order mark is skipped
 *    (RFC 8259 section 8.1 allows that).
 *  - \u escapes must form valid code points: a surrogate pair is combined, a
 *    lone high or low surrogate is an error. \u0000 is kept as a NUL byte.
 *  - Duplicate object keys are all kept in keys[]/items[]; coli__json_get
 *    returns the LAST one, as most JSON readers (serde_json, Python) do.
 *  - Numbers: integers without fraction/exponent that fit int64 are converted
 *    exactly by hand; everything else goes through strtod under a private
 *    "C" locale (uselocale), so the caller's LC_NUMERIC cannot change '.'.
 *    A number whose magnitude overflows a double is an error.
 *  - Error positions: lines count '\n', columns count bytes, both from 1.
 *
 * Speed: every node and string lives in one arena of large chunks; children
 * of open containers are collected on one shared scratch stack and copied to
 * the arena when the container closes, so a 150k-key object costs one copy. */
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

#include "json.h"

#define JSON_MAX_DEPTH 256
#define ARENA_MIN_CHUNK ((size_t)64 * 1024)
#define ARENA_MAX_CHUNK ((size_t)16 * 1024 * 1024)

/* ---- arena ------------------------------------------------------------- */

typedef struct chunk {
    struct chunk *next;
    size_t cap;
    size_t used;
    unsigned char *data;
} chunk;

struct coli__json_doc {
    chunk *chunks;
    size_t next_cap; /* size of the next chunk; grows geometrically */
    coli__json *root;
};

static void *arena_alloc(coli__json_doc *doc, size_t n, size_t align)
{
    chunk *c = doc->chunks;
    if (c != NULL) {
        uintptr_t base = (uintptr_t)c->data;
        size_t off = (size_t)(((base + c->used + align - 1) & ~(uintptr_t)(align - 1)) - base);
        if (off <= c->cap && n <= c->cap - off) {
            c->used = off + n;
            return c->data + off;
        }
    }
    size_t cap = doc->next_cap;
    if (cap < n + align)
        cap = n + align;
    if (cap < n) /* n + align overflowed */
        return NULL;
    c = malloc(sizeof *c);
    if (c == NULL)
        return NULL;
    c->data = malloc(cap);
    if (c->data == NULL) {
        free(c);
        return NULL;
    }
    c->cap = cap;
    c->next = doc->chunks;
    doc->chunks = c;
    if (doc->next_cap < ARENA_MAX_CHUNK)
        doc->next_cap *= 2;
    uintptr_t base = (uintptr_t)c->data;
    size_t off = (size_t)(((base + align - 1) & ~(uintptr_t)(align - 1)) - base);
    c->used = off + n;
    return c->data + off;
}

void coli__json_free(coli__json_doc *doc)
{
    if (doc == NULL)
        return;
    chunk *c = doc->chunks;
    while (c != NULL) {
        chunk *next = c->next;
        free(c->data);
        free(c);
        c = next;
    }
    free(doc);
}

const coli__json *coli__json_root(const coli__json_doc *doc)
{
    return doc != NULL ? doc->root : NULL;
}

/* ---- parser ------------------------------------------------------------ */

typedef struct keyent {
    const char *key;
    size_t len;
} keyent;

typedef struct parser {
    const unsigned char *start, *p, *end;
    const char *what;
    coli__err *err;
    coli__json_doc *doc;
    coli__json *nodes; /* scratch stack of children of open containers */
    size_t nnodes, capnodes;
    keyent *keys; /* scratch stack of keys of open objects */
    size_t nkeys, capkeys;
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
static coli_status parse_string(parser *P, const char **out, size_t *outlen)
{
    const unsigned char *s = P->p + 1, *end = P->end, *q = s;
    /* First find the closing quote: the unescaped text is never longer than
     * the escaped one, so its length bounds the allocation. */
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
    unsigned char *buf = arena_alloc(P->doc, (size_t)(close - s) + 1, 1);
    if (buf == NULL)
        return nomem(P);
    unsigned char *o = buf;
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
    *out = (const char *)buf;
    *outlen = (size_t)(o - buf);
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
            v->number = (neg && mag == 0) ? -0.0 : (double)v->integer;
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
        buf = malloc(n + 1);
        if (buf == NULL)
            return nomem(P);
    }
    memcpy(buf, start, n);
    buf[n] = '\0';
    if (P->cloc == (locale_t)0) {
        P->cloc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
        if (P->cloc == (locale_t)0) {
            if (buf != small)
                free(buf);
            return nomem(P);
        }
    }
    locale_t old = uselocale(P->cloc);
    double d = strtod(buf, NULL);
    uselocale(old);
    if (buf != small)
        free(buf);
    if (isinf(d))
        return perr(P, start, COLI_EFORMAT, "number out of the range of a double");
    v->number = d;
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

static coli_status push_node(parser *P, const coli__json *v)
{
    if (P->nnodes == P->capnodes) {
        size_t cap = P->capnodes ? P->capnodes * 2 : 256;
        coli__json *n = realloc(P->nodes, cap * sizeof *n);
        if (n == NULL)
            return nomem(P);
        P->nodes = n;
        P->capnodes = cap;
    }
    P->nodes[P->nnodes++] = *v;
    return COLI_OK;
}

static coli_status push_key(parser *P, const char *k, size_t len)
{
    if (P->nkeys == P->capkeys) {
        size_t cap = P->capkeys ? P->capkeys * 2 : 256;
        keyent *n = realloc(P->keys, cap * sizeof *n);
        if (n == NULL)
            return nomem(P);
        P->keys = n;
        P->capkeys = cap;
    }
    P->keys[P->nkeys].key = k;
    P->keys[P->nkeys].len = len;
    P->nkeys++;
    return COLI_OK;
}

/* Moves the children collected since base into the arena. */
static coli_status close_container(parser *P, coli__json *v, size_t base, size_t kbase, int is_obj)
{
    size_t n = P->nnodes - base;
    v->len = n;
    if (n > 0) {
        v->items = arena_alloc(P->doc, n * sizeof *v->items, _Alignof(coli__json));
        if (v->items == NULL)
            return nomem(P);
        memcpy(v->items, P->nodes + base, n * sizeof *v->items);
        if (is_obj) {
            v->keys = arena_alloc(P->doc, n * sizeof *v->keys, _Alignof(const char *));
            v->key_lens = arena_alloc(P->doc, n * sizeof *v->key_lens, _Alignof(size_t));
            if (v->keys == NULL || v->key_lens == NULL)
                return nomem(P);
            for (size_t i = 0; i < n; i++) {
                v->keys[i] = P->keys[kbase + i].key;
                v->key_lens[i] = P->keys[kbase + i].len;
            }
        }
    }
    P->nnodes = base;
    P->nkeys = kbase;
    return COLI_OK;
}

static coli_status parse_value(parser *P, coli__json *v);

static coli_status parse_array(parser *P, coli__json *v)
{
    size_t base = P->nnodes;
    v->type = COLI_JSON_ARRAY;
    P->p++;
    skip_ws(P);
    if (P->p < P->end && *P->p == ']') {
        P->p++;
        return close_container(P, v, base, P->nkeys, 0);
    }
    for (;;) {
        coli__json item;
        COLI_TRY(parse_value(P, &item));
        COLI_TRY(push_node(P, &item));
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
            return close_container(P, v, base, P->nkeys, 0);
        }
        return unexpected(P, "',' or ']'");
    }
}

static coli_status parse_object(parser *P, coli__json *v)
{
    size_t base = P->nnodes, kbase = P->nkeys;
    v->type = COLI_JSON_OBJECT;
    P->p++;
    skip_ws(P);
    if (P->p < P->end && *P->p == '}') {
        P->p++;
        return close_container(P, v, base, kbase, 1);
    }
    for (;;) {
        if (P->p >= P->end || *P->p != '"')
            return unexpected(P, "a string key");
        const char *key;
        size_t klen;
        COLI_TRY(parse_string(P, &key, &klen));
        skip_ws(P);
        if (P->p >= P->end || *P->p != ':')
            return unexpected(P, "':'");
        P->p++;
        coli__json item;
        COLI_TRY(parse_value(P, &item));
        COLI_TRY(push_node(P, &item));
        COLI_TRY(push_key(P, key, klen));
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
            return close_container(P, v, base, kbase, 1);
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
        v->type = COLI_JSON_STRING;
        return parse_string(P, &v->str, &v->len);
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

    coli__json_doc *doc = calloc(1, sizeof *doc);
    if (doc == NULL)
        return coli__fail(err, COLI_ENOMEM, "%s: out of memory while parsing JSON", what);
    /* Size the first chunk after the text: the tree takes a few times it. */
    doc->next_cap = ARENA_MIN_CHUNK;
    while (doc->next_cap < len && doc->next_cap < ARENA_MAX_CHUNK)
        doc->next_cap *= 2;

    static const unsigned char empty[1] = {0};
    parser P;
    memset(&P, 0, sizeof P);
    P.start = text != NULL ? (const unsigned char *)text : empty;
    P.p = P.start;
    P.end = P.start + len;
    P.what = what;
    P.err = err;
    P.doc = doc;

    coli_status st = COLI_OK;
    if (len >= 3 && memcmp(P.p, "\xEF\xBB\xBF", 3) == 0)
        P.p += 3;
    skip_ws(&P);
    if (P.p >= P.end) {
        st = perr(&P, P.p, COLI_EFORMAT, "empty document");
    } else {
        doc->root = arena_alloc(doc, sizeof *doc->root, _Alignof(coli__json));
        if (doc->root == NULL)
            st = nomem(&P);
        else
            st = parse_value(&P, doc->root);
        if (st == COLI_OK) {
            skip_ws(&P);
            if (P.p < P.end)
                st = perr(&P, P.p, COLI_EFORMAT, "unexpected data after the JSON document");
        }
    }
    free(P.nodes);
    free(P.keys);
    if (P.cloc != (locale_t)0)
        freelocale(P.cloc);
    if (st != COLI_OK) {
        coli__json_free(doc);
        return st;
    }
    *out = doc;
    return COLI_OK;
}

coli_status coli__json_parse_file(const char *path, coli__json_doc **out, coli__err *err)
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
    /* st_size is a hint only (pipes, files that grow): read until EOF. */
    size_t cap = (S_ISREG(sb.st_mode) && sb.st_size > 0) ? (size_t)sb.st_size + 1 : 4096;
    size_t n = 0;
    char *buf = malloc(cap);
    if (buf == NULL) {
        close(fd);
        return coli__fail(err, COLI_ENOMEM, "%s: out of memory reading the file", path);
    }
    for (;;) {
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
    if (obj == NULL || key == NULL || obj->type != COLI_JSON_OBJECT)
        return NULL;
    size_t klen = strlen(key);
    /* Backwards, so that the last of duplicate keys wins. */
    for (size_t i = obj->len; i-- > 0;)
        if (obj->key_lens[i] == klen && memcmp(obj->keys[i], key, klen) == 0)
            return &obj->items[i];
    return NULL;
}

int64_t coli__json_get_int(const coli__json *obj, const char *key, int64_t def)
{
    const coli__json *v = coli__json_get(obj, key);
    return (v != NULL && v->type == COLI_JSON_NUMBER && v->is_int) ? v->integer : def;
}

double coli__json_get_num(const coli__json *obj, const char *key, double def)
{
    const coli__json *v = coli__json_get(obj, key);
    return (v != NULL && v->type == COLI_JSON_NUMBER) ? v->number : def;
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
