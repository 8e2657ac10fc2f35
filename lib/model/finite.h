/* finite.h - finding NaN and infinite values in stored weights (internal). */
#ifndef COLI_FINITE_H
#define COLI_FINITE_H

#include <stddef.h>

#include "base/dtype.h"

/* Index of the first NaN or infinity among the n values of type dt (F32,
 * BF16 or F16) at p, or n if all are finite (or dt is another type). Reads
 * bits only, so it raises no floating-point exception. */
size_t coli__first_nonfinite(coli__dtype dt, const void *p, size_t n);

#endif
