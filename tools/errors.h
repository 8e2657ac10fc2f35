/*
 * errors.h - how the coli tool reports a failure of the library. A file of
 * its own so that every command file can report one without calling up
 * into coli.c (usage errors are the parser's: usage_error in options.h).
 */
#ifndef COLI_TOOLS_ERRORS_H
#define COLI_TOOLS_ERRORS_H

/* Prints "coli: <coli_strerror(status)>: <detail>" on stderr (no ": <detail>"
 * when detail is NULL or empty); returns 1. */
int runtime_error(int status, const char *detail);

#endif /* COLI_TOOLS_ERRORS_H */
