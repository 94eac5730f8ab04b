/* test_kernels_gemm.c - unit tests of the kernels built on matrix products:
 * linear (src/core/kernels.c), with and without bias and with NULL gradients
 * skipped, and causal self-attention (src/core/attention.c) on a small case
 * and on one longer than the kernel's row blocks, and its causal property.
 * Forwards against double-precision references written here, gradients
 * against finite differences, backwards accumulating (+=): kernel_check.h.
 * The attention's own small matrix product (src/core/small_gemm.c) is checked
 * alone over every tail of its register blocks: against a double reference,
 * and, where it runs its FMA kernel, bit for bit against the contract it
 * states (one fused multiply-add chain per element, k in order).
 * Last, non-finite inputs must not be hidden, in GELU, the cross-entropy and
 * attention. */
#include "tt/core/kernels.h"
#include "core/small_gemm.h"

#include "check_run.h"
#include "kernel_check.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Double-precision reference forwards (independent of kernels.c)            */

static void ref_linear(double *out, const double *x, const double *w, const double *b, int n_,
                       int c_, int oc)
{
    for (int n = 0; n < n_; n++)
        for (int o = 0; o < oc; o++) {
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < c_; i++)
                s += x[(size_t)n * c_ + i] * w[(size_t)o * c_ + i];
            out[(size_t)n * oc + o] = s;
        }
}

/* out[b,t,h*hs..] = sum_{s<=t} softmax_s(q.k / sqrt(hs)) v; probs optional. */
static void ref_attention(double *out, double *probs, const double *q, const double *k,
                          const double *v, int b_, int t_, int nh, int hs)
{
    const int c_ = nh * hs;
    double *p = malloc((size_t)t_ * sizeof *p);
    for (int b = 0; b < b_; b++)
        for (int h = 0; h < nh; h++)
            for (int t = 0; t < t_; t++) {
                const double *qr = q + ((size_t)b * t_ + t) * c_ + h * hs;
                double mx = -INFINITY, sum = 0.0;
                for (int s = 0; s <= t; s++) {
                    const double *kr = k + ((size_t)b * t_ + s) * c_ + h * hs;
                    double d = 0.0;
                    for (int i = 0; i < hs; i++)
                        d += qr[i] * kr[i];
                    p[s] = d / sqrt((double)hs);
                    mx = p[s] > mx ? p[s] : mx;
                }
                for (int s = 0; s <= t; s++) {
                    p[s] = exp(p[s] - mx);
                    sum += p[s];
                }
                double *o = out + ((size_t)b * t_ + t) * c_ + h * hs;
                for (int i = 0; i < hs; i++)
                    o[i] = 0.0;
                for (int s = 0; s <= t; s++) {
                    p[s] /= sum;
                    const double *vr = v + ((size_t)b * t_ + s) * c_ + h * hs;
                    for (int i = 0; i < hs; i++)
                        o[i] += p[s] * vr[i];
                }
                if (probs) {
                    double *pr = probs + (((size_t)b * nh + h) * t_ + t) * t_;
                    for (int s = 0; s < t_; s++)
                        pr[s] = s <= t ? p[s] : 0.0;
                }
            }
    free(p);
}

/* ------------------------------------------------------------------------ */
/* Linear                                                                    */

enum { MAXOC = 37 };
static const int lin_n[2] = {N, 7}, lin_c[2] = {C, 20}, lin_oc[2] = {OC, MAXOC};

typedef struct {
    int n, c, oc;
    float x[N * MAXC], w[MAXOC * MAXC], b[MAXOC], R[N * MAXOC];
    float dx[N * MAXC], dw[MAXOC * MAXC], db[MAXOC];
    double xd[N * MAXC], wd[MAXOC * MAXC], bd[MAXOC], Rd[N * MAXOC];
} lin_fx;

static double lin_objective(void *ctx)
{
    lin_fx *f = ctx;
    double out[N * MAXOC];
    ref_linear(out, f->xd, f->wd, f->bd, f->n, f->c, f->oc);
    return dot_r(out, f->Rd, (size_t)f->n * f->oc);
}

static void lin_run_backward(void *ctx)
{
    lin_fx *f = ctx;
    linear_backward(f->dx, f->dw, f->db, f->R, f->x, f->w, f->n, f->c, f->oc);
}

