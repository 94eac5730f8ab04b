/* block_sp.c - one block's forward and backward under sequence parallelism
 * (--sequence-parallel with tp > 1): the LayerNorm and residual regions keep
 * this rank's N/tp rows, with an all-gather in front of the column-parallel
 * linears and a reduce-scatter after the row-parallel ones. A pair of its
 * own, apart from forward.c's unsplit block, because every collective and
 * every row count differs; forward.c's block_forward and block_backward
 * hand over to it. */
#include "tt/model/model.h"
#include "model/model_internal.h"
#include "tt/comm/tensor_parallel.h"
#include "tt/core/faults.h"
#include "tt/core/kernels.h"

#include <string.h>

#define W(i) (m->P.t[(i)].w)
#define G(i) (m->P.t[(i)].g)

/* block_forward with sequence parallelism (Korthikanti et al. 2022): the
 * LayerNorms and residuals work on this rank's Ns = N/tp rows; the copy in
 * front of q/k/v and fc1 is an all-gather of the LayerNorm output into
 * m->sp_full, the reduce after proj and fc2 a reduce-scatter back to Ns rows.
 * The gathered outputs are not kept: the backward gathers them again. */
void tt_block_forward_sp(tt_model *m, tt_slot *s, int i, float *x_out /* Ns,C */)
{
    const tt_block_idx *b = &m->blk[m->chunk_first[s->chunk] + i];
    tt_block_acts *a = &s->acts[i];
    const tt_grid *g = m->grid;
    const int B = s->B, T = m->cfg.T, C = m->cfg.C, N = B * T, Ns = tt_model_rows(m, B);
    const int Cl = m->Cl, Hl = m->Hl, hs = C / m->cfg.NH;
    float *full = m->sp_full, *sum = m->sp_part;

    layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, a->x_in, W(b->ln1_w), W(b->ln1_b), Ns, C);
    tp_sp_gather_forward(g, full, a->ln1, Ns * C);
    linear_forward(a->q, full, W(b->q_w), W(b->q_b), N, C, Cl);
    linear_forward(a->k, full, W(b->k_w), W(b->k_b), N, C, Cl);
    linear_forward(a->v, full, W(b->v_w), W(b->v_b), N, C, Cl);
    attention_forward(a->atty, a->att, a->q, a->k, a->v, B, T, m->NHl, hs);
    row_linear_sp_forward(g, sum, m->dtmp, a->atty, W(b->proj_w), W(b->proj_b), N, Cl, C);
    residual_forward(a->x_mid, a->x_in, sum, Ns * C);

    layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->x_mid, W(b->ln2_w), W(b->ln2_b), Ns, C);
    tp_sp_gather_forward(g, full, a->ln2, Ns * C);
    linear_forward(a->fc1, full, W(b->fc1_w), W(b->fc1_b), N, C, Hl);
    gelu_forward(a->gelu, a->fc1, N * Hl);
    row_linear_sp_forward(g, sum, m->dtmp, a->gelu, W(b->fc2_w), W(b->fc2_b), N, Hl, C);
    residual_forward(x_out, a->x_mid, sum, Ns * C);
}

/* g[k] += d[k]: a LayerNorm gradient of this rank's rows, once summed over TP. */
static void add_into(float *g, const float *d, int n)
{
    for (int k = 0; k < n; k++)
        g[k] += d[k];
}

/* The LayerNorm weight and bias gradients of this rank's rows (m->sp_lng,
 * n floats) summed over the TP group and added to the tensors' gradients:
 * without the sum each rank would step its replicated copy by the gradient
 * of its own tokens only (Megatron's all-reduce of sequence-parallel
 * parameters). */
void tt_sp_ln_grads_done(tt_model *m, const int *tensors, int k)
{
    const int C = m->cfg.C;
    if (!tt_fault_active(TT_FAULT_SP_NO_LN_ALLREDUCE)) /* a planted fault (--inject-bug) */
        tp_sp_param_grads(m->grid, m->sp_lng, k * C);
    for (int t = 0; t < k; t++)
        add_into(G(tensors[t]), m->sp_lng + (size_t)t * C, C);
}

