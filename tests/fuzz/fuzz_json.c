/* fuzz_json.c - libFuzzer target for the JSON reader (lib/io/json.h).
 *
 * Input: any bytes, parsed as one document. A refused document must come
 * with a message. An accepted one is checked node by node (strings
 * NUL-terminated and UTF-8, integers consistent with their double, lookup
 * finding the last duplicate key), then written back as JSON here and parsed
 * again: the second tree must write back to the same text, so no value is
 * lost or changed on the way. */
#include <math.h>
#include <string.h>

#include "fuzzutil.h"
#include "io/json.h"

/* Objects with more keys are not checked pair by pair (quadratic). */
#define LOOKUP_CHECK_MAX 64

typedef struct out {
    char *p;
    size_t n, cap;
} out;

static void put(out *o, const char *s, size_t n)
{
    if (o->n + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->n + n + 1)
            cap *= 2;
        o->p = realloc(o->p, cap);
        FZ_CHECK(o->p != NULL, "out of memory");
        o->cap = cap;
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
    o->p[o->n] = '\0';
}

static void put_str(out *o, const char *s, size_t n)
{
    put(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(o, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(o, esc, 6);
        } else {
            put(o, (const char *)&c, 1);
        }
    }
    put(o, "\"", 1);
}

static void put_number(out *o, const coli__json *v)
{
    char b[64];
    int n;
    if (v->is_int) {
        /* "-0" is an integer whose double is -0.0. */
        if (v->integer == 0 && v->neg_zero)
            n = snprintf(b, sizeof b, "-0");
        else
            n = snprintf(b, sizeof b, "%lld", (long long)v->integer);
    } else {
        /* 17 digits round-trip any double; keep it a non-integer literal. */
        n = snprintf(b, sizeof b, "%.17g", v->dbl);
        if (strpbrk(b, ".e") == NULL)
            n = snprintf(b + n, sizeof b - (size_t)n, ".0") + n;
    }
    put(o, b, (size_t)n);
}

/* Checks v and writes it to o. */
static void walk(const coli__json *v, out *o)
{
    switch (v->type) {
    case COLI_JSON_NULL:
        put(o, "null", 4);
        break;
    case COLI_JSON_BOOL:
        FZ_CHECK(v->boolean == 0 || v->boolean == 1, "boolean %d", v->boolean);
        put(o, v->boolean ? "true" : "false", v->boolean ? 4 : 5);
        break;
    case COLI_JSON_NUMBER:
        FZ_CHECK(isfinite(coli__json_num(v)), "number %g", coli__json_num(v));
        FZ_CHECK(!v->neg_zero || (v->is_int && v->integer == 0), "-0 flagged on another number");
        if (v->is_int)
            FZ_CHECK(coli__json_num(v) == (double)v->integer, "integer %lld has double %.17g",
                     (long long)v->integer, coli__json_num(v));
        put_number(o, v);
        break;
    case COLI_JSON_STRING:
        FZ_CHECK(v->str != NULL && v->str[v->len] == '\0', "string not NUL-terminated");
        FZ_CHECK(fz_utf8_valid(v->str, v->len), "string of %zu bytes is not UTF-8", (size_t)v->len);
        put_str(o, v->str, v->len);
        break;
    case COLI_JSON_ARRAY:
        FZ_CHECK(v->len == 0 || v->items != NULL, "array without items");
        put(o, "[", 1);
        for (size_t i = 0; i < v->len; i++) {
            if (i)
                put(o, ",", 1);
            walk(&v->items[i], o);
        }
        put(o, "]", 1);
        break;
    case COLI_JSON_OBJECT:
        FZ_CHECK(v->len == 0 || v->items != NULL, "object without members");
        put(o, "{", 1);
        for (size_t i = 0; i < v->len; i++) {
            const coli__json *key = coli__json_key(v, i);
            FZ_CHECK(key != NULL && key->type == COLI_JSON_STRING, "key %zu is not a string", i);
            const char *k = key->str;
            size_t kl = key->len;
            FZ_CHECK(k != NULL && k[kl] == '\0', "key not NUL-terminated");
            FZ_CHECK(fz_utf8_valid(k, kl), "key of %zu bytes is not UTF-8", kl);
            if (v->len <= LOOKUP_CHECK_MAX && strlen(k) == kl) {
                /* The last member with this key. */
                size_t last = i;
                for (size_t j = i + 1; j < v->len; j++)
                    if (coli__json_key(v, j)->len == kl && memcmp(coli__json_key(v, j)->str, k, kl) == 0)
                        last = j;
                FZ_CHECK(coli__json_get(v, k) == &v->items[last], "lookup of key %zu", i);
            }
            if (i)
                put(o, ",", 1);
            put_str(o, k, kl);
            put(o, ":", 1);
            walk(&v->items[i], o);
        }
        put(o, "}", 1);
        break;
    default:
        FZ_CHECK(0, "node type %d", (int)v->type);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    coli__err err = {{0}};
    coli__json_doc *doc = NULL;
    coli_status st = coli__json_parse((const char *)data, size, "fuzz.json", &doc, &err);
    if (st != COLI_OK) {
        FZ_CHECK(doc == NULL, "a failed parse returned a document");
        fz_check_failure(st, err.msg);
        return 0;
    }
    FZ_CHECK(doc != NULL && coli__json_root(doc) != NULL, "no root");
    out a = {0}, b = {0};
    walk(coli__json_root(doc), &a);
    coli__json_free(doc);

    /* The parser may refuse sizes it deems too large: past 1 MiB (more than
     * -max_len inputs ever give) a refusal is not a finding. */
    if (a.n > ((size_t)1 << 20)) {
        free(a.p);
        return 0;
    }
    doc = NULL;
    st = coli__json_parse(a.p, a.n, "written back", &doc, &err);
    FZ_CHECK(st == COLI_OK, "the written-back document does not parse: %s\n%s", err.msg, a.p);
    walk(coli__json_root(doc), &b);
    coli__json_free(doc);
    FZ_CHECK(a.n == b.n && memcmp(a.p, b.p, a.n) == 0, "written back twice differs:\n%s\n%s", a.p, b.p);
    free(a.p);
    free(b.p);
    return 0;
}
