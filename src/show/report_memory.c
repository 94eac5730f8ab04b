/* report_memory.c - every virtual GPU's memory brought to rank 0: the table
 * of the account at each GPU's peak (--report memory), and the agreement
 * that stops every rank when any GPU went over its budget. */
#include "tt/show/report_memory.h"
#include "tt/comm/comm.h"
#include "tt/core/memory.h"

#include <stdio.h>
#include <stdlib.h>

/* What one GPU sends to rank 0: bytes per category at its peak, the peak and
 * the budget (0: none). */
typedef struct {
    double at_peak[TT_MEM_NCAT];
    double peak, budget;
} mem_record;

static void print_row(FILE *out, const tt_grid *g, int r, const mem_record *v)
{
    char name[48];
    fprintf(out, "  %-20s", tt_gpu_name(g, r, name, sizeof name));
    for (int c = 0; c < TT_MEM_NCAT; c++)
        fprintf(out, " %12.3f", v->at_peak[c] / 1048576.0);
    fprintf(out, " %9.3f", v->peak / 1048576.0);
    if (v->budget > 0)
        fprintf(out, " %9.3f\n", v->budget / 1048576.0);
    else
        fprintf(out, " %9s\n", "-");
}

void tt_report_memory(FILE *out, const tt_grid *g)
{
    mem_record mine;
    size_t at_peak[TT_MEM_NCAT];
    mine.peak = (double)tt_mem_peak(at_peak);
    for (int c = 0; c < TT_MEM_NCAT; c++)
        mine.at_peak[c] = (double)at_peak[c];
    mine.budget = (double)tt_mem_budget();
    mem_record *all = tt_gather_to_root(g, &mine, (int)sizeof mine);
    if (g->world_rank == 0 && out) {
        fprintf(out, "\nmemory per virtual GPU at its peak, MiB (the categories of doc/background.md "
                     "section 1; everything is allocated before the first step)\n");
        fprintf(out, "  %-20s", "GPU");
        for (int c = 0; c < TT_MEM_NCAT; c++)
            fprintf(out, " %12s", tt_mem_names[c]);
        fprintf(out, " %9s %9s\n", "peak", "budget");
        for (int r = 0; r < g->world_size; r++)
            print_row(out, g, r, &all[r]);
        fprintf(out, "  activations: z and y of every block for the micro-batches a GPU holds "
                     "at once; errors: one backward's activation gradients; comm buffers: "
                     "pipeline transfers\n");
    }
    free(all);
}

int tt_check_oom(const tt_grid *g)
{
    /* A GPU over its budget names itself in its message, so the one line
     * every rank agrees on (the lowest such rank's) says which GPU it was. */
    char why[400] = "";
    tt_err err = {""};
    const int failed = tt_mem_oom(why, sizeof why);
    if (failed) {
        char name[48];
        snprintf(err.msg, sizeof err.msg, "%s is %s",
                 tt_gpu_name(g, g->world_rank, name, sizeof name), why);
    }
    if (tt_agree_error(g, failed, &err) == 0)
        return 0;
    if (g->world_rank == 0)
        fprintf(stderr, "tiny_transformer: %s\n", err.msg);
    return 1;
}
