/* quant_amx.c - AMX-INT8 products of many tokens with q8 and q4 matrices in
 * the x16 layout (internal).
 *
 * A tile multiply adds int8 products exactly in int32, so it computes the
 * isum_g of docs/formats.md ("The product") as the vector kernels do; the
 * float part that follows is theirs, lane = row: f = f32(isum) * (D * s_g)
 * with one rounding per operation, P_{g mod 8} += f, then the tree. Only
 * where the integers come from differs, so every bit is the same.
 *
 * An x16 record's quants are already what a tile multiply wants as its
 * second operand (B: 8 rows of 64 bytes, row k = columns 4k..4k+3 of the
 * 16 weight rows, as dwords): q8 loads straight from the matrix; q4 is
 * unpacked once per group into signed nibbles (u - 8). The first operand
 * (A) is 16 tokens' 32 activations of the group, loaded from the
 * activation rows with their stride; C[token][row] is then the group's
 * isum of 16 tokens by 16 rows, one tile per 16 tokens.
 *
 * The float part of a (token, group) is 4 vector operations for 16 rows;
 * the tile unit does the group's 512 products per token meanwhile. Fewer
 * than 16 tokens take one tile of as many rows. A pass costs about the
 * same from 1 to 8 tokens (each group's tile product, store and reload
 * follow one another), so below AMX_MIN_TOK tokens, and for the row
 * layout and q2, this table is the AVX-512 one.
 *
 * The tile state must be granted to the process first: Linux allocates
 * its 8 KiB per thread only for a process that asks (arch_prctl
 * ARCH_REQ_XCOMP_PERM), and faults one that does not. The first product
 * on the tiles asks, once for the process; refused, every product takes
 * the AVX-512 path (the same bits). Each call loads its tile configuration
 * and releases the tiles on return, so a thread holds them only inside a
 * product. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/mask16.h"
#include "cpu/quant.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#define T_AMX "avx2,f16c,avx512f,avx512bw,avx512vl,amx-tile,amx-int8"
#define INL static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")
/* Keeps a product from fusing with the next addition (see quant_x86.h). */
#define KEEP512(v) __asm__("" : "+v"(v))

/* Fewest tokens for the tile path. A 384 x 1024 expert on one core of an
 * Intel Xeon, tiles against the AVX-512 kernels (docs/performance.md), us:
 * q4 8 tokens 21.5 / 25.8 in cache, 33.0 / 33.8 from memory; q8 16.3 /
 * 26.2 and 41.1 / 45.2. With 4 tokens the AVX-512 pairs win. */
#define AMX_MIN_TOK 8
/* Token tiles (of 16) per pass over a row block: their partial sums,
 * TT * 8 KiB, stay in L1 with the block's quants. */
#define TT 4
/* Vectors from one partial sum's run of P to the next: the TT * 16 tokens
 * and a pad, so that the runs are not 4 KiB apart (a load would then seem
 * to depend on the store of the run before). */
#define PSTRIDE (TT * 16 + 2)

/* Bytes ahead of a group's quants that a pass asks for: without it, a
 * matrix streamed from memory (the dense products of a few streams decoded
 * together) leaves each group's tile and vector loads waiting, as it did
 * the AVX-512 pairs before theirs (quant_avx512.c, x16_prefetch). */
#define AMX_PF_BYTES 2048

