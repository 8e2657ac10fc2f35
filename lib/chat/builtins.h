/* builtins.h - the filters, tests, methods and global functions a template
 * can call (docs/templates.md lists them): methods and global functions in
 * builtins.c, str's methods in strings.c, filters and tests in filters.c. */
#ifndef COLI_CHAT_BUILTINS_H
#define COLI_CHAT_BUILTINS_H

#include "chat/ops.h"

/* The arguments of a call: positional, then keyword. */
typedef struct coli__targs {
    const coli__tv *pos;
    size_t npos;
    const char *const *names;
    const coli__tv *kw;
    size_t nkw;
} coli__targs;

/* The global function called name, as a FUNC value; 0 if there is none. */
int coli__tglobal(const char *name, size_t n, coli__tv *out);
coli_status coli__tcall_func(coli__trt *rt, const coli__tv *fn, const coli__targs *a, coli__tv *out);
coli_status coli__tcall_method(coli__trt *rt, const coli__tv *m, const coli__targs *a, coli__tv *out);
coli_status coli__tfilter(coli__trt *rt, const char *name, size_t n, const coli__tv *x, const coli__targs *a,
                          coli__tv *out);
/* 0 if there is no such filter (checked at compile time). */
int coli__tfilter_exists(const char *name, size_t n);
coli_status coli__ttest(coli__trt *rt, const char *name, size_t n, const coli__tv *x, const coli__targs *a,
                        int *res);
int coli__ttest_exists(const char *name, size_t n);
/* d.items(): a list of [key, value] pairs in d's order. */
coli_status coli__tdict_items(coli__trt *rt, const coli__tdict *d, coli__tv *out);

#endif
