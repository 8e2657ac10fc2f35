/* finite.c - the scan behind coli__first_nonfinite.
 *
 * A value is NaN or infinite when its exponent bits are all ones. Whole
 * blocks are tested first with a fixed-length loop that compilers
 * vectorise at -O2 (a read of the weights runs at memory speed); the exact
 * index is then found in the block that failed. */
#include <stdint.h>

#include "model/finite.h"

#define BLOCK 64

#define DEFINE_SCAN(name, type, expmask)                                           \
    static size_t name(const type *p, size_t n)                                    \
    {                                                                              \
        size_t i = 0;                                                              \
        for (; i + BLOCK <= n; i += BLOCK) {                                       \
            type acc = 0;                                                          \
            for (int j = 0; j < BLOCK; j++)                                        \
                acc |= (type)((p[i + j] & (expmask)) == (expmask));                \
            if (acc)                                                               \
                break;                                                             \
        }                                                                          \
        for (; i < n; i++)                                                         \
            if ((p[i] & (expmask)) == (expmask))                                   \
                return i;                                                          \
        return n;                                                                  \
    }

DEFINE_SCAN(scan_f32, uint32_t, 0x7f800000u)
DEFINE_SCAN(scan_bf16, uint16_t, 0x7f80u)
DEFINE_SCAN(scan_f16, uint16_t, 0x7c00u)
DEFINE_SCAN(scan_f8, uint8_t, 0x7fu) /* e4m3: S.1111.111 is its NaN, and it has no infinity */

size_t coli__first_nonfinite(coli__dtype dt, const void *p, size_t n)
{
    switch (dt) {
    case COLI_DT_F32:
        return scan_f32(p, n);
    case COLI_DT_BF16:
        return scan_bf16(p, n);
    case COLI_DT_F16:
        return scan_f16(p, n);
    case COLI_DT_F8E4M3:
        return scan_f8(p, n);
    default:
        return n;
    }
}
