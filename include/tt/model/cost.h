/* tt/model/cost.h - what a chunk of the model costs on a modelled cluster,
 * without building it: the kernels of one chunk forward and backward priced
 * by tt/core/kcost.h and the cluster's cost model (tt/core/cluster.h), in
 * the order src/model/forward.c runs them, with the tensor-parallel
 * collectives that forward.c and src/comm/tensor_parallel.c issue. The
 * virtual clocks charge exactly these figures while the emulator trains
 * (except under --tp-mlp gather, whose extra all-gather, reduce-scatter and
 * whole-width GELU are charged by the run but not priced here), so
 * the planner (src/app/plan_cost.c) predicts the emulator's step times, and at
 * cluster scale the same arithmetic answers "how long" (doc/design.md section 11).
 *
 * Also the memory a shard allocates, by category (src/model/estimate.c). */
#ifndef TT_MODEL_COST_H
#define TT_MODEL_COST_H

#include "tt/core/cluster.h"
#include "tt/core/config.h"
#include "tt/model/model.h"

/* How a chunk is run: on which machine, at which precision, over which TP group. */
typedef struct {
    const tt_cluster *cluster;
    int mixed;           /* 0: FP32 (the emulator), 1: 16-bit at peak_flops */
    int tp;              /* TP group size */
    const tt_link *tp_link; /* the TP group's slowest link */
    int sequence_parallel;  /* Korthikanti et al.: LayerNorm and residuals split over tp */
    int recompute;       /* TT_RECOMPUTE_* (tt/core/config.h) */
    int split_w;         /* a zero-bubble schedule: the blocks' W apart from B */
} tt_cost_ctx;

/* Seconds of one chunk of nb blocks for one micro-batch of B sequences,
 * forward and backward (backward includes any recomputation), each split into
 * compute and the TP collectives inside the chunk. `embedding`: the chunk
 * holds the embeddings (chunk 0); `head`: ln_f, lm_head and the loss. With
 * split_w the backward is B and the blocks' weight gradients are W, priced
 * as the run charges them: B takes each linear layer's input-gradient
 * product, W its weight-gradient product and both LayerNorms' backward
 * again (for their gains); the head's and embeddings' stay in B. */
typedef struct {
    double fwd, bwd;           /* total */
    double fwd_comm, bwd_comm; /* of which TP collectives */
    double w;                  /* split_w: W (no communication); else 0 */
} tt_chunk_seconds;
tt_chunk_seconds tt_chunk_cost(const tt_config *cfg, const tt_cost_ctx *x, double B, int nb,
                               int embedding, int head);

/* The memory a shard allocates (FP32, what the emulator holds): parameter
 * floats of one kind (weights; gradients, Adam m and v are the same count),
 * for micro-batches of B sequences the bytes of one micro-batch of each
 * local chunk and of the three pools' entries it is made of (src/model/
 * slots.c: a slot's own, a block's, the head's), the backward's shared
 * scratch, and with recomputation the one block's activations it rebuilds.
 * Saturating 64-bit sums. */
typedef struct {
    uint64_t param_floats;
    uint64_t slot_bytes[TT_MAX_CHUNKS]; /* a micro-batch of chunk j, without the head's */
    uint64_t own_bytes;   /* a slot's own buffers (the chunk's output, the tokens) */
    uint64_t block_bytes; /* one block's activations */
    uint64_t head_bytes;  /* the head's (ln_f, logits, softmax, losses), lent to the
                             head chunk's slot; 0 on a shard without the head */
    uint64_t scratch_bytes;
    uint64_t work_bytes; /* --recompute: the one block's activations rebuilt (model.c) */
} tt_shard_memory;
void tt_shard_memory_of(const tt_config *cfg, const tt_shard_spec *sh, int B, tt_shard_memory *out);

#endif
