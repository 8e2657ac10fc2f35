/* crc32c.c - CRC-32C: reflected polynomial 0x82f63b78, initial value and
 * final xor 0xffffffff (iSCSI, ext4, the SSE4.2 crc32 instruction). The
 * portable path is slicing-by-8 over tables built once. */
#include <pthread.h>
#include <string.h>

#include "cpu/cpu.h"
#include "io/crc32c.h"

static uint32_t g_tab[8][256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void build(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        g_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            g_tab[t][i] = (g_tab[t - 1][i] >> 8) ^ g_tab[0][g_tab[t - 1][i] & 0xff];
}

static uint32_t soft(uint32_t c, const unsigned char *p, size_t n)
{
    pthread_once(&g_once, build);
    while (n >= 8) {
        uint32_t lo = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        lo ^= c;
        c = g_tab[7][lo & 0xff] ^ g_tab[6][(lo >> 8) & 0xff] ^ g_tab[5][(lo >> 16) & 0xff] ^ g_tab[4][lo >> 24] ^
            g_tab[3][hi & 0xff] ^ g_tab[2][(hi >> 8) & 0xff] ^ g_tab[1][(hi >> 16) & 0xff] ^ g_tab[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ g_tab[0][(c ^ *p++) & 0xff];
    return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t hard(uint32_t c, const unsigned char *p, size_t n)
{
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = _mm_crc32_u64(c64, v);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--)
        c = _mm_crc32_u8(c, *p++);
    return c;
}
#endif

uint32_t coli__crc32c(uint32_t crc, const void *p, size_t n)
{
    uint32_t c = ~crc;
#if defined(__x86_64__) && defined(__GNUC__)
    if (coli__cpu_features() & COLI_CPU_SSE42)
        return ~hard(c, p, n);
#endif
    return ~soft(c, p, n);
}
