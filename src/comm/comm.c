/* comm.c - the counted communication layer. */
#include "tt/comm/comm.h"
#include "tt/show/trace.h"

#include <string.h>

const char *const tt_group_names[TT_NGROUPS] = {"TP", "PP", "DP", "other"};
const char *const tt_op_names[TT_NOPS] = {"all-reduce", "all-gather", "reduce-scatter",
                                          "broadcast", "gather", "send", "recv"};

/* One process is one virtual GPU, so one set of counters per process. */
static tt_comm_stats stats;

const tt_comm_stats *tt_comm_stats_get(void) { return &stats; }
void tt_comm_stats_reset(void) { memset(&stats, 0, sizeof stats); }

MPI_Comm tt_group_comm(const tt_grid *g, int where)
{
    switch (where & ~TT_BOOKKEEPING) {
    case TT_GROUP_TP: return g->tp_comm;
    case TT_GROUP_PP: return g->pp_comm;
    case TT_GROUP_DP: return g->dp_comm;
    default: return MPI_COMM_WORLD;
    }
}

/* Books one call, and logs it when a trace is being captured. */
static void count_peer(int where, tt_op op, long long bytes, double t0, int peer)
{
    int row = (where & TT_BOOKKEEPING) ? TT_GROUP_OTHER : (where & ~TT_BOOKKEEPING);
    tt_comm_count *c = &stats.c[row][op];
    double t1 = tt_now();
    c->calls++;
    c->bytes += bytes;
    c->seconds += t1 - t0;
    tt_trace_add(TT_EV_COMM, tt_op_names[op], tt_group_names[row], t0, t1, -1, -1, peer, bytes);
}

static void count(int where, tt_op op, long long bytes, double t0)
{
    count_peer(where, op, bytes, t0, -1);
}

static long long type_size(MPI_Datatype type)
{
    int s;
    MPI_Type_size(type, &s);
    return s;
}

void tt_allreduce(const tt_grid *g, int where, void *buf, int count_, MPI_Datatype type,
                  MPI_Op op)
{
    double t0 = tt_now();
    MPI_Allreduce(MPI_IN_PLACE, buf, count_, type, op, tt_group_comm(g, where));
    count(where, TT_OP_ALLREDUCE, (long long)count_ * type_size(type), t0);
}

void tt_allgather(const tt_grid *g, int where, const void *send, void *recv, int count_,
                  MPI_Datatype type)
{
    double t0 = tt_now();
    MPI_Comm comm = tt_group_comm(g, where);
    int n;
    MPI_Comm_size(comm, &n);
    MPI_Allgather(send, count_, type, recv, count_, type, comm);
    count(where, TT_OP_ALLGATHER, (long long)n * count_ * type_size(type), t0);
}

void tt_reduce_scatter(const tt_grid *g, int where, const void *send, void *recv, int count_,
                       MPI_Datatype type)
{
    double t0 = tt_now();
    MPI_Comm comm = tt_group_comm(g, where);
    int n;
    MPI_Comm_size(comm, &n);
    MPI_Reduce_scatter_block(send, recv, count_, type, MPI_SUM, comm);
    count(where, TT_OP_REDUCE_SCATTER, (long long)n * count_ * type_size(type), t0);
}

void tt_gatherv(const tt_grid *g, int where, const void *send, int count_, void *recv,
                const int *counts, const int *displs, MPI_Datatype type, int root)
{
    double t0 = tt_now();
    MPI_Comm comm = tt_group_comm(g, where);
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    MPI_Gatherv(send, count_, type, recv, counts, displs, type, root, comm);
    long long elems = count_;
    if (me == root)
        for (int i = 0; i < n; i++)
            elems += i == me ? 0 : counts[i];
    count(where, TT_OP_GATHER, elems * type_size(type), t0);
}

void tt_bcast(const tt_grid *g, int where, void *buf, int count_, MPI_Datatype type, int root)
{
    double t0 = tt_now();
    MPI_Bcast(buf, count_, type, root, tt_group_comm(g, where));
    count(where, TT_OP_BCAST, (long long)count_ * type_size(type), t0);
}

void tt_send(const tt_grid *g, const void *buf, int count_, MPI_Datatype type, int dest, int tag)
{
    (void)g;
    if (dest == MPI_PROC_NULL)
        return;
    double t0 = tt_now();
    MPI_Send(buf, count_, type, dest, tag, MPI_COMM_WORLD);
    count_peer(TT_GROUP_PP, TT_OP_SEND, (long long)count_ * type_size(type), t0, dest);
}

void tt_isend(const tt_grid *g, const void *buf, int count_, MPI_Datatype type, int dest, int tag,
              MPI_Request *req)
{
    (void)g;
    if (dest == MPI_PROC_NULL) {
        *req = MPI_REQUEST_NULL;
        return;
    }
    double t0 = tt_now();
    MPI_Isend(buf, count_, type, dest, tag, MPI_COMM_WORLD, req);
    count_peer(TT_GROUP_PP, TT_OP_SEND, (long long)count_ * type_size(type), t0, dest);
}

void tt_recv(const tt_grid *g, void *buf, int count_, MPI_Datatype type, int src, int tag)
{
    (void)g;
    if (src == MPI_PROC_NULL)
        return;
    double t0 = tt_now();
    MPI_Recv(buf, count_, type, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    count_peer(TT_GROUP_PP, TT_OP_RECV, (long long)count_ * type_size(type), t0, src);
}
