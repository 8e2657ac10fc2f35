/*
 * errors.c - how the coli tool reports a failure of the library (see
 * errors.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "errors.h"

#include <colibri/colibri.h>

#include <stdio.h>

/* Reports a failure of the library and returns 1. */
int runtime_error(int status, const char *detail)
{
    if (detail != NULL && detail[0] != '\0')
        fprintf(stderr, "coli: %s: %s\n", coli_strerror(status), detail);
    else
        fprintf(stderr, "coli: %s\n", coli_strerror(status));
    return 1;
}
