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

/* All-reduce (sum) of the gradient buffer over the DP group in buckets of at
 * most bucket_bytes, front to back. Each replica's gradient already carries the
 * global 1/(B*T) of the mean loss, so the sum is the gradient of the global
 * batch: PyTorch DDP's average of per-replica means, without the division. */
void tt_dp_sync_grads(const tt_grid *g, tt_params *p, size_t bucket_bytes);

/* Number of all-reduce calls tt_dp_sync_grads makes for n floats. */
long tt_dp_buckets(size_t n_floats, size_t bucket_bytes);

/* The DP traffic of tt_dp_sync_grads on one GPU of a DP group of more than
 * one, for `steps` training steps, added to *add (doc/communication.md). */
void tt_dp_expected_traffic(tt_comm_stats *add, const tt_params *p, size_t bucket_bytes,
                            long steps);

/* 1 when every DP replica holds the same bytes of weights and Adam moments
 * (a CRC of the buffers compared across the group; booked as other). The
 * verdict is the same on every rank. */
int tt_dp_replicas_identical(const tt_grid *g, const tt_params *p);
/* 1 when the replicated tensors (LayerNorms, row-parallel biases, positions)
 * hold the same bytes on every TP rank. */
int tt_tp_replicated_identical(const tt_grid *g, const tt_params *p);

#endif
