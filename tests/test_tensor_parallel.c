/* test_tensor_parallel.c - the tensor-parallel operators on 2 or 4 ranks
 * (built twice, as test_tensor_parallel_np2 and _np4), each against the
 * unsharded computation that every rank also does on the whole tensors:
 * column- and row-parallel linear layers forward and backward, the
 * vocabulary-parallel embedding and cross-entropy (with a vocabulary the TP
 * size does not divide), and the gather / reduce-scatter pair. The
 * row-parallel layer with its residual add folded into the sum
 * (row_linear_residual_forward) gives the bits of the layer and the add
 * apart: through the pair's shared slots on 2 ranks (the doorbells are on),
 * through MPI on 4, and without TP. */
#include <check.h>
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "tt/comm/doorbell.h"
#include "tt/comm/grid.h"
#include "tt/comm/pair_reduce.h"
#include "tt/core/kernels.h"
#include "tt/core/params.h"
#include "tt/comm/tensor_parallel.h"

#define TT_CHECK_MPI
#include "check_run.h"

static tt_grid g;
enum { N = 6, C = 8, OC = 12 };

/* The same pseudo-random values on every rank. */
static void fill(float *x, size_t n, uint64_t stream)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(tt_hash_uniform(11, stream, i) - 0.5);
}

static float *fbuf(size_t n) { return calloc(n, sizeof(float)); }

/* max |a - b| / (max |b| + 1e-30) */
static double rel_err(const float *a, const float *b, size_t n)
{
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return d / (m + 1e-30);
}

START_TEST(column_parallel)
{
    const int tp = g.tp, r = g.tp_rank, OCl = OC / tp;
    float *x = fbuf(N * C), *w = fbuf(OC * C), *b = fbuf(OC), *dy = fbuf(N * OC);
    fill(x, N * C, 1), fill(w, OC * C, 2), fill(b, OC, 3), fill(dy, N * OC, 4);
    /* unsharded */
    float *y = fbuf(N * OC), *dx = fbuf(N * C), *dw = fbuf(OC * C), *db = fbuf(OC);
    linear_forward(y, x, w, b, N, C, OC);
    linear_backward(dx, dw, db, dy, x, w, N, C, OC);
    /* sharded: rows [r*OCl, (r+1)*OCl) of W and b; this rank's columns of y */
    float *yl = fbuf(N * OCl), *dyl = fbuf(N * OCl), *dxl = fbuf(N * C);
    float *dwl = fbuf(OCl * C), *dbl = fbuf(OCl), *ys = fbuf(N * OCl);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OCl; o++) {
            dyl[n * OCl + o] = dy[n * OC + r * OCl + o];
            ys[n * OCl + o] = y[n * OC + r * OCl + o];
        }
    column_linear_forward(&g, yl, x, w + r * OCl * C, b + r * OCl, N, C, OCl);
    ck_assert_msg(rel_err(yl, ys, N * OCl) < 1e-6, "forward %g", rel_err(yl, ys, N * OCl));
    column_linear_backward(&g, dxl, dwl, dbl, dyl, x, w + r * OCl * C, N, C, OCl);
    /* the copy's backward all-reduce makes dx whole on every rank */
    ck_assert_msg(rel_err(dxl, dx, N * C) < 1e-5, "dx %g", rel_err(dxl, dx, N * C));
    ck_assert(rel_err(dwl, dw + r * OCl * C, OCl * C) < 1e-6);
    ck_assert(rel_err(dbl, db + r * OCl, OCl) < 1e-6);
    free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
    free(yl), free(dyl), free(dxl), free(dwl), free(dbl), free(ys);
}
END_TEST

