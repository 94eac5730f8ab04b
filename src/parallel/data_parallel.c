/* data_parallel.c - bucketed gradient all-reduce (overlapped with the
 * backward through the model's grads_ready hook), ZeRO's reduce-scatters and
 * weight all-gathers, the traffic they imply, and the replica checks. */
#include "tt/parallel/data_parallel.h"
#include "tt/comm/comm.h"
#include "tt/comm/watchdog.h"
#include "tt/core/common.h"
#include "tt/core/events.h"
#include "tt/core/faults.h"
#include "tt/core/vclock.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What the DP calls are for, as a --watchdog report names a stuck one. */
#define WHY_BUCKET "gradient all-reduce of bucket %d of %d"
#define WHY_UNIT_RS "gradient reduce-scatter of unit %d (ZeRO)"
#define WHY_UNIT_AG "weight all-gather of unit %d (ZeRO)"

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

/* ZeRO: unit u's reduce-scatter over DP, in place on its padded run `run`
 * (n floats): MPI leaves this rank's summed piece at the start of it. */
static void reduce_scatter_unit(const tt_grid *g, const tt_params *p, int u, float *run,
                                size_t n)
{
    tt_watch_purpose(WHY_UNIT_RS, u, 0);
    tt_reduce_scatter(g, TT_GROUP_DP, MPI_IN_PLACE, run, (int)(n / (size_t)p->z.parts),
                      MPI_FLOAT);
}

/* ---- the DP all-reduce, overlapped with the backward ----------------------
 * The buckets are runs of bucket_floats() of the gradient buffer from its
 * start, as without overlap. The table is in layer order, so the backward
 * finishes the last buckets first: a bucket starts (non-blocking) once every
 * unit it touches (the head, a block, the embeddings: the model's
 * grads_ready hook) has had its last micro-batch's backward, and
 * tt_dp_sync_grads waits for all of them. Both modes make the same
 * non-blocking calls on the same runs, so the sums are the same bits; only
 * when each starts differs. One process is one GPU: one state. */
typedef struct {
    int on;               /* attached: dp > 1, no ZeRO */
    int overlap;          /* start buckets during the backward (else all at the end) */
    int passes;           /* backward passes of a unit per step: the micro-batches */
    size_t bucket;        /* floats per bucket */
    long nb;              /* buckets */
    int nunits;
    int *unit_of;         /* [tensors] its unit */
    size_t *ulo, *uhi;    /* [nunits] each unit's run of the flat buffer */
    int *done;            /* [nunits] backward passes seen this step */
    char *started;        /* [nb] */
    long *order;          /* [nb] buckets in the order they were started */
    long nstarted;
    tt_coll_req *req;     /* [nb] */
    float **snap;         /* [nb] under --inject-bug early-bucket: what was sent */
} dp_overlap;
static dp_overlap ov;

/* Floats in bucket b (the last may be short). */
static size_t bucket_len(const tt_params *p, long b)
{
    const size_t off = (size_t)b * ov.bucket;
    return p->total - off < ov.bucket ? p->total - off : ov.bucket;
}

static void start_bucket(const tt_grid *g, tt_params *p, long b)
{
    float *grads = tt_params_buffer(p, TT_G);
    const size_t off = (size_t)b * ov.bucket, n = bucket_len(p, b);
    float *sent = grads + off;
    if (tt_fault_active(TT_FAULT_EARLY_BUCKET)) {
        /* The planted fault starts a bucket the backward still adds to, and
         * a buffer in flight must not change (MPI's rule): the bucket as it
         * is now goes out from a copy, and the copies' sum replaces it at the
         * wait, so both members get the same wrong sum in every run. */
        ov.snap[b] = tt_malloc(n * sizeof *sent);
        memcpy(ov.snap[b], sent, n * sizeof *sent);
        sent = ov.snap[b];
    }
    tt_iallreduce(g, TT_GROUP_DP, sent, (int)n, MPI_FLOAT, MPI_SUM, &ov.req[b]);
    ov.started[b] = 1;
    ov.order[ov.nstarted++] = b;
}

