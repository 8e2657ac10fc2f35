/* value.c - template values: the arena, construction, Python's truth,
 * equality, ordering, str() and repr(). */
#include "chat/value.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/unicode.h"

struct coli__tchunk {
    coli__tchunk *next;
    max_align_t align[];
};

#define CHUNK_BYTES ((size_t)64 << 10)

coli_status coli__trt_fail(coli__trt *rt, coli_status st, const char *fmt, ...)
{
    if (rt->st != COLI_OK)
        return rt->st;
    rt->st = st;
    int k = rt->line > 0 ? snprintf(rt->msg, sizeof rt->msg, "line %d: ", rt->line) : 0;
    if (k < 0)
        k = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rt->msg + k, sizeof rt->msg - (size_t)k, fmt, ap);
    va_end(ap);
    return st;
}

void *coli__trt_alloc(coli__trt *rt, size_t n)
{
    if (n > COLI__TPL_MEM_MAX) {
        coli__trt_fail(rt, COLI_ERANGE, "the template would use more than %zu MiB of memory",
                       COLI__TPL_MEM_MAX >> 20);
        return NULL;
    }
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    if (n > rt->left) {
        size_t want = n > CHUNK_BYTES / 4 ? n : CHUNK_BYTES;
        if (rt->mem + want > COLI__TPL_MEM_MAX) {
            coli__trt_fail(rt, COLI_ERANGE, "the template used more than %zu MiB of memory",
                           COLI__TPL_MEM_MAX >> 20);
            return NULL;
        }
        coli__tchunk *c = malloc(sizeof *c + want);
        if (!c) {
            coli__trt_fail(rt, COLI_ENOMEM, "out of memory");
            return NULL;
        }
        c->next = rt->chunks;
        rt->chunks = c;
        rt->mem += want;
        if (want > CHUNK_BYTES / 4 && want != CHUNK_BYTES) {
            /* A big block of its own: the current chunk stays in use. */
            memset(c->align, 0, n);
            return c->align;
        }
        rt->cur = (char *)c->align;
        rt->left = want;
    }
    void *p = rt->cur;
    rt->cur += n;
    rt->left -= n;
    memset(p, 0, n);
    return p;
}

void coli__trt_free(coli__trt *rt)
{
    while (rt->chunks) {
        coli__tchunk *n = rt->chunks->next;
        free(rt->chunks);
        rt->chunks = n;
    }
    rt->cur = NULL;
    rt->left = 0;
}

coli_status coli__trt_step(coli__trt *rt)
{
    if (++rt->steps > COLI__TPL_STEPS_MAX)
        return coli__trt_fail(rt, COLI_ERANGE, "more than %llu loop iterations and calls",
                              (unsigned long long)COLI__TPL_STEPS_MAX);
    return COLI_OK;
}

coli_status coli__trt_work(coli__trt *rt, size_t n)
{
    rt->steps += n >> 8;
    return coli__trt_step(rt);
}

coli_status coli__tsb_put(coli__trt *rt, coli__tsb *b, const char *s, size_t n)
{
    if (n > COLI__TPL_OUT_MAX || b->n + n > COLI__TPL_OUT_MAX)
        return coli__trt_fail(rt, COLI_ERANGE, "a string or the output would exceed %zu MiB",
                              COLI__TPL_OUT_MAX >> 20);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = coli__trt_alloc(rt, cap);
        if (!p)
            return rt->st;
        if (b->n)
            memcpy(p, b->p, b->n);
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return COLI_OK;
}

coli_status coli__tsb_putc(coli__trt *rt, coli__tsb *b, char c)
{
    return coli__tsb_put(rt, b, &c, 1);
}

coli__tv coli__tsb_value(coli__tsb *b)
{
    return coli__tv_strn(b->p ? b->p : "", b->n);
}

coli__tv coli__tv_undefn(const char *what, size_t n)
{
    coli__tv v = {0};
    v.t = COLI__TV_UNDEF;
    v.s.p = what;
    v.s.n = n;
    return v;
}

coli__tv coli__tv_undef(const char *what)
{
    return coli__tv_undefn(what, what ? strlen(what) : 0);
}

coli__tv coli__tv_none(void)
{
    coli__tv v = {0};
    v.t = COLI__TV_NONE;
    return v;
}

coli__tv coli__tv_bool(int b)
{
    coli__tv v = {0};
    v.t = COLI__TV_BOOL;
    v.b = b != 0;
    return v;
}

coli__tv coli__tv_int(int64_t i)
{
    coli__tv v = {0};
    v.t = COLI__TV_INT;
    v.i = i;
    return v;
}

