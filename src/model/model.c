/* model.c - the GPT's parameter table, activations, and the forward and
 * backward of one stage on one virtual GPU, composed from the kernel pairs.
 *
 * The table is built from the shard spec, so a tensor-parallel rank holds only
 * its slice (heads for q/k/v, input columns for proj/fc2, vocabulary rows for
 * tok_emb/lm_head); every size below is the local one (Cl, Hl, Vl). */
#include "tt/model/model.h"
#include "tt/core/common.h"
#include "tt/core/faults.h"
#include "tt/core/kernels.h"
#include "tt/core/memory.h"
#include "tt/comm/tensor_parallel.h"

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

static int add(tt_model *m, const char *fmt, int layer, const char *part, int ndim,
               int rows, int cols, tt_split split, int offset, int local)
{
    char name[TT_NAME_MAX];
    if (layer >= 0)
        snprintf(name, sizeof name, fmt, layer, part);
    else
        snprintf(name, sizeof name, "%s", fmt);
    return tt_params_add(&m->P, name, ndim, rows, cols, split, offset, local);
}

/* Registers one block's tensors with their TP slices (DESIGN section 4). */
static void add_block(tt_model *m, int layer, tt_block_idx *b)
{
    const int C = m->cfg.C, H = 4 * C, r = m->sh.tp_rank;
    const int cl0 = r * m->Cl, hl0 = r * m->Hl;
    const char *f = "blocks.%d.%s";
    b->ln1_w = add(m, f, layer, "ln1.weight", 1, C, 1, TT_SPLIT_NONE, 0, 0);
    b->ln1_b = add(m, f, layer, "ln1.bias", 1, C, 1, TT_SPLIT_NONE, 0, 0);
    b->q_w = add(m, f, layer, "attn.q.weight", 2, C, C, TT_SPLIT_ROWS, cl0, m->Cl);
    b->q_b = add(m, f, layer, "attn.q.bias", 1, C, 1, TT_SPLIT_ROWS, cl0, m->Cl);
    b->k_w = add(m, f, layer, "attn.k.weight", 2, C, C, TT_SPLIT_ROWS, cl0, m->Cl);
    b->k_b = add(m, f, layer, "attn.k.bias", 1, C, 1, TT_SPLIT_ROWS, cl0, m->Cl);
    b->v_w = add(m, f, layer, "attn.v.weight", 2, C, C, TT_SPLIT_ROWS, cl0, m->Cl);
    b->v_b = add(m, f, layer, "attn.v.bias", 1, C, 1, TT_SPLIT_ROWS, cl0, m->Cl);
    b->proj_w = add(m, f, layer, "attn.proj.weight", 2, C, C, TT_SPLIT_COLS, cl0, m->Cl);
    b->proj_b = add(m, f, layer, "attn.proj.bias", 1, C, 1, TT_SPLIT_NONE, 0, 0);
    b->ln2_w = add(m, f, layer, "ln2.weight", 1, C, 1, TT_SPLIT_NONE, 0, 0);
    b->ln2_b = add(m, f, layer, "ln2.bias", 1, C, 1, TT_SPLIT_NONE, 0, 0);
    b->fc1_w = add(m, f, layer, "mlp.fc1.weight", 2, H, C, TT_SPLIT_ROWS, hl0, m->Hl);
    b->fc1_b = add(m, f, layer, "mlp.fc1.bias", 1, H, 1, TT_SPLIT_ROWS, hl0, m->Hl);
    b->fc2_w = add(m, f, layer, "mlp.fc2.weight", 2, C, H, TT_SPLIT_COLS, hl0, m->Hl);
    b->fc2_b = add(m, f, layer, "mlp.fc2.bias", 1, C, 1, TT_SPLIT_NONE, 0, 0);
}

