/* buffers.c - one table of every buffer the model allocates beside its
 * parameters: a block's activations (an entry of the block pool, or the one
 * work set that recomputation shares), a slot's own (the chunk's output and
 * tokens), the head's (ln_f, logits, losses) - the blocks' and the head's
 * lent to a slot from pools of their own (slots.c) - and the backward's
 * scratch (the errors of one backward at a time). Allocation
 * (slots.c, model.c), freeing and the estimate the planner and the preflight
 * use (estimate.c) all walk this table, so a buffer added here is allocated,
 * freed and counted alike; before, each kept its own list, and a buffer
 * missing from one of them went unnoticed until a memory test failed. */
#include "tt/model/model.h"
#include "model/model_internal.h"
#include "tt/core/common.h"
#include "tt/core/memory.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* The sizes a row's formula multiplies; ONE pads formulas of fewer factors. */
typedef enum {
    ONE,
    N,    /* B*T rows */
    NS,   /* rows of the LayerNorm and residual region: N, or N/tp with sequence parallelism */
    B,
    T,
    C,
    CL,   /* local attention width */
    HL,   /* local MLP width */
    NHL,  /* local heads */
    VL,   /* local vocabulary rows */
    TP,
    WIDE, /* max(C, Hl, Vl): the scratch every layer borrows (Vl: lm_head's, on its stage) */
    NDIMS
} dim;

/* Where a row's pointer lives and so which account it is booked in: per
 * block of a slot and per slot, activations; in the model, errors. */
typedef enum { ACT_BLOCK, ACT_SLOT, ERR_MODEL } home;

/* Rows that exist only in some layouts (none: always). */
enum {
    GATHER = 1,  /* --tp-mlp gather with tp > 1 */
    SPLIT_W = 2, /* zero-bubble schedules: B's output gradients kept for W */
    SP = 4,      /* sequence parallelism with tp > 1 */
    HEAD = 8     /* the chunk with ln_f, lm_head and the loss */
};

/* Which --recompute modes rebuild a block's row into the shared work set
 * instead of every slot keeping it. */
typedef enum { KEPT, REBUILT_FULL, REBUILT_ANY } rebuild;

typedef struct {
    const char *name;
    home in;
    size_t off; /* offsetof the pointer in tt_block_acts, tt_slot or tt_model */
    unsigned only;
    rebuild rebuilt;
    int ints;   /* tokens (int) rather than floats; same size, counted alike */
    uint64_t k; /* elements = k * the product of dims */
    dim dims[4];
} row;

#define BLOCK(f) #f, ACT_BLOCK, offsetof(tt_block_acts, f)
#define SLOT(f) #f, ACT_SLOT, offsetof(tt_slot, f)
#define MODEL(f) #f, ERR_MODEL, offsetof(tt_model, f)

