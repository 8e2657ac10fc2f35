/* error.c - status names and strings (the table in colibri.h), and the
 * detail messages that travel with a status. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"

COLI_API const char *coli_strerror(int status)
{
    switch (status) {
#define COLI_STATUS_MSG_(name, val, msg) \
    case val:                            \
        return msg;
        COLI_STATUS_MAP(COLI_STATUS_MSG_)
#undef COLI_STATUS_MSG_
    }
    return "unknown status";
}

COLI_API const char *coli_status_name(int status)
{
    switch (status) {
#define COLI_STATUS_NAME_(name, val, msg) \
    case val:                             \
        return "COLI_" #name;
        COLI_STATUS_MAP(COLI_STATUS_NAME_)
#undef COLI_STATUS_NAME_
    }
    return "COLI_UNKNOWN";
}

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
