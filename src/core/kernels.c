/* kernels.c - the forward/backward kernels of the GPT on plain float arrays.
 *
 * Every matrix product goes to cblas_sgemm; everything else (LayerNorm, GELU,
 * softmax, residuals) is written here so that it costs little next to the
 * GEMMs. Two habits make that work with the project's plain -O2 build (no
 * -ffast-math, no -march):
 *
 *  - Element-wise loops run in blocks of VL floats copied into local arrays.
 *    At -O2 gcc only vectorizes loops it can replace completely (no scalar
 *    epilogue, no run-time alias check); a fixed-length loop over locals is
 *    such a loop, and the locals also make in-place calls (out == inp) safe.
 *  - exp is our own (exp_approx): a polynomial plus an exponent built from
 *    bits, i.e. only +, *, / and integer ops, which gcc vectorizes, where a
 *    call to expf or tanhf per element cannot be.
 *
 * Results are deterministic: no threads, and every reduction in a fixed
 * order (VL partial sums combined by a fixed tree) whatever the data or the
 * vector width. Only correctly rounded operations are used (+ - * / sqrt, no
 * reciprocal estimates), so the vector body, the scalar tail and the ISA
 * clones below all give the same bits; that relies on -ffp-contract=off
 * (configure adds it), so gcc fuses no multiply-adds in the AVX2 and AVX-512
 * clones. */
#include "tt/core/kernels.h"

#include <cblas.h>
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

/* y += x over n floats. */
TT_INLINE void vec_add(float *y, const float *x, int n)
{
    int i = 0;
    for (; i + VL <= n; i += VL) {
        float a[VL], b[VL];
        memcpy(a, y + i, sizeof a);
        memcpy(b, x + i, sizeof b);
        for (int j = 0; j < VL; j++)
            a[j] += b[j];
        memcpy(y + i, a, sizeof a);
    }
    for (; i < n; i++)
        y[i] += x[i];
}

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
        float e[VL];
        memcpy(e, x + j, sizeof e);
        for (int l = 0; l < VL; l++) {
            e[l] = exp_nan(e[l] - shift);
            acc[l] += (double)e[l];
        }
        memcpy(y + j, e, sizeof e);
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
        float e[VL];
        memcpy(e, y + j, sizeof e);
        for (int l = 0; l < VL; l++)
            e[l] *= a;
        memcpy(y + j, e, sizeof e);
    }
    for (; j < n; j++)
        y[j] *= a;
}

/* ------------------------------------------------------------------------ */
/* Embeddings                                                                */

void embedding_forward(float *out /* N,C */, const int *idx /* N */,
                       const float *w /* Vl,C */, int N, int C, int v0, int Vl)
{
    for (int n = 0; n < N; n++) {
        float *o = out + (size_t)n * C;
        int row = idx[n] - v0;
        /* Zeros, not untouched memory: the shards' outputs are summed. */
        if (row >= 0 && row < Vl)
            memcpy(o, w + (size_t)row * C, (size_t)C * sizeof *o);
        else
            memset(o, 0, (size_t)C * sizeof *o);
    }
}

TT_SIMD
void embedding_backward(float *dw /* Vl,C */, const float *dout /* N,C */,
                        const int *idx /* N */, int N, int C, int v0, int Vl)
{
    /* Rows in token order: repeated tokens add up in the same order every
     * time, which keeps the result bitwise reproducible. */
    for (int n = 0; n < N; n++) {
        int row = idx[n] - v0;
        if (row >= 0 && row < Vl)
            vec_add(dw + (size_t)row * C, dout + (size_t)n * C, C);
    }
}

TT_SIMD
void posemb_forward(float *out /* B,T,C */, const float *wpe /* T,C */, int B, int T, int C)
{
    for (int b = 0; b < B; b++)
        vec_add(out + (size_t)b * T * C, wpe, T * C);
}

TT_SIMD
void posemb_backward(float *dwpe /* T,C */, const float *dout /* B,T,C */, int B, int T, int C)
{
    for (int b = 0; b < B; b++)
        vec_add(dwpe, dout + (size_t)b * T * C, T * C);
}

/* ------------------------------------------------------------------------ */
/* LayerNorm                                                                 */

