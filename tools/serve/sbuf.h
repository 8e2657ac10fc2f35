/* sbuf.h - a growable byte buffer, always NUL-terminated once used. */
#ifndef COLI_SERVE_SBUF_H
#define COLI_SERVE_SBUF_H

#include <stddef.h>

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

/* Appends s[0..n): 0, or -1 when memory runs out (nothing is added). */
int sbuf_add(sbuf *b, const char *s, size_t n);
int sbuf_str(sbuf *b, const char *s);
void sbuf_free(sbuf *b);

#endif
