/* plan_cost.c - the planner's cost model: one candidate layout priced, its
 * memory per GPU and its step time (plan.c enumerates and ranks them).
 *
 * Each candidate is priced with the emulator's own parts, never a second
 * copy of them:
 *   time      tt_chunk_cost (src/model/cost.c: the kernels of forward.c at
 *             tt/core/kcost.h's prices, the TP collectives) per pipeline
 *             chunk, the links of the placement (tt_cluster_link, world-rank
 *             order as tt_grid_rank_of), the schedule's own action lists run
 *             through tt_schedule_simulate, then what tt_train_step does
 *             after the pipeline: the DP all-reduce in --dp-bucket buckets
 *             (tt_dp_buckets), the sum of squares (tt_kcost_sumsq), the
 *             loss and clipping-norm all-reduce, AdamW (tt_kcost_adamw);
 *   memory    plan_memory.c: fp32 the emulator's own account, mixed the
 *             papers' forms over the same shards and in-flight counts;
 *   FLOPs     tt_model_flops (Narayanan et al.'s 72 B s l h^2 (...)).
 * doc/planner.md writes every formula out. */
#include "tt/app/plan.h"
#include "app/plan_internal.h"
#include "tt/comm/grid.h"
#include "tt/core/kcost.h"
#include "tt/model/cost.h"
#include "tt/model/model.h"
#include "tt/parallel/data_parallel.h"
#include "tt/parallel/pipeline.h"
#include "tt/parallel/pipeline_run.h"

#include <stdlib.h>
#include <string.h>

/* A grid of sizes only: the arithmetic of tt_grid_rank_of and friends
 * without communicators (the planner runs on one process). */
static tt_grid sizes_grid(int tp, int pp, int dp)
{
    tt_grid g;
    memset(&g, 0, sizeof g);
    g.tp = tp, g.pp = pp, g.dp = dp, g.world_size = tp * pp * dp;
    return g;
}

/* Slowest link of the TP groups (consecutive ranks), of the DP groups of
 * stage s (members tp apart), and between stages a and b. */
static const tt_link *tp_link(const tt_cluster *c, const tt_grid *g, int *across)
{
    const tt_link *worst = &c->nvlink;
    *across = 0;
    for (int s = 0; s < g->pp; s++)
        for (int d = 0; d < g->dp; d++) {
            int lo = tt_grid_rank_of(g, d, s, 0), hi = tt_grid_rank_of(g, d, s, g->tp - 1);
            if (tt_cluster_link(c, lo, hi) == &c->network)
                worst = &c->network, *across = g->tp > 1;
        }
    return worst;
}

static const tt_link *dp_link(const tt_cluster *c, const tt_grid *g, int s)
{
    for (int t = 0; t < g->tp; t++) {
        int lo = tt_grid_rank_of(g, 0, s, t), hi = tt_grid_rank_of(g, g->dp - 1, s, t);
        if (tt_cluster_link(c, lo, hi) == &c->network)
            return &c->network;
    }
    return &c->nvlink;
}

static const tt_link *pp_link(const tt_cluster *c, const tt_grid *g, int a, int b)
{
    for (int d = 0; d < g->dp; d++)
        for (int t = 0; t < g->tp; t++)
            if (tt_cluster_link(c, tt_grid_rank_of(g, d, a, t), tt_grid_rank_of(g, d, b, t)) ==
                &c->network)
                return &c->network;
    return &c->nvlink;
}

static void add_candidate(tt_plan *p, const tt_plan_candidate *c)
{
    p->c = tt_grow(p->c, p->n, &p->cap, sizeof *p->c);
    p->c[p->n++] = *c;
}

/* The gradient synchronisation of one stage's DP group, as data_parallel.c
 * runs it (buckets of --dp-bucket bytes), or ZeRO's collectives as the
 * emulator makes them, unit by unit (`units` of the stage). */
