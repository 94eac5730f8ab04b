/* simd.h - (internal) compiling element-wise loops for several x86 vector
 * widths. With gcc on x86-64 Linux, a function marked TT_SIMD is also built
 * for AVX2 and AVX-512 and the best copy is picked at load time (an ifunc).
 * The copies perform the same IEEE operations in the same order (the build
 * uses -ffp-contract=off, so no fused multiply-adds), so they give the same
 * bits. Clang 14's target_clones does not emit the plain external symbol,
 * so other compilers get the baseline code. */
#ifndef TT_SIMD_H
#define TT_SIMD_H

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__) && \
    defined(__has_attribute)
#if __has_attribute(target_clones)
#define TT_SIMD __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef TT_SIMD
#define TT_SIMD
#endif

#endif
