/* comm.c - the counted communication layer: the only file of the library's
 * logic that calls MPI's transfers (checkpoint files use MPI-IO in
 * src/train/ckpt_mpiio.c). */
#include "tt/comm/comm.h"
#include "tt/comm/doorbell.h"
#include "tt/comm/watchdog.h"
#include "tt/core/common.h"
#include "tt/core/vclock.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const tt_group_names[TT_NGROUPS] = {"TP", "PP", "DP", "other", "oracle"};
const char *const tt_op_names[TT_NOPS] = {"all-reduce", "all-gather", "reduce-scatter",
                                          "broadcast", "gather", "send", "recv"};

/* One process is one virtual GPU, so one set of counters per process. */
static tt_comm_stats stats;
static tt_comm_observer observer;

void tt_comm_set_observer(tt_comm_observer f) { observer = f; }

const tt_comm_stats *tt_comm_stats_get(void) { return &stats; }
void tt_comm_stats_reset(void) { memset(&stats, 0, sizeof stats); }

void tt_comm_accumulate(tt_comm_stats *acc, const tt_comm_stats *a, const tt_comm_stats *b)
{
    for (int gr = 0; gr < TT_NGROUPS; gr++)
        for (int op = 0; op < TT_NOPS; op++) {
            acc->c[gr][op].calls += b->c[gr][op].calls - a->c[gr][op].calls;
            acc->c[gr][op].bytes += b->c[gr][op].bytes - a->c[gr][op].bytes;
            acc->c[gr][op].seconds += b->c[gr][op].seconds - a->c[gr][op].seconds;
        }
}

MPI_Comm tt_group_comm(const tt_grid *g, int where)
{
    switch (where & ~TT_BOOKKEEPING) {
    case TT_GROUP_TP: return g->tp_comm;
    case TT_GROUP_PP: return g->pp_comm;
    case TT_GROUP_DP: return g->dp_comm;
    default: return g->world;
    }
}

/* Books one call, and tells the observer (a trace being captured). t0 is
 * tt_clock_now() at entry: times are the virtual clock's unless --clock wall. */
static void book(int where, tt_op op, long long bytes, double t0, double t1, int peer)
{
    int row = (where & TT_BOOKKEEPING) ? TT_GROUP_OTHER : (where & ~TT_BOOKKEEPING);
    if (tt_vclock_in_step() && tt_vclock_paused()) /* the oracle's, inside a step */
        row = TT_GROUP_ORACLE;
    tt_comm_count *c = &stats.c[row][op];
    tt_watch_end();
    c->calls++;
    c->bytes += bytes;
    c->seconds += t1 - t0;
    if (observer)
        observer(row, op, bytes, t0, t1, peer);
}

static void count_peer(int where, tt_op op, long long bytes, double t0, int peer)
{
    book(where, op, bytes, t0, tt_clock_now(), peer);
}

static void count(int where, tt_op op, long long bytes, double t0)
{
    count_peer(where, op, bytes, t0, -1);
}

/* The watchdog's hooks before a blocking call (tt/comm/watchdog.h); the
 * call's end is booked in count_peer, after the clocks' exchanges too. */
#define WATCH_COLLECTIVE(op, g, where) \
    tt_watch_begin(TT_WATCH_COLLECTIVE, tt_op_names[op], tt_group_comm(g, where), -1, -1)
#define WATCH_P2P(kind, op, g, peer, tag) \
    tt_watch_begin(kind, tt_op_names[op], (g)->pp_comm, peer, tag)

static long long type_size(MPI_Datatype type)
{
    int s;
    MPI_Type_size(type, &s);
    return s;
}

/* ---- the virtual clocks (DESIGN section 12, tt/core/vclock.h) ----------------
 * Clocks travel beside the data only while they tick (a training step, on
 * every rank at once), and these exchanges are the emulator's bookkeeping,
 * not transfers of the modelled GPUs: they are not counted. */

/* The link a transfer between world ranks a and b uses. */
static const tt_link *link_between(int a, int b)
{
    return tt_cluster_link(tt_vclock_cluster(), a, b);
}

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
 * flight while a blocking one runs. The pipeline's own messages share the
 * PP communicator with tags (direction, chunk, micro-batch) from 0 up, so
 * these are the four largest tags MPI allows (at least 32767). */
