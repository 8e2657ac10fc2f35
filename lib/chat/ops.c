/* ops.c - operators and member access with Python's semantics. */
#include "chat/ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const dict_methods[] = {"items", "keys", "values", "get", "copy", "update", "pop",
                                           "popitem", "setdefault", "clear", NULL};
static const char *const list_methods[] = {"index", "count", "copy", "append", "extend", "insert", "pop",
                                           "remove", "clear", "sort", "reverse", NULL};
static const char *const str_methods[] = {"startswith", "endswith", "split", "rsplit", "strip", "lstrip",
                                          "rstrip", "upper", "lower", "title", "capitalize", "replace",
                                          "find", "rfind", "count", "join", "isdigit", "isalpha", "isalnum",
                                          "isspace", "isupper", "islower", "splitlines", NULL};
static const char *const loop_methods[] = {"cycle", NULL};

static const char *find_name(const char *const *list, const char *name, size_t n)
{
    for (size_t i = 0; list[i]; i++)
        if (strlen(list[i]) == n && memcmp(list[i], name, n) == 0)
            return list[i];
    return NULL;
}

coli__tv coli__top_missing(const coli__tv *obj, const char *name, size_t n)
{
    coli__tv u = coli__tv_undefn(name, n);
    u.tuple = (uint8_t)(obj->t + 1);
    return u;
}

coli_status coli__top_undefined_error(coli__trt *rt, const coli__tv *u)
{
    static const char *const kinds[] = {"", "Undefined", "None", "bool object", "int object", "float object",
                                        "str object", "list object", "dict object", "Namespace", "Macro",
                                        "function", "method", "LoopContext"};
    const char *name = u->s.p ? u->s.p : "value";
    int n = u->s.p ? (int)(u->s.n > 80 ? 80 : u->s.n) : 5;
    if (u->tuple == 0 || u->tuple >= sizeof kinds / sizeof kinds[0])
        return coli__trt_fail(rt, COLI_EINVAL, "'%.*s' is undefined", n, name);
    return coli__trt_fail(rt, COLI_EINVAL, "'%s' has no attribute '%.*s'", kinds[u->tuple], n, name);
}

static coli_status type_error(coli__trt *rt, const char *op, const coli__tv *a, const coli__tv *b)
{
    return coli__trt_fail(rt, COLI_EINVAL, "unsupported operand type(s) for %s: '%s' and '%s'", op,
                          coli__tv_type_name(a), coli__tv_type_name(b));
}

static int is_intlike(const coli__tv *v)
{
    return v->t == COLI__TV_INT || v->t == COLI__TV_BOOL;
}

static int64_t intval(const coli__tv *v)
{
    return v->t == COLI__TV_INT ? v->i : v->b;
}

static coli_status overflow(coli__trt *rt)
{
    return coli__trt_fail(rt, COLI_ERANGE, "integer result beyond 64 bits");
}

static coli_status repeat(coli__trt *rt, const coli__tv *seq, int64_t times, coli__tv *out)
{
    if (times < 0)
        times = 0;
    if (seq->t == COLI__TV_STR) {
        if (seq->s.n && (uint64_t)times > COLI__TPL_OUT_MAX / seq->s.n)
            return coli__trt_fail(rt, COLI_ERANGE, "a string would exceed %zu MiB", COLI__TPL_OUT_MAX >> 20);
        coli__tsb b = {0};
        for (int64_t i = 0; i < times; i++)
            COLI_TRY(coli__tsb_put(rt, &b, seq->s.p, seq->s.n));
        *out = coli__tsb_value(&b);
        return COLI_OK;
    }
    size_t n = seq->l->n;
    if (n && (uint64_t)times > COLI__TPL_MEM_MAX / sizeof(coli__tv) / n)
        return coli__trt_fail(rt, COLI_ERANGE, "a list would be too long");
    COLI_TRY(coli__tv_list_new(rt, n * (size_t)times, out));
    for (int64_t i = 0; i < times; i++)
        for (size_t j = 0; j < n; j++)
            COLI_TRY(coli__tlist_push(rt, out->l, seq->l->v[j]));
    out->tuple = seq->tuple;
    return COLI_OK;
}

