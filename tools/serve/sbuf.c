/* sbuf.c - growable byte buffers (sbuf.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "sbuf.h"

#include <stdlib.h>
#include <string.h>

int sbuf_add(sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = 2 * (b->n + n + 1);
        char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

int sbuf_str(sbuf *b, const char *s)
{
    return sbuf_add(b, s, strlen(s));
}

void sbuf_free(sbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}