enum { PAIR_TAG_BLOCKING = 0, PAIR_TAG_BLOCKING_CLOCK = 1, PAIR_TAG_DATA = 2, PAIR_TAG_CLOCK = 3 };
static int pair_tag(int which)
{
    int *ub, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    return (flag ? *ub : 32767) - which;
}

/* Sends posted to ranks that cannot ring back (another host) since the last
 * tt_wait_all: their completion is polled for. */
static int unrung_sends;

/* A collective starts for all when the last member arrives: the members wait
 * for each other asleep (through shared memory on one host; else a
 * non-blocking maximum of their clocks while the clocks tick, or a
 * non-blocking barrier, tested politely), so the blocking collective that
 * follows finds everyone awake and does not spin long. MPI_MAX of doubles is
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

double tt_clock_max(const tt_grid *g, int where, double t)
{
    WATCH_COLLECTIVE(TT_OP_ALLREDUCE, g, where);
    MPI_Comm comm = tt_group_comm(g, where);
    if (tt_bell_gather_max(comm, &t) != 0) {
        MPI_Request req;
        MPI_Iallreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm, &req);
        tt_bell_wait(&req, TT_BELL_NONE);
    }
    tt_watch_end();
    return t;
}

/* The send time of each stage-to-stage message in flight, kept until the
 * step's sends complete (MPI reads it asynchronously). */
typedef struct clock_msg {
    double t;
    MPI_Request req;
    struct clock_msg *next;
} clock_msg;
static clock_msg *clock_msgs;

static void clock_isend(const tt_grid *g, int dest, int tag)
{
    clock_msg *m = tt_malloc(sizeof *m);
    m->t = tt_vclock_now();
    m->next = clock_msgs;
    clock_msgs = m;
    MPI_Isend(&m->t, 1, MPI_DOUBLE, dest, tag, g->pp_clock_comm, &m->req);
}

static void clock_wait_sends(int rung)
{
    while (clock_msgs) {
        clock_msg *m = clock_msgs;
        tt_bell_wait(&m->req, rung ? TT_BELL_ANY : TT_BELL_NONE);
        clock_msgs = m->next;
        free(m);
    }
}

/* The receiver goes on when the message has arrived: the sender's clock plus
 * the link's cost, or its own clock if that is later. */
static void clock_recv(const tt_grid *g, int src, int tag, long long bytes)
{
    double sent;
    MPI_Recv(&sent, 1, MPI_DOUBLE, src, tag, g->pp_clock_comm, MPI_STATUS_IGNORE);
    const int peer = tt_grid_rank_of(g, g->dp_rank, src, g->tp_rank);
    double arrival = sent + tt_cost_link(link_between(g->world_rank, peer), (double)bytes);
    if (arrival > tt_vclock_now())
        tt_vclock_set(arrival);
}

/* A few numbers (the loss, a norm) over three or more members: every member
 * gets all members' values and their entry clocks (through shared memory on
 * one host, else MPI_Allgather, which moves bytes and adds nothing) and
 * combines them in rank order, so the bits depend on neither the placement
 * nor MPI's algorithms. Returns -1 for what it does not combine. */
static int ordered_allreduce(MPI_Comm comm, void *buf, int count, MPI_Datatype type, MPI_Op op,
                             int ticking, double *latest)
{
    const size_t elem = tt_reduce_elem(type, op), bytes = elem * (size_t)count;
    enum { CLOCK = sizeof(double) };
    if (elem == 0 || count < 1 || bytes + CLOCK > TT_BELL_SLOT)
        return -1;
    int n;
    MPI_Comm_size(comm, &n);
    char mine[TT_BELL_SLOT];
    memcpy(mine, latest, CLOCK);
    memcpy(mine + CLOCK, buf, bytes);
    const int rec = (int)(CLOCK + bytes);
    char *all = tt_malloc((size_t)n * (size_t)rec);
    if (tt_bell_allgather(comm, mine, rec, all) != 0) {
        double t = arrive(comm, ticking);
        MPI_Allgather(mine, rec, MPI_BYTE, all, rec, MPI_BYTE, comm);
        memcpy(all, &t, CLOCK); /* the latest entry, as arrive found it */
    }
    memcpy(buf, all + CLOCK, bytes);
    for (int i = 0; i < n; i++) {
        double t;
        memcpy(&t, all + (size_t)i * rec, CLOCK);
        *latest = t > *latest ? t : *latest;
        if (i > 0) {
            /* member i's values, copied to aligned storage */
            double x[TT_BELL_SLOT / sizeof(double)];
            memcpy(x, all + (size_t)i * rec + CLOCK, bytes);
            tt_reduce_fold(buf, buf, x, count, type, op);
        }
    }
    free(all);
    return 0;
}

