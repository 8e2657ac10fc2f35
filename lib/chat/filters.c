/* filters.c - the filters and tests of templates, with the behaviour of
 * Jinja 3.1 (docs/templates.md lists them). */
#include "chat/builtins.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/strings.h"
#include "chat/targs.h"
#include "chat/tojson.h"

/* ---- tests ---- */

static const char *const test_names[] = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "mapping",
    "iterable", "sequence", "callable", "true", "false", "even", "odd", "divisibleby", "eq", "equalto",
    "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "in",
    "lower", "upper", "sameas", "escaped", "filter", "test", NULL};

int coli__ttest_exists(const char *name, size_t n)
{
    for (size_t i = 0; test_names[i]; i++)
        if (coli__targ_is(name, n, test_names[i]))
            return 1;
    return 0;
}

static int cmp_op(const char *name, size_t n)
{
    if (coli__targ_is(name, n, "eq") || coli__targ_is(name, n, "equalto") || coli__targ_is(name, n, "=="))
        return COLI__OP_EQ;
    if (coli__targ_is(name, n, "ne") || coli__targ_is(name, n, "!="))
        return COLI__OP_NE;
    if (coli__targ_is(name, n, "lt") || coli__targ_is(name, n, "lessthan") || coli__targ_is(name, n, "<"))
        return COLI__OP_LT;
    if (coli__targ_is(name, n, "le") || coli__targ_is(name, n, "<="))
        return COLI__OP_LE;
    if (coli__targ_is(name, n, "gt") || coli__targ_is(name, n, "greaterthan") || coli__targ_is(name, n, ">"))
        return COLI__OP_GT;
    if (coli__targ_is(name, n, "ge") || coli__targ_is(name, n, ">="))
        return COLI__OP_GE;
    if (coli__targ_is(name, n, "in"))
        return COLI__OP_IN;
    return -1;
}

int coli__tfilter_exists(const char *name, size_t n);

coli_status coli__ttest(coli__trt *rt, const char *name, size_t n, const coli__tv *x, const coli__targs *a,
                        int *res)
{
    int t = x->t;
    const coli__tv *y = coli__targ(a, 0, NULL);
    int op = cmp_op(name, n);
    if (op >= 0) {
        if (!y)
            return coli__trt_fail(rt, COLI_EINVAL, "test '%.*s' needs an argument", (int)n, name);
        return coli__top_compare(rt, op, x, y, res);
    }
    if (coli__targ_is(name, n, "defined"))
        *res = t != COLI__TV_UNDEF;
    else if (coli__targ_is(name, n, "undefined"))
        *res = t == COLI__TV_UNDEF;
    else if (coli__targ_is(name, n, "none"))
        *res = t == COLI__TV_NONE;
    else if (coli__targ_is(name, n, "string"))
        *res = t == COLI__TV_STR;
    else if (coli__targ_is(name, n, "number"))
        *res = coli__tv_is_num(x);
    else if (coli__targ_is(name, n, "integer"))
        *res = t == COLI__TV_INT;
    else if (coli__targ_is(name, n, "float"))
        *res = t == COLI__TV_FLOAT;
    else if (coli__targ_is(name, n, "boolean"))
        *res = t == COLI__TV_BOOL;
    else if (coli__targ_is(name, n, "mapping"))
        *res = t == COLI__TV_DICT;
    else if (coli__targ_is(name, n, "iterable") || coli__targ_is(name, n, "sequence"))
        *res = t == COLI__TV_STR || t == COLI__TV_LIST || t == COLI__TV_DICT || t == COLI__TV_UNDEF;
    else if (coli__targ_is(name, n, "callable"))
        *res = t == COLI__TV_MACRO || t == COLI__TV_FUNC || t == COLI__TV_METHOD;
    else if (coli__targ_is(name, n, "true"))
        *res = t == COLI__TV_BOOL && x->b;
    else if (coli__targ_is(name, n, "false"))
        *res = t == COLI__TV_BOOL && !x->b;
    else if (coli__targ_is(name, n, "even") || coli__targ_is(name, n, "odd") || coli__targ_is(name, n, "divisibleby")) {
        int64_t v = 0, d = 2;
        if (t == COLI__TV_UNDEF)
            return coli__top_undefined_error(rt, x);
        COLI_TRY(coli__targ_int(rt, x, "even/odd", &v));
        if (name[0] == 'd') {
            if (!y)
                return coli__trt_fail(rt, COLI_EINVAL, "divisibleby needs an argument");
            COLI_TRY(coli__targ_int(rt, y, "divisibleby", &d));
            if (d == 0)
                return coli__trt_fail(rt, COLI_EINVAL, "integer division or modulo by zero");
        }
        int64_t m = d == -1 ? 0 : v % d;
        *res = name[0] == 'o' ? m != 0 : m == 0;
    } else if (coli__targ_is(name, n, "lower") || coli__targ_is(name, n, "upper"))
        *res = t == COLI__TV_STR && coli__tstr_cased(x, name[0] == 'u');
    else if (coli__targ_is(name, n, "sameas")) {
        if (!y)
            return coli__trt_fail(rt, COLI_EINVAL, "sameas needs an argument");
        if (x->t != y->t)
            *res = 0;
        else if (t == COLI__TV_NONE || t == COLI__TV_UNDEF)
            *res = 1;
        else if (t == COLI__TV_BOOL)
            *res = x->b == y->b;
        else if (t == COLI__TV_INT)
            *res = x->i == y->i && x->i >= -5 && x->i <= 256;
        else if (t == COLI__TV_FLOAT)
            *res = 0;
        else if (t == COLI__TV_STR)
            *res = x->s.p == y->s.p && x->s.n == y->s.n;
        else
            *res = x->p == y->p;
    } else if (coli__targ_is(name, n, "escaped"))
        *res = 0;
    else if (coli__targ_is(name, n, "filter") || coli__targ_is(name, n, "test"))
        *res = t == COLI__TV_STR && (name[0] == 'f' ? coli__tfilter_exists(x->s.p, x->s.n)
                                                    : coli__ttest_exists(x->s.p, x->s.n));
    else
        return coli__trt_fail(rt, COLI_EINVAL, "no test named '%.*s'", (int)n, name);
    return COLI_OK;
}

