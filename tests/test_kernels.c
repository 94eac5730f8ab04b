/* test_kernels.c - unit tests of the row-wise and element-wise kernels
 * (src/core/kernels.c): token embedding (with its vocabulary slice),
 * position embedding, LayerNorm, GELU (its relative error also swept over
 * its whole range) and the residual, forward and backward, each against a
 * double-precision reference written here and its finite differences, and
 * each backward accumulating (+=): the method and tolerances in kernel_check.h.
 * Linear and attention: test_kernels_gemm.c; the cross-entropy and what it
 * charges the virtual clock: test_kernels_ce.c. */
#include "tt/core/kernels.h"

#include "check_run.h"
#include "kernel_check.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Double-precision reference forwards (independent of kernels.c)            */

static void ref_layernorm(double *out, const double *x, const double *w, const double *b,
                          int n_, int c_)
{
    for (int n = 0; n < n_; n++) {
        const double *xr = x + (size_t)n * c_;
        double m = 0.0, v = 0.0;
        for (int i = 0; i < c_; i++)
            m += xr[i];
        m /= c_;
        for (int i = 0; i < c_; i++)
            v += (xr[i] - m) * (xr[i] - m);
        v /= c_;
        double rs = 1.0 / sqrt(v + 1e-5);
        for (int i = 0; i < c_; i++)
            out[(size_t)n * c_ + i] = (xr[i] - m) * rs * w[i] + b[i];
    }
}

static double ref_gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

/* The same function as x / (1 + e^{-2u}) (0.5 (1 + tanh u) is the logistic
 * sigmoid of 2u): in double, 1 + tanh(u) itself loses all its digits below
 * x = -5.5, so a relative-error sweep over large negative x needs this form. */
static double ref_gelu_sigmoid(double x)
{
    double u = sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-2.0 * u));
}

/* ------------------------------------------------------------------------ */
/* Embeddings                                                                */

/* Vocabulary of 10 tokens; this shard owns rows [3, 7). Each test with a
 * width below and one above the kernels' vector block of 16 floats
 * (tcase loop index _i). */
enum { EV = 10, EV0 = 3, EVL = 4 };
static const int emb_idx[N] = {0, 3, 4, 9, 6, 3, 7, 2, 5, 6};
static const int emb_c[2] = {C, MAXC};

typedef struct {
    int c;
    float w[EVL * MAXC], R[N * MAXC], dw[EVL * MAXC];
    double wd[EVL * MAXC], Rd[N * MAXC];
} emb_fx;

static double emb_objective(void *ctx)
{
    emb_fx *f = ctx;
    const int c = f->c;
    double out[N * MAXC];
    for (int n = 0; n < N; n++)
        for (int i = 0; i < c; i++) {
            int row = emb_idx[n] - EV0;
            out[n * c + i] = (row >= 0 && row < EVL) ? f->wd[row * c + i] : 0.0;
        }
    return dot_r(out, f->Rd, (size_t)N * c);
}

static void emb_run_backward(void *ctx)
{
    emb_fx *f = ctx;
    embedding_backward(f->dw, f->R, emb_idx, N, f->c, EV0, EVL);
}

START_TEST(test_embedding)
{
    emb_fx f;
    const int c = f.c = emb_c[_i];
    char what[96];
    rng_seed(11);
    fill(f.w, f.wd, EVL * c, -1, 1);
    fill(f.R, f.Rd, N * c, -1, 1);

    float out[N * MAXC];
    /* Garbage in out: rows of other shards' tokens must come out as zeros. */
    fill_const(out, N * c, NAN);
    embedding_forward(out, emb_idx, f.w, N, c, EV0, EVL);
    double ref[N * MAXC];
    int owned = 0, foreign = 0;
    for (int n = 0; n < N; n++) {
        int row = emb_idx[n] - EV0;
        int mine = row >= 0 && row < EVL;
        owned += mine;
        foreign += !mine;
        for (int i = 0; i < c; i++) {
            ref[n * c + i] = mine ? f.wd[row * c + i] : 0.0;
            if (!mine)
                ck_assert_msg(out[n * c + i] == 0.0f,
                              "embedding: token %d outside slice [%d,%d) gave %g, not 0",
                              emb_idx[n], EV0, EV0 + EVL, out[n * c + i]);
        }
    }
    ck_assert(owned > 0 && foreign > 0); /* the ids do cover both cases */
    snprintf(what, sizeof what, "embedding_forward (slice, C=%d)", c);
    CHECK_CLOSE(what, out, ref, (size_t)N * c, TOL_FWD);

    memset(f.dw, 0, sizeof f.dw);
    emb_run_backward(&f);
    snprintf(what, sizeof what, "embedding_backward dw (C=%d)", c);
    check_grad(what, f.dw, emb_objective, &f, f.wd, (size_t)EVL * c);

    /* Tokens outside the slice, including both neighbours of it (v0 - 1 and
     * v0 + Vl), must not touch dw: with only foreign tokens the gradient, and
     * a guard row past its end, stay exactly zero. */
    const int foreign_idx[4] = {0, EV0 - 1, EV0 + EVL, 9};
    float dw2[(EVL + 1) * MAXC] = {0};
    embedding_backward(dw2, f.R, foreign_idx, 4, c, EV0, EVL);
    for (int i = 0; i < (EVL + 1) * c; i++)
        ck_assert_msg(dw2[i] == 0.0f, "embedding_backward: foreign token wrote dw[%d]", i);

    float *grads[1] = {f.dw};
    size_t sizes[1] = {(size_t)EVL * c};
    snprintf(what, sizeof what, "embedding_backward (C=%d)", c);
    check_accumulate(what, emb_run_backward, &f, grads, sizes, 1);
}
END_TEST