coli__tv coli__tv_float(double f)
{
    coli__tv v = {0};
    v.t = COLI__TV_FLOAT;
    v.f = f;
    return v;
}

coli__tv coli__tv_strn(const char *p, size_t n)
{
    coli__tv v = {0};
    v.t = COLI__TV_STR;
    v.s.p = p;
    v.s.n = n;
    return v;
}

coli_status coli__tv_strdup(coli__trt *rt, const char *p, size_t n, coli__tv *out)
{
    if (n > COLI__TPL_OUT_MAX)
        return coli__trt_fail(rt, COLI_ERANGE, "a string would exceed %zu MiB", COLI__TPL_OUT_MAX >> 20);
    char *q = coli__trt_alloc(rt, n + 1);
    if (!q)
        return rt->st;
    if (n)
        memcpy(q, p, n);
    *out = coli__tv_strn(q, n);
    return COLI_OK;
}

/* cap zeroed items in the arena (NULL and no error for cap 0). */
static coli_status items(coli__trt *rt, size_t cap, coli__tv **out)
{
    *out = NULL;
    if (!cap)
        return COLI_OK;
    if (cap > COLI__TPL_MEM_MAX / sizeof(coli__tv))
        return coli__trt_fail(rt, COLI_ERANGE, "%zu items are too many for a list or dict", cap);
    *out = coli__trt_alloc(rt, cap * sizeof **out);
    return *out ? COLI_OK : rt->st;
}

coli_status coli__tv_list_new(coli__trt *rt, size_t cap, coli__tv *out)
{
    coli__tlist *l = coli__trt_alloc(rt, sizeof *l);
    if (!l)
        return rt->st;
    COLI_TRY(items(rt, cap, &l->v));
    l->cap = cap;
    *out = (coli__tv){.t = COLI__TV_LIST, .l = l};
    return COLI_OK;
}

coli_status coli__tv_dict_new(coli__trt *rt, size_t cap, coli__tv *out)
{
    coli__tdict *d = coli__trt_alloc(rt, sizeof *d);
    if (!d)
        return rt->st;
    COLI_TRY(items(rt, cap, &d->k));
    COLI_TRY(items(rt, cap, &d->v));
    d->cap = cap;
    *out = (coli__tv){.t = COLI__TV_DICT, .d = d};
    return COLI_OK;
}

static coli_status grow(coli__trt *rt, coli__tv **arr, size_t n, size_t *cap)
{
    size_t c = *cap ? *cap * 2 : 8;
    if (c > COLI__TPL_MEM_MAX / sizeof(coli__tv))
        return coli__trt_fail(rt, COLI_ERANGE, "a list or dict is too long");
    coli__tv *p = coli__trt_alloc(rt, c * sizeof *p);
    if (!p)
        return rt->st;
    if (n)
        memcpy(p, *arr, n * sizeof *p);
    *arr = p;
    *cap = c;
    return COLI_OK;
}

coli_status coli__tlist_push(coli__trt *rt, coli__tlist *l, coli__tv v)
{
    if (l->n == l->cap)
        COLI_TRY(grow(rt, &l->v, l->n, &l->cap));
    l->v[l->n++] = v;
    return COLI_OK;
}

/* Keys are compared as Python would hash them: equal numbers are one key. */
static int key_eq(const coli__tv *a, const coli__tv *b)
{
    if (coli__tv_is_str(a) && coli__tv_is_str(b))
        return a->s.n == b->s.n && memcmp(a->s.p, b->s.p, a->s.n) == 0;
    if (coli__tv_is_num(a) && coli__tv_is_num(b))
        return coli__tv_num(a) == coli__tv_num(b);
    if (a->t != b->t)
        return 0;
    if (a->t == COLI__TV_NONE)
        return 1;
    return a->t != COLI__TV_STR && a->p == b->p && a->t != COLI__TV_LIST;
}

coli__tv *coli__tdict_get(const coli__tdict *d, coli__tv key)
{
    for (size_t i = 0; i < d->n; i++)
        if (key_eq(&d->k[i], &key))
            return &d->v[i];
    return NULL;
}

coli__tv *coli__tdict_gets(const coli__tdict *d, const char *key, size_t n)
{
    return coli__tdict_get(d, coli__tv_strn(key, n));
}

coli_status coli__tdict_set(coli__trt *rt, coli__tdict *d, coli__tv key, coli__tv v)
{
    COLI_TRY(coli__trt_work(rt, d->n));
    coli__tv *old = coli__tdict_get(d, key);
    if (old) {
        *old = v;
        return COLI_OK;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap;
        COLI_TRY(grow(rt, &d->k, d->n, &cap));
        COLI_TRY(grow(rt, &d->v, d->n, &d->cap));
    }
    d->k[d->n] = key;
    d->v[d->n++] = v;
    return COLI_OK;
}

