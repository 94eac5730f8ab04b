/* collectives.c - the counted collectives (all-reduce, blocking and beside
 * compute, all-gather, reduce-scatter, gather, broadcast) and the clocks'
 * maximum: how the members meet, which algorithm sums (a pair's exchange,
 * a rank-order fold of a few numbers, or MPI's), and the virtual time each
 * collective costs (design.md section 12). */
#include "comm_internal.h"
#include "tt/comm/comm.h"
#include "tt/comm/doorbell.h"
#include "tt/comm/pair_reduce.h"
#include "tt/comm/watchdog.h"
#include "tt/comm/yield.h"
#include "tt/core/common.h"
#include "tt/core/vclock.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The slowest link of a group: the network as soon as its members span two
 * servers. */
static const tt_link *group_link(const tt_grid *g, int where)
{
    const tt_cluster *c = tt_vclock_cluster();
    int lo = g->world_rank, hi = g->world_rank;
    for (int r = 0; r < g->world_size; r++) {
        int same;
        switch (where & ~TT_BOOKKEEPING) {
        case TT_GROUP_TP:
            same = tt_grid_dp_of(g, r) == g->dp_rank && tt_grid_pp_of(g, r) == g->pp_rank;
            break;
        case TT_GROUP_PP:
            same = tt_grid_dp_of(g, r) == g->dp_rank && tt_grid_tp_of(g, r) == g->tp_rank;
            break;
        case TT_GROUP_DP:
            same = tt_grid_pp_of(g, r) == g->pp_rank && tt_grid_tp_of(g, r) == g->tp_rank;
            break;
        default: same = 1;
        }
        if (same) {
            lo = r < lo ? r : lo;
            hi = r > hi ? r : hi;
        }
    }
    return tt_cluster_link(c, lo, hi);
}

/* ---- waiting without holding a core ----------------------------------------
 * Many virtual GPUs share few cores: a rank that waits for a peer must give
 * its core to the ranks with work. With the doorbells (tt/comm/doorbell.h)
 * it sleeps until the peer that ends its wait rings it: a sender rings its
 * receiver after posting a message, a receiver rings the sender after taking
 * it (a long send completes then), and the members of a collective meet in
 * shared memory before it starts. Where a peer is on another host, or the
 * bells are off, a wait tests its request and sleeps between tests, 20 us at
 * first, doubling to 500 us. */

/* Tags of the two-member exchanges (tt/comm/pair_reduce.h): a blocking
 * all-reduce's data and entry clock, and a non-blocking one's, which may be in
 * flight while a blocking one runs. They are the four largest tags MPI allows
 * (at least 32767): a reservation, so that they can meet no other message on
 * any communicator, whose tags count from 0 up below tt_free_tags (the
 * pipeline's: direction, chunk, micro-batch). */
enum { PAIR_TAG_BLOCKING = 0, PAIR_TAG_BLOCKING_CLOCK = 1, PAIR_TAG_DATA = 2, PAIR_TAG_CLOCK = 3,
       PAIR_TAGS = 4 };
static int top_tag(void)
{
    static int top; /* MPI_TAG_UB, read once */
    if (!top) {
        int *ub, flag = 0;
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
        top = flag ? *ub : 32767;
    }
    return top;
}
static int pair_tag(int which) { return top_tag() - which; }

long long tt_free_tags(void) { return (long long)top_tag() + 1 - PAIR_TAGS; }

/* MPI's collective NAME(args) among members that have all just met: the
 * blocking call where MPI yields the core while it waits (Open MPI on an
 * oversubscribed host), else its non-blocking twin INAME(args, &request)
 * tested with a yield between tests (tt_wait_awake), since MPICH's
 * blocking calls spin with the core held while the peers they need wait for
 * it. */
#define AWAKE(NAME, INAME, ...)                                                                    \
    do {                                                                                           \
        if (tt_mpi_yields()) {                                                                     \
            NAME(__VA_ARGS__);                                                                     \
        } else {                                                                                   \
            MPI_Request awake_req;                                                                 \
            INAME(__VA_ARGS__, &awake_req);                                                        \
            tt_wait_awake(&awake_req);                                                             \
        }                                                                                          \
    } while (0)

