/* bench_train.c - `make bench`: the speed of one virtual GPU.
 *
 * Trains the benchmark config (C=192, L=12, NH=12, T=64, B=8) on one rank and
 * one BLAS thread, and in the same run times cblas_sgemm alone on the model's
 * own linear-layer shapes (forward, input-gradient and weight-gradient forms,
 * in the proportions one step uses them). The ratio of the model's achieved
 * GFLOP/s to that sgemm GFLOP/s is our MFU: how much of the attainable matrix
 * speed survives the rest of the step (attention, LayerNorm, GELU, softmax,
 * AdamW). Rounds alternate sgemm and training so both see the same machine
 * load; medians are reported. Step times are wall clock (the virtual GPU
 * clocks model the classroom cluster, not this CPU).
 *
 * Each round also times the attention's per-head products (one step's
 * worth, forward and backward, on the model's shapes) both ways, through
 * core/small_gemm (what attention.c uses) and through cblas_sgemm with the
 * same operands, alternated, so the kernel's gain is measured side by side. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/small_gemm.h"
#include "tt/core/common.h"
#include "tt/core/data.h"
#include "tt/model/model.h"
#include "tt/train/train.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct { int M, N, K, transA, transB, count; } gemm_shape;

/* Seconds for one pass over the shapes (each run `count` times). */
static double time_gemms(const gemm_shape *s, int ns, float *A, float *Bm, float *Cm,
                         double *flops)
{
    double t0 = tt_now();
    *flops = 0;
    for (int i = 0; i < ns; i++)
        for (int r = 0; r < s[i].count; r++) {
            int lda = s[i].transA ? s[i].M : s[i].K, ldb = s[i].transB ? s[i].K : s[i].N;
            cblas_sgemm(CblasRowMajor, s[i].transA ? CblasTrans : CblasNoTrans,
                        s[i].transB ? CblasTrans : CblasNoTrans, s[i].M, s[i].N, s[i].K, 1.0f,
                        A, lda, Bm, ldb, 1.0f, Cm, s[i].N);
            *flops += 2.0 * s[i].M * s[i].N * s[i].K;
        }
    return tt_now() - t0;
}

/* One step's attention products, as attention.c makes them: per batch row
 * and head, query blocks of 32 rows, S = Q K^T, O = P V, then dP = dO V^T,
 * dQ += dS K, dK += dS^T Q, dV += P^T dO. With blas, the same products
 * through cblas_sgemm (the transposed operands read in place), as before
 * small_gemm. Returns seconds; *flops gets the FLOPs done. */
