/* tt/app/plan.h - the planner (doc/design.md section 11): for a model, a cluster,
 * a GPU count and a global batch, every layout (or the pinned one) with its
 * memory per GPU, step time, MFU and, given the tokens to train on, days,
 * energy and cost. One process, no training: the figures come from the
 * functions the emulator itself runs by (the kernels' prices, the cluster's
 * cost model, the memory account, the schedule simulation). doc/planner.md
 * gives every formula and its source. */
#ifndef TT_APP_PLAN_H
#define TT_APP_PLAN_H

#include <stdio.h>
#include "tt/core/cluster.h"
#include "tt/core/common.h"
#include "tt/core/config.h"

enum { TT_PMEM_WEIGHTS, TT_PMEM_GRADIENTS, TT_PMEM_OPTIMIZER, TT_PMEM_ACTIVATIONS, TT_PMEM_COMM,
       TT_PMEM_TOTAL, TT_PMEM_N };

typedef struct {
    int tp, pp, dp, zero, recompute, sequence_parallel, schedule, virtual_stages, micro_batches;
    int fits, worst_stage;
    double memory[TT_PMEM_N];   /* bytes of the worst GPU (the stage with the most) */
    double flops, hardware_flops;
    double step_seconds, bubble, mfu;
    double pipeline_seconds;    /* first forward to last backward */
    double tp_seconds;          /* TP collectives on the critical stage */
    double dp_seconds;          /* gradient sync (or ZeRO's collectives) */
    double optimizer_seconds;   /* AdamW on the stage with the most to update */
    int tp_across_servers;
    double train_seconds, energy_kwh, cost;
    char why[96];
} tt_plan_candidate;

typedef struct {
    tt_config model;
    double parameters;
    int gpus, batch, mixed;
    double train_tokens;
    tt_cluster cluster;
    double checkpoint_bytes, checkpoint_write_seconds, job_mtbf_seconds, checkpoint_interval;
    int n, cap;
    tt_plan_candidate *c; /* best first */
} tt_plan;

/* Activation bytes of one block for one micro-batch of b sequences, 16-bit,
 * Korthikanti et al. 2022 Table 2 less its dropout terms (t = tp; sp:
 * sequence parallelism; recompute: TT_RECOMPUTE_*; split_w: a zero-bubble
 * schedule, whose B keeps the linears' output gradients until W). */
double tt_plan_layer_activation_bytes(const tt_config *m, double b, int t, int sp, int recompute,
                                      int split_w);

/* Enumerates and evaluates; -1 with e when nothing can be planned. */
int tt_plan_make(tt_plan *plan, const tt_run_config *rc, tt_err *e);
void tt_plan_free(tt_plan *plan);

/* The ranked table (src/app/plan_report.c) and the JSON of design.md section 11. */
void tt_plan_print(FILE *out, const tt_plan *plan, int rows);
int tt_plan_write_json(const tt_plan *plan, const char *path, tt_err *e);

/* --plan: plans, prints, writes --plan-json; the exit status. */
int tt_plan_main(const tt_run_config *rc);

#endif
