/* forward.c - the forward and backward of a chunk of the GPT on one virtual
 * GPU, composed from the kernel pairs and the tensor-parallel operators:
 * block_forward / block_backward side by side, then the chunk (embeddings,
 * blocks, head and loss) and the whole model on one GPU. A block under
 * sequence parallelism runs in block_sp.c. */
#include "tt/model/model.h"
#include "model/model_internal.h"
#include "tt/comm/tensor_parallel.h"
#include "tt/core/faults.h"
#include "tt/core/kcost.h"
#include "tt/core/kernels.h"
#include "tt/core/vclock.h"

#include <assert.h>
#include <string.h>

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

    if (m->sp_full) {
        tt_block_forward_sp(m, s, i, x_out);
        return;
    }
    layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, a->x_in, W(b->ln1_w), W(b->ln1_b), N, C);
    /* q, k and v are column-parallel layers reading the same input: one
     * copy operator in front of all three (one all-reduce in backward). */
    tp_copy_forward(g, a->ln1, N * C);
    linear_forward(a->q, a->ln1, W(b->q_w), W(b->q_b), N, C, Cl);
    linear_forward(a->k, a->ln1, W(b->k_w), W(b->k_b), N, C, Cl);
    linear_forward(a->v, a->ln1, W(b->v_w), W(b->v_b), N, C, Cl);
    attention_forward(a->atty, a->att, a->q, a->k, a->v, B, T, m->NHl, hs);
    row_linear_residual_forward(g, a->x_mid, a->x_in, tmp, a->atty, W(b->proj_w), W(b->proj_b),
                                N, Cl, C);

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
    row_linear_residual_forward(g, x_out, a->x_mid, tmp, fc2_in, W(b->fc2_w), W(b->fc2_b), N, Hl,
                                C);
}

/* One block backward: on entry m->dres is d loss / d block output; on exit it
 * is d loss / d block input (the residual path carries it through). The
 * all-reduces are the copy operators' backward, one per column-parallel
 * group (q, k, v together; fc1): two per block.
 *
 * split (zero-bubble schedules): this is B only. The linears get NULL for
 * their weight and bias gradients (linear_backward computes the input and
 * the weight gradients as independent products, so leaving one out changes
 * no bit of the other) and their output gradients are copied into the slot
 * for block_weights, W; so are the LayerNorms' (their kernel yields the input
 * and the gain gradients in one pass, at O(N C): B sends the gains' to a
 * sink and W runs it again for them). All of a block's weight gradients are
 * then made in its W, one unit at a time, as ZeRO-2's shared gradient
 * scratch needs. */