/* ---- filters ---- */

static const char *const filter_names[] = {
    "length", "count", "first", "last", "join", "default", "d", "trim", "upper", "lower", "capitalize",
    "title", "replace", "list", "reverse", "sort", "unique", "map", "select", "reject", "selectattr",
    "rejectattr", "tojson", "string", "int", "float", "abs", "round", "items", "dictsort", "indent",
    "safe", "escape", "e", "wordcount", "min", "max", "sum", "attr", NULL};

int coli__tfilter_exists(const char *name, size_t n)
{
    for (size_t i = 0; filter_names[i]; i++)
        if (coli__targ_is(name, n, filter_names[i]))
            return 1;
    return 0;
}

/* The value sort and friends compare: lowercased strings unless case
 * sensitive, after picking attribute. */
static coli_status sort_key(coli__trt *rt, const coli__tv *v, const coli__tv *attr, int case_sensitive,
                            coli__tv *out)
{
    *out = *v;
    if (attr && attr->t != COLI__TV_NONE) {
        if (attr->t == COLI__TV_STR) {
            /* Dotted paths reach into nested members. */
            const char *p = attr->s.p, *end = attr->s.p + attr->s.n;
            while (p <= end) {
                const char *dot = memchr(p, '.', (size_t)(end - p));
                const char *e = dot ? dot : end;
                coli__tv key = coli__tv_strn(p, (size_t)(e - p));
                if (e > p && p[0] >= '0' && p[0] <= '9')
                    key = coli__tv_int(strtoll(p, NULL, 10));
                COLI_TRY(coli__top_getitem(rt, out, &key, out));
                p = e + 1;
            }
        } else {
            COLI_TRY(coli__top_getitem(rt, out, attr, out));
        }
    }
    if (!case_sensitive && out->t == COLI__TV_STR)
        COLI_TRY(coli__tstr_case(rt, out, 0, out));
    return COLI_OK;
}

/* Stable merge sort of items by keys. */
static coli_status merge_sort(coli__trt *rt, coli__tv *items, coli__tv *keys, size_t n, int reverse)
{
    if (n < 2)
        return COLI_OK;
    COLI_TRY(coli__trt_work(rt, n * 32));
    coli__tv *ti = coli__trt_alloc(rt, n * sizeof *ti), *tk = coli__trt_alloc(rt, n * sizeof *tk);
    if (!ti || !tk)
        return rt->st;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int c;
                COLI_TRY(coli__tv_cmp(rt, &keys[j], &keys[i], &c));
                int take_right = reverse ? c > 0 : c < 0;
                size_t s = take_right ? j++ : i++;
                ti[k] = items[s];
                tk[k++] = keys[s];
            }
            while (i < mid) {
                ti[k] = items[i];
                tk[k++] = keys[i++];
            }
            while (j < hi) {
                ti[k] = items[j];
                tk[k++] = keys[j++];
            }
        }
        memcpy(items, ti, n * sizeof *ti);
        memcpy(keys, tk, n * sizeof *tk);
    }
    return COLI_OK;
}

