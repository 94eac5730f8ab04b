/* ex_data_parallel.c - data parallelism on 2, 3 or 4 virtual GPUs: every
 * GPU holds a whole copy (replica) of a small linear model y = x W^T + b,
 * takes its own share of each batch, computes the gradient of its share, and
 * the replicas average their gradients with one all-reduce before every SGD
 * step. Since they start equal and apply the same averaged gradient, they
 * stay equal: bit for bit, not just approximately.
 *
 * Checks (exit 1 if any fails):
 *   - the replicas' weights have the same CRC-32 on every GPU after training;
 *   - they equal a single-process run on the whole batch within 1e-5
 *     (relative; the sums are just added in another order);
 *   - the all-reduce moved exactly C_in*C_out + C_out floats per step: the
 *     weight gradient, whatever the batch size or the number of GPUs.
 *
 *   mpirun -np 4 ./ex_data_parallel      (2, 3 or 4 ranks) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt/comm/comm.h"
#include "tt/core/common.h"
#include "tt/comm/grid.h"
#include "tt/core/kernels.h"
#include "tt/core/params.h"

#include "ex_common.h"

enum { CIN = 16, COUT = 8, B = 24, STEPS = 8 }; /* global batch 24: 12, 8 or 6 per GPU */
static const float LR = 0.3f;
static const double TOL = 1e-5;

/* Sample j of step s: x ~ N(0,1) and the target of a fixed "teacher" model,
 * so the loss has something to learn. Every GPU can make any sample. */
static void make_sample(int s, int j, float *x, float *t)
{
    int id = s * B + j;
    for (int i = 0; i < CIN; i++)
        x[i] = tt_hash_normal(3, "x", (uint64_t)id * CIN + i);
    for (int o = 0; o < COUT; o++) {
        double acc = 0.01 * tt_hash_normal(3, "noise", (uint64_t)id * COUT + o);
        for (int i = 0; i < CIN; i++)
            acc += tt_hash_normal(3, "teacher", o * CIN + i) / sqrt(CIN) * x[i];
        t[o] = (float)acc;
    }
}

/* Loss 0.5 * mean over the n samples of |y - t|^2; gradients (+=) into gw, gb
 * of that mean. Returns the sum (not the mean) of the samples' losses. */
static double grad_of_mean(float *gw, float *gb, const float *w, const float *b, int s, int first,
                           int n)
{
    float x[B * CIN] = {0}, t[B * COUT], y[B * COUT]; /* n <= B */
    for (int j = 0; j < n; j++)
        make_sample(s, first + j, x + j * CIN, t + j * COUT);
    linear_forward(y, x, w, b, n, CIN, COUT);
    double loss = 0;
    for (int i = 0; i < n * COUT; i++) {
        float d = y[i] - t[i];
        loss += 0.5 * d * d;
        y[i] = d / n; /* d loss / d y */
    }
    linear_backward(NULL, gw, gb, y, x, w, n, CIN, COUT);
    return loss;
}