void tt_allreduce(const tt_grid *g, int where, void *buf, int count_, MPI_Datatype type,
                  MPI_Op op)
{
    double t0 = tt_clock_now();
    MPI_Comm comm = tt_group_comm(g, where);
    WATCH_COLLECTIVE(TT_OP_ALLREDUCE, g, where);
    const int ticking = tt_vclock_ticking();
    /* A group of two exchanges its data and its entry clocks at once (the
     * exchange is its own meeting); a larger group meets, then MPI sums. */
    double latest = ticking ? tt_vclock_now() : 0.0;
    tt_pair_req pair[2];
    if (tt_pair_start(comm, buf, count_, type, op, pair_tag(PAIR_TAG_BLOCKING), &pair[0]) == 0) {
        if (ticking)
            tt_pair_start(comm, &latest, 1, MPI_DOUBLE, MPI_MAX, pair_tag(PAIR_TAG_BLOCKING_CLOCK),
                          &pair[1]);
        tt_pair_finish(&pair[0]);
        if (ticking)
            tt_pair_finish(&pair[1]);
    } else if (ordered_allreduce(comm, buf, count_, type, op, ticking, &latest) != 0) {
        latest = arrive(comm, ticking);
        MPI_Allreduce(MPI_IN_PLACE, buf, count_, type, op, comm);
    }
    const long long bytes = (long long)count_ * type_size(type);
    if (ticking)
        clock_collective(g, where, latest, TT_COLL_ALLREDUCE, tt_group_size(g, where), bytes);
    count(where, TT_OP_ALLREDUCE, bytes, t0);
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
    r->bytes = (long long)count_ * type_size(type);
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
    double meet = 0.0;
    int met = 0;
    if (r->paired) {
        tt_pair_finish(&r->pair[0]);
        if (r->ticking)
            tt_pair_finish(&r->pair[1]);
    } else if ((met = tt_bell_gather_max(tt_group_comm(g, r->where), &meet) == 0)) {
        MPI_Wait(&r->req[0], MPI_STATUS_IGNORE);
        MPI_Wait(&r->req[1], MPI_STATUS_IGNORE);
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
        book(r->where, TT_OP_ALLREDUCE, r->bytes, start, end,
             start < at_wait ? TT_PEER_BESIDE : -1);
        return end;
    }
    /* --clock wall (or stopped clocks): from the start to the wait's end */
    book(r->where, TT_OP_ALLREDUCE, r->bytes, r->t0, tt_clock_now(), TT_PEER_BESIDE);
    return tt_clock_now();
}

void tt_allgather(const tt_grid *g, int where, const void *send, void *recv, int count_,
                  MPI_Datatype type)
{
    double t0 = tt_clock_now();
    MPI_Comm comm = tt_group_comm(g, where);
    int n;
    MPI_Comm_size(comm, &n);
    WATCH_COLLECTIVE(TT_OP_ALLGATHER, g, where);
    const int ticking = tt_vclock_ticking();
    double latest = arrive(comm, ticking);
    MPI_Allgather(send, count_, type, recv, count_, type, comm);
    const long long bytes = (long long)n * count_ * type_size(type);
    if (ticking)
        clock_collective(g, where, latest, TT_COLL_ALLGATHER, n, bytes);
    count(where, TT_OP_ALLGATHER, bytes, t0);
}

void tt_reduce_scatter(const tt_grid *g, int where, const void *send, void *recv, int count_,
                       MPI_Datatype type)
{
    double t0 = tt_clock_now();
    MPI_Comm comm = tt_group_comm(g, where);
    int n;
    MPI_Comm_size(comm, &n);
    WATCH_COLLECTIVE(TT_OP_REDUCE_SCATTER, g, where);
    const int ticking = tt_vclock_ticking();
    double latest = arrive(comm, ticking);
    MPI_Reduce_scatter_block(send, recv, count_, type, MPI_SUM, comm);
    const long long bytes = (long long)n * count_ * type_size(type);
    if (ticking)
        clock_collective(g, where, latest, TT_COLL_REDUCE_SCATTER, n, bytes);
    count(where, TT_OP_REDUCE_SCATTER, bytes, t0);
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
    MPI_Gatherv(send, count_, type, recv, counts, displs, type, root, comm);
    long long elems = count_;
    if (me == root)
        for (int i = 0; i < n; i++)
            elems += i == me ? 0 : counts[i];
    if (ticking) /* priced as n contributions of this rank's size */
        clock_collective(g, where, latest, TT_COLL_GATHER, n,
                         (long long)n * count_ * type_size(type));
    count(where, TT_OP_GATHER, elems * type_size(type), t0);
}