static coli_status copy_list(coli__trt *rt, const coli__tv *x, coli__tv *out)
{
    coli__tv it;
    COLI_TRY(coli__top_iter(rt, x, &it));
    COLI_TRY(coli__tv_list_new(rt, it.l->n, out));
    if (it.l->n)
        memcpy(out->l->v, it.l->v, it.l->n * sizeof *it.l->v);
    out->l->n = it.l->n;
    return COLI_OK;
}

static coli_status f_sort(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    COLI_TRY(copy_list(rt, x, out));
    size_t n = out->l->n;
    coli__tv *keys = coli__trt_alloc(rt, (n ? n : 1) * sizeof *keys);
    if (!keys)
        return rt->st;
    int cs = coli__targ_truthy(a, 1, "case_sensitive", 0);
    for (size_t i = 0; i < n; i++)
        COLI_TRY(sort_key(rt, &out->l->v[i], coli__targ(a, 2, "attribute"), cs, &keys[i]));
    return merge_sort(rt, out->l->v, keys, n, coli__targ_truthy(a, 0, "reverse", 0));
}

static coli_status f_unique(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    coli__tv it, seen;
    COLI_TRY(coli__top_iter(rt, x, &it));
    COLI_TRY(coli__tv_list_new(rt, 0, out));
    COLI_TRY(coli__tv_list_new(rt, 0, &seen));
    for (size_t i = 0; i < it.l->n; i++) {
        coli__tv k;
        int dup;
        COLI_TRY(sort_key(rt, &it.l->v[i], coli__targ(a, 1, "attribute"), coli__targ_truthy(a, 0, "case_sensitive", 0),
                          &k));
        COLI_TRY(coli__top_contains(rt, &seen, &k, &dup));
        if (dup)
            continue;
        COLI_TRY(coli__tlist_push(rt, seen.l, k));
        COLI_TRY(coli__tlist_push(rt, out->l, it.l->v[i]));
    }
    return COLI_OK;
}

static coli_status f_minmax(coli__trt *rt, const coli__tv *x, const coli__targs *a, int max, coli__tv *out)
{
    coli__tv it;
    COLI_TRY(coli__top_iter(rt, x, &it));
    if (it.l->n == 0) {
        *out = coli__tv_undef("min/max of an empty sequence");
        return COLI_OK;
    }
    int cs = coli__targ_truthy(a, 0, "case_sensitive", 0);
    coli__tv best = it.l->v[0], bk;
    COLI_TRY(sort_key(rt, &best, coli__targ(a, 1, "attribute"), cs, &bk));
    for (size_t i = 1; i < it.l->n; i++) {
        coli__tv k;
        int c;
        COLI_TRY(sort_key(rt, &it.l->v[i], coli__targ(a, 1, "attribute"), cs, &k));
        COLI_TRY(coli__tv_cmp(rt, &k, &bk, &c));
        if (max ? c > 0 : c < 0) {
            best = it.l->v[i];
            bk = k;
        }
    }
    *out = best;
    return COLI_OK;
}

static coli_status f_sum(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    coli__tv it;
    COLI_TRY(coli__top_iter(rt, x, &it));
    const coli__tv *start = coli__targ(a, 1, "start");
    *out = start ? *start : coli__tv_int(0);
    for (size_t i = 0; i < it.l->n; i++) {
        coli__tv v;
        COLI_TRY(sort_key(rt, &it.l->v[i], coli__targ(a, 0, "attribute"), 1, &v));
        COLI_TRY(coli__top_binary(rt, COLI__OP_ADD, out, &v, out));
    }
    return COLI_OK;
}

