/* tensor_parallel.c - the communication of Megatron-style tensor
 * parallelism around the kernels: the copy/reduce/gather/scatter operator
 * pairs, column- and row-parallel linear layers built from them, the
 * vocabulary-parallel embedding and cross-entropy, and the traffic they
 * imply (the TP rows of the communication report). */
#include "tt/comm/tensor_parallel.h"
#include "tt/comm/comm.h"
#include "tt/core/faults.h"
#include "tt/core/kcost.h"
#include "tt/core/kernels.h"
#include "tt/core/vclock.h"
#include "core/vec.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int tp_size(const tt_grid *g) { return g ? g->tp : 1; }

/* The one sum of the TP group, behind copy backward and reduce forward:
 * x = the sum over the group of part (in place when part == x). */
static void sum_over_tp_to(const tt_grid *g, float *x, const float *part, int n)
{
    if (tp_size(g) > 1)
        tt_allreduce_to(g, TT_GROUP_TP, part, x, n, MPI_FLOAT, MPI_SUM);
    else if (part != x)
        memcpy(x, part, (size_t)n * sizeof(float));
}

static void sum_over_tp(const tt_grid *g, float *x, int n) { sum_over_tp_to(g, x, x, n); }

float *tp_sum_space(const tt_grid *g, float *own, int n)
{
    return tp_size(g) > 1 ? tt_allreduce_space(g, TT_GROUP_TP, own, n, MPI_FLOAT) : own;
}

void tp_copy_forward(const tt_grid *g, const float *x, int n) { (void)g, (void)x, (void)n; }
void tp_copy_backward(const tt_grid *g, float *dx, int n) { sum_over_tp(g, dx, n); }
void tp_copy_backward_to(const tt_grid *g, float *dx, const float *part, int n)
{
    sum_over_tp_to(g, dx, part, n);
}
void tp_reduce_forward(const tt_grid *g, float *x, int n) { sum_over_tp(g, x, n); }
void tp_reduce_backward(const tt_grid *g, const float *dx, int n) { (void)g, (void)dx, (void)n; }

void tp_gather_forward(const tt_grid *g, float *full, const float *part, int n)
{
    if (tp_size(g) > 1)
        tt_allgather(g, TT_GROUP_TP, part, full, n, MPI_FLOAT);
    else
        memcpy(full, part, (size_t)n * sizeof(float));
}

void tp_gather_backward(const tt_grid *g, float *dpart, const float *dfull, int n)
{
    if (tp_size(g) > 1)
        tt_reduce_scatter(g, TT_GROUP_TP, dfull, dpart, n, MPI_FLOAT);
    else
        memcpy(dpart, dfull, (size_t)n * sizeof(float));
}

void tp_scatter_forward(const tt_grid *g, float *part, const float *full, int n)
{
    const int r = g ? g->tp_rank : 0;
    memcpy(part, full + (size_t)r * n, (size_t)n * sizeof(float));
}

void tp_scatter_backward(const tt_grid *g, float *dfull, const float *dpart, int n)
{
    tp_gather_forward(g, dfull, dpart, n);
}

/* Sequence parallelism: the rows of the split region are rank-major blocks
 * (rank r holds tokens [r*N/tp, (r+1)*N/tp)), the layout gather expects, so
 * its gather is the gather pair and its reduce-scatter the gather's backward. */
void tp_sp_gather_forward(const tt_grid *g, float *full, const float *part, int n)
{
    tp_gather_forward(g, full, part, n);
}

void tp_sp_gather_backward(const tt_grid *g, float *dpart, const float *dfull, int n)
{
    tp_gather_backward(g, dpart, dfull, n);
}

void tp_sp_scatter_forward(const tt_grid *g, float *part, const float *full, int n)
{
    tp_gather_backward(g, part, full, n); /* the same reduce-scatter into this rank's rows */
}

void tp_sp_scatter_backward(const tt_grid *g, float *dfull, const float *dpart, int n)
{
    tp_gather_forward(g, dfull, dpart, n);
}

void tp_sp_param_grads(const tt_grid *g, float *grads, int n)
{
    sum_over_tp(g, grads, n);
}

/* out[n, :] += b: a row-parallel layer's replicated bias, once after the sum. */
TT_SIMD static void bias_forward(float *out, const float *b, int N, int OC)
{
    for (int n = 0; n < N; n++)
        vec_add(out + (size_t)n * OC, b, OC);
}