void tt_bcast(const tt_grid *g, int where, void *buf, int count_, MPI_Datatype type, int root)
{
    double t0 = tt_clock_now();
    MPI_Comm comm = tt_group_comm(g, where);
    WATCH_COLLECTIVE(TT_OP_BCAST, g, where);
    const int ticking = tt_vclock_ticking();
    double latest = arrive(comm, ticking);
    MPI_Bcast(buf, count_, type, root, comm);
    const long long bytes = (long long)count_ * type_size(type);
    if (ticking)
        clock_collective(g, where, latest, TT_COLL_BCAST, tt_group_size(g, where), bytes);
    count(where, TT_OP_BCAST, bytes, t0);
}

int tt_group_size(const tt_grid *g, int where)
{
    int n;
    MPI_Comm_size(tt_group_comm(g, where), &n);
    return n;
}

/* The world rank of stage s of this GPU's pipeline, for the observer. */
static int stage_world_rank(const tt_grid *g, int s)
{
    return tt_grid_rank_of(g, g->dp_rank, s, g->tp_rank);
}

void tt_send(const tt_grid *g, const void *buf, int count_, MPI_Datatype type, int dest, int tag)
{
    if (dest == MPI_PROC_NULL)
        return;
    double t0 = tt_clock_now();
    const int peer = stage_world_rank(g, dest);
    WATCH_P2P(TT_WATCH_SEND, TT_OP_SEND, g, peer, tag);
    /* Posted, the receiver rung, then waited for: a long message completes
     * only when the receiver takes it, and it rings back then. */
    MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    double t = tt_vclock_now();
    MPI_Isend(buf, count_, type, dest, tag, g->pp_comm, &req[0]);
    if (tt_vclock_ticking())
        MPI_Isend(&t, 1, MPI_DOUBLE, dest, tag, g->pp_clock_comm, &req[1]);
    tt_bell_ring(peer);
    tt_bell_wait(&req[0], peer);
    if (req[1] != MPI_REQUEST_NULL)
        tt_bell_wait(&req[1], peer);
    count_peer(TT_GROUP_PP, TT_OP_SEND, (long long)count_ * type_size(type), t0,
               stage_world_rank(g, dest));
}

void tt_isend(const tt_grid *g, const void *buf, int count_, MPI_Datatype type, int dest, int tag,
              MPI_Request *req)
{
    if (dest == MPI_PROC_NULL) {
        *req = MPI_REQUEST_NULL;
        return;
    }
    double t0 = tt_clock_now();
    const int peer = stage_world_rank(g, dest);
    WATCH_P2P(TT_WATCH_SEND, TT_OP_SEND, g, peer, tag);
    MPI_Isend(buf, count_, type, dest, tag, g->pp_comm, req);
    if (tt_vclock_ticking())
        clock_isend(g, dest, tag);
    tt_bell_ring(peer); /* the data and its clock are posted: wake the receiver */
    unrung_sends += !tt_bell_local(peer);
    count_peer(TT_GROUP_PP, TT_OP_SEND, (long long)count_ * type_size(type), t0,
               stage_world_rank(g, dest));
}

void tt_recv(const tt_grid *g, void *buf, int count_, MPI_Datatype type, int src, int tag)
{
    if (src == MPI_PROC_NULL)
        return;
    double t0 = tt_clock_now();
    const int peer = stage_world_rank(g, src);
    WATCH_P2P(TT_WATCH_RECV, TT_OP_RECV, g, peer, tag);
    MPI_Request req;
    MPI_Irecv(buf, count_, type, src, tag, g->pp_comm, &req);
    tt_bell_wait(&req, peer);
    const long long bytes = (long long)count_ * type_size(type);
    if (tt_vclock_ticking())
        clock_recv(g, src, tag, bytes);
    tt_bell_ring(peer); /* its send may be waiting for us to take it */
    count_peer(TT_GROUP_PP, TT_OP_RECV, bytes, t0, stage_world_rank(g, src));
}