/* select/reject (attr NULL) and selectattr/rejectattr. */
static coli_status f_select(coli__trt *rt, const coli__tv *x, const coli__targs *a, int keep, int by_attr,
                            coli__tv *out)
{
    coli__tv it;
    COLI_TRY(coli__top_iter(rt, x, &it));
    COLI_TRY(coli__tv_list_new(rt, 0, out));
    size_t first = by_attr ? 1 : 0;
    const coli__tv *attr = by_attr ? coli__targ(a, 0, NULL) : NULL;
    if (by_attr && !attr)
        return coli__trt_fail(rt, COLI_EINVAL, "selectattr/rejectattr need an attribute");
    const coli__tv *test = coli__targ(a, first, NULL);
    if (test && test->t != COLI__TV_STR)
        return coli__trt_fail(rt, COLI_EINVAL, "the test of select must be named by a string");
    coli__targs ta = {a->pos + (a->npos > first + 1 ? first + 1 : a->npos),
                      a->npos > first + 1 ? a->npos - first - 1 : 0, a->names, a->kw, a->nkw};
    for (size_t i = 0; i < it.l->n; i++) {
        coli__tv v = it.l->v[i];
        int r;
        if (attr)
            COLI_TRY(sort_key(rt, &v, attr, 1, &v));
        if (test)
            COLI_TRY(coli__ttest(rt, test->s.p, test->s.n, &v, &ta, &r));
        else
            r = coli__tv_truthy(&v);
        if (r == keep)
            COLI_TRY(coli__tlist_push(rt, out->l, it.l->v[i]));
    }
    return COLI_OK;
}

static coli_status f_map(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    coli__tv it;
    COLI_TRY(coli__top_iter(rt, x, &it));
    COLI_TRY(coli__tv_list_new(rt, it.l->n, out));
    const coli__tv *attr = coli__targ(a, SIZE_MAX, "attribute");
    const coli__tv *def = coli__targ(a, SIZE_MAX, "default");
    const coli__tv *name = attr ? NULL : coli__targ(a, 0, NULL);
    if (!attr && (!name || name->t != COLI__TV_STR))
        return coli__trt_fail(rt, COLI_EINVAL, "map needs a filter name or attribute=");
    coli__targs fa = {a->npos > 1 ? a->pos + 1 : a->pos, a->npos > 1 ? a->npos - 1 : 0, a->names, a->kw, a->nkw};
    for (size_t i = 0; i < it.l->n; i++) {
        coli__tv v;
        if (attr) {
            COLI_TRY(sort_key(rt, &it.l->v[i], attr, 1, &v));
            if (v.t == COLI__TV_UNDEF && def)
                v = *def;
        } else {
            COLI_TRY(coli__tfilter(rt, name->s.p, name->s.n, &it.l->v[i], &fa, &v));
        }
        COLI_TRY(coli__tlist_push(rt, out->l, v));
    }
    return COLI_OK;
}

static coli_status f_tojson(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    coli__tjson o;
    coli__tjson_defaults(&o);
    o.ensure_ascii = coli__targ_truthy(a, 0, "ensure_ascii", 0);
    const coli__tv *ind = coli__targ(a, 1, "indent");
    if (ind && ind->t != COLI__TV_NONE) {
        if (ind->t != COLI__TV_INT && ind->t != COLI__TV_STR)
            return coli__trt_fail(rt, COLI_EINVAL, "tojson: indent must be an integer or a string");
        o.indent_on = 1;
        o.indent = *ind;
        if (ind->t == COLI__TV_INT && ind->i > 64)
            return coli__trt_fail(rt, COLI_ERANGE, "tojson: indent beyond 64");
    }
    coli__tjson_indent_seps(&o);
    const coli__tv *seps = coli__targ(a, 2, "separators");
    if (seps && seps->t != COLI__TV_NONE) {
        if (seps->t != COLI__TV_LIST || seps->l->n != 2 || seps->l->v[0].t != COLI__TV_STR ||
            seps->l->v[1].t != COLI__TV_STR)
            return coli__trt_fail(rt, COLI_EINVAL, "tojson: separators must be two strings");
        o.item_sep = seps->l->v[0].s.p;
        o.item_n = seps->l->v[0].s.n;
        o.key_sep = seps->l->v[1].s.p;
        o.key_n = seps->l->v[1].s.n;
    }
    o.sort_keys = coli__targ_truthy(a, 3, "sort_keys", 0);
    coli__tsb b = {0};
    COLI_TRY(coli__tsb_put(rt, &b, "", 0));
    COLI_TRY(coli__tojson(rt, &b, x, &o));
    *out = coli__tsb_value(&b);
    return COLI_OK;
}

/* Python's int() of a string: blanks around, a sign, digits with single
 * underscores between. */
static int parse_int(const char *p, size_t n, int64_t *out)
{
    size_t i = 0;
    while (i < n && coli__tch_space((unsigned char)p[i]))
        i++;
    while (n > i && coli__tch_space((unsigned char)p[n - 1]))
        n--;
    int neg = 0;
    if (i < n && (p[i] == '+' || p[i] == '-'))
        neg = p[i++] == '-';
    if (i >= n)
        return 0;
    uint64_t v = 0;
    for (size_t k = i; k < n; k++) {
        if (p[k] == '_' && k > i && k + 1 < n && coli__tch_digit((unsigned char)p[k + 1]) && p[k - 1] != '_')
            continue;
        if (!coli__tch_digit((unsigned char)p[k]) || v > (UINT64_MAX - 9) / 10)
            return 0;
        v = v * 10 + (uint64_t)(p[k] - '0');
    }
    if (v > (uint64_t)INT64_MAX)
        return 0;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 1;
}

