/*
 * diag.h - the coli tool's messages on standard error: plain lines
 * ("coli: warning: ..."), or, once a command asks for it (coli serve
 * --format json), one JSON object a line, so that a log reader never
 * meets a line it cannot parse.
 *
 *     diag d;
 *     FILE *f = diag_begin(&d, DIAG_WARNING);
 *     fprintf(f, "coli: warning: ...\n");
 *     diag_end(&d);
 *
 * In JSON mode each line written between the two calls becomes
 * {"time":"<RFC 3339, UTC>","level":"...","msg":"..."}, the "coli: " or
 * "coli serve: " in front and a "warning: " or "error: " after it dropped
 * (the level says it). A message is written whole, never interleaved with
 * another thread's.
 */
#ifndef COLI_TOOLS_DIAG_H
#define COLI_TOOLS_DIAG_H

#include <stddef.h>
#include <stdio.h>

typedef enum diag_level { DIAG_ERROR, DIAG_WARNING, DIAG_INFO } diag_level;

typedef struct diag {
    FILE *f;
    char *buf;
    size_t len;
    diag_level level;
} diag;

/* JSON lines from now on (1) or plain text (0, the default). */
void diag_set_json(int on);
int diag_is_json(void);

/* The stream to write one message to; diag_end writes it out. */
FILE *diag_begin(diag *d, diag_level level);
void diag_end(diag *d);

/* A whole message at once, as printf; a newline is added when missing. */
void diag_printf(diag_level level, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* For records with fields of their own (the server's request lines):
 * writes {"time":"...","level":"..." to f, to be continued by the caller
 * with ,"name":value members and closed with "}\n". */
void diag_json_head(FILE *f, diag_level level);

/* The time now as RFC 3339 in UTC with milliseconds, into buf (>= 32 bytes). */
void diag_time(char *buf, size_t cap);

#endif /* COLI_TOOLS_DIAG_H */