static double time_attention(int blas, int B, int T, int NH, int hs, int L, const float *X,
                             float *P, float *Y, double *flops)
{
    const int ld = NH * hs;
    const CBLAS_TRANSPOSE N_ = CblasNoTrans, T_ = CblasTrans;
    double t0 = tt_now();
    *flops = 0;
    for (int l = 0; l < L; l++)
        for (int bh = 0; bh < B * NH; bh++) {
            const float *q = X + (size_t)(bh / NH) * T * ld + (size_t)(bh % NH) * hs;
            const float *Kt = blas ? NULL : tt_small_gemm_pack(q, 1, ld, hs, T);
            for (int i0 = 0; i0 < T; i0 += 32) {
                const int i1 = i0 + 32 < T ? i0 + 32 : T, m = i1 - i0;
                const float *qb = q + (size_t)i0 * ld;
                float *pb = P + (size_t)i0 * T, *yb = Y + (size_t)i0 * ld;
                if (blas) {
                    cblas_sgemm(CblasRowMajor, N_, T_, m, i1, hs, 0.25f, qb, ld, q, ld, 0.0f, pb, T);
                    cblas_sgemm(CblasRowMajor, N_, N_, m, hs, i1, 1.0f, pb, T, q, ld, 0.0f, yb, ld);
                    cblas_sgemm(CblasRowMajor, N_, T_, m, i1, hs, 1.0f, qb, ld, q, ld, 0.0f, pb, T);
                    cblas_sgemm(CblasRowMajor, N_, N_, m, hs, i1, 1.0f, pb, T, q, ld, 1.0f, yb, ld);
                    cblas_sgemm(CblasRowMajor, T_, N_, i1, hs, m, 1.0f, pb, T, qb, ld, 1.0f, Y, ld);
                    cblas_sgemm(CblasRowMajor, T_, N_, i1, hs, m, 1.0f, pb, T, qb, ld, 1.0f, Y, ld);
                } else {
                    tt_small_gemm(pb, T, qb, ld, 1, Kt, T, 1, m, i1, hs, 0.25f, 0);
                    tt_small_gemm(yb, ld, pb, T, 1, q, ld, 1, m, hs, i1, 1.0f, 0);
                    tt_small_gemm(pb, T, qb, ld, 1, Kt, T, 1, m, i1, hs, 1.0f, 0);
                    tt_small_gemm(yb, ld, pb, T, 1, q, ld, 1, m, hs, i1, 1.0f, 1);
                    tt_small_gemm(Y, ld, pb, 1, T, qb, ld, 1, i1, hs, m, 1.0f, 1);
                    tt_small_gemm(Y, ld, pb, 1, T, qb, ld, 1, i1, hs, m, 1.0f, 1);
                }
                *flops += 2.0 * m * i1 * hs * 6;
            }
        }
    return tt_now() - t0;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 7, steps_per_round = 3;
    if (rounds < 0) /* 0: print the config and the FLOPs per step only */
        rounds = 1;
    openblas_set_num_threads(1);
    tt_run_config rc;
    memset(&rc, 0, sizeof rc);
    rc.model = (tt_config){.V = 256, .C = 192, .L = 12, .NH = 12, .T = 64};
    rc.batch = 8;
    rc.micro_batches = 1;
    rc.steps = 1000;
    rc.optim = (tt_optim_config){.lr = 1e-3, .lr_min = 1e-4, .warmup = 10, .weight_decay = 0.1,
                                 .clip = 1.0, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
    const int C = rc.model.C, L = rc.model.L, N = rc.batch * rc.model.T, V = rc.model.V;

    /* The linear layers of one step: per block q, k, v, proj (C->C), fc1
     * (C->4C), fc2 (4C->C), and lm_head (C->V); each appears as a forward
     * (N x OC x IC), an input gradient (N x IC x OC) and a weight gradient
     * (OC x IC x N). */
    struct { int in, out, count; } lin[] = {{C, C, 4 * L}, {C, 4 * C, L}, {4 * C, C, L}, {C, V, 1}};
    gemm_shape shapes[12];
    int ns = 0;
    for (int i = 0; i < 4; i++) {
        shapes[ns++] = (gemm_shape){N, lin[i].out, lin[i].in, 0, 1, lin[i].count};
        shapes[ns++] = (gemm_shape){N, lin[i].in, lin[i].out, 0, 0, lin[i].count};
        shapes[ns++] = (gemm_shape){lin[i].out, lin[i].in, N, 1, 0, lin[i].count};
    }
    size_t big = (size_t)4 * C * (N > 4 * C ? N : 4 * C);
    float *A = tt_calloc(big, sizeof(float)), *Bm = tt_calloc(big, sizeof(float)),
          *Cm = tt_calloc(big, sizeof(float));
    for (size_t i = 0; i < big; i++) {
        A[i] = (float)((i * 7 % 13) - 6) * 0.01f;
        Bm[i] = (float)((i * 5 % 11) - 5) * 0.01f;
    }

    tt_corpus corpus;
    tt_corpus_generate(&corpus, 1 << 20, 1);
    tt_model m;
    tt_shard_spec whole = tt_shard_whole(&rc.model);
    tt_model_init(&m, &rc.model, &whole, rc.batch, 1);
    rc.virtual_stages = 1;
    tt_pipe pipe; /* one stage */
    tt_err err;
    if (tt_pipe_init(&pipe, &m, &rc, NULL, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const double model_flops = tt_model_flops(&rc.model, rc.batch);

    printf("benchmark: C=%d L=%d NH=%d T=%d B=%d, one rank, one BLAS thread, %d rounds, "
           "OpenBLAS kernel %s\n", C, L, rc.model.NH, rc.model.T, rc.batch, rounds,
           openblas_get_corename());
    printf("model FLOPs per step: %.3f GFLOP (matrix products + attention, backward = 2x forward)\n",
           model_flops * 1e-9);
    fflush(stdout);
    if (rounds == 0)
        return 0;
    double gemm_flops;
    time_gemms(shapes, ns, A, Bm, Cm, &gemm_flops); /* warm-up */
    tt_train_step(&pipe, &corpus, 0, NULL);
    const int NH = rc.model.NH, hs = C / NH, T = rc.model.T;
    float *attX = tt_calloc((size_t)N * C, sizeof(float)), *attP = tt_calloc((size_t)T * T, sizeof(float)),
          *attY = tt_calloc((size_t)T * C, sizeof(float));
    for (size_t i = 0; i < (size_t)N * C; i++)
        attX[i] = (float)((i * 3 % 17) - 8) * 0.01f;
    double *gemm_rate = tt_calloc((size_t)rounds, sizeof(double));
    double *step_time = tt_calloc((size_t)rounds * steps_per_round, sizeof(double));
    long step = 1;
    for (int r = 0; r < rounds; r++) {
        double t = time_gemms(shapes, ns, A, Bm, Cm, &gemm_flops);
        gemm_rate[r] = gemm_flops / t * 1e-9;
        for (int k = 0; k < steps_per_round; k++)
            step_time[r * steps_per_round + k] = tt_train_step(&pipe, &corpus, step++, NULL).wall_seconds;
        printf("round %d: sgemm %.1f GFLOP/s, steps %.1f %.1f %.1f ms\n", r + 1, gemm_rate[r],
               step_time[r * steps_per_round] * 1e3, step_time[r * steps_per_round + 1] * 1e3,
               step_time[r * steps_per_round + 2] * 1e3);
        /* the attention's products both ways, alternated, fastest of three each */
        double best[2] = {1e30, 1e30}, aflops = 0;
        for (int k = 0; k < 6; k++) {
            const double ta = time_attention(k % 2, rc.batch, T, NH, hs, L, attX, attP, attY, &aflops);
            best[k % 2] = ta < best[k % 2] ? ta : best[k % 2];
        }
        printf("attention %d: small_gemm %.2f ms, cblas_sgemm %.2f ms a step (%.1f, %.1f GFLOP/s)\n",
               r + 1, best[0] * 1e3, best[1] * 1e3, aflops / best[0] * 1e-9, aflops / best[1] * 1e-9);
        fflush(stdout);
    }
    double g = median(gemm_rate, rounds);
    double s = median(step_time, rounds * steps_per_round);
    double achieved = model_flops / s * 1e-9;
    printf("sgemm on the model's shapes: %.1f GFLOP/s (median)\n", g);
    printf("training step: %.1f ms (median), %.0f tokens/s, %.1f GFLOP/s\n", s * 1e3,
           rc.batch * rc.model.T / s, achieved);
    printf("MFU (model GFLOP/s / sgemm GFLOP/s): %.1f%%\n", 100.0 * achieved / g);
    tt_pipe_free(&pipe);
    tt_model_free(&m);
    tt_corpus_free(&corpus);
    free(A);
    free(Bm);
    free(Cm);
    free(gemm_rate);
    free(attX);
    free(attP);
    free(attY);
    free(step_time);
    return 0;
}