static int parse_float(const char *p, size_t n, double *out)
{
    char buf[128];
    size_t i = 0;
    while (i < n && coli__tch_space((unsigned char)p[i]))
        i++;
    while (n > i && coli__tch_space((unsigned char)p[n - 1]))
        n--;
    if (n - i == 0 || n - i >= sizeof buf)
        return 0;
    for (size_t k = i; k < n; k++)
        if (!(coli__tch_digit((unsigned char)p[k]) || strchr("+-.eEinfatyINFATY", p[k])))
            return 0;
    memcpy(buf, p + i, n - i);
    buf[n - i] = '\0';
    char *end;
    *out = strtod(buf, &end);
    return *end == '\0';
}

static coli_status f_int(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    const coli__tv *def = coli__targ(a, 0, "default");
    int64_t v;
    double f;
    if (x->t == COLI__TV_INT || x->t == COLI__TV_BOOL) {
        *out = coli__tv_int(x->t == COLI__TV_INT ? x->i : x->b);
        return COLI_OK;
    }
    if (x->t == COLI__TV_FLOAT && isfinite(x->f) && fabs(x->f) < 9.2e18) {
        *out = coli__tv_int((int64_t)x->f);
        return COLI_OK;
    }
    if (x->t == COLI__TV_STR) {
        if (parse_int(x->s.p, x->s.n, &v)) {
            *out = coli__tv_int(v);
            return COLI_OK;
        }
        if (parse_float(x->s.p, x->s.n, &f) && isfinite(f) && fabs(f) < 9.2e18) {
            *out = coli__tv_int((int64_t)f);
            return COLI_OK;
        }
    }
    *out = def ? *def : coli__tv_int(0);
    return COLI_OK;
}

static coli_status f_float(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    (void)rt;
    const coli__tv *def = coli__targ(a, 0, "default");
    double f;
    if (coli__tv_is_num(x)) {
        *out = coli__tv_float(coli__tv_num(x));
        return COLI_OK;
    }
    if (x->t == COLI__TV_STR && parse_float(x->s.p, x->s.n, &f)) {
        *out = coli__tv_float(f);
        return COLI_OK;
    }
    *out = def ? *def : coli__tv_float(0.0);
    return COLI_OK;
}

static coli_status f_round(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    int64_t prec = 0;
    const coli__tv *p = coli__targ(a, 0, "precision"), *m = coli__targ(a, 1, "method");
    if (p)
        COLI_TRY(coli__targ_int(rt, p, "round", &prec));
    if (!coli__tv_is_num(x))
        return coli__trt_fail(rt, COLI_EINVAL, "round: expected a number, got %s", coli__tv_type_name(x));
    if (prec < -300 || prec > 300)
        return coli__trt_fail(rt, COLI_ERANGE, "round: precision out of range");
    double v = coli__tv_num(x);
    if (m && m->t == COLI__TV_STR && !(m->s.n == 6 && memcmp(m->s.p, "common", 6) == 0)) {
        double s = pow(10.0, (double)prec);
        if (m->s.n == 4 && memcmp(m->s.p, "ceil", 4) == 0)
            v = ceil(v * s) / s;
        else if (m->s.n == 5 && memcmp(m->s.p, "floor", 5) == 0)
            v = floor(v * s) / s;
        else
            return coli__trt_fail(rt, COLI_EINVAL, "method must be common, ceil or floor");
        *out = coli__tv_float(v);
        return COLI_OK;
    }
    if (x->t != COLI__TV_FLOAT && prec >= 0) {
        *out = coli__tv_int(x->t == COLI__TV_INT ? x->i : x->b);
        return COLI_OK;
    }
    if (isfinite(v) && prec >= 0 && fabs(v) < 4503599627370496.0) {
        /* printf rounds the exact binary value half to even, as Python's
         * round; from 2^52 up every double is whole and stays as it is. */
        char buf[512];
        snprintf(buf, sizeof buf, "%.*f", (int)prec, v);
        v = strtod(buf, NULL);
    } else if (isfinite(v) && prec < 0) {
        double s = pow(10.0, (double)-prec);
        v = nearbyint(v / s) * s;
    }
    *out = coli__tv_float(v);
    return COLI_OK;
}