START_TEST(row_parallel)
{
    const int tp = g.tp, r = g.tp_rank, Cl = C / tp;
    float *x = fbuf(N * C), *w = fbuf(OC * C), *b = fbuf(OC), *dy = fbuf(N * OC);
    fill(x, N * C, 5), fill(w, OC * C, 6), fill(b, OC, 7), fill(dy, N * OC, 8);
    float *y = fbuf(N * OC), *dx = fbuf(N * C), *dw = fbuf(OC * C), *db = fbuf(OC);
    linear_forward(y, x, w, b, N, C, OC);
    linear_backward(dx, dw, db, dy, x, w, N, C, OC);
    /* sharded: columns [r*Cl, (r+1)*Cl) of W and of x */
    float *xl = fbuf(N * Cl), *wl = fbuf(OC * Cl), *yl = fbuf(N * OC);
    float *dxl = fbuf(N * Cl), *dwl = fbuf(OC * Cl), *dbl = fbuf(OC);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < Cl; c++)
            xl[n * Cl + c] = x[n * C + r * Cl + c];
    for (int o = 0; o < OC; o++)
        for (int c = 0; c < Cl; c++)
            wl[o * Cl + c] = w[o * C + r * Cl + c];
    row_linear_forward(&g, yl, xl, wl, b, N, Cl, OC);
    ck_assert_msg(rel_err(yl, y, N * OC) < 1e-5, "forward %g", rel_err(yl, y, N * OC));
    row_linear_backward(&g, dxl, dwl, dbl, dy, xl, wl, N, Cl, OC);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < Cl; c++)
            ck_assert(fabs(dxl[n * Cl + c] - dx[n * C + r * Cl + c]) < 1e-6);
    for (int o = 0; o < OC; o++)
        for (int c = 0; c < Cl; c++)
            ck_assert(fabs(dwl[o * Cl + c] - dw[o * C + r * Cl + c]) < 1e-6);
    ck_assert(rel_err(dbl, db, OC) < 1e-6); /* replicated: the full bias gradient */
    free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
    free(xl), free(wl), free(yl), free(dxl), free(dwl), free(dbl);
}
END_TEST

START_TEST(row_parallel_residual)
{
    const int r = g.tp_rank, Cl = C / g.tp;
    float *xl = fbuf(N * Cl), *wl = fbuf(OC * Cl), *b = fbuf(OC), *res = fbuf(N * OC);
    float *want = fbuf(N * OC), *got = fbuf(N * OC), *tmp = fbuf(N * OC);
    fill(xl, N * Cl, 20 + r), fill(wl, OC * Cl, 30 + r), fill(b, OC, 9), fill(res, N * OC, 10);
    for (int with_bias = 0; with_bias < 2; with_bias++)
        for (int grid = 0; grid < 2; grid++) { /* the TP group; then no TP (g NULL) */
            const tt_grid *gg = grid ? NULL : &g;
            const float *bb = with_bias ? b : NULL;
            row_linear_forward(gg, tmp, xl, wl, bb, N, Cl, OC);
            residual_forward(want, res, tmp, N * OC);
            /* the scratch poisoned: the folded call must make its product */
            for (int i = 0; i < N * OC; i++)
                tmp[i] = NAN;
            row_linear_residual_forward(gg, got, res, tmp, xl, wl, bb, N, Cl, OC);
            ck_assert_msg(memcmp(got, want, sizeof(float) * N * OC) == 0,
                          "bias %d, grid %d: the folded sum differs from the layer and the add",
                          with_bias, !grid);
            /* in place: the residual stream itself */
            memcpy(got, res, sizeof(float) * N * OC);
            for (int i = 0; i < N * OC; i++)
                tmp[i] = NAN;
            row_linear_residual_forward(gg, got, got, tmp, xl, wl, bb, N, Cl, OC);
            ck_assert(memcmp(got, want, sizeof(float) * N * OC) == 0);
        }
    free(xl), free(wl), free(b), free(res), free(want), free(got), free(tmp);
}
END_TEST

/* V = 7 real entries: tp 2 and tp 4 both pad it to Vp = 8. */
enum { V = 7, VP = 8 };

START_TEST(vocab_embedding)
{
    const int Vl = VP / g.tp, v0 = g.tp_rank * Vl;
    float *w = fbuf(VP * C), *out = fbuf(N * C), *ref = fbuf(N * C);
    fill(w, V * C, 9); /* the padding row stays zero */
    int idx[N] = {0, 6, 3, 3, 5, 1};
    embedding_forward(ref, idx, w, N, C, 0, V);
    vocab_embedding_forward(&g, out, idx, w + v0 * C, N, C, v0, Vl);
    ck_assert(rel_err(out, ref, N * C) == 0.0); /* one non-zero term per element */
    free(w), free(out), free(ref);
}
END_TEST