TT_SIMD
void layernorm_forward(float *out /* N,C */, float *mean /* N */, float *rstd /* N */,
                       const float *inp /* N,C */, const float *w /* C */,
                       const float *b /* C */, int N, int C)
{
    const float eps = 1e-5f;
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;

        float acc[VL] = {0};
        int i = 0;
        for (; i + VL <= C; i += VL)
            for (int j = 0; j < VL; j++)
                acc[j] += x[i + j];
        float s = lanes_total(acc);
        for (; i < C; i++)
            s += x[i];
        float m = s / (float)C;

        /* Two passes (mean, then squared deviations) rather than E[x^2] -
         * E[x]^2, which cancels badly when |mean| >> std. Biased variance,
         * as PyTorch. */
        float acc2[VL] = {0};
        i = 0;
        for (; i + VL <= C; i += VL)
            for (int j = 0; j < VL; j++) {
                float d = x[i + j] - m;
                acc2[j] += d * d;
            }
        float v = lanes_total(acc2);
        for (; i < C; i++) {
            float d = x[i] - m;
            v += d * d;
        }
        float rs = 1.0f / sqrtf(v / (float)C + eps);

        i = 0;
        for (; i + VL <= C; i += VL) {
            float xb[VL], ob[VL];
            memcpy(xb, x + i, sizeof xb);
            for (int j = 0; j < VL; j++)
                ob[j] = (xb[j] - m) * rs * w[i + j] + b[i + j];
            memcpy(o + i, ob, sizeof ob);
        }
        for (; i < C; i++)
            o[i] = (x[i] - m) * rs * w[i] + b[i];
        mean[n] = m;
        rstd[n] = rs;
    }
}

