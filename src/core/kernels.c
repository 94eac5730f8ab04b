/* kernels.c - the forward/backward kernels of the GPT on plain float arrays.
 *
 * The linear layers' matrix products go to cblas_sgemm (the attention's
 * small per-head ones to core/small_gemm.c); everything else (LayerNorm,
 * GELU, softmax, residuals) is written here so that it costs little next to
 * the GEMMs. Two habits make that work with the project's plain -O2 build (no
 * -ffast-math, no -march):
 *
 *  - Element-wise loops run in blocks of VL floats, each block a loop of
 *    fixed length VL marked TT_IVDEP (core/vec.h). At -O2 gcc only
 *    vectorizes loops it can replace completely (no scalar epilogue, no
 *    run-time alias check); a fixed-length loop whose iterations are
 *    declared independent is such a loop. In-place calls (out == inp) stay
 *    safe: every iteration reads its element before writing it.
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
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/vec.h"
#include "tt/core/kcost.h"
#include "tt/core/vclock.h"

/* Each kernel charges its work to the virtual GPU clock: its FLOPs, and the
 * floats it reads and writes (memory-bound kernels are timed by those), as
 * tt/core/kcost.h prices them (the planner sums the same figures). */
#define CHARGE(k)                                          \
    do {                                                   \
        const tt_kcost k_ = (k);                           \
        tt_vclock_compute(k_.flops, 4.0 * k_.floats);      \
    } while (0)
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
    CHARGE(tt_kcost_embedding_fwd(N, C));
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
    CHARGE(tt_kcost_embedding_bwd(N, C));
}

TT_SIMD
void posemb_forward(float *out /* B,T,C */, const float *wpe /* T,C */, int B, int T, int C)
{
    for (int b = 0; b < B; b++)
        vec_add(out + (size_t)b * T * C, wpe, T * C);
    CHARGE(tt_kcost_posemb_fwd(B, T, C));
}

TT_SIMD
void posemb_backward(float *dwpe /* T,C */, const float *dout /* B,T,C */, int B, int T, int C)
{
    for (int b = 0; b < B; b++)
        vec_add(dwpe, dout + (size_t)b * T * C, T * C);
    CHARGE(tt_kcost_posemb_bwd(B, T, C));
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
            TT_IVDEP
            for (int j = 0; j < VL; j++)
                o[i + j] = (x[i + j] - m) * rs * w[i + j] + b[i + j];
        }
        for (; i < C; i++)
            o[i] = (x[i] - m) * rs * w[i] + b[i];
        mean[n] = m;
        rstd[n] = rs;
    }
    CHARGE(tt_kcost_layernorm_fwd(N, C));
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
            TT_IVDEP
            for (int j = 0; j < VL; j++) {
                const float xh = (x[i + j] - m) * rs;
                const float gj = g[i + j], dn = gj * w[i + j];
                dw[i + j] += gj * xh;
                db[i + j] += gj;
                dx[i + j] += rs * (dn - mdn - xh * mdnx);
            }
        }
        for (; i < C; i++) {
            float xh = (x[i] - m) * rs;
            float dn = g[i] * w[i];
            dw[i] += g[i] * xh;
            db[i] += g[i];
            dx[i] += rs * (dn - mdn - xh * mdnx);
        }
    }
    CHARGE(tt_kcost_layernorm_bwd(N, C));
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
    CHARGE(tt_kcost_linear_fwd(N, C, OC));
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
    CHARGE(tt_kcost_linear_bwd(N, C, OC, (dinp != NULL) + (dw != NULL)));
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
        TT_IVDEP
        for (int j = 0; j < VL; j++)
            out[i + j] = gelu_one(inp[i + j]);
    }
    for (; i < N; i++)
        out[i] = gelu_one(inp[i]);
    CHARGE(tt_kcost_gelu_fwd(N));
}

TT_SIMD
void gelu_backward(float *dinp /* N */, const float *inp /* N */, const float *dout /* N */, int N)
{
    int i = 0;
    for (; i + VL <= N; i += VL) {
        TT_IVDEP
        for (int j = 0; j < VL; j++)
            dinp[i + j] += dout[i + j] * gelu_grad_one(inp[i + j]);
    }
    for (; i < N; i++)
        dinp[i] += dout[i] * gelu_grad_one(inp[i]);
    CHARGE(tt_kcost_gelu_bwd(N));
}

/* ------------------------------------------------------------------------ */
/* Residual                                                                  */

TT_SIMD
void residual_forward(float *out /* N */, const float *a /* N */, const float *b /* N */, int N)
{
    vec_sum(out, a, b, N);
    CHARGE(tt_kcost_residual_fwd(N));
}