static float *fbuf(size_t n) { return tt_calloc(n, sizeof(float)); }

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
        m->tok_emb = add(m, "tok_emb.weight", -1, NULL, 2, cfg->V, C, TT_SPLIT_ROWS, m->v0, m->Vl);
        m->pos_emb = add(m, "pos_emb.weight", -1, NULL, 2, T, C, TT_SPLIT_NONE, 0, 0);
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
        m->ln_f_w = add(m, "ln_f.weight", -1, NULL, 1, C, 1, TT_SPLIT_NONE, 0, 0);
        m->ln_f_b = add(m, "ln_f.bias", -1, NULL, 1, C, 1, TT_SPLIT_NONE, 0, 0);
        m->lm_head = add(m, "lm_head.weight", -1, NULL, 2, cfg->V, C, TT_SPLIT_ROWS, m->v0, m->Vl);
    }
}

void tt_model_shard_table(tt_params *P, const tt_config *cfg, const tt_shard_spec *sh)
{
    tt_model m;
    build_table(&m, cfg, sh);
    *P = m.P;
    free(m.blk);
}

void tt_model_init(tt_model *m, const tt_config *cfg, const tt_shard_spec *sh, int Bmax,
                   uint64_t seed)
{
    build_table(m, cfg, sh);
    m->tracked = tt_mem_is_tracking();
    tt_params_alloc(&m->P);
    tt_params_init(&m->P, seed, cfg->L);
    /* Activations come per slot (tt_slot_acquire); the gradient scratch is
     * shared by all slots, sized for Bmax sequences. */
    m->Bmax = Bmax;
    if (Bmax == 0)
        return;
    const size_t N = (size_t)Bmax * cfg->T;
    const int C = cfg->C, Cl = m->Cl, Hl = m->Hl;
    size_t wide = (size_t)(C > Hl ? C : Hl);
    if ((size_t)m->Vl > wide)
        wide = (size_t)m->Vl;
    size_t floats = 0;
#define ERR_BUF(ptr, n) (floats += (n), (ptr) = fbuf(n))
    ERR_BUF(m->dres, N * C);
    ERR_BUF(m->dln, N * C);
    ERR_BUF(m->dtmp, N * wide);
    ERR_BUF(m->dq, N * Cl);
    ERR_BUF(m->dk, N * Cl);
    ERR_BUF(m->dv, N * Cl);
    ERR_BUF(m->datty, N * Cl);
    ERR_BUF(m->dfc1, N * Hl);
    if (sh->mlp_gather && sh->tp_size > 1) {
        ERR_BUF(m->dfull, (size_t)sh->tp_size * N * Hl);
        ERR_BUF(m->dfull2, (size_t)sh->tp_size * N * Hl);
    }
    ERR_BUF(m->datt_scratch, (size_t)cfg->T * cfg->T);
#undef ERR_BUF
    /* The errors (activation gradients) of one backward at a time. */
    m->err_bytes = floats * sizeof(float);
    if (m->tracked)
        tt_mem_account(TT_MEM_ERRORS, m->err_bytes, "activation gradients (errors)");
}

/* Does local chunk j start with the embeddings / end with the loss? */
static int has_embedding(const tt_model *m, int j) { return m->sh.first_stage && j == 0; }
static int has_head(const tt_model *m, int j) { return m->sh.last_stage && j == m->nchunks - 1; }

