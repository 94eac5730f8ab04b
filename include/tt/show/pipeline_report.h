/* tt/show/pipeline_report.h - what the pipeline did, for people: the split
 * of the blocks into stages, the bubble (each GPU's idle fraction next to
 * the schedule's simulation and the textbook formula), and the narrated step
 * of --explain. */
#ifndef TT_SHOW_PIPELINE_REPORT_H
#define TT_SHOW_PIPELINE_REPORT_H

#include "tt/comm/grid.h"
#include "tt/core/config.h"
#include "tt/parallel/pipeline_run.h"

/* The stage split: which blocks every stage (and chunk) holds; with one
 * stage, only a note when the schedule asked for runs as another. */
void tt_print_pipeline(const tt_run_config *rc, const tt_grid *g, const int *chunk_layers);

/* Per step, this GPU's idle fraction and compute time (forward + backward),
 * and the most micro-batches it held. */
typedef struct {
    int n, cap;
    double *idle, *busy;
    int peak;
} tt_bubble_stats;

void tt_bubble_init(tt_bubble_stats *b, long steps);
void tt_bubble_free(tt_bubble_stats *b);
void tt_bubble_add(tt_bubble_stats *b, const tt_pipe *pipe);
/* Rank 0 prints every GPU's median idle fraction next to the simulation of
 * the schedule and the textbook formula, and the peak held. Collective. */
void tt_bubble_report(tt_bubble_stats *b, const tt_pipe *pipe, const tt_grid *g);
/* --explain: rank 0 narrates one step of DP replica 0 from the schedule the
 * executor runs, with unit-time forwards and backwards. */
void tt_explain_step(const tt_pipe *pipe, const tt_grid *g);

#endif
