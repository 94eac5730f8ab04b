/* test_kernels_ce.c - unit tests of the cross-entropy kernels
 * (src/core/kernels.c): the forward (losses and probabilities) against a
 * double-precision reference written here, the backward against finite
 * differences and accumulating (+=) (the method: kernel_check.h); the padded
 * vocabulary (columns [V, Vp) change no loss and receive no gradient); and
 * what the vocabulary-parallel passes charge the virtual clock, against the
 * one-GPU kernels and a roofline worked by hand. */
#include "tt/core/kernels.h"
#include "tt/core/vclock.h"

#include "check_run.h"
#include "kernel_check.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Double-precision reference forwards (independent of kernels.c)            */

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
/* Cross-entropy                                                             */

static const int ce_targets[N] = {0, 6, 3, 1, 6, 2, 5, 4, 0, 3};
#define CE_DLOSS 0.3f
/* Sizes (_i): kernel_check.h's small one (N rows, VV of VP columns real),
 * and a vocabulary wider than the vector block. */
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
    /* the 16-bit peak twice the FP32 one: a kernel charged at the wrong
     * peak would show */
    const tt_cluster cl = {.name = "test", .gpus_per_server = 1, .peak_flops = 2e9,
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

int main(void)
{
    const kernel_case cases[] = {
        {"crossentropy", test_crossentropy, 2},
        {"crossentropy_padding", test_crossentropy_padding, 1},
        {"crossentropy_slice_clock", test_crossentropy_slice_clock, 2},
    };
    return tt_check_run(kernel_suite("kernels_ce", cases, sizeof cases / sizeof cases[0]));
}