int coli__tv_is_str(const coli__tv *v)
{
    return v->t == COLI__TV_STR;
}

int coli__tv_is_num(const coli__tv *v)
{
    return v->t == COLI__TV_BOOL || v->t == COLI__TV_INT || v->t == COLI__TV_FLOAT;
}

double coli__tv_num(const coli__tv *v)
{
    switch (v->t) {
    case COLI__TV_BOOL:
        return v->b;
    case COLI__TV_INT:
        return (double)v->i;
    case COLI__TV_FLOAT:
        return v->f;
    default:
        return 0;
    }
}

int coli__tv_truthy(const coli__tv *v)
{
    switch (v->t) {
    case COLI__TV_UNDEF:
    case COLI__TV_NONE:
        return 0;
    case COLI__TV_BOOL:
        return v->b;
    case COLI__TV_INT:
        return v->i != 0;
    case COLI__TV_FLOAT:
        return v->f != 0;
    case COLI__TV_STR:
        return v->s.n != 0;
    case COLI__TV_LIST:
        return v->l->n != 0;
    case COLI__TV_DICT:
        return v->d->n != 0;
    default:
        return 1;
    }
}

const char *coli__tv_type_name(const coli__tv *v)
{
    static const char *const names[] = {"Undefined", "NoneType", "bool", "int", "float", "str", "list",
                                        "dict", "Namespace", "Macro", "builtin_function_or_method",
                                        "builtin_function_or_method", "LoopContext"};
    if (v->t == COLI__TV_LIST && v->tuple)
        return "tuple";
    return v->t < sizeof names / sizeof names[0] ? names[v->t] : "object";
}

static coli_status too_deep(coli__trt *rt)
{
    return coli__trt_fail(rt, COLI_ERANGE, "values nested more than %d deep", 2 * COLI__TPL_DEPTH_MAX);
}

static coli_status eq_depth(coli__trt *rt, const coli__tv *a, const coli__tv *b, int *eq, int depth)
{
    if (depth > 2 * COLI__TPL_DEPTH_MAX)
        return too_deep(rt);
    *eq = 0;
    if (coli__tv_is_num(a) && coli__tv_is_num(b)) {
        if (a->t != COLI__TV_FLOAT && b->t != COLI__TV_FLOAT)
            *eq = (a->t == COLI__TV_INT ? a->i : a->b) == (b->t == COLI__TV_INT ? b->i : b->b);
        else
            *eq = coli__tv_num(a) == coli__tv_num(b);
        return COLI_OK;
    }
    if (a->t != b->t)
        return COLI_OK;
    switch (a->t) {
    case COLI__TV_UNDEF:
    case COLI__TV_NONE:
        *eq = 1;
        break;
    case COLI__TV_STR:
        if (a->s.n == b->s.n)
            COLI_TRY(coli__trt_work(rt, a->s.n));
        *eq = a->s.n == b->s.n && memcmp(a->s.p, b->s.p, a->s.n) == 0;
        break;
    case COLI__TV_LIST:
        if (a->tuple != b->tuple || a->l->n != b->l->n)
            break;
        COLI_TRY(coli__trt_work(rt, a->l->n));
        for (size_t i = 0; i < a->l->n; i++) {
            COLI_TRY(eq_depth(rt, &a->l->v[i], &b->l->v[i], eq, depth + 1));
            if (!*eq)
                return COLI_OK;
        }
        *eq = 1;
        break;
    case COLI__TV_DICT:
        if (a->d->n != b->d->n)
            break;
        for (size_t i = 0; i < a->d->n; i++) {
            const coli__tv *o = coli__tdict_get(b->d, a->d->k[i]);
            if (!o)
                return COLI_OK;
            COLI_TRY(eq_depth(rt, &a->d->v[i], o, eq, depth + 1));
            if (!*eq)
                return COLI_OK;
        }
        *eq = 1;
        break;
    case COLI__TV_METHOD:
        *eq = a->s.obj == b->s.obj && a->s.p == b->s.p;
        break;
    case COLI__TV_FUNC:
        *eq = a->i == b->i;
        break;
    default:
        *eq = a->p == b->p;
    }
    return COLI_OK;
}

coli_status coli__tv_eq(coli__trt *rt, const coli__tv *a, const coli__tv *b, int *eq)
{
    return eq_depth(rt, a, b, eq, 0);
}

