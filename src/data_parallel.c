/* data_parallel.c - bucketed gradient all-reduce and the replica check. */
#include "tt/data_parallel.h"
#include "tt/comm.h"

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
    if (g->dp == 1)
        return;
    float *grads = p->mem + p->total;
    size_t b = bucket_floats(bucket_bytes);
    for (size_t off = 0; off < p->total; off += b) {
        size_t n = p->total - off < b ? p->total - off : b;
        tt_allreduce(g, TT_GROUP_DP, grads + off, (int)n, MPI_FLOAT, MPI_SUM);
    }
}

int tt_dp_replicas_identical(const tt_grid *g, const tt_params *p)
{
    /* weights | grads | m | v: skip the gradients, compare the rest. */
    uint32_t crc = tt_crc32(0, p->mem, p->total * sizeof(float));
    crc = tt_crc32(crc, p->mem + 2 * p->total, 2 * p->total * sizeof(float));
    unsigned int mine = crc, *all = malloc((size_t)g->world_size * sizeof *all);
    /* Gathered over the world and booked as OTHER (a check, not training
     * traffic); every rank then judges every DP group, so all agree. */
    tt_allgather(g, TT_GROUP_OTHER, &mine, all, 1, MPI_UNSIGNED);
    int same = 1;
    for (int r = 0; r < g->world_size; r++) {
        int tp_rank = r % g->tp, pp_rank = r / (g->tp * g->dp);
        same &= all[r] == all[tt_grid_rank_of(g, 0, pp_rank, tp_rank)];
    }
    free(all);
    return same;
}
