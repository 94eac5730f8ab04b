/* tt/core/params.h - the parameter table: every tensor is a shard of a named global
 * tensor, and all shards live in one contiguous buffer per kind (weights,
 * gradients, Adam m, Adam v), carved by the table.
 *
 * A shard knows its global name and shape and which slice of it it holds:
 * a run of rows (vocabulary-parallel / column-parallel tensors), a run of
 * columns (row-parallel weights), or the whole tensor (replicated). On one
 * virtual GPU every shard is the whole tensor; tensor parallelism only changes
 * the slice, not the code that walks the table. */
#ifndef TT_PARAMS_H
#define TT_PARAMS_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    TT_SPLIT_NONE = 0, /* replicated: every TP rank holds all of it */
    TT_SPLIT_ROWS = 1, /* dimension 0 split (and 1-D tensors split like rows) */
    TT_SPLIT_COLS = 2  /* dimension 1 split */
} tt_split;

#define TT_NAME_MAX 64

typedef struct {
    char name[TT_NAME_MAX]; /* global name, e.g. "blocks.3.attn.q.weight" */
    int ndim;               /* 1 or 2 */
    int gshape[2];          /* global shape (real rows; gshape[1] = 1 when 1-D) */
    int lshape[2];          /* local shape (may include vocabulary padding rows) */
    tt_split split;         /* which dimension is sliced */
    int offset;             /* first global row (ROWS) or column (COLS) held */
    int decay;              /* AdamW weight decay applies (2-D tensors) */
    size_t numel;           /* local elements = lshape[0] * lshape[1] */
    size_t off;             /* offset of this shard in each of the kind buffers */
    int unit;               /* ZeRO: its unit (tt_zero_part) */
    float *w, *g, *m, *v;   /* views: weights, gradients, Adam moments (= tt_tensor_data) */
} tt_tensor;

/* The four arrays every shard has, each kept in one contiguous buffer per
 * table: weights, their gradients, Adam's first and second moments. */
typedef enum { TT_W, TT_G, TT_M, TT_V, TT_NKINDS } tt_kind;

/* ZeRO's partition of the table over a DP group (doc/design.md section 10). The
 * table falls into units, the runs of tensors one step of the backward
 * completes together: the embeddings, each block, the head (ln_f, lm_head).
 * Each unit is padded with zeros to a multiple of `parts` elements and cut
 * into `parts` equal pieces; DP rank `rank` owns piece `rank` of every unit.
 * So every collective works on one unit's contiguous run, and a unit's
 * gradients can be reduced the moment its backward ends (stage 2). Padding
 * is at most parts - 1 elements per unit, at the unit's end; it belongs to
 * no tensor, stays zero, and is booked with the buffers that hold it. */
typedef struct {
    int stage;              /* 0: no ZeRO (every kind whole on every replica) */
    int parts, rank;        /* DP group size and this GPU's DP rank */
    int nunits;
    size_t *ubegin;         /* [nunits + 1]: flat start of each unit, padding
                               included (ubegin[nunits] = padded) */
    size_t padded;          /* the padded flat length (weights, stage-1 gradients) */
    size_t shard;           /* owned elements: padded / parts; unit u's piece is
                               at ubegin[u] / parts of the owned buffers */
    size_t max_unit;        /* the largest padded unit (stage 2's scratch) */
} tt_zero_part;

typedef struct {
    int n, cap;
    tt_tensor *t;
    size_t total;           /* local elements over all shards (per kind) */
    float *buf[TT_NKINDS];  /* one allocation per kind, carved by the table */
    int tracked;            /* booked in the virtual GPU's memory account */
    tt_zero_part z;         /* ZeRO (z.stage > 0): see tt_params_set_zero */
    float *gown;            /* ZeRO stage 2: the summed gradient of the owned
                               pieces (z.shard floats); stage 1 keeps it in
                               place in buf[TT_G] */
    float *wgather;         /* ZeRO stage 3: one (padded) unit's whole weights,
                               z.max_unit floats; every t->w points into it */
    int wunit;              /* the unit wgather holds, -1 none (stage 3) */
} tt_params;

/* Adds a tensor to the table (before tt_params_alloc). The slice is rows or
 * columns [offset, offset + local) of the dimension named by split; local may
 * run past the global size (vocabulary padding), those elements stay zero.
 * Returns the tensor's index. */
int tt_params_add(tt_params *p, const char *name, int ndim, int rows, int cols,
                  tt_split split, int offset, int local);
/* Allocates the four buffers (zeroed) and points every shard into them. */
void tt_params_alloc(tt_params *p);
/* Computes every shard's `off` and the table's `total` (tt_params_alloc does
 * this first; a table that is never allocated can call it alone). */
void tt_params_plan(tt_params *p);
/* Before tt_params_alloc (or on a table never allocated, to know another
 * rank's partition): ZeRO stage 1, 2 or 3 over a DP group of `parts` GPUs
 * of which this is `rank`; stage 0 or parts 1 leaves the table unsharded.
 * The offsets then include each unit's padding. Allocation follows the
 * stage: the Adam moments are z.shard floats (t->m, t->v are NULL: use
 * tt_owned_data); stage 1 keeps the whole padded gradient buffer; stage 2
 * keeps a scratch of the largest unit (every unit's t->g points into it: one
 * unit's backward accumulates there until tt_zero_reduce_unit takes it) and
 * the owned pieces' gradient (p->gown); the weights stay whole (padded).
 * Stage 3 also keeps only the owned pieces of the weights (buf[TT_W], z.shard
 * floats, like the moments) and a gather buffer of the largest unit
 * (p->wgather): every t->w points into it at the tensor's place within its
 * unit, so t->w is valid only while p->wunit is t's unit (the model's
 * weights_needed hook all-gathers a unit there before it is used; p->wunit
 * records which, for a reader or a debugger: nothing checks it, which is how
 * --inject-bug stale-gather reads a stale unit). */