TT_SIMD
void layernorm_backward(float *dinp /* N,C */, float *dw /* C */, float *db /* C */,
                        const float *dout /* N,C */, const float *inp /* N,C */,
                        const float *w /* C */, const float *mean /* N */,
                        const float *rstd /* N */, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *g = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        const float m = mean[n], rs = rstd[n];

        /* With xhat = (x - m) rstd and dnorm = dout * w:
         * dx = rstd (dnorm - mean(dnorm) - xhat mean(dnorm xhat)). */
        float a1[VL] = {0}, a2[VL] = {0};
        int i = 0;
        for (; i + VL <= C; i += VL)
            for (int j = 0; j < VL; j++) {
                float dn = g[i + j] * w[i + j];
                a1[j] += dn;
                a2[j] += dn * ((x[i + j] - m) * rs);
            }
        float s1 = lanes_total(a1), s2 = lanes_total(a2);
        for (; i < C; i++) {
            float dn = g[i] * w[i];
            s1 += dn;
            s2 += dn * ((x[i] - m) * rs);
        }
        const float mdn = s1 / (float)C, mdnx = s2 / (float)C;

        i = 0;
        for (; i + VL <= C; i += VL) {
            float xb[VL], gb[VL], dxb[VL], dwb[VL], dbb[VL];
            memcpy(xb, x + i, sizeof xb);
            memcpy(gb, g + i, sizeof gb);
            memcpy(dxb, dx + i, sizeof dxb);
            memcpy(dwb, dw + i, sizeof dwb);
            memcpy(dbb, db + i, sizeof dbb);
            for (int j = 0; j < VL; j++) {
                float xh = (xb[j] - m) * rs;
                float dn = gb[j] * w[i + j];
                dwb[j] += gb[j] * xh;
                dbb[j] += gb[j];
                dxb[j] += rs * (dn - mdn - xh * mdnx);
            }
            memcpy(dx + i, dxb, sizeof dxb);
            memcpy(dw + i, dwb, sizeof dwb);
            memcpy(db + i, dbb, sizeof dbb);
        }
        for (; i < C; i++) {
            float xh = (x[i] - m) * rs;
            float dn = g[i] * w[i];
            dw[i] += g[i] * xh;
            db[i] += g[i];
            dx[i] += rs * (dn - mdn - xh * mdnx);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Linear layers                                                             */

void linear_forward(float *out /* N,OC */, const float *inp /* N,C */,
                    const float *w /* OC,C */, const float *b /* OC or NULL */,
                    int N, int C, int OC)
{
    /* Seeding out with the bias and letting the GEMM add to it (beta = 1)
     * saves a separate pass over out. */
    float beta = 0.0f;
    if (b) {
        for (int n = 0; n < N; n++)
            memcpy(out + (size_t)n * OC, b, (size_t)OC * sizeof *out);
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C,
                1.0f, inp, C, w, C, beta, out, OC);
}

void linear_backward(float *dinp /* N,C */, float *dw /* OC,C */, float *db /* OC */,
                     const float *dout /* N,OC */, const float *inp /* N,C */,
                     const float *w /* OC,C */, int N, int C, int OC)
{
    if (dinp) /* dinp[N,C] += dout[N,OC] W[OC,C] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC,
                    1.0f, dout, OC, w, C, 1.0f, dinp, C);
    if (dw) /* dw[OC,C] += dout^T[OC,N] inp[N,C] */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N,
                    1.0f, dout, OC, inp, C, 1.0f, dw, C);
    if (db)
        for (int n = 0; n < N; n++)
            vec_add(db, dout + (size_t)n * OC, OC);
}

/* ------------------------------------------------------------------------ */
/* Causal self-attention                                                     */

/* Query rows are processed in blocks of ATT_BT: block [i0, i1) only attends to
 * keys [0, i1), so the GEMMs skip most of the masked upper triangle while
 * each call stays large enough for the BLAS to be efficient. */
#define ATT_BT 32

/* The attention softmaxes work on whole VL-blocks of a row, covering the
 * causal part [0, i] and masking the rest with bit masks, rather than on the
 * exact i+1 entries: rows are short (T = 64 means 1 to 4 blocks), and a
 * scalar remainder or a variable-length copy per row would cost more than
 * the vector work itself. Entries past the diagonal may hold anything (stale
 * memory, even NaN bits), which the masks keep out of every result. */

/* Block j0 of a row of length T into b[VL]; past T (only when T is not a
 * multiple of VL) it is padded with zeros. */
TT_INLINE void load_block(float b[VL], const float *row, int j0, int T)
{
    if (j0 + VL <= T) {
        memcpy(b, row + j0, VL * sizeof *b);
    } else {
        memset(b, 0, VL * sizeof *b);
        memcpy(b, row + j0, (size_t)(T - j0) * sizeof *b);
    }
}

TT_INLINE void store_block(float *row, const float b[VL], int j0, int T)
{
    memcpy(row + j0, b, (size_t)(j0 + VL <= T ? VL : T - j0) * sizeof *b);
}

/* all-ones in lane l when column j0 + l < n, i.e. is causally visible. */
TT_INLINE void visible_mask(uint32_t m[VL], int j0, int n)
{
    for (int l = 0; l < VL; l++)
        m[l] = -(uint32_t)(j0 + l < n);
}

/* b[l] where the mask is set, else the bits of other. */
TT_INLINE void mask_select(float b[VL], const uint32_t m[VL], float other)
{
    uint32_t bo;
    memcpy(&bo, &other, sizeof bo);
    for (int l = 0; l < VL; l++) {
        uint32_t bb;
        memcpy(&bb, &b[l], sizeof bb);
        bb = (bb & m[l]) | (bo & ~m[l]);
        memcpy(&b[l], &bb, sizeof bb);
    }
}

/* Rows i0..i1 (at most ATT_BT of them) of a head's [T,T] scores, in place:
 * softmax over columns [0, i], zeros after (the causal mask). The work goes
 * in passes over all the rows (maxima, then exponentials and sums, then the
 * scaling) because one short row is a chain of dependent steps; rows of a
 * pass are independent and the CPU overlaps them. */
TT_SIMD
static void causal_softmax_rows(float *P /* T,T */, int i0, int i1, int T)
{
    float rowmax[ATT_BT], rowinv[ATT_BT];
    float b[VL];
    uint32_t m[VL];

    for (int i = i0; i < i1; i++) {
        const float *s = P + (size_t)i * T;
        const int n = i + 1;
        float mx[VL];
        for (int l = 0; l < VL; l++)
            mx[l] = s[0];
        for (int j0 = 0; j0 < n; j0 += VL) {
            load_block(b, s, j0, T);
            visible_mask(m, j0, n);
            mask_select(b, m, s[0]);
            for (int l = 0; l < VL; l++)
                mx[l] = b[l] > mx[l] ? b[l] : mx[l];
        }
        rowmax[i - i0] = lanes_max(mx);
    }

    for (int i = i0; i < i1; i++) {
        float *s = P + (size_t)i * T;
        const int n = i + 1;
        const float mx = rowmax[i - i0];
        /* A row sum of at most T numbers in [0, 1] needs no double. */
        float acc[VL] = {0};
        for (int j0 = 0; j0 < n; j0 += VL) {
            load_block(b, s, j0, T);
            visible_mask(m, j0, n);
            mask_select(b, m, mx);
            for (int l = 0; l < VL; l++)
                b[l] = exp_nan(b[l] - mx);
            mask_select(b, m, 0.0f);
            for (int l = 0; l < VL; l++)
                acc[l] += b[l];
            store_block(s, b, j0, T);
        }
        /* sum >= 1 (the max contributes e^0), so the reciprocal is safe. */
        rowinv[i - i0] = 1.0f / lanes_total(acc);
    }

    for (int i = i0; i < i1; i++) {
        float *s = P + (size_t)i * T;
        const int n = i + 1;
        const float inv = rowinv[i - i0];
        int j0 = 0;
        for (; j0 < n; j0 += VL) {
            load_block(b, s, j0, T);
            for (int l = 0; l < VL; l++)
                b[l] *= inv;
            store_block(s, b, j0, T);
        }
        if (j0 < T)
            memset(s + j0, 0, (size_t)(T - j0) * sizeof *s);
    }
}

/* Softmax backward on rows i0..i1, in place on dP (rows of ld T):
 * dS = P (dP - rowsum(P dP)) times the scale of the scores, with zeros past
 * the diagonal up to column i1, because the GEMMs that follow read the block
 * [i0:i1, 0:i1]. */
TT_SIMD
static void causal_softmax_backward_rows(float *dP /* T,T */, const float *P /* T,T */,
                                         float scale, int i0, int i1, int T)
{
    for (int i = i0; i < i1; i++) {
        const float *p = P + (size_t)i * T;
        float *d = dP + (size_t)i * T;
        const int n = i + 1;
        float pb[VL], db[VL];
        uint32_t m[VL];

        float acc[VL] = {0};
        for (int j0 = 0; j0 < n; j0 += VL) {
            load_block(pb, p, j0, T);
            load_block(db, d, j0, T);
            visible_mask(m, j0, n);
            for (int l = 0; l < VL; l++)
                db[l] = pb[l] * db[l];
            mask_select(db, m, 0.0f);
            for (int l = 0; l < VL; l++)
                acc[l] += db[l];
        }
        const float dot = lanes_total(acc);

        for (int j0 = 0; j0 < i1; j0 += VL) {
            load_block(pb, p, j0, T);
            load_block(db, d, j0, T);
            visible_mask(m, j0, n);
            for (int l = 0; l < VL; l++)
                db[l] = pb[l] * (db[l] - dot) * scale;
            mask_select(db, m, 0.0f);
            store_block(d, db, j0, T);
        }
    }
}

void attention_forward(float *out /* B,T,NH*hs */, float *att /* B,NH,T,T */,
                       const float *q /* B,T,NH*hs */, const float *k /* B,T,NH*hs */,
                       const float *v /* B,T,NH*hs */, int B, int T, int NH, int hs)
{
    /* A head is a column slice of the [T, NH*hs] rows, so every GEMM reads it
     * in place with leading dimension ld, no transposition copies. */
    const int ld = NH * hs;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const size_t off = (size_t)b * T * ld + (size_t)h * hs;
            const float *Q = q + off, *K = k + off, *V = v + off; /* T,hs (ld) */
            float *O = out + off;                                 /* T,hs (ld) */
            float *P = att + ((size_t)b * NH + h) * T * T;        /* T,T */
            for (int i0 = 0; i0 < T; i0 += ATT_BT) {
                const int i1 = i0 + ATT_BT < T ? i0 + ATT_BT : T;
                /* P[i0:i1, 0:i1] = scale Q[i0:i1] K[0:i1]^T */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, i1 - i0, i1, hs,
                            scale, Q + (size_t)i0 * ld, ld, K, ld,
                            0.0f, P + (size_t)i0 * T, T);
                causal_softmax_rows(P, i0, i1, T);
                /* O[i0:i1] = P[i0:i1, 0:i1] V[0:i1] */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, i1 - i0, hs, i1,
                            1.0f, P + (size_t)i0 * T, T, V, ld,
                            0.0f, O + (size_t)i0 * ld, ld);
            }
        }
}

