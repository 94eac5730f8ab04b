/* report.c - per-GPU communication: measured next to expected. */
#include "tt/show/report.h"
#include "tt/comm/tensor_parallel.h"
#include "tt/parallel/data_parallel.h"
#include "tt/core/memory.h"
#include "tt/parallel/pipeline.h"

#include <stdlib.h>
#include <string.h>

void tt_comm_accumulate(tt_comm_stats *acc, const tt_comm_stats *a, const tt_comm_stats *b)
{
    for (int gr = 0; gr < TT_NGROUPS; gr++)
        for (int op = 0; op < TT_NOPS; op++) {
            acc->c[gr][op].calls += b->c[gr][op].calls - a->c[gr][op].calls;
            acc->c[gr][op].bytes += b->c[gr][op].bytes - a->c[gr][op].bytes;
            acc->c[gr][op].seconds += b->c[gr][op].seconds - a->c[gr][op].seconds;
        }
}

void tt_comm_expected(tt_comm_stats *exp, const tt_run_config *rc, const tt_grid *g,
                      const tt_model *m, long steps)
{
    memset(exp, 0, sizeof *exp);
    /* A group of one GPU communicates nothing, so only the parallelisms
     * actually in use are asked. */
    if (g->tp > 1) {
        const long long tokens = (long long)(rc->batch / g->dp) * rc->model.T;
        tp_expected_traffic(exp, tokens, rc->model.C, m->nl, m->sh.first_stage,
                            m->sh.last_stage, rc->tp_mlp_gather, rc->micro_batches, steps);
    }
    if (g->pp > 1)
        tt_pipe_expected_traffic(exp, rc, g, steps);
    if (g->dp > 1)
        tt_dp_expected_traffic(exp, &m->P, rc->dp_bucket, steps);
}

static int matches(const tt_comm_stats *a, const tt_comm_stats *b)
{
    for (int gr = 0; gr < TT_GROUP_OTHER; gr++)
        for (int op = 0; op < TT_NOPS; op++)
            if (a->c[gr][op].calls != b->c[gr][op].calls ||
                a->c[gr][op].bytes != b->c[gr][op].bytes)
                return 0;
    return 1;
}

static void print_one(FILE *out, const tt_grid *g, int rank, const tt_comm_stats *ms,
                      const tt_comm_stats *ex)
{
    char name[48];
    fprintf(out, "  %s\n", tt_gpu_name(g, rank, name, sizeof name));
    fprintf(out, "    %-5s %-15s %9s %9s %14s %14s %9s\n", "group", "operation", "calls",
            "expected", "bytes", "expected", "seconds");
    for (int gr = 0; gr < TT_GROUP_OTHER; gr++)
        for (int op = 0; op < TT_NOPS; op++) {
            const tt_comm_count *c = &ms->c[gr][op], *e = &ex->c[gr][op];
            if (!c->calls && !e->calls)
                continue;
            fprintf(out, "    %-5s %-15s %9ld %9ld %14lld %14lld %9.3f%s\n", tt_group_names[gr],
                    tt_op_names[op], c->calls, e->calls, c->bytes, e->bytes, c->seconds,
                    c->calls == e->calls && c->bytes == e->bytes ? "" : "  <- differs");
        }
    long calls = 0;
    long long bytes = 0;
    for (int op = 0; op < TT_NOPS; op++) {
        calls += ms->c[TT_GROUP_OTHER][op].calls;
        bytes += ms->c[TT_GROUP_OTHER][op].bytes;
    }
    fprintf(out, "    other (loss, clipping norm, oracle): %ld calls, %lld bytes\n", calls, bytes);
}

int tt_report_comm(FILE *out, const tt_run_config *rc, const tt_grid *g, const tt_model *m,
                   const tt_comm_stats *measured, long steps, int all_gpus)
{
    tt_comm_stats exp;
    tt_comm_expected(&exp, rc, g, m, steps);
    int ok = matches(measured, &exp);
    /* Rank 0 prints every GPU's table: gather them (booked as other). */
    const int W = g->world_size, sz = (int)sizeof(tt_comm_stats);
    tt_comm_stats *all = NULL, *alle = NULL;
    int *cnt = NULL, *disp = NULL;
    if (g->world_rank == 0) {
        all = tt_malloc((size_t)W * sizeof *all);
        alle = tt_malloc((size_t)W * sizeof *alle);
        cnt = tt_malloc((size_t)W * sizeof(int));
        disp = tt_malloc((size_t)W * sizeof(int));
        for (int r = 0; r < W; r++)
            cnt[r] = sz, disp[r] = r * sz;
    }
    tt_gatherv(g, TT_GROUP_OTHER, measured, sz, all, cnt, disp, MPI_BYTE, 0);
    tt_gatherv(g, TT_GROUP_OTHER, &exp, sz, alle, cnt, disp, MPI_BYTE, 0);
    tt_allreduce(g, TT_GROUP_OTHER, &ok, 1, MPI_INT, MPI_MIN);
    if (g->world_rank == 0 && out) {
        fprintf(out, "\ncommunication over %ld training step%s, measured and expected "
                     "(doc/communication.md)%s\n", steps, steps == 1 ? "" : "s",
                all_gpus ? "" : "; --report comm shows every GPU");
        for (int r = 0; r < (all_gpus ? W : 1); r++)
            print_one(out, g, r, &all[r], &alle[r]);
        fprintf(out, "every GPU's TP/PP/DP traffic equals its formula: %s\n", ok ? "yes" : "NO");
    }
    free(all);
    free(alle);
    free(cnt);
    free(disp);
    return ok;
}

