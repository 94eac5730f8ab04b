/* model_internal.h - what the model's files share and nobody else needs. */
#ifndef TT_MODEL_INTERNAL_H
#define TT_MODEL_INTERNAL_H

#include "tt/core/common.h"
#include "tt/model/model.h"

#include <stdint.h>

/* Does local chunk j start with the embeddings / end with ln_f, lm_head and
 * the loss? */
static inline int tt_has_embedding(const tt_model *m, int j)
{
    return m->sh.first_stage && j == 0;
}
static inline int tt_has_head(const tt_model *m, int j)
{
    return m->sh.last_stage && j == m->nchunks - 1;
}

/* Zeroed floats. */
static inline float *tt_fbuf(size_t n) { return tt_calloc(n, sizeof(float)); }

/* Products and sums that saturate at UINT64_MAX: the flags allow shapes
 * whose byte counts do not fit 64 bits (batch x heads x seq^2). */
static inline uint64_t tt_mul_sat(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
static inline uint64_t tt_add_sat(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* The buffers of buffers.c's table, by what holds them: one block's in the
 * block pool (what recomputation does not rebuild), the work set recomputation
 * rebuilds them into, the slot's own (every chunk's), the head's (ln_f,
 * logits, losses: a tt_slot of the head pool holds them and lends them to
 * the head chunk's slot), the backward's scratch. */
typedef enum {
    TT_BUFS_BLOCK,
    TT_BUFS_WORK,
    TT_BUFS_SLOT,
    TT_BUFS_HEAD,
    TT_BUFS_SCRATCH
} tt_bufs_part;
/* Bytes of `part` for shard sh and micro-batches of B sequences (head: the
 * chunk holds the head), saturating; no model needed. */
uint64_t tt_bufs_bytes(const tt_config *cfg, const tt_shard_spec *sh, uint64_t B,
                       tt_bufs_part part, int head);
/* Allocates the buffers of `part` into holder (a tt_block_acts for BLOCK and
 * WORK, a tt_slot, the tt_model), zeroed and sized for m->Bmax sequences;
 * for BLOCK, the rows recomputation rebuilds point at shared's (the work
 * set). Returns the bytes allocated; the caller books them. */
size_t tt_bufs_alloc(const tt_model *m, void *holder, tt_bufs_part part, int head,
                     const tt_block_acts *shared);
/* Points dst's pointers of `part` at src's (both tt_slot, say), or clears
 * them when src is NULL: lending the head's buffers to a slot. */
void tt_bufs_lend(const tt_model *m, void *dst, const void *src, tt_bufs_part part);
/* Frees what tt_bufs_alloc allocated (not the shared rows). */
void tt_bufs_free(const tt_model *m, void *holder, tt_bufs_part part);

/* Sequence parallelism (block_sp.c): block i of slot s forward (x_out: Ns
 * rows) and backward (m->dres: Ns rows in and out), in place of
 * forward.c's block_forward and block_backward; and the LayerNorm gradients
 * of this rank's rows in m->sp_lng (k tensors of C floats) summed over TP
 * and added to the gradients of those tensors. */
void tt_block_forward_sp(tt_model *m, tt_slot *s, int i, float *x_out);
void tt_block_backward_sp(tt_model *m, tt_slot *s, int i);
void tt_sp_ln_grads_done(tt_model *m, const int *tensors, int k);

/* Frees every activation slot of the pool (slots.c). */
void tt_slots_free(tt_model *m);

#endif