void attention_backward(float *dq /* B,T,NH*hs */, float *dk /* B,T,NH*hs */,
                        float *dv /* B,T,NH*hs */, float *scratch /* T,T */,
                        const float *dout /* B,T,NH*hs */, const float *q,
                        const float *k, const float *v, const float *att /* B,NH,T,T */,
                        int B, int T, int NH, int hs)
{
    const int ld = NH * hs;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const size_t off = (size_t)b * T * ld + (size_t)h * hs;
            const float *Q = q + off, *K = k + off, *V = v + off, *dO = dout + off;
            float *dQ = dq + off, *dK = dk + off, *dV = dv + off; /* T,hs (ld) */
            const float *P = att + ((size_t)b * NH + h) * T * T;  /* T,T */
            float *dS = scratch;                                  /* T,T */
            for (int i0 = 0; i0 < T; i0 += ATT_BT) {
                const int i1 = i0 + ATT_BT < T ? i0 + ATT_BT : T;
                const int m = i1 - i0;
                const float *Pb = P + (size_t)i0 * T;
                float *dSb = dS + (size_t)i0 * T;
                /* dP[i0:i1, 0:i1] = dO[i0:i1] V[0:i1]^T (into dS, then in place) */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, i1, hs,
                            1.0f, dO + (size_t)i0 * ld, ld, V, ld, 0.0f, dSb, T);
                causal_softmax_backward_rows(dS, P, scale, i0, i1, T);
                /* dQ[i0:i1] += dS[i0:i1, 0:i1] K[0:i1] */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hs, i1,
                            1.0f, dSb, T, K, ld, 1.0f, dQ + (size_t)i0 * ld, ld);
                /* dK[0:i1] += dS[i0:i1, 0:i1]^T Q[i0:i1] */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, i1, hs, m,
                            1.0f, dSb, T, Q + (size_t)i0 * ld, ld, 1.0f, dK, ld);
                /* dV[0:i1] += P[i0:i1, 0:i1]^T dO[i0:i1] (P is zero above the
                 * diagonal, as stored by the forward) */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, i1, hs, m,
                            1.0f, Pb, T, dO + (size_t)i0 * ld, ld, 1.0f, dV, ld);
            }
        }
}

