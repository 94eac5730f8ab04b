/* pipeline_report.c - the pipeline, told to people: the stage split printed
 * at start-up, the bubble measured per step and reported after training next
 * to the schedule's simulation and the textbook formula, and the narrated
 * step of --explain. */
#include "tt/show/pipeline_report.h"
#include "tt/comm/comm.h"
#include "tt/parallel/pipeline.h"
#include "tt/core/vclock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tt_print_pipeline(const tt_run_config *rc, const tt_grid *g, const int *chunk_layers)
{
    const int p = g->pp, v = rc->virtual_stages, K = p * v;
    if (K == 1) {
        /* One stage has nothing to schedule: a schedule asked for runs as
         * 1F1B, and the combinations refused only for its split backward
         * (--recompute with zb-h1) are allowed; say so rather than keep it
         * quiet. */
        if ((tt_schedule_kind)rc->schedule != tt_pipe_kind(rc, p))
            printf("pipeline: one stage, so --schedule %s runs as %s: each micro-batch's "
                   "forward, then its backward (a schedule orders the work of 2 or more stages)\n",
                   tt_schedule_name(rc->schedule), tt_schedule_name(tt_pipe_kind(rc, p)));
        return;
    }
    printf("pipeline: %d stage%s x %d chunk%s, schedule %s, %d micro-batch%s per replica; "
           "blocks %s\n", p, p > 1 ? "s" : "", v, v > 1 ? "s" : "",
           tt_schedule_name(rc->schedule), rc->micro_batches, rc->micro_batches > 1 ? "es" : "",
           rc->stage_layers ? "as --stage-layers says" : "balanced by compute");
    /* Stage s's j-th chunk is where the schedule's placement puts it. */
    const tt_placement place = tt_schedule_placement(tt_pipe_kind(rc, p));
    for (int s = 0; s < p; s++) {
        printf("  stage %d:", s);
        for (int j = 0; j < v; j++) {
            int k = tt_stage_chunk(place, p, s, j), first = 0;
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

/* ---- the bubble ---------------------------------------------------------- */

void tt_bubble_init(tt_bubble_stats *b, long steps)
{
    memset(b, 0, sizeof *b);
    /* One figure per step, up to 2^20 of them: --steps (or a checkpoint's
     * steps) may be far more than fits in an int, and the statistics of the
     * first million steps describe the schedule as well as all of them. */
    const long most = 1L << 20;
    b->cap = steps > most ? (int)most : steps > 0 ? (int)steps : 1;
    b->idle = tt_calloc((size_t)b->cap, sizeof(double));
    b->busy = tt_calloc((size_t)b->cap, sizeof(double));
}

void tt_bubble_free(tt_bubble_stats *b)
{
    free(b->idle);
    free(b->busy);
}

void tt_bubble_add(tt_bubble_stats *b, const tt_pipe *pipe)
{
    if (b->n < b->cap && pipe->window_seconds > 0) {
        b->busy[b->n] = pipe->busy_seconds;
        b->idle[b->n++] = 1.0 - pipe->busy_seconds / pipe->window_seconds;
    }
    if (pipe->peak_held > b->peak)
        b->peak = pipe->peak_held;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Every GPU's median idle fraction (the median, so one step disturbed by the
 * machine does not move it) next to the schedule's simulation and the
 * textbook formula, and the most micro-batches it held at once. */
void tt_bubble_report(tt_bubble_stats *b, const tt_pipe *pipe, const tt_grid *g)
{
    double mine[3] = {0.0, (double)b->peak, 0.0};
    if (b->n) {
        qsort(b->idle, (size_t)b->n, sizeof(double), cmp_double);
        qsort(b->busy, (size_t)b->n, sizeof(double), cmp_double);
        mine[0] = b->idle[b->n / 2];
        mine[2] = b->busy[b->n / 2];
    }
    double *all = tt_gather_to_root(g, mine, (int)sizeof mine); /* rank 0 only */
    if (all) {
        const tt_sim_result *sim = &pipe->sim;
        double theory = tt_bubble_theory(pipe->kind, pipe->p, pipe->M, pipe->v);
        printf("\npipeline bubble (%s, p %d, m %d", tt_schedule_name(pipe->kind), pipe->p, pipe->M);
        if (pipe->v > 1)
            printf(", v %d", pipe->v);
        printf("): idle fraction per GPU, median over %d step%s\n", b->n, b->n == 1 ? "" : "s");
        const int wall = tt_vclock_mode() == TT_CLOCK_WALL;
        printf("  %-20s %9s %11s %9s %14s\n", "GPU", wall ? "wall" : "virtual", "simulated",
               "theory", "peak held");
        for (int r = 0; r < g->world_size; r++) {
            char name[48];
            int s = tt_grid_pp_of(g, r);
            double simulated = 1.0 - sim->busy[s] / sim->span;
            printf("  %-20s %8.1f%% %10.1f%% %8.1f%% %6d of %d mb\n",
                   tt_gpu_name(g, r, name, sizeof name), 100 * all[3 * r], 100 * simulated,
                   100 * theory, (int)all[3 * r + 1], pipe->M * pipe->v);
        }
        double mean = 0.0, mean_sim = 0.0;
        for (int r = 0; r < g->world_size; r++) {
            mean += all[3 * r] / g->world_size;
            mean_sim += (1.0 - sim->busy[tt_grid_pp_of(g, r)] / sim->span) / g->world_size;
        }
        printf("  %-20s %8.1f%% %10.1f%% %8.1f%%\n", "mean of the GPUs", 100 * mean,
               100 * mean_sim, 100 * theory);
        printf("  theory: %s; simulated: this schedule with a backward costing two forwards%s;\n"
               "  %s: 1 - compute / %s (%s)\n",
               tt_schedule_formula(pipe->kind), pipe->split_w ? " (B one, W one)" : "",
               wall ? "wall" : "virtual",
               wall ? "step"
               : pipe->split_w
                   ? "window from the pipeline's first forward to its last backward or W"
                   : "window from the pipeline's first forward to its last backward",
               tt_clock_label());
        if (pipe->v > 1)
            printf("  peak held: the most micro-batches (mb) whose activations a GPU kept at once,\n"
                   "  each chunk's counted, of m x v = %d\n", pipe->M * pipe->v);
        else
            printf("  peak held: the most micro-batches (mb) whose activations a GPU kept at once,"
                   " of m = %d\n", pipe->M);
        /* Why unequal stages idle unequally: the theory assumes equal ones. */
        printf("  compute per micro-batch (forward + backward, %s):",
               wall ? "wall clock" : "virtual");
        for (int s = 0; s < pipe->p; s++)
            printf(" stage %d %.2f ms%s", s, 1e3 * all[3 * tt_grid_rank_of(g, 0, s, 0) + 2] / pipe->M,
                   s + 1 < pipe->p ? "," : "\n");
        free(all);
    }
}

/* ---- --explain ------------------------------------------------------------ */

/* Prints "head a, b, c" wrapped before 100 characters. */
static void print_wrapped(const char *head, char *const *items, int n)
{
    int col = printf("%s", head);
    for (int i = 0; i < n; i++) {
        int len = (int)strlen(items[i]);
        if (i && col + 2 + len > 100) {
            printf(",\n ");
            col = 1;
        } else if (i) {
            col += printf(",");
        }
        col += printf(" %s", items[i]);
    }
    printf("\n");
}

/* The step the executor ran, on the papers' time steps (not the virtual
 * clocks' costs), so the chart and the narration match the usual figures:
 * a header on what a GPU name and a chunk are, the Gantt chart, then the
 * narration. Stage s's GPU is called g<world rank> (gpu<world rank> in the
 * tables) so that lines stay short. */
void tt_explain_step(const tt_pipe *pipe, const tt_grid *g)
{
    if (g->world_rank != 0)
        return;
    tt_sim_result unit;
    tt_err e;
    if (tt_schedule_textbook(pipe->all, pipe->p, pipe->M, pipe->v, &unit, &e))
        return;
    const int p = pipe->p, v = pipe->v;
    char **names = tt_malloc((size_t)p * sizeof(char *));
    char **legend = tt_malloc((size_t)p * sizeof(char *));
    for (int s = 0; s < p; s++) {
        char full[48];
        int r = tt_grid_rank_of(g, 0, s, 0);
        names[s] = tt_malloc(16);
        legend[s] = tt_malloc(96);
        snprintf(names[s], 16, "g%d", r);
        snprintf(legend[s], 96, "%s = %s", names[s], tt_gpu_name(g, r, full, sizeof full));
    }
    printf("\none training step of DP replica 0 (%s, %d stage%s, %d micro-batch%s; the TP peers\n"
           "of each GPU do the same)\n", tt_schedule_name(pipe->kind), p, p > 1 ? "s" : "",
           pipe->M, pipe->M > 1 ? "es" : "");
    print_wrapped("GPUs, stage 0 first:", legend, p);
    printf("a chunk is a run of consecutive blocks that one stage computes; ");
    if (pipe->list.place == TT_PLACE_V)
        printf("here %d chunks\nin a V: stage s holds chunk s (down) and chunk %d - s (back up),\n"
               "so stage %d computes chunks %d and %d back to back (passed on by a copy)\n",
               p * v, 2 * p - 1, p - 1, p - 1, p);
    else if (v > 1)
        printf("here %d chunks,\nstage s holds chunks s, s + %d%s (chunk k on stage k %% %d)\n",
               p * v, p, v > 2 ? ", ..." : "", p);
    else if (p > 1)
        printf("here %d chunks,\nstage s holds chunk s\n", p);
    else
        printf("here one, the whole model\n");
    tt_schedule_legend(stdout, pipe->split_w);
    /* (one stage has no bubble, and no bubble table) */
    printf("(the virtual clocks' real costs are in %s--trace and --timeline)\n",
           p > 1 ? "the bubble table, " : "");
    printf("\nGantt chart: one row per GPU, one column per time step\n");
    tt_schedule_gantt_key(stdout, v, pipe->split_w);
    tt_schedule_gantt(stdout, pipe->all, &unit, (const char *const *)names);
    printf("\nthe same step, time step by time step\n");
    tt_schedule_explain(stdout, pipe->all, &unit, (const char *const *)names);
    for (int s = 0; s < p; s++) {
        free(names[s]);
        free(legend[s]);
    }
    free(names);
    free(legend);
    tt_sim_result_free(&unit);
}
