/* targs.h - reading the arguments of a template's call, for the files of
 * builtins (builtins.c, strings.c, filters.c). */
#ifndef COLI_CHAT_TARGS_H
#define COLI_CHAT_TARGS_H

#include <string.h>

#include "chat/builtins.h"

/* Whether name[0..n) is s. */
static inline int coli__targ_is(const char *name, size_t n, const char *s)
{
    return strlen(s) == n && memcmp(name, s, n) == 0;
}

/* Positional argument i, else the keyword argument called kw (may be NULL). */
static inline const coli__tv *coli__targ(const coli__targs *a, size_t i, const char *kw)
{
    if (i < a->npos)
        return &a->pos[i];
    for (size_t k = 0; kw && k < a->nkw; k++)
        if (strcmp(a->names[k], kw) == 0)
            return &a->kw[k];
    return NULL;
}

static inline int coli__targ_truthy(const coli__targs *a, size_t i, const char *kw, int def)
{
    const coli__tv *v = coli__targ(a, i, kw);
    return v ? coli__tv_truthy(v) : def;
}

static inline coli_status coli__targ_str(coli__trt *rt, const coli__tv *v, const char *what)
{
    if (v->t == COLI__TV_UNDEF)
        return coli__top_undefined_error(rt, v);
    if (v->t != COLI__TV_STR)
        return coli__trt_fail(rt, COLI_EINVAL, "%s: expected a string, got %s", what, coli__tv_type_name(v));
    return COLI_OK;
}

static inline coli_status coli__targ_int(coli__trt *rt, const coli__tv *v, const char *what, int64_t *out)
{
    if (v->t == COLI__TV_INT || v->t == COLI__TV_BOOL) {
        *out = v->t == COLI__TV_INT ? v->i : v->b;
        return COLI_OK;
    }
    return coli__trt_fail(rt, COLI_EINVAL, "%s: expected an integer, got %s", what, coli__tv_type_name(v));
}

#endif