TT_SIMD
void residual_backward(float *da /* N */, float *db /* N */, const float *dout /* N */, int N)
{
    vec_add(da, dout, N);
    vec_add(db, dout, N);
    CHARGE(tt_kcost_residual_bwd(N));
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
    CHARGE(tt_kcost_crossentropy_fwd(N, V, Vp));
}

/* The vocabulary-parallel cross-entropy's passes over this rank's slice of
 * the vocabulary (comm/tensor_parallel.c sums their per-row results over the
 * TP group in between). Vr of the Vl columns are real (the rest pad the
 * vocabulary to a multiple of tp); v0 is the slice's first token id. Each
 * forward pass charges its share of the one-GPU kernel's count over the
 * slice (tt_kcost_crossentropy_slice_fwd), so the clock advances between the
 * all-reduces as the work is done; the backward charges the whole one-GPU
 * count over the slice. The cost model (model/cost.c) prices the same. */
TT_SIMD
void crossentropy_slice_max(float *mx /* N */, float *tl /* N */, const float *logits /* N,Vl */,
                            const int *targets /* N */, int N, int Vl, int Vr, int v0)
{
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * Vl;
        mx[n] = Vr > 0 ? row_max(x, Vr) : -FLT_MAX;
        const int t = targets[n] - v0;
        tl[n] = t >= 0 && t < Vr ? x[t] : 0.0f; /* only the owner contributes */
    }
    CHARGE(tt_kcost_crossentropy_slice_fwd(N, Vr, Vl, 0));
}

TT_SIMD
void crossentropy_slice_exp(float *probs /* N,Vl */, float *se /* N */,
                            const float *logits /* N,Vl */, const float *mx /* N */, int N,
                            int Vl, int Vr)
{
    for (int n = 0; n < N; n++) {
        float *p = probs + (size_t)n * Vl;
        se[n] = (float)exp_shift_sum(p, logits + (size_t)n * Vl, mx[n], Vr);
        memset(p + Vr, 0, (size_t)(Vl - Vr) * sizeof *p);
    }
    CHARGE(tt_kcost_crossentropy_slice_fwd(N, Vr, Vl, 1));
}

TT_SIMD
void crossentropy_slice_finish(float *losses /* N */, float *probs /* N,Vl */,
                               const float *se /* N */, const float *mx /* N */,
                               const float *tl /* N */, int N, int Vl, int Vr)
{
    for (int n = 0; n < N; n++) {
        scale_row(probs + (size_t)n * Vl, 1.0f / se[n], Vr);
        losses[n] = (float)(log((double)se[n]) + (double)mx[n] - (double)tl[n]);
    }
    CHARGE(tt_kcost_crossentropy_slice_fwd(N, Vr, Vl, 2));
}

/* dlogits += dloss (probs - onehot(target)) over the first V columns of
 * rows Vp wide whose first column is token v0; a target outside them (owned
 * by another TP rank) adds no one-hot term. Padding columns get nothing:
 * they are not part of the softmax. */
TT_INLINE void ce_backward_rows(float *dlogits, const float *probs, const int *targets,
                                float dloss, int N, int Vp, int V, int v0)
{
    for (int n = 0; n < N; n++) {
        const float *p = probs + (size_t)n * Vp;
        float *d = dlogits + (size_t)n * Vp;
        const int t = targets[n] - v0, owned = t >= 0 && t < V;
        const float dt = owned ? d[t] : 0.0f;
        int j = 0;
        for (; j + VL <= V; j += VL) {
            TT_IVDEP
            for (int l = 0; l < VL; l++)
                d[j + l] += dloss * p[j + l];
        }
        for (; j < V; j++)
            d[j] += dloss * p[j];
        /* Redo the target column from its saved value so it is exactly
         * d + dloss (p - 1), not (d + dloss p) - dloss. */
        if (owned)
            d[t] = dt + dloss * (p[t] - 1.0f);
    }
}

TT_SIMD
void crossentropy_backward(float *dlogits /* N,Vp */, const float *probs /* N,Vp */,
                           const int *targets /* N */, float dloss, int N, int Vp, int V)
{
    ce_backward_rows(dlogits, probs, targets, dloss, N, Vp, V, 0);
    CHARGE(tt_kcost_crossentropy_bwd(N, V, Vp));
}

TT_SIMD
void crossentropy_slice_backward(float *dlogits /* N,Vl */, const float *probs /* N,Vl */,
                                 const int *targets /* N */, float dloss, int N, int Vl, int Vr,
                                 int v0)
{
    ce_backward_rows(dlogits, probs, targets, dloss, N, Vl, Vr, v0);
    CHARGE(tt_kcost_crossentropy_bwd(N, Vr, Vl));
}

