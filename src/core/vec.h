/* vec.h - (internal) the vector helpers the kernels share: blocks of VL
 * floats, our own exp, fixed-order reductions. Everything here is inlined
 * into each kernel (and each of its ISA clones), so it gets the clone's
 * vector width; see the comment at the top of kernels.c for why. */
#ifndef TT_CORE_VEC_H
#define TT_CORE_VEC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The build targets baseline x86-64 (SSE2, 4 floats per vector); TT_SIMD
 * (simd.h) adds AVX2 and AVX-512 copies of the element-wise kernels. */
#include "core/simd.h"

/* Helpers must be inlined into those clones to get their vector width: a
 * separate copy would be compiled for the baseline only. */
#if defined(__GNUC__)
#define TT_INLINE static inline __attribute__((always_inline))
#else
#define TT_INLINE static inline
#endif

/* The next loop's iterations are independent, so it may be vectorized
 * without a run-time overlap check. Our element-wise loops read and write
 * element j in the same iteration (out may equal an input, never overlap it
 * at an offset), which is exactly what the pragma promises. Writing them as
 * plain loops over the arrays, not over local copies of each block, matters:
 * gcc copies a block with 16-byte moves and reads it back in 32-byte ones,
 * which stalls store-to-load forwarding (GELU ran at 2.3 ns a float that
 * way, 0.85 ns this way, on an AVX2 machine). */
#if defined(__clang__)
#define TT_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define TT_IVDEP _Pragma("GCC ivdep")
#else
#define TT_IVDEP
#endif

/* Block length of the element-wise loops: a multiple of every SIMD width
 * (4, 8, 16 floats) so each block maps onto whole vector registers. */
#define VL 16
_Static_assert(VL == 16, "the reduction trees below are written out for 16 lanes");

/* ------------------------------------------------------------------------ */
/* Small vector helpers                                                      */

/* e^x to about 2 ulp for x in [-87, 87]; outside that x is clamped, so that
 * 2^n stays a normal float. A NaN comes out finite (clamped to +-87): GELU
 * still returns NaN through its other operand x, and the softmaxes use
 * exp_nan below.
 *
 * The clamp works on |x| as an unsigned integer (for non-negative floats
 * the bit patterns order like the values): an integer min is one vector
 * instruction, while gcc will not vectorize a float clamp written with ?:
 * (it splits the constant clamped case into separate branches) or fminf
 * (NaN rules) without -ffast-math. */