START_TEST(test_linear)
{
    lin_fx f;
    const int n = f.n = lin_n[_i], c = f.c = lin_c[_i], oc = f.oc = lin_oc[_i];
    char what[96], tag[40];
    snprintf(tag, sizeof tag, "(N=%d C=%d OC=%d)", n, c, oc);
    rng_seed(14);
    fill(f.x, f.xd, n * c, -1, 1);
    fill(f.w, f.wd, oc * c, -1, 1);
    fill(f.b, f.bd, oc, -1, 1);
    fill(f.R, f.Rd, n * oc, -1, 1);

    float out[N * MAXOC];
    double ref[N * MAXOC];
    fill_const(out, n * oc, NAN); /* the forward overwrites, whatever was there */
    linear_forward(out, f.x, f.w, f.b, n, c, oc);
    ref_linear(ref, f.xd, f.wd, f.bd, n, c, oc);
    snprintf(what, sizeof what, "linear_forward bias %s", tag);
    CHECK_CLOSE(what, out, ref, (size_t)n * oc, TOL_FWD);
    fill_const(out, n * oc, NAN);
    linear_forward(out, f.x, f.w, NULL, n, c, oc);
    ref_linear(ref, f.xd, f.wd, NULL, n, c, oc);
    snprintf(what, sizeof what, "linear_forward no bias %s", tag);
    CHECK_CLOSE(what, out, ref, (size_t)n * oc, TOL_FWD);

    memset(f.dx, 0, sizeof f.dx);
    memset(f.dw, 0, sizeof f.dw);
    memset(f.db, 0, sizeof f.db);
    lin_run_backward(&f);
    snprintf(what, sizeof what, "linear_backward dinp %s", tag);
    check_grad(what, f.dx, lin_objective, &f, f.xd, (size_t)n * c);
    snprintf(what, sizeof what, "linear_backward dw %s", tag);
    check_grad(what, f.dw, lin_objective, &f, f.wd, (size_t)oc * c);
    snprintf(what, sizeof what, "linear_backward db %s", tag);
    check_grad(what, f.db, lin_objective, &f, f.bd, oc);

    /* NULL gradients are skipped; the others are the same as before. */
    float dw2[MAXOC * MAXC] = {0}, dx2[N * MAXC] = {0};
    linear_backward(NULL, dw2, NULL, f.R, f.x, f.w, n, c, oc);
    ck_assert_msg(memcmp(dw2, f.dw, (size_t)oc * c * sizeof(float)) == 0,
                  "linear_backward: dw differs with NULL dinp/db");
    linear_backward(dx2, NULL, NULL, f.R, f.x, f.w, n, c, oc);
    ck_assert_msg(memcmp(dx2, f.dx, (size_t)n * c * sizeof(float)) == 0,
                  "linear_backward: dinp differs with NULL dw/db");

    float *grads[3] = {f.dx, f.dw, f.db};
    size_t sizes[3] = {(size_t)n * c, (size_t)oc * c, oc};
    snprintf(what, sizeof what, "linear_backward %s", tag);
    check_accumulate(what, lin_run_backward, &f, grads, sizes, 3);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Attention                                                                 */

typedef struct {
    int b, t, nh, hs;
    float *q, *k, *v, *R, *att, *scratch, *dq, *dk, *dv;
    double *qd, *kd, *vd, *Rd;
} att_fx;

static void att_alloc(att_fx *f, int b, int t, int nh, int hs, uint64_t seed)
{
    size_t n = (size_t)b * t * nh * hs, na = (size_t)b * nh * t * t;
    f->b = b, f->t = t, f->nh = nh, f->hs = hs;
    f->q = malloc(n * sizeof(float)), f->k = malloc(n * sizeof(float));
    f->v = malloc(n * sizeof(float)), f->R = malloc(n * sizeof(float));
    f->dq = calloc(n, sizeof(float)), f->dk = calloc(n, sizeof(float));
    f->dv = calloc(n, sizeof(float));
    f->att = malloc(na * sizeof(float));
    f->scratch = malloc((size_t)t * t * sizeof(float));
    f->qd = malloc(n * sizeof(double)), f->kd = malloc(n * sizeof(double));
    f->vd = malloc(n * sizeof(double)), f->Rd = malloc(n * sizeof(double));
    rng_seed(seed);
    /* Scores of order a few units: a peaked but not one-hot softmax. */
    fill(f->q, f->qd, n, -1.5, 1.5);
    fill(f->k, f->kd, n, -1.5, 1.5);
    fill(f->v, f->vd, n, -1, 1);
    fill(f->R, f->Rd, n, -1, 1);
}

static void att_free(att_fx *f)
{
    free(f->q), free(f->k), free(f->v), free(f->R), free(f->dq), free(f->dk), free(f->dv);
    free(f->att), free(f->scratch), free(f->qd), free(f->kd), free(f->vd), free(f->Rd);
}

static size_t att_n(const att_fx *f) { return (size_t)f->b * f->t * f->nh * f->hs; }

static double att_objective(void *ctx)
{
    att_fx *f = ctx;
    size_t n = att_n(f);
    double *out = malloc(n * sizeof *out);
    ref_attention(out, NULL, f->qd, f->kd, f->vd, f->b, f->t, f->nh, f->hs);
    double l = dot_r(out, f->Rd, n);
    free(out);
    return l;
}

static void att_run_backward(void *ctx)
{
    att_fx *f = ctx;
    /* Work space holds garbage between uses; NaN makes any read of a stale
     * entry visible. */
    fill_const(f->scratch, (size_t)f->t * f->t, NAN);
    attention_backward(f->dq, f->dk, f->dv, f->scratch, f->R, f->q, f->k, f->v, f->att, f->b,
                       f->t, f->nh, f->hs);
}

static void attention_case(const char *label, int b, int t, int nh, int hs, uint64_t seed)
{
    att_fx f;
    att_alloc(&f, b, t, nh, hs, seed);
    size_t n = att_n(&f), na = (size_t)b * nh * t * t;
    float *out = malloc(n * sizeof *out);
    double *ref = malloc(n * sizeof *ref), *pref = malloc(na * sizeof *pref);
    char what[96];

    /* Outputs start as NaN: the forward must write all of them, and the
     * masked part of att must come out as exact zeros. */
    fill_const(out, n, NAN);
    fill_const(f.att, na, NAN);
    attention_forward(out, f.att, f.q, f.k, f.v, b, t, nh, hs);
    ref_attention(ref, pref, f.qd, f.kd, f.vd, b, t, nh, hs);
    snprintf(what, sizeof what, "attention_forward out %s", label);
    CHECK_CLOSE(what, out, ref, n, TOL_FWD);
    snprintf(what, sizeof what, "attention_forward att %s", label);
    CHECK_CLOSE(what, f.att, pref, na, TOL_FWD);
    for (int bh = 0; bh < b * nh; bh++)
        for (int i = 0; i < t; i++)
            for (int j = i + 1; j < t; j++)
                ck_assert_msg(f.att[((size_t)bh * t + i) * t + j] == 0.0f,
                              "attention: att above the diagonal not zero at (%d,%d)", i, j);

    att_run_backward(&f);
    snprintf(what, sizeof what, "attention_backward dq %s", label);
    check_grad(what, f.dq, att_objective, &f, f.qd, n);
    snprintf(what, sizeof what, "attention_backward dk %s", label);
    check_grad(what, f.dk, att_objective, &f, f.kd, n);
    snprintf(what, sizeof what, "attention_backward dv %s", label);
    check_grad(what, f.dv, att_objective, &f, f.vd, n);

    float *grads[3] = {f.dq, f.dk, f.dv};
    size_t sizes[3] = {n, n, n};
    snprintf(what, sizeof what, "attention_backward %s", label);
    check_accumulate(what, att_run_backward, &f, grads, sizes, 3);

    free(out), free(ref), free(pref);
    att_free(&f);
}

START_TEST(test_attention_small)
{
    attention_case("(B2 T5 NH2 hs4)", B, T, NH, HS, 15);
}
END_TEST

/* T larger than the kernel's row blocks and not a multiple of 16, so the
 * block-triangular GEMMs and the partial vector blocks are exercised. */
START_TEST(test_attention_long)
{
    attention_case("(B1 T37 NH2 hs4)", 1, 37, 2, 4, 16);
}
END_TEST

/* Causality: changing the last token's q, k and v changes no output at an
 * earlier position, and does change the last one. */
START_TEST(test_attention_causal)
{
    const int t = 37;
    att_fx f;
    att_alloc(&f, B, t, NH, HS, 17);
    size_t n = att_n(&f);
    float *out1 = malloc(n * sizeof *out1), *out2 = malloc(n * sizeof *out2);
    attention_forward(out1, f.att, f.q, f.k, f.v, B, t, NH, HS);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < C; i++) {
            size_t o = ((size_t)b * t + t - 1) * C + i;
            f.q[o] += 0.75f, f.k[o] -= 1.25f, f.v[o] += 2.0f;
        }
    attention_forward(out2, f.att, f.q, f.k, f.v, B, t, NH, HS);
    int last_changed = 0;
    for (int b = 0; b < B; b++)
        for (int tt = 0; tt < t; tt++)
            for (int i = 0; i < C; i++) {
                size_t o = ((size_t)b * t + tt) * C + i;
                if (tt < t - 1)
                    ck_assert_msg(out1[o] == out2[o],
                                  "attention: output at t=%d depends on the future token", tt);
                else
                    last_changed |= out1[o] != out2[o];
            }
    ck_assert_msg(last_changed, "attention: changing the last token did not change its output");
    printf("  %-40s earlier outputs bitwise unchanged\n", "attention causality (T=37)");
    free(out1), free(out2);
    att_free(&f);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Non-finite inputs must not be hidden: a diverging run has to show up as a
 * NaN loss, not as plausible numbers. */

START_TEST(test_nan_propagation)
{
    /* GELU, forward and backward. */
    float x[3] = {0.5f, NAN, -2.0f}, y[3], g[3] = {1, 1, 1}, dx[3] = {0};
    gelu_forward(y, x, 3);
    gelu_backward(dx, x, g, 3);
    ck_assert_msg(isnan(y[1]) && isnan(dx[1]), "gelu lost a NaN: %g %g", y[1], dx[1]);
    ck_assert_msg(!isnan(y[0]) && !isnan(y[2]), "gelu spread a NaN to its neighbours");

    /* Cross-entropy: a NaN logit that is neither the max nor the target. */
    float logits[2 * VP], probs[2 * VP], losses[2];
    const int tg[2] = {0, 1};
    for (int j = 0; j < 2 * VP; j++)
        logits[j] = 0.1f * (float)j;
    logits[3] = NAN;
    crossentropy_forward(losses, probs, logits, tg, 2, VP, VV);
    ck_assert_msg(isnan(losses[0]), "crossentropy: NaN logit gave a finite loss %g", losses[0]);
    ck_assert_msg(isfinite(losses[1]), "crossentropy: NaN leaked into another row");

    /* Attention: a NaN in one key of position 2 reaches the output rows that
     * see it (t >= 2), not the earlier ones. */
    att_fx f;
    att_alloc(&f, 1, T, NH, HS, 22);
    float out[T * C];
    f.k[2 * C + 1] = NAN; /* head 0 */
    attention_forward(out, f.att, f.q, f.k, f.v, 1, T, NH, HS);
    for (int t = 0; t < T; t++) {
        int bad = isnan(out[t * C]);
        ck_assert_msg(bad == (t >= 2), "attention: NaN at t=%d is %d, want %d", t, bad, t >= 2);
        ck_assert_msg(!isnan(out[t * C + HS]), "attention: NaN crossed into head 1");
    }
    att_free(&f);
    printf("  %-40s gelu, crossentropy, attention keep NaNs\n", "non-finite inputs");
}
END_TEST


/* ------------------------------------------------------------------------ */
/* The attention's small matrix product                                     */

/* C = alpha A B (+ C): every row block (8, 4, 2, 1 rows: M 15 uses all of
 * them) and column tail of the 16-column blocks, K from 0, both
 * layouts of each operand, both modes, alpha 1 and one that is no power of
 * two (so a scaling anywhere else than the last fmaf changes bits). Every
 * leading dimension is 3 more than its row (rows misaligned, and a stride
 * confused with a dimension reads the wrong elements), and C's padding must
 * come back untouched (the masked tails write no column past N). The double
 * reference bounds the error by K ulps of sum |a b| (a sequential float sum's
 * bound); the FMA kernel must also equal its stated chain, fmaf(a, b, acc)
 * over k in order from 0 and then fmaf(alpha, acc, accumulate ? C : 0),
 * computed here one element at a time. */
START_TEST(test_small_gemm)
{
    const int Ms[] = {1, 3, 4, 5, 9, 15}, Ns[] = {1, 7, 8, 9, 15, 16, 17, 33};
    const int Ks[] = {0, 1, 5, 16, 37}, pad = 3;
    const float alphas[2] = {1.0f, 0.35355339f}; /* 1/sqrt(8), a head of 8's scale */
    const int fast = tt_small_gemm_fast();
    int cases = 0;
    double worst = 0;
    uint64_t seed = 31;
    for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
        for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
            for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++)
                for (int mode = 0; mode < 16; mode++) {
                    const int M = Ms[mi], Nn = Ns[ni], K = Ks[ki];
                    const int ta = mode & 1, tb = (mode >> 1) & 1, acc = (mode >> 2) & 1;
                    const float alpha = alphas[mode >> 3];
                    /* A(i,k) and B(k,n) in either layout, C with ldc > N */
                    const int sa_i = ta ? 1 : K + pad, sa_k = ta ? M + pad : 1;
                    const int sb_k = tb ? 1 : Nn + pad, sb_n = tb ? K + pad : 1, ldc = Nn + pad;
                    const size_t na = ta ? (size_t)K * sa_k : (size_t)M * sa_i;
                    const size_t nb = tb ? (size_t)Nn * sb_n : (size_t)K * sb_k;
                    const size_t nc = (size_t)M * ldc;
                    float *A = malloc(sizeof(float) * (na + 1)), *Bm = malloc(sizeof(float) * (nb + 1));
                    float *Cm = malloc(sizeof(float) * nc), *C0 = malloc(sizeof(float) * nc);
                    rng_seed(seed++);
                    fill(A, NULL, na, -1, 1);
                    fill(Bm, NULL, nb, -1, 1);
                    fill(C0, NULL, nc, -1, 1);
                    memcpy(Cm, C0, sizeof(float) * nc);
                    tt_small_gemm(Cm, ldc, A, sa_i, sa_k, Bm, sb_k, sb_n, M, Nn, K, alpha, acc);
                    for (int i = 0; i < M; i++)
                        for (int n = Nn; n < ldc; n++)
                            ck_assert_msg(memcmp(&Cm[i * ldc + n], &C0[i * ldc + n], sizeof *Cm) == 0,
                                          "M%d N%d K%d mode %d: padding (%d,%d) written", M, Nn, K,
                                          mode, i, n);
                    for (int i = 0; i < M; i++)
                        for (int n = 0; n < Nn; n++) {
                            double ref = 0, mag = 0;
                            float chain = 0;
                            for (int k = 0; k < K; k++) {
                                const float a = A[i * sa_i + k * sa_k], b = Bm[k * sb_k + n * sb_n];
                                ref += (double)a * b;
                                mag += fabs((double)a * b);
                                chain = fmaf(a, b, chain);
                            }
                            const float c0 = C0[i * ldc + n], got = Cm[i * ldc + n];
                            ref = alpha * ref + (acc ? c0 : 0.0);
                            const float want = fmaf(alpha, chain, acc ? c0 : 0.0f);
                            const double err = fabs(got - ref);
                            const double bound = (K + 2) * 0x1p-24 * (alpha * mag + fabs(ref));
                            ck_assert_msg(err <= bound, "M%d N%d K%d mode %d (%d,%d): %g off, bound %g",
                                          M, Nn, K, mode, i, n, err, bound);
                            if (fast)
                                ck_assert_msg(memcmp(&got, &want, sizeof got) == 0,
                                              "M%d N%d K%d mode %d (%d,%d): %a, the chain gives %a",
                                              M, Nn, K, mode, i, n, got, want);
                            const double scale = alpha * mag + fabs(ref);
                            if (scale > 0 && err / scale > worst)
                                worst = err / scale;
                        }
                    cases++;
                    free(A);
                    free(Bm);
                    free(Cm);
                    free(C0);
                }
    printf("  %-40s %d shapes x layouts, worst error %.1e of alpha sum|ab| + |result|; %s\n",
           "small gemm", cases, worst,
           fast ? "bits equal to the FMA chain" : "cblas_sgemm (no AVX2+FMA here)");
}
END_TEST

int main(void)
{
    const kernel_case cases[] = {
        {"linear", test_linear, 2},
        {"attention", test_attention_small, 1},
        {"attention_long", test_attention_long, 1},
        {"attention_causal", test_attention_causal, 1},
        {"small_gemm", test_small_gemm, 1},
        {"nan_propagation", test_nan_propagation, 1},
    };
    return tt_check_run(kernel_suite("kernels_gemm", cases, sizeof cases / sizeof cases[0]));
}