/* A collective starts for all when the last member arrives: the members wait
 * for each other asleep (through shared memory on one host; else a
 * non-blocking maximum of their clocks while the clocks tick, or a
 * non-blocking barrier, tested politely), so the collective that follows
 * finds everyone awake and does not spin long (and where MPI's blocking
 * calls would spin without yielding, it is their non-blocking twin, waited
 * for with tt_wait_awake). MPI_MAX of doubles is
 * exact in any order, so no result depends on the algorithm. Returns the
 * latest entry time (0 when the clocks do not tick). */
static double arrive(MPI_Comm comm, int ticking)
{
    int n;
    MPI_Comm_size(comm, &n);
    double t = ticking ? tt_vclock_now() : 0.0;
    if (n == 1 || tt_bell_gather_max(comm, &t) == 0)
        return t;
    MPI_Request req;
    if (ticking)
        MPI_Iallreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm, &req);
    else
        MPI_Ibarrier(comm, &req);
    tt_bell_wait(&req, TT_BELL_NONE);
    return t;
}

/* Ends a collective on this rank: latest entry plus the algorithm's cost. */
static void clock_collective(const tt_grid *g, int where, double latest, tt_coll_kind kind,
                             int n, long long bytes)
{
    tt_vclock_set(latest + tt_cost_collective(group_link(g, where), kind, n, (double)bytes));
}

void tt_clock_max_n(const tt_grid *g, int where, double *t, int n)
{
    WATCH_COLLECTIVE(TT_OP_ALLREDUCE, g, where);
    MPI_Comm comm = tt_group_comm(g, where);
    int size;
    MPI_Comm_size(comm, &size);
    /* one meeting for all n: through the doorbells' page where it holds them */
    double *all = n * (int)sizeof *t <= TT_BELL_SLOT ? tt_malloc((size_t)size * n * sizeof *t) : NULL;
    if (all && tt_bell_allgather(comm, t, n * (int)sizeof *t, all) == 0) {
        for (int r = 0; r < size; r++)
            for (int i = 0; i < n; i++)
                t[i] = fmax(t[i], all[(size_t)r * n + i]);
    } else {
        MPI_Request req;
        MPI_Iallreduce(MPI_IN_PLACE, t, n, MPI_DOUBLE, MPI_MAX, comm, &req);
        tt_bell_wait(&req, TT_BELL_NONE);
    }
    free(all);
    tt_watch_end();
}

double tt_clock_max(const tt_grid *g, int where, double t)
{
    tt_clock_max_n(g, where, &t, 1);
    return t;
}

/* A few numbers (the loss, a norm) over three or more members: every member
 * gets all members' values (MPI_Allgather, which moves bytes and adds
 * nothing) and combines them in rank order, so the bits depend on neither
 * the placement nor MPI's algorithms. Returns -1 for what it does not
 * combine. */
static int ordered_allreduce(MPI_Comm comm, void *buf, int count, MPI_Datatype type, MPI_Op op,
                             int ticking, double *latest)
{
    const size_t elem = tt_reduce_elem(type, op), bytes = elem * (size_t)count;
    /* a few numbers: what fits one slot of the doorbells' page */
    double x[TT_BELL_SLOT / sizeof(double)];
    if (elem == 0 || count < 1 || bytes > sizeof x)
        return -1;
    int n;
    MPI_Comm_size(comm, &n);
    char *all = tt_malloc((size_t)n * bytes);
    /* Through MPI even on one host: its progress loop also moves the DP
     * all-reduces in flight beside compute (a gather through shared memory
     * would leave them waiting: dp 12 on 2 cores ran 25% slower). */
    *latest = arrive(comm, ticking);
    AWAKE(MPI_Allgather, MPI_Iallgather, buf, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE,
          comm);
    memcpy(buf, all, bytes);
    for (int i = 1; i < n; i++) {
        memcpy(x, all + (size_t)i * bytes, bytes); /* aligned for the fold */
        tt_reduce_fold(buf, buf, x, count, type, op);
    }
    free(all);
    return 0;
}