/* Allocates one slot for local chunk j, sized for Bmax sequences. */
static tt_slot *slot_new(tt_model *m, int j)
{
    const size_t N = (size_t)m->Bmax * m->cfg.T;
    const int C = m->cfg.C, T = m->cfg.T, Cl = m->Cl, Hl = m->Hl, nb = m->chunk_len[j];
    const size_t full = (size_t)m->sh.tp_size * N * Hl;
    const int gather = m->sh.mlp_gather && m->sh.tp_size > 1;
    tt_slot *s = tt_calloc(1, sizeof *s);
    s->chunk = j;
    s->acts = tt_calloc((size_t)(nb > 0 ? nb : 1), sizeof *s->acts);
    size_t floats = 0;
#define SLOT_BUF(ptr, n) (floats += (n), (ptr) = fbuf(n))
    for (int l = 0; l < nb; l++) {
        tt_block_acts *a = &s->acts[l];
        SLOT_BUF(a->x_in, N * C);
        SLOT_BUF(a->ln1, N * C);
        SLOT_BUF(a->ln1_mean, N);
        SLOT_BUF(a->ln1_rstd, N);
        SLOT_BUF(a->q, N * Cl);
        SLOT_BUF(a->k, N * Cl);
        SLOT_BUF(a->v, N * Cl);
        SLOT_BUF(a->att, (size_t)m->Bmax * m->NHl * T * T);
        SLOT_BUF(a->atty, N * Cl);
        SLOT_BUF(a->x_mid, N * C);
        SLOT_BUF(a->ln2, N * C);
        SLOT_BUF(a->ln2_mean, N);
        SLOT_BUF(a->ln2_rstd, N);
        SLOT_BUF(a->fc1, N * Hl);
        SLOT_BUF(a->gelu, N * Hl);
        if (gather) {
            SLOT_BUF(a->fc1_full, full);
            SLOT_BUF(a->gelu_full, full);
        }
    }
    SLOT_BUF(s->x_out, N * C);
    if (has_head(m, j)) {
        SLOT_BUF(s->lnf, N * C);
        SLOT_BUF(s->lnf_mean, N);
        SLOT_BUF(s->lnf_rstd, N);
        SLOT_BUF(s->logits, N * m->Vl);
        SLOT_BUF(s->probs, N * m->Vl);
        SLOT_BUF(s->losses, N);
    }
#undef SLOT_BUF
    s->idx = tt_calloc(N, sizeof(int));
    s->targets = tt_calloc(N, sizeof(int));
    s->bytes = floats * sizeof(float) + 2 * N * sizeof(int);
    if (m->tracked)
        tt_mem_account(TT_MEM_ACTIVATIONS, s->bytes, "the activations of one more micro-batch");
    return s;
}

static void slot_free(tt_model *m, tt_slot *s)
{
    if (m->tracked)
        tt_mem_release(TT_MEM_ACTIVATIONS, s->bytes);
    for (int l = 0; l < m->chunk_len[s->chunk]; l++) {
        tt_block_acts *a = &s->acts[l];
        float *bufs[] = {a->x_in, a->ln1, a->ln1_mean, a->ln1_rstd, a->q, a->k, a->v, a->att,
                         a->atty, a->x_mid, a->ln2, a->ln2_mean, a->ln2_rstd, a->fc1, a->gelu,
                         a->fc1_full, a->gelu_full};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            free(bufs[i]);
    }
    float *bufs[] = {s->x_out, s->lnf, s->lnf_mean, s->lnf_rstd, s->logits, s->probs, s->losses};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(s->acts);
    free(s->idx);
    free(s->targets);
    free(s);
}

tt_slot *tt_slot_acquire(tt_model *m, int j, int B)
{
    tt_slot *s = NULL;
    for (int i = 0; i < m->nslots && !s; i++)
        if (!m->slots[i]->in_use && m->slots[i]->chunk == j)
            s = m->slots[i];
    if (!s) {
        if (m->nslots == m->slots_cap) {
            m->slots_cap = m->slots_cap ? 2 * m->slots_cap : 8;
            tt_slot **n = tt_malloc((size_t)m->slots_cap * sizeof *n);
            if (m->nslots)
                memcpy(n, m->slots, (size_t)m->nslots * sizeof *n);
            free(m->slots);
            m->slots = n;
        }
        s = m->slots[m->nslots++] = slot_new(m, j);
    }
    s->in_use = 1;
    s->B = B;
    if (++m->slots_in_use > m->slots_peak)
        m->slots_peak = m->slots_in_use;
    return s;
}

void tt_slot_reserve(tt_model *m, int j, int n)
{
    /* Hold n slots of the chunk at once (allocating what is missing), then
     * give them all back. */
    tt_slot **tmp = tt_malloc((size_t)(n > 0 ? n : 1) * sizeof *tmp);
    for (int i = 0; i < n; i++)
        tmp[i] = tt_slot_acquire(m, j, m->Bmax);
    for (int i = 0; i < n; i++)
        tt_slot_release(m, tmp[i]);
    free(tmp);
}

