/* test_kernels.c - unit tests of the forward/backward kernels (src/core/kernels.c).
 *
 * Every float forward is compared with a double-precision reference written
 * here, independently of kernels.c. Every gradient produced by a float
 * backward kernel is compared with central finite differences of a scalar
 * objective L = sum(out * R) (R a fixed random array, so dL/dout = R) taken
 * on the double reference: (L(x+h) - L(x-h)) / 2h with h = 1e-6. In double
 * that quotient is accurate to ~1e-9 (rounding ~1e-16 |L| / h, truncation
 * ~h^2), far below float32 errors, so what is measured is the error of the
 * float kernel.
 *
 * Error measure: max over elements of |a - n| / max(|n|, 1e-3 max|n|), i.e.
 * relative error, except that an element much smaller than the largest one
 * of its array is judged on its absolute error (a near-zero element is the
 * sum of larger terms that cancel, and carries their rounding error).
 * Tolerance 1e-3, forwards and gradients alike: float32 rounds at
 * u = 6e-8, and a result here is a sum of K <= ~40 products, whose error is
 * bounded by ~K u sum|terms|, i.e. up to ~1e-6 of the array's scale, which
 * the 1e-3 floor reads as up to ~1e-3 (typical errors, printed by each test,
 * are 1e-7..1e-4). A wrong term, sign, scale or constant gives 1e-2 or more;
 * the data are chosen so that it does (e.g. a LayerNorm row of small variance
 * makes eps matter at the 4% level).
 *
 * Besides: accumulation (+=) semantics of every backward, the causal property
 * of attention, the vocabulary slice of the embedding, the padded
 * vocabulary of the cross-entropy and what its vocabulary-parallel passes
 * charge the virtual clock. */
#include "tt/core/kernels.h"
#include "tt/core/vclock.h"

#include "check_run.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FD_H 1e-6
#define ERR_FLOOR 1e-3
#define TOL_BWD 1e-3
#define TOL_FWD 1e-3
/* Accumulation checks compare g(twice) with 2 g(once): equal up to the
 * rounding of one extra addition per element. */
#define TOL_ACC 1e-6

/* Small sizes: B=2, T=5, C=8, NH=2 heads of hs=4, N=B*T, OC=6, Vp=10, V=7. */
enum { B = 2, T = 5, NH = 2, HS = 4, C = NH * HS, N = B * T, OC = 6, VP = 10, VV = 7 };

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

static uint64_t rng_state;

static void rng_seed(uint64_t s) { rng_state = s; }

/* splitmix64: a fixed, platform-independent stream. */
static double rng_uniform(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0; /* [0, 1) */
}

/* Random floats in [lo, hi), with an exact double copy (d may be NULL). */
static void fill(float *f, double *d, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)(lo + (hi - lo) * rng_uniform());
        if (d)
            d[i] = f[i];
    }
}

static void fill_const(float *f, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        f[i] = v;
}

/* max_i |a_i - ref_i| / max(|ref_i|, ERR_FLOOR * max_j |ref_j|) */
static double max_rel_err(const float *a, const double *ref, size_t n)
{
    double scale = 0.0;
    for (size_t i = 0; i < n; i++)
        scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
    const double floor_ = scale > 0.0 ? ERR_FLOOR * scale : 1e-30;
    double e = 0.0;
    for (size_t i = 0; i < n; i++) {
        double den = fabs(ref[i]) > floor_ ? fabs(ref[i]) : floor_;
        double r = fabs((double)a[i] - ref[i]) / den;
        if (!(r <= e)) /* also catches NaN */
            e = r;
    }
    return e;
}

static void report(const char *what, double err, double tol)
{
    printf("  %-40s max rel err %.2e  (tol %.0e)\n", what, err, tol);
    fflush(stdout);
}

/* Reports and asserts: float result a against double reference ref. */
#define CHECK_CLOSE(what, a, ref, n, tol)                                      \
    do {                                                                      \
        double err_ = max_rel_err((a), (ref), (n));                           \
        report((what), err_, (tol));                                          \
        ck_assert_msg(err_ < (tol), "%s: max rel err %.3g not below %.0e",    \
                      (what), err_, (tol));                                   \
    } while (0)