static double py_fmod(double a, double b)
{
    double m = fmod(a, b);
    if (m != 0 && ((m < 0) != (b < 0)))
        m += b;
    return m;
}

static coli_status arith(coli__trt *rt, int op, const coli__tv *a, const coli__tv *b, coli__tv *out)
{
    static const char *const sym[] = {"+", "-", "*", "/", "//", "%", "**"};
    if (!coli__tv_is_num(a) || !coli__tv_is_num(b))
        return type_error(rt, sym[op], a, b);
    if (is_intlike(a) && is_intlike(b)) {
        int64_t x = intval(a), y = intval(b), r;
        switch (op) {
        case COLI__OP_ADD:
            if (__builtin_add_overflow(x, y, &r))
                return overflow(rt);
            *out = coli__tv_int(r);
            return COLI_OK;
        case COLI__OP_SUB:
            if (__builtin_sub_overflow(x, y, &r))
                return overflow(rt);
            *out = coli__tv_int(r);
            return COLI_OK;
        case COLI__OP_MUL:
            if (__builtin_mul_overflow(x, y, &r))
                return overflow(rt);
            *out = coli__tv_int(r);
            return COLI_OK;
        case COLI__OP_DIV:
            if (y == 0)
                return coli__trt_fail(rt, COLI_EINVAL, "division by zero");
            *out = coli__tv_float((double)x / (double)y);
            return COLI_OK;
        case COLI__OP_FLOORDIV:
        case COLI__OP_MOD:
            if (y == 0)
                return coli__trt_fail(rt, COLI_EINVAL, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1)
                return overflow(rt);
            {
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                *out = coli__tv_int(op == COLI__OP_MOD ? m : q);
            }
            return COLI_OK;
        case COLI__OP_POW:
            if (y >= 0) {
                int64_t acc = 1, base = x;
                while (y) {
                    if ((y & 1) && __builtin_mul_overflow(acc, base, &acc))
                        return overflow(rt);
                    y >>= 1;
                    if (y && __builtin_mul_overflow(base, base, &base))
                        return overflow(rt);
                }
                *out = coli__tv_int(acc);
                return COLI_OK;
            }
            if (x == 0)
                return coli__trt_fail(rt, COLI_EINVAL, "0.0 cannot be raised to a negative power");
            *out = coli__tv_float(pow((double)x, (double)y));
            return COLI_OK;
        default:
            break;
        }
    }
    double x = coli__tv_num(a), y = coli__tv_num(b);
    switch (op) {
    case COLI__OP_ADD:
        *out = coli__tv_float(x + y);
        break;
    case COLI__OP_SUB:
        *out = coli__tv_float(x - y);
        break;
    case COLI__OP_MUL:
        *out = coli__tv_float(x * y);
        break;
    case COLI__OP_DIV:
        if (y == 0)
            return coli__trt_fail(rt, COLI_EINVAL, "float division by zero");
        *out = coli__tv_float(x / y);
        break;
    case COLI__OP_FLOORDIV:
        if (y == 0)
            return coli__trt_fail(rt, COLI_EINVAL, "float floor division by zero");
        *out = coli__tv_float(floor(x / y));
        break;
    case COLI__OP_MOD:
        if (y == 0)
            return coli__trt_fail(rt, COLI_EINVAL, "float modulo");
        *out = coli__tv_float(py_fmod(x, y));
        break;
    default:
        if (x == 0 && y < 0)
            return coli__trt_fail(rt, COLI_EINVAL, "0.0 cannot be raised to a negative power");
        *out = coli__tv_float(pow(x, y));
        if (x < 0 && y != floor(y))
            return coli__trt_fail(rt, COLI_EINVAL, "complex results are not supported");
        break;
    }
    return COLI_OK;
}

/* Pads s to width characters (left-justified with minus). */
static coli_status put_padded(coli__trt *rt, coli__tsb *b, const char *s, size_t n, int64_t width, int minus,
                              char fill)
{
    int64_t pad = width - (int64_t)coli__utf8_count(s, n);
    for (; !minus && pad > 0; pad--)
        COLI_TRY(coli__tsb_putc(rt, b, fill));
    COLI_TRY(coli__tsb_put(rt, b, s, n));
    for (; pad > 0; pad--)
        COLI_TRY(coli__tsb_putc(rt, b, ' '));
    return COLI_OK;
}