static const row rows[] = {
    /* one block's activations, kept for its backward */
    {BLOCK(x_in), 0, KEPT, 0, 1, {NS, C}},
    {BLOCK(ln1), 0, REBUILT_FULL, 0, 1, {NS, C}},
    {BLOCK(ln1_mean), 0, REBUILT_FULL, 0, 1, {NS}},
    {BLOCK(ln1_rstd), 0, REBUILT_FULL, 0, 1, {NS}},
    {BLOCK(q), 0, REBUILT_FULL, 0, 1, {N, CL}},
    {BLOCK(k), 0, REBUILT_FULL, 0, 1, {N, CL}},
    {BLOCK(v), 0, REBUILT_FULL, 0, 1, {N, CL}},
    {BLOCK(att), 0, REBUILT_ANY, 0, 1, {B, NHL, T, T}},
    {BLOCK(atty), 0, REBUILT_FULL, 0, 1, {N, CL}},
    {BLOCK(x_mid), 0, REBUILT_FULL, 0, 1, {NS, C}},
    {BLOCK(ln2), 0, REBUILT_FULL, 0, 1, {NS, C}},
    {BLOCK(ln2_mean), 0, REBUILT_FULL, 0, 1, {NS}},
    {BLOCK(ln2_rstd), 0, REBUILT_FULL, 0, 1, {NS}},
    {BLOCK(fc1), 0, REBUILT_FULL, 0, 1, {N, HL}},
    {BLOCK(gelu), 0, REBUILT_FULL, 0, 1, {N, HL}},
    {BLOCK(fc1_full), GATHER, REBUILT_FULL, 0, 1, {TP, N, HL}},
    {BLOCK(gelu_full), GATHER, REBUILT_FULL, 0, 1, {TP, N, HL}},
    /* the linears' and LayerNorms' output gradients B leaves for W */
    {BLOCK(dq), SPLIT_W, KEPT, 0, 1, {N, CL}},
    {BLOCK(dk), SPLIT_W, KEPT, 0, 1, {N, CL}},
    {BLOCK(dv), SPLIT_W, KEPT, 0, 1, {N, CL}},
    {BLOCK(dproj), SPLIT_W, KEPT, 0, 1, {N, C}},
    {BLOCK(dfc2), SPLIT_W, KEPT, 0, 1, {N, C}},
    {BLOCK(dln1), SPLIT_W, KEPT, 0, 1, {N, C}},
    {BLOCK(dln2), SPLIT_W, KEPT, 0, 1, {N, C}},
    {BLOCK(dfc1), SPLIT_W, KEPT, 0, 1, {N, HL}},
    /* once per slot: the chunk's output, the head's activations, the tokens */
    {SLOT(x_out), 0, KEPT, 0, 1, {NS, C}},
    {SLOT(lnf), HEAD, KEPT, 0, 1, {NS, C}},
    {SLOT(lnf_mean), HEAD, KEPT, 0, 1, {NS}},
    {SLOT(lnf_rstd), HEAD, KEPT, 0, 1, {NS}},
    {SLOT(logits), HEAD, KEPT, 0, 1, {N, VL}},
    {SLOT(probs), HEAD, KEPT, 0, 1, {N, VL}},
    {SLOT(losses), HEAD, KEPT, 0, 1, {N}},
    {SLOT(idx), 0, KEPT, 1, 1, {N}},
    {SLOT(targets), 0, KEPT, 1, 1, {N}},
    /* the backward's scratch, shared by all slots */
    {MODEL(dres), 0, KEPT, 0, 1, {N, C}},
    {MODEL(dln), 0, KEPT, 0, 1, {N, C}},
    {MODEL(dtmp), 0, KEPT, 0, 1, {N, WIDE}},
    {MODEL(dq), 0, KEPT, 0, 1, {N, CL}},
    {MODEL(dk), 0, KEPT, 0, 1, {N, CL}},
    {MODEL(dv), 0, KEPT, 0, 1, {N, CL}},
    {MODEL(datty), 0, KEPT, 0, 1, {N, CL}},
    {MODEL(dfc1), 0, KEPT, 0, 1, {N, HL}},
    {MODEL(dfull), GATHER, KEPT, 0, 1, {TP, N, HL}},
    {MODEL(dfull2), GATHER, KEPT, 0, 1, {TP, N, HL}},
    {MODEL(datt_scratch), 0, KEPT, 0, 1, {T, T}},
    {MODEL(sp_full), SP, KEPT, 0, 1, {N, C}},
    {MODEL(sp_part), SP, KEPT, 0, 1, {NS, C}},
    {MODEL(sp_lng), SP, KEPT, 0, 4, {C}},
    {MODEL(ln_sink), SPLIT_W, KEPT, 0, 2, {C}},
};

#undef BLOCK
#undef SLOT
#undef MODEL

#define NROWS (sizeof rows / sizeof rows[0])

/* The dims of shard sh for micro-batches of B sequences, as build_table
 * computes the local widths (the estimate runs without a model). */
static void dims_of(uint64_t d[NDIMS], const tt_config *cfg, const tt_shard_spec *sh, uint64_t Bs)
{
    const uint64_t tp = sh->tp_size > 0 ? (uint64_t)sh->tp_size : 1;
    d[ONE] = 1;
    d[B] = Bs;
    d[T] = (uint64_t)cfg->T;
    d[N] = tt_mul_sat(Bs, d[T]);
    d[NS] = sh->sp && tp > 1 ? d[N] / tp : d[N];
    d[C] = (uint64_t)cfg->C;
    d[NHL] = (uint64_t)cfg->NH / tp;
    d[CL] = d[NHL] * (d[C] / (uint64_t)(cfg->NH > 0 ? cfg->NH : 1));
    d[HL] = 4 * d[C] / tp;
    d[VL] = ((uint64_t)cfg->V + tp - 1) / tp;
    d[TP] = tp;
    uint64_t wide = d[C] > d[HL] ? d[C] : d[HL];
    /* Only the loss's backward borrows it Vl wide (the logits' gradient). */
    d[WIDE] = sh->last_stage && d[VL] > wide ? d[VL] : wide;
}

