/* log.h - the caller's log callback (internal). Nothing is printed unless
 * the caller installed a callback. */
#ifndef COLI_LOG_H
#define COLI_LOG_H

#include "colibri/colibri.h"

typedef struct coli__logger {
    coli_log_fn fn;
    void *user;
    coli_log_level max_level;
} coli__logger;

void coli__log(const coli__logger *lg, coli_log_level level, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