/* One conversion of Python's "%" with its flags, width and precision. */
static coli_status format_one(coli__trt *rt, coli__tsb *b, char conv, const char *flags, int64_t width,
                              int64_t prec, const coli__tv *v)
{
    int minus = strchr(flags, '-') != NULL;
    if (conv == 's' || conv == 'r') {
        coli__tsb t = {0};
        COLI_TRY(coli__tsb_put(rt, &t, "", 0));
        COLI_TRY(conv == 's' ? coli__tv_str(rt, &t, v) : coli__tv_repr(rt, &t, v, 0));
        size_t n = t.n;
        if (prec >= 0) /* at most prec characters */
            for (size_t i = 0, k = 0; i < t.n; i++)
                if (((unsigned char)t.p[i] & 0xc0) != 0x80 && k++ == (size_t)prec) {
                    n = i;
                    break;
                }
        return put_padded(rt, b, t.p, n, width, minus, ' ');
    }
    if (!coli__tv_is_num(v))
        return coli__trt_fail(rt, COLI_EINVAL, "%%%c format: a real number is required, not %s", conv,
                              coli__tv_type_name(v));
    char spec[32], num[1400]; /* "%.999f" of 1e308 fits */
    int k = snprintf(spec, sizeof spec, "%%%s", flags);
    if (strchr("dixXo", conv)) {
        double f = coli__tv_num(v);
        if (v->t == COLI__TV_FLOAT && !(f > -9.2e18 && f < 9.2e18))
            return coli__trt_fail(rt, COLI_ERANGE, "%%%c format: %g is beyond 64 bits", conv, f);
        long long i = v->t == COLI__TV_FLOAT ? (long long)f : v->t == COLI__TV_INT ? (long long)v->i : v->b;
        snprintf(spec + k, sizeof spec - (size_t)k, "ll%c", conv == 'i' ? 'd' : conv);
        snprintf(num, sizeof num, spec, i);
    } else {
        snprintf(spec + k, sizeof spec - (size_t)k, ".%d%c", (int)(prec < 0 ? 6 : prec), conv);
        snprintf(num, sizeof num, spec, coli__tv_num(v));
    }
    char fill = strchr(flags, '0') && !minus ? '0' : ' ';
    if (fill == '0' && (num[0] == '-' || num[0] == '+' || num[0] == ' ')) {
        /* zero padding goes after the sign */
        COLI_TRY(coli__tsb_putc(rt, b, num[0]));
        return put_padded(rt, b, num + 1, strlen(num + 1), width - 1, 0, '0');
    }
    return put_padded(rt, b, num, strlen(num), width, minus, fill);
}

coli_status coli__top_format(coli__trt *rt, const coli__tv *fmt, const coli__tv *args, coli__tv *out)
{
    const coli__tv *items = args->t == COLI__TV_LIST && args->tuple ? args->l->v : args;
    size_t nitems = args->t == COLI__TV_LIST && args->tuple ? args->l->n : 1, used = 0;
    coli__tsb b = {0};
    COLI_TRY(coli__tsb_put(rt, &b, "", 0));
    const char *p = fmt->s.p, *end = fmt->s.p + fmt->s.n;
    while (p < end) {
        const char *pct = memchr(p, '%', (size_t)(end - p));
        if (!pct) {
            COLI_TRY(coli__tsb_put(rt, &b, p, (size_t)(end - p)));
            break;
        }
        COLI_TRY(coli__tsb_put(rt, &b, p, (size_t)(pct - p)));
        p = pct + 1;
        char flags[8] = "";
        size_t nf = 0;
        while (p < end && strchr("-+ 0#", *p) && *p && nf < sizeof flags - 1)
            flags[nf++] = *p++;
        int64_t width = 0, prec = -1;
        while (p < end && *p >= '0' && *p <= '9' && width < 100000)
            width = width * 10 + (*p++ - '0');
        if (p < end && *p == '.')
            for (p++, prec = 0; p < end && *p >= '0' && *p <= '9' && prec < 1000;)
                prec = prec * 10 + (*p++ - '0');
        if (width >= 100000 || prec >= 1000)
            return coli__trt_fail(rt, COLI_ERANGE, "%% format: width or precision too large");
        if (p >= end)
            return coli__trt_fail(rt, COLI_EINVAL, "incomplete format");
        char conv = *p++;
        if (conv == '%') {
            COLI_TRY(coli__tsb_putc(rt, &b, '%'));
            continue;
        }
        if (!strchr("srdixXofFeEgG", conv) || conv == '\0')
            return coli__trt_fail(rt, COLI_EINVAL, "unsupported format character '%c'", conv);
        if (used >= nitems)
            return coli__trt_fail(rt, COLI_EINVAL, "not enough arguments for format string");
        COLI_TRY(format_one(rt, &b, conv, flags, width, prec, &items[used++]));
    }
    int tuple = args->t == COLI__TV_LIST && args->tuple;
    /* A lone argument left over is an error too, unless it can be a mapping. */
    if (used < nitems && (tuple || (args->t != COLI__TV_LIST && args->t != COLI__TV_DICT)))
        return coli__trt_fail(rt, COLI_EINVAL, "not all arguments converted during string formatting");
    *out = coli__tsb_value(&b);
    return COLI_OK;
}

