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
 *   memory    fp32: the emulator's account (tt_shard_memory_of, the slots
 *             and buffers tt_schedule_buffers says the executor allocates);
 *             mixed: the papers' forms (ZeRO's 2+2+12 bytes per parameter,
 *             Korthikanti et al.'s activations per layer) over the same
 *             shards and in-flight counts;
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

/* Activation bytes of one block for one micro-batch of b sequences in the
 * papers' mixed precision (s = T, h = C, a = heads, t = tp): Korthikanti et
 * al. 2022, Table 2, less its dropout terms, since this model has none
 * (design.md section 4): their s b h (10 + 24/t + 5as/ht) counts two dropout
 * masks of s b h bytes (after attention and after the MLP) and, in the T^2
 * part, attention's dropout mask (a s^2 b / t) and output (2 a s^2 b / t).
 * What is left is what the block keeps, at 2 bytes a value: the LayerNorms'
 * inputs and outputs, 8 s b h replicated (split by SP); q, k, v, proj's
 * input, fc1's output and GELU's, 24 s b h / t; the softmax's output,
 * 2 a s^2 b / t. The fp32 account keeps the same values at 4 bytes.
 * A zero-bubble schedule's B also keeps, until W, the output gradients of
 * proj, fc2 and the two LayerNorms (4 s b h values, whole rows even under
 * SP) and of q, k, v and fc1 (7 s b h / t): s b h (8 + 14/t) bytes more
 * (buffers.c's SPLIT_W rows; zb refuses recomputation). */
double tt_plan_layer_activation_bytes(const tt_config *m, double b, int t, int sp, int recompute,
                                      int split_w)
{
    const double s = m->T, h = m->C, a = m->NH, sbh = s * b * h;
    const double attn = 2.0 * a * s / (h * t); /* the T^2 term: the softmax's output */
    const double kept = sp ? 32.0 / t : 8.0 + 24.0 / t; /* the s b h terms */
    const double for_w = split_w ? sbh * (8.0 + 14.0 / t) : 0.0;
    switch (recompute) {
    case TT_RECOMPUTE_FULL: return (sp ? 2.0 * sbh / t : 2.0 * sbh) + for_w;
    case TT_RECOMPUTE_SELECTIVE: return sbh * kept + for_w;
    default: return sbh * (kept + attn) + for_w;
    }
}

static void add_candidate(tt_plan *p, const tt_plan_candidate *c)
{
    p->c = tt_grow(p->c, p->n, &p->cap, sizeof *p->c);
    p->c[p->n++] = *c;
}

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
} stage_shape;

static void stage_shape_of(const tt_plan_ctx *x, const tt_grid *g, const int *chunk_layers, int s,
                           const tt_action_list *list, int mbs, const tt_plan_candidate *c,
                           stage_shape *out)
{
    tt_run_config r = *x->rc;
    r.tp_mlp_gather = 0;
    r.recompute = c->recompute;
    r.sequence_parallel = c->sequence_parallel;
    /* the candidate's schedule places the chunks and says whether B and W
     * are apart */
    r.schedule = c->schedule;
    r.virtual_stages = c->virtual_stages;
    tt_shard_spec sh = tt_stage_spec(g, &r, chunk_layers, tt_grid_rank_of(g, 0, s, 0));
    tt_shard_memory_of(&r.model, &sh, mbs, &out->sm);
    int nb[TT_MAX_CHUNKS];
    tt_chunk_blocks(&sh, nb);
    tt_schedule_buffers(list, g->pp, r.virtual_stages, nb, &out->need);
    out->list = list;
    out->place = tt_schedule_placement(c->schedule);
    out->split_w = tt_schedule_splits_w(c->schedule);
    /* its blocks, and the embeddings and the head where it holds the first
     * and the last chunk */
    const int K = g->pp * c->virtual_stages;
    out->units = 0;
    for (int k = 0; k < K; k++)
        if (tt_chunk_stage(out->place, g->pp, k) == s)
            out->units += chunk_layers[k] + (k == 0) + (k == K - 1);
    for (int z = 1; z <= 3 && g->dp > 1; z++) {
        tt_params table;
        size_t w, gr, o;
        sh.zero_stage = z, sh.dp_size = g->dp, sh.dp_rank = 0;
        tt_model_shard_table(&table, &r.model, &sh);
        tt_params_zero_bytes(&table, &w, &gr, &o);
        tt_params_free(&table);
        out->zero_bytes[z][0] = (double)w, out->zero_bytes[z][1] = (double)gr;
        out->zero_bytes[z][2] = (double)o;
    }
}