/* ------------------------------------------------------------------------ */
/* GELU                                                                      */

/* 0.5 (1 + tanh(u)) is the logistic sigmoid of 2u, so
 *   gelu(x) = x / (1 + e^{-2u}),   u = sqrt(2/pi) (x + 0.044715 x^3).
 * This needs one exp_approx and one division, and unlike 1 + tanhf(u) it does
 * not cancel for negative x: the error stays within a few ulp of what the
 * function's own sensitivity to x allows (tests/test_kernels.c measures it). */
#define GELU_K0 (-1.5957691216057308f)             /* -2 sqrt(2/pi) */
#define GELU_K1 (-1.5957691216057308f * 0.044715f) /* -2 sqrt(2/pi) 0.044715 */

TT_INLINE float gelu_one(float x)
{
    float e = exp_approx(x * (GELU_K0 + GELU_K1 * x * x)); /* e^{-2u} */
    return x / (1.0f + e);
}

/* d gelu/dx = s + x s (1 - s) d(2u)/dx with s = 1/(1+e), and 1 - s = e s,
 * again free of cancellation. */
TT_INLINE float gelu_grad_one(float x)
{
    float e = exp_approx(x * (GELU_K0 + GELU_K1 * x * x));
    float s = 1.0f / (1.0f + e);
    float du2 = -(GELU_K0 + 3.0f * GELU_K1 * x * x); /* d(2u)/dx */
    return s * (1.0f + x * (e * s) * du2);
}