START_TEST(vocab_crossentropy)
{
    const int Vl = VP / g.tp, v0 = g.tp_rank * Vl;
    float *logits = fbuf(N * VP), *probs = fbuf(N * VP), *losses = fbuf(N), *dl = fbuf(N * VP);
    fill(logits, N * VP, 10);
    for (int n = 0; n < N; n++)
        logits[n * VP + V] = 50.0f; /* garbage in the padding column must not count */
    int tg[N] = {0, 6, 3, 2, 5, 4};
    const float dloss = 0.25f;
    crossentropy_forward(losses, probs, logits, tg, N, VP, V);
    crossentropy_backward(dl, probs, tg, dloss, N, VP, V);
    float *ll = fbuf(N * Vl), *pl = fbuf(N * Vl), *lossl = fbuf(N), *dll = fbuf(N * Vl);
    for (int n = 0; n < N; n++)
        memcpy(ll + n * Vl, logits + n * VP + v0, Vl * sizeof(float));
    vocab_crossentropy_forward(&g, lossl, pl, ll, tg, N, Vl, v0, V);
    ck_assert_msg(rel_err(lossl, losses, N) < 1e-6, "loss %g", rel_err(lossl, losses, N));
    vocab_crossentropy_backward(dll, pl, tg, dloss, N, Vl, v0, V);
    for (int n = 0; n < N; n++)
        for (int v = 0; v < Vl; v++) {
            ck_assert(fabs(pl[n * Vl + v] - probs[n * VP + v0 + v]) < 1e-6);
            ck_assert(fabs(dll[n * Vl + v] - dl[n * VP + v0 + v]) < 1e-6);
            if (v0 + v >= V)
                ck_assert(dll[n * Vl + v] == 0.0f && pl[n * Vl + v] == 0.0f);
        }
    free(logits), free(probs), free(losses), free(dl), free(ll), free(pl), free(lossl), free(dll);
}
END_TEST

START_TEST(gather_pair)
{
    const int tp = g.tp, r = g.tp_rank, n = 3;
    float part[3], full[12], dfull[12], dpart[3];
    for (int i = 0; i < n; i++)
        part[i] = (float)(10 * r + i);
    tp_gather_forward(&g, full, part, n);
    for (int s = 0; s < tp; s++)
        for (int i = 0; i < n; i++)
            ck_assert(full[s * n + i] == (float)(10 * s + i));
    /* rank s holds dfull = (s+1) * (index+1): block r of the sum over ranks
     * is (1+2+..+tp) * (r*n + i + 1). */
    for (int i = 0; i < tp * n; i++)
        dfull[i] = (float)((r + 1) * (i + 1));
    tp_gather_backward(&g, dpart, dfull, n);
    for (int i = 0; i < n; i++)
        ck_assert(dpart[i] == (float)(tp * (tp + 1) / 2 * (r * n + i + 1)));
}
END_TEST

/* scatter is gather's dual: forward keeps this rank's block, backward
 * all-gathers every rank's gradient block. */
START_TEST(scatter_pair)
{
    const int tp = g.tp, r = g.tp_rank, n = 3;
    float full[12], part[3], dpart[3], dfull[12];
    for (int i = 0; i < tp * n; i++)
        full[i] = (float)(100 + i);
    tp_scatter_forward(&g, part, full, n);
    for (int i = 0; i < n; i++)
        ck_assert(part[i] == (float)(100 + r * n + i));
    for (int i = 0; i < n; i++)
        dpart[i] = (float)(10 * r + i);
    tp_scatter_backward(&g, dfull, dpart, n);
    for (int s = 0; s < tp; s++)
        for (int i = 0; i < n; i++)
            ck_assert(dfull[s * n + i] == (float)(10 * s + i));
}
END_TEST

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int world;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    tt_bell_init();
    tt_grid_init(&g, world, 1, 1, MPI_COMM_WORLD); /* every rank in one TP group */
    Suite *s = suite_create("tensor_parallel");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, column_parallel);
    tcase_add_test(tc, row_parallel);
    tcase_add_test(tc, row_parallel_residual);
    tcase_add_test(tc, vocab_embedding);
    tcase_add_test(tc, vocab_crossentropy);
    tcase_add_test(tc, gather_pair);
    tcase_add_test(tc, scatter_pair);
    suite_add_tcase(s, tc);
    int status = tt_check_run_mpi(s);
    tt_pair_flush();
    tt_pair_host_free();
    tt_grid_free(&g);
    tt_bell_finalize();
    MPI_Finalize();
    return status;
}