void tt_params_set_zero(tt_params *p, int stage, int parts, int rank);
/* Whether this GPU holds only its owned pieces of kind k (read them with
 * tt_tensor_owned / tt_owned_data): the moments and the reduced gradients
 * under any ZeRO stage, the weights under stage 3. */
int tt_kind_sharded(const tt_params *p, tt_kind k);
/* Bytes of the four kinds of a planned table (tt_params_set_zero) as
 * tt_params_alloc books them, by category: weights (stage 3: owned pieces +
 * gather buffer), gradients (stage 2: scratch + owned pieces), optimizer
 * (Adam m and v). */
void tt_params_zero_bytes(const tt_params *p, size_t *weights, size_t *grads,
                          size_t *optimizer);
/* The local elements [*a, *b) of shard t (row-major over lshape) whose
 * summed gradient and Adam moments this GPU owns: all of them without
 * ZeRO, the part inside this rank's piece of t's unit with it (one
 * contiguous run). Returns *b - *a. */
size_t tt_tensor_owned(const tt_params *p, const tt_tensor *t, size_t *a, size_t *b);
/* Where this GPU keeps element *a (of tt_tensor_owned) of kind k of t: the
 * weights of the shard, the summed gradient (after the DP reduction) and the
 * Adam moments of the owned part; n = *b - *a elements follow. Without ZeRO:
 * tt_tensor_data(t, k) + a. */
float *tt_owned_data(const tt_params *p, const tt_tensor *t, tt_kind k, size_t a);
/* Unit u's padded run [begin, begin + n) of the flat buffers, and the first
 * element of this rank's piece of it (begin + rank * n / parts). */
void tt_zero_unit(const tt_params *p, int u, size_t *begin, size_t *n, size_t *lo);

/* The unit of the backward t belongs to, as a key equal for the tensors of
 * one unit (with or without ZeRO): its block's number, -1 the embeddings,
 * -2 the head. The DP overlap's buckets wait for these units. */
int tt_tensor_unit_key(const tt_tensor *t);

void tt_params_free(tt_params *p);
int tt_params_find(const tt_params *p, const char *name); /* -1 if absent */

/* The buffer of one kind: p->total floats, every shard at its `off` (under
 * ZeRO see tt_params_set_zero for each kind's size). */
float *tt_params_buffer(const tt_params *p, tt_kind k);
/* One shard's array of one kind (numel floats, real rows first). */
float *tt_tensor_data(const tt_tensor *t, tt_kind k);

/* Whether the copy of t held by the GPU at (dp_rank, tp_rank) is the one that
 * counts: every DP replica holds the same values, so only DP rank 0's copy
 * counts; a replicated tensor is also the same on every TP rank, so only TP
 * rank 0's copy of it counts. Norms, checkpoints and the oracle all ask this,
 * so each element is counted, written and compared exactly once. */
int tt_tensor_canonical(const tt_tensor *t, int dp_rank, int tp_rank);
/* Whether t is whole on every TP rank (not split), so identical on all of them. */
int tt_tensor_replicated(const tt_tensor *t);
/* Where the shard's element (0, 0) sits in its global tensor: row r0 of a
 * row slice, column c0 of a column slice, (0, 0) for a whole tensor. Every
 * copy between a shard and the global layout starts from here. */
void tt_tensor_origin(const tt_tensor *t, int *r0, int *c0);

/* Number of the shard's local rows that are real (not vocabulary padding). */
int tt_tensor_real_rows(const tt_tensor *t);

/* Layout-independent initialisation: element (r, c) of global tensor `name` is
 * a pure function of (seed, name, r*gcols + c), so every rank can generate
 * exactly its slice. Weights ~ N(0, std), biases 0, LayerNorm weights 1.
 * Residual projections (attn.proj, mlp.fc2) use std/sqrt(2 n_layers), as
 * GPT-2 does. Padding rows are left zero. Under ZeRO-3 each unit is built
 * whole in the gather buffer and only the owned piece kept (no
 * communication: the values are the unsharded ones). */
void tt_params_init(tt_params *p, uint64_t seed, int n_layers);

/* Standard normal deviate number `index` of the stream (seed, name). */
float tt_hash_normal(uint64_t seed, const char *name, uint64_t index);
/* Uniform in [0,1) from the same kind of counter-based hash. */
double tt_hash_uniform(uint64_t seed, uint64_t stream, uint64_t index);

void tt_params_zero_grads(tt_params *p);

/* Copies the real elements of shard t between its local buffer `shard`
 * (lshape, row-major) and the whole global tensor `whole` (gshape): into the
 * whole tensor when to_whole, else out of it (padding rows left alone). */
void tt_slice_copy(const tt_tensor *t, float *shard, float *whole, int to_whole);
/* Number of real elements of the shard (padding rows excluded). */
size_t tt_tensor_real_numel(const tt_tensor *t);

#endif
