/* cpu.h - instruction-set features of the running CPU (internal).
 *
 * One detection for every kernel table: cpuid for what the CPU implements,
 * xgetbv for the register state the operating system saves. Both are
 * needed: a CPU with AVX-512 under an OS that does not save the zmm
 * registers must not run AVX-512 code. */
#ifndef COLI_CPU_H
#define COLI_CPU_H

enum {
    COLI_CPU_AVX2 = 1u << 0,
    COLI_CPU_FMA = 1u << 1,
    COLI_CPU_F16C = 1u << 2,
    COLI_CPU_AVX512 = 1u << 3,     /* AVX-512 F, BW and VL together */
    COLI_CPU_AVX512VNNI = 1u << 4,
    COLI_CPU_SSE42 = 1u << 5,      /* the crc32 instruction (lib/io/crc32c.c) */
    COLI_CPU_AMX = 1u << 6,        /* AMX-TILE and AMX-INT8, the tile state granted (Linux) */
    /* Not instruction sets but traits kernels tune for: an AMD CPU, and
     * one of family 1Ah or later (Zen 5). A one-token product over memory
     * runs faster with software prefetch on Zen 5 and on Intel's Xeon with
     * 16 threads, slower on Zen 4 (lib/cpu/quant_avx512.c). */
    COLI_CPU_AMD_1AH = 1u << 7,
    COLI_CPU_AMD = 1u << 8
};

/* The COLI_CPU_* bits this CPU and OS support (0 off x86-64). */
unsigned coli__cpu_features(void);

#endif
