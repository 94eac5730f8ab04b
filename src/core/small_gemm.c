/* small_gemm.c - the attention's per-head matrix products, which are too
 * small for a BLAS to pay for its packing and dispatch: at T = 64 and a head
 * of 16 they are 32x64x16 products. Here they take about half of OpenBLAS's
 * time (36 heads of the bench model's shapes: 0.26 ms against 0.47, packing
 * aside); moving them here took the bench model's attention, softmaxes
 * included, from 24.7 to 18.0 ms a step (the default model's, a rank of
 * dp 2: 13.9 to 9.8); minima of 30 runs of each, alternated in one process.
 * `make bench` measures the products both ways side by side.
 *
 * The sums are ours and fixed: one fused multiply-add chain per output
 * element over k in order from zero, then fma(alpha, chain, C or 0), on
 * every AVX2+FMA CPU whatever BLAS is installed (OpenBLAS's own small-matrix
 * paths sum in other orders, which vary with the shape).
 * tests/test_kernels_gemm.c holds the kernel to that chain bit for bit. On a
 * CPU without AVX2 and FMA, or another compiler or architecture, the products
 * go to cblas_sgemm, whose bits may differ in the last place. */
#include "core/small_gemm.h"

#include <cblas.h>
#include <stdlib.h>

#include "tt/core/common.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define TT_HAVE_FMA_KERNEL 1
#include <immintrin.h>
#endif