void tt_report_memory(FILE *out, const tt_grid *g)
{
    enum { F = TT_MEM_NCAT + 2 };
    double mine[F];
    size_t at_peak[TT_MEM_NCAT];
    size_t peak = tt_mem_peak(at_peak);
    for (int c = 0; c < TT_MEM_NCAT; c++)
        mine[c] = (double)at_peak[c];
    mine[TT_MEM_NCAT] = (double)peak;
    mine[TT_MEM_NCAT + 1] = (double)tt_mem_budget();
    const int W = g->world_size;
    double *all = NULL;
    int *cnt = NULL, *disp = NULL;
    if (g->world_rank == 0) {
        all = tt_malloc((size_t)W * F * sizeof(double));
        cnt = tt_malloc((size_t)W * sizeof(int));
        disp = tt_malloc((size_t)W * sizeof(int));
        for (int r = 0; r < W; r++)
            cnt[r] = F, disp[r] = r * F;
    }
    tt_gatherv(g, TT_GROUP_OTHER, mine, F, all, cnt, disp, MPI_DOUBLE, 0);
    if (g->world_rank == 0 && out) {
        fprintf(out, "\nmemory per virtual GPU at its peak, MiB (the categories of the seeds' "
                     "Figure 8-1; everything is allocated before the first step)\n");
        fprintf(out, "  %-20s", "GPU");
        for (int c = 0; c < TT_MEM_NCAT; c++)
            fprintf(out, " %12s", tt_mem_names[c]);
        fprintf(out, " %9s %9s\n", "peak", "budget");
        for (int r = 0; r < W; r++) {
            char name[48];
            const double *v = all + (size_t)r * F;
            fprintf(out, "  %-20s", tt_gpu_name(g, r, name, sizeof name));
            for (int c = 0; c < TT_MEM_NCAT; c++)
                fprintf(out, " %12.3f", v[c] / 1048576.0);
            fprintf(out, " %9.3f", v[TT_MEM_NCAT] / 1048576.0);
            if (v[TT_MEM_NCAT + 1] > 0)
                fprintf(out, " %9.3f\n", v[TT_MEM_NCAT + 1] / 1048576.0);
            else
                fprintf(out, " %9s\n", "-");
        }
        fprintf(out, "  activations: z and y of every block for the micro-batches a GPU holds "
                     "at once; errors: one backward's activation gradients; comm buffers: "
                     "pipeline transfers\n");
    }
    free(all);
    free(cnt);
    free(disp);
}

int tt_check_oom(const tt_grid *g)
{
    char msg[400] = "";
    int mine = tt_mem_oom(msg, sizeof msg) ? g->world_rank : g->world_size;
    int first = mine;
    tt_allreduce(g, TT_GROUP_OTHER, &first, 1, MPI_INT, MPI_MIN);
    if (first == g->world_size)
        return 0;
    tt_bcast(g, TT_GROUP_OTHER, msg, (int)sizeof msg, MPI_CHAR, first);
    if (g->world_rank == 0) {
        char name[48];
        fprintf(stderr, "tiny_transformer: %s is %s\n", tt_gpu_name(g, first, name, sizeof name),
                msg);
    }
    return 1;
}

/* The stage split: which blocks every stage (and chunk) holds. */
void tt_print_pipeline(const tt_run_config *rc, const tt_grid *g, const int *chunk_layers)
{
    const int p = g->pp, v = rc->virtual_stages, K = p * v;
    printf("pipeline: %d stage%s x %d chunk%s, schedule %s, %d micro-batch%s per replica; "
           "blocks %s\n", p, p > 1 ? "s" : "", v, v > 1 ? "s" : "",
           tt_schedule_name(rc->schedule), rc->micro_batches, rc->micro_batches > 1 ? "es" : "",
           rc->stage_layers ? "as --stage-layers says" : "balanced by compute");
    for (int s = 0; s < p; s++) {
        printf("  stage %d:", s);
        for (int j = 0; j < v; j++) {
            int k = j * p + s, first = 0;
            for (int i = 0; i < k; i++)
                first += chunk_layers[i];
            if (chunk_layers[k] == 1)
                printf("%s block %d", j ? "," : "", first);
            else
                printf("%s blocks %d-%d", j ? "," : "", first, first + chunk_layers[k] - 1);
            if (k == 0)
                printf(" + embeddings");
            if (k == K - 1)
                printf(" + ln_f, lm_head, loss");
        }
        printf("\n");
    }
}