void tt_allreduce(const tt_grid *g, int where, void *buf, int count_, MPI_Datatype type,
                  MPI_Op op)
{
    tt_allreduce_to(g, where, buf, buf, count_, type, op);
}

void *tt_allreduce_space(const tt_grid *g, int where, void *own, int count_, MPI_Datatype type)
{
    /* watched: the first call of a pair, or a larger sum, maps its slots,
     * which both members do together */
    WATCH_COLLECTIVE(TT_OP_ALLREDUCE, g, where);
    void *slot = tt_pair_host_slot(tt_group_comm(g, where),
                                   (size_t)count_ * (size_t)tt_comm_type_size(type));
    tt_watch_end();
    return slot ? slot : own;
}

/* The all-reduce behind tt_allreduce_to and tt_allreduce_fold: recv gets
 * the sum, or (fold) fold gets the two members' parts, or the sum in recv
 * (== send) where the group is not a pair on this host. */
static void allreduce(const tt_grid *g, int where, const void *send, void *recv, int count_,
                      MPI_Datatype type, MPI_Op op, tt_fold_fn fold, void *ctx)
{
    double t0 = tt_clock_now();
    MPI_Comm comm = tt_group_comm(g, where);
    WATCH_COLLECTIVE(TT_OP_ALLREDUCE, g, where);
    const int ticking = tt_vclock_ticking();
    const long long bytes = (long long)count_ * tt_comm_type_size(type);
    /* A group of two exchanges its data and its entry clocks at once (the
     * exchange is its own meeting); a larger group meets, then MPI sums. */
    double latest = ticking ? tt_vclock_now() : 0.0;
    double *clock = ticking ? &latest : NULL;
    int me;
    const void *theirs = fold ? tt_pair_host_exchange(comm, send, (size_t)bytes, clock, &me) : NULL;
    if (theirs) {
        fold(ctx, me == 0 ? send : theirs, me == 0 ? theirs : send, count_); /* member 0's first */
    } else if (fold || tt_pair_host_allreduce_to(comm, send, recv, count_, type, op, clock) != 0) {
        /* in place from here on */
        if (send != recv)
            memcpy(recv, send, (size_t)bytes);
        tt_pair_req pair[2];
        if (tt_pair_start(comm, recv, count_, type, op, pair_tag(PAIR_TAG_BLOCKING), &pair[0]) == 0) {
            if (ticking)
                tt_pair_start(comm, &latest, 1, MPI_DOUBLE, MPI_MAX,
                              pair_tag(PAIR_TAG_BLOCKING_CLOCK), &pair[1]);
            tt_pair_finish(&pair[0]);
            if (ticking)
                tt_pair_finish(&pair[1]);
        } else if (ordered_allreduce(comm, recv, count_, type, op, ticking, &latest) != 0) {
            latest = arrive(comm, ticking);
            AWAKE(MPI_Allreduce, MPI_Iallreduce, MPI_IN_PLACE, recv, count_, type, op, comm);
        }
        if (fold)
            fold(ctx, recv, NULL, count_);
    }
    if (ticking)
        clock_collective(g, where, latest, TT_COLL_ALLREDUCE, tt_group_size(g, where), bytes);
    tt_comm_tally(where, TT_OP_ALLREDUCE, bytes, t0);
}

void tt_allreduce_to(const tt_grid *g, int where, const void *send, void *recv, int count_,
                     MPI_Datatype type, MPI_Op op)
{
    allreduce(g, where, send, recv, count_, type, op, NULL, NULL);
}

void tt_allreduce_fold(const tt_grid *g, int where, float *send, int count_, tt_fold_fn fold,
                       void *ctx)
{
    allreduce(g, where, send, send, count_, MPI_FLOAT, MPI_SUM, fold, ctx);
}