/* The 64-byte operand of LDTILECFG (palette 1). */
typedef struct tilecfg {
    uint8_t palette, start_row, zero[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

/* tmm0..3: C, m tokens x 16 rows of int32; tmm4, tmm5: A, m tokens x 32
 * int8; tmm6, tmm7: B, 8 x 64 bytes (even and odd groups). m is 16, or
 * the token count of a product of fewer tokens (one tile of m rows). */
static void cfg_make(tilecfg *c, int m)
{
    memset(c, 0, sizeof *c);
    c->palette = 1;
    for (int i = 0; i < 4; i++) {
        c->rows[i] = (uint8_t)m;
        c->colsb[i] = 64;
    }
    for (int i = 4; i < 6; i++) {
        c->rows[i] = (uint8_t)m;
        c->colsb[i] = 32;
    }
    for (int i = 6; i < 8; i++) {
        c->rows[i] = 8;
        c->colsb[i] = 64;
    }
}

/* GCC's tile-load intrinsic is an asm statement that does not tell the
 * compiler it reads memory, and its LDTILECFG says it reads 8 of the 64
 * bytes: stores that only a tile load reads could be dropped or moved past
 * it. A compiler barrier before each tile load, and our own LDTILECFG with
 * the whole configuration as its operand, keep them. (Tile stores declare
 * their memory clobber.) */
#define BEFORE_TILE_LOAD() __asm__ volatile("" ::: "memory")

__attribute__((target(T_AMX))) INL void load_config(const tilecfg *c)
{
    __asm__ volatile("ldtilecfg %0" : : "m"(*c));
}


/* Tile numbers are immediates: the switches below spell out each case. */
#define TILE_CASES(X)                                                                                           \
    X(0, 0, 4, 6) X(1, 1, 5, 6) X(2, 2, 4, 6) X(3, 3, 5, 6) X(4, 0, 4, 7) X(5, 1, 5, 7) X(6, 2, 4, 7) X(7, 3, 5, 7)

/* C tile j += A (m tokens x 32 bytes at a) times B (tmm6 for an even
 * group, tmm7 for an odd one). A alternates between tmm4 and tmm5 so that
 * the next load need not wait for this product. */
__attribute__((target(T_AMX))) INL void tile_mul(int j, int odd, const int8_t *a)
{
#define MUL_CASE(n, tc, ta, tb)                                                                                 \
    case n:                                                                                                     \
        BEFORE_TILE_LOAD();                                                                                     \
        _tile_loadd(ta, a, 32);                                                                                 \
        _tile_dpbssd(tc, ta, tb);                                                                               \
        break;
    switch (j + 4 * odd) {
        TILE_CASES(MUL_CASE)
    default:
        break;
    }
#undef MUL_CASE
}

/* Stores C tile j at c (m rows of 64 bytes) and zeroes it. */
__attribute__((target(T_AMX))) INL void tile_out(int j, int32_t *c)
{
    switch (j) {
    case 0:
        _tile_stored(0, c, 64);
        _tile_zero(0);
        break;
    case 1:
        _tile_stored(1, c, 64);
        _tile_zero(1);
        break;
    case 2:
        _tile_stored(2, c, 64);
        _tile_zero(2);
        break;
    default:
        _tile_stored(3, c, 64);
        _tile_zero(3);
        break;
    }
}

/* q4: group quants q as the signed values u - 8 in B's order, at buf (512
 * bytes): row 2k = the low nibbles of step k (columns 8k..8k+3), row 2k+1
 * the high ones. */
__attribute__((target(T_AMX))) INL void unpack_q4(const uint8_t *q, int8_t *buf)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
    UNROLL for (int k = 0; k < 4; k++) {
        __m512i v = _mm512_loadu_si512((const void *)(q + 64 * k));
        _mm512_store_si512((void *)(buf + 128 * k), _mm512_sub_epi8(_mm512_and_si512(v, m4), eight));
        _mm512_store_si512((void *)(buf + 128 * k + 64),
                           _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), eight));
    }
}

/* Asks for the n bytes (a group's share of the block) AMX_PF_BYTES past q:
 * a prefetch never faults, so the address may lie past the matrix (it is
 * formed as an integer). Speed only. */
INL void amx_prefetch(const uint8_t *q, size_t n)
{
    for (size_t o = 0; o < n; o += 64)
        __builtin_prefetch((const void *)((uintptr_t)q + AMX_PF_BYTES + o), 0, 1);
}

/* Loads B for a group (tmm6 even, tmm7 odd) from 8 rows of 64 bytes. */
__attribute__((target(T_AMX))) INL void load_b(int odd, const void *b)
{
    BEFORE_TILE_LOAD();
    if (odd)
        _tile_loadd(7, b, 64);
    else
        _tile_loadd(6, b, 64);
}

/* The float part of group g for token tile j (m tokens): P[g mod 8][j][t]
 * += f32(isum) * (D * s_g), lane = row (c: the tile's isums, D: the
 * group's scales). */
__attribute__((target(T_AMX))) INL void fpart(const int32_t *c, __m512 D, const float *s, int ng, int g, int st,
                                              int j, int m, __m512 *P)
{
    const float *sj = s + (size_t)st * (size_t)ng + g;
    __m512 *Pj = P + (size_t)(g & 7) * PSTRIDE + (size_t)j * 16;
    UNROLL for (int t = 0; t < m; t++) {
        __m512 ds = _mm512_mul_ps(D, _mm512_set1_ps(sj[(size_t)t * (size_t)ng]));
        KEEP512(ds);
        __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)(c + 16 * t))), ds);
        KEEP512(f);
        /* the first group of a partial sum adds to +0, not to memory */
        Pj[t] = _mm512_add_ps(g < 8 ? _mm512_setzero_ps() : Pj[t], f);
    }
}

