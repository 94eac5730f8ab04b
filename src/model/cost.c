/* cost.c - the time of a chunk forward and backward on a modelled cluster
 * (tt/model/cost.h): the kernels of forward.c, in its order, each priced by
 * tt/core/kcost.h at the roofline of tt_cost_compute, and the TP collectives
 * of forward.c and comm/tensor_parallel.c priced by tt_cost_collective.
 *
 * Written for the planner; tests/test_plan_runs.sh holds it against the
 * clocks of real runs (within 2%), so a kernel added to forward.c without a line here
 * shows up there, sequence parallelism and recomputation included. */
#include "tt/model/cost.h"
#include "tt/core/kcost.h"

typedef struct {
    const tt_cost_ctx *x;
    double peak, elem; /* FLOP/s; bytes per element moved */
    double compute, comm;
} acc;

/* One kernel at the roofline: compute or memory time, whichever is longer
 * (tt_cost_compute_at, as tt_vclock_compute charges it). */
static void k(acc *a, tt_kcost c)
{
    a->compute += tt_cost_compute_at(a->x->cluster, a->peak, c.flops, a->elem * c.floats);
}

/* A TP collective of `elems` elements (the full buffer). */
static void coll(acc *a, tt_coll_kind kind, double elems)
{
    if (a->x->tp > 1)
        a->comm += tt_cost_collective(a->x->tp_link, kind, a->x->tp, a->elem * elems);
}

/* The all-reduce after a row-parallel layer (forward) or behind a copy
 * operator (backward); with sequence parallelism a reduce-scatter and an
 * all-gather of the same buffer, which cost the same ring steps. */
static void tp_sum(acc *a, double elems)
{
    if (a->x->sequence_parallel) {
        coll(a, TT_COLL_REDUCE_SCATTER, elems);
        coll(a, TT_COLL_ALLGATHER, elems);
    } else {
        coll(a, TT_COLL_ALLREDUCE, elems);
    }
}

/* block_forward of forward.c: N rows, local widths Cl (attention), Hl (MLP).
 * With sequence parallelism (block_sp.c) the LayerNorms and residuals see
 * N / tp rows. */
static void block_fwd(acc *a, const tt_config *cfg, double B)
{
    const double tp = a->x->tp, T = cfg->T, C = cfg->C, N = B * T;
    const double Cl = C / tp, Hl = 4.0 * C / tp, NHl = cfg->NH / tp;
    const double Ns = a->x->sequence_parallel ? N / tp : N;
    k(a, tt_kcost_layernorm_fwd(Ns, C));
    for (int i = 0; i < 3; i++)
        k(a, tt_kcost_linear_fwd(N, C, Cl));
    k(a, tt_kcost_attention_fwd(B, T, NHl, Cl));
    k(a, tt_kcost_linear_fwd(N, Cl, C));
    tp_sum(a, N * C);
    k(a, tt_kcost_residual_fwd(Ns * C));
    k(a, tt_kcost_layernorm_fwd(Ns, C));
    k(a, tt_kcost_linear_fwd(N, C, Hl));
    k(a, tt_kcost_gelu_fwd(N * Hl));
    k(a, tt_kcost_linear_fwd(N, Hl, C));
    tp_sum(a, N * C);
    k(a, tt_kcost_residual_fwd(Ns * C));
}

/* block_backward of forward.c: both products of every linear layer; or,
 * split (w not NULL), B as block_backward runs it under a zero-bubble
 * schedule (the input-gradient products) and W as block_weights does (the
 * weight-gradient products, both LayerNorms' backward again). */
static void block_bwd(acc *a, acc *w, const tt_config *cfg, double B)
{
    const double tp = a->x->tp, T = cfg->T, C = cfg->C, N = B * T;
    const double Cl = C / tp, Hl = 4.0 * C / tp, NHl = cfg->NH / tp;
    const double Ns = a->x->sequence_parallel ? N / tp : N;
    const int sp = a->x->sequence_parallel, products = w ? 1 : 2;
    k(a, tt_kcost_linear_bwd(N, Hl, C, products));
    k(a, tt_kcost_gelu_bwd(N * Hl));
    if (sp) /* fc1's input, gathered again (not kept) */
        coll(a, TT_COLL_ALLGATHER, N * C);
    k(a, tt_kcost_linear_bwd(N, C, Hl, products));
    tp_sum(a, N * C);
    k(a, tt_kcost_layernorm_bwd(Ns, C));
    k(a, tt_kcost_linear_bwd(N, Cl, C, products));
    k(a, tt_kcost_attention_bwd(B, T, NHl, Cl));
    if (sp) /* q, k and v's input, gathered again */
        coll(a, TT_COLL_ALLGATHER, N * C);
    for (int i = 0; i < 3; i++)
        k(a, tt_kcost_linear_bwd(N, C, Cl, products));
    tp_sum(a, N * C);
    k(a, tt_kcost_layernorm_bwd(Ns, C));
    if (sp) /* the LayerNorms' gradients of this rank's tokens, summed */
        coll(a, TT_COLL_ALLREDUCE, 4 * C);
    if (w) { /* block_weights: fc2, fc1, proj, q, k, v; then ln2, ln1 */
        k(w, tt_kcost_linear_bwd(N, Hl, C, 1));
        k(w, tt_kcost_linear_bwd(N, C, Hl, 1));
        k(w, tt_kcost_linear_bwd(N, Cl, C, 1));
        for (int i = 0; i < 3; i++)
            k(w, tt_kcost_linear_bwd(N, C, Cl, 1));
        k(w, tt_kcost_layernorm_bwd(Ns, C));
        k(w, tt_kcost_layernorm_bwd(Ns, C));
    }
}