int main(int argc, char **argv)
{
    int world, rank = ex_start(&argc, &argv, "ex_data_parallel", 2, 4, &world);
    tt_grid g;
    tt_grid_init(&g, 1, 1, world, MPI_COMM_WORLD); /* all ranks form one DP group */
    const int dp = g.dp, share = B / dp, first = g.dp_rank * share;

    /* The replica: weights and gradients in the library's parameter table, so
     * all gradients are one contiguous buffer and one all-reduce covers them. */
    tt_params p = {0};
    tt_params_add(&p, "fc.weight", 2, COUT, CIN, TT_SPLIT_NONE, 0, COUT);
    tt_params_add(&p, "fc.bias", 1, COUT, 1, TT_SPLIT_NONE, 0, COUT);
    tt_params_alloc(&p);
    tt_params_init(&p, 11, 1); /* same seed on every GPU: identical replicas */
    /* The buffers of all shards, contiguous: weights and gradients of w and b. */
    float *w = p.t[0].w, *b = p.t[1].w;
    float *weights = tt_params_buffer(&p, TT_W), *grads = tt_params_buffer(&p, TT_G);
    const int nparam = (int)p.total; /* C_in*C_out + C_out */

    /* The single-process reference: the same model trained on whole batches. */
    float rw[COUT * CIN], rb[COUT], rgw[COUT * CIN], rgb[COUT];
    memcpy(rw, w, sizeof rw);
    memcpy(rb, b, sizeof rb);

    tt_comm_stats_reset();
    if (rank == 0)
        printf("data parallel on %d GPUs: model y = x W^T + b, C_in = %d, C_out = %d; global batch %d,"
               " %d samples per GPU\n step  loss (DP)   loss (1 process)\n", dp, CIN, COUT, B, share);
    for (int s = 0; s < STEPS; s++) {
        tt_params_zero_grads(&p);
        double loss = grad_of_mean(p.t[0].g, p.t[1].g, w, b, s, first, share);
        /* Sum the replicas' gradients, then divide by dp: the average of the
         * shard means, which is the mean over the whole batch. */
        tt_allreduce(&g, TT_GROUP_DP, grads, nparam, MPI_FLOAT, MPI_SUM);
        for (int i = 0; i < nparam; i++)
            grads[i] /= dp;
        for (int i = 0; i < nparam; i++) /* plain SGD on every replica */
            weights[i] -= LR * grads[i];
        /* The loss of the whole batch, for the log only (bookkeeping, not DP traffic). */
        tt_allreduce(&g, TT_GROUP_OTHER, &loss, 1, MPI_DOUBLE, MPI_SUM);

        memset(rgw, 0, sizeof rgw);
        memset(rgb, 0, sizeof rgb);
        double ref_loss = grad_of_mean(rgw, rgb, rw, rb, s, 0, B);
        for (int i = 0; i < COUT * CIN; i++)
            rw[i] -= LR * rgw[i];
        for (int o = 0; o < COUT; o++)
            rb[o] -= LR * rgb[o];
        if (rank == 0)
            printf(" %4d  %.6f    %.6f\n", s, loss / B, ref_loss / B);
    }
    const tt_comm_count *ar = &tt_comm_stats_get()->c[TT_GROUP_DP][TT_OP_ALLREDUCE];

    /* Bit-identical replicas: every GPU's CRC of its weights, side by side. */
    uint32_t crc = tt_crc32(0, weights, sizeof(float) * nparam), crcs[4];
    int ones[4] = {1, 1, 1, 1}, at[4] = {0, 1, 2, 3};
    tt_gatherv(&g, TT_GROUP_OTHER, &crc, 1, crcs, ones, at, MPI_UINT32_T, 0);
    double err = 0, scale = 1e-30;
    for (int i = 0; i < COUT * CIN; i++) {
        err = fmax(err, fabs(w[i] - rw[i]));
        scale = fmax(scale, fabs(rw[i]));
    }
    for (int o = 0; o < COUT; o++) {
        err = fmax(err, fabs(b[o] - rb[o]));
        scale = fmax(scale, fabs(rb[o]));
    }
    err /= scale;
    tt_allreduce(&g, TT_GROUP_OTHER, &err, 1, MPI_DOUBLE, MPI_MAX);

    int fail = 0;
    if (rank == 0) {
        int same = 1;
        printf("\nCRC-32 of each replica's weights:");
        for (int r = 0; r < dp; r++) {
            printf(" gpu%d %08x", r, crcs[r]);
            same &= crcs[r] == crcs[0];
        }
        printf("  -> %s\n", same ? "bit-identical" : "DIFFERENT");
        printf("weights vs the single-process run: max relative error %.2e (tolerance %.0e)\n", err, TOL);
        long long want = 4LL * (CIN * COUT + COUT);
        printf("gradient all-reduced per step: %lld bytes (%ld calls in %d steps); formula\n"
               "(C_in*C_out + C_out) floats = (%d*%d + %d) * 4 = %lld bytes, whatever the batch or dp\n",
               ar->bytes / STEPS, ar->calls, STEPS, CIN, COUT, COUT, want);
        if (!same)
            printf("FAIL: the replicas drifted apart\n");
        if (!(err <= TOL))
            printf("FAIL: data parallel training differs from the single-process run\n");
        if (ar->calls != STEPS || ar->bytes != want * STEPS)
            printf("FAIL: the DP all-reduce did not move exactly one gradient per step\n");
        fail = !same || !(err <= TOL) || ar->calls != STEPS || ar->bytes != want * STEPS;
        if (!fail)
            printf("OK: replicas identical and equal to one process on the whole batch\n");
    }
    MPI_Bcast(&fail, 1, MPI_INT, 0, MPI_COMM_WORLD);
    tt_params_free(&p);
    tt_grid_free(&g);
    MPI_Finalize();
    return fail ? 1 : 0;
}