/* Rows of block blk (rows 16b..16b+15, lanes km stored) for the nt token
 * tiles starting at tokens st[0..nt), whose activations are a (tile
 * after tile, group after group, 512 bytes each). P: a run per partial
 * sum (PSTRIDE vectors apart) of TT * 16 tokens x 16 rows, so that a
 * group's updates are one run of memory.
 *
 * Software-pipelined so that the tile unit and the vector units work at
 * once: in step g, the products of group g are interleaved with the float
 * part of group g - 1, tile by tile (a tile product is long; behind it the
 * core keeps only so many instructions in flight), and their results are
 * read one step after they are stored (a load of what a tile store just
 * wrote waits for the store to leave the core). q4's B is unpacked one
 * step ahead for the same reason. */
__attribute__((target(T_AMX))) INL void amx_pass(int q4, int m, const uint8_t *blk, int type, int group, int ng,
                                                 const int8_t *a, const float *s, const int *st, int nt, __m512 *P,
                                                 int32_t *cbuf, int8_t *bbuf, float *y, size_t ys, int row0,
                                                 __mmask16 km)
{
    for (int k = ng; k < 8; k++) /* partial sums no group reaches */
        for (int i = 0; i < TT * 16; i++)
            P[k * PSTRIDE + i] = _mm512_setzero_ps();
    const uint8_t *rec, *q, *prev = NULL;
    const size_t share = coli__q_x16_block_bytes((coli__dtype)type, group, 32 * ng) / (size_t)ng;
    coli__q_x16_locate((coli__dtype)type, group, blk, 0, &rec, &q);
    if (q4)
        unpack_q4(q, bbuf);
    for (int g = 0; g < ng; g++) {
        const int odd = g & 1;
        int32_t *c = cbuf + (size_t)odd * TT * 256, *cp = cbuf + (size_t)!odd * TT * 256;
        const __m512 Dp = prev ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)prev))
                               : _mm512_setzero_ps();
        load_b(odd, q4 ? (const void *)(bbuf + 512 * odd) : (const void *)q);
        prev = rec;
        amx_prefetch(q, share);
        if (g + 1 < ng) {
            coli__q_x16_locate((coli__dtype)type, group, blk, g + 1, &rec, &q);
            if (q4)
                unpack_q4(q, bbuf + 512 * !odd);
        }
        UNROLL for (int j = 0; j < TT; j++)
            if (j < nt) {
                tile_mul(j, odd, a + ((size_t)j * (size_t)ng + (size_t)g) * 32 * (size_t)m);
                if (j > 0)
                    tile_out(j - 1, c + 256 * (j - 1));
                if (g > 0)
                    fpart(cp + 256 * j, Dp, s, ng, g - 1, st[j], j, m, P);
            }
        tile_out(nt - 1, c + 256 * (nt - 1));
    }
    const __m512 Dl = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)prev));
    for (int j = 0; j < nt; j++)
        fpart(cbuf + (size_t)((ng - 1) & 1) * TT * 256 + 256 * j, Dl, s, ng, ng - 1, st[j], j, m, P);
    for (int j = 0; j < nt; j++)
        for (int t = 0; t < m; t++) {
            const __m512 *v = P + (size_t)j * 16 + (size_t)t;
#define PK(k) v[(k) * PSTRIDE]
            __m512 o = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(PK(0), PK(4)), _mm512_add_ps(PK(2), PK(6))),
                                     _mm512_add_ps(_mm512_add_ps(PK(1), PK(5)), _mm512_add_ps(PK(3), PK(7))));
#undef PK
            _mm512_mask_storeu_ps(y + (size_t)(st[j] + t) * ys + (size_t)row0, km, o);
        }
}

/* What the table needs once: the AVX-512 table it falls back on (and
 * whose activation quantization it uses), the tile permission, and the
 * key of each thread's activation buffer. */
static const coli__qkernels *g_x512;
static pthread_once_t g_once = PTHREAD_ONCE_INIT, g_perm_once = PTHREAD_ONCE_INIT;
static int g_perm, g_key_ok;
static pthread_key_t g_key;

/* A thread's buffer: a cache line holding its size, then the data. */
typedef struct tbuf {
    size_t cap;
    unsigned char pad[64 - sizeof(size_t)];
} tbuf;

static void init_once(void)
{
    g_x512 = coli__q_kernels_avx512();
    g_key_ok = pthread_key_create(&g_key, free) == 0; /* freed when the thread ends */
}

static void ask_permission(void)
{
#ifdef SYS_arch_prctl
    enum { ARCH_REQ_XCOMP_PERM_ = 0x1023, XFEATURE_XTILEDATA_ = 18 };
    g_perm = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM_, XFEATURE_XTILEDATA_) == 0;
#endif
}

/* This thread's activation buffer of at least n bytes, kept for its next
 * products; NULL when it cannot be had. */
