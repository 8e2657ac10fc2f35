/* mask16.h - the lane mask of rows [lo, hi) of a 16-row block (internal;
 * the x16 kernels of lib/cpu/quant_avx512.c and lib/cpu/quant_amx.c). */
#ifndef COLI_MASK16_H
#define COLI_MASK16_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

static inline __mmask16 coli__lanes16(int lo, int hi)
{
    lo = lo < 0 ? 0 : lo;
    hi = hi > 16 ? 16 : hi;
    return hi <= lo ? 0 : (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
}
#endif

#endif