TT_INLINE float exp_approx(float x)
{
    const float lim = 87.0f;
    uint32_t bx, blim;
    memcpy(&bx, &x, sizeof bx);
    memcpy(&blim, &lim, sizeof blim);
    uint32_t mag = bx & 0x7fffffffu;
    mag = mag < blim ? mag : blim;
    bx = (bx & 0x80000000u) | mag;
    memcpy(&x, &bx, sizeof x);
    /* n = round(x / ln2): adding 1.5 * 2^23 rounds to an integer in the low
     * mantissa bits, which avoids a call to rintf (not vectorized at -O2). */
    const float shifter = 12582912.0f;
    float t = x * 1.44269504088896341f + shifter;
    float n = t - shifter;
    /* r = x - n ln2 with ln2 split in two (Cody-Waite): n * ln2_hi is exact,
     * so r keeps its low bits; |r| <= ln2/2. */
    float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
    /* Taylor series to r^7 (truncation error < r^8/8! = 5e-9 relative),
     * evaluated in Estrin's form: pairs of terms in parallel, a shorter
     * dependency chain than Horner's. */
    float r2 = r * r, r4 = r2 * r2;
    float p01 = 1.0f + r, p23 = 0.5f + r * (1.0f / 6.0f);
    float p45 = 1.0f / 24.0f + r * (1.0f / 120.0f);
    float p67 = 1.0f / 720.0f + r * (1.0f / 5040.0f);
    float p = p01 + r2 * p23 + r4 * (p45 + r2 * p67);
    /* The low bits of t hold n (two's complement); shifting them into the
     * exponent field and adding the bias gives the float 2^n. */
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    bits = (bits << 23) + (127u << 23);
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* exp_approx that returns NaN for a NaN, so that a NaN score or logit shows
 * up in the loss instead of being silently clamped away. */
TT_INLINE float exp_nan(float x)
{
    uint32_t bx, br;
    memcpy(&bx, &x, sizeof bx);
    /* NaN: |x| above the bits of infinity (a signed compare: |x| < 2^31). */
    uint32_t isnan_ = -(uint32_t)((int32_t)(bx & 0x7fffffffu) > 0x7f800000);
    float r = exp_approx(x);
    memcpy(&br, &r, sizeof br);
    br |= isnan_ & 0x7fc00000u;
    memcpy(&r, &br, sizeof r);
    return r;
}

/* out = a + b; out may be a or b (element j is read before it is written). */
TT_INLINE void vec_sum(float *out, const float *a, const float *b, int n)
{
    int i = 0;
    for (; i + VL <= n; i += VL) {
        TT_IVDEP
        for (int j = 0; j < VL; j++)
            out[i + j] = a[i + j] + b[i + j];
    }
    for (; i < n; i++)
        out[i] = a[i] + b[i];
}

/* y += x over n floats. */
TT_INLINE void vec_add(float *y, const float *x, int n) { vec_sum(y, y, x, n); }

/* Partial sums held in VL lanes break the serial dependency of a plain sum
 * (and let it vectorize); the lanes are then combined by a fixed pairwise
 * tree, so the order of additions never depends on the data or the ISA. */
/* (The levels are written out: with a loop over the width, gcc leaves the
 * tree scalar.) */
#define LANE_TREE(acc, OP)                                                    \
    do {                                                                      \
        for (int l_ = 0; l_ < 8; l_++)                                        \
            acc[l_] = OP(acc[l_], acc[l_ + 8]);                               \
        for (int l_ = 0; l_ < 4; l_++)                                        \
            acc[l_] = OP(acc[l_], acc[l_ + 4]);                               \
        for (int l_ = 0; l_ < 2; l_++)                                        \
            acc[l_] = OP(acc[l_], acc[l_ + 2]);                               \
        acc[0] = OP(acc[0], acc[1]);                                          \
    } while (0)
#define TREE_ADD(a, b) ((a) + (b))
/* a > b ? a : b is exactly what maxps computes, so it vectorizes. */
#define TREE_MAX(a, b) ((b) > (a) ? (b) : (a))

TT_INLINE float lanes_total(float acc[VL])
{
    LANE_TREE(acc, TREE_ADD);
    return acc[0];
}

TT_INLINE double lanes_total_d(double acc[VL])
{
    LANE_TREE(acc, TREE_ADD);
    return acc[0];
}

TT_INLINE float lanes_max(float m[VL])
{
    LANE_TREE(m, TREE_MAX);
    return m[0];
}

/* Row helpers for the cross-entropy softmax. A partial last block (V not a
 * multiple of VL) goes through the vector code on a padded local copy rather
 * than through a scalar exp per element. */

/* max of x[0..n), n >= 1. */
TT_INLINE float row_max(const float *x, int n)
{
    float m[VL];
    for (int l = 0; l < VL; l++)
        m[l] = x[0];
    int j = 0;
    for (; j + VL <= n; j += VL)
        for (int l = 0; l < VL; l++)
            m[l] = x[j + l] > m[l] ? x[j + l] : m[l];
    for (; j < n; j++)
        m[0] = x[j] > m[0] ? x[j] : m[0];
    return lanes_max(m);
}

/* y[j] = e^(x[j] - shift) for j < n (y may be x); returns the sum of the y,
 * accumulated in double. */
TT_INLINE double exp_shift_sum(float *y, const float *x, float shift, int n)
{
    double acc[VL] = {0};
    int j = 0;
    for (; j + VL <= n; j += VL) {
        TT_IVDEP
        for (int l = 0; l < VL; l++) {
            const float e = exp_nan(x[j + l] - shift);
            acc[l] += (double)e;
            y[j + l] = e;
        }
    }
    if (j < n) {
        const int rem = n - j;
        float e[VL];
        for (int l = 0; l < VL; l++)
            e[l] = shift;
        memcpy(e, x + j, (size_t)rem * sizeof *e);
        for (int l = 0; l < VL; l++)
            e[l] = exp_nan(e[l] - shift);
        for (int l = 0; l < rem; l++) {
            y[j + l] = e[l];
            acc[l] += (double)e[l];
        }
    }
    return lanes_total_d(acc);
}

/* y[j] *= a for j < n. */
TT_INLINE void scale_row(float *y, float a, int n)
{
    int j = 0;
    for (; j + VL <= n; j += VL) {
        TT_IVDEP
        for (int l = 0; l < VL; l++)
            y[j + l] *= a;
    }
    for (; j < n; j++)
        y[j] *= a;
}


#endif