static int8_t *thread_buffer(size_t n)
{
    if (!g_key_ok)
        return NULL;
    tbuf *b = pthread_getspecific(g_key);
    if (b && b->cap >= n)
        return (int8_t *)(b + 1);
    tbuf *nb = aligned_alloc(64, (sizeof *nb + n + 63) / 64 * 64);
    if (!nb || pthread_setspecific(g_key, nb) != 0) {
        free(nb);
        return NULL;
    }
    free(b);
    nb->cap = n;
    return (int8_t *)(nb + 1);
}

/* Returns 0 (nothing done) without the tile permission or a buffer. */
__attribute__((target(T_AMX))) static int amx_x16(const coli__qmat *w, int r0, int r1, int n_tok, const int8_t *p,
                                                  const float *s, float *y, size_t ys)
{
    const int q4 = w->type == COLI_DT_Q4, ng = w->cols / 32;
    pthread_once(&g_perm_once, ask_permission);
    if (!g_perm)
        return 0;
    /* the activations of a pass's token tiles, tile by tile and group by
     * group (512 contiguous bytes an A tile), so that a tile load reads 8
     * cache lines in order, not 16 rows a matrix row apart */
    int8_t *abuf = thread_buffer((size_t)TT * 16 * (size_t)w->cols);
    if (!abuf)
        return 0;
    _Alignas(64) __m512 P[PSTRIDE * 8];
    _Alignas(64) int32_t cbuf[2 * TT * 256];
    _Alignas(64) int8_t bbuf[1024];
    /* fewer than 16 tokens: one tile of m rows */
    const int m = n_tok < 16 ? n_tok : 16;
    tilecfg cfg;
    cfg_make(&cfg, m);
    load_config(&cfg); /* which zeroes every tile */
    const size_t bb = coli__q_x16_block_bytes(w->type, w->group, w->cols);
    /* token tiles: m tokens each, the last one ending at n_tok (it may
     * overlap the one before: those tokens are computed twice, the same
     * bits) */
    const int ntile = (n_tok + 15) / 16;
    for (int j0 = 0; j0 < ntile; j0 += TT) {
        int st[TT], nt = ntile - j0 < TT ? ntile - j0 : TT;
        for (int j = 0; j < nt; j++) {
            st[j] = 16 * (j0 + j) + m <= n_tok ? 16 * (j0 + j) : n_tok - m;
            for (int g = 0; g < ng; g++)
                for (int t = 0; t < m; t++)
                    memcpy(abuf + (((size_t)j * (size_t)ng + (size_t)g) * (size_t)m + (size_t)t) * 32,
                           p + (size_t)(st[j] + t) * (size_t)w->cols + 32 * (size_t)g, 32);
        }
        for (int b = r0 / 16; 16 * b < r1; b++) {
            const uint8_t *blk = w->qs + (size_t)b * bb;
            const __mmask16 km = coli__lanes16(r0 - 16 * b, r1 - 16 * b);
            /* each case inlined on its own: the full tile's loops have
             * constant bounds */
            if (q4 && m == 16)
                amx_pass(1, 16, blk, w->type, w->group, ng, abuf, s, st, nt, P, cbuf, bbuf, y, ys, 16 * b, km);
            else if (m == 16)
                amx_pass(0, 16, blk, w->type, w->group, ng, abuf, s, st, nt, P, cbuf, bbuf, y, ys, 16 * b, km);
            else if (q4)
                amx_pass(1, m, blk, w->type, w->group, ng, abuf, s, st, nt, P, cbuf, bbuf, y, ys, 16 * b, km);
            else
                amx_pass(0, m, blk, w->type, w->group, ng, abuf, s, st, nt, P, cbuf, bbuf, y, ys, 16 * b, km);
        }
    }
    _tile_release();
    return 1;
}

static void gemm_amx(const coli__qmat *w, int r0, int r1, int n_tok, const int8_t *p, const float *s,
                     const int32_t *psum, float *y, size_t ys)
{
    if (r1 <= r0 || n_tok <= 0)
        return;
    if (n_tok >= AMX_MIN_TOK && w->layout == COLI__QL_X16 && (w->type == COLI_DT_Q8 || w->type == COLI_DT_Q4) &&
        amx_x16(w, r0, r1, n_tok, p, s, y, ys))
        return;
    /* the AVX-512 table, present wherever this one is */
    g_x512->gemm(w, r0, r1, n_tok, p, s, psum, y, ys);
}

static coli__qkernels g_table;

static void make_table(void)
{
    init_once();
    if (g_x512) /* its activation quantization is the AVX-512 table's */
        g_table = (coli__qkernels){"amx-int8", gemm_amx, g_x512->act};
}

const coli__qkernels *coli__q_kernels_amx(void)
{
    pthread_once(&g_once, make_table);
    return (coli__cpu_features() & COLI_CPU_AMX) && g_x512 ? &g_table : NULL;
}

#else

const coli__qkernels *coli__q_kernels_amx(void)
{
    return NULL;
}

#endif