/* The objective of a finite-difference check: L(ctx) in double. */
typedef double (*objective_fn)(void *ctx);

/* Central differences of L with respect to every element of x (which L reads). */
static void numeric_grad(double *g, objective_fn L, void *ctx, double *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + FD_H;
        double lp = L(ctx);
        x[i] = x0 - FD_H;
        double lm = L(ctx);
        x[i] = x0;
        g[i] = (lp - lm) / (2.0 * FD_H);
    }
}

/* Finite-difference check of one analytic gradient. */
static void check_grad(const char *what, const float *analytic, objective_fn L, void *ctx,
                       double *x, size_t n)
{
    double *num = malloc(n * sizeof *num);
    numeric_grad(num, L, ctx, x, n);
    /* Guard against a vacuous check: the gradient must not be all zero. */
    double mx = 0.0;
    for (size_t i = 0; i < n; i++)
        mx = fabs(num[i]) > mx ? fabs(num[i]) : mx;
    ck_assert_msg(mx > 1e-3, "%s: numeric gradient is zero, test is vacuous", what);
    CHECK_CLOSE(what, analytic, num, n, TOL_BWD);
    free(num);
}

static double dot_r(const double *out, const double *R, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += out[i] * R[i];
    return s;
}

/* Accumulation semantics of a backward: run() adds into the ng buffers
 * grads[g] of sizes[g]. Called twice on zeroed buffers it must double the
 * result; on pre-filled buffers it must add to them. */
static void check_accumulate(const char *what, void (*run)(void *), void *ctx, float **grads,
                             const size_t *sizes, int ng)
{
    for (int g = 0; g < ng; g++) {
        size_t n = sizes[g];
        float *once = malloc(n * sizeof *once);
        float *pre = malloc(n * sizeof *pre);

        for (int h = 0; h < ng; h++)
            memset(grads[h], 0, sizes[h] * sizeof(float));
        run(ctx);
        memcpy(once, grads[g], n * sizeof *once);
        double mx = 0.0;
        for (size_t i = 0; i < n; i++)
            mx = fabs(once[i]) > mx ? fabs(once[i]) : mx;
        ck_assert_msg(mx > 0.0, "%s grad %d: zero gradient, accumulate check is vacuous", what, g);

        run(ctx);
        double e2 = 0.0;
        for (size_t i = 0; i < n; i++) {
            double d = fabs((double)grads[g][i] - 2.0 * once[i]);
            e2 = d > e2 ? d : e2;
        }
        ck_assert_msg(e2 <= TOL_ACC * mx, "%s grad %d: twice != 2 x once (err %.3g)", what, g,
                      e2);

        fill(pre, NULL, n, -1.0, 1.0);
        for (int h = 0; h < ng; h++)
            memset(grads[h], 0, sizes[h] * sizeof(float));
        memcpy(grads[g], pre, n * sizeof *pre);
        run(ctx);
        double ep = 0.0;
        for (size_t i = 0; i < n; i++) {
            double d = fabs(((double)grads[g][i] - pre[i]) - once[i]);
            ep = d > ep ? d : ep;
        }
        ck_assert_msg(ep <= TOL_ACC * (mx + 1.0), "%s grad %d: not added to prior contents (err %.3g)",
                      what, g, ep);
        free(once);
        free(pre);
    }
    printf("  %-40s accumulates (+=) into %d gradient(s)\n", what, ng);
    fflush(stdout);
}

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

/* losses[n] = logsumexp(logits[n, 0..V)) - logits[n, target]. */
static void ref_crossentropy(double *losses, double *probs, const double *logits,
                             const int *targets, int n_, int vp, int v)
{
    for (int n = 0; n < n_; n++) {
        const double *x = logits + (size_t)n * vp;
        double mx = -INFINITY, sum = 0.0;
        for (int j = 0; j < v; j++)
            mx = x[j] > mx ? x[j] : mx;
        for (int j = 0; j < v; j++)
            sum += exp(x[j] - mx);
        double lse = mx + log(sum);
        losses[n] = lse - x[targets[n]];
        if (probs)
            for (int j = 0; j < vp; j++)
                probs[(size_t)n * vp + j] = j < v ? exp(x[j] - lse) : 0.0;
    }
}

