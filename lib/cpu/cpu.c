/* cpu.c - instruction-set detection with cpuid and xgetbv (see cpu.h).
 *
 * Written with <cpuid.h> rather than __builtin_cpu_supports, whose feature
 * names differ between compilers (clang 14/15 know no "f16c"). */
#include <pthread.h>

#include "cpu/cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

/* XCR0: the register state the OS saves on a context switch. */
static unsigned long long xcr0(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

/* AMX-TILE and AMX-INT8 (cpuid 7.0 edx bits 24, 25) and the tile state in
 * XCR0 (bits 17, 18), on Linux, where lib/cpu/quant_amx.c asks for the
 * process's permission to use it on the first product. Elsewhere, no AMX. */
static int amx_usable(unsigned edx7)
{
#if defined(__linux__) && defined(SYS_arch_prctl)
    return (edx7 & (1u << 24)) && (edx7 & (1u << 25)) && ((xcr0() >> 17) & 3) == 3;
#else
    (void)edx7;
    return 0;
#endif
}

/* The vendor "AuthenticAMD" (leaf 0: ebx, edx, ecx). */
static int amd(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
}

/* The family of leaf 1's eax: the base plus the extended field where the
 * base is 0Fh. */
static unsigned family(unsigned eax1)
{
    unsigned f = (eax1 >> 8) & 0xf;
    return f == 0xf ? f + ((eax1 >> 20) & 0xff) : f;
}

static unsigned detect(void)
{
    unsigned a, b, c, d, f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    if (amd())
        f |= COLI_CPU_AMD | (family(a) >= 0x1a ? COLI_CPU_AMD_1AH : 0);
    if (c & bit_SSE4_2)
        f |= COLI_CPU_SSE42;
    /* AVX state (xmm and ymm) must be enabled by the OS: OSXSAVE, then XCR0 bits 1-2 */
    if (!(c & bit_OSXSAVE) || !(c & bit_AVX) || (xcr0() & 0x6) != 0x6)
        return f;
    if (c & bit_FMA)
        f |= COLI_CPU_FMA;
    if (c & bit_F16C)
        f |= COLI_CPU_F16C;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return f;
    if (b & bit_AVX2)
        f |= COLI_CPU_AVX2;
    /* AVX-512 also needs the opmask and zmm state: XCR0 bits 5-7 */
    if ((b & bit_AVX512F) && (b & bit_AVX512BW) && (b & bit_AVX512VL) && (xcr0() & 0xe0) == 0xe0) {
        f |= COLI_CPU_AVX512;
        if (c & bit_AVX512VNNI)
            f |= COLI_CPU_AVX512VNNI;
        if (amx_usable(d))
            f |= COLI_CPU_AMX;
    }
    return f;
}
#else
static unsigned detect(void)
{
    return 0;
}
#endif

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static unsigned g_features;

static void init(void)
{
    g_features = detect();
}

unsigned coli__cpu_features(void)
{
    pthread_once(&g_once, init);
    return g_features;
}