static coli_status f_indent(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    coli__tv s, ind = coli__tv_strn("    ", 4), lines;
    COLI_TRY(coli__tv_to_str(rt, x, &s));
    const coli__tv *w = coli__targ(a, 0, "width");
    if (w && w->t == COLI__TV_STR) {
        ind = *w;
    } else if (w) {
        int64_t k = 0;
        COLI_TRY(coli__targ_int(rt, w, "indent", &k));
        if (k > 4096)
            return coli__trt_fail(rt, COLI_ERANGE, "indent: width beyond 4096");
        coli__tsb b = {0};
        COLI_TRY(coli__tsb_put(rt, &b, "", 0));
        for (int64_t i = 0; i < k; i++)
            COLI_TRY(coli__tsb_putc(rt, &b, ' '));
        ind = coli__tsb_value(&b);
    }
    int first = coli__targ_truthy(a, 1, "first", 0), blank = coli__targ_truthy(a, 2, "blank", 0);
    COLI_TRY(coli__tstr_splitlines(rt, &s, &lines));
    coli__tsb b = {0};
    COLI_TRY(coli__tsb_put(rt, &b, "", 0));
    if (first)
        COLI_TRY(coli__tsb_put(rt, &b, ind.s.p, ind.s.n));
    for (size_t i = 0; i < lines.l->n; i++) {
        const coli__tv *l = &lines.l->v[i];
        if (i) {
            COLI_TRY(coli__tsb_putc(rt, &b, '\n'));
            if (blank || l->s.n)
                COLI_TRY(coli__tsb_put(rt, &b, ind.s.p, ind.s.n));
        }
        COLI_TRY(coli__tsb_put(rt, &b, l->s.p, l->s.n));
    }
    /* Jinja appends a newline before splitting: a trailing one survives. */
    if (s.s.n && (s.s.p[s.s.n - 1] == '\n' || s.s.p[s.s.n - 1] == '\r')) {
        COLI_TRY(coli__tsb_putc(rt, &b, '\n'));
        if (blank)
            COLI_TRY(coli__tsb_put(rt, &b, ind.s.p, ind.s.n));
    }
    *out = coli__tsb_value(&b);
    return COLI_OK;
}

static coli_status f_escape(coli__trt *rt, const coli__tv *x, coli__tv *out)
{
    coli__tv s;
    COLI_TRY(coli__tv_to_str(rt, x, &s));
    coli__tsb b = {0};
    COLI_TRY(coli__tsb_put(rt, &b, "", 0));
    for (size_t i = 0; i < s.s.n; i++) {
        char c = s.s.p[i];
        const char *e = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&#34;"
                      : c == '\'' ? "&#39;" : NULL;
        if (e)
            COLI_TRY(coli__tsb_put(rt, &b, e, strlen(e)));
        else
            COLI_TRY(coli__tsb_putc(rt, &b, c));
    }
    *out = coli__tsb_value(&b);
    return COLI_OK;
}

static coli_status f_length(coli__trt *rt, const coli__tv *x, coli__tv *out)
{
    COLI_TRY(coli__trt_work(rt, x->t == COLI__TV_STR ? x->s.n : 0));
    switch (x->t) {
    case COLI__TV_STR:
        *out = coli__tv_int((int64_t)coli__utf8_count(x->s.p, x->s.n));
        return COLI_OK;
    case COLI__TV_LIST:
        *out = coli__tv_int((int64_t)x->l->n);
        return COLI_OK;
    case COLI__TV_DICT:
        *out = coli__tv_int((int64_t)x->d->n);
        return COLI_OK;
    case COLI__TV_UNDEF:
        *out = coli__tv_int(0);
        return COLI_OK;
    default:
        return coli__trt_fail(rt, COLI_EINVAL, "object of type '%s' has no len()", coli__tv_type_name(x));
    }
}

static coli_status f_dictsort(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    if (x->t != COLI__TV_DICT)
        return coli__trt_fail(rt, COLI_EINVAL, "dictsort: expected a dict, got %s", coli__tv_type_name(x));
    COLI_TRY(coli__tdict_items(rt, x->d, out));
    const coli__tv *by = coli__targ(a, 1, "by");
    int by_value = by && by->t == COLI__TV_STR && by->s.n == 5 && memcmp(by->s.p, "value", 5) == 0;
    size_t n = out->l->n;
    coli__tv *keys = coli__trt_alloc(rt, (n ? n : 1) * sizeof *keys);
    if (!keys)
        return rt->st;
    for (size_t i = 0; i < n; i++)
        COLI_TRY(sort_key(rt, &out->l->v[i].l->v[by_value], NULL, coli__targ_truthy(a, 0, "case_sensitive", 0),
                          &keys[i]));
    return merge_sort(rt, out->l->v, keys, n, coli__targ_truthy(a, 2, "reverse", 0));
}

