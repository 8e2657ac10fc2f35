/* log.c - formats a message only when a callback will receive it. */
#include <stdarg.h>
#include <stdio.h>

#include "base/log.h"

void coli__log(const coli__logger *lg, coli_log_level level, const char *fmt, ...)
{
    if (!lg || !lg->fn || level > lg->max_level)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    lg->fn(lg->user, level, buf);
}
