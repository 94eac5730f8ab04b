/* tt/parallel/data_parallel.h - data parallelism: every DP replica holds the same
 * shards, trains on its B/dp sequences of the global batch, and the gradients
 * are summed over the DP group before the update, so all replicas apply the
 * same update and stay bit-identical. */
#ifndef TT_DATA_PARALLEL_H
#define TT_DATA_PARALLEL_H

#include <stddef.h>
#include "tt/comm/comm.h"
#include "tt/comm/grid.h"
#include "tt/core/params.h"
#include "tt/model/model.h"

/* All-reduce (sum) of the gradient buffer over the DP group in buckets of at
 * most bucket_bytes (runs from the buffer's start). Each replica's gradient
 * already carries the global 1/(B*T) of the mean loss, so the sum is the
 * gradient of the global batch: PyTorch DDP's average of per-replica means,
 * without the division. After tt_dp_attach with overlap, the buckets the
 * backward started are waited for and the rest started and waited for;
 * without overlap each bucket, front to back, is started and waited for. The
 * calls are the same non-blocking all-reduce either way (tt_iallreduce:
 * MPI's, or the pair exchange on dp 2), so both modes sum in the same order:
 * the same bits (doc/communication.md). */
void tt_dp_sync_grads(const tt_grid *g, tt_params *p, size_t bucket_bytes);
/* Installs the DP overlap as m's grads_ready hook (dp > 1 and no ZeRO; else
 * nothing): a bucket's all-reduce starts as soon as every unit it touches has
 * had the last of its micro_batches backward passes of the step. overlap 0
 * (--no-overlap): the hook does nothing, every bucket waits for the end.
 * bucket_bytes must be the one tt_dp_sync_grads is given. */
void tt_dp_attach(tt_model *m, const tt_grid *g, size_t bucket_bytes, int micro_batches,
                  int overlap);

/* Under ZeRO (p->z.stage > 0) tt_dp_sync_grads does not all-reduce: stage 1
 * reduce-scatters the padded gradient buffer unit by unit (no buckets: the
 * units are the buckets), each piece left at its own place, so each DP rank
 * holds the sum of the pieces it owns; stage 2 has done that as each unit's
 * backward ended (tt_zero_reduce_unit) and does nothing. */

/* ZeRO stage 2, as the backward of the unit holding tensor `tensor` ends
 * (the model's grads_ready hook; grid is the tt_grid): the scratch holding
 * that unit's gradient of one micro-batch is reduce-scattered over the DP
 * group, the owned piece's sum added to p->gown, the scratch zeroed for the
 * next unit. Collective over DP. */
void tt_zero_reduce_unit(void *grid, tt_params *p, int tensor);
/* ZeRO stage 3, just before the forward or backward reads the weights of
 * the unit holding tensor `tensor` (the model's weights_needed hook; grid is
 * the tt_grid): every DP rank's owned piece of the unit is all-gathered into
 * the table's gather buffer (p->wgather), which every t->w points into.
 * Every use gathers anew (twice per unit and micro-batch in training).
 * Collective over DP: every DP rank must run the same forwards and
 * backwards (eval equalises its windows for this). */
void tt_zero_gather_unit(void *grid, tt_params *p, int tensor);
/* Installs tt_zero_reduce_unit as m's hook when m's table is under ZeRO-2
 * or 3, and tt_zero_gather_unit under ZeRO-3. */
void tt_zero_attach(tt_model *m, const tt_grid *g);
/* ZeRO 1 and 2, after the update of the owned pieces: the weights are
 * all-gathered over the DP group unit by unit (in place: every piece sits at
 * its rank's place in the padded unit), so every replica holds the whole
 * weights. Stage 3 keeps its pieces (nothing to do). */
void tt_zero_gather_weights(const tt_grid *g, tt_params *p);
/* The DP traffic under ZeRO (p->z.stage > 0) on one GPU, for `steps` steps
 * of `micro_batches` micro-batches, added to *add, in buffer bytes as comm
 * counts them (doc/memory.md): per step, stage 1 one reduce-scatter and one
 * all-gather per unit, together 4 x padded bytes each way; stage 2 the
 * reduce-scatters once per micro-batch; stage 3 also the all-gathers
 * twice per micro-batch (before each forward and each backward). */
void tt_zero_expected_traffic(tt_comm_stats *add, const tt_params *p, int micro_batches,
                              long steps);

/* Number of all-reduce calls tt_dp_sync_grads makes for n floats. */
long tt_dp_buckets(size_t n_floats, size_t bucket_bytes);

/* The DP traffic of tt_dp_sync_grads on one GPU of a DP group of more than
 * one, for `steps` training steps, added to *add (doc/communication.md). */
void tt_dp_expected_traffic(tt_comm_stats *add, const tt_params *p, size_t bucket_bytes,
                            long steps);

/* 1 when every DP replica holds the same bytes of weights and Adam moments
 * (a CRC of the buffers compared across the group; booked as other); under
 * ZeRO, where each replica holds other moments, the weights only; under
 * ZeRO-3 nothing is replicated and the answer is 1. The verdict is the same
 * on every rank. */
int tt_dp_replicas_identical(const tt_grid *g, const tt_params *p);
/* 1 when the replicated tensors (LayerNorms, row-parallel biases, positions)
 * hold the same bytes on every TP rank. */
int tt_tp_replicated_identical(const tt_grid *g, const tt_params *p);

#endif
