/* error.h - detail messages that travel with a status (internal).
 *
 * lib/base/ is the bottom layer: what every other folder says (statuses
 * and their messages, the log callback, element types and their names,
 * environment variables, versioned structs). It includes nothing of lib/
 * but itself (docs/architecture.md). */
#ifndef COLI_ERROR_H
#define COLI_ERROR_H

#include <stdarg.h>
#include "colibri/colibri.h"

#define COLI_ERRMSG_MAX 512

/* Holds the detail of the last failure of an object. */
typedef struct coli__err {
    char msg[COLI_ERRMSG_MAX];
} coli__err;

/* Formats a message into err (if not NULL) and returns st. */
coli_status coli__fail(coli__err *err, coli_status st, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Clears the message. */
void coli__err_clear(coli__err *err);

/* Keep the error path one line. */
#define COLI_TRY(expr)                           \
    do {                                         \
        coli_status coli_try_st_ = (expr);       \
        if (coli_try_st_ != COLI_OK)             \
            return coli_try_st_;                 \
    } while (0)

#endif
