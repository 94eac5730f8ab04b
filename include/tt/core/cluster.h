/* tt/core/cluster.h - the modelled machine and its cost model: what one
 * operation costs on it. The virtual GPU clocks (tt/core/vclock.h) and the
 * planner use these functions and nothing else, so the emulator's timelines
 * and the planner's cluster-scale figures come from one implementation
 * (doc/design.md sections 11 and 12; doc/clocks.md has the numbers and their sources).
 *
 * Links: GPUs are placed on servers in world-rank order (TP fastest), so GPU
 * r sits in server r / gpus_per_server; two GPUs of one server talk over
 * NVLink, GPUs of different servers over the rail network (one NIC per GPU).
 * A link costs alpha + bytes / bandwidth (bandwidth per direction, per GPU). */
#ifndef TT_CORE_CLUSTER_H
#define TT_CORE_CLUSTER_H

#include "tt/core/common.h"

typedef struct {
    double bandwidth;  /* bytes/s per direction per GPU; 0 = free (tests) */
    double latency;    /* alpha, seconds */
} tt_link;

typedef struct {
    char name[64];
    char about[160];
    int gpus_per_server;
    double peak_flops;        /* dense 16-bit tensor-core FLOP/s (--precision mixed) */
    double peak_flops_fp32;   /* FP32 FLOP/s: what the emulator computes in */
    double gemm_efficiency;   /* achieved fraction of peak in the model's GEMMs */
    double memory_bandwidth;  /* HBM bytes/s, for memory-bound kernels */
    double gpu_memory_bytes;
    tt_link nvlink, network;
    double gpu_watts, pue, price_per_kwh;
    double gpu_mtbf_hours;    /* mean time between failures of one GPU's share */
    double storage_bandwidth; /* bytes/s the whole job writes a checkpoint at (planner) */
    /* Tests only: every chunk forward costs fixed_forward seconds and every
     * chunk backward fixed_backward, whatever its FLOPs (0: off); with a
     * zero-bubble schedule fixed_backward is B's and fixed_w W's. */
    double fixed_forward, fixed_backward, fixed_w;
} tt_cluster;

/* A test cluster that charges fixed chunk costs (any of the three set):
 * the kernels then charge nothing, and MFU has no meaning. */
static inline int tt_cluster_fixed(const tt_cluster *c)
{
    return c->fixed_forward > 0 || c->fixed_backward > 0 || c->fixed_w > 0;
}

/* Names of the built-in clusters, separated by '|', for help and errors. */
const char *tt_cluster_names(void);

/* 1 when --cluster NAME names a built-in (which a file of that name does not
 * replace), 0 when it is read as a file. */
int tt_cluster_builtin(const char *name);

/* A built-in cluster by name, or a JSON file of the same fields (doc/clocks.md;
 * "based_on": NAME starts from a built-in). -1 with a message naming the bad
 * name, file or field. */
int tt_cluster_load(tt_cluster *c, const char *name_or_file, tt_err *e);

/* Server of world rank r. */
int tt_cluster_server(const tt_cluster *c, int world_rank);
/* The link between world ranks a and b: NVLink on one server, else the
 * network. A group whose lowest and highest ranks are a and b is as fast as
 * this link (ranks are placed in order, so it spans servers iff they do). */
const tt_link *tt_cluster_link(const tt_cluster *c, int a, int b);

/* Seconds of a kernel of `flops` floating-point operations moving `bytes` to
 * and from memory: the larger of compute time (at FP32 peak x efficiency) and
 * memory time (the roofline). */
double tt_cost_compute(const tt_cluster *c, double flops, double bytes);
/* The same at another peak (the planner's mixed precision runs at peak_flops). */
double tt_cost_compute_at(const tt_cluster *c, double peak, double flops, double bytes);

/* Seconds for a message of `bytes` over one link. */
double tt_cost_link(const tt_link *l, double bytes);

/* Ring algorithms on n GPUs whose slowest link is l; `bytes` is the full
 * buffer (all-reduce: the buffer; all-gather: the gathered output;
 * reduce-scatter: the input). All-reduce 2(n-1) steps of bytes/n each,
 * all-gather and reduce-scatter n-1 steps; broadcast and gather are priced as
 * a reduce-scatter (n-1 steps of bytes/n: pipelined along the ring). 0 when n
 * is 1. */
typedef enum { TT_COLL_ALLREDUCE, TT_COLL_ALLGATHER, TT_COLL_REDUCE_SCATTER, TT_COLL_BCAST,
               TT_COLL_GATHER } tt_coll_kind;
double tt_cost_collective(const tt_link *l, tt_coll_kind kind, int n, double bytes);

/* Bytes each GPU sends under the ring algorithm (doc/design.md section 10's "ring bytes"). */
double tt_ring_bytes(tt_coll_kind kind, int n, double bytes);

#endif
