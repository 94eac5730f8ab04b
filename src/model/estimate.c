/* estimate.c - what a shard of the model will allocate, computed before
 * anything is allocated, so a model that cannot fit on the host is refused
 * with the figure it needs instead of dying in malloc (src/app/run.c).
 *
 * The parameter count is model.c's own table (built without buffers); the
 * gradient scratch and one activation slot follow model.c and slots.c line
 * by line; doc/memory.md gives the same formulas.
 * Every product and sum saturates at UINT64_MAX: the flags allow shapes
 * whose byte counts do not fit 64 bits (batch x heads x seq^2). */
#include "tt/model/model.h"
#include "tt/model/cost.h"

#include <string.h>

#include <stdint.h>

static uint64_t mul(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t add(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* Local widths of a TP rank, as build_table computes them. */
typedef struct {
    uint64_t C, T, Vl, NHl, Cl, Hl, tp;
    uint64_t sp; /* rows of the LayerNorm and residual regions are N / sp */
} widths;

static widths local_widths(const tt_config *cfg, const tt_shard_spec *sh)
{
    widths w;
    w.tp = sh->tp_size > 0 ? (uint64_t)sh->tp_size : 1;
    w.C = (uint64_t)cfg->C;
    w.T = (uint64_t)cfg->T;
    w.Vl = ((uint64_t)cfg->V + w.tp - 1) / w.tp;
    w.NHl = (uint64_t)cfg->NH / w.tp;
    w.Cl = w.NHl * (w.C / (uint64_t)(cfg->NH > 0 ? cfg->NH : 1));
    w.Hl = 4 * w.C / w.tp;
    w.sp = sh->sp && w.tp > 1 ? w.tp : 1;
    return w;
}

/* Floats of one shard's parameter table (one kind): the table itself,
 * built without its buffers, so the count is model.c's own, not a copy. */
static uint64_t param_floats(const tt_config *cfg, const tt_shard_spec *sh)
{
    tt_params table;
    tt_model_shard_table(&table, cfg, sh);
    uint64_t n = 0;
    for (int i = 0; i < table.n; i++)
        n = add(n, mul((uint64_t)table.t[i].lshape[0], (uint64_t)table.t[i].lshape[1]));
    tt_params_free(&table);
    return n;
}

/* Floats of one block's activations for B sequences (slots.c): those a slot
 * keeps (with split_w also B's output gradients for W), and those recomputation rebuilds into the model's one shared work
 * set instead (model.c): selective, the attention probabilities; full,
 * everything but the block's input. */
static void block_floats(const widths *w, const tt_shard_spec *sh, uint64_t B, uint64_t *kept,
                         uint64_t *rebuilt)
{
    const uint64_t N = mul(B, w->T), C = w->C, Ns = N / w->sp;
    /* x_in, ln1, x_mid, ln2 and their means and rstds (the split region
     * with sequence parallelism); q, k, v, atty, fc1, gelu */
    uint64_t per = add(mul(Ns, add(4 * C, 4)), mul(N, add(mul(4, w->Cl), mul(2, w->Hl))));
    const uint64_t att = mul(mul(B, w->NHl), mul(w->T, w->T));
    per = add(per, att);
    if (sh->mlp_gather && w->tp > 1)
        per = add(per, mul(2, mul(w->tp, mul(N, w->Hl))));
    *rebuilt = sh->recompute == TT_RECOMPUTE_FULL        ? per - mul(Ns, C)
               : sh->recompute == TT_RECOMPUTE_SELECTIVE ? att
                                                          : 0;
    *kept = per - *rebuilt;
    /* split_w: the output gradients of the six linears and the two
     * LayerNorms, kept from B to W. */
    if (sh->split_w)
        *kept = add(*kept, mul(N, add(mul(3, w->Cl), add(4 * C, w->Hl))));
}

/* Floats of one activation slot of a chunk of nb blocks (slots.c). */
static uint64_t slot_floats(const widths *w, const tt_shard_spec *sh, uint64_t B, uint64_t nb,
                            int head)
{
    const uint64_t N = mul(B, w->T), C = w->C, Ns = N / w->sp;
    uint64_t kept, rebuilt;
    block_floats(w, sh, B, &kept, &rebuilt);
    uint64_t n = add(mul(nb, kept), mul(Ns, C));
    /* ln_f's output, mean and rstd (split); the losses, logits and probs */
    if (head)
        n = add(n, add(add(mul(Ns, add(C, 2)), N), mul(2, mul(N, w->Vl))));
    /* The bytes and targets (ints, same size as a float). */
    return add(n, mul(2, N));
}

void tt_shard_memory_of(const tt_config *cfg, const tt_shard_spec *sh, int Bmax,
                        tt_shard_memory *out)
{
    memset(out, 0, sizeof *out);
    const widths w = local_widths(cfg, sh);
    const int nchunks = sh->nchunks > 1 ? sh->nchunks : 1;
    const uint64_t B = Bmax > 0 ? (uint64_t)Bmax : 0, N = mul(B, w.T);
    out->param_floats = param_floats(cfg, sh);
    if (B == 0)
        return;
    for (int j = 0; j < nchunks && j < TT_MAX_CHUNKS; j++) {
        int b = sh->nchunks > 1 ? sh->chunk_begin[j] : sh->layer_begin;
        int e = sh->nchunks > 1 ? sh->chunk_end[j] : sh->layer_end;
        uint64_t nb = e > b ? (uint64_t)(e - b) : 0;
        out->slot_bytes[j] =
            mul(sizeof(float), slot_floats(&w, sh, B, nb, sh->last_stage && j == nchunks - 1));
    }
    /* The gradient scratch of tt_model_init. */
    uint64_t wide = w.C > w.Hl ? w.C : w.Hl;
    wide = wide > w.Vl ? wide : w.Vl;
    uint64_t err = mul(N, add(add(2 * w.C, wide), add(mul(4, w.Cl), w.Hl)));
    if (sh->mlp_gather && w.tp > 1)
        err = add(err, mul(2, mul(w.tp, mul(N, w.Hl))));
    if (w.sp > 1) /* sp_full, sp_part, sp_lng */
        err = add(err, add(add(mul(N, w.C), mul(N / w.sp, w.C)), 4 * w.C));
    if (sh->split_w)
        err = add(err, 2 * w.C); /* the LayerNorm gains' sink of B */
    out->scratch_bytes = mul(sizeof(float), add(err, mul(w.T, w.T)));
    uint64_t kept, rebuilt;
    block_floats(&w, sh, B, &kept, &rebuilt);
    out->work_bytes = mul(sizeof(float), rebuilt);
}

uint64_t tt_model_bytes_bound(const tt_config *cfg, const tt_shard_spec *sh, int Bmax,
                              int slots)
{
    tt_shard_memory sm;
    tt_shard_memory_of(cfg, sh, Bmax, &sm);
    const int nchunks = sh->nchunks > 1 ? sh->nchunks : 1;
    uint64_t bytes = mul(4 * sizeof(float), sm.param_floats); /* W, G, Adam m and v */
    for (int j = 0; j < nchunks && j < TT_MAX_CHUNKS; j++)
        bytes = add(bytes, mul(sm.slot_bytes[j], slots > 0 ? (uint64_t)slots : 1));
    return add(add(bytes, sm.scratch_bytes), sm.work_bytes);
}