/* ------------------------------------------------------------------------ */
/* Embeddings                                                                */

/* Vocabulary of 10 tokens; this shard owns rows [3, 7). Each test with a
 * width below and one above the kernels' vector block of 16 floats
 * (tcase loop index _i). */
enum { EV = 10, EV0 = 3, EVL = 4, MAXC = 40 };
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

/* Sizes (_i): the brief's small one, and one with rows wider than the
 * kernels' vector block of 16 floats plus a remainder. */
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

/* ------------------------------------------------------------------------ */
/* Cross-entropy                                                             */

static const int ce_targets[N] = {0, 6, 3, 1, 6, 2, 5, 4, 0, 3};
#define CE_DLOSS 0.3f
/* Sizes (_i): the brief's, and a vocabulary wider than the vector block. */
enum { MAXVP = 40 };
static const int ce_n[2] = {N, 6}, ce_vp[2] = {VP, MAXVP}, ce_v[2] = {VV, 37};

typedef struct {
    int n, vp, v, tg[N];
    float logits[N * MAXVP], probs[N * MAXVP], dlogits[N * MAXVP];
    double ld[N * MAXVP];
} ce_fx;

/* L = dloss * sum_n loss_n: the backward is given dloss, not a per-row R. */
static double ce_objective(void *ctx)
{
    ce_fx *f = ctx;
    double losses[N];
    ref_crossentropy(losses, NULL, f->ld, f->tg, f->n, f->vp, f->v);
    double s = 0.0;
    for (int n = 0; n < f->n; n++)
        s += (double)CE_DLOSS * losses[n];
    return s;
}

static void ce_run_backward(void *ctx)
{
    ce_fx *f = ctx;
    crossentropy_backward(f->dlogits, f->probs, f->tg, CE_DLOSS, f->n, f->vp, f->v);
}

START_TEST(test_crossentropy)
{
    ce_fx f;
    const int n_ = f.n = ce_n[_i], vp = f.vp = ce_vp[_i], v = f.v = ce_v[_i];
    char what[96], tag[40];
    snprintf(tag, sizeof tag, "(N=%d Vp=%d V=%d)", n_, vp, v);
    for (int n = 0; n < n_; n++)
        f.tg[n] = _i == 0 ? ce_targets[n] : (ce_targets[n] * 5 + n) % v;
    rng_seed(20);
    fill(f.logits, f.ld, n_ * vp, -3, 3);
    /* Padding columns [V, Vp) hold garbage, larger than every real logit. */
    for (int n = 0; n < n_; n++)
        for (int j = v; j < vp; j++)
            f.logits[n * vp + j] = 50.0f + (float)j, f.ld[n * vp + j] = 50.0 + j;

    float losses[N];
    fill_const(f.probs, n_ * vp, NAN);
    crossentropy_forward(losses, f.probs, f.logits, f.tg, n_, vp, v);
    double lref[N], pref[N * MAXVP];
    ref_crossentropy(lref, pref, f.ld, f.tg, n_, vp, v);
    snprintf(what, sizeof what, "crossentropy_forward losses %s", tag);
    CHECK_CLOSE(what, losses, lref, n_, TOL_FWD);
    snprintf(what, sizeof what, "crossentropy_forward probs %s", tag);
    CHECK_CLOSE(what, f.probs, pref, (size_t)n_ * vp, TOL_FWD);
    for (int n = 0; n < n_; n++)
        for (int j = v; j < vp; j++)
            ck_assert_msg(f.probs[n * vp + j] == 0.0f, "crossentropy: padded prob not 0");

    memset(f.dlogits, 0, sizeof f.dlogits);
    ce_run_backward(&f);
    snprintf(what, sizeof what, "crossentropy_backward dlogits %s", tag);
    check_grad(what, f.dlogits, ce_objective, &f, f.ld, (size_t)n_ * vp);
    for (int n = 0; n < n_; n++)
        for (int j = v; j < vp; j++)
            ck_assert_msg(f.dlogits[n * vp + j] == 0.0f, "crossentropy: padded dlogit not 0");

    float *grads[1] = {f.dlogits};
    size_t sizes[1] = {(size_t)n_ * vp};
    snprintf(what, sizeof what, "crossentropy_backward %s", tag);
    check_accumulate(what, ce_run_backward, &f, grads, sizes, 1);
}
END_TEST