static coli_status f_wordcount(coli__trt *rt, const coli__tv *x, coli__tv *out)
{
    coli__tv s;
    COLI_TRY(coli__tv_to_str(rt, x, &s));
    int64_t k = 0;
    int in = 0;
    for (size_t i = 0; i < s.s.n; i++) {
        unsigned char c = (unsigned char)s.s.p[i];
        int w = coli__tch_alnum(c) || c == '_';
        k += w && !in;
        in = w;
    }
    *out = coli__tv_int(k);
    return COLI_OK;
}

static coli_status f_reverse(coli__trt *rt, const coli__tv *x, coli__tv *out)
{
    coli__tv l;
    COLI_TRY(copy_list(rt, x, &l));
    for (size_t i = 0, j = l.l->n; i + 1 < j; i++, j--) {
        coli__tv t = l.l->v[i];
        l.l->v[i] = l.l->v[j - 1];
        l.l->v[j - 1] = t;
    }
    if (x->t != COLI__TV_STR) {
        *out = l;
        return COLI_OK;
    }
    coli__tv empty = coli__tv_strn("", 0);
    return coli__tstr_join(rt, &empty, &l, NULL, 0, out);
}

static coli_status str_filter(coli__trt *rt, const char *name, size_t n, const coli__tv *x, const coli__targs *a,
                              coli__tv *out)
{
    coli__tv s;
    COLI_TRY(coli__tv_to_str(rt, x, &s));
    if (coli__targ_is(name, n, "trim"))
        return coli__tstr_strip(rt, &s, coli__targ(a, 0, "chars"), 1, 1, out);
    if (coli__targ_is(name, n, "upper"))
        return coli__tstr_case(rt, &s, 1, out);
    if (coli__targ_is(name, n, "lower"))
        return coli__tstr_case(rt, &s, 0, out);
    if (coli__targ_is(name, n, "capitalize"))
        return coli__tstr_case(rt, &s, 2, out);
    if (coli__targ_is(name, n, "title"))
        return coli__tstr_case(rt, &s, 4, out);
    /* coli__tstr_replace */
    const coli__tv *o = coli__targ(a, 0, "old"), *w = coli__targ(a, 1, "new");
    if (!o || !w)
        return coli__trt_fail(rt, COLI_EINVAL, "replace needs old and new");
    coli__tv os;
    COLI_TRY(coli__tv_to_str(rt, o, &os));
    return coli__tstr_replace(rt, &s, &os, w, coli__targ(a, 2, "count"), out);
}

/* The filters an undefined value may go through (the others fail on it),
 * and those of strings (str_filter). */
static const char *const g_undefined_ok[] = {
    "list", "join", "items", "first", "select", "reject", "map", "selectattr", "rejectattr", "unique",
    "sort", "sum", "min", "max", "trim", "upper", "lower", "capitalize", "title", "escape",
    "e", "wordcount", "reverse", "indent", "replace", NULL,
};
static const char *const g_str_filters[] = {"trim", "upper", "lower", "capitalize", "title", "replace", NULL};

static int named(const char *name, size_t n, const char *const *list)
{
    for (; *list; list++)
        if (coli__targ_is(name, n, *list))
            return 1;
    return 0;
}

