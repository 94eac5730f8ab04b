/* tt/comm/comm.h - the one door to MPI for the model's traffic: every
 * collective and point-to-point transfer of training goes through here
 * (comm.c, collectives.c), so it can be counted (per group
 * and per operation: the calls, the bytes and the time spent) and observed (a
 * trace installs an observer; comm knows nothing about traces). The usual
 * patterns built from them live here too: agreeing on a status or an error
 * before anyone acts on it, and gathering a record from every GPU to rank 0.
 *
 * Bytes, per call on this rank: all-reduce and broadcast count the buffer;
 * all-gather counts the gathered output (group size x contribution);
 * reduce-scatter counts the full input; send and recv count the message. These
 * are the quantities the closed-form expectations in doc/ are written in.
 *
 * The group OTHER holds bookkeeping that is not part of a parallel strategy's
 * cost (the loss shown in the log, the clipping norm, eval, the --validate
 * oracle, replica checks), so the TP, PP and DP counters match their formulas
 * exactly. A call names where it runs and how it is booked in one `where`:
 * TT_GROUP_TP, _PP, _DP (that communicator, booked there), TT_GROUP_OTHER (the
 * world, booked as other), or a group | TT_BOOKKEEPING (that communicator,
 * booked as other).
 *
 * Not counted, because they carry no training data: the emulator's own small
 * collectives (cores.c and slice.c's placement at start-up; the doorbells'
 * and pair_host.c's set-up of their shared memory, on a group's first sum;
 * the world agreements below that call MPI directly; the clocks' maxima),
 * and checkpoints, which use MPI-IO. */
#ifndef TT_COMM_COMM_H
#define TT_COMM_COMM_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include "tt/comm/grid.h"
#include "tt/comm/pair_reduce.h"
#include "tt/core/common.h"

/* ORACLE is a booking row only (never a `where`): what the --validate oracle
 * moves inside a training step (while the clocks are paused), kept apart so
 * the bookkeeping of training is not drowned by it. */
typedef enum {
    TT_GROUP_TP, TT_GROUP_PP, TT_GROUP_DP, TT_GROUP_OTHER, TT_GROUP_ORACLE, TT_NGROUPS
} tt_group;
#define TT_BOOKKEEPING 16
typedef enum {
    TT_OP_ALLREDUCE, TT_OP_ALLGATHER, TT_OP_REDUCE_SCATTER, TT_OP_BCAST, TT_OP_GATHER, TT_OP_SEND,
    TT_OP_RECV,
    TT_NOPS
} tt_op;

typedef struct {
    long calls;
    long long bytes;
    double seconds;  /* tt_clock_now() time inside the calls */
} tt_comm_count;

typedef struct {
    tt_comm_count c[TT_NGROUPS][TT_NOPS];
} tt_comm_stats;

extern const char *const tt_group_names[TT_NGROUPS];
extern const char *const tt_op_names[TT_NOPS];

/* The counters of this rank since the last reset (a run never resets them;
 * the tests do, between cases). */
const tt_comm_stats *tt_comm_stats_get(void);
void tt_comm_stats_reset(void);

/* Adds b - a to acc: the traffic of one interval (e.g. one training step). */
void tt_comm_accumulate(tt_comm_stats *acc, const tt_comm_stats *a, const tt_comm_stats *b);

/* The communicator of a group (OTHER is the grid's world; TT_BOOKKEEPING ignored). */
MPI_Comm tt_group_comm(const tt_grid *g, int where);

/* In-place all-reduce of count elements. */
void tt_allreduce(const tt_grid *g, int where, void *buf, int count, MPI_Datatype type,
                  MPI_Op op);
/* Out of place: recv gets the all-reduce of every member's send. A caller
 * that makes its send in the space tt_allreduce_space gave it saves the
 * copy of send into the group's shared memory (recv must then be another
 * buffer). */
void tt_allreduce_to(const tt_grid *g, int where, const void *send, void *recv, int count,
                     MPI_Datatype type, MPI_Op op);
/* Where to make the send of this rank's next tt_allreduce_to on the group
 * (count elements): the pair's shared slot when the group is two ranks of
 * one host, else own. Collective over the group (every member asks, at the
 * same point), and valid only until that all-reduce: no other collective
 * of the group may come between. */