coli_status coli__top_binary(coli__trt *rt, int op, const coli__tv *a, const coli__tv *b, coli__tv *out)
{
    if (a->t == COLI__TV_UNDEF)
        return coli__top_undefined_error(rt, a);
    if (b->t == COLI__TV_UNDEF)
        return coli__top_undefined_error(rt, b);
    if (op == COLI__OP_ADD) {
        if (a->t == COLI__TV_STR && b->t == COLI__TV_STR) {
            coli__tsb s = {0};
            COLI_TRY(coli__tsb_put(rt, &s, a->s.p, a->s.n));
            COLI_TRY(coli__tsb_put(rt, &s, b->s.p, b->s.n));
            *out = coli__tsb_value(&s);
            return COLI_OK;
        }
        if (a->t == COLI__TV_LIST && b->t == COLI__TV_LIST && a->tuple == b->tuple) {
            COLI_TRY(coli__tv_list_new(rt, a->l->n + b->l->n, out));
            for (size_t i = 0; i < a->l->n; i++)
                COLI_TRY(coli__tlist_push(rt, out->l, a->l->v[i]));
            for (size_t i = 0; i < b->l->n; i++)
                COLI_TRY(coli__tlist_push(rt, out->l, b->l->v[i]));
            out->tuple = a->tuple;
            return COLI_OK;
        }
        if (a->t == COLI__TV_STR || b->t == COLI__TV_STR)
            return coli__trt_fail(rt, COLI_EINVAL, "can only concatenate str (not \"%s\") to str",
                                  coli__tv_type_name(a->t == COLI__TV_STR ? b : a));
    }
    if (op == COLI__OP_MUL) {
        if ((a->t == COLI__TV_STR || a->t == COLI__TV_LIST) && is_intlike(b))
            return repeat(rt, a, intval(b), out);
        if ((b->t == COLI__TV_STR || b->t == COLI__TV_LIST) && is_intlike(a))
            return repeat(rt, b, intval(a), out);
    }
    if (op == COLI__OP_MOD && a->t == COLI__TV_STR)
        return coli__top_format(rt, a, b, out);
    return arith(rt, op, a, b, out);
}

coli_status coli__top_unary(coli__trt *rt, int op, const coli__tv *a, coli__tv *out)
{
    if (a->t == COLI__TV_UNDEF)
        return coli__top_undefined_error(rt, a);
    if (!coli__tv_is_num(a))
        return coli__trt_fail(rt, COLI_EINVAL, "bad operand type for unary %s: '%s'", op == COLI__OP_NEG ? "-" : "+",
                              coli__tv_type_name(a));
    if (a->t == COLI__TV_FLOAT)
        *out = coli__tv_float(op == COLI__OP_NEG ? -a->f : a->f);
    else if (op == COLI__OP_NEG && intval(a) == INT64_MIN)
        return overflow(rt);
    else
        *out = coli__tv_int(op == COLI__OP_NEG ? -intval(a) : intval(a));
    return COLI_OK;
}