void tt_slot_release(tt_model *m, tt_slot *s)
{
    if (s && s->in_use) {
        s->in_use = 0;
        m->slots_in_use--;
    }
}

void tt_model_free(tt_model *m)
{
    for (int i = 0; i < m->nslots; i++)
        slot_free(m, m->slots[i]);
    free(m->slots);
    float *bufs[] = {m->dres, m->dln, m->dtmp, m->dq, m->dk, m->dv, m->datty, m->dfc1, m->dfull,
                     m->dfull2, m->datt_scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    if (m->tracked && m->err_bytes)
        tt_mem_release(TT_MEM_ERRORS, m->err_bytes);
    free(m->blk);
    tt_params_free(&m->P);
    memset(m, 0, sizeof *m);
}

#define W(i) (m->P.t[(i)].w)
#define G(i) (m->P.t[(i)].g)

/* One block forward: x_out = block(a->x_in). With tensor parallelism q, k,
 * v and fc1 are column-parallel (this rank's heads and MLP columns), proj and
 * fc2 row-parallel; the copy operators in front of the column-parallel layers
 * are identities forward, the reduce after each row-parallel layer is one
 * all-reduce: two per block. */
static void block_forward(tt_model *m, tt_slot *s, int i, float *x_out /* N,C */)
{
    const tt_block_idx *b = &m->blk[m->chunk_first[s->chunk] + i];
    tt_block_acts *a = &s->acts[i];
    const tt_grid *g = m->grid;
    const int B = s->B, T = m->cfg.T, C = m->cfg.C, N = B * T;
    const int Cl = m->Cl, Hl = m->Hl, hs = C / m->cfg.NH;
    float *tmp = m->dtmp; /* N,C scratch: the forward borrows a gradient buffer */

    layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, a->x_in, W(b->ln1_w), W(b->ln1_b), N, C);
    /* q, k and v are column-parallel layers reading the same input: one
     * copy operator in front of all three (one all-reduce in backward). */
    tp_copy_forward(g, a->ln1, N * C);
    linear_forward(a->q, a->ln1, W(b->q_w), W(b->q_b), N, C, Cl);
    linear_forward(a->k, a->ln1, W(b->k_w), W(b->k_b), N, C, Cl);
    linear_forward(a->v, a->ln1, W(b->v_w), W(b->v_b), N, C, Cl);
    attention_forward(a->atty, a->att, a->q, a->k, a->v, B, T, m->NHl, hs);
    row_linear_forward(g, tmp, a->atty, W(b->proj_w), W(b->proj_b), N, Cl, C);
    residual_forward(a->x_mid, a->x_in, tmp, N * C);

    layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->x_mid, W(b->ln2_w), W(b->ln2_b), N, C);
    column_linear_forward(g, a->fc1, a->ln2, W(b->fc1_w), W(b->fc1_b), N, C, Hl);
    const float *fc2_in = a->gelu;
    if (a->fc1_full) {
        /* --tp-mlp gather: every rank gathers the whole fc1 output (rank-major
         * blocks) and applies GELU to all of it; fc2 then reads its block. */
        tp_gather_forward(g, a->fc1_full, a->fc1, N * Hl);
        gelu_forward(a->gelu_full, a->fc1_full, m->sh.tp_size * N * Hl);
        fc2_in = a->gelu_full + (size_t)m->sh.tp_rank * N * Hl;
    } else {
        gelu_forward(a->gelu, a->fc1, N * Hl);
    }
    row_linear_forward(g, tmp, fc2_in, W(b->fc2_w), W(b->fc2_b), N, Hl, C);
    residual_forward(x_out, a->x_mid, tmp, N * C);
}

/* One block backward: on entry m->dres is d loss / d block output; on exit it
 * is d loss / d block input (the residual path carries it through). The
 * all-reduces are the copy operators' backward, one per column-parallel
 * group (q, k, v together; fc1): two per block. */