void *tt_allreduce_space(const tt_grid *g, int where, void *own, int count, MPI_Datatype type);
/* A float sum that goes on into the caller's own pass instead of being
 * written out (the row-parallel bias and the residual add after a TP sum):
 * fold(ctx, x0, x1, count) gets group member 0's and member 1's send where
 * the group is a pair on this host, and must add them x0 + x1, the pair's
 * bits; elsewhere the group's sum is made in send (in place) and fold gets
 * it as x0, with x1 NULL. send may be tt_allreduce_space's. */
typedef void (*tt_fold_fn)(void *ctx, const float *x0, const float *x1, int count);
void tt_allreduce_fold(const tt_grid *g, int where, float *send, int count, tt_fold_fn fold,
                       void *ctx);
/* The same, with what it is for ("loss all-reduce"), which the observer is
 * given: for the few bookkeeping calls a trace would otherwise show only as
 * "all-reduce other". purpose must outlive the call (a string literal) and
 * hold no % (the watchdog's report uses it as a format). The plain call
 * passes none, so the TP path pays nothing for this. */
void tt_allreduce_named(const tt_grid *g, int where, const char *purpose, void *buf, int count,
                        MPI_Datatype type, MPI_Op op);
/* recv gets every rank's count elements, in group-rank order. */
void tt_allgather(const tt_grid *g, int where, const void *send, void *recv, int count,
                  MPI_Datatype type);
/* Sums send (group size x count) and leaves block `group rank` in recv (count). */
void tt_reduce_scatter(const tt_grid *g, int where, const void *send, void *recv, int count,
                       MPI_Datatype type);
/* Rank `root` of the group receives counts[i] elements from group rank i at
 * displs[i] (counts/displs used at the root only). Bytes booked: what this
 * rank sends, plus at the root what it receives. */
void tt_gatherv(const tt_grid *g, int where, const void *send, int count, void *recv,
                const int *counts, const int *displs, MPI_Datatype type, int root);
void tt_bcast(const tt_grid *g, int where, void *buf, int count, MPI_Datatype type,
              int root);
/* A non-blocking in-place all-reduce (tt_iallreduce), from its start to
 * tt_coll_wait. Only the modelled cost runs beside compute: while it is in
 * flight the GPU's clock goes on; the wait moves it to the collective's end
 * (the members' latest entry plus the ring's cost), if that is later. */
typedef struct {
    MPI_Request req[2];  /* the data; the maximum of the entry clocks */
    tt_pair_req pair[2]; /* the same as exchanges, in a group of two (paired) */
    int paired;
    double entry;        /* this rank's clock at the start, then the latest */
    double t0;           /* tt_clock_now() at the start (--clock wall) */
    int where, ticking;
    long long bytes;
} tt_coll_req;
/* Starts the all-reduce of count elements of buf (untouched until the wait).
 * Members must start their non-blocking collectives of a group in one order. */
void tt_iallreduce(const tt_grid *g, int where, void *buf, int count, MPI_Datatype type,
                   MPI_Op op, tt_coll_req *r);
/* Completes r, booked here with its modelled span [start, end]: it starts
 * at the members' latest entry, or at not_before if later (the end of the
 * caller's previous collective on the same links: one at a time, as on one
 * communication stream), and ends a ring's cost later. Returns the end (the
 * clock's time when the clocks do not tick). */
double tt_coll_wait(const tt_grid *g, tt_coll_req *r, double not_before);
/* Number of GPUs in a group (OTHER: the world). */
int tt_group_size(const tt_grid *g, int where);
/* How many tags, from 0 up, a caller may give point-to-point messages:
 * MPI_TAG_UB + 1 (tags 0..MPI_TAG_UB) less the four the pair exchanges keep
 * at the top. */
long long tt_free_tags(void);

/* Point-to-point between pipeline stages of this GPU's pipeline (same dp and
 * tp): dest and src are stage numbers, i.e. ranks in pp_comm; MPI_PROC_NULL
 * is a no-op and is not counted. Counted in the PP group. */
void tt_send(const tt_grid *g, const void *buf, int count, MPI_Datatype type, int dest_stage,
             int tag);
