/* tokcheck.h - checks shared by the two tokenizer fuzz targets. */
#ifndef COLI_TOKCHECK_H
#define COLI_TOKCHECK_H

#include <stddef.h>

#include "io/tokenizer.h"

/* Encodes text[0..n) (valid UTF-8) into *ids, which the caller frees:
 * encoding must succeed (a failure still needs a message, and is allowed
 * only when may_fail) and every id must be below the vocab size.
 * Returns 1 if it succeeded. */
int tc_encode(const coli__tokenizer *tok, const char *text, size_t n, int add_special, int may_fail,
              coli__ids *ids);
/* Decodes ids, which must succeed and give well-formed UTF-8, into *out
 * (the caller frees it). */
void tc_decode(const coli__tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
               coli__buf *out);

#endif