void tt_bubble_init(tt_bubble_stats *b, long steps)
{
    memset(b, 0, sizeof *b);
    b->cap = steps > 0 ? (int)steps : 1;
    b->idle = tt_calloc((size_t)b->cap, sizeof(double));
}

void tt_bubble_free(tt_bubble_stats *b) { free(b->idle); }

void tt_bubble_add(tt_bubble_stats *b, const tt_pipe *pp)
{
    if (b->n < b->cap && pp->step_seconds > 0)
        b->idle[b->n++] = 1.0 - pp->busy_seconds / pp->step_seconds;
    if (pp->peak_held > b->peak)
        b->peak = pp->peak_held;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Every GPU's median idle fraction next to the schedule's simulation and the
 * textbook formula, and the most micro-batches it held at once. */
void tt_bubble_report(tt_bubble_stats *b, const tt_pipe *pp, const tt_grid *g)
{
    double mine[2] = {0.0, (double)b->peak};
    if (b->n) {
        qsort(b->idle, (size_t)b->n, sizeof(double), cmp_double);
        mine[0] = b->idle[b->n / 2];
    }
    double *all = g->world_rank == 0 ? tt_malloc((size_t)2 * g->world_size * sizeof(double)) : NULL;
    int *cnt = NULL, *disp = NULL;
    if (all) {
        cnt = tt_malloc((size_t)g->world_size * sizeof(int));
        disp = tt_malloc((size_t)g->world_size * sizeof(int));
        for (int r = 0; r < g->world_size; r++)
            cnt[r] = 2, disp[r] = 2 * r;
    }
    tt_gatherv(g, TT_GROUP_OTHER, mine, 2, all, cnt, disp, MPI_DOUBLE, 0);
    if (all) {
        const tt_sim_result *sim = &pp->sim;
        double theory = tt_bubble_theory(pp->kind, pp->p, pp->M, pp->v);
        printf("\npipeline bubble (%s, p %d, m %d", tt_schedule_name(pp->kind), pp->p, pp->M);
        if (pp->v > 1)
            printf(", v %d", pp->v);
        printf("): idle fraction per GPU, median over %d step%s\n", b->n, b->n == 1 ? "" : "s");
        printf("  %-20s %9s %11s %9s %13s\n", "GPU", "measured", "simulated", "theory",
               "peak held");
        for (int r = 0; r < g->world_size; r++) {
            char name[48];
            int s = tt_grid_pp_of(g, r);
            double simulated = 1.0 - sim->busy[s] / sim->span;
            printf("  %-20s %8.1f%% %10.1f%% %8.1f%% %6d of %d\n", tt_gpu_name(g, r, name, sizeof name),
                   100 * all[2 * r], 100 * simulated, 100 * theory, (int)all[2 * r + 1],
                   pp->M * pp->v);
        }
        printf("  theory: %s; simulated: this schedule with a backward costing two forwards; "
               "measured: wall clock, 1 - compute / step\n",
               tt_schedule_formula(pp->kind));
        free(all);
        free(cnt);
        free(disp);
    }
}

/* --explain: the step narrated from the schedule the executor ran, with
 * unit-time forwards and backwards as the textbook draws them. */
void tt_explain_step(const tt_pipe *pp, const tt_grid *g)
{
    if (g->world_rank != 0)
        return;
    tt_sim_result unit;
    tt_err e;
    if (tt_schedule_check(pp->all, pp->p, pp->M, pp->v, 1.0, 1.0, &unit, &e))
        return;
    char **names = tt_malloc((size_t)pp->p * sizeof(char *));
    for (int s = 0; s < pp->p; s++) {
        names[s] = tt_malloc(48);
        tt_gpu_name(g, tt_grid_rank_of(g, 0, s, 0), names[s], 48);
    }
    printf("\none training step of DP replica 0, narrated (%s, %d stage%s, %d micro-batch%s%s; "
           "TP peers of each GPU do the same)\n", tt_schedule_name(pp->kind), pp->p,
           pp->p > 1 ? "s" : "", pp->M, pp->M > 1 ? "es" : "",
           pp->v > 1 ? ", interleaved chunks" : "");
    tt_schedule_explain(stdout, pp->all, &unit, (const char *const *)names);
    for (int s = 0; s < pp->p; s++)
        free(names[s]);
    free(names);
    tt_sim_result_free(&unit);
}