#ifdef TT_HAVE_FMA_KERNEL
/* Lanes [0, n) of 8 set (n <= 8): the mask of a partial column block. */
__attribute__((target("avx2,fma"))) static __m256i lanes_below(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Rows [i, i + R) by columns [c, c + 8 NV) of C, R and NV fixed (and the
 * loops over them unrolled) so the accumulators stay in registers. PART
 * blocks end in a partial vector whose columns mask selects; the full ones
 * use plain loads and stores (masked moves are slow on some CPUs). */
#define SG_UNROLL _Pragma("GCC unroll 8")
#define SG_BLOCK(R, NV, PART)                                                                \
    __attribute__((target("avx2,fma"))) static void block_##R##x##NV##PART(                  \
        float *Cm, int ldc, const float *A, int sa_i, int sa_k, const float *B, int ldb,     \
        int K, float alpha, int accumulate, __m256i mask)                                    \
    {                                                                                        \
        __m256 acc[R][NV];                                                                   \
        SG_UNROLL for (int r = 0; r < R; r++)                                                \
            SG_UNROLL for (int v = 0; v < NV; v++)                                           \
                acc[r][v] = _mm256_setzero_ps();                                             \
        for (int k = 0; k < K; k++) {                                                        \
            const float *b = B + (size_t)k * ldb;                                            \
            __m256 bv[NV];                                                                   \
            SG_UNROLL for (int v = 0; v < NV; v++)                                           \
                bv[v] = PART && v == NV - 1 ? _mm256_maskload_ps(b + 8 * v, mask)            \
                                            : _mm256_loadu_ps(b + 8 * v);                    \
            SG_UNROLL for (int r = 0; r < R; r++) {                                          \
                const __m256 a = _mm256_broadcast_ss(A + (size_t)r * sa_i + (size_t)k * sa_k); \
                SG_UNROLL for (int v = 0; v < NV; v++)                                       \
                    acc[r][v] = _mm256_fmadd_ps(a, bv[v], acc[r][v]);                        \
            }                                                                                \
        }                                                                                    \
        const __m256 al = _mm256_set1_ps(alpha);                                             \
        SG_UNROLL for (int r = 0; r < R; r++) {                                              \
            float *c = Cm + (size_t)r * ldc;                                                 \
            SG_UNROLL for (int v = 0; v < NV; v++) {                                         \
                if (PART && v == NV - 1) {                                                   \
                    const __m256 old = accumulate ? _mm256_maskload_ps(c + 8 * v, mask)      \
                                                  : _mm256_setzero_ps();                     \
                    _mm256_maskstore_ps(c + 8 * v, mask, _mm256_fmadd_ps(al, acc[r][v], old)); \
                } else {                                                                     \
                    const __m256 old = accumulate ? _mm256_loadu_ps(c + 8 * v)               \
                                                  : _mm256_setzero_ps();                     \
                    _mm256_storeu_ps(c + 8 * v, _mm256_fmadd_ps(al, acc[r][v], old));        \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    }
SG_BLOCK(4, 2, 0)
SG_BLOCK(4, 2, 1)
SG_BLOCK(2, 2, 0)
SG_BLOCK(2, 2, 1)
SG_BLOCK(8, 1, 0)
SG_BLOCK(8, 1, 1)
SG_BLOCK(4, 1, 0)
SG_BLOCK(4, 1, 1)
SG_BLOCK(2, 1, 0)
SG_BLOCK(2, 1, 1)
SG_BLOCK(1, 2, 0)
SG_BLOCK(1, 2, 1)
SG_BLOCK(1, 1, 0)
SG_BLOCK(1, 1, 1)

typedef void (*block_fn)(float *, int, const float *, int, int, const float *, int, int, float,
                         int, __m256i);
/* The blocks each kind of column block is cut into, tallest first (0 ends
 * a list). Each accumulator is a chain of dependent FMAs, so a row of one
 * vector needs more rows in flight: 8 of them run the 8-wide products of a
 * head of 8 about 15% faster than 4. For two vectors, 6 rows (12
 * accumulators, all the registers allow) measured no faster than 4. */
static const struct {
    int R;
    block_fn f;
} blocks[4][4] = {
    {{4, block_4x20}, {2, block_2x20}, {1, block_1x20}, {0, NULL}},   /* 16 whole columns */
    {{4, block_4x21}, {2, block_2x21}, {1, block_1x21}, {0, NULL}},   /* 9 to 15 */
    {{8, block_8x10}, {4, block_4x10}, {2, block_2x10}, {1, block_1x10}}, /* 8 (a head of 8) */
    {{8, block_8x11}, {4, block_4x11}, {2, block_2x11}, {1, block_1x11}}, /* 1 to 7 */
};

__attribute__((target("avx2,fma"))) static void gemm_fma(float *Cm, int ldc, const float *A,
                                                         int sa_i, int sa_k, const float *B,
                                                         int ldb, int M, int N, int K,
                                                         float alpha, int accumulate)
{
    for (int c = 0; c < N; c += 16) {
        const int w = N - c < 16 ? N - c : 16; /* columns in this block */
        const __m256i mask = lanes_below(w > 8 ? w - 8 : w);
        const int kind = w == 16 ? 0 : w > 8 ? 1 : w == 8 ? 2 : 3;
        int i = 0;
        for (int b = 0; b < 4 && blocks[kind][b].R; b++)
            for (const int R = blocks[kind][b].R; i + R <= M; i += R)
                blocks[kind][b].f(Cm + (size_t)i * ldc + c, ldc, A + (size_t)i * sa_i, sa_i, sa_k,
                                  B + c, ldb, K, alpha, accumulate, mask);
    }
}

/* dst[r][c] = src[c][r] for an 8 x 8 tile (rows ld floats apart). */
__attribute__((target("avx2,fma"))) static void transpose8(float *dst, int ldd, const float *src,
                                                           int lds)
{
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_loadu_ps(src + (size_t)i * lds);
    for (int i = 0; i < 8; i += 2) { /* pairs of rows interleaved */
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) { /* then pairs of pairs */
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int i = 0; i < 4; i++) { /* then the 128-bit halves of rows i and i + 4 */
        _mm256_storeu_ps(dst + (size_t)i * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
        _mm256_storeu_ps(dst + (size_t)(i + 4) * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
    }
}

static int have_fma(void)
{
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    return known;
}
#endif

int tt_small_gemm_fast(void)
{
#ifdef TT_HAVE_FMA_KERNEL
    return have_fma();
#else
    return 0;
#endif
}

/* B(k, n) copied to a row-major K x N block, as a BLAS packs its operands
 * (and like its packing buffer, this one lies outside the memory account:
 * it is the CPU's work space, not the virtual GPU's). Ranks are processes
 * with one thread each, so one buffer serves every call. */
const float *tt_small_gemm_pack(const float *B, int sb_k, int sb_n, int K, int N)
{
    static float *buf;
    static size_t cap;
    const size_t need = (size_t)K * N;
    if (need > cap) {
        free(buf);
        buf = tt_malloc(need * sizeof *buf);
        cap = need;
    }
    int k0 = 0;
#ifdef TT_HAVE_FMA_KERNEL
    /* A transposed operand (sb_k 1: a head's K or V read down its columns)
     * goes over in 8 x 8 tiles, eight row loads and eight stores each. */
    if (sb_k == 1 && N % 8 == 0 && have_fma())
        for (; k0 + 8 <= K; k0 += 8)
            for (int n = 0; n < N; n += 8)
                transpose8(buf + (size_t)k0 * N + n, N, B + (size_t)n * sb_n + k0, sb_n);
#endif
    /* The rest element by element: writes in order, reads strided. */
    for (int k = k0; k < K; k++) {
        const float *b = B + (size_t)k * sb_k;
        float *d = buf + (size_t)k * N;
        for (int n = 0; n < N; n++)
            d[n] = b[(size_t)n * sb_n];
    }
    return buf;
}

/* A leading dimension cblas accepts: the stride, at least the row's n and 1. */
static int ld_at_least(int stride, int n)
{
    const int m = n > 1 ? n : 1;
    return stride > m ? stride : m;
}

void tt_small_gemm(float *Cm, int ldc, const float *A, int sa_i, int sa_k, const float *B,
                   int sb_k, int sb_n, int M, int N, int K, float alpha, int accumulate)
{
    if (M <= 0 || N <= 0)
        return;
#ifdef TT_HAVE_FMA_KERNEL
    if (have_fma()) {
        if (sb_n != 1 && K > 0) { /* (K = 0 reads no B: nothing to pack) */
            B = tt_small_gemm_pack(B, sb_k, sb_n, K, N);
            sb_k = N;
        }
        gemm_fma(Cm, ldc, A, sa_i, sa_k, B, sb_k, M, N, K, alpha, accumulate);
        return;
    }
#endif
    /* Each operand is row-major (its second stride 1) or transposed. cblas
     * refuses a leading dimension under its rows' length (or under 1) even
     * where a single row or column never uses it: A with M = 1 or B with
     * K = 1 may come with a first stride of 1, and K may be 0. */
    const int transA = sa_k != 1, transB = sb_n != 1;
    const int lda = transA ? ld_at_least(K > 1 ? sa_k : 1, M) : ld_at_least(M > 1 ? sa_i : 1, K);
    const int ldb = transB ? ld_at_least(N > 1 ? sb_n : 1, K) : ld_at_least(K > 1 ? sb_k : 1, N);
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb,
                accumulate ? 1.0f : 0.0f, Cm, ldc);
}
