/* builtins.c - the methods of str, list, dict and loop values, and the
 * global functions (range, dict, namespace, raise_exception,
 * strftime_now), with the behaviour of Jinja 3.1 and Python; str's own
 * methods are strings.c's, filters and tests filters.c's. */
#include "chat/builtins.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/strings.h"
#include "chat/targs.h"

enum { FN_RAISE = 1, FN_STRFTIME, FN_NAMESPACE, FN_RANGE, FN_DICT };

/* ---- dicts, lists, loops ---- */

coli_status coli__tdict_items(coli__trt *rt, const coli__tdict *d, coli__tv *out)
{
    COLI_TRY(coli__tv_list_new(rt, d->n, out));
    for (size_t i = 0; i < d->n; i++) {
        coli__tv pair;
        COLI_TRY(coli__tv_list_new(rt, 2, &pair));
        pair.tuple = 1;
        pair.l->v[0] = d->k[i];
        pair.l->v[1] = d->v[i];
        pair.l->n = 2;
        COLI_TRY(coli__tlist_push(rt, out->l, pair));
    }
    return COLI_OK;
}

static coli_status unsafe(coli__trt *rt, const char *m, const coli__tv *obj)
{
    return coli__trt_fail(rt, COLI_EINVAL, "access to attribute '%s' of '%s' object is unsafe.", m,
                          coli__tv_type_name(obj));
}

coli_status coli__tcall_method(coli__trt *rt, const coli__tv *mv, const coli__targs *a, coli__tv *out)
{
    const coli__tv *obj = mv->s.obj;
    const char *m = mv->s.p;
    size_t n = mv->s.n;
    switch (obj->t) {
    case COLI__TV_STR:
        return coli__tstr_method(rt, obj, m, a, out);
    case COLI__TV_DICT:
        if (coli__targ_is(m, n, "items"))
            return coli__tdict_items(rt, obj->d, out);
        if (coli__targ_is(m, n, "keys") || coli__targ_is(m, n, "values")) {
            COLI_TRY(coli__tv_list_new(rt, obj->d->n, out));
            for (size_t i = 0; i < obj->d->n; i++)
                COLI_TRY(coli__tlist_push(rt, out->l, m[0] == 'k' ? obj->d->k[i] : obj->d->v[i]));
            return COLI_OK;
        }
        if (coli__targ_is(m, n, "get")) {
            const coli__tv *k = coli__targ(a, 0, NULL), *def = coli__targ(a, 1, NULL);
            if (!k)
                return coli__trt_fail(rt, COLI_EINVAL, "get expected at least 1 argument, got 0");
            const coli__tv *v = coli__tdict_get(obj->d, *k);
            *out = v ? *v : def ? *def : coli__tv_none();
            return COLI_OK;
        }
        if (coli__targ_is(m, n, "copy")) {
            *out = *obj;
            return COLI_OK;
        }
        return unsafe(rt, m, obj);
    case COLI__TV_LIST:
        if (coli__targ_is(m, n, "index") || coli__targ_is(m, n, "count")) {
            const coli__tv *x = coli__targ(a, 0, NULL);
            if (!x)
                return coli__trt_fail(rt, COLI_EINVAL, "%s takes exactly one argument", m);
            int64_t k = 0;
            for (size_t i = 0; i < obj->l->n; i++) {
                int eq;
                COLI_TRY(coli__tv_eq(rt, &obj->l->v[i], x, &eq));
                if (eq && m[0] == 'i') {
                    *out = coli__tv_int((int64_t)i);
                    return COLI_OK;
                }
                k += eq;
            }
            if (m[0] == 'i')
                return coli__trt_fail(rt, COLI_EINVAL, "list.index(x): x not in list");
            *out = coli__tv_int(k);
            return COLI_OK;
        }
        if (coli__targ_is(m, n, "copy")) {
            *out = *obj;
            return COLI_OK;
        }
        return unsafe(rt, m, obj);
    case COLI__TV_LOOP:
        if (a->npos == 0)
            return coli__trt_fail(rt, COLI_EINVAL, "no items for cycling given");
        *out = a->pos[((const coli__tloop *)obj->p)->index0 % (int64_t)a->npos];
        return COLI_OK;
    default:
        return coli__trt_fail(rt, COLI_EINVAL, "'%s' object has no method '%s'", coli__tv_type_name(obj), m);
    }
}

/* ---- global functions ---- */

