/* model.c - the GPT's parameter table for one shard, its initialisation, and
 * the gradient scratch shared by all micro-batches.
 *
 * The table is built from the shard spec, so a tensor-parallel rank holds only
 * its slice (heads for q/k/v, input columns for proj/fc2, vocabulary rows for
 * tok_emb/lm_head); every size below is the local one (Cl, Hl, Vl). The
 * activations live in slots (slots.c), the forward and backward in forward.c
 * (block_sp.c under sequence parallelism);
 * the scratch and work set here, like the slots, are rows of buffers.c's table. */
#include "tt/model/model.h"
#include "model/model_internal.h"
#include "tt/core/common.h"
#include "tt/core/memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tt_shard_spec tt_shard_whole(const tt_config *cfg)
{
    tt_shard_spec s;
    memset(&s, 0, sizeof s);
    s.tp_size = 1;
    s.layer_end = cfg->L;
    s.first_stage = s.last_stage = 1;
    return s;
}

static int add(tt_model *m, const char *name, int ndim, int rows, int cols, tt_split split,
               int offset, int local)
{
    return tt_params_add(&m->P, name, ndim, rows, cols, split, offset, local);
}

/* Adds block LAYER's tensor PART, named blocks.LAYER.PART (put together by
 * hand: the planner builds the tables of thousands of layouts, and snprintf
 * here once took most of its time). */
static int add_part(tt_model *m, int layer, const char *part, int ndim, int rows, int cols,
                    tt_split split, int offset, int local)
{
    char name[TT_NAME_MAX], digits[12];
    int nd = 0;
    do
        digits[nd++] = (char)('0' + layer % 10);
    while ((layer /= 10) > 0);
    size_t n = strlen("blocks.");
    memcpy(name, "blocks.", n);
    while (nd > 0)
        name[n++] = digits[--nd];
    name[n++] = '.';
    const size_t plen = strnlen(part, sizeof name - 1 - n);
    memcpy(name + n, part, plen);
    name[n + plen] = '\0';
    return add(m, name, ndim, rows, cols, split, offset, local);
}

/* Registers one block's tensors with their TP slices (design.md section 4). */
static void add_block(tt_model *m, int layer, tt_block_idx *b)
{
    const int C = m->cfg.C, H = 4 * C, r = m->sh.tp_rank;
    const int cl0 = r * m->Cl, hl0 = r * m->Hl;
    b->ln1_w = add_part(m, layer, "ln1.weight", 1, C, 1, TT_SPLIT_NONE, 0, 0);
    b->ln1_b = add_part(m, layer, "ln1.bias", 1, C, 1, TT_SPLIT_NONE, 0, 0);
    b->q_w = add_part(m, layer, "attn.q.weight", 2, C, C, TT_SPLIT_ROWS, cl0, m->Cl);
    b->q_b = add_part(m, layer, "attn.q.bias", 1, C, 1, TT_SPLIT_ROWS, cl0, m->Cl);
    b->k_w = add_part(m, layer, "attn.k.weight", 2, C, C, TT_SPLIT_ROWS, cl0, m->Cl);
    b->k_b = add_part(m, layer, "attn.k.bias", 1, C, 1, TT_SPLIT_ROWS, cl0, m->Cl);
    b->v_w = add_part(m, layer, "attn.v.weight", 2, C, C, TT_SPLIT_ROWS, cl0, m->Cl);
    b->v_b = add_part(m, layer, "attn.v.bias", 1, C, 1, TT_SPLIT_ROWS, cl0, m->Cl);
    b->proj_w = add_part(m, layer, "attn.proj.weight", 2, C, C, TT_SPLIT_COLS, cl0, m->Cl);
    b->proj_b = add_part(m, layer, "attn.proj.bias", 1, C, 1, TT_SPLIT_NONE, 0, 0);
    b->ln2_w = add_part(m, layer, "ln2.weight", 1, C, 1, TT_SPLIT_NONE, 0, 0);
    b->ln2_b = add_part(m, layer, "ln2.bias", 1, C, 1, TT_SPLIT_NONE, 0, 0);
    b->fc1_w = add_part(m, layer, "mlp.fc1.weight", 2, H, C, TT_SPLIT_ROWS, hl0, m->Hl);
    b->fc1_b = add_part(m, layer, "mlp.fc1.bias", 1, H, 1, TT_SPLIT_ROWS, hl0, m->Hl);
    b->fc2_w = add_part(m, layer, "mlp.fc2.weight", 2, C, H, TT_SPLIT_COLS, hl0, m->Hl);
    b->fc2_b = add_part(m, layer, "mlp.fc2.bias", 1, C, 1, TT_SPLIT_NONE, 0, 0);
}