/* Vp = 8, V = 6 with garbage in the padding gives the same losses as the
 * unpadded V = 6 rows, and dlogits stays untouched in the padding. */
START_TEST(test_crossentropy_padding)
{
    enum { PV = 6, PVP = 8 };
    float pad[N * PVP], unpad[N * PV], lp[N], lu[N], pp[N * PVP], pu[N * PV];
    float dp[N * PVP], du[N * PV];
    int tg[N];
    rng_seed(21);
    fill(unpad, NULL, N * PV, -2, 2);
    for (int n = 0; n < N; n++) {
        tg[n] = ce_targets[n] % PV;
        memcpy(pad + n * PVP, unpad + n * PV, PV * sizeof(float));
        pad[n * PVP + PV] = 1e4f;      /* would dominate the softmax */
        pad[n * PVP + PV + 1] = -1e4f; /* would underflow */
    }
    crossentropy_forward(lp, pp, pad, tg, N, PVP, PV);
    crossentropy_forward(lu, pu, unpad, tg, N, PV, PV);
    double maxd = 0.0;
    for (int n = 0; n < N; n++) {
        double d = fabs((double)lp[n] - lu[n]);
        maxd = d > maxd ? d : maxd;
        ck_assert_msg(lp[n] == lu[n], "padding changed loss of row %d: %.9g vs %.9g", n, lp[n],
                      lu[n]);
        ck_assert_msg(lu[n] > 0.0f && lu[n] < 10.0f, "implausible loss %g", lu[n]);
    }
    printf("  %-40s max |loss(padded) - loss(unpadded)| = %.1e\n", "crossentropy Vp=8 V=6", maxd);

    fill_const(dp, N * PVP, 0.0f);
    fill_const(du, N * PV, 0.0f);
    /* Padding columns of dlogits start non-zero: they must be left as they are. */
    for (int n = 0; n < N; n++)
        dp[n * PVP + PV] = 7.0f, dp[n * PVP + PV + 1] = -7.0f;
    crossentropy_backward(dp, pp, tg, 0.5f, N, PVP, PV);
    crossentropy_backward(du, pu, tg, 0.5f, N, PV, PV);
    for (int n = 0; n < N; n++) {
        ck_assert_msg(dp[n * PVP + PV] == 7.0f && dp[n * PVP + PV + 1] == -7.0f,
                      "crossentropy_backward wrote into padding columns (row %d)", n);
        for (int j = 0; j < PV; j++)
            ck_assert_msg(dp[n * PVP + j] == du[n * PV + j],
                          "padded and unpadded dlogits differ at (%d,%d)", n, j);
    }
}
END_TEST

/* The vocabulary-parallel passes charge the virtual clock what the one-GPU
 * kernel charges for the same Vl columns (Vr real): the three forward passes
 * together as crossentropy_forward(Vp = Vl, V = Vr), each a nonzero share in
 * the ratio 1 : 3 : 1 (the clock moves at each pass, between the TP
 * all-reduces); the slice backward as crossentropy_backward. The one-GPU
 * kernels are the reference, and a by-hand roofline of their counts (5 FLOPs
 * per real column and 2 floats per column forward, 2 and 3 backward) checks
 * that reference. Both sides of the roofline: a cluster where these kernels
 * are memory-bound and one where they are compute-bound. */