TT_SIMD
void gelu_forward(float *out /* N */, const float *inp /* N */, int N)
{
    int i = 0;
    for (; i + VL <= N; i += VL) {
        float xb[VL];
        memcpy(xb, inp + i, sizeof xb);
        for (int j = 0; j < VL; j++)
            xb[j] = gelu_one(xb[j]);
        memcpy(out + i, xb, sizeof xb);
    }
    for (; i < N; i++)
        out[i] = gelu_one(inp[i]);
}

TT_SIMD
void gelu_backward(float *dinp /* N */, const float *inp /* N */, const float *dout /* N */, int N)
{
    int i = 0;
    for (; i + VL <= N; i += VL) {
        float xb[VL], gb[VL], db[VL];
        memcpy(xb, inp + i, sizeof xb);
        memcpy(gb, dout + i, sizeof gb);
        memcpy(db, dinp + i, sizeof db);
        for (int j = 0; j < VL; j++)
            db[j] += gb[j] * gelu_grad_one(xb[j]);
        memcpy(dinp + i, db, sizeof db);
    }
    for (; i < N; i++)
        dinp[i] += dout[i] * gelu_grad_one(inp[i]);
}

/* ------------------------------------------------------------------------ */
/* Residual                                                                  */

TT_SIMD
void residual_forward(float *out /* N */, const float *a /* N */, const float *b /* N */, int N)
{
    int i = 0;
    for (; i + VL <= N; i += VL) {
        float ab[VL], bb[VL];
        memcpy(ab, a + i, sizeof ab);
        memcpy(bb, b + i, sizeof bb);
        for (int j = 0; j < VL; j++)
            ab[j] += bb[j];
        memcpy(out + i, ab, sizeof ab);
    }
    for (; i < N; i++)
        out[i] = a[i] + b[i];
}

TT_SIMD
void residual_backward(float *da /* N */, float *db /* N */, const float *dout /* N */, int N)
{
    vec_add(da, dout, N);
    vec_add(db, dout, N);
}

/* ------------------------------------------------------------------------ */
/* Cross-entropy                                                             */

TT_SIMD
void crossentropy_forward(float *losses /* N */, float *probs /* N,Vp */,
                          const float *logits /* N,Vp */, const int *targets /* N */,
                          int N, int Vp, int V)
{
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * Vp;
        float *p = probs + (size_t)n * Vp;

        const float mx = row_max(x, V);
        /* e^(x - max) <= 1 cannot overflow; the sum is kept in double so that
         * a 256-way (or larger) sum does not round the log-sum-exp. */
        const double sum = exp_shift_sum(p, x, mx, V);
        scale_row(p, (float)(1.0 / sum), V);
        memset(p + V, 0, (size_t)(Vp - V) * sizeof *p);
        /* -log p[t] = log(sum) + max - x[t], formed in double. */
        losses[n] = (float)(log(sum) + (double)mx - (double)x[targets[n]]);
    }
}

TT_SIMD
void crossentropy_backward(float *dlogits /* N,Vp */, const float *probs /* N,Vp */,
                           const int *targets /* N */, float dloss, int N, int Vp, int V)
{
    /* Padding columns [V, Vp) get nothing: they are not part of the softmax. */
    for (int n = 0; n < N; n++) {
        const float *p = probs + (size_t)n * Vp;
        float *d = dlogits + (size_t)n * Vp;
        const int t = targets[n];
        const float dt = d[t];
        int j = 0;
        for (; j + VL <= V; j += VL) {
            float pb[VL], dbk[VL];
            memcpy(pb, p + j, sizeof pb);
            memcpy(dbk, d + j, sizeof dbk);
            for (int l = 0; l < VL; l++)
                dbk[l] += dloss * pb[l];
            memcpy(d + j, dbk, sizeof dbk);
        }
        for (; j < V; j++)
            d[j] += dloss * p[j];
        /* Redo the target column from its saved value so it is exactly
         * d + dloss (p - 1), not (d + dloss p) - dloss. */
        d[t] = dt + dloss * (p[t] - 1.0f);
    }
}