coli_status coli__top_contains(coli__trt *rt, const coli__tv *hay, const coli__tv *needle, int *res)
{
    *res = 0;
    switch (hay->t) {
    case COLI__TV_STR:
        if (needle->t != COLI__TV_STR)
            return coli__trt_fail(rt, COLI_EINVAL, "'in <string>' requires string as left operand, not %s",
                                  coli__tv_type_name(needle));
        COLI_TRY(coli__trt_work(rt, hay->s.n));
        if (needle->s.n == 0) {
            *res = 1;
        } else {
            for (size_t i = 0; i + needle->s.n <= hay->s.n; i++)
                if (memcmp(hay->s.p + i, needle->s.p, needle->s.n) == 0) {
                    *res = 1;
                    break;
                }
        }
        return COLI_OK;
    case COLI__TV_LIST:
        COLI_TRY(coli__trt_work(rt, hay->l->n));
        for (size_t i = 0; i < hay->l->n && !*res; i++)
            COLI_TRY(coli__tv_eq(rt, &hay->l->v[i], needle, res));
        return COLI_OK;
    case COLI__TV_DICT:
        COLI_TRY(coli__trt_work(rt, hay->d->n));
        *res = coli__tdict_get(hay->d, *needle) != NULL;
        return COLI_OK;
    case COLI__TV_UNDEF:
        return COLI_OK;
    default:
        return coli__trt_fail(rt, COLI_EINVAL, "argument of type '%s' is not iterable", coli__tv_type_name(hay));
    }
}

coli_status coli__top_compare(coli__trt *rt, int op, const coli__tv *a, const coli__tv *b, int *res)
{
    int c;
    switch (op) {
    case COLI__OP_EQ:
        return coli__tv_eq(rt, a, b, res);
    case COLI__OP_NE:
        COLI_TRY(coli__tv_eq(rt, a, b, res));
        *res = !*res;
        return COLI_OK;
    case COLI__OP_IN:
        return coli__top_contains(rt, b, a, res);
    case COLI__OP_NOTIN:
        COLI_TRY(coli__top_contains(rt, b, a, res));
        *res = !*res;
        return COLI_OK;
    default:
        break;
    }
    if ((a->t == COLI__TV_FLOAT && isnan(a->f)) || (b->t == COLI__TV_FLOAT && isnan(b->f))) {
        if (!coli__tv_is_num(a) || !coli__tv_is_num(b))
            return coli__tv_cmp(rt, a, b, &c);
        *res = 0;
        return COLI_OK;
    }
    COLI_TRY(coli__tv_cmp(rt, a, b, &c));
    *res = op == COLI__OP_LT ? c < 0 : op == COLI__OP_LE ? c <= 0 : op == COLI__OP_GT ? c > 0 : c >= 0;
    return COLI_OK;
}

static coli_status method(coli__trt *rt, const coli__tv *obj, const char *name, coli__tv *out)
{
    coli__tv *o = coli__trt_alloc(rt, sizeof *o);
    if (!o)
        return rt->st;
    *o = *obj;
    coli__tv m = {0};
    m.t = COLI__TV_METHOD;
    m.s.p = name;
    m.s.n = strlen(name);
    m.s.obj = o;
    *out = m;
    return COLI_OK;
}

static const char *const *methods_of(const coli__tv *obj)
{
    switch (obj->t) {
    case COLI__TV_DICT: return dict_methods;
    case COLI__TV_LIST: return list_methods;
    case COLI__TV_STR: return str_methods;
    case COLI__TV_LOOP: return loop_methods;
    default: return NULL;
    }
}

static int name_is(const char *name, size_t n, const char *s)
{
    return strlen(s) == n && memcmp(name, s, n) == 0;
}

