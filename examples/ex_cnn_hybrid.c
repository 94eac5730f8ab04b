/* ex_cnn_hybrid.c - the slides' recipe for convolutional networks, on 4
 * virtual GPUs: data parallelism for the convolutions (few parameters, large
 * activations) and tensor parallelism for the fully connected layers (many
 * parameters, small activations).
 *
 * Model (1-D signals of 72 samples, 10 classes, global batch 16):
 *   conv1 1->8 channels, kernel 5, tanh  |  DP: each GPU takes 4 signals,
 *   conv2 8->8 channels, kernel 5, tanh  |  conv weights replicated, their
 *   average pool by 4 -> 128 features    |  gradient all-reduced
 *   fc1 128->256, tanh (column-parallel) |  TP: the 4 GPUs all-gather the
 *   fc2 256->10 (row-parallel), softmax  |  features of the whole batch and
 *                                           each holds a quarter of the neurons
 *
 * It prints, for each part, the floats one training step moves under each
 * strategy, measured for the strategy it runs, from the formula for the other,
 * and checks the loss and every gradient against one process computing the
 * whole model on the whole batch (exit 1 otherwise).
 *
 *   mpirun -np 4 ./ex_cnn_hybrid */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt/comm/comm.h"
#include "tt/comm/grid.h"
#include "tt/core/kernels.h"
#include "tt/core/params.h"
#include "tt/comm/tensor_parallel.h"

#include "ex_common.h"

enum { G = 4, B = 16, BL = B / G, LIN = 72, K = 5, CH = 8, L1 = LIN - K + 1, L2 = L1 - K + 1,
       POOL = 4, F = CH * (L2 / POOL), H = 256, HL = H / G, NCLS = 10 };
/* Conv parameters, one array: conv1 w [CH][1][K], b [CH]; conv2 w [CH][CH][K], b [CH]. */
enum { W1C = 0, B1C = CH * K, W2C = B1C + CH, B2C = W2C + CH * CH * K, NCONV = B2C + CH };
static const double TOL = 1e-5;

/* out[n][co][t] = b[co] + sum_ci,k w[co][ci][k] in[n][ci][t+k], then tanh. */
static void conv_forward(float *out, const float *in, const float *w, const float *b, int n, int ci_n, int lin)
{
    int lout = lin - K + 1;
    for (int s = 0; s < n; s++)
        for (int co = 0; co < CH; co++)
            for (int t = 0; t < lout; t++) {
                float acc = b[co];
                for (int ci = 0; ci < ci_n; ci++)
                    for (int k = 0; k < K; k++)
                        acc += w[(co * ci_n + ci) * K + k] * in[(s * ci_n + ci) * lin + t + k];
                out[(s * CH + co) * lout + t] = tanhf(acc);
            }
}
/* dout (of the tanh output, overwritten by d pre-activation) -> dw, db (+=), din (+=, may be NULL). */
static void conv_backward(float *din, float *dw, float *db, float *dout, const float *out, const float *in,
                          const float *w, int n, int ci_n, int lin)
{
    int lout = lin - K + 1;
    for (int i = 0; i < n * CH * lout; i++)
        dout[i] *= 1.0f - out[i] * out[i];
    for (int s = 0; s < n; s++)
        for (int co = 0; co < CH; co++)
            for (int t = 0; t < lout; t++) {
                float d = dout[(s * CH + co) * lout + t];
                db[co] += d;
                for (int ci = 0; ci < ci_n; ci++)
                    for (int k = 0; k < K; k++) {
                        dw[(co * ci_n + ci) * K + k] += d * in[(s * ci_n + ci) * lin + t + k];
                        if (din)
                            din[(s * ci_n + ci) * lin + t + k] += d * w[(co * ci_n + ci) * K + k];
                    }
            }
}

/* The convolutional part on n signals: x -> h1 -> h2 -> features (average pool). */
typedef struct { float h1[B * CH * L1], h2[B * CH * L2]; } conv_acts;
static void features_forward(float *feat, conv_acts *a, const float *x, const float *p, int n)
{
    conv_forward(a->h1, x, p + W1C, p + B1C, n, 1, LIN);
    conv_forward(a->h2, a->h1, p + W2C, p + B2C, n, CH, L1);
    for (int i = 0; i < n * F; i++) {
        feat[i] = 0;
        for (int q = 0; q < POOL; q++)
            feat[i] += a->h2[i * POOL + q] / POOL;
    }
}
static void features_backward(float *gp, conv_acts *a, const float *dfeat, const float *x, const float *p, int n)
{
    static float d2[B * CH * L2], d1[B * CH * L1];
    for (int i = 0; i < n * F; i++)
        for (int q = 0; q < POOL; q++)
            d2[i * POOL + q] = dfeat[i] / POOL;
    memset(d1, 0, sizeof d1);
    conv_backward(d1, gp + W2C, gp + B2C, d2, a->h2, a->h1, p + W2C, n, CH, L1);
    conv_backward(NULL, gp + W1C, gp + B1C, d1, a->h1, x, p + W1C, n, 1, LIN);
}

