/* apierr.h - an error for the client: the HTTP status, OpenAI's type, the
 * request field at fault and a message, written as the error envelope
 * {"error":{"message","type","code","param"}}. */
#ifndef COLI_SERVE_APIERR_H
#define COLI_SERVE_APIERR_H

#include <stdio.h>

typedef struct apierr {
    int status;
    const char *type;   /* "invalid_request_error", ... */
    char param[64];     /* the field at fault; "" for none */
    char message[512];
} apierr;

/* Fills e; the type follows from the status. Returns -1 (for "return
 * api_fail(...)"). */
int api_fail(apierr *e, int status, const char *param, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* Writes the envelope of e. */
void api_error_json(FILE *f, const apierr *e);

#endif