static coli_status loop_attr(const coli__tv *obj, const char *name, size_t n, coli__tv *out)
{
    const coli__tloop *L = obj->p;
    int64_t len = (int64_t)L->items->n, i = L->index0;
    if (name_is(name, n, "index"))
        *out = coli__tv_int(i + 1);
    else if (name_is(name, n, "index0"))
        *out = coli__tv_int(i);
    else if (name_is(name, n, "first"))
        *out = coli__tv_bool(i == 0);
    else if (name_is(name, n, "last"))
        *out = coli__tv_bool(i == len - 1);
    else if (name_is(name, n, "length"))
        *out = coli__tv_int(len);
    else if (name_is(name, n, "revindex"))
        *out = coli__tv_int(len - i);
    else if (name_is(name, n, "revindex0"))
        *out = coli__tv_int(len - i - 1);
    else if (name_is(name, n, "depth"))
        *out = coli__tv_int(1);
    else if (name_is(name, n, "depth0"))
        *out = coli__tv_int(0);
    else if (name_is(name, n, "previtem"))
        *out = i > 0 ? L->items->v[i - 1] : coli__tv_undef("previtem");
    else if (name_is(name, n, "nextitem"))
        *out = i + 1 < len ? L->items->v[i + 1] : coli__tv_undef("nextitem");
    else
        *out = coli__top_missing(obj, name, n);
    return COLI_OK;
}

coli_status coli__top_getattr(coli__trt *rt, const coli__tv *obj, const char *name, size_t n, coli__tv *out)
{
    if (obj->t == COLI__TV_UNDEF)
        return coli__top_undefined_error(rt, obj);
    const char *const *ms = methods_of(obj);
    const char *m = ms ? find_name(ms, name, n) : NULL;
    if (m)
        return method(rt, obj, m, out);
    if (obj->t == COLI__TV_LOOP)
        return loop_attr(obj, name, n, out);
    if (obj->t == COLI__TV_DICT || obj->t == COLI__TV_NS) {
        COLI_TRY(coli__trt_work(rt, obj->d->n));
        const coli__tv *v = coli__tdict_gets(obj->d, name, n);
        if (v) {
            *out = *v;
            return COLI_OK;
        }
    }
    *out = coli__top_missing(obj, name, n);
    return COLI_OK;
}

/* Byte offsets of the characters of s, and one past the end: n + 1 entries. */
static coli_status char_offsets(coli__trt *rt, const coli__tv *s, size_t **offs, size_t *count)
{
    size_t n = coli__utf8_count(s->s.p, s->s.n);
    size_t *o = coli__trt_alloc(rt, (n + 1) * sizeof *o);
    if (!o)
        return rt->st;
    size_t k = 0;
    for (size_t i = 0; i < s->s.n; i++)
        if (((unsigned char)s->s.p[i] & 0xc0) != 0x80)
            o[k++] = i;
    o[k] = s->s.n;
    *offs = o;
    *count = n;
    return COLI_OK;
}

coli_status coli__top_getitem(coli__trt *rt, const coli__tv *obj, const coli__tv *key, coli__tv *out)
{
    if (obj->t == COLI__TV_UNDEF)
        return coli__top_undefined_error(rt, obj);
    if (obj->t == COLI__TV_DICT || obj->t == COLI__TV_NS) {
        COLI_TRY(coli__trt_work(rt, obj->d->n));
        const coli__tv *v = coli__tdict_get(obj->d, *key);
        if (v) {
            *out = *v;
            return COLI_OK;
        }
    } else if ((obj->t == COLI__TV_LIST || obj->t == COLI__TV_STR) && is_intlike(key)) {
        int64_t i = intval(key);
        if (obj->t == COLI__TV_LIST) {
            int64_t len = (int64_t)obj->l->n;
            if (i < 0)
                i += len;
            if (i >= 0 && i < len) {
                *out = obj->l->v[i];
                return COLI_OK;
            }
        } else {
            size_t *offs, len;
            COLI_TRY(char_offsets(rt, obj, &offs, &len));
            if (i < 0)
                i += (int64_t)len;
            if (i >= 0 && i < (int64_t)len) {
                *out = coli__tv_strn(obj->s.p + offs[i], offs[i + 1] - offs[i]);
                return COLI_OK;
            }
        }
        *out = coli__tv_undef("[index]");
        out->tuple = (uint8_t)(obj->t + 1);
        return COLI_OK;
    }
    if (key->t == COLI__TV_STR)
        return coli__top_getattr(rt, obj, key->s.p, key->s.n, out);
    *out = coli__top_missing(obj, "[key]", 5);
    return COLI_OK;
}