static coli_status cmp_depth(coli__trt *rt, const coli__tv *a, const coli__tv *b, int *cmp, int depth)
{
    if (depth > 2 * COLI__TPL_DEPTH_MAX)
        return too_deep(rt);
    if (coli__tv_is_num(a) && coli__tv_is_num(b)) {
        if (a->t == COLI__TV_INT && b->t == COLI__TV_INT)
            *cmp = (a->i > b->i) - (a->i < b->i);
        else {
            double x = coli__tv_num(a), y = coli__tv_num(b);
            *cmp = (x > y) - (x < y);
        }
        return COLI_OK;
    }
    if (a->t == COLI__TV_STR && b->t == COLI__TV_STR) {
        size_t n = a->s.n < b->s.n ? a->s.n : b->s.n;
        COLI_TRY(coli__trt_work(rt, n));
        int c = n ? memcmp(a->s.p, b->s.p, n) : 0;
        *cmp = c ? (c > 0) - (c < 0) : (a->s.n > b->s.n) - (a->s.n < b->s.n);
        return COLI_OK;
    }
    if (a->t == COLI__TV_LIST && b->t == COLI__TV_LIST && a->tuple == b->tuple) {
        size_t n = a->l->n < b->l->n ? a->l->n : b->l->n;
        for (size_t i = 0; i < n; i++) {
            int eq;
            COLI_TRY(eq_depth(rt, &a->l->v[i], &b->l->v[i], &eq, depth + 1));
            if (!eq)
                return cmp_depth(rt, &a->l->v[i], &b->l->v[i], cmp, depth + 1);
        }
        *cmp = (a->l->n > b->l->n) - (a->l->n < b->l->n);
        return COLI_OK;
    }
    return coli__trt_fail(rt, COLI_EINVAL, "'<' not supported between instances of '%s' and '%s'",
                          coli__tv_type_name(a), coli__tv_type_name(b));
}

coli_status coli__tv_cmp(coli__trt *rt, const coli__tv *a, const coli__tv *b, int *cmp)
{
    return cmp_depth(rt, a, b, cmp, 0);
}

size_t coli__tv_fmt_float(double f, char *buf)
{
    if (isnan(f))
        return (size_t)sprintf(buf, "nan");
    if (isinf(f))
        return (size_t)sprintf(buf, f < 0 ? "-inf" : "inf");
    /* The shortest digits that read back as f, as Python's repr. */
    char tmp[40];
    int prec;
    for (prec = 1; prec < 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f)
            break;
    }
    snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
    /* tmp: [-]d[.ddd]e[+-]xx */
    char digits[24];
    size_t nd = 0;
    const char *p = tmp;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9')
            digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    char *o = buf;
    if (neg)
        *o++ = '-';
    if (exp < -4 || exp >= 16) {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, nd - 1);
            o += nd - 1;
        }
        o += sprintf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    } else if (exp < 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = -1; i > exp; i--)
            *o++ = '0';
        memcpy(o, digits, nd);
        o += nd;
    } else {
        for (int i = 0; i <= exp; i++)
            *o++ = (size_t)i < nd ? digits[i] : '0';
        *o++ = '.';
        if ((size_t)exp + 1 < nd) {
            memcpy(o, digits + exp + 1, nd - (size_t)exp - 1);
            o += nd - (size_t)exp - 1;
        } else {
            *o++ = '0';
        }
    }
    *o = '\0';
    return (size_t)(o - buf);
}

static coli_status put_s(coli__trt *rt, coli__tsb *b, const char *s)
{
    return coli__tsb_put(rt, b, s, strlen(s));
}

static coli_status repr_str(coli__trt *rt, coli__tsb *b, const char *s, size_t n)
{
    char q = '\'';
    if (memchr(s, '\'', n) && !memchr(s, '"', n))
        q = '"';
    COLI_TRY(coli__tsb_putc(rt, b, q));
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[8];
        if (c == '\\' || c == (unsigned char)q) {
            e[0] = '\\';
            e[1] = (char)c;
            COLI_TRY(coli__tsb_put(rt, b, e, 2));
        } else if (c == '\n') {
            COLI_TRY(put_s(rt, b, "\\n"));
        } else if (c == '\r') {
            COLI_TRY(put_s(rt, b, "\\r"));
        } else if (c == '\t') {
            COLI_TRY(put_s(rt, b, "\\t"));
        } else if (c < 0x20 || c == 0x7f) {
            snprintf(e, sizeof e, "\\x%02x", c);
            COLI_TRY(put_s(rt, b, e));
        } else {
            COLI_TRY(coli__tsb_putc(rt, b, (char)c));
        }
    }
    return coli__tsb_putc(rt, b, q);
}

