/* tt/model/model.h - the GPT of design.md section 4, one pipeline stage of it on one
 * virtual GPU.
 *
 *   x      = tok_emb[idx] + pos_emb[0..T)
 *   block: x = x + attn.proj( causal_self_attention( ln1(x) ) )
 *          x = x + mlp.fc2( gelu_tanh( mlp.fc1( ln2(x) ) ) )
 *   logits = lm_head( ln_f(x) )
 *   loss   = mean cross-entropy of the next byte
 *
 * A tt_model holds the shards of one pipeline stage (its chunks of blocks;
 * the first chunk of the model also the embeddings, the last ln_f, lm_head
 * and the loss) for one TP rank. On a single virtual GPU it is the whole
 * model. */
#ifndef TT_MODEL_H
#define TT_MODEL_H

#include <stdint.h>
#include "tt/comm/grid.h"
#include "tt/core/config.h"
#include "tt/core/params.h"

#define TT_MAX_CHUNKS 16
/* The most blocks a model may have (--layers, a checkpoint's layers): the
 * stage split's search is O(K L^2), so this bound is also its time bound. */
#define TT_MAX_LAYERS 1024

/* Which part of the global model this virtual GPU holds. The blocks come in
 * chunks of consecutive layers: one chunk [layer_begin, layer_end) unless
 * nchunks > 1 (interleaved pipeline: chunk j is [chunk_begin[j],
 * chunk_end[j]), in increasing order). first_stage: holds the embeddings
 * (global chunk 0); last_stage: holds ln_f, lm_head and the loss. */
typedef struct {
    int tp_rank, tp_size;       /* tensor-parallel coordinate */
    int layer_begin, layer_end; /* blocks [layer_begin, layer_end) when nchunks <= 1 */
    int first_stage, last_stage;
    int mlp_gather;             /* --tp-mlp gather: all-gather fc1's output */
    int recompute;              /* TT_RECOMPUTE_* (tt/core/config.h) */
    int sp;                     /* --sequence-parallel (with tp_size > 1): the
                                   LayerNorm and residual regions keep N/tp rows */
    int split_w;                /* 1: zero-bubble schedules run a block's backward as B
                                   (input gradient) and, later, W (weight gradients), so
                                   each slot also keeps its linears' output gradients */
    int nchunks;                /* 0 or 1: one chunk; else the ranges below */
    int zero_stage, dp_size, dp_rank; /* --zero: the table is partitioned over the DP
                                 group (tt_params_set_zero); 0: not */
    int chunk_begin[TT_MAX_CHUNKS], chunk_end[TT_MAX_CHUNKS];
} tt_shard_spec;

/* Indices into the parameter table of one block's tensors. */
typedef struct {
    int ln1_w, ln1_b;
    int q_w, q_b, k_w, k_b, v_w, v_b;
    int proj_w, proj_b;
    int ln2_w, ln2_b;
    int fc1_w, fc1_b, fc2_w, fc2_b;
} tt_block_idx;

/* Activations of one block for one micro-batch (N = B*T rows), kept for the
 * backward pass. Cl = local attention width, Hl = local MLP width. With
 * sequence parallelism x_in, ln1, x_mid, ln2 and their means and rstds hold
 * only this TP rank's N/tp rows (Ns); the gathered LayerNorm outputs the
 * linears read are not kept but gathered again in the backward. */
typedef struct {
    float *x_in;          /* N,C   block input (residual stream) */
    float *ln1;           /* N,C */
    float *ln1_mean, *ln1_rstd; /* N */
    float *q, *k, *v;     /* N,Cl */
    float *att;           /* B,NHl,T,T softmax probabilities */
    float *atty;          /* N,Cl  attention output before proj */
    float *x_mid;         /* N,C   after the attention residual */
    float *ln2;           /* N,C */
    float *ln2_mean, *ln2_rstd; /* N */
    float *fc1;           /* N,Hl  pre-activation */
    float *gelu;          /* N,Hl */
    float *fc1_full, *gelu_full; /* tp,N,Hl  gathered (--tp-mlp gather only) */
    /* split_w only: the output gradients B leaves for W, which multiplies
     * them with the kept inputs above (NULL otherwise). */
    float *dq, *dk, *dv;  /* N,Cl */
    float *dproj, *dfc2;  /* N,C */
    float *dln1, *dln2;   /* N,C  the LayerNorms' output gradients */
    float *dfc1;          /* N,Hl */
} tt_block_acts;

/* One block's activations in the model's block pool (slots.c), lent to the
 * slot of whichever chunk's micro-batch holds it. */
typedef struct tt_block_slot {
    int in_use;
    tt_block_acts a;
    size_t bytes;
} tt_block_slot;