int coli__tglobal(const char *name, size_t n, coli__tv *out)
{
    static const char *const names[] = {"raise_exception", "strftime_now", "namespace", "range", "dict"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (coli__targ_is(name, n, names[i])) {
            coli__tv v = {0};
            v.t = COLI__TV_FUNC;
            v.i = (int64_t)i + 1;
            *out = v;
            return 1;
        }
    return 0;
}

static coli_status fn_range(coli__trt *rt, const coli__targs *a, coli__tv *out)
{
    int64_t start = 0, stop = 0, step = 1;
    if (a->npos == 0 || a->npos > 3)
        return coli__trt_fail(rt, COLI_EINVAL, "range expected 1 to 3 arguments, got %zu", a->npos);
    if (a->npos == 1) {
        COLI_TRY(coli__targ_int(rt, &a->pos[0], "range", &stop));
    } else {
        COLI_TRY(coli__targ_int(rt, &a->pos[0], "range", &start));
        COLI_TRY(coli__targ_int(rt, &a->pos[1], "range", &stop));
        if (a->npos == 3)
            COLI_TRY(coli__targ_int(rt, &a->pos[2], "range", &step));
    }
    if (step == 0)
        return coli__trt_fail(rt, COLI_EINVAL, "range() arg 3 must not be zero");
    double count = step > 0 ? ceil(((double)stop - (double)start) / (double)step)
                            : ceil(((double)start - (double)stop) / (double)-step);
    if (count > 1e6) /* the sandbox's MAX_RANGE is 100000; this is looser but bounded */
        return coli__trt_fail(rt, COLI_ERANGE, "range too big");
    COLI_TRY(coli__tv_list_new(rt, count > 0 ? (size_t)count : 0, out));
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        COLI_TRY(coli__tlist_push(rt, out->l, coli__tv_int(i)));
    return COLI_OK;
}

coli_status coli__tcall_func(coli__trt *rt, const coli__tv *fn, const coli__targs *a, coli__tv *out)
{
    switch (fn->i) {
    case FN_RAISE: {
        const coli__tv *m = coli__targ(a, 0, "message");
        coli__tv s = coli__tv_strn("", 0);
        if (m)
            COLI_TRY(coli__tv_to_str(rt, m, &s));
        return coli__trt_fail(rt, COLI_EINVAL, "%.*s", (int)(s.s.n > 400 ? 400 : s.s.n), s.s.p);
    }
    case FN_STRFTIME: {
        const coli__tv *f = coli__targ(a, 0, NULL);
        if (!f)
            return coli__trt_fail(rt, COLI_EINVAL, "strftime_now needs a format");
        COLI_TRY(coli__targ_str(rt, f, "strftime_now"));
        char fmt[256], buf[512];
        if (f->s.n >= sizeof fmt)
            return coli__trt_fail(rt, COLI_EINVAL, "strftime_now: format too long");
        memcpy(fmt, f->s.p, f->s.n);
        fmt[f->s.n] = '\0';
        time_t now = time(NULL);
        struct tm tm;
        if (!localtime_r(&now, &tm))
            return coli__trt_fail(rt, COLI_EINVAL, "strftime_now: no local time");
        size_t k = f->s.n ? strftime(buf, sizeof buf, fmt, &tm) : 0;
        return coli__tv_strdup(rt, buf, k, out);
    }
    case FN_NAMESPACE:
    case FN_DICT:
        COLI_TRY(coli__tv_dict_new(rt, 0, out));
        if (a->npos > 1 || (a->npos == 1 && a->pos[0].t != COLI__TV_DICT))
            return coli__trt_fail(rt, COLI_EINVAL, "%s() takes a dict and keyword arguments",
                                  fn->i == FN_DICT ? "dict" : "namespace");
        if (a->npos == 1)
            for (size_t i = 0; i < a->pos[0].d->n; i++)
                COLI_TRY(coli__tdict_set(rt, out->d, a->pos[0].d->k[i], a->pos[0].d->v[i]));
        for (size_t i = 0; i < a->nkw; i++)
            COLI_TRY(coli__tdict_set(rt, out->d, coli__tv_strn(a->names[i], strlen(a->names[i])), a->kw[i]));
        if (fn->i == FN_NAMESPACE)
            out->t = COLI__TV_NS;
        return COLI_OK;
    case FN_RANGE:
        return fn_range(rt, a, out);
    default:
        return coli__trt_fail(rt, COLI_EINVAL, "not callable");
    }
}
