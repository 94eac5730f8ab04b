/* small_gemm.h - (internal) the attention's small matrix products: on
 * AVX2+FMA CPUs a kernel of ours with fixed sums, not OpenBLAS's bits;
 * elsewhere cblas_sgemm (small_gemm.c says how and why). */
#ifndef TT_CORE_SMALL_GEMM_H
#define TT_CORE_SMALL_GEMM_H

/* C[i, c] = alpha sum_k A(i, k) B(k, c) for i < M, c < N, plus C[i, c] when
 * accumulate; A(i, k) = A[i sa_i + k sa_k] and B(k, c) = B[k sb_k + c sb_n],
 * each either row-major (its second stride 1) or transposed (its first);
 * C is row-major with leading dimension ldc. */
void tt_small_gemm(float *C, int ldc, const float *A, int sa_i, int sa_k, const float *B,
                   int sb_k, int sb_n, int M, int N, int K, float alpha, int accumulate);

/* B(k, n) = B[k sb_k + n sb_n] for k < K, n < N copied to a row-major
 * K x N block in a buffer of this module's: the operand packed once for
 * several products. Valid until the next call of this function, or of
 * tt_small_gemm with a transposed B (sb_n != 1, which packs into it too);
 * products whose B is row-major leave it alone, as attention.c relies on. */
const float *tt_small_gemm_pack(const float *B, int sb_k, int sb_n, int K, int N);

/* 1 when tt_small_gemm runs its own kernel, 0 when it calls cblas_sgemm. */
int tt_small_gemm_fast(void);

#endif
