/* plan_memory.c - what one stage holds in a plan, by category: in fp32 the
 * emulator's own account (tt_shard_memory_of, the slots and buffers
 * tt_schedule_buffers says the executor reserves, ZeRO's partition as
 * params.c pads it); in mixed precision the papers' forms (ZeRO's 2+2+12
 * bytes per parameter, Korthikanti et al.'s activations per layer without
 * dropout) over the same shards and in-flight counts. plan_cost.c prices the
 * time. */
#include "tt/app/plan.h"
#include "app/plan_internal.h"
#include "tt/core/params.h"
#include "tt/model/cost.h"
#include "tt/model/model.h"
#include "tt/parallel/pipeline.h"
#include "tt/parallel/pipeline_run.h"

#include <string.h>

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

/* A stage's shape (tt_plan_stage_shape) for candidate c on grid g. */
void tt_plan_stage_shape_of(const tt_plan_ctx *x, const tt_grid *g, const int *chunk_layers, int s,
                             const tt_action_list *list, int mbs, const tt_plan_candidate *c,
                             tt_plan_stage_shape *out)
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
void tt_plan_stage_memory(const tt_plan_ctx *x, const tt_grid *g, const int *chunk_layers, int s,
                          int v, const tt_plan_stage_shape *sh, int mbs, int zero, int recompute, int sp,
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