/* The hook: one more backward pass of the unit holding `tensor`. Buckets all
 * of whose units are final start, the last first (reverse layer order). */
static void dp_unit_ready(void *grid, tt_params *p, int tensor)
{
    const tt_grid *g = grid;
    if (!ov.overlap || tt_fault_active(TT_FAULT_DP_NO_SYNC))
        return;
    const int u = ov.unit_of[tensor];
    /* planted (--inject-bug early-bucket): final after the first micro-batch */
    const int need = tt_fault_active(TT_FAULT_EARLY_BUCKET) ? 1 : ov.passes;
    if (++ov.done[u] != need)
        return;
    for (long b = ov.nb - 1; b >= 0; b--) {
        if (ov.started[b])
            continue;
        const size_t lo = (size_t)b * ov.bucket, hi = lo + ov.bucket;
        int final = 1;
        for (int k = 0; k < ov.nunits && final; k++)
            if (ov.ulo[k] < hi && ov.uhi[k] > lo && ov.done[k] < need)
                final = 0;
        if (final)
            start_bucket(g, p, b);
    }
}

void tt_dp_attach(tt_model *m, const tt_grid *g, size_t bucket_bytes, int micro_batches,
                  int overlap)
{
    tt_params *p = &m->P;
    if (g->dp == 1 || p->z.stage > 0 || p->n == 0)
        return;
    free(ov.unit_of);
    free(ov.ulo);
    free(ov.uhi);
    free(ov.done);
    free(ov.started);
    free(ov.order);
    free(ov.req);
    free(ov.snap);
    memset(&ov, 0, sizeof ov);
    ov.on = 1;
    ov.overlap = overlap;
    ov.passes = micro_batches;
    ov.bucket = bucket_floats(bucket_bytes);
    ov.nb = tt_dp_buckets(p->total, bucket_bytes);
    ov.unit_of = tt_malloc((size_t)p->n * sizeof *ov.unit_of);
    ov.ulo = tt_malloc((size_t)p->n * sizeof *ov.ulo);
    ov.uhi = tt_malloc((size_t)p->n * sizeof *ov.uhi);
    ov.done = tt_calloc((size_t)p->n, sizeof *ov.done);
    for (int i = 0; i < p->n; i++) {
        const tt_tensor *t = &p->t[i];
        if (i == 0 || tt_tensor_unit_key(t) != tt_tensor_unit_key(&p->t[i - 1]))
            ov.ulo[ov.nunits++] = t->off;
        ov.unit_of[i] = ov.nunits - 1;
        ov.uhi[ov.nunits - 1] = t->off + t->numel;
    }
    ov.started = tt_calloc((size_t)ov.nb, 1);
    ov.order = tt_malloc((size_t)ov.nb * sizeof *ov.order);
    ov.req = tt_malloc((size_t)ov.nb * sizeof *ov.req);
    ov.snap = tt_calloc((size_t)ov.nb, sizeof *ov.snap);
    m->grads_ready = dp_unit_ready;
    m->grads_ready_ctx = (void *)g;
}