static coli_status slice_index(coli__trt *rt, const coli__tv *v, int64_t *out, int *given)
{
    *given = 0;
    if (!v || v->t == COLI__TV_NONE)
        return COLI_OK;
    if (!is_intlike(v))
        return coli__trt_fail(rt, COLI_EINVAL, "slice indices must be integers or None");
    *out = intval(v);
    *given = 1;
    return COLI_OK;
}

coli_status coli__top_slice(coli__trt *rt, const coli__tv *obj, const coli__tv *start, const coli__tv *stop,
                            const coli__tv *step, coli__tv *out)
{
    if (obj->t == COLI__TV_UNDEF)
        return coli__top_undefined_error(rt, obj);
    if (obj->t != COLI__TV_LIST && obj->t != COLI__TV_STR)
        return coli__trt_fail(rt, COLI_EINVAL, "'%s' object is not subscriptable", coli__tv_type_name(obj));
    int64_t a = 0, b = 0, s = 1;
    int ga, gb, gs;
    COLI_TRY(slice_index(rt, start, &a, &ga));
    COLI_TRY(slice_index(rt, stop, &b, &gb));
    COLI_TRY(slice_index(rt, step, &s, &gs));
    if (s == 0)
        return coli__trt_fail(rt, COLI_EINVAL, "slice step cannot be zero");
    size_t *offs = NULL, len;
    if (obj->t == COLI__TV_STR)
        COLI_TRY(char_offsets(rt, obj, &offs, &len));
    else
        len = obj->l->n;
    int64_t L = (int64_t)len;
    /* Python's slice adjustment. */
    if (!ga)
        a = s < 0 ? L - 1 : 0;
    else if (a < 0)
        a = a + L < 0 ? (s < 0 ? -1 : 0) : a + L;
    else if (a >= L)
        a = s < 0 ? L - 1 : L;
    if (!gb)
        b = s < 0 ? -1 : L;
    else if (b < 0)
        b = b + L < 0 ? (s < 0 ? -1 : 0) : b + L;
    else if (b >= L)
        b = s < 0 ? L - 1 : L;
    if (obj->t == COLI__TV_STR) {
        coli__tsb sb = {0};
        COLI_TRY(coli__tsb_put(rt, &sb, "", 0));
        for (int64_t i = a; s > 0 ? i < b : i > b; i += s)
            COLI_TRY(coli__tsb_put(rt, &sb, obj->s.p + offs[i], offs[i + 1] - offs[i]));
        *out = coli__tsb_value(&sb);
        return COLI_OK;
    }
    COLI_TRY(coli__tv_list_new(rt, 0, out));
    for (int64_t i = a; s > 0 ? i < b : i > b; i += s)
        COLI_TRY(coli__tlist_push(rt, out->l, obj->l->v[i]));
    out->tuple = obj->tuple;
    return COLI_OK;
}

coli_status coli__top_iter(coli__trt *rt, const coli__tv *v, coli__tv *out)
{
    switch (v->t) {
    case COLI__TV_LIST:
        *out = *v;
        out->tuple = 0;
        return COLI_OK;
    case COLI__TV_UNDEF:
        return coli__tv_list_new(rt, 0, out);
    case COLI__TV_DICT:
        COLI_TRY(coli__tv_list_new(rt, v->d->n, out));
        for (size_t i = 0; i < v->d->n; i++)
            COLI_TRY(coli__tlist_push(rt, out->l, v->d->k[i]));
        return COLI_OK;
    case COLI__TV_STR: {
        size_t *offs, n;
        COLI_TRY(char_offsets(rt, v, &offs, &n));
        COLI_TRY(coli__tv_list_new(rt, n, out));
        for (size_t i = 0; i < n; i++)
            COLI_TRY(coli__tlist_push(rt, out->l, coli__tv_strn(v->s.p + offs[i], offs[i + 1] - offs[i])));
        return COLI_OK;
    }
    default:
        return coli__trt_fail(rt, COLI_EINVAL, "'%s' object is not iterable", coli__tv_type_name(v));
    }
}