/* Elements of row r (saturating at UINT64_MAX). */
static uint64_t elems(const row *r, const uint64_t d[NDIMS])
{
    uint64_t n = r->k;
    for (int i = 0; i < 4; i++)
        n = tt_mul_sat(n, d[r->dims[i]]);
    return n;
}

static int exists(const row *r, const tt_shard_spec *sh, int head)
{
    const int tp = sh->tp_size > 1;
    return !((r->only & GATHER) && !(sh->mlp_gather && tp)) &&
           !((r->only & SPLIT_W) && !sh->split_w) && !((r->only & SP) && !(sh->sp && tp)) &&
           !((r->only & HEAD) && !head);
}

static int is_rebuilt(const row *r, const tt_shard_spec *sh)
{
    return r->rebuilt == REBUILT_ANY    ? sh->recompute != TT_RECOMPUTE_NONE
           : r->rebuilt == REBUILT_FULL ? sh->recompute == TT_RECOMPUTE_FULL
                                        : 0;
}

/* Is row r one of what `part` is, for shard sh (head: the chunk has the head)? */
static int in_part(const row *r, tt_bufs_part part, const tt_shard_spec *sh, int head)
{
    if (!exists(r, sh, head))
        return 0;
    switch (part) {
    case TT_BUFS_BLOCK:
        return r->in == ACT_BLOCK && !is_rebuilt(r, sh);
    case TT_BUFS_WORK:
        return r->in == ACT_BLOCK && is_rebuilt(r, sh);
    case TT_BUFS_SLOT:
        return r->in == ACT_SLOT && !(r->only & HEAD);
    case TT_BUFS_HEAD:
        return r->in == ACT_SLOT && (r->only & HEAD);
    case TT_BUFS_SCRATCH:
        return r->in == ERR_MODEL;
    }
    return 0;
}

uint64_t tt_bufs_bytes(const tt_config *cfg, const tt_shard_spec *sh, uint64_t Bs,
                       tt_bufs_part part, int head)
{
    uint64_t d[NDIMS];
    dims_of(d, cfg, sh, Bs);
    uint64_t n = 0;
    for (size_t i = 0; i < NROWS; i++)
        if (in_part(&rows[i], part, sh, head))
            n = tt_add_sat(n, elems(&rows[i], d));
    _Static_assert(sizeof(int) == sizeof(float), "tokens are counted as floats");
    return tt_mul_sat(n, sizeof(float));
}

/* The row's pointer inside its holder (a float * or, for tokens, an int *). */
static void *field(void *holder, const row *r) { return (char *)holder + r->off; }

size_t tt_bufs_alloc(const tt_model *m, void *holder, tt_bufs_part part, int head,
                     const tt_block_acts *shared)
{
    uint64_t d[NDIMS];
    dims_of(d, &m->cfg, &m->sh, (uint64_t)m->Bmax);
    size_t bytes = 0;
    for (size_t i = 0; i < NROWS; i++) {
        const row *r = &rows[i];
        if (part == TT_BUFS_BLOCK && shared && r->in == ACT_BLOCK && exists(r, &m->sh, head) &&
            is_rebuilt(r, &m->sh)) {
            /* Recomputation rebuilds it into the work set the slots share. */
            *(float **)field(holder, r) = *(float *const *)((const char *)shared + r->off);
            continue;
        }
        if (!in_part(r, part, &m->sh, head))
            continue;
        const size_t n = (size_t)elems(r, d);
        if (r->ints)
            *(int **)field(holder, r) = tt_calloc(n, sizeof(int));
        else
            *(float **)field(holder, r) = tt_fbuf(n);
        bytes += n * (r->ints ? sizeof(int) : sizeof(float));
    }
    return bytes;
}

void tt_bufs_lend(const tt_model *m, void *dst, const void *src, tt_bufs_part part)
{
    for (size_t i = 0; i < NROWS; i++) {
        const row *r = &rows[i];
        if (!in_part(r, part, &m->sh, 1))
            continue;
        /* int * and float * alike: the row's pointer, copied or cleared */
        *(void **)field(dst, r) = src ? *(void *const *)((const char *)src + r->off) : NULL;
    }
}

void tt_bufs_free(const tt_model *m, void *holder, tt_bufs_part part)
{
    for (size_t i = 0; i < NROWS; i++) {
        const row *r = &rows[i];
        /* head = 1: the head's rows are NULL in other chunks' slots */
        if (!in_part(r, part, &m->sh, 1))
            continue;
        if (r->ints)
            free(*(int **)field(holder, r));
        else
            free(*(float **)field(holder, r));
    }
}