static void block_backward(tt_model *m, tt_slot *s, int i, int split)
{
    const tt_block_idx *b = &m->blk[m->chunk_first[s->chunk] + i];
    tt_block_acts *a = &s->acts[i];
    const tt_grid *g = m->grid;
    const int B = s->B, T = m->cfg.T, C = m->cfg.C, N = B * T;
    const int Cl = m->Cl, Hl = m->Hl, hs = C / m->cfg.NH;
    float *dres = m->dres, *dtmp = m->dtmp;
    /* A linear's weight (or bias) gradient: now, or in W (NULL). */
#define GW(t) (split ? NULL : G(t))
    /* The LayerNorm kernel computes its gains' gradients with the input's:
     * in B they go to a sink of 2C floats, W computes them again. The sink
     * is written and never read nor zeroed: what it holds is meaningless. */
#define LNW(t) (split ? m->ln_sink : G(t))
#define KEEP(dst, src, n) (split ? (void)memcpy((dst), (src), (size_t)(n) * sizeof(float)) : (void)0)

    /* The SP backward is never split: src/parallel/pipeline_rules.c refuses
     * the zero-bubble schedules with --sequence-parallel (its inputs are
     * gathered over TP only inside the fused backward). */
    if (m->sp_full) {
        assert(!split);
        tt_block_backward_sp(m, s, i);
        return;
    }
    /* MLP branch: out = x_mid + fc2(gelu(fc1(ln2(x_mid)))) + fc2.bias */
    KEEP(a->dfc2, dres, N * C);
    float *dgelu = dtmp; /* N,Hl */
    memset(dgelu, 0, (size_t)N * Hl * sizeof(float));
    if (a->fc1_full) {
        const size_t full = (size_t)m->sh.tp_size * N * Hl, mine = (size_t)m->sh.tp_rank * N * Hl;
        row_linear_backward(g, dgelu, GW(b->fc2_w), GW(b->fc2_b), dres, a->gelu_full + mine,
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
        row_linear_backward(g, dgelu, GW(b->fc2_w), GW(b->fc2_b), dres, a->gelu, W(b->fc2_w), N,
                            Hl, C);
        memset(m->dfc1, 0, (size_t)N * Hl * sizeof(float));
        gelu_backward(m->dfc1, a->fc1, dgelu, N * Hl);
    }
    KEEP(a->dfc1, m->dfc1, N * Hl);
    column_linear_backward(g, dtmp, GW(b->fc1_w), GW(b->fc1_b), m->dfc1, a->ln2, W(b->fc1_w), N,
                           C, Hl);
    KEEP(a->dln2, dtmp, N * C);
    layernorm_backward(dres, LNW(b->ln2_w), LNW(b->ln2_b) + (split ? C : 0), dtmp, a->x_mid,
                       W(b->ln2_w), a->ln2_mean, a->ln2_rstd, N, C);

    /* Attention branch: x_mid = x_in + proj(attention(q, k, v)) + proj.bias */
    KEEP(a->dproj, dres, N * C);
    memset(m->datty, 0, (size_t)N * Cl * sizeof(float));
    row_linear_backward(g, m->datty, GW(b->proj_w), GW(b->proj_b), dres, a->atty, W(b->proj_w),
                        N, Cl, C);
    memset(m->dq, 0, (size_t)N * Cl * sizeof(float));
    memset(m->dk, 0, (size_t)N * Cl * sizeof(float));
    memset(m->dv, 0, (size_t)N * Cl * sizeof(float));
    attention_backward(m->dq, m->dk, m->dv, m->datt_scratch, m->datty, a->q, a->k, a->v,
                       a->att, B, T, m->NHl, hs);
    KEEP(a->dq, m->dq, N * Cl);
    KEEP(a->dk, m->dk, N * Cl);
    KEEP(a->dv, m->dv, N * Cl);
    /* The shared copy of q, k and v: their input gradients summed here,
     * then one all-reduce (made where the sum reads it, unless a planted
     * fault (--inject-bug) drops the sum). */
    const int drop = tt_fault_active(TT_FAULT_DROP_TP_ALLREDUCE);
    float *dln1 = drop ? dtmp : tp_sum_space(g, dtmp, N * C);
    memset(dln1, 0, (size_t)N * C * sizeof(float));
    linear_backward(dln1, GW(b->q_w), GW(b->q_b), m->dq, a->ln1, W(b->q_w), N, C, Cl);
    /* The key bias gets no gradient: it is exactly zero, because a bias added
     * to every key adds the same q.b to a whole row of scores, which softmax
     * ignores. Summed in float it would be rounding noise (~1e-11) that Adam
     * turns into steps of lr * noise / eps, different in every layout. */
    linear_backward(dln1, GW(b->k_w), NULL, m->dk, a->ln1, W(b->k_w), N, C, Cl);
    linear_backward(dln1, GW(b->v_w), GW(b->v_b), m->dv, a->ln1, W(b->v_w), N, C, Cl);
    if (!drop)
        tp_copy_backward_to(g, dtmp, dln1, N * C);
    KEEP(a->dln1, dtmp, N * C);
    layernorm_backward(dres, LNW(b->ln1_w), LNW(b->ln1_b) + (split ? C : 0), dtmp, a->x_in,
                       W(b->ln1_w), a->ln1_mean, a->ln1_rstd, N, C);
#undef LNW
#undef KEEP
#undef GW
}

/* W of block i: the weight, bias and gain gradients B left out, from the kept
 * inputs and output gradients, with the calls (and so the sums) the fused
 * backward makes. No communication: the row-parallel biases are replicated
 * and their output gradient is too. */
static void block_weights(tt_model *m, tt_slot *s, int i)
{
    const tt_block_idx *b = &m->blk[m->chunk_first[s->chunk] + i];
    tt_block_acts *a = &s->acts[i];
    const int N = s->B * m->cfg.T, C = m->cfg.C, Cl = m->Cl, Hl = m->Hl;
    const float *fc2_in = a->fc1_full ? a->gelu_full + (size_t)m->sh.tp_rank * N * Hl : a->gelu;
    row_linear_backward(m->grid, NULL, G(b->fc2_w), G(b->fc2_b), a->dfc2, fc2_in, W(b->fc2_w),
                        N, Hl, C);
    linear_backward(NULL, G(b->fc1_w), G(b->fc1_b), a->dfc1, a->ln2, W(b->fc1_w), N, C, Hl);
    row_linear_backward(m->grid, NULL, G(b->proj_w), G(b->proj_b), a->dproj, a->atty,
                        W(b->proj_w), N, Cl, C);
    linear_backward(NULL, G(b->q_w), G(b->q_b), a->dq, a->ln1, W(b->q_w), N, C, Cl);
    linear_backward(NULL, G(b->k_w), NULL, a->dk, a->ln1, W(b->k_w), N, C, Cl);
    linear_backward(NULL, G(b->v_w), G(b->v_b), a->dv, a->ln1, W(b->v_w), N, C, Cl);
    /* The LayerNorms: the input gradient goes to the scratch, unused here. */
    memset(m->dtmp, 0, (size_t)N * C * sizeof(float));
    layernorm_backward(m->dtmp, G(b->ln2_w), G(b->ln2_b), a->dln2, a->x_mid, W(b->ln2_w),
                       a->ln2_mean, a->ln2_rstd, N, C);
    layernorm_backward(m->dtmp, G(b->ln1_w), G(b->ln1_b), a->dln1, a->x_in, W(b->ln1_w),
                       a->ln1_mean, a->ln1_rstd, N, C);
}

/* x[n] += pos_emb[(n0 + n) mod T] for this rank's rows [n0, n0 + Ns) of the
 * micro-batch (posemb_forward's sum, on a block of rows). */
static void posemb_rows(float *x, const float *pos, int n0, int Ns, int T, int C)
{
    for (int n = 0; n < Ns; n++) {
        const float *p = pos + (size_t)((n0 + n) % T) * C;
        float *o = x + (size_t)n * C;
        for (int c = 0; c < C; c++)
            o[c] += p[c];
    }
    const tt_kcost k = tt_kcost_posemb_fwd((double)Ns / T, T, C); /* what the kernel charges */
    tt_vclock_compute(k.flops, 4.0 * k.floats);
}

/* The weights of the unit holding tensor i are about to be read. */
static void weights_needed(tt_model *m, int i)
{
    if (m->weights_needed)
        m->weights_needed(m->weights_needed_ctx, &m->P, i);
}

double tt_chunk_forward(tt_model *m, tt_slot *s, const int *idx, const int *targets)
{
    const int B = s->B, T = m->cfg.T, C = m->cfg.C, N = B * T, j = s->chunk;
    const int nb = m->chunk_len[j];
    float *x = nb > 0 ? s->acts[0].x_in : s->x_out;
    if (tt_has_embedding(m, j)) {
        weights_needed(m, m->tok_emb);
        memcpy(s->idx, idx, (size_t)N * sizeof(int));
        if (m->sp_full) {
            /* Sequence parallelism: the embedding's sum is a reduce-scatter
             * into this rank's rows, which then get their positions. */
            vocab_embedding_sp_forward(m->grid, x, m->sp_full, s->idx, W(m->tok_emb), N, C, m->v0,
                                       m->Vl);
            posemb_rows(x, W(m->pos_emb), tt_model_rows(m, B) * m->sh.tp_rank,
                        tt_model_rows(m, B), T, C);
        } else {
            vocab_embedding_forward(m->grid, x, s->idx, W(m->tok_emb), N, C, m->v0, m->Vl);
            posemb_forward(x, W(m->pos_emb), B, T, C); /* replicated: after the sum */
        }
    }
    for (int i = 0; i < nb; i++) {
        weights_needed(m, m->blk[m->chunk_first[j] + i].ln1_w);
        block_forward(m, s, i, i + 1 < nb ? s->acts[i + 1].x_in : s->x_out);
    }

    if (!tt_has_head(m, j))
        return 0.0;
    weights_needed(m, m->ln_f_w);
    if (m->sp_full) {
        /* ln_f on this rank's rows; lm_head reads them all, gathered. */
        const int Ns = tt_model_rows(m, B);
        layernorm_forward(s->lnf, s->lnf_mean, s->lnf_rstd, s->x_out, W(m->ln_f_w),
                          W(m->ln_f_b), Ns, C);
        tp_sp_gather_forward(m->grid, m->sp_full, s->lnf, Ns * C);
        linear_forward(s->logits, m->sp_full, W(m->lm_head), NULL, N, C, m->Vl);
    } else {
        layernorm_forward(s->lnf, s->lnf_mean, s->lnf_rstd, s->x_out, W(m->ln_f_w),
                          W(m->ln_f_b), N, C);
        column_linear_forward(m->grid, s->logits, s->lnf, W(m->lm_head), NULL, N, C, m->Vl);
    }
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

/* --recompute: rebuilds what block i of slot s did not keep, just before its
 * backward. full: the whole block forward again from its kept input, its TP
 * all-reduces included (the output goes to m->dln, free at this point; the
 * forward's scratch m->dtmp holds nothing between block backwards); selective:
 * the attention probabilities from the kept q and k (the output to m->datty,
 * which the backward clears before use). Same kernels, same inputs: the
 * same bits as the forward's. */
static void recompute_block(tt_model *m, tt_slot *s, int i)
{
    tt_block_acts *a = &s->acts[i];
    if (i == 0 && tt_fault_active(TT_FAULT_STALE_RECOMPUTE)) /* planted (--inject-bug) */
        return;
    if (m->sh.recompute == TT_RECOMPUTE_FULL)
        block_forward(m, s, i, m->dln);
    else if (m->sh.recompute == TT_RECOMPUTE_SELECTIVE)
        attention_forward(m->datty, a->att, a->q, a->k, a->v, s->B, m->cfg.T, m->NHl,
                          m->cfg.C / m->cfg.NH);
}

/* The unit holding tensor i has its gradient of this backward complete. */
static void grads_ready(tt_model *m, int i)
{
    if (m->grads_ready)
        m->grads_ready(m->grads_ready_ctx, &m->P, i);
}

/* The chunk's backward; split: B only (block_backward's split), the blocks'
 * grads_ready left to W. */
static void chunk_backward(tt_model *m, tt_slot *s, const float *dout, float dloss, int split)
{
    const int B = s->B, T = m->cfg.T, C = m->cfg.C, N = B * T, j = s->chunk;
    if (tt_has_head(m, j)) {
        weights_needed(m, m->ln_f_w);
        float *dlogits = m->dtmp; /* N,Vl */
        memset(dlogits, 0, (size_t)N * m->Vl * sizeof(float));
        if (m->sh.tp_size > 1)
            vocab_crossentropy_backward(dlogits, s->probs, s->targets, dloss, N, m->Vl, m->v0,
                                        m->cfg.V);
        else
            crossentropy_backward(dlogits, s->probs, s->targets, dloss, N, m->Vl, m->cfg.V);
        if (m->sp_full) {
            const int Ns = tt_model_rows(m, B);
            tp_sp_gather_forward(m->grid, m->sp_full, s->lnf, Ns * C); /* lm_head's input again */
            column_linear_sp_backward(m->grid, m->sp_part, m->dln, G(m->lm_head), NULL, dlogits,
                                      m->sp_full, W(m->lm_head), N, C, m->Vl);
            memset(m->dres, 0, (size_t)Ns * C * sizeof(float));
            memset(m->sp_lng, 0, (size_t)2 * C * sizeof(float));
            layernorm_backward(m->dres, m->sp_lng, m->sp_lng + C, m->sp_part, s->x_out,
                               W(m->ln_f_w), s->lnf_mean, s->lnf_rstd, Ns, C);
            const int lnf[2] = {m->ln_f_w, m->ln_f_b};
            tt_sp_ln_grads_done(m, lnf, 2);
        } else {
            column_linear_backward(m->grid, m->dln, G(m->lm_head), NULL, dlogits, s->lnf,
                                   W(m->lm_head), N, C, m->Vl);
            memset(m->dres, 0, (size_t)N * C * sizeof(float));
            layernorm_backward(m->dres, G(m->ln_f_w), G(m->ln_f_b), m->dln, s->x_out,
                               W(m->ln_f_w), s->lnf_mean, s->lnf_rstd, N, C);
        }
        grads_ready(m, m->ln_f_w);
    } else {
        memcpy(m->dres, dout, (size_t)tt_model_rows(m, B) * C * sizeof(float));
    }
    for (int i = m->chunk_len[j] - 1; i >= 0; i--) {
        /* planted (--inject-bug stale-gather): the block's weights are
         * taken to be still gathered from its forward, and the backward
         * reads whatever unit the one gather buffer holds by now */
        if (!tt_fault_active(TT_FAULT_STALE_GATHER))
            weights_needed(m, m->blk[m->chunk_first[j] + i].ln1_w);
        recompute_block(m, s, i);
        block_backward(m, s, i, split);
        if (!split)
            grads_ready(m, m->blk[m->chunk_first[j] + i].ln1_w);
    }
    if (tt_has_embedding(m, j)) {
        /* The embeddings' backward reads no weight, but ZeRO-3 gathers every
         * unit before its backward (the traffic formula counts it so). */
        weights_needed(m, m->tok_emb);
        /* With sequence parallelism the reduce-scatter's backward gathers the
         * whole gradient, so pos_emb's comes from every token here, with no
         * sum over TP of its own. */
        const float *d = m->dres;
        if (m->sp_full) {
            tp_sp_scatter_backward(m->grid, m->sp_full, m->dres, tt_model_rows(m, B) * C);
            d = m->sp_full;
        }
        posemb_backward(G(m->pos_emb), d, B, T, C);
        embedding_backward(G(m->tok_emb), d, s->idx, N, C, m->v0, m->Vl);
        grads_ready(m, m->tok_emb);
    }
}

void tt_chunk_backward(tt_model *m, tt_slot *s, const float *dout, float dloss)
{
    chunk_backward(m, s, dout, dloss, 0);
}

void tt_chunk_backward_input(tt_model *m, tt_slot *s, const float *dout, float dloss)
{
    chunk_backward(m, s, dout, dloss, 1);
}

void tt_chunk_backward_weights(tt_model *m, tt_slot *s)
{
    /* In the fused backward's block order (last first), so each unit is
     * complete in the same order. */
    const int j = s->chunk;
    for (int i = m->chunk_len[j] - 1; i >= 0; i--) {
        block_weights(m, s, i);
        grads_ready(m, m->blk[m->chunk_first[j] + i].ln1_w);
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