void tt_dp_sync_grads(const tt_grid *g, tt_params *p, size_t bucket_bytes)
{
    if (g->dp == 1 || tt_fault_active(TT_FAULT_DP_NO_SYNC)) /* a planted fault (--inject-bug) */
        return;
    if (p->z.stage >= 2)
        return; /* reduced micro-batch by micro-batch */
    if (p->z.stage == 1) { /* unit by unit, each piece back to its own place */
        float *grads = tt_params_buffer(p, TT_G);
        for (int u = 0; u < p->z.nunits; u++) {
            size_t begin, n, lo;
            tt_zero_unit(p, u, &begin, &n, &lo);
            reduce_scatter_unit(g, p, u, grads + begin, n);
            if (lo != begin)
                memmove(grads + lo, grads + begin, n / (size_t)p->z.parts * sizeof(float));
        }
        return;
    }
    /* From here this GPU does nothing but wait for the DP sum: the trace
     * shows that span as a wait (communication), whatever part of the rings
     * ran beside the backward before it; 0 s when they all ended earlier. */
    const double t_wait = tt_clock_now();
    if (!ov.on) { /* no hook attached: the same calls, one after another */
        float *grads = tt_params_buffer(p, TT_G);
        const size_t b = bucket_floats(bucket_bytes);
        const int nb = (int)tt_dp_buckets(p->total, bucket_bytes);
        for (size_t off = 0; off < p->total; off += b) {
            const size_t n = p->total - off < b ? p->total - off : b;
            tt_coll_req r;
            tt_iallreduce(g, TT_GROUP_DP, grads + off, (int)n, MPI_FLOAT, MPI_SUM, &r);
            tt_watch_purpose(WHY_BUCKET, (int)(off / b), nb);
            tt_coll_wait(g, &r, 0.0);
        }
    } else {
        if (ov.overlap) {
            /* What the backward has not started (a unit it never finished). */
            for (long b = ov.nb - 1; b >= 0; b--)
                if (!ov.started[b])
                    start_bucket(g, p, b);
            /* In start order: each bucket's ring follows the previous one's. */
            double end = 0.0;
            for (long i = 0; i < ov.nstarted; i++) {
                tt_watch_purpose(WHY_BUCKET, (int)ov.order[i], (int)ov.nb);
                end = tt_coll_wait(g, &ov.req[ov.order[i]], end);
            }
        } else {
            for (long b = 0; b < ov.nb; b++) { /* front to back, each waited for at once */
                start_bucket(g, p, b);
                tt_watch_purpose(WHY_BUCKET, (int)b, (int)ov.nb);
                tt_coll_wait(g, &ov.req[b], 0.0);
            }
        }
        if (tt_fault_active(TT_FAULT_EARLY_BUCKET)) /* its snapshots' sums (start_bucket) */
            for (long b = 0; b < ov.nb; b++)
                if (ov.snap[b]) {
                    memcpy(tt_params_buffer(p, TT_G) + (size_t)b * ov.bucket, ov.snap[b],
                           bucket_len(p, b) * sizeof(float));
                    free(ov.snap[b]);
                    ov.snap[b] = NULL;
                }
        memset(ov.started, 0, (size_t)ov.nb);
        memset(ov.done, 0, (size_t)ov.nunits * sizeof *ov.done);
        ov.nstarted = 0;
    }
    tt_events_add(TT_EV_WAIT, "all-reduce", "DP", t_wait, tt_clock_now(), -1, -1, -1,
                  4 * (long long)p->total);
}

void tt_zero_reduce_unit(void *grid, tt_params *p, int tensor)
{
    const tt_grid *g = grid;
    if (p->z.stage < 2)
        return;
    size_t begin, n, lo;
    const int u = p->t[tensor].unit;
    tt_zero_unit(p, u, &begin, &n, &lo);
    const size_t piece = n / (size_t)p->z.parts;
    float *scratch = tt_params_buffer(p, TT_G), *own = p->gown + begin / (size_t)p->z.parts;
    const float *sum = scratch;
    if (tt_fault_active(TT_FAULT_DP_NO_SYNC)) /* planted: this replica's own share only */
        sum = scratch + (lo - begin);
    else
        reduce_scatter_unit(g, p, u, scratch, n);
    for (size_t e = 0; e < piece; e++)
        own[e] += sum[e];
    memset(scratch, 0, n * sizeof(float));
}

void tt_zero_gather_unit(void *grid, tt_params *p, int tensor)
{
    const tt_grid *g = grid;
    if (p->z.stage < 3)
        return;
    size_t begin, n, lo;
    const int u = p->t[tensor].unit;
    tt_zero_unit(p, u, &begin, &n, &lo);
    const size_t piece = n / (size_t)p->z.parts;
    /* Gathered even when the unit is already there (the head's forward is
     * followed by its backward): every use pays its gather, as design.md
     * section 10 counts them; a run that kept it would save 4 x unit bytes. */
    tt_watch_purpose(WHY_UNIT_AG, u, 0);
    tt_allgather(g, TT_GROUP_DP, tt_params_buffer(p, TT_W) + begin / (size_t)p->z.parts,
                 p->wgather, (int)piece, MPI_FLOAT);
    p->wunit = u;
}

