/* sized.h - the one rule for public structs that begin with size_t
 * struct_size (internal; colibri.h's preamble states it for callers).
 *
 * Output structs: the library writes min(struct_size, sizeof) bytes and
 * leaves the caller's struct_size as it was, so a caller built with an
 * older, shorter struct gets only the fields it knows.
 * Input structs: a struct_size below the struct's first released size is
 * refused; from there up to sizeof, the missing trailing fields keep their
 * defaults; beyond sizeof (a newer caller), the bytes this library does
 * not know must be zero, i.e. at their defaults. */
#ifndef COLI_SIZED_H
#define COLI_SIZED_H

#include <stddef.h>
#include <string.h>

#include "base/error.h"

/* The struct_size of a size-prefixed struct. */
static inline size_t coli__sized_size(const void *p)
{
    size_t s;
    memcpy(&s, p, sizeof s);
    return s;
}

/* Whether dst can receive an output struct: not NULL, and its struct_size
 * holds at least the struct_size field. */
int coli__sized_out_ok(const void *dst);

/* Copies the fields of full (size bytes) that fit in dst's struct_size into
 * dst; dst's struct_size is left as the caller set it. */
void coli__sized_out(void *dst, const void *full, size_t size);

/* Fills dst (struct_size bytes of a size-byte struct) from defaults and
 * sets its struct_size: the *_params_init functions. */
void coli__sized_init(void *dst, const void *defaults, size_t size, size_t struct_size);

/* Reads an input struct: *dst (size bytes) holds the defaults; src (NULL:
 * keep them) is copied over them as far as its struct_size goes, and
 * dst->struct_size becomes size. COLI_EINVAL naming the struct (name) if
 * src's struct_size is below first, the size of its first version, or if
 * it is larger than size with a nonzero byte past size. */
coli_status coli__sized_in(void *dst, const void *src, size_t size, size_t first, const char *name,
                           coli__err *err);

#endif
