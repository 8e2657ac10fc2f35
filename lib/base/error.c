/* error.c - detail messages that travel with a status. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"

coli_status coli__fail(coli__err *err, coli_status st, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        /* vsnprintf truncates and always NUL-terminates a non-empty buffer. */
        if (vsnprintf(err->msg, sizeof err->msg, fmt, ap) < 0)
            err->msg[0] = '\0';
        va_end(ap);
    }
    return st;
}

void coli__err_clear(coli__err *err)
{
    if (err != NULL)
        err->msg[0] = '\0';
}

void coli__init_sized(void *dst, const void *defaults, size_t size, size_t struct_size)
{
    if (!dst || struct_size < sizeof(size_t))
        return;
    memcpy(dst, defaults, struct_size < size ? struct_size : size);
    memcpy(dst, &struct_size, sizeof struct_size);
}