static void block_backward(tt_model *m, tt_slot *s, int i)
{
    const tt_block_idx *b = &m->blk[m->chunk_first[s->chunk] + i];
    tt_block_acts *a = &s->acts[i];
    const tt_grid *g = m->grid;
    const int B = s->B, T = m->cfg.T, C = m->cfg.C, N = B * T;
    const int Cl = m->Cl, Hl = m->Hl, hs = C / m->cfg.NH;
    float *dres = m->dres, *dtmp = m->dtmp;

    /* MLP branch: out = x_mid + fc2(gelu(fc1(ln2(x_mid)))) + fc2.bias */
    float *dgelu = dtmp; /* N,Hl */
    memset(dgelu, 0, (size_t)N * Hl * sizeof(float));
    if (a->fc1_full) {
        const size_t full = (size_t)m->sh.tp_size * N * Hl, mine = (size_t)m->sh.tp_rank * N * Hl;
        row_linear_backward(g, dgelu, G(b->fc2_w), G(b->fc2_b), dres, a->gelu_full + mine,
                            W(b->fc2_w), N, Hl, C);
        /* Only this rank's block of the gathered activation fed its fc2; the
         * gather's backward (reduce-scatter) sums every rank's gradient of
         * the whole activation and hands each rank its block. */
        memset(m->dfull, 0, full * sizeof(float));
        memcpy(m->dfull + mine, dgelu, (size_t)N * Hl * sizeof(float));
        memset(m->dfull2, 0, full * sizeof(float));
        gelu_backward(m->dfull2, a->fc1_full, m->dfull, (int)full);
        tp_gather_backward(g, m->dfc1, m->dfull2, N * Hl);
    } else {
        row_linear_backward(g, dgelu, G(b->fc2_w), G(b->fc2_b), dres, a->gelu, W(b->fc2_w), N, Hl, C);
        memset(m->dfc1, 0, (size_t)N * Hl * sizeof(float));
        gelu_backward(m->dfc1, a->fc1, dgelu, N * Hl);
    }
    column_linear_backward(g, dtmp, G(b->fc1_w), G(b->fc1_b), m->dfc1, a->ln2, W(b->fc1_w), N, C,
                           Hl);
    layernorm_backward(dres, G(b->ln2_w), G(b->ln2_b), dtmp, a->x_mid, W(b->ln2_w),
                       a->ln2_mean, a->ln2_rstd, N, C);

    /* Attention branch: x_mid = x_in + proj(attention(q, k, v)) + proj.bias */
    memset(m->datty, 0, (size_t)N * Cl * sizeof(float));
    row_linear_backward(g, m->datty, G(b->proj_w), G(b->proj_b), dres, a->atty, W(b->proj_w), N, Cl,
                        C);
    memset(m->dq, 0, (size_t)N * Cl * sizeof(float));
    memset(m->dk, 0, (size_t)N * Cl * sizeof(float));
    memset(m->dv, 0, (size_t)N * Cl * sizeof(float));
    attention_backward(m->dq, m->dk, m->dv, m->datt_scratch, m->datty, a->q, a->k, a->v,
                       a->att, B, T, m->NHl, hs);
    memset(dtmp, 0, (size_t)N * C * sizeof(float));
    linear_backward(dtmp, G(b->q_w), G(b->q_b), m->dq, a->ln1, W(b->q_w), N, C, Cl);
    /* The key bias gets no gradient: it is exactly zero, because a bias added
     * to every key adds the same q.b to a whole row of scores, which softmax
     * ignores. Summed in float it would be rounding noise (~1e-11) that Adam
     * turns into steps of lr * noise / eps, different in every layout. */
    linear_backward(dtmp, G(b->k_w), NULL, m->dk, a->ln1, W(b->k_w), N, C, Cl);
    linear_backward(dtmp, G(b->v_w), G(b->v_b), m->dv, a->ln1, W(b->v_w), N, C, Cl);
    if (!tt_fault_active(TT_FAULT_DROP_TP_ALLREDUCE)) /* a planted fault (--inject-bug) */
        tp_copy_backward(g, dtmp, N * C); /* the shared copy of q, k and v: one all-reduce */
    layernorm_backward(dres, G(b->ln1_w), G(b->ln1_b), dtmp, a->x_in, W(b->ln1_w),
                       a->ln1_mean, a->ln1_rstd, N, C);
}