int main(int argc, char **argv)
{
    int world, r = ex_start(&argc, &argv, "ex_cnn_hybrid", G, G, &world);
    /* The same 4 GPUs seen two ways: one DP group for the convolutions, one
     * TP group for the fully connected layers. */
    tt_grid gdp, gtp;
    tt_grid_init(&gdp, 1, 1, G, MPI_COMM_WORLD);
    tt_grid_init(&gtp, G, 1, 1, MPI_COMM_WORLD);

    /* Data and the whole model, generated identically everywhere; each GPU
     * then uses only its samples (conv) and its slices (fc). */
    static float x[B * LIN], conv[NCONV], w1[H * F], b1[H], w2[NCLS * H], b2[NCLS];
    int target[B];
    for (int i = 0; i < B * LIN; i++)
        x[i] = tt_hash_normal(5, "x", i);
    for (int n = 0; n < B; n++)
        target[n] = (int)(tt_hash_uniform(5, 1, n) * NCLS);
    for (int i = 0; i < NCONV; i++)
        conv[i] = tt_hash_normal(5, "conv", i) * (i < B1C ? 0.4f : 0.15f);
    for (int i = 0; i < H * F; i++)
        w1[i] = tt_hash_normal(5, "fc1.weight", i) / sqrtf(F);
    for (int i = 0; i < NCLS * H; i++)
        w2[i] = tt_hash_normal(5, "fc2.weight", i) / sqrtf(H);
    for (int i = 0; i < H; i++)
        b1[i] = 0.1f * tt_hash_normal(5, "fc1.bias", i);
    for (int i = 0; i < NCLS; i++)
        b2[i] = 0.1f * tt_hash_normal(5, "fc2.bias", i);
    static float w2l[NCLS * HL]; /* fc2 is row-parallel: this GPU's HL columns */
    for (int o = 0; o < NCLS; o++)
        memcpy(w2l + o * HL, w2 + o * H + r * HL, sizeof(float) * HL);
    const float *w1l = w1 + r * HL * F, *b1l = b1 + r * HL; /* fc1: this GPU's HL rows */

    /* ---- the hybrid step ---- */
    static conv_acts act;
    static float fmine[BL * F], fall[B * F], h[B * HL], logits[B * NCLS], probs[B * NCLS], losses[B];
    static float dlog[B * NCLS], dh[B * HL], dfall[B * F], dfmine[BL * F];
    static float gconv[NCONV], gw1l[HL * F], gb1l[HL], gw2l[NCLS * HL], gb2[NCLS];
    tt_comm_stats_reset();
    features_forward(fmine, &act, x + r * BL * LIN, conv, BL); /* DP: my 4 signals */
    tp_gather_forward(&gtp, fall, fmine, BL * F); /* every GPU gets all 16 samples' features */
    column_linear_forward(&gtp, h, fall, w1l, b1l, B, F, HL);
    for (int i = 0; i < B * HL; i++)
        h[i] = tanhf(h[i]);
    row_linear_forward(&gtp, logits, h, w2l, b2, B, HL, NCLS); /* all-reduce of B x 10 partial logits */
    crossentropy_forward(losses, probs, logits, target, B, NCLS, NCLS);
    double loss = 0;
    for (int n = 0; n < B; n++)
        loss += losses[n] / B;
    crossentropy_backward(dlog, probs, target, 1.0f / B, B, NCLS, NCLS);
    row_linear_backward(&gtp, dh, gw2l, gb2, dlog, h, w2l, B, HL, NCLS);
    for (int i = 0; i < B * HL; i++)
        dh[i] *= 1.0f - h[i] * h[i];
    linear_backward(dfall, gw1l, gb1l, dh, fall, w1l, B, F, HL); /* partial: my neurons only */
    tp_gather_backward(&gtp, dfmine, dfall, BL * F); /* reduce-scatter: sum, keep my samples */
    features_backward(gconv, &act, dfmine, x + r * BL * LIN, conv, BL);
    /* The loss already averages over all 16 samples, so the replicas' conv
     * gradients are partial sums of the global gradient: all-reduce adds them. */
    tt_allreduce(&gdp, TT_GROUP_DP, gconv, NCONV, MPI_FLOAT, MPI_SUM);
    const tt_comm_stats *st = tt_comm_stats_get();
    long long conv_dp = st->c[TT_GROUP_DP][TT_OP_ALLREDUCE].bytes / 4;
    /* fc under TP, per operation: gather of the features, reduce-scatter of
     * their gradient, all-reduce of the partial logits. */
    long long gat = st->c[TT_GROUP_TP][TT_OP_ALLGATHER].bytes / 4, rs = st->c[TT_GROUP_TP][TT_OP_REDUCE_SCATTER].bytes / 4,
              red = st->c[TT_GROUP_TP][TT_OP_ALLREDUCE].bytes / 4, fc_tp = gat + rs + red;

    /* ---- the single-process reference: whole model, whole batch ---- */
    static float rf[B * F], rh[B * H], rlog[B * NCLS], rdh[B * H], rdf[B * F];
    static float rgconv[NCONV], rgw1[H * F], rgb1[H], rgw2[NCLS * H], rgb2[NCLS];
    static conv_acts ract;
    features_forward(rf, &ract, x, conv, B);
    linear_forward(rh, rf, w1, b1, B, F, H);
    for (int i = 0; i < B * H; i++)
        rh[i] = tanhf(rh[i]);
    linear_forward(rlog, rh, w2, b2, B, H, NCLS);
    crossentropy_forward(losses, probs, rlog, target, B, NCLS, NCLS);
    double rloss = 0;
    for (int n = 0; n < B; n++)
        rloss += losses[n] / B;
    memset(dlog, 0, sizeof dlog);
    crossentropy_backward(dlog, probs, target, 1.0f / B, B, NCLS, NCLS);
    linear_backward(rdh, rgw2, rgb2, dlog, rh, w2, B, H, NCLS);
    for (int i = 0; i < B * H; i++)
        rdh[i] *= 1.0f - rh[i] * rh[i];
    linear_backward(rdf, rgw1, rgb1, rdh, rf, w1, B, F, H);
    features_backward(rgconv, &ract, rdf, x, conv, B);
    static float rgw2l[NCLS * HL];
    for (int o = 0; o < NCLS; o++)
        memcpy(rgw2l + o * HL, rgw2 + o * H + r * HL, sizeof(float) * HL);
    double err[6] = {fabs(loss - rloss) / rloss, ex_rel_err(gconv, rgconv, NCONV),
                     ex_rel_err(gw1l, rgw1 + r * HL * F, HL * F), ex_rel_err(gb1l, rgb1 + r * HL, HL),
                     ex_rel_err(gw2l, rgw2l, NCLS * HL), ex_rel_err(gb2, rgb2, NCLS)};
    tt_allreduce(&gtp, TT_GROUP_OTHER, err, 6, MPI_DOUBLE, MPI_MAX); /* worst GPU, bookkeeping */

    /* ---- the communication of each choice, in floats per training step ---- */
    const long long p_conv = NCONV, p_fc = H * F + H + NCLS * H + NCLS;
    const long long tp_conv = 2LL * B * CH * L1; /* conv2 split by output channel needs all of h1:
                                                    all-gather forward, all-reduce of dh1 backward */
    const long long tp_fc = 2LL * B * F + (long long)B * NCLS; /* gather features, reduce-scatter
                                                                  their gradient, all-reduce logits */
    double worst = 0;
    for (int i = 0; i < 6; i++)
        worst = fmax(worst, err[i]);
    int fail = !(worst <= TOL) || conv_dp != p_conv || gat != B * F || rs != B * F || red != B * NCLS;
    if (r == 0) {
        printf("CNN hybrid on %d GPUs, global batch %d: convolutions data-parallel, fc layers tensor-parallel\n\n", G, B);
        printf("floats moved per training step, per GPU (measured: the counters of the strategy that ran)\n");
        char l[4][80];
        snprintf(l[0], 80, "data parallel (runs here): all-reduce of the weight gradient");
        snprintf(l[1], 80, "tensor parallel: conv2 needs every channel of h1, 2 x B x %d x %d", CH, L1);
        snprintf(l[2], 80, "data parallel: all-reduce of the weight gradient");
        snprintf(l[3], 80, "tensor parallel (runs here): 2 x B x %d features + B x %d logits", F, NCLS);
        printf("conv1+conv2: %lld parameters, %d activations per sample (h1 + h2)\n", p_conv, CH * (L1 + L2));
        printf("  %-66s %6lld  (measured %lld)\n  %-66s %6lld\n", l[0], p_conv, conv_dp, l[1], tp_conv);
        printf("fc1+fc2: %lld parameters, %d activations per sample (hidden + logits)\n", p_fc, H + NCLS);
        printf("  %-66s %6lld\n  %-66s %6lld  (measured %lld = %lld + %lld + %lld)\n", l[2], p_fc, l[3],
               tp_fc, fc_tp, gat, rs, red);
        printf("\nhybrid %lld floats vs data parallel everywhere %lld (%.1fx) vs tensor parallel everywhere ~%lld (%.1fx)\n",
               p_conv + tp_fc, p_conv + p_fc, (double)(p_conv + p_fc) / (p_conv + tp_fc), tp_conv + tp_fc,
               (double)(tp_conv + tp_fc) / (p_conv + tp_fc));
        printf("\nagainst one process on the whole batch (max relative error, worst GPU; tolerance %.0e):\n"
               "  loss %.6f: %.1e   conv grads %.1e   fc1 W %.1e b %.1e   fc2 W %.1e b %.1e\n",
               TOL, loss, err[0], err[1], err[2], err[3], err[4], err[5]);
        printf("%s\n", fail ? "FAIL: the hybrid differs from one process, or moved other bytes than its formulas"
                            : "OK: the hybrid computes the same gradients as one process");
    }
    tt_grid_free(&gdp);
    tt_grid_free(&gtp);
    MPI_Finalize();
    return fail ? 1 : 0;
}
