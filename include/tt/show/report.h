/* tt/show/report.h - what every virtual GPU did: its communication, measured by
 * the counters of tt/comm.h, next to the closed-form expectation for the
 * configuration (formulas in doc/communication.md). */
#ifndef TT_REPORT_H
#define TT_REPORT_H

#include <stdio.h>
#include "tt/comm/comm.h"
#include "tt/core/config.h"
#include "tt/comm/grid.h"
#include "tt/model/model.h"
#include "tt/parallel/pipeline_run.h"

/* Adds b - a to acc: the traffic of one interval (e.g. one training step). */
void tt_comm_accumulate(tt_comm_stats *acc, const tt_comm_stats *a, const tt_comm_stats *b);

/* Expected TP, PP and DP traffic of this GPU for `steps` training steps. */
void tt_comm_expected(tt_comm_stats *exp, const tt_run_config *rc, const tt_grid *g,
                      const tt_model *m, long steps);

/* Prints the measured and expected table of rank 0 (of every GPU with
 * all_gpus), and returns 1 when every GPU's TP/PP/DP counts equal their
 * formulas. Collective. */
int tt_report_comm(FILE *out, const tt_run_config *rc, const tt_grid *g, const tt_model *m,
                   const tt_comm_stats *measured, long steps, int all_gpus);

/* Rank 0 prints every GPU's memory: the account by category at its peak,
 * the peak and the budget. Collective. */
void tt_report_memory(FILE *out, const tt_grid *g);

/* Collective: if any GPU went over its budget, rank 0 prints the first such
 * GPU's message and every rank returns 1. */
int tt_check_oom(const tt_grid *g);

/* The stage split: which blocks every stage (and chunk) holds. */
void tt_print_pipeline(const tt_run_config *rc, const tt_grid *g, const int *chunk_layers);

/* Per step, this GPU's idle fraction and the most micro-batches it held. */
typedef struct {
    int n, cap;
    double *idle;
    int peak;
} tt_bubble_stats;

void tt_bubble_init(tt_bubble_stats *b, long steps);
void tt_bubble_free(tt_bubble_stats *b);
void tt_bubble_add(tt_bubble_stats *b, const tt_pipe *pp);
/* Rank 0 prints every GPU's median idle fraction next to the simulation of
 * the schedule and the textbook formula, and the peak held. Collective. */
void tt_bubble_report(tt_bubble_stats *b, const tt_pipe *pp, const tt_grid *g);
/* --explain: rank 0 narrates one step of DP replica 0 from the schedule the
 * executor runs, with unit-time forwards and backwards. */
void tt_explain_step(const tt_pipe *pp, const tt_grid *g);

#endif
