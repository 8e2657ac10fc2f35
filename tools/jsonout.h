/*
 * jsonout.h - the pieces of JSON that the coli tool's commands write on
 * their own (the objects themselves are written with printf by each
 * command, so that their member order is plain in the code).
 */
#ifndef COLI_TOOLS_JSONOUT_H
#define COLI_TOOLS_JSONOUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Writes s as a JSON string. */
void json_string(FILE *f, const char *s, size_t len);
/* Writes ids as a JSON array of numbers. */
void json_ids(FILE *f, const int32_t *ids, size_t n);
/* Writes v with the printf format fmt, or null if v is not finite. */
void json_real(FILE *f, double v, const char *fmt);

#endif /* COLI_TOOLS_JSONOUT_H */