/* ---- non-blocking: a collective beside compute ---------------------------
 * The data and the clocks travel in two non-blocking all-reduces started
 * together: nobody waits for the others at the start, the GPU computes on,
 * and the maximum of the entry clocks is known by the wait. The data's
 * algorithm is MPI's non-blocking one (Open MPI: libnbc), which may add in
 * another order than the blocking call: a caller that wants the same bits
 * with and without overlap uses this call in both (tt_dp_sync_grads does). */
void tt_iallreduce(const tt_grid *g, int where, void *buf, int count_, MPI_Datatype type,
                   MPI_Op op, tt_coll_req *r)
{
    MPI_Comm comm = tt_group_comm(g, where);
    r->t0 = tt_clock_now();
    r->where = where;
    r->ticking = tt_vclock_ticking();
    r->bytes = (long long)count_ * tt_comm_type_size(type);
    r->entry = r->ticking ? tt_vclock_now() : 0.0;
    /* A group of two exchanges (the same bits, no spinning in MPI). */
    r->paired = tt_pair_start(comm, buf, count_, type, op, pair_tag(PAIR_TAG_DATA), &r->pair[0]) == 0;
    if (r->paired) {
        if (r->ticking)
            tt_pair_start(comm, &r->entry, 1, MPI_DOUBLE, MPI_MAX, pair_tag(PAIR_TAG_CLOCK), &r->pair[1]);
        return;
    }
    MPI_Iallreduce(MPI_IN_PLACE, buf, count_, type, op, comm, &r->req[0]);
    if (r->ticking)
        MPI_Iallreduce(MPI_IN_PLACE, &r->entry, 1, MPI_DOUBLE, MPI_MAX, comm, &r->req[1]);
    else
        r->req[1] = MPI_REQUEST_NULL;
}

double tt_coll_wait(const tt_grid *g, tt_coll_req *r, double not_before)
{
    WATCH_COLLECTIVE(TT_OP_ALLREDUCE, g, r->where);
    /* A pair finishes its exchanges; a larger group meets asleep first
     * where it can, then all of its members are awake to progress the rest
     * of the ring. */
    double meet = 0.0; /* the meeting's maximum, unused: the entry clocks go in r */
    if (r->paired) {
        tt_pair_finish(&r->pair[0]);
        if (r->ticking)
            tt_pair_finish(&r->pair[1]);
    } else if (tt_bell_gather_max(tt_group_comm(g, r->where), &meet) == 0) {
        tt_wait_awake(&r->req[0]);
        tt_wait_awake(&r->req[1]);
    } else {
        tt_bell_wait(&r->req[0], TT_BELL_NONE);
        if (r->req[1] != MPI_REQUEST_NULL)
            tt_bell_wait(&r->req[1], TT_BELL_NONE);
    }
    if (r->ticking) {
        /* r->entry is now the latest entry: the ring starts there, or at
         * not_before (the caller's previous collective on the same links). */
        const double start = r->entry > not_before ? r->entry : not_before;
        const double end = start + tt_cost_collective(group_link(g, r->where),
                                                      TT_COLL_ALLREDUCE,
                                                      tt_group_size(g, r->where),
                                                      (double)r->bytes);
        /* Booked and drawn as the ring's own span (ticking: virtual time);
         * beside compute if it began before this GPU came to wait for it. */
        const double at_wait = tt_vclock_now();
        if (end > at_wait)
            tt_vclock_set(end);
        tt_comm_book(r->where, TT_OP_ALLREDUCE, r->bytes, start, end,
             start < at_wait ? TT_PEER_BESIDE : -1);
        return end;
    }
    /* --clock wall (or stopped clocks): from the start to the wait's end */
    tt_comm_book(r->where, TT_OP_ALLREDUCE, r->bytes, r->t0, tt_clock_now(), TT_PEER_BESIDE);
    return tt_clock_now();
}

/* All-gather and reduce-scatter are the same walk: through the shared slots
 * when the group is a pair on one host, else the members meet and MPI moves
 * n x count elements; only the operation, its price and the two movers
 * differ, so one function serves both and a table says which is which. */