/* db += column sums of dout: that bias's gradient (rows in order, so each
 * column's sum is formed in one fixed order). */
TT_SIMD static void bias_backward(float *db, const float *dout, int N, int OC)
{
    for (int n = 0; n < N; n++)
        vec_add(db, dout + (size_t)n * OC, OC);
}

void column_linear_forward(const tt_grid *g, float *out, const float *inp, const float *w,
                           const float *b, int N, int C, int OCl)
{
    tp_copy_forward(g, inp, N * C);
    linear_forward(out, inp, w, b, N, C, OCl);
}

void column_linear_backward(const tt_grid *g, float *dinp, float *dw, float *db,
                            const float *dout, const float *inp, const float *w, int N, int C,
                            int OCl)
{
    /* the partial input gradient made where the sum reads it */
    float *part = tp_sum_space(g, dinp, N * C);
    memset(part, 0, (size_t)N * C * sizeof(float));
    linear_backward(part, dw, db, dout, inp, w, N, C, OCl);
    tp_copy_backward_to(g, dinp, part, N * C);
}

void row_linear_forward(const tt_grid *g, float *out, const float *inp, const float *w,
                        const float *b, int N, int Cl, int OC)
{
    /* the partial sum made where the sum reads it */
    float *part = tp_sum_space(g, out, N * OC);
    linear_forward(part, inp, w, NULL, N, Cl, OC);
    sum_over_tp_to(g, out, part, N * OC);
    if (b)
        bias_forward(out, b, N, OC); /* once, after the sum */
}

void row_linear_backward(const tt_grid *g, float *dinp, float *dw, float *db, const float *dout,
                         const float *inp, const float *w, int N, int Cl, int OC)
{
    tp_reduce_backward(g, dout, N * OC);
    if (db)
        bias_backward(db, dout, N, OC);
    linear_backward(dinp, dw, NULL, dout, inp, w, N, Cl, OC);
}

/* x_out = x_in + ((x0 + x1) + b), row by row (x1 NULL: x0 is the sum
 * already; b NULL: no bias): the sum, the bias and the residual add in
 * one pass, each addition in the order of the three passes it replaces,
 * so the same bits. */
typedef struct {
    float *out;         /* N,OC */
    const float *resid; /* N,OC */
    const float *b;     /* OC or NULL */
    int OC;
} residual_fold_ctx;

TT_SIMD static void residual_fold_rows(float *out, const float *r, const float *x0,
                                       const float *x1, const float *b, int N, int OC)
{
    for (int n = 0; n < N; n++) {
        const size_t o = (size_t)n * OC;
        float *y = out + o;
        const float *xr = r + o, *a = x0 + o, *c = x1 ? x1 + o : NULL;
        if (c && b) {
            TT_IVDEP
            for (int j = 0; j < OC; j++)
                y[j] = xr[j] + ((a[j] + c[j]) + b[j]);
        } else if (c) {
            TT_IVDEP
            for (int j = 0; j < OC; j++)
                y[j] = xr[j] + (a[j] + c[j]);
        } else if (b) {
            TT_IVDEP
            for (int j = 0; j < OC; j++)
                y[j] = xr[j] + (a[j] + b[j]);
        } else {
            TT_IVDEP
            for (int j = 0; j < OC; j++)
                y[j] = xr[j] + a[j];
        }
    }
}

static void residual_fold(void *ctx, const float *x0, const float *x1, int count)
{
    const residual_fold_ctx *c = ctx;
    residual_fold_rows(c->out, c->resid, x0, x1, c->b, count / c->OC, c->OC);
}

void row_linear_residual_forward(const tt_grid *g, float *x_out, const float *x_in, float *tmp,
                                 const float *inp, const float *w, const float *b, int N, int Cl,
                                 int OC)
{
    float *part = tp_sum_space(g, tmp, N * OC);
    linear_forward(part, inp, w, NULL, N, Cl, OC);
    residual_fold_ctx c = {x_out, x_in, b, OC};
    if (tp_size(g) > 1)
        tt_allreduce_fold(g, TT_GROUP_TP, part, N * OC, residual_fold, &c);
    else
        residual_fold(&c, part, NULL, N * OC);
    /* the virtual clock's price of the residual add it replaces */
    const tt_kcost k = tt_kcost_residual_fwd((double)N * OC);
    tt_vclock_compute(k.flops, 4.0 * k.floats);
}