double tt_chunk_forward(tt_model *m, tt_slot *s, const int *idx, const int *targets)
{
    const int B = s->B, T = m->cfg.T, C = m->cfg.C, N = B * T, j = s->chunk;
    const int nb = m->chunk_len[j];
    float *x = nb > 0 ? s->acts[0].x_in : s->x_out;
    if (has_embedding(m, j)) {
        memcpy(s->idx, idx, (size_t)N * sizeof(int));
        vocab_embedding_forward(m->grid, x, s->idx, W(m->tok_emb), N, C, m->v0, m->Vl);
        posemb_forward(x, W(m->pos_emb), B, T, C); /* replicated: after the sum */
    }
    for (int i = 0; i < nb; i++)
        block_forward(m, s, i, i + 1 < nb ? s->acts[i + 1].x_in : s->x_out);

    if (!has_head(m, j))
        return 0.0;
    layernorm_forward(s->lnf, s->lnf_mean, s->lnf_rstd, s->x_out, W(m->ln_f_w), W(m->ln_f_b),
                      N, C);
    column_linear_forward(m->grid, s->logits, s->lnf, W(m->lm_head), NULL, N, C, m->Vl);
    if (!targets)
        return 0.0;
    memcpy(s->targets, targets, (size_t)N * sizeof(int));
    if (m->sh.tp_size > 1)
        vocab_crossentropy_forward(m->grid, s->losses, s->probs, s->logits, s->targets, N, m->Vl,
                                   m->v0, m->cfg.V);
    else
        crossentropy_forward(s->losses, s->probs, s->logits, s->targets, N, m->Vl, m->cfg.V);
    double sum = 0.0;
    for (int n = 0; n < N; n++)
        sum += s->losses[n];
    return sum / N;
}

void tt_chunk_backward(tt_model *m, tt_slot *s, const float *dout, float dloss)
{
    const int B = s->B, T = m->cfg.T, C = m->cfg.C, N = B * T, j = s->chunk;
    if (has_head(m, j)) {
        float *dlogits = m->dtmp; /* N,Vl */
        memset(dlogits, 0, (size_t)N * m->Vl * sizeof(float));
        if (m->sh.tp_size > 1)
            vocab_crossentropy_backward(dlogits, s->probs, s->targets, dloss, N, m->Vl, m->v0,
                                        m->cfg.V);
        else
            crossentropy_backward(dlogits, s->probs, s->targets, dloss, N, m->Vl, m->cfg.V);
        column_linear_backward(m->grid, m->dln, G(m->lm_head), NULL, dlogits, s->lnf,
                               W(m->lm_head), N, C, m->Vl);
        memset(m->dres, 0, (size_t)N * C * sizeof(float));
        layernorm_backward(m->dres, G(m->ln_f_w), G(m->ln_f_b), m->dln, s->x_out, W(m->ln_f_w),
                           s->lnf_mean, s->lnf_rstd, N, C);
    } else {
        memcpy(m->dres, dout, (size_t)N * C * sizeof(float));
    }
    for (int i = m->chunk_len[j] - 1; i >= 0; i--)
        block_backward(m, s, i);
    if (has_embedding(m, j)) {
        posemb_backward(G(m->pos_emb), m->dres, B, T, C);
        embedding_backward(G(m->tok_emb), m->dres, s->idx, N, C, m->v0, m->Vl);
    }
}

double tt_model_forward(tt_model *m, const int *idx, const int *targets, int B)
{
    /* One slot, reused: the whole model is local chunk 0. */
    if (!m->cur)
        m->cur = tt_slot_acquire(m, 0, B);
    m->cur->B = B;
    double loss = tt_chunk_forward(m, m->cur, idx, targets);
    m->logits = m->cur->logits;
    return loss;
}

void tt_model_backward(tt_model *m, float dloss)
{
    tt_chunk_backward(m, m->cur, NULL, dloss);
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
