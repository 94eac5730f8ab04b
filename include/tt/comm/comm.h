/* tt/comm.h - every collective and point-to-point transfer of the program goes
 * through here, so it can be counted: per group and per operation, the calls,
 * the bytes and the time spent.
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
 * booked as other). */
#ifndef TT_COMM_H
#define TT_COMM_H

#include <mpi.h>
#include <stdio.h>
#include "tt/comm/grid.h"

typedef enum { TT_GROUP_TP, TT_GROUP_PP, TT_GROUP_DP, TT_GROUP_OTHER, TT_NGROUPS } tt_group;
#define TT_BOOKKEEPING 16
typedef enum {
    TT_OP_ALLREDUCE, TT_OP_ALLGATHER, TT_OP_REDUCE_SCATTER, TT_OP_BCAST, TT_OP_GATHER, TT_OP_SEND,
    TT_OP_RECV,
    TT_NOPS
} tt_op;

typedef struct {
    long calls;
    long long bytes;
    double seconds;
} tt_comm_count;

typedef struct {
    tt_comm_count c[TT_NGROUPS][TT_NOPS];
} tt_comm_stats;

extern const char *const tt_group_names[TT_NGROUPS];
extern const char *const tt_op_names[TT_NOPS];

/* The counters of this rank since the last reset. */
const tt_comm_stats *tt_comm_stats_get(void);
void tt_comm_stats_reset(void);

/* The communicator of a group (OTHER is the world; TT_BOOKKEEPING ignored). */
MPI_Comm tt_group_comm(const tt_grid *g, int where);

/* In-place all-reduce of count elements. */
void tt_allreduce(const tt_grid *g, int where, void *buf, int count, MPI_Datatype type,
                  MPI_Op op);
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
/* Point-to-point between pipeline stages (world ranks; MPI_PROC_NULL is a no-op
 * and is not counted). Counted in the PP group. */
void tt_send(const tt_grid *g, const void *buf, int count, MPI_Datatype type, int dest, int tag);
/* Non-blocking send (counted when posted); complete it with MPI_Wait. */
void tt_isend(const tt_grid *g, const void *buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Request *req);
void tt_recv(const tt_grid *g, void *buf, int count, MPI_Datatype type, int src, int tag);

#endif
