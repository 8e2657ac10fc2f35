/* dtype.h - the element types of stored and loaded matrices (internal).
 *
 * Shared by the file reader, the CPU kernels and the GPU tier, so that none
 * of them depends on another's header. docs/formats.md defines the
 * quantized ones. Plain C, also included by lib/gpu/backend.cu. */
#ifndef COLI_DTYPE_H
#define COLI_DTYPE_H

typedef enum coli__dtype {
    COLI_DT_F32 = 0,
    COLI_DT_F16 = 1,
    COLI_DT_BF16 = 2,
    COLI_DT_OTHER = 3, /* a valid safetensors dtype we cannot compute with (I8, F64...) */
    /* In memory only: the quantized formats of docs/formats.md. */
    COLI_DT_Q8 = 4,
    COLI_DT_Q4 = 5,
    COLI_DT_Q2 = 6,
    /* Stored only: FP8 e4m3 with block scales (DeepSeek-V3's checkpoints;
     * docs/formats.md, "FP8 checkpoints"), widened where it is read. */
    COLI_DT_F8E4M3 = 7
} coli__dtype;

/* Whether dt is one of the quantized formats (quants, scales, minimums). */
static inline int coli__dtype_is_quant(coli__dtype dt)
{
    return dt == COLI_DT_Q8 || dt == COLI_DT_Q4 || dt == COLI_DT_Q2;
}

/* "f32", "f16", "bf16", "q8", "q4", "q2"; "?" for any other. */
const char *coli__dtype_name(coli__dtype dt);

#endif
