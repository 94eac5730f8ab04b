/* data_parallel.c - bucketed gradient all-reduce, the traffic it implies,
 * and the replica checks. */
#include "tt/parallel/data_parallel.h"
#include "tt/comm/comm.h"
#include "tt/core/faults.h"

#include <stdint.h>
#include <stdlib.h>

static size_t bucket_floats(size_t bucket_bytes)
{
    size_t n = bucket_bytes / sizeof(float);
    if (n < 1)
        n = 1;
    if (n > (size_t)1 << 30) /* MPI counts are int */
        n = (size_t)1 << 30;
    return n;
}

long tt_dp_buckets(size_t n_floats, size_t bucket_bytes)
{
    size_t b = bucket_floats(bucket_bytes);
    return (long)((n_floats + b - 1) / b);
}

void tt_dp_sync_grads(const tt_grid *g, tt_params *p, size_t bucket_bytes)
{
    if (g->dp == 1 || tt_fault_active(TT_FAULT_DP_NO_SYNC)) /* a planted fault (--inject-bug) */
        return;
    float *grads = tt_params_buffer(p, TT_G);
    size_t b = bucket_floats(bucket_bytes);
    for (size_t off = 0; off < p->total; off += b) {
        size_t n = p->total - off < b ? p->total - off : b;
        tt_allreduce(g, TT_GROUP_DP, grads + off, (int)n, MPI_FLOAT, MPI_SUM);
    }
}

void tt_dp_expected_traffic(tt_comm_stats *add, const tt_params *p, size_t bucket_bytes,
                            long steps)
{
    /* The whole gradient buffer once per step, in buckets (tt_dp_sync_grads). */
    add->c[TT_GROUP_DP][TT_OP_ALLREDUCE].calls += steps * tt_dp_buckets(p->total, bucket_bytes);
    add->c[TT_GROUP_DP][TT_OP_ALLREDUCE].bytes += steps * 4 * (long long)p->total;
}

int tt_dp_replicas_identical(const tt_grid *g, const tt_params *p)
{
    /* Weights and both moments (the gradients differ until synchronised). */
    const tt_kind kept[] = {TT_W, TT_M, TT_V};
    uint32_t crc = 0;
    for (int k = 0; k < 3; k++)
        crc = tt_crc32(crc, tt_params_buffer(p, kept[k]), p->total * sizeof(float));
    return tt_group_all_equal(g, TT_GROUP_DP, crc);
}

int tt_tp_replicated_identical(const tt_grid *g, const tt_params *p)
{
    uint32_t crc = 0;
    for (int i = 0; i < p->n; i++) {
        const tt_tensor *t = &p->t[i];
        if (!tt_tensor_replicated(t))
            continue;
        crc = tt_crc32(crc, t->w, t->numel * sizeof(float));
        crc = tt_crc32(crc, t->m, t->numel * sizeof(float));
        crc = tt_crc32(crc, t->v, t->numel * sizeof(float));
    }
    return tt_group_all_equal(g, TT_GROUP_TP, crc);
}
