/* ops.h - what Jinja's operators do to values: arithmetic, comparison,
 * membership, and reading members (obj.name, obj[key], obj[a:b:c]). */
#ifndef COLI_CHAT_OPS_H
#define COLI_CHAT_OPS_H

#include "chat/value.h"
#include "chat/parse.h"

/* The loop variable of a for loop (loop.index and the rest). */
typedef struct coli__tloop {
    const coli__tlist *items;
    int64_t index0;
} coli__tloop;

/* op is a COLI__OP_ of parse.h. */
coli_status coli__top_binary(coli__trt *rt, int op, const coli__tv *a, const coli__tv *b, coli__tv *out);
coli_status coli__top_unary(coli__trt *rt, int op, const coli__tv *a, coli__tv *out);
/* EQ .. NOTIN. */
coli_status coli__top_compare(coli__trt *rt, int op, const coli__tv *a, const coli__tv *b, int *res);
/* fmt % args, as Python's printf-style formatting: flags, width,
 * precision and the conversions s r d i x X o f F e E g G and %%. */
coli_status coli__top_format(coli__trt *rt, const coli__tv *fmt, const coli__tv *args, coli__tv *out);
/* needle in hay, as Python's "in". */
coli_status coli__top_contains(coli__trt *rt, const coli__tv *hay, const coli__tv *needle, int *res);

/* obj.name: a dict's methods first, then its members; undefined if none.
 * Fails on an undefined obj, as Jinja does. */
coli_status coli__top_getattr(coli__trt *rt, const coli__tv *obj, const char *name, size_t n, coli__tv *out);
/* obj[key]: members and indexes first, then methods. */
coli_status coli__top_getitem(coli__trt *rt, const coli__tv *obj, const coli__tv *key, coli__tv *out);
/* obj[start:stop:step] of a list or string; NULL parts are omitted. */
coli_status coli__top_slice(coli__trt *rt, const coli__tv *obj, const coli__tv *start, const coli__tv *stop,
                            const coli__tv *step, coli__tv *out);
/* The items a for loop visits: a list's, a dict's keys, a string's
 * characters; none for undefined. */
coli_status coli__top_iter(coli__trt *rt, const coli__tv *v, coli__tv *out_list);
/* The error for using an undefined value. */
coli_status coli__top_undefined_error(coli__trt *rt, const coli__tv *u);
/* An undefined for a missing member of obj. */
coli__tv coli__top_missing(const coli__tv *obj, const char *name, size_t n);

#endif