/* block_backward with sequence parallelism: m->dres holds Ns rows. Each
 * row-parallel layer first gathers its output gradient (the reduce-scatter's
 * backward); each column-parallel group gathers its input again and
 * reduce-scatters its input gradient (the all-gather's backward). */
void tt_block_backward_sp(tt_model *m, tt_slot *s, int i)
{
    const tt_block_idx *b = &m->blk[m->chunk_first[s->chunk] + i];
    tt_block_acts *a = &s->acts[i];
    const tt_grid *g = m->grid;
    const int B = s->B, T = m->cfg.T, C = m->cfg.C, N = B * T, Ns = tt_model_rows(m, B);
    const int Cl = m->Cl, Hl = m->Hl, hs = C / m->cfg.NH;
    float *dres = m->dres, *dtmp = m->dtmp, *full = m->sp_full, *part = m->sp_part;
    float *lng = m->sp_lng;
    memset(lng, 0, (size_t)4 * C * sizeof(float));

    /* MLP branch */
    float *dgelu = dtmp; /* N,Hl */
    memset(dgelu, 0, (size_t)N * Hl * sizeof(float));
    row_linear_sp_backward(g, dgelu, G(b->fc2_w), G(b->fc2_b), full, dres, a->gelu, W(b->fc2_w),
                           N, Hl, C);
    memset(m->dfc1, 0, (size_t)N * Hl * sizeof(float));
    gelu_backward(m->dfc1, a->fc1, dgelu, N * Hl);
    tp_sp_gather_forward(g, full, a->ln2, Ns * C); /* fc1's input, gathered again */
    column_linear_sp_backward(g, part, dtmp, G(b->fc1_w), G(b->fc1_b), m->dfc1, full,
                              W(b->fc1_w), N, C, Hl);
    layernorm_backward(dres, lng + 2 * C, lng + 3 * C, part, a->x_mid, W(b->ln2_w), a->ln2_mean,
                       a->ln2_rstd, Ns, C);

    /* Attention branch */
    memset(m->datty, 0, (size_t)N * Cl * sizeof(float));
    row_linear_sp_backward(g, m->datty, G(b->proj_w), G(b->proj_b), full, dres, a->atty,
                           W(b->proj_w), N, Cl, C);
    memset(m->dq, 0, (size_t)N * Cl * sizeof(float));
    memset(m->dk, 0, (size_t)N * Cl * sizeof(float));
    memset(m->dv, 0, (size_t)N * Cl * sizeof(float));
    attention_backward(m->dq, m->dk, m->dv, m->datt_scratch, m->datty, a->q, a->k, a->v,
                       a->att, B, T, m->NHl, hs);
    tp_sp_gather_forward(g, full, a->ln1, Ns * C); /* q, k and v's input, gathered again */
    memset(dtmp, 0, (size_t)N * C * sizeof(float));
    linear_backward(dtmp, G(b->q_w), G(b->q_b), m->dq, full, W(b->q_w), N, C, Cl);
    /* no key bias gradient: see forward.c's block_backward */
    linear_backward(dtmp, G(b->k_w), NULL, m->dk, full, W(b->k_w), N, C, Cl);
    linear_backward(dtmp, G(b->v_w), G(b->v_b), m->dv, full, W(b->v_w), N, C, Cl);
    if (tt_fault_active(TT_FAULT_DROP_TP_ALLREDUCE)) /* planted: this rank's rows, unsummed */
        tp_scatter_forward(g, part, dtmp, Ns * C);
    else
        tp_sp_gather_backward(g, part, dtmp, Ns * C);
    layernorm_backward(dres, lng, lng + C, part, a->x_in, W(b->ln1_w), a->ln1_mean, a->ln1_rstd,
                       Ns, C);
    /* ln1's two tensors, then ln2's, as laid out in lng */
    const int ln[4] = {b->ln1_w, b->ln1_b, b->ln2_w, b->ln2_b};
    tt_sp_ln_grads_done(m, ln, 4);
}
