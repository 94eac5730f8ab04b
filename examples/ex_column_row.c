/* ex_column_row.c - the two ways to split one linear layer y = x W^T
 * (W is [C_out, C_in], PyTorch's convention) across a tensor-parallel group
 * of 2, 3 or 4 virtual GPUs, and what each costs in communication.
 *
 *   column-parallel ("partition output"): each GPU holds some rows of W, i.e.
 *     some output neurons, and computes their slice of y from the whole x.
 *     The whole y needs an all-gather of the slices: B*C_out floats.
 *   row-parallel ("reduce output"): each GPU holds some columns of W, i.e.
 *     some input features, and computes a partial sum of all of y from its
 *     slice of x. The whole y needs an all-reduce of the partial sums.
 *
 * The backward is run too, because that is where the C_in side shows up: the
 * gradient of x (B*C_in floats) is a partial sum on the column-parallel layer
 * (all-reduce) and a slice on the row-parallel one (all-gather to rebuild it).
 *
 * Every result is checked against the unsharded product, which every GPU
 * computes itself, and every byte count against its formula (exit 1 if not).
 *
 *   mpirun -np 4 ./ex_column_row      (2, 3 or 4 ranks) */
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

enum { B = 8, CIN = 24, COUT = 12 }; /* 24 and 12 split evenly over 2, 3 and 4 GPUs */
static const double TOL = 1e-5;

static double rel_err(const float *a, const float *ref, int n, int stride_a, int stride_r, int cols)
{ /* max |a - ref| / max |ref| over n rows of cols, rows stride_* apart */
    double diff = 0, scale = 1e-30;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < cols; j++) {
            diff = fmax(diff, fabs((double)a[i * stride_a + j] - ref[i * stride_r + j]));
            scale = fmax(scale, fabs((double)ref[i * stride_r + j]));
        }
    return diff / scale;
}
/* Bytes this rank booked for one TP operation since the last reset. */
static long long tp_bytes(tt_op op) { return tt_comm_stats_get()->c[TT_GROUP_TP][op].bytes; }

/* [tp][rows][part] blocks (what all-gather returns, rank after rank) -> [rows][tp*part]. */
static void blocks_to_columns(float *out, const float *blocks, int tp, int rows, int part)
{
    for (int r = 0; r < tp; r++)
        for (int n = 0; n < rows; n++)
            memcpy(out + n * tp * part + r * part, blocks + (r * rows + n) * part, sizeof(float) * part);
}

/* One row of the report: the collective, its measured bytes, the formula, the errors. */
static void line(const char *dir, const char *what, long long bytes, const char *formula,
                 int floats, const char *name, double e, double edw)
{
    printf("  %s: %-44s %4lld bytes = %-7s = %3d floats   %s err %.1e", dir, what, bytes, formula,
           floats, name, e);
    if (edw >= 0)
        printf(", dW err %.1e", edw);
    printf("\n");
}