/* Everything one (micro-batch, chunk) keeps between its forward and its
 * backward: a pipeline stage holds as many of these as it has micro-batches
 * in flight, so they come from pools that grow to the schedule's peak. A
 * slot's own buffers (the chunk's output, the tokens) are the same for every
 * chunk; its blocks' activations come from a pool of blocks and the head's
 * buffers (lnf .. losses) from a pool of heads, lent while the slot is held.
 * So a stage keeps as many slots, blocks and heads as its schedule holds at
 * once, whatever chunks they belong to. */
typedef struct tt_slot {
    int in_use;
    int chunk;             /* local chunk index */
    int B;                 /* sequences in this micro-batch */
    int *idx, *targets;    /* B,T (chunks with the embeddings / the loss) */
    tt_block_acts *acts;   /* per block of the chunk; acts[0].x_in is the input */
    /* x_out and lnf hold this rank's B*T/tp rows under sequence parallelism */
    float *x_out;          /* B,T,C  output of the chunk's last block */
    float *lnf, *lnf_mean, *lnf_rstd; /* B,T,C ; B,T ; B,T  (last chunk) */
    float *logits;         /* B,T,Vl */
    float *probs;          /* B,T,Vl  softmax of the logits, for the backward */
    float *losses;         /* B,T */
    size_t bytes;          /* host memory of this slot's own buffers */
    tt_block_slot **lent;  /* [the most blocks of a chunk] the pool's blocks in acts */
    struct tt_slot *head;  /* the head pool's entry lent to it (NULL: none) */
} tt_slot;

typedef struct {
    tt_config cfg;
    tt_shard_spec sh;
    const tt_grid *grid;   /* TP communication; NULL on one virtual GPU */
    int Vp;                /* vocabulary padded to a multiple of tp_size */
    int Vl, v0;            /* local vocabulary rows [v0, v0+Vl) */
    int NHl, Cl, Hl;       /* local heads, attention width, MLP width */
    tt_params P;
    int tok_emb, pos_emb, ln_f_w, ln_f_b, lm_head; /* table indices or -1 */
    int nl;                /* local blocks */
    tt_block_idx *blk;     /* [nl], in global layer order */
    int nchunks;
    int chunk_first[TT_MAX_CHUNKS], chunk_len[TT_MAX_CHUNKS]; /* local block ranges */

    /* activation slots for micro-batches of up to Bmax sequences */
    int Bmax;
    int nslots, slots_cap;
    tt_slot **slots;
    int nb_max;            /* the most blocks of a local chunk, at least 1 (a slot's acts) */
    int nblocks, blocks_cap;
    tt_block_slot **blocks; /* the block pool (see tt_slot) */
    int nheads, heads_cap;
    tt_slot **heads;       /* holders of the head's buffers only (see tt_slot) */
    tt_slot *cur;          /* the slot of the last tt_model_forward */
    float *logits;         /* cur's logits (B,T,Vl), for generation */

    /* gradient scratch, shared: one backward runs at a time */
    float *dres;           /* B,T,C   gradient of the residual stream */
    float *dln;            /* B,T,C   gradient of ln_f's output */
    float *dtmp;           /* B,T,max(C,Hl,Cl,Vl) */
    float *dq, *dk, *dv, *datty; /* B,T,Cl */
    float *dfc1;           /* B,T,Hl */
    float *dfull, *dfull2; /* tp,B,T,Hl  (--tp-mlp gather only) */
    float *datt_scratch;   /* T,T */
    /* sequence parallelism only (NULL otherwise): */
    float *sp_full;        /* B,T,C     a gathered LayerNorm output or gradient */
    float *sp_part;        /* B,T/tp,C  a reduce-scattered gradient or sum */
    float *sp_lng;         /* 4C        LayerNorm gradients of this rank's rows */
    float *ln_sink;        /* 2C: where B puts the LayerNorm gains' gradients that W
                              makes again (sh.split_w only) */
    size_t err_bytes;      /* the scratch above, in the memory account */
    /* Called as the backward finishes the gradients of a unit (ZeRO's
     * units: the head, a block, the embeddings), with a tensor of it;
     * NULL: nothing (ZeRO-2 and 3 install their reduce-scatter here, plain
     * DP with overlap the start of a bucket's all-reduce). */
    void (*grads_ready)(void *ctx, tt_params *P, int tensor);
    void *grads_ready_ctx;
    /* Called just before the forward or the backward reads the weights of
     * a unit, with a tensor of it; NULL: nothing (ZeRO-3 installs its
     * all-gather of the unit here). */
    void (*weights_needed)(void *ctx, tt_params *P, int tensor);
    void *weights_needed_ctx;
    /* --recompute: the one block's activations the slots share (full: all
     * but the input; selective: the attention probabilities), rebuilt in
     * each block's backward; NULL pointers when not recomputed. */
    tt_block_acts work;
    size_t work_bytes;
    int tracked;           /* allocations booked in the virtual GPU's account */
} tt_model;