static double dp_sync_seconds(const tt_plan_ctx *x, const tt_link *l, int dp, double P, int zero,
                              int m, int units)
{
    if (dp <= 1)
        return 0.0;
    const double elem = x->plan->mixed ? 2.0 : 4.0;
    if (zero == 0) {
        /* --dp-bucket is bytes: with 2-byte gradients a bucket holds twice
         * the elements tt_dp_buckets counts for 4-byte floats. */
        const size_t as_floats = x->rc->dp_bucket * (size_t)(sizeof(float) / elem);
        const double bucket = (double)(as_floats / sizeof(float));
        const double nb = (double)tt_dp_buckets((size_t)P, as_floats);
        const double last = P - (nb - 1) * bucket;
        return (nb - 1) * tt_cost_collective(l, TT_COLL_ALLREDUCE, dp, elem * bucket) +
               tt_cost_collective(l, TT_COLL_ALLREDUCE, dp, elem * last);
    }
    /* design.md section 10: stage 1 reduce-scatters the gradients once and
     * all-gathers the weights; stage 2 reduce-scatters per micro-batch;
     * stage 3 all-gathers the weights before each forward and backward of
     * every micro-batch and reduce-scatters per micro-batch, as stage 2
     * (tt_zero_expected_traffic; design.md's (2m+1)/2 assumes one
     * reduce-scatter per step). Each is made unit by unit (a block, the
     * embeddings, the head), so each pays the ring's latencies once per
     * unit: units collectives of P / units elements (a ring's cost is
     * linear in the bytes, so their sizes need not be equal). */
    const double rs = units * tt_cost_collective(l, TT_COLL_REDUCE_SCATTER, dp, elem * P / units);
    const double ag = units * tt_cost_collective(l, TT_COLL_ALLGATHER, dp, elem * P / units);
    if (zero == 1)
        return rs + ag;
    if (zero == 2)
        return m * rs + ag;
    return m * rs + 2.0 * m * ag;
}

static void plan_cache_drop_schedule(tt_plan_cache *c)
{
    tt_checked_schedule_free(c->checked);
    for (int s = 0; s < c->p && c->lists; s++)
        tt_action_list_free(&c->lists[s]);
    free(c->lists);
    c->checked = NULL, c->lists = NULL, c->p = 0;
}

void tt_plan_cache_free(tt_plan_cache *c)
{
    plan_cache_drop_schedule(c);
    free(c->chunk_layers);
    c->chunk_layers = NULL, c->K = 0;
}

/* One layout (all but ZeRO): the pipeline simulated with the chunk costs,
 * then for each ZeRO stage zeros[i] the step's tail as tt_train_step runs
 * it; the candidates are added to the plan. Returns -1 if the schedule
 * cannot run the layout. */