enum { MOVE_ALLGATHER, MOVE_REDUCE_SCATTER };
static const struct {
    int op;            /* the books' operation */
    tt_coll_kind coll; /* the cost model's collective */
    int (*host)(MPI_Comm, const void *, void *, int, MPI_Datatype, double *);
} moves[] = {
    [MOVE_ALLGATHER] = {TT_OP_ALLGATHER, TT_COLL_ALLGATHER, tt_pair_host_allgather},
    [MOVE_REDUCE_SCATTER] = {TT_OP_REDUCE_SCATTER, TT_COLL_REDUCE_SCATTER,
                             tt_pair_host_reduce_scatter},
};

static void gather_or_scatter(const tt_grid *g, int where, const void *send, void *recv,
                              int count_, MPI_Datatype type, int kind)
{
    double t0 = tt_clock_now();
    MPI_Comm comm = tt_group_comm(g, where);
    int n;
    MPI_Comm_size(comm, &n);
    WATCH_COLLECTIVE(moves[kind].op, g, where);
    const int ticking = tt_vclock_ticking();
    double latest = ticking ? tt_vclock_now() : 0.0;
    if (moves[kind].host(comm, send, recv, count_, type, ticking ? &latest : NULL) != 0) {
        latest = arrive(comm, ticking);
        if (kind == MOVE_ALLGATHER)
            AWAKE(MPI_Allgather, MPI_Iallgather, send, count_, type, recv, count_, type, comm);
        else
            AWAKE(MPI_Reduce_scatter_block, MPI_Ireduce_scatter_block, send, recv, count_, type,
                  MPI_SUM, comm);
    }
    const long long bytes = (long long)n * count_ * tt_comm_type_size(type);
    if (ticking)
        clock_collective(g, where, latest, moves[kind].coll, n, bytes);
    tt_comm_tally(where, moves[kind].op, bytes, t0);
}

void tt_allgather(const tt_grid *g, int where, const void *send, void *recv, int count_,
                  MPI_Datatype type)
{
    gather_or_scatter(g, where, send, recv, count_, type, MOVE_ALLGATHER);
}

void tt_reduce_scatter(const tt_grid *g, int where, const void *send, void *recv, int count_,
                       MPI_Datatype type)
{
    gather_or_scatter(g, where, send, recv, count_, type, MOVE_REDUCE_SCATTER);
}

void tt_gatherv(const tt_grid *g, int where, const void *send, int count_, void *recv,
                const int *counts, const int *displs, MPI_Datatype type, int root)
{
    double t0 = tt_clock_now();
    MPI_Comm comm = tt_group_comm(g, where);
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    WATCH_COLLECTIVE(TT_OP_GATHER, g, where);
    const int ticking = tt_vclock_ticking();
    double latest = arrive(comm, ticking);
    AWAKE(MPI_Gatherv, MPI_Igatherv, send, count_, type, recv, counts, displs, type, root, comm);
    long long elems = count_;
    if (me == root)
        for (int i = 0; i < n; i++)
            elems += i == me ? 0 : counts[i];
    if (ticking) /* priced as n contributions of this rank's size */
        clock_collective(g, where, latest, TT_COLL_GATHER, n,
                         (long long)n * count_ * tt_comm_type_size(type));
    tt_comm_tally(where, TT_OP_GATHER, elems * tt_comm_type_size(type), t0);
}

void tt_bcast(const tt_grid *g, int where, void *buf, int count_, MPI_Datatype type, int root)
{
    double t0 = tt_clock_now();
    MPI_Comm comm = tt_group_comm(g, where);
    WATCH_COLLECTIVE(TT_OP_BCAST, g, where);
    const int ticking = tt_vclock_ticking();
    double latest = arrive(comm, ticking);
    AWAKE(MPI_Bcast, MPI_Ibcast, buf, count_, type, root, comm);
    const long long bytes = (long long)count_ * tt_comm_type_size(type);
    if (ticking)
        clock_collective(g, where, latest, TT_COLL_BCAST, tt_group_size(g, where), bytes);
    tt_comm_tally(where, TT_OP_BCAST, bytes, t0);
}

int tt_group_size(const tt_grid *g, int where)
{
    int n;
    MPI_Comm_size(tt_group_comm(g, where), &n);
    return n;
}

