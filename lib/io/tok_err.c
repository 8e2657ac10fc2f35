/* tok_err.c - the tokenizer's failures: every message names the file. */
#include "io/tok_impl.h"

#include <stdarg.h>
#include <stdio.h>

coli_status coli__tok_fail(const coli__tokenizer *t, coli__err *err, coli_status st,
                           const char *fmt, ...)
{
    char msg[COLI_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return coli__fail(err, st, "%s: %s", t && t->path ? t->path : "tokenizer", msg);
}

coli_status coli__tok_oom(const coli__tokenizer *t, coli__err *err)
{
    return coli__tok_fail(t, err, COLI_ENOMEM, "out of memory in the tokenizer");
}