/* Builds the parameter table for (cfg, sh), allocates it, and initialises the
 * weights with the layout-independent scheme; activations are for
 * micro-batches of up to Bmax sequences (Bmax = 0: parameters only). With
 * sh->tp_size > 1, set m->grid before the first forward. */
void tt_model_init(tt_model *m, const tt_config *cfg, const tt_shard_spec *sh,
                   int Bmax, uint64_t seed);
void tt_model_free(tt_model *m);
/* The parameter table of shard sh, built but not allocated (no buffers): what
 * another rank holds, for gathering and file offsets. */
void tt_model_shard_table(tt_params *P, const tt_config *cfg, const tt_shard_spec *sh);
/* The shard spec of the whole model on one virtual GPU. */
tt_shard_spec tt_shard_whole(const tt_config *cfg);

/* Rows of the residual stream a micro-batch of B sequences keeps on this
 * GPU: B*T, or B*T/tp with sequence parallelism (what the pipeline sends). */
int tt_model_rows(const tt_model *m, int B);

/* A free activation slot for local chunk j and a micro-batch of B sequences,
 * with its blocks' activations (and the head's buffers, for the model's last
 * chunk) lent from their pools (each allocated the first time its pool runs
 * dry). */
tt_slot *tt_slot_acquire(tt_model *m, int j, int B);
/* Grows the pools to `slots` slots, `blocks` blocks' activations and `heads`
 * of the head's buffers, so that a schedule holding that many at once
 * allocates nothing while it runs (tt_schedule_buffers counts them). Each
 * slot is booked with the blocks allocated beside it, as "one more
 * micro-batch"; the heads come first. */
void tt_slot_reserve(tt_model *m, int slots, int blocks, int heads);
void tt_slot_release(tt_model *m, tt_slot *s);

/* Forward of the slot's chunk. The input is idx when the chunk starts with the
 * embeddings, else s->acts[0].x_in (received from the previous chunk). Returns
 * the mean loss over the B*T tokens when the chunk ends with the loss and
 * targets is not NULL (logits only when NULL), else 0; the output is in
 * s->x_out. */
double tt_chunk_forward(tt_model *m, tt_slot *s, const int *idx, const int *targets);
/* Backward of the slot's chunk: dout is the gradient of s->x_out (NULL for
 * the chunk with the loss, which starts from dloss = the weight of each
 * token's loss in the total, e.g. 1 / tokens of the global batch).
 * Accumulates into the gradients; leaves the gradient of the chunk's input in
 * m->dres. */
void tt_chunk_backward(tt_model *m, tt_slot *s, const float *dout, float dloss);
/* The same backward in two parts (zero-bubble schedules, sh.split_w): B
 * leaves the gradient of the chunk's input in m->dres and computes the
 * gradients of the head and the embeddings; W, run any time after it and
 * before the slot is released, adds the gradients of the blocks' weights,
 * biases and LayerNorm gains from what B kept in the slot. Per micro-batch,
 * B then W gives the same bits as tt_chunk_backward. grads_ready fires for a
 * block in W, for the head and the embeddings in B: when that unit is done. */
void tt_chunk_backward_input(tt_model *m, tt_slot *s, const float *dout, float dloss);
void tt_chunk_backward_weights(tt_model *m, tt_slot *s);

/* The whole model on one GPU, one micro-batch at a time (local chunk 0 holds
 * everything): forward of B sequences (B <= Bmax), returning the mean loss
 * (targets may be NULL: logits only, in m->logits); backward of that forward. */
double tt_model_forward(tt_model *m, const int *idx, const int *targets, int B);
void tt_model_backward(tt_model *m, float dloss);

/* The blocks of each local chunk of shard sh (nb[j], j < its chunks). */
void tt_chunk_blocks(const tt_shard_spec *sh, int *nb /* [nchunks] */);

/* An upper bound, in bytes, of what tt_model_init and the schedule's slots
 * allocate for shard sh: the four parameter buffers, the gradient scratch
 * for Bmax sequences and `slots` activation slots of every local chunk (and
 * as many of the head's buffers)
 * (src/model/estimate.c). Computed in 64 bits with every product checked;
 * UINT64_MAX when it does not fit, so nothing is allocated to find out. */
uint64_t tt_model_bytes_bound(const tt_config *cfg, const tt_shard_spec *sh, int Bmax,
                              int slots);

/* Model FLOPs of one forward+backward of B*T tokens (matrix products and
 * attention, as 2 per multiply-add; the backward counted as twice the forward). */
double tt_model_flops(const tt_config *cfg, int B);

/* What recomputation (TT_RECOMPUTE_*) runs again in the backward of B*T
 * tokens, in the same units: full, the blocks' forward (not lm_head's, which
 * keeps its input; Narayanan et al.'s 96 B s l h^2 (1 + s/6h + V/16lh) in
 * all); selective, the attention's two products. */
double tt_model_recompute_flops(const tt_config *cfg, int B, int recompute);

#endif
