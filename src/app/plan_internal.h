/* plan_internal.h - what the planner's search (plan.c) hands its cost model
 * (plan_cost.c): the inputs of one evaluation and the call that prices a
 * layout. */
#ifndef TT_PLAN_INTERNAL_H
#define TT_PLAN_INTERNAL_H

#include "tt/app/plan.h"
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