int main(int argc, char **argv)
{
    int world, rank = ex_start(&argc, &argv, "ex_column_row", 2, 4, &world);
    tt_grid g;
    tt_grid_init(&g, world, 1, 1, MPI_COMM_WORLD); /* all ranks form one TP group */
    const int tp = g.tp, r = g.tp_rank, OCl = COUT / tp, ICl = CIN / tp;

    /* The same x, W and upstream gradient dy on every GPU (deterministic). */
    static float x[B * CIN], w[COUT * CIN], dy[B * COUT];
    for (int i = 0; i < B * CIN; i++)
        x[i] = tt_hash_normal(1, "x", i);
    for (int i = 0; i < COUT * CIN; i++)
        w[i] = tt_hash_normal(1, "w", i) / sqrtf(CIN);
    for (int i = 0; i < B * COUT; i++)
        dy[i] = tt_hash_normal(1, "dy", i);

    /* The unsharded layer, the answer both splits must reproduce. */
    static float y_ref[B * COUT], dx_ref[B * CIN], dw_ref[COUT * CIN];
    linear_forward(y_ref, x, w, NULL, B, CIN, COUT);
    linear_backward(dx_ref, dw_ref, NULL, dy, x, w, B, CIN, COUT);

    static float y[B * COUT], dx[B * CIN], blocks[B * CIN], part[B * CIN], wl[COUT * CIN],
        dwl[COUT * CIN], dyl[B * COUT];
    double err[6];
    long long bytes[4];
    tt_comm_stats_reset();

    /* Column-parallel: rows [r*OCl, (r+1)*OCl) of W are contiguous. */
    const float *wcol = w + r * OCl * CIN;
    column_linear_forward(&g, part, x, wcol, NULL, B, CIN, OCl); /* no communication */
    tp_gather_forward(&g, blocks, part, B * OCl);            /* all-gather of the y slices */
    blocks_to_columns(y, blocks, tp, B, OCl);
    bytes[0] = tp_bytes(TT_OP_ALLGATHER);
    err[0] = rel_err(y, y_ref, B, COUT, COUT, COUT);
    for (int n = 0; n < B; n++) /* dy is whole on every GPU: take this GPU's columns */
        memcpy(dyl + n * OCl, dy + n * COUT + r * OCl, sizeof(float) * OCl);
    memset(dwl, 0, sizeof dwl);
    column_linear_backward(&g, dx, dwl, NULL, dyl, x, wcol, B, CIN, OCl); /* all-reduce of dx */
    bytes[1] = tp_bytes(TT_OP_ALLREDUCE);
    err[1] = rel_err(dx, dx_ref, B, CIN, CIN, CIN);
    err[2] = rel_err(dwl, dw_ref + r * OCl * CIN, OCl, CIN, CIN, CIN);
    tt_comm_stats_reset();

    /* Row-parallel: columns [r*ICl, (r+1)*ICl) of W, and the same columns of x. */
    static float xl[B * CIN];
    for (int o = 0; o < COUT; o++)
        memcpy(wl + o * ICl, w + o * CIN + r * ICl, sizeof(float) * ICl);
    for (int n = 0; n < B; n++)
        memcpy(xl + n * ICl, x + n * CIN + r * ICl, sizeof(float) * ICl);
    row_linear_forward(&g, y, xl, wl, NULL, B, ICl, COUT); /* all-reduce of the partial sums */
    bytes[2] = tp_bytes(TT_OP_ALLREDUCE);
    err[3] = rel_err(y, y_ref, B, COUT, COUT, COUT);
    memset(part, 0, sizeof part);
    memset(dwl, 0, sizeof dwl);
    row_linear_backward(&g, part, dwl, NULL, dy, xl, wl, B, ICl, COUT); /* no communication */
    tp_gather_forward(&g, blocks, part, B * ICl);                   /* all-gather of the dx slices */
    blocks_to_columns(dx, blocks, tp, B, ICl);
    bytes[3] = tp_bytes(TT_OP_ALLGATHER);
    err[4] = rel_err(dx, dx_ref, B, CIN, CIN, CIN);
    err[5] = rel_err(dwl, dw_ref + r * ICl, COUT, ICl, CIN, ICl);

    /* The worst error over all GPUs (bookkeeping, not part of either strategy's cost). */
    tt_allreduce(&g, TT_GROUP_OTHER, err, 6, MPI_DOUBLE, MPI_MAX);
    const long long want[4] = {4LL * B * COUT, 4LL * B * CIN, 4LL * B * COUT, 4LL * B * CIN};
    int fail = 0;
    for (int i = 0; i < 6; i++)
        fail |= !(err[i] <= TOL);
    for (int i = 0; i < 4; i++)
        fail |= bytes[i] != want[i];
    tt_allreduce(&g, TT_GROUP_OTHER, &fail, 1, MPI_INT, MPI_MAX); /* one verdict for all */

    if (rank == 0) {
        printf("y = x W^T: B = %d rows, C_in = %d, C_out = %d, on %d GPUs (one TP group)\n"
               "errors: max relative error against the unsharded layer, worst GPU (tolerance %.0e)\n\n",
               B, CIN, COUT, tp, TOL);
        char what[64];
        printf("column-parallel (partition output): each GPU holds %d of the %d rows of W\n", OCl, COUT);
        snprintf(what, sizeof what, "y slice [%dx%d] local, all-gather -> whole y", B, OCl);
        line("forward ", what, bytes[0], "B*C_out", B * COUT, "y", err[0], -1);
        line("backward", "dx partial sums, all-reduce -> whole dx", bytes[1], "B*C_in", B * CIN, "dx", err[1], err[2]);
        printf("row-parallel (reduce output): each GPU holds %d of the %d columns of W\n", ICl, CIN);
        snprintf(what, sizeof what, "y partial sums [%dx%d], all-reduce -> whole y", B, COUT);
        line("forward ", what, bytes[2], "B*C_out", B * COUT, "y", err[3], -1);
        line("backward", "dx slice local, all-gather -> whole dx", bytes[3], "B*C_in", B * CIN, "dx", err[4], err[5]);
        printf("\nthe slides' costs: data parallel C_in*C_out = %d floats (the weight gradient);\n"
               "partition output B*C_out = %d (the all-gather of y above); reduce output B*C_in = %d\n"
               "(its x side: the layer works on x split by input feature, and the whole dx is a\n"
               "gather of B*C_in). Tensor parallelism moves activations, which grow with the batch;\n"
               "data parallelism moves the weights' gradient, which does not.\n",
               CIN * COUT, B * COUT, B * CIN);
        printf("%s\n", fail ? "FAIL: a result or a byte count is wrong" : "OK: both splits reproduce the unsharded layer");
    }
    tt_grid_free(&g);
    MPI_Finalize();
    return fail ? 1 : 0;
}