tt_chunk_seconds tt_chunk_cost(const tt_config *cfg, const tt_cost_ctx *x, double B, int nb,
                               int embedding, int head)
{
    const tt_cluster *cl = x->cluster;
    const double tp = x->tp, T = cfg->T, C = cfg->C, N = B * T;
    /* The vocabulary is padded to a multiple of tp (design.md section 4). */
    const double Vp = (double)((cfg->V + x->tp - 1) / x->tp) * x->tp, Vl = Vp / tp;
    acc f = {x, x->mixed ? cl->peak_flops : cl->peak_flops_fp32, x->mixed ? 2.0 : 4.0, 0, 0};
    acc b = f, w = f;
    const int sp = x->sequence_parallel;
    const double Ns = sp ? N / tp : N;
    if (embedding) {
        k(&f, tt_kcost_embedding_fwd(N, C));
        /* vocab-parallel rows summed (sequence parallelism: reduce-scattered,
         * and the backward gathers the gradient) */
        coll(&f, sp ? TT_COLL_REDUCE_SCATTER : TT_COLL_ALLREDUCE, N * C);
        if (sp)
            coll(&b, TT_COLL_ALLGATHER, N * C);
        k(&f, tt_kcost_posemb_fwd(Ns / T, T, C));
        k(&b, tt_kcost_posemb_bwd(B, T, C));
        k(&b, tt_kcost_embedding_bwd(N, C));
    }
    for (int i = 0; i < nb; i++) {
        block_fwd(&f, cfg, B);
        block_bwd(&b, x->split_w ? &w : NULL, cfg, B);
    }
    /* Recomputation runs (part of) the forward again inside the backward:
     * full, the whole block; selective, the attention core. */
    if (x->recompute == TT_RECOMPUTE_FULL) {
        for (int i = 0; i < nb; i++)
            block_fwd(&b, cfg, B);
    } else if (x->recompute == TT_RECOMPUTE_SELECTIVE) {
        for (int i = 0; i < nb; i++)
            k(&b, tt_kcost_attention_fwd(B, T, cfg->NH / tp, C / tp));
    }
    if (head) {
        k(&f, tt_kcost_layernorm_fwd(Ns, C));
        if (sp) /* ln_f's rows gathered for lm_head */
            coll(&f, TT_COLL_ALLGATHER, N * C);
        k(&f, tt_kcost_linear_fwd(N, C, Vl));
        if (x->tp > 1) {
            /* vocab_crossentropy: three passes over the slice, with the row
             * maxima and target logits, then the sums of exponentials,
             * summed over the TP group in between. The first rank's slice
             * is all real columns (Vl <= V), the slowest of the group, which
             * the all-reduces and the backward's next one wait for. */
            k(&f, tt_kcost_crossentropy_slice_fwd(N, Vl, Vl, 0));
            coll(&f, TT_COLL_ALLREDUCE, N);
            coll(&f, TT_COLL_ALLREDUCE, N);
            k(&f, tt_kcost_crossentropy_slice_fwd(N, Vl, Vl, 1));
            coll(&f, TT_COLL_ALLREDUCE, N);
            k(&f, tt_kcost_crossentropy_slice_fwd(N, Vl, Vl, 2));
            k(&b, tt_kcost_crossentropy_bwd(N, Vl, Vl));
        } else {
            k(&f, tt_kcost_crossentropy_fwd(N, cfg->V, Vp));
            k(&b, tt_kcost_crossentropy_bwd(N, cfg->V, Vp));
        }
        if (sp) /* lm_head's input, gathered again */
            coll(&b, TT_COLL_ALLGATHER, N * C);
        k(&b, tt_kcost_linear_bwd(N, C, Vl, 2));
        coll(&b, sp ? TT_COLL_REDUCE_SCATTER : TT_COLL_ALLREDUCE, N * C);
        k(&b, tt_kcost_layernorm_bwd(Ns, C));
        if (sp) /* ln_f's gradients summed */
            coll(&b, TT_COLL_ALLREDUCE, 2 * C);
    }
    /* A test cluster with fixed chunk costs charges those instead of FLOPs
     * (the collectives still cost their links). */
    if (tt_cluster_fixed(cl)) {
        f.compute = cl->fixed_forward;
        b.compute = cl->fixed_backward;
        w.compute = x->split_w ? cl->fixed_w : 0.0;
    }
    return (tt_chunk_seconds){f.compute + f.comm, b.compute + b.comm, f.comm, b.comm, w.compute};
}
