/* estimate.c - what a shard of the model will allocate, computed before
 * anything is allocated, so a model that cannot fit on the host is refused
 * with the figure it needs instead of dying in malloc (src/app/preflight.c).
 *
 * The parameter count is model.c's own table (built without buffers); the
 * activation slots, the gradient scratch and the recomputation work set are
 * summed from buffers.c's table, the one allocation walks, so the estimate
 * cannot drift from what is allocated; doc/memory.md gives the formulas.
 * Every product and sum saturates at UINT64_MAX: the flags allow shapes
 * whose byte counts do not fit 64 bits (batch x heads x seq^2). */
#include "tt/model/model.h"
#include "model/model_internal.h"
#include "tt/model/cost.h"

#include <stdint.h>
#include <string.h>

/* Floats of one shard's parameter table (one kind): the table itself,
 * built without its buffers, so the count is model.c's own, not a copy. */
static uint64_t param_floats(const tt_config *cfg, const tt_shard_spec *sh)
{
    tt_params table;
    tt_model_shard_table(&table, cfg, sh);
    uint64_t n = 0;
    for (int i = 0; i < table.n; i++)
        n = tt_add_sat(n, tt_mul_sat((uint64_t)table.t[i].lshape[0],
                                     (uint64_t)table.t[i].lshape[1]));
    tt_params_free(&table);
    return n;
}

void tt_shard_memory_of(const tt_config *cfg, const tt_shard_spec *sh, int Bmax,
                        tt_shard_memory *out)
{
    memset(out, 0, sizeof *out);
    const int nchunks = sh->nchunks > 1 ? sh->nchunks : 1;
    const uint64_t B = Bmax > 0 ? (uint64_t)Bmax : 0;
    out->param_floats = param_floats(cfg, sh);
    if (B == 0)
        return;
    /* A micro-batch of chunk j: each block's buffers (what recomputation
     * does not rebuild) and the slot's own; the head's buffers apart. The
     * executor pools the three apart (slots.c). */
    const uint64_t block = tt_bufs_bytes(cfg, sh, B, TT_BUFS_BLOCK, 0);
    out->block_bytes = block;
    out->own_bytes = tt_bufs_bytes(cfg, sh, B, TT_BUFS_SLOT, 0);
    int nb[TT_MAX_CHUNKS];
    tt_chunk_blocks(sh, nb);
    for (int j = 0; j < nchunks && j < TT_MAX_CHUNKS; j++)
        out->slot_bytes[j] =
            tt_add_sat(tt_mul_sat(nb[j] > 0 ? (uint64_t)nb[j] : 0, block), out->own_bytes);
    out->head_bytes = sh->last_stage ? tt_bufs_bytes(cfg, sh, B, TT_BUFS_HEAD, 1) : 0;
    out->scratch_bytes = tt_bufs_bytes(cfg, sh, B, TT_BUFS_SCRATCH, 0);
    out->work_bytes = tt_bufs_bytes(cfg, sh, B, TT_BUFS_WORK, 0);
}

void tt_chunk_blocks(const tt_shard_spec *sh, int *nb)
{
    const int nchunks = sh->nchunks > 1 ? sh->nchunks : 1;
    for (int j = 0; j < nchunks && j < TT_MAX_CHUNKS; j++)
        nb[j] = sh->nchunks > 1 ? sh->chunk_end[j] - sh->chunk_begin[j]
                                : sh->layer_end - sh->layer_begin;
}

uint64_t tt_model_bytes_bound(const tt_config *cfg, const tt_shard_spec *sh, int Bmax,
                              int slots)
{
    tt_shard_memory sm;
    tt_shard_memory_of(cfg, sh, Bmax, &sm);
    const int nchunks = sh->nchunks > 1 ? sh->nchunks : 1;
    uint64_t bytes = tt_mul_sat(4 * sizeof(float), sm.param_floats); /* W, G, Adam m and v */
    for (int j = 0; j < nchunks && j < TT_MAX_CHUNKS; j++)
        bytes = tt_add_sat(bytes, tt_mul_sat(sm.slot_bytes[j], slots > 0 ? (uint64_t)slots : 1));
    bytes = tt_add_sat(bytes, tt_mul_sat(sm.head_bytes, slots > 0 ? (uint64_t)slots : 1));
    return tt_add_sat(tt_add_sat(bytes, sm.scratch_bytes), sm.work_bytes);
}