/* What one stage holds, by category (bytes), for one candidate. */
static void stage_memory(const tt_plan_ctx *x, const tt_grid *g, const int *chunk_layers, int s,
                         int v, const stage_shape *sh, int mbs, int zero, int recompute, int sp,
                         double *mem)
{
    const tt_run_config *rc = x->rc;
    const tt_shard_memory *sm = &sh->sm;
    const double P = (double)sm->param_floats, dp = g->dp;
    /* elements of one transfer: with sequence parallelism a TP rank's rows */
    const double msg = (double)mbs * rc->model.T * rc->model.C / (sp ? g->tp : 1);
    /* ZeRO's stages: 1 shards the optimizer state, 2 the gradients, 3 the weights. */
    const double os = zero >= 1 ? dp : 1, gs = zero >= 2 ? dp : 1, ws = zero >= 3 ? dp : 1;
    if (!x->plan->mixed) {
        /* The emulator's account: 4 bytes each for weights and gradients, 8
         * for Adam's m and v; every slot the executor reserves, the backward
         * scratch, the transfer buffers. */
        mem[TT_PMEM_WEIGHTS] = 4 * P / ws;
        mem[TT_PMEM_GRADIENTS] = 4 * P / gs;
        mem[TT_PMEM_OPTIMIZER] = 8 * P / os;
        if (zero >= 1 && g->dp > 1) {
            mem[TT_PMEM_WEIGHTS] = sh->zero_bytes[zero][0];
            mem[TT_PMEM_GRADIENTS] = sh->zero_bytes[zero][1];
            mem[TT_PMEM_OPTIMIZER] = sh->zero_bytes[zero][2];
        }
        const tt_stage_buffers *n = &sh->need;
        mem[TT_PMEM_ACTIVATIONS] = (double)sm->scratch_bytes + (double)sm->work_bytes +
                                   (double)sm->own_bytes * n->slots +
                                   (double)sm->block_bytes * n->blocks +
                                   (double)sm->head_bytes * n->heads;
        mem[TT_PMEM_COMM] = 4 * msg * n->buffers;
    } else {
        /* ZeRO paper: 2 (fp16 weights) + 2 (gradients) + 12 (fp32 master
         * weights, m and v: K = 12) bytes per parameter. */
        mem[TT_PMEM_WEIGHTS] = 2 * P / ws;
        mem[TT_PMEM_GRADIENTS] = 2 * P / gs;
        mem[TT_PMEM_OPTIMIZER] = 12 * P / os;
        /* A micro-batch of local chunk j: its layers, and on the last chunk
         * the loss's fp32 logits of the local vocabulary (Korthikanti et al.
         * section 4.3: 4 s b v / t). A real pipeline allocates as it goes,
         * so the stage holds the most of these at once over its schedule
         * (not each chunk's own most, which the executor reserves). */
        double chunk_bytes[TT_MAX_CHUNKS] = {0};
        const int K = g->pp * v;
        for (int k = 0; k < K; k++) {
            const int j = k / g->pp;
            if (tt_chunk_stage(sh->place, g->pp, k) != s || j >= TT_MAX_CHUNKS)
                continue;
            chunk_bytes[j] = chunk_layers[k] *
                             tt_plan_layer_activation_bytes(&rc->model, mbs, g->tp, sp, recompute,
                                                            sh->split_w);
            if (k == K - 1)
                chunk_bytes[j] += 4.0 * rc->model.T * mbs * rc->model.V / g->tp;
        }
        double act = tt_schedule_peak_held(sh->list, g->pp, v, chunk_bytes);
        /* Full recomputation rebuilds one block's activations at a time. */
        if (recompute == TT_RECOMPUTE_FULL)
            act += tt_plan_layer_activation_bytes(&rc->model, mbs, g->tp, sp, 0, 0);
        mem[TT_PMEM_ACTIVATIONS] = act;
        /* A real pipeline reuses its transfer buffers: one activation and one
         * gradient each way per local chunk (the emulator keeps one per
         * transfer of the step, which the fp32 account counts). */
        mem[TT_PMEM_COMM] = g->pp > 1 ? 2 * msg * 4 * v : 0;
        /* ZeRO 3 gathers one unit's 16-bit weights at a time, into a buffer
         * of the largest unit (the emulator's too: its fp32 weights are the
         * owned pieces, 8 bytes of Adam a float, plus that buffer). */
        if (zero >= 3 && g->dp > 1)
            mem[TT_PMEM_COMM] += 2 * (sh->zero_bytes[3][0] / 4 - sh->zero_bytes[3][2] / 8);
    }
    mem[TT_PMEM_TOTAL] = 0;
    for (int i = 0; i < TT_PMEM_TOTAL; i++)
        mem[i] = mem[i] > 0 ? mem[i] : 0, mem[TT_PMEM_TOTAL] += mem[i];
}

/* The gradient synchronisation of one stage's DP group, as data_parallel.c
 * runs it (buckets of --dp-bucket bytes), or ZeRO's collectives as the paper
 * counts them (whole buffers; the emulator's ZeRO goes unit by unit, a few
 * more latencies: within 1% on the tests' layouts). */
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
    stage_shape *shape = rc_sim ? NULL : tt_calloc((size_t)p, sizeof *shape);
    double busy = 0;
    for (int s = 0; s < p && !rc_sim; s++) {
        stage_shape_of(x, &g, chunk_layers, s, &lists[s], mbs, &c0, &shape[s]);
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
            stage_memory(x, &g, chunk_layers, s, v, &shape[s], mbs, c.zero, c.recompute,
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