void tt_wait_all(int n, MPI_Request *reqs)
{
    tt_watch_begin(TT_WATCH_SENDS, "wait for the posted sends", MPI_COMM_NULL, -1, -1);
    const int rung = unrung_sends == 0;
    for (int i = 0; i < n; i++)
        tt_bell_wait(&reqs[i], rung ? TT_BELL_ANY : TT_BELL_NONE);
    clock_wait_sends(rung);
    unrung_sends = 0;
    tt_pair_flush();
    tt_watch_end();
}

/* ---- agreement ---- */

int tt_agree_status_world(int status)
{
    MPI_Allreduce(MPI_IN_PLACE, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return status;
}

int tt_agree_status(const tt_grid *g, int status)
{
    tt_allreduce(g, TT_GROUP_OTHER, &status, 1, MPI_INT, MPI_MAX);
    return status;
}

int tt_agree_error(const tt_grid *g, int failed, tt_err *msg)
{
    int who = failed ? g->world_rank : g->world_size;
    tt_allreduce(g, TT_GROUP_OTHER, &who, 1, MPI_INT, MPI_MIN);
    if (who == g->world_size)
        return 0;
    tt_bcast(g, TT_GROUP_OTHER, msg->msg, (int)sizeof msg->msg, MPI_CHAR, who);
    return -1;
}

int tt_group_all_equal(const tt_grid *g, int group, uint32_t value)
{
    const int n = tt_group_size(g, group);
    unsigned int mine = value, *all = tt_malloc((size_t)n * sizeof *all);
    tt_allgather(g, group | TT_BOOKKEEPING, &mine, all, 1, MPI_UNSIGNED);
    int same = 1;
    for (int i = 1; i < n; i++)
        same &= all[i] == all[0];
    free(all);
    tt_allreduce(g, TT_GROUP_OTHER, &same, 1, MPI_INT, MPI_MIN);
    return same;
}

int tt_ranks_on_host(const tt_grid *g)
{
    /* The ranks that share this rank's memory (MPI-3's shared-memory split);
     * no data moves, so nothing is booked. */
    MPI_Comm host;
    int n = 1;
    if (MPI_Comm_split_type(tt_group_comm(g, TT_GROUP_OTHER), MPI_COMM_TYPE_SHARED,
                            g->world_rank, MPI_INFO_NULL, &host) == MPI_SUCCESS) {
        MPI_Comm_size(host, &n);
        MPI_Comm_free(&host);
    }
    return n;
}

/* ---- gathering to rank 0 ---- */

void *tt_gather_var_to_root(const tt_grid *g, const void *mine, int bytes, int **sizes)
{
    const int W = g->world_size, root = g->world_rank == 0;
    int *size = root ? tt_malloc((size_t)W * sizeof(int)) : NULL;
    int *ones = root ? tt_malloc((size_t)W * sizeof(int)) : NULL;
    int *at = root ? tt_malloc((size_t)W * sizeof(int)) : NULL;
    for (int r = 0; root && r < W; r++)
        ones[r] = 1, at[r] = r;
    /* Sizes first (one int each), then the records at their offsets. */
    tt_gatherv(g, TT_GROUP_OTHER, &bytes, 1, size, ones, at, MPI_INT, 0);
    char *all = NULL;
    size_t total = 0;
    for (int r = 0; root && r < W; r++) {
        at[r] = (int)total;
        total += (size_t)size[r];
    }
    if (root)
        all = tt_malloc(total ? total : 1);
    tt_gatherv(g, TT_GROUP_OTHER, mine, bytes, all, size, at, MPI_BYTE, 0);
    free(ones);
    free(at);
    if (sizes)
        *sizes = size;
    else
        free(size);
    return all;
}

void *tt_gather_to_root(const tt_grid *g, const void *mine, int bytes)
{
    const int W = g->world_size, root = g->world_rank == 0;
    int *cnt = root ? tt_malloc((size_t)W * sizeof(int)) : NULL;
    int *at = root ? tt_malloc((size_t)W * sizeof(int)) : NULL;
    for (int r = 0; root && r < W; r++)
        cnt[r] = bytes, at[r] = r * bytes;
    void *all = root ? tt_malloc((size_t)W * (size_t)(bytes ? bytes : 1)) : NULL;
    tt_gatherv(g, TT_GROUP_OTHER, mine, bytes, all, cnt, at, MPI_BYTE, 0);
    free(cnt);
    free(at);
    return all;
}