void row_linear_sp_forward(const tt_grid *g, float *out, float *partial, const float *inp,
                           const float *w, const float *b, int N, int Cl, int OC)
{
    const int Ns = N / tp_size(g);
    linear_forward(partial, inp, w, NULL, N, Cl, OC);
    tp_sp_scatter_forward(g, out, partial, Ns * OC);
    if (b)
        bias_forward(out, b, Ns, OC); /* once, on this rank's rows after the sum */
}

void row_linear_sp_backward(const tt_grid *g, float *dinp, float *dw, float *db, float *dfull,
                            const float *dout, const float *inp, const float *w, int N, int Cl,
                            int OC)
{
    tp_sp_scatter_backward(g, dfull, dout, N / tp_size(g) * OC);
    /* The bias gradient from every row, as without sequence parallelism:
     * the gathered gradient is already here, so no sum over TP is needed. */
    if (db)
        bias_backward(db, dfull, N, OC);
    linear_backward(dinp, dw, NULL, dfull, inp, w, N, Cl, OC);
}

void column_linear_sp_backward(const tt_grid *g, float *dinp, float *dfull, float *dw, float *db,
                               const float *dout, const float *inp, const float *w, int N, int C,
                               int OCl)
{
    memset(dfull, 0, (size_t)N * C * sizeof(float));
    linear_backward(dfull, dw, db, dout, inp, w, N, C, OCl);
    tp_sp_gather_backward(g, dinp, dfull, N / tp_size(g) * C);
}

void vocab_embedding_sp_forward(const tt_grid *g, float *out, float *partial, const int *idx,
                                const float *w, int N, int C, int v0, int Vl)
{
    embedding_forward(partial, idx, w, N, C, v0, Vl);
    tp_sp_scatter_forward(g, out, partial, N / tp_size(g) * C);
}

void vocab_embedding_forward(const tt_grid *g, float *out, const int *idx, const float *w, int N,
                             int C, int v0, int Vl)
{
    embedding_forward(out, idx, w, N, C, v0, Vl);
    tp_reduce_forward(g, out, N * C); /* rows outside the slice are zero here */
}

/* Real (non-padding) columns of this slice. */
static int real_cols(int Vl, int v0, int V)
{
    if (tt_fault_active(TT_FAULT_NO_VOCAB_MASK)) /* a planted fault (--inject-bug) */
        return Vl;
    int r = V - v0;
    return r < 0 ? 0 : (r < Vl ? r : Vl);
}

void vocab_crossentropy_forward(const tt_grid *g, float *losses, float *probs,
                                const float *logits, const int *targets, int N, int Vl, int v0,
                                int V)
{
    const int Vr = real_cols(Vl, v0, V);
    float *mx = tt_malloc((size_t)3 * N * sizeof(float));
    float *se = mx + N, *tl = mx + 2 * N;
    crossentropy_slice_max(mx, tl, logits, targets, N, Vl, Vr, v0);
    if (tp_size(g) > 1) {
        tt_allreduce(g, TT_GROUP_TP, mx, N, MPI_FLOAT, MPI_MAX);
        tt_allreduce(g, TT_GROUP_TP, tl, N, MPI_FLOAT, MPI_SUM);
    }
    crossentropy_slice_exp(probs, se, logits, mx, N, Vl, Vr);
    if (tp_size(g) > 1)
        tt_allreduce(g, TT_GROUP_TP, se, N, MPI_FLOAT, MPI_SUM);
    crossentropy_slice_finish(losses, probs, se, mx, tl, N, Vl, Vr);
    free(mx);
}

void vocab_crossentropy_backward(float *dlogits, const float *probs, const int *targets,
                                 float dloss, int N, int Vl, int v0, int V)
{
    crossentropy_slice_backward(dlogits, probs, targets, dloss, N, Vl, real_cols(Vl, v0, V), v0);
}

/* ---- the traffic all of the above implies (doc/communication.md) -------- */