coli_status coli__tv_repr(coli__trt *rt, coli__tsb *b, const coli__tv *v, int depth)
{
    if (depth > 2 * COLI__TPL_DEPTH_MAX)
        return too_deep(rt);
    switch (v->t) {
    case COLI__TV_STR:
        return repr_str(rt, b, v->s.p, v->s.n);
    case COLI__TV_LIST:
        COLI_TRY(coli__tsb_putc(rt, b, v->tuple ? '(' : '['));
        for (size_t i = 0; i < v->l->n; i++) {
            if (i)
                COLI_TRY(put_s(rt, b, ", "));
            COLI_TRY(coli__tv_repr(rt, b, &v->l->v[i], depth + 1));
        }
        if (v->tuple && v->l->n == 1)
            COLI_TRY(coli__tsb_putc(rt, b, ','));
        return coli__tsb_putc(rt, b, v->tuple ? ')' : ']');
    case COLI__TV_DICT:
    case COLI__TV_NS:
        if (v->t == COLI__TV_NS)
            COLI_TRY(put_s(rt, b, "<Namespace "));
        COLI_TRY(coli__tsb_putc(rt, b, '{'));
        for (size_t i = 0; i < v->d->n; i++) {
            if (i)
                COLI_TRY(put_s(rt, b, ", "));
            COLI_TRY(coli__tv_repr(rt, b, &v->d->k[i], depth + 1));
            COLI_TRY(put_s(rt, b, ": "));
            COLI_TRY(coli__tv_repr(rt, b, &v->d->v[i], depth + 1));
        }
        COLI_TRY(coli__tsb_putc(rt, b, '}'));
        return v->t == COLI__TV_NS ? coli__tsb_putc(rt, b, '>') : COLI_OK;
    case COLI__TV_UNDEF:
        return put_s(rt, b, "Undefined");
    default:
        return coli__tv_str(rt, b, v);
    }
}

coli_status coli__tv_str(coli__trt *rt, coli__tsb *b, const coli__tv *v)
{
    char num[40];
    switch (v->t) {
    case COLI__TV_UNDEF:
        return COLI_OK;
    case COLI__TV_NONE:
        return put_s(rt, b, "None");
    case COLI__TV_BOOL:
        return put_s(rt, b, v->b ? "True" : "False");
    case COLI__TV_INT:
        snprintf(num, sizeof num, "%lld", (long long)v->i);
        return put_s(rt, b, num);
    case COLI__TV_FLOAT:
        coli__tv_fmt_float(v->f, num);
        return put_s(rt, b, num);
    case COLI__TV_STR:
        return coli__tsb_put(rt, b, v->s.p, v->s.n);
    case COLI__TV_LIST:
    case COLI__TV_DICT:
    case COLI__TV_NS:
        return coli__tv_repr(rt, b, v, 0);
    case COLI__TV_MACRO:
        return put_s(rt, b, "<Macro>");
    case COLI__TV_LOOP:
        return put_s(rt, b, "<LoopContext>");
    default:
        return put_s(rt, b, "<built-in function>");
    }
}

coli_status coli__tv_to_str(coli__trt *rt, const coli__tv *v, coli__tv *out)
{
    if (v->t == COLI__TV_STR) {
        *out = *v;
        return COLI_OK;
    }
    coli__tsb b = {0};
    COLI_TRY(coli__tv_str(rt, &b, v));
    *out = coli__tsb_value(&b);
    return COLI_OK;
}

size_t coli__utf8_len(unsigned char c)
{
    if (c >= 0xf0 && c < 0xf8)
        return 4;
    if (c >= 0xe0 && c < 0xf0)
        return 3;
    if (c >= 0xc0 && c < 0xe0)
        return 2;
    return 1;
}

size_t coli__utf8_count(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)s[i] & 0xc0) != 0x80;
    return k;
}

int coli__tspace_at(const char *s, size_t n, size_t i, size_t *len)
{
    unsigned char c = (unsigned char)s[i];
    *len = 1;
    if (c < 0x80)
        return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
    uint32_t cp;
    if (!coli__utf8_decode(s + i, n - i, &cp, len))
        return 0;
    return (coli__uni_class(cp) & COLI_UNI_S) != 0;
}

int coli__tspace_before(const char *s, size_t start, size_t end, size_t *len)
{
    size_t i = end - 1, k;
    while (i > start && ((unsigned char)s[i] & 0xc0) == 0x80 && end - i < 4)
        i--;
    if (!coli__tspace_at(s, end, i, &k) || i + k != end)
        return 0;
    *len = k;
    return 1;
}
