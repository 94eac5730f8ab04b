/* plan_internal.h - what the planner's search (plan.c) hands its cost model
 * (plan_cost.c, with plan_memory.c for what a stage holds): the inputs of one
 * evaluation and the call that prices a layout. */
#ifndef TT_PLAN_INTERNAL_H
#define TT_PLAN_INTERNAL_H

#include "tt/app/plan.h"
#include "tt/comm/grid.h"
#include "tt/model/cost.h"
#include "tt/parallel/pipeline.h"

/* What the search priced last, kept for the next candidates: its loops run
 * tp, pp, schedule, micro-batches, recomputation, SP (plan.c), so the same
 * schedule (kind, p, m, v) comes for every recomputation and SP in a row,
 * and the same stage split (K chunks, placement) for every micro-batch
 * count too. A balanced split of a
 * deep model is a dynamic program of K L^2 steps (1024 layers on 256 chunks:
 * 10^8), and a schedule's lists are built and checked in passes over all
 * their p m v actions. */
typedef struct {
    int K;              /* 0: no split yet */
    tt_placement place;
    int *chunk_layers;  /* [K] */
    int kind, p, m, v;  /* p 0: no schedule yet */
    tt_action_list *lists;        /* [p] */
    tt_checked_schedule *checked; /* the lists, checked once */
} tt_plan_cache;

/* Frees what the cache holds (the search's end). */
void tt_plan_cache_free(tt_plan_cache *c);

typedef struct {
    const tt_run_config *rc;
    const tt_cluster *cl;
    tt_plan *plan;
    tt_plan_cache *cache; /* owned by the search (plan.c) */
} tt_plan_ctx;

/* What a stage's shard and its schedule make it hold, whatever the ZeRO
 * stage: computed once per layout and reused for the four stages of ZeRO. */
typedef struct {
    tt_shard_memory sm;
    tt_stage_buffers need; /* what the executor reserves (its pools, its transfers) */
    const tt_action_list *list; /* the stage's schedule */
    tt_placement place;         /* which chunks are the stage's */
    int split_w;                /* B and W apart: B's gradients kept until W */
    int units;                  /* ZeRO's units: blocks, embeddings, head */
    /* ZeRO z (1..3) on this DP size: weights, gradients, optimizer bytes as
     * the emulator allocates them (padding, stage 2's one-unit gradient
     * scratch and stage 3's one-unit gather buffer included). */
    double zero_bytes[4][3];
} tt_plan_stage_shape;

/* (plan_memory.c) A stage's shape for candidate c on grid g; and what the
 * stage holds under ZeRO stage `zero`, by category (bytes; mem[TT_PMEM_N]). */
void tt_plan_stage_shape_of(const tt_plan_ctx *x, const tt_grid *g, const int *chunk_layers, int s,
                            const tt_action_list *list, int mbs, const tt_plan_candidate *c,
                            tt_plan_stage_shape *out);
void tt_plan_stage_memory(const tt_plan_ctx *x, const tt_grid *g, const int *chunk_layers, int s,
                          int v, const tt_plan_stage_shape *sh, int mbs, int zero, int recompute,
                          int sp, double *mem);

/* The unit memory is shown in: MiB on GPUs under 4 GiB, else GiB
 * (plan_report.c), and its name. */
double tt_plan_mem_unit(const tt_plan *pl);
const char *tt_plan_mem_name(const tt_plan *pl);

/* One layout (all but ZeRO): the pipeline simulated with the chunk costs,
 * then for each ZeRO stage zeros[i] the step's tail as tt_train_step runs
 * it; the candidates are added to the plan. Returns -1 if the schedule
 * cannot run the layout. */
int tt_plan_evaluate(const tt_plan_ctx *x, const tt_plan_candidate *base, const int *zeros, int nz,
                     tt_err *e);

#endif