void tp_expected_traffic(tt_comm_stats *add, long long tokens_per_step, long long C,
                         long long local_blocks, int first_stage, int last_stage, int mlp_gather,
                         int recompute_full, long long micro_batches, long steps)
{
    const long long n = tokens_per_step, L = local_blocks, M = micro_batches;
    /* Per micro-batch: each block all-reduces its row-parallel outputs (proj,
     * fc2) forward and its column-parallel input gradients (q/k/v, fc1)
     * backward: 4 x tokens x C floats. The vocabulary-parallel embedding sums
     * its rows forward (tokens x C); lm_head's copy sums the gradient of its
     * input backward (tokens x C); the parallel cross-entropy all-reduces the
     * max, the target logit and the sum of exponentials (3 x tokens). Summed
     * over the micro-batches, the tokens are those of the whole step. */
    long long calls = 4 * L, floats = 4 * L * n * C;
    if (recompute_full) /* the forward's two all-reduces, once more in the backward */
        calls += 2 * L, floats += 2 * L * n * C;
    const long long gathers = recompute_full ? 2 : 1;
    if (first_stage)
        calls += 1, floats += n * C;
    if (last_stage)
        calls += 1 + 3, floats += n * C + 3 * n;
    add->c[TT_GROUP_TP][TT_OP_ALLREDUCE].calls += steps * M * calls;
    add->c[TT_GROUP_TP][TT_OP_ALLREDUCE].bytes += steps * 4 * floats;
    if (mlp_gather) {
        /* fc1's output gathered forward (tokens x 4C floats out) and its
         * gradient reduce-scattered backward (tokens x 4C floats in). */
        add->c[TT_GROUP_TP][TT_OP_ALLGATHER].calls += steps * M * L * gathers;
        add->c[TT_GROUP_TP][TT_OP_ALLGATHER].bytes += steps * 4 * L * n * 4 * C * gathers;
        add->c[TT_GROUP_TP][TT_OP_REDUCE_SCATTER].calls += steps * M * L;
        add->c[TT_GROUP_TP][TT_OP_REDUCE_SCATTER].bytes += steps * 4 * L * n * 4 * C;
    }
}

void tp_sp_expected_traffic(tt_comm_stats *add, long long tokens_per_step, long long C,
                            long long local_blocks, int first_stage, int last_stage,
                            int recompute_full, long long micro_batches, long steps)
{
    const long long n = tokens_per_step, L = local_blocks, M = micro_batches;
    /* Per micro-batch and block (model/block_sp.c, tt_block_forward_sp and
     * tt_block_backward_sp), every buffer the full tokens x C floats:
     * forward, ln1 and ln2 gathered in front of q/k/v and fc1, proj's and
     * fc2's sums reduce-scattered; backward, the gradients of proj's and
     * fc2's outputs gathered, fc1's and q/k/v's input gradients
     * reduce-scattered, and ln2 and ln1 gathered again (the gathered inputs
     * are not kept: Korthikanti et al.'s memory, at the price of these two
     * all-gathers). The four LayerNorm tensors' gradients (4C floats) are
     * all-reduced once per micro-batch. Full recomputation runs the forward's
     * two gathers and two reduce-scatters again. */
    long long ag = 6 * L, rs = 4 * L, ar = L, ar_floats = 4 * C * L * M;
    if (recompute_full)
        ag += 2 * L, rs += 2 * L;
    /* The embedding's sum is a reduce-scatter, its backward an all-gather. */
    if (first_stage)
        ag += 1, rs += 1;
    /* ln_f's output gathered for lm_head (and again in the backward),
     * lm_head's input gradient reduce-scattered, the cross-entropy's three
     * all-reduces of tokens floats, ln_f's 2C gradients all-reduced. */
    long long ar_tok = 0;
    if (last_stage)
        ag += 2, rs += 1, ar += 3 + 1, ar_tok = 3 * n, ar_floats += 2 * C * M;
    add->c[TT_GROUP_TP][TT_OP_ALLGATHER].calls += steps * M * ag;
    add->c[TT_GROUP_TP][TT_OP_ALLGATHER].bytes += steps * 4 * ag * n * C;
    add->c[TT_GROUP_TP][TT_OP_REDUCE_SCATTER].calls += steps * M * rs;
    add->c[TT_GROUP_TP][TT_OP_REDUCE_SCATTER].bytes += steps * 4 * rs * n * C;
    add->c[TT_GROUP_TP][TT_OP_ALLREDUCE].calls += steps * M * ar;
    add->c[TT_GROUP_TP][TT_OP_ALLREDUCE].bytes += steps * 4 * (ar_tok + ar_floats);
}