/* Non-blocking send (counted when posted); complete it with tt_wait_all. */
void tt_isend(const tt_grid *g, const void *buf, int count, MPI_Datatype type, int dest_stage,
              int tag, MPI_Request *req);
void tt_recv(const tt_grid *g, void *buf, int count, MPI_Datatype type, int src_stage, int tag);
/* Completes n non-blocking sends. */
void tt_wait_all(int n, MPI_Request *reqs);

/* ---- virtual clocks (tt/core/vclock.h) ----
 * While the clocks tick, every collective above first agrees on the latest
 * entry time and ends at it plus the ring algorithm's cost on the group's
 * slowest link, and every send carries its sender's clock to the receiver
 * (on pp_clock_comm); those exchanges are not counted. */

/* The largest t of the group's members (not counted: clocks only). */
double tt_clock_max(const tt_grid *g, int where, double t);
/* The same for n values at once, t[i] the largest t[i] of the members: one
 * meeting where n separate calls would be n (n * 8 bytes up to the
 * doorbells' slot go through shared memory). */
void tt_clock_max_n(const tt_grid *g, int where, double *t, int n);

/* ---- agreement: one rank's finding becomes every rank's, before acting ----
 * Each is a collective over the world. Those with a grid are booked as
 * other; the _world ones (before any grid exists) and the host's two are
 * not booked. */

/* Before any grid exists (--plan, which runs on rank 0 alone; the check of
 * the environment): the largest status over MPI_COMM_WORLD, on every rank. */
int tt_agree_status_world(int status);
/* The same with a message: the largest status, and when it is not 0 the
 * message of the lowest rank whose own status was not 0, in *e everywhere
 * (each rank parses its own command line and reads its own checkpoint). */
int tt_agree_error_world(int status, tt_err *e);
/* 1 on every rank when every rank of the world passed the same value. */
int tt_all_equal_world(uint32_t value);
/* Rank 0's text (a string), as a new string on every rank (free it). */
char *tt_bcast_text_world(const char *mine);
/* The largest status of all ranks, on every rank (0 = fine, else an exit code). */
int tt_agree_status(const tt_grid *g, int status);
/* 0 when no rank failed; else -1 on every rank, with the message of the
 * lowest failing rank copied into *msg everywhere, so all report one line. */
int tt_agree_error(const tt_grid *g, int failed, tt_err *msg);
/* 1 on every rank when, in every group of that kind (each TP group, say),
 * all members passed the same value: one verdict for the whole world. */
int tt_group_all_equal(const tt_grid *g, int group, uint32_t value);
/* How many ranks of the world run on this rank's host (share its memory).
 * Collective over the world. */
int tt_ranks_on_host(const tt_grid *g);
/* The smallest t of the ranks on this rank's host (one clock: a common
 * instant for them, where each rank's own reading of it may come late on
 * shared cores). Collective over the world; not booked. */
double tt_host_min(const tt_grid *g, double t);

/* ---- gathering to rank 0 (booked as other) ---- */

/* Every rank's record of `bytes` bytes, in world-rank order: a new array on
 * rank 0 (free it), NULL elsewhere. */
void *tt_gather_to_root(const tt_grid *g, const void *mine, int bytes);
/* The same for records of different sizes: *sizes (rank 0 only, free it)
 * gets each rank's byte count. Each record must start within the first
 * 2 GiB (MPI's int displacements); past that, rank 0 ends the job with a
 * message (exit 1). */
void *tt_gather_var_to_root(const tt_grid *g, const void *mine, int bytes, int **sizes);

/* ---- observing ---- */

/* Called after every counted transfer: the group it is booked in, the
 * operation, bytes, start and end (tt_clock_now(): the virtual clock unless
 * --clock wall), the peer's world rank (point-to-point), -1, or
 * TT_PEER_BESIDE for a non-blocking collective that ran beside compute (its
 * span is the collective's, not time the GPU spent in it), and the purpose
 * a named call gave (tt_allreduce_named), else NULL. NULL removes the
 * observer. */
#define TT_PEER_BESIDE (-2)
typedef void (*tt_comm_observer)(int group, tt_op op, long long bytes, double t0, double t1,
                                 int peer, const char *purpose);
void tt_comm_set_observer(tt_comm_observer f);

#endif