coli_status coli__tfilter(coli__trt *rt, const char *name, size_t n, const coli__tv *x, const coli__targs *a,
                          coli__tv *out)
{
    if (coli__targ_is(name, n, "default") || coli__targ_is(name, n, "d")) {
        const coli__tv *def = coli__targ(a, 0, "default_value");
        int use = x->t == COLI__TV_UNDEF || (coli__targ_truthy(a, 1, "boolean", 0) && !coli__tv_truthy(x));
        *out = use ? (def ? *def : coli__tv_strn("", 0)) : *x;
        return COLI_OK;
    }
    if (coli__targ_is(name, n, "length") || coli__targ_is(name, n, "count"))
        return f_length(rt, x, out);
    if (coli__targ_is(name, n, "string"))
        return coli__tv_to_str(rt, x, out);
    if (coli__targ_is(name, n, "safe")) {
        *out = *x;
        return COLI_OK;
    }
    if (coli__targ_is(name, n, "tojson"))
        return f_tojson(rt, x, a, out);
    if (coli__targ_is(name, n, "int"))
        return f_int(rt, x, a, out);
    if (coli__targ_is(name, n, "float"))
        return f_float(rt, x, a, out);
    if (coli__targ_is(name, n, "attr")) {
        const coli__tv *k = coli__targ(a, 0, "name");
        if (!k || k->t != COLI__TV_STR)
            return coli__trt_fail(rt, COLI_EINVAL, "attr needs a name");
        return coli__top_getattr(rt, x, k->s.p, k->s.n, out);
    }
    if (x->t == COLI__TV_UNDEF && !named(name, n, g_undefined_ok))
        return coli__top_undefined_error(rt, x);
    if (named(name, n, g_str_filters))
        return str_filter(rt, name, n, x, a, out);
    if (coli__targ_is(name, n, "first") || coli__targ_is(name, n, "last")) {
        coli__tv it;
        if (name[0] == 'l' && x->t != COLI__TV_LIST && x->t != COLI__TV_STR)
            return coli__trt_fail(rt, COLI_EINVAL, "last: expected a sequence, got %s", coli__tv_type_name(x));
        COLI_TRY(coli__top_iter(rt, x, &it));
        *out = it.l->n ? it.l->v[name[0] == 'f' ? 0 : it.l->n - 1] : coli__tv_undef(name[0] == 'f' ? "first" : "last");
        return COLI_OK;
    }
    if (coli__targ_is(name, n, "join")) {
        const coli__tv *sep = coli__targ(a, 0, "d");
        coli__tv s = coli__tv_strn("", 0);
        if (sep)
            COLI_TRY(coli__tv_to_str(rt, sep, &s));
        return coli__tstr_join(rt, &s, x, coli__targ(a, 1, "attribute"), 1, out);
    }
    if (coli__targ_is(name, n, "list"))
        return copy_list(rt, x, out);
    if (coli__targ_is(name, n, "reverse"))
        return f_reverse(rt, x, out);
    if (coli__targ_is(name, n, "sort"))
        return f_sort(rt, x, a, out);
    if (coli__targ_is(name, n, "unique"))
        return f_unique(rt, x, a, out);
    if (coli__targ_is(name, n, "map"))
        return f_map(rt, x, a, out);
    if (coli__targ_is(name, n, "select") || coli__targ_is(name, n, "reject"))
        return f_select(rt, x, a, name[0] == 's', 0, out);
    if (coli__targ_is(name, n, "selectattr") || coli__targ_is(name, n, "rejectattr"))
        return f_select(rt, x, a, name[0] == 's', 1, out);
    if (coli__targ_is(name, n, "abs")) {
        if (x->t == COLI__TV_FLOAT)
            *out = coli__tv_float(fabs(x->f));
        else if (x->t == COLI__TV_INT || x->t == COLI__TV_BOOL)
            return coli__top_unary(rt, (x->t == COLI__TV_INT ? x->i : x->b) < 0 ? COLI__OP_NEG : COLI__OP_POS, x, out);
        else
            return coli__trt_fail(rt, COLI_EINVAL, "bad operand type for abs(): '%s'", coli__tv_type_name(x));
        return COLI_OK;
    }
    if (coli__targ_is(name, n, "round"))
        return f_round(rt, x, a, out);
    if (coli__targ_is(name, n, "items")) {
        if (x->t == COLI__TV_UNDEF)
            return coli__tv_list_new(rt, 0, out);
        if (x->t != COLI__TV_DICT)
            return coli__trt_fail(rt, COLI_EINVAL, "items: expected a dict, got %s", coli__tv_type_name(x));
        return coli__tdict_items(rt, x->d, out);
    }
    if (coli__targ_is(name, n, "dictsort"))
        return f_dictsort(rt, x, a, out);
    if (coli__targ_is(name, n, "indent"))
        return f_indent(rt, x, a, out);
    if (coli__targ_is(name, n, "escape") || coli__targ_is(name, n, "e"))
        return f_escape(rt, x, out);
    if (coli__targ_is(name, n, "wordcount"))
        return f_wordcount(rt, x, out);
    if (coli__targ_is(name, n, "min") || coli__targ_is(name, n, "max"))
        return f_minmax(rt, x, a, name[1] == 'a', out);
    if (coli__targ_is(name, n, "sum"))
        return f_sum(rt, x, a, out);
    return coli__trt_fail(rt, COLI_EINVAL, "no filter named '%.*s'", (int)n, name);
}