void tt_zero_attach(tt_model *m, const tt_grid *g)
{
    if (m->P.z.stage < 2)
        return;
    m->grads_ready = tt_zero_reduce_unit;
    m->grads_ready_ctx = (void *)g;
    if (m->P.z.stage < 3)
        return;
    m->weights_needed = tt_zero_gather_unit;
    m->weights_needed_ctx = (void *)g;
}

void tt_zero_gather_weights(const tt_grid *g, tt_params *p)
{
    if (p->z.stage == 0 || p->z.stage >= 3) /* stage 3 gathers each unit as it is used */
        return;
    float *w = tt_params_buffer(p, TT_W);
    for (int u = 0; u < p->z.nunits; u++) {
        size_t begin, n, lo;
        tt_zero_unit(p, u, &begin, &n, &lo);
        tt_watch_purpose(WHY_UNIT_AG, u, 0);
        tt_allgather(g, TT_GROUP_DP, MPI_IN_PLACE, w + begin, (int)(n / (size_t)p->z.parts),
                     MPI_FLOAT);
    }
}

void tt_zero_expected_traffic(tt_comm_stats *add, const tt_params *p, int micro_batches,
                              long steps)
{
    /* comm books a reduce-scatter by its whole input and an all-gather by
     * its whole output: one padded unit each call, so the calls of a step
     * add up to 4 x padded bytes. Stage 2 reduces every unit once per
     * micro-batch (each block sits in one chunk: one backward per
     * micro-batch). Stage 3 gathers every unit before its forward and
     * again before its backward, per micro-batch, and never after the
     * update: 2m gathers to m reduce-scatters. */
    const long long bytes = 4 * (long long)p->z.padded;
    const long rs = p->z.stage >= 2 ? micro_batches : 1;
    const long ag = p->z.stage >= 3 ? 2L * micro_batches : 1;
    add->c[TT_GROUP_DP][TT_OP_REDUCE_SCATTER].calls += steps * rs * p->z.nunits;
    add->c[TT_GROUP_DP][TT_OP_REDUCE_SCATTER].bytes += steps * rs * bytes;
    add->c[TT_GROUP_DP][TT_OP_ALLGATHER].calls += steps * ag * p->z.nunits;
    add->c[TT_GROUP_DP][TT_OP_ALLGATHER].bytes += steps * ag * bytes;
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
    if (p->z.stage >= 3)
        return 1; /* nothing is replicated: each holds its pieces of every kind */
    for (int k = 0; k < (p->z.stage ? 1 : 3); k++)
        crc = tt_crc32(crc, tt_params_buffer(p, kept[k]),
                       (p->z.stage ? p->z.padded : p->total) * sizeof(float));
    return tt_group_all_equal(g, TT_GROUP_DP, crc);
}

int tt_tp_replicated_identical(const tt_grid *g, const tt_params *p)
{
    uint32_t crc = 0;
    for (int i = 0; i < p->n; i++) {
        const tt_tensor *t = &p->t[i];
        if (!tt_tensor_replicated(t))
            continue;
        size_t a, b;
        size_t n = tt_tensor_owned(p, t, &a, &b); /* TP peers share the partition */
        if (p->z.stage >= 3)
            crc = tt_crc32(crc, tt_owned_data(p, t, TT_W, a), n * sizeof(float));
        else
            crc = tt_crc32(crc, t->w, t->numel * sizeof(float));
        crc = tt_crc32(crc, tt_owned_data(p, t, TT_M, a), n * sizeof(float));
        crc = tt_crc32(crc, tt_owned_data(p, t, TT_V, a), n * sizeof(float));
    }
    return tt_group_all_equal(g, TT_GROUP_TP, crc);
}