int tt_plan_evaluate(const tt_plan_ctx *x, const tt_plan_candidate *base, const int *zeros, int nz,
                     tt_err *e)
{
    const tt_run_config *rc = x->rc;
    const tt_cluster *cl = x->cl;
    const tt_config *cfg = &rc->model;
    tt_plan_candidate c0 = *base;
    /* Priced as the run would run it: zb-h1 on one stage is 1F1B (the
     * candidate keeps the name asked for, as the run's own line does). */
    const tt_schedule_kind kind = tt_schedule_as_run(c0.schedule, c0.pp, c0.virtual_stages);
    const int p = c0.pp, v = tt_schedule_chunks_per_stage(kind, c0.virtual_stages);
    const int K = p * v, m = c0.micro_batches;
    const int mbs = rc->batch / c0.dp / m;
    const tt_grid g = sizes_grid(c0.tp, c0.pp, c0.dp);
    c0.virtual_stages = v;
    /* The checks that hold for every micro-batch count come first, so that
     * when no layout runs (plan.c keeps the deepest pipeline's reason) the
     * reason is not merely the fewest micro-batches tried: the schedule's
     * shape (with a count it accepts: 2p(p-1) is a multiple of p and at
     * least p and 2(p-1)), then what training refuses, in its words (a ZeRO
     * stage it refuses is dropped), then the blocks per chunk. */
    const int m_ok = p > 1 ? 2 * p * (p - 1) : 1;
    if (tt_schedule_validate_args(kind, p, m_ok, v, e))
        return -1;
    tt_run_config as_run = *rc;
    as_run.schedule = c0.schedule;
    as_run.virtual_stages = c0.virtual_stages;
    as_run.recompute = c0.recompute;
    as_run.sequence_parallel = c0.sequence_parallel;
    int runs[4], nr = 0;
    for (int i = 0; i < nz; i++) {
        as_run.zero = zeros[i];
        if (!tt_pipe_check_flags(&as_run, p, e))
            runs[nr++] = zeros[i];
    }
    if (nr == 0) /* e: why the last stage was refused (recompute and SP checked first) */
        return -1;
    zeros = runs;
    nz = nr;
    const tt_placement place = tt_schedule_placement(kind);
    tt_plan_cache *cache = x->cache;
    if (cache->K != K || cache->place != place) {
        free(cache->chunk_layers);
        cache->chunk_layers = tt_malloc((size_t)K * sizeof *cache->chunk_layers);
        cache->K = 0;
        if (tt_stage_split(cache->chunk_layers, cfg, K, place, NULL, e))
            return -1;
        cache->K = K, cache->place = place;
    }
    const int *chunk_layers = cache->chunk_layers;
    if (tt_schedule_validate_args(kind, p, m, v, e))
        return -1;
    if (cache->p != p || cache->kind != (int)kind || cache->m != m || cache->v != v) {
        plan_cache_drop_schedule(cache);
        cache->lists = tt_calloc((size_t)p, sizeof *cache->lists);
        for (int s = 0; s < p; s++)
            tt_schedule_build(&cache->lists[s], kind, p, m, v, s);
        cache->p = p; /* the lists to free, checked or not */
        cache->checked = tt_schedule_checked(cache->lists, p, m, v, e);
        if (!cache->checked) {
            plan_cache_drop_schedule(cache);
            return -1;
        }
        cache->kind = (int)kind, cache->m = m, cache->v = v;
    }
    const tt_action_list *lists = cache->lists;
    /* Time of every chunk, and of every message between neighbours. */
    tt_cost_ctx cx = {cl, x->plan->mixed, c0.tp, NULL, c0.sequence_parallel,
                      c0.recompute, tt_schedule_splits_w(kind)};
    cx.tp_link = tp_link(cl, &g, &c0.tp_across_servers);
    double *cost = tt_malloc(4 * (size_t)K * sizeof *cost);
    double *fwd = cost, *bwd = cost + K, *link = cost + 2 * K, *wgt = cost + 3 * K;
    double tp_comm = 0;
    const double elem = x->plan->mixed ? 2.0 : 4.0;
    for (int k = 0; k < K; k++) {
        tt_chunk_seconds t = tt_chunk_cost(cfg, &cx, mbs, chunk_layers[k], k == 0, k == K - 1);
        fwd[k] = t.fwd, bwd[k] = t.bwd, wgt[k] = t.w; /* B and W apart under zb */
        const int here = tt_chunk_stage(place, p, k);
        const int next = k + 1 < K ? tt_chunk_stage(place, p, k + 1) : here;
        if (here == 0)
            tp_comm += m * (t.fwd_comm + t.bwd_comm);
        /* two chunks of one stage (zb-v's turn) pass the activation by a copy */
        link[k] = next != here ? tt_cost_link(pp_link(cl, &g, here, next),
                                              elem * mbs * cfg->T * cfg->C /
                                                  (c0.sequence_parallel ? c0.tp : 1))
                               : 0.0;
    }
    tt_sim_result res;
    tt_sim_costs sc = {fwd, bwd, link, cx.split_w ? wgt : NULL};
    int rc_sim = tt_schedule_simulate_checked(cache->checked, &sc, &res, e);
    tt_plan_stage_shape *shape = rc_sim ? NULL : tt_calloc((size_t)p, sizeof *shape);
    double busy = 0;
    for (int s = 0; s < p && !rc_sim; s++) {
        tt_plan_stage_shape_of(x, &g, chunk_layers, s, &lists[s], mbs, &c0, &shape[s]);
        busy += res.busy[s];
    }
    /* The loss and the clipping norm's sum of squares: two doubles summed
     * over the world in one all-reduce. */
    const int N = c0.tp * c0.pp * c0.dp;
    const double ar16 = tt_cost_collective(tt_cluster_link(cl, 0, N - 1), TT_COLL_ALLREDUCE, N,
                                           16.0);
    const tt_plan *pl = x->plan;
    const double peak = pl->mixed ? cl->peak_flops : cl->peak_flops_fp32;
    /* (a test cluster of fixed chunk costs charges no kernel after the
     * pipeline, as tt_vclock_compute does not) */
    const double kernels = tt_cluster_fixed(cl) ? 0.0 : 1.0;
    for (int i = 0; i < nz && !rc_sim; i++) {
        tt_plan_candidate c = c0;
        c.zero = zeros[i];
        c.memory[TT_PMEM_TOTAL] = -1;
        double tail_dp = 0, adam = 0, synced = 0;
        for (int s = 0; s < p; s++) {
            double mem[TT_PMEM_N];
            tt_plan_stage_memory(x, &g, chunk_layers, s, v, &shape[s], mbs, c.zero, c.recompute,
                         c.sequence_parallel, mem);
            if (mem[TT_PMEM_TOTAL] > c.memory[TT_PMEM_TOTAL]) {
                memcpy(c.memory, mem, sizeof mem);
                c.worst_stage = s;
            }
            /* After the pipeline (tt_train_step): the DP sync, then the
             * clipping norm's sum of squares on the rank that counts the
             * replicated tensors (dp 0, tp 0), then AdamW, each stage's
             * on its own shard (a ZeRO rank on its 1/dp). */
            const double P = (double)shape[s].sm.param_floats;
            const double own = c.zero >= 1 ? P / c.dp : P;
            const tt_kcost sq = tt_kcost_sumsq(own), ad = tt_kcost_adamw(own);
            double t = dp_sync_seconds(x, dp_link(cl, &g, s), c.dp, P, c.zero, m,
                                       shape[s].units) +
                       kernels * tt_cost_compute(cl, sq.flops, 4.0 * sq.floats);
            tail_dp = t > tail_dp ? t : tail_dp;
            /* Each stage starts its tail when its own pipeline work ends
             * (under 1F1B stage 0 ends last); the loss and norm all-reduce
             * waits for the latest. */
            synced = res.end[s] + t > synced ? res.end[s] + t : synced;
            double a = kernels * tt_cost_compute(cl, ad.flops, 4.0 * ad.floats);
            adam = a > adam ? a : adam;
        }
        c.pipeline_seconds = res.span;
        c.bubble = res.span > 0 ? 1.0 - busy / p / res.span : 0.0;
        c.tp_seconds = tp_comm;
        c.dp_seconds = tail_dp;
        c.optimizer_seconds = adam;
        c.step_seconds = synced + ar16 + adam;
        c.fits = c.memory[TT_PMEM_TOTAL] <= cl->gpu_memory_bytes;
        c.flops = tt_model_flops(cfg, rc->batch);
        /* Hardware FLOPs: what recomputation runs again (Narayanan et al.:
         * full recomputation is one more forward of the blocks, as
         * tt_chunk_cost prices it; lm_head is not run again). */
        c.hardware_flops = c.flops + tt_model_recompute_flops(cfg, rc->batch, c.recompute);
        c.mfu = c.flops / (c.step_seconds * pl->gpus * peak);
        if (pl->train_tokens > 0) {
            const double steps = pl->train_tokens / ((double)rc->batch * cfg->T);
            c.train_seconds = steps * c.step_seconds;
            c.energy_kwh = pl->gpus * cl->gpu_watts * c.train_seconds / 3.6e6 * cl->pue;
            c.cost = c.energy_kwh * cl->price_per_kwh;
        }
        add_candidate(x->plan, &c);
    }
    if (!rc_sim)
        tt_sim_result_free(&res);
    free(shape);
    free(cost);
    return rc_sim ? -1 : 0;
}