/* The local sizes of a shard and its parameter table (not yet allocated). */
static void build_table(tt_model *m, const tt_config *cfg, const tt_shard_spec *sh)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->sh = *sh;
    const int C = cfg->C, T = cfg->T, tp = sh->tp_size;
    m->Vp = (cfg->V + tp - 1) / tp * tp;
    m->Vl = m->Vp / tp;
    m->v0 = sh->tp_rank * m->Vl;
    m->NHl = cfg->NH / tp;
    m->Cl = m->NHl * (C / cfg->NH);
    m->Hl = 4 * C / tp;
    m->tok_emb = m->pos_emb = m->ln_f_w = m->ln_f_b = m->lm_head = -1;

    if (sh->first_stage) {
        m->tok_emb = add(m, "tok_emb.weight", 2, cfg->V, C, TT_SPLIT_ROWS, m->v0, m->Vl);
        m->pos_emb = add(m, "pos_emb.weight", 2, T, C, TT_SPLIT_NONE, 0, 0);
    }
    /* The chunks' blocks, in global layer order. */
    m->nchunks = sh->nchunks > 1 ? sh->nchunks : 1;
    int nl = 0;
    for (int j = 0; j < m->nchunks; j++) {
        int b = sh->nchunks > 1 ? sh->chunk_begin[j] : sh->layer_begin;
        int e = sh->nchunks > 1 ? sh->chunk_end[j] : sh->layer_end;
        m->chunk_first[j] = nl;
        m->chunk_len[j] = e - b;
        nl += e - b;
    }
    m->nl = nl;
    m->blk = tt_calloc((size_t)(nl > 0 ? nl : 1), sizeof *m->blk);
    for (int j = 0; j < m->nchunks; j++) {
        int b = sh->nchunks > 1 ? sh->chunk_begin[j] : sh->layer_begin;
        for (int l = 0; l < m->chunk_len[j]; l++)
            add_block(m, b + l, &m->blk[m->chunk_first[j] + l]);
    }
    if (sh->last_stage) {
        m->ln_f_w = add(m, "ln_f.weight", 1, C, 1, TT_SPLIT_NONE, 0, 0);
        m->ln_f_b = add(m, "ln_f.bias", 1, C, 1, TT_SPLIT_NONE, 0, 0);
        m->lm_head = add(m, "lm_head.weight", 2, cfg->V, C, TT_SPLIT_ROWS, m->v0, m->Vl);
    }
}

void tt_model_shard_table(tt_params *P, const tt_config *cfg, const tt_shard_spec *sh)
{
    tt_model m;
    build_table(&m, cfg, sh);
    tt_params_set_zero(&m.P, sh->zero_stage, sh->dp_size, sh->dp_rank); /* offsets, partition */
    *P = m.P;
    free(m.blk);
}

void tt_model_init(tt_model *m, const tt_config *cfg, const tt_shard_spec *sh, int Bmax,
                   uint64_t seed)
{
    build_table(m, cfg, sh);
    m->tracked = tt_mem_is_tracking();
    tt_params_set_zero(&m->P, sh->zero_stage, sh->dp_size, sh->dp_rank);
    tt_params_alloc(&m->P);
    tt_params_init(&m->P, seed, cfg->L);
    m->nb_max = 1; /* a slot's room for blocks (slots.c): at least one */
    for (int j = 0; j < m->nchunks; j++)
        m->nb_max = m->chunk_len[j] > m->nb_max ? m->chunk_len[j] : m->nb_max;
    /* Activations come per slot (tt_slot_acquire); the gradient scratch is
     * shared by all slots, sized for Bmax sequences. */
    m->Bmax = Bmax;
    if (Bmax == 0)
        return;
    /* The errors (activation gradients) of one backward at a time. */
    m->err_bytes = tt_bufs_alloc(m, m, TT_BUFS_SCRATCH, 0, NULL);
    if (m->tracked)
        tt_mem_account(TT_MEM_ERRORS, m->err_bytes, "activation gradients (errors)");
    /* Recomputation: one block's worth of what the slots no longer keep,
     * shared by every slot and rebuilt in each block's backward. */
    m->work_bytes = tt_bufs_alloc(m, &m->work, TT_BUFS_WORK, 0, NULL);
    if (m->tracked && m->work_bytes)
        tt_mem_account(TT_MEM_ACTIVATIONS, m->work_bytes,
                       "one block's activations, rebuilt by recomputation");
}

void tt_model_free(tt_model *m)
{
    tt_slots_free(m);
    tt_bufs_free(m, m, TT_BUFS_SCRATCH);
    tt_bufs_free(m, &m->work, TT_BUFS_WORK);
    if (m->tracked && m->work_bytes)
        tt_mem_release(TT_MEM_ACTIVATIONS, m->work_bytes);
    if (m->tracked && m->err_bytes)
        tt_mem_release(TT_MEM_ERRORS, m->err_bytes);
    free(m->blk);
    tt_params_free(&m->P);
    memset(m, 0, sizeof *m);
}

int tt_model_rows(const tt_model *m, int B)
{
    const int N = B * m->cfg.T;
    return m->sh.sp && m->sh.tp_size > 1 ? N / m->sh.tp_size : N;
}

double tt_model_flops(const tt_config *cfg, int B)
{
    /* Per token, forward: 24 C^2 per block for the six matrix products (q, k,
     * v, proj: 4 C^2 multiply-adds; fc1, fc2: 8 C^2), 4 T C for Q K^T and P V
     * counted over the full T x T square (PaLM's convention, although the
     * causal half is what is computed), and 2 C V for lm_head. Backward = 2x. */
    double C = cfg->C, T = cfg->T, L = cfg->L, V = cfg->V;
    double fwd = L * (24.0 * C * C + 4.0 * T * C) + 2.0 * C * V;
    return 3.0 * fwd * (double)B * T;
}

double tt_model_recompute_flops(const tt_config *cfg, int B, int recompute)
{
    double C = cfg->C, T = cfg->T, L = cfg->L, attn = 4.0 * T * C;
    double per_token = recompute == TT_RECOMPUTE_FULL        ? L * (24.0 * C * C + attn)
                       : recompute == TT_RECOMPUTE_SELECTIVE ? L * attn
                                                             : 0.0;
    return per_token * (double)B * T;
}