typedef struct {
    float wpe[T * C], R[N * C], dwpe[T * C];
    double wped[T * C], Rd[N * C], xd[N * C];
} pos_fx;

static double pos_objective(void *ctx)
{
    pos_fx *f = ctx;
    double out[N * C];
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T * C; i++)
            out[b * T * C + i] = f->xd[b * T * C + i] + f->wped[i];
    return dot_r(out, f->Rd, N * C);
}

static void pos_run_backward(void *ctx)
{
    pos_fx *f = ctx;
    posemb_backward(f->dwpe, f->R, B, T, C);
}

START_TEST(test_posemb)
{
    pos_fx f;
    rng_seed(12);
    float x[N * C];
    fill(x, f.xd, N * C, -1, 1);
    fill(f.wpe, f.wped, T * C, -1, 1);
    fill(f.R, f.Rd, N * C, -1, 1);

    posemb_forward(x, f.wpe, B, T, C); /* x += wpe[t] */
    double ref[N * C];
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T * C; i++)
            ref[b * T * C + i] = f.xd[b * T * C + i] + f.wped[i];
    CHECK_CLOSE("posemb_forward (out += wpe)", x, ref, N * C, TOL_FWD);

    memset(f.dwpe, 0, sizeof f.dwpe);
    pos_run_backward(&f);
    check_grad("posemb_backward dwpe", f.dwpe, pos_objective, &f, f.wped, T * C);

    float *grads[1] = {f.dwpe};
    size_t sizes[1] = {T * C};
    check_accumulate("posemb_backward", pos_run_backward, &f, grads, sizes, 1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* LayerNorm                                                                 */

/* Sizes (_i): kernel_check.h's small one (N x C), and one with rows wider
 * than the kernels' vector block of 16 floats plus a remainder. */
static const int ln_n[2] = {N, 6}, ln_c[2] = {C, MAXC};

typedef struct {
    int n, c;
    float x[N * MAXC], w[MAXC], b[MAXC], R[N * MAXC], mean[N], rstd[N];
    float dx[N * MAXC], dw[MAXC], db[MAXC];
    double xd[N * MAXC], wd[MAXC], bd[MAXC], Rd[N * MAXC];
} ln_fx;

static double ln_objective(void *ctx)
{
    ln_fx *f = ctx;
    double out[N * MAXC];
    ref_layernorm(out, f->xd, f->wd, f->bd, f->n, f->c);
    return dot_r(out, f->Rd, (size_t)f->n * f->c);
}

static void ln_run_backward(void *ctx)
{
    ln_fx *f = ctx;
    layernorm_backward(f->dx, f->dw, f->db, f->R, f->x, f->w, f->mean, f->rstd, f->n, f->c);
}

START_TEST(test_layernorm)
{
    ln_fx f;
    const int n_ = f.n = ln_n[_i], c = f.c = ln_c[_i];
    char what[96], tag[32];
    snprintf(tag, sizeof tag, "(N=%d C=%d)", n_, c);
    rng_seed(13);
    /* An offset mean and a spread of scales, as a residual stream has. */
    for (int n = 0; n < n_; n++)
        fill(f.x + n * c, f.xd + n * c, c, -0.5 + 0.3 * n, 0.5 + 0.7 * n);
    /* One row of small variance (~1e-4), where eps = 1e-5 changes rstd by
     * some 4%: a wrong eps, or an unbiased variance, cannot pass. (Centred
     * near 0: around 1 the float mean alone would cost ~1e-5 absolute.) */
    fill(f.x + 2 * c, f.xd + 2 * c, c, -0.02, 0.02);
    fill(f.w, f.wd, c, 0.5, 1.5);
    fill(f.b, f.bd, c, -0.5, 0.5);
    fill(f.R, f.Rd, n_ * c, -1, 1);

    float out[N * MAXC];
    layernorm_forward(out, f.mean, f.rstd, f.x, f.w, f.b, n_, c);
    double ref[N * MAXC], mref[N], rref[N];
    ref_layernorm(ref, f.xd, f.wd, f.bd, n_, c);
    for (int n = 0; n < n_; n++) {
        double m = 0.0, v = 0.0;
        for (int i = 0; i < c; i++)
            m += f.xd[n * c + i];
        m /= c;
        for (int i = 0; i < c; i++)
            v += (f.xd[n * c + i] - m) * (f.xd[n * c + i] - m);
        mref[n] = m;
        rref[n] = 1.0 / sqrt(v / c + 1e-5);
    }
    snprintf(what, sizeof what, "layernorm_forward out %s", tag);
    CHECK_CLOSE(what, out, ref, (size_t)n_ * c, TOL_FWD);
    snprintf(what, sizeof what, "layernorm_forward mean %s", tag);
    CHECK_CLOSE(what, f.mean, mref, n_, TOL_FWD);
    snprintf(what, sizeof what, "layernorm_forward rstd %s", tag);
    CHECK_CLOSE(what, f.rstd, rref, n_, TOL_FWD);

    memset(f.dx, 0, sizeof f.dx);
    memset(f.dw, 0, sizeof f.dw);
    memset(f.db, 0, sizeof f.db);
    ln_run_backward(&f);
    snprintf(what, sizeof what, "layernorm_backward dinp %s", tag);
    check_grad(what, f.dx, ln_objective, &f, f.xd, (size_t)n_ * c);
    snprintf(what, sizeof what, "layernorm_backward dw %s", tag);
    check_grad(what, f.dw, ln_objective, &f, f.wd, c);
    snprintf(what, sizeof what, "layernorm_backward db %s", tag);
    check_grad(what, f.db, ln_objective, &f, f.bd, c);

    float *grads[3] = {f.dx, f.dw, f.db};
    size_t sizes[3] = {(size_t)n_ * c, c, c};
    snprintf(what, sizeof what, "layernorm_backward %s", tag);
    check_accumulate(what, ln_run_backward, &f, grads, sizes, 3);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* GELU                                                                      */

enum { GN = 37 }; /* two full vector blocks of 16 and a tail */

typedef struct {
    float x[GN], R[GN], dx[GN];
    double xd[GN], Rd[GN];
} gelu_fx;

static double gelu_objective(void *ctx)
{
    gelu_fx *f = ctx;
    double s = 0.0;
    for (int i = 0; i < GN; i++)
        s += ref_gelu(f->xd[i]) * f->Rd[i];
    return s;
}

static void gelu_run_backward(void *ctx)
{
    gelu_fx *f = ctx;
    gelu_backward(f->dx, f->x, f->R, GN);
}

START_TEST(test_gelu)
{
    gelu_fx f;
    rng_seed(18);
    fill(f.x, f.xd, GN, -4, 4);
    fill(f.R, f.Rd, GN, -1, 1);
    float out[GN];
    double ref[GN];
    gelu_forward(out, f.x, GN);
    for (int i = 0; i < GN; i++)
        ref[i] = ref_gelu(f.xd[i]);
    CHECK_CLOSE("gelu_forward (x in [-4,4])", out, ref, GN, TOL_FWD);

    /* A dense sweep of the relative error without floor, wherever the
     * result is a normal float (below x = -9.9 it is under 1e-35 and only its
     * size is checked). For x < 0 the function itself is ill-conditioned: its
     * condition number k(x) = |x g'(x) / g(x)| reaches 220 at x = -9.9, so
     * the one rounding of x alone (3e-8) moves g by k * 3e-8 relative. Hence
     * two measures: the plain relative error on [-3, 12] (k <= 10), and over
     * the whole range the relative error divided by max(1, k). */
    enum { SW = 40001 };
    static float xs[SW], ys[SW];
    for (int i = 0; i < SW; i++)
        xs[i] = (float)(-12.0 + 24.0 * i / (SW - 1));
    gelu_forward(ys, xs, SW);
    double rel = 0.0, relk = 0.0;
    for (int i = 0; i < SW; i++) {
        double x = xs[i], r = ref_gelu_sigmoid(x);
        if (x > -9.9) {
            if (r == 0.0) { /* x = 0 */
                ck_assert_msg(ys[i] == 0.0f, "gelu(0) = %g", ys[i]);
                continue;
            }
            if (x > -4.0) /* where both forms of the reference are exact */
                ck_assert_msg(fabs(ref_gelu(x) - r) <= 1e-10 * fabs(r),
                              "test references disagree at x = %g", x);
            double e = fabs(ys[i] - r) / fabs(r);
            double h = 1e-6 * (fabs(x) > 1.0 ? fabs(x) : 1.0);
            double k = fabs(x * (ref_gelu_sigmoid(x + h) - ref_gelu_sigmoid(x - h)) / (2 * h) / r);
            double ek = e / (k > 1.0 ? k : 1.0);
            if (x >= -3.0)
                rel = e > rel || e != e ? e : rel;
            relk = ek > relk || ek != ek ? ek : relk;
        } else {
            ck_assert_msg(fabsf(ys[i]) < 1e-35f && !(ys[i] > 0.0f),
                          "gelu(%g) = %g, expected a tiny non-positive value", xs[i], ys[i]);
        }
    }
    report("gelu_forward sweep [-3,12] (no floor)", rel, 2e-6);
    ck_assert_msg(rel < 2e-6, "gelu_forward: relative error %.3g on [-3, 12]", rel);
    report("gelu_forward sweep [-9.9,12] rel/max(1,k)", relk, 1e-6);
    ck_assert_msg(relk < 1e-6, "gelu_forward: relative error / condition %.3g", relk);

    /* In place (out == inp) gives the same bits. */
    float inplace[GN];
    memcpy(inplace, f.x, sizeof inplace);
    gelu_forward(inplace, inplace, GN);
    ck_assert_msg(memcmp(inplace, out, sizeof out) == 0, "gelu_forward in place differs");

    memset(f.dx, 0, sizeof f.dx);
    gelu_run_backward(&f);
    check_grad("gelu_backward dinp", f.dx, gelu_objective, &f, f.xd, GN);

    float *grads[1] = {f.dx};
    size_t sizes[1] = {GN};
    check_accumulate("gelu_backward", gelu_run_backward, &f, grads, sizes, 1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Residual                                                                  */

enum { RN = 37 };

typedef struct {
    float a[RN], b[RN], R[RN], da[RN], db[RN];
    double ad[RN], bd[RN], Rd[RN];
} res_fx;

static double res_objective(void *ctx)
{
    res_fx *f = ctx;
    double s = 0.0;
    for (int i = 0; i < RN; i++)
        s += (f->ad[i] + f->bd[i]) * f->Rd[i];
    return s;
}

static void res_run_backward(void *ctx)
{
    res_fx *f = ctx;
    residual_backward(f->da, f->db, f->R, RN);
}

START_TEST(test_residual)
{
    res_fx f;
    rng_seed(19);
    fill(f.a, f.ad, RN, -1, 1);
    fill(f.b, f.bd, RN, -1, 1);
    fill(f.R, f.Rd, RN, -1, 1);
    float out[RN];
    double ref[RN];
    residual_forward(out, f.a, f.b, RN);
    for (int i = 0; i < RN; i++)
        ref[i] = f.ad[i] + f.bd[i];
    CHECK_CLOSE("residual_forward", out, ref, RN, TOL_FWD);

    memset(f.da, 0, sizeof f.da);
    memset(f.db, 0, sizeof f.db);
    res_run_backward(&f);
    check_grad("residual_backward da", f.da, res_objective, &f, f.ad, RN);
    check_grad("residual_backward db", f.db, res_objective, &f, f.bd, RN);

    float *grads[2] = {f.da, f.db};
    size_t sizes[2] = {RN, RN};
    check_accumulate("residual_backward", res_run_backward, &f, grads, sizes, 2);
}
END_TEST

int main(void)
{
    const kernel_case cases[] = {
        {"embedding", test_embedding, 2},
        {"posemb", test_posemb, 1},
        {"layernorm", test_layernorm, 2},
        {"gelu", test_gelu, 1},
        {"residual", test_residual, 1},
    };
    return tt_check_run(kernel_suite("kernels", cases, sizeof cases / sizeof cases[0]));
}