START_TEST(test_crossentropy_slice_clock)
{
    enum { SN = 4, SVL = 8, SVR = 6 };
    const double bw = _i == 0 ? 1e9 : 1e12; /* bytes/s: memory-bound, compute-bound */
    const tt_cluster cl = {.name = "test", .gpus_per_server = 1, .peak_flops = 1e9,
                           .peak_flops_fp32 = 1e9, .gemm_efficiency = 0.5,
                           .memory_bandwidth = bw, .gpu_memory_bytes = 1e9};
    float logits[SN * SVL], probs[SN * SVL], dl[SN * SVL], mx[SN], tl[SN], se[SN], losses[SN];
    int tg[SN];
    rng_seed(23);
    fill(logits, NULL, SN * SVL, -2, 2);
    for (int n = 0; n < SN; n++)
        tg[n] = (3 * n + 1) % SVR;
    tt_vclock_setup(&cl, TT_CLOCK_VIRTUAL, 0);
    tt_vclock_run(1);

    double t[4];
    t[0] = tt_vclock_now();
    crossentropy_slice_max(mx, tl, logits, tg, SN, SVL, SVR, 0);
    t[1] = tt_vclock_now();
    crossentropy_slice_exp(probs, se, logits, mx, SN, SVL, SVR);
    t[2] = tt_vclock_now();
    crossentropy_slice_finish(losses, probs, se, mx, tl, SN, SVL, SVR);
    t[3] = tt_vclock_now();
    crossentropy_forward(losses, probs, logits, tg, SN, SVL, SVR);
    const double fwd1 = tt_vclock_now() - t[3];
    const double fl = 5.0 * SN * SVR / (1e9 * 0.5), mem = 4.0 * 2 * SN * SVL / bw;
    const double hand = fl > mem ? fl : mem;
    ck_assert_msg(fabs(fwd1 - hand) <= 1e-12 * hand, "crossentropy_forward charged %.9g s, by hand %.9g",
                  fwd1, hand);
    const double share[3] = {1, 3, 1};
    for (int p = 0; p < 3; p++)
        ck_assert_msg(fabs((t[p + 1] - t[p]) - share[p] / 5 * fwd1) <= 1e-12 * fwd1,
                      "slice pass %d charged %.9g s, want %g/5 of %.9g", p, t[p + 1] - t[p],
                      share[p], fwd1);

    memset(dl, 0, sizeof dl);
    double b0 = tt_vclock_now();
    crossentropy_slice_backward(dl, probs, tg, 0.25f, SN, SVL, SVR, 0);
    const double bslice = tt_vclock_now() - b0;
    b0 = tt_vclock_now();
    crossentropy_backward(dl, probs, tg, 0.25f, SN, SVL, SVR);
    const double b1 = tt_vclock_now() - b0;
    const double bfl = 2.0 * SN * SVR / (1e9 * 0.5), bmem = 4.0 * 3 * SN * SVL / bw;
    ck_assert_msg(fabs(b1 - (bfl > bmem ? bfl : bmem)) <= 1e-12 * b1,
                  "crossentropy_backward charged %.9g s", b1);
    ck_assert_msg(fabs(bslice - b1) <= 1e-12 * b1, "slice backward charged %.9g s, one GPU %.9g",
                  bslice, b1);
    tt_vclock_run(0);
    printf("  %-40s forward %.3g s = %.3g + %.3g + %.3g, backward %.3g s\n",
           _i == 0 ? "crossentropy slices, memory-bound" : "crossentropy slices, compute-bound",
           fwd1, t[1] - t[0], t[2] - t[1], t[3] - t[2], bslice);
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

static Suite *kernels_suite(void)
{
    Suite *s = suite_create("kernels");
    struct {
        const char *name;
        const TTest *test;
        int sizes; /* loop index _i runs over [0, sizes) */
    } cases[] = {
        {"embedding", test_embedding, 2},
        {"posemb", test_posemb, 1},
        {"layernorm", test_layernorm, 2},
        {"linear", test_linear, 2},
        {"attention", test_attention_small, 1},
        {"attention_long", test_attention_long, 1},
        {"attention_causal", test_attention_causal, 1},
        {"gelu", test_gelu, 1},
        {"residual", test_residual, 1},
        {"crossentropy", test_crossentropy, 2},
        {"crossentropy_padding", test_crossentropy_padding, 1},
        {"crossentropy_slice_clock", test_crossentropy_slice_clock, 2},
        {"nan_propagation", test_nan_propagation, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_set_timeout(tc, 60);
        tcase_add_loop_test(tc, cases[i].test, 0, cases[i].sizes);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    return tt_check_run(kernels_suite());
}
