/* comm.c - the counted communication layer: the books (calls, bytes, time
 * per group and operation), point-to-point transfers between pipeline
 * stages, agreement and gathering to rank 0. The collectives are in
 * collectives.c; with doorbell.c, pair_reduce.c and pair_host.c these carry
 * all the traffic the books count. cores.c and slice.c make small setup
 * collectives of their own on the host's communicator, uncounted; checkpoint
 * files use MPI-IO in src/train/ckpt_mpiio.c. */
#include "comm_internal.h"
#include "tt/comm/comm.h"
#include "tt/comm/doorbell.h"
#include "tt/comm/watchdog.h"
#include "tt/core/common.h"
#include "tt/core/vclock.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const tt_group_names[TT_NGROUPS] = {"TP", "PP", "DP", "other", "oracle"};
const char *const tt_op_names[TT_NOPS] = {"all-reduce", "all-gather", "reduce-scatter",
                                          "broadcast", "gather", "send", "recv"};

/* One process is one virtual GPU, so one set of counters per process. */
static tt_comm_stats stats;
static tt_comm_observer observer;
/* The purpose of the named call under way (tt_allreduce_named), for the
 * observer; NULL otherwise. Set and cleared around that one call only. */
static const char *purpose;

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
void tt_comm_book(int where, tt_op op, long long bytes, double t0, double t1, int peer)
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
        observer(row, op, bytes, t0, t1, peer, purpose);
}

void tt_allreduce_named(const tt_grid *g, int where, const char *what, void *buf, int count_,
                        MPI_Datatype type, MPI_Op op)
{
    /* The watchdog names it too, if the job hangs here ("the loss
     * all-reduce"): the purpose is a literal without %, a format as is. */
    purpose = what;
    tt_watch_purpose(what, 0, 0);
    tt_allreduce(g, where, buf, count_, type, op);
    purpose = NULL;
}

static void count_peer(int where, tt_op op, long long bytes, double t0, int peer)
{
    tt_comm_book(where, op, bytes, t0, tt_clock_now(), peer);
}

void tt_comm_tally(int where, tt_op op, long long bytes, double t0)
{
    count_peer(where, op, bytes, t0, -1);
}

/* The watchdog's hook before a blocking point-to-point call; the call's end
 * is booked in count_peer, after the clocks' exchanges too. */
#define WATCH_P2P(kind, op, g, peer, tag) \
    tt_watch_begin(kind, tt_op_names[op], (g)->pp_comm, peer, tag)

long long tt_comm_type_size(MPI_Datatype type)
{
    int s;
    MPI_Type_size(type, &s);
    return s;
}

/* ---- the virtual clocks (design.md section 12, tt/core/vclock.h) ----------------
 * Clocks travel beside the data only while they tick (a training step, on
 * every rank at once), and these exchanges are the emulator's bookkeeping,
 * not transfers of the modelled GPUs: they are not counted. */

/* The link a transfer between world ranks a and b uses. */
static const tt_link *link_between(int a, int b)
{
    return tt_cluster_link(tt_vclock_cluster(), a, b);
}

/* ---- stage to stage ------------------------------------------------------
 * Waits sleep on the doorbells (tt/comm/doorbell.h): a sender rings its
 * receiver after posting the data and its clock, the receiver rings the
 * sender back once it took them (a long send completes only then). Sends
 * posted to ranks that cannot ring back (another host) since the last
 * tt_wait_all are counted here: their completion is polled for. */
static int unrung_sends;

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
    count_peer(TT_GROUP_PP, TT_OP_SEND, (long long)count_ * tt_comm_type_size(type), t0,
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
    count_peer(TT_GROUP_PP, TT_OP_SEND, (long long)count_ * tt_comm_type_size(type), t0,
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
    const long long bytes = (long long)count_ * tt_comm_type_size(type);
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
    tt_watch_end();
}

/* ---- agreement ---- */

int tt_agree_status_world(int status)
{
    MPI_Allreduce(MPI_IN_PLACE, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return status;
}

int tt_agree_error_world(int status, tt_err *e)
{
    const int worst = tt_agree_status_world(status);
    if (worst == 0)
        return 0;
    int world, me;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    int who = status ? me : world;
    MPI_Allreduce(MPI_IN_PLACE, &who, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Bcast(e->msg, (int)sizeof e->msg, MPI_CHAR, who, MPI_COMM_WORLD);
    return worst;
}

int tt_all_equal_world(uint32_t value)
{
    unsigned int v[2] = {value, ~value};
    MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_UNSIGNED, MPI_MAX, MPI_COMM_WORLD);
    return v[0] == value && v[1] == ~value;
}

char *tt_bcast_text_world(const char *mine)
{
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    int n = me == 0 ? (int)strlen(mine) + 1 : 0;
    MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char *text = tt_malloc((size_t)n);
    if (me == 0)
        memcpy(text, mine, (size_t)n);
    MPI_Bcast(text, n, MPI_CHAR, 0, MPI_COMM_WORLD);
    return text;
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

/* The ranks that share this rank's memory (MPI-3's shared-memory split),
 * to be freed by the caller; 0 if the split failed. Collective over the
 * world. Neither caller below books anything: the bookkeeping of the run's
 * own, no training data. */
static int host_comm(const tt_grid *g, MPI_Comm *host)
{
    return MPI_Comm_split_type(tt_group_comm(g, TT_GROUP_OTHER), MPI_COMM_TYPE_SHARED,
                               g->world_rank, MPI_INFO_NULL, host) == MPI_SUCCESS;
}

int tt_ranks_on_host(const tt_grid *g)
{
    MPI_Comm host;
    int n = 1;
    if (host_comm(g, &host)) {
        MPI_Comm_size(host, &n);
        MPI_Comm_free(&host);
    }
    return n;
}

double tt_host_min(const tt_grid *g, double t)
{
    MPI_Comm host;
    if (host_comm(g, &host)) {
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MIN, host);
        MPI_Comm_free(&host);
    }
    return t;
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
        if (total > (size_t)INT_MAX) { /* about 10^6 micro-batches' trace events */
            fprintf(stderr, "tiny_transformer: gathering more than %zu bytes to rank 0, past "
                            "the 2 GiB that MPI's int displacements can address: trace "
                            "fewer micro-batches\n", total);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
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
