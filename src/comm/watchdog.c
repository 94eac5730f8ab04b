/* watchdog.c - the hang report of --watchdog (see tt/comm/watchdog.h).
 *
 * Why a thread: a rank blocked in MPI runs none of our code, so something
 * else must notice. A helper thread sleeping on a condition variable with a
 * monotonic deadline costs nothing while all is well, can format the report
 * with ordinary stdio (it is not a signal handler) and never touches MPI, so
 * MPI_THREAD_FUNNELED is all it needs. It ends the process with _exit(1):
 * MPI_Abort would be an MPI call from the wrong thread, and exit() would run
 * atexit handlers in MPI's library while the main thread is inside it.
 * mpirun then ends the other ranks, as for any rank that dies.
 *
 * What a rank "knows of its peers" is only what passed through this rank:
 * the last message it received from and sent to each world rank, and the
 * last collective it completed on each group (every member reached that
 * one). That is exactly what tells a student which side of a pair went
 * wrong: "I am waiting for micro-batch 2's gradient from gpu3, and the last
 * thing gpu3 sent me was micro-batch 1's". */
#define _POSIX_C_SOURCE 200809L

#include "tt/comm/watchdog.h"
#include "tt/core/faults.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How long --inject-bug stall holds its rank: far beyond any --watchdog a
 * test gives, yet bounded, so a run with the watchdog off still ends. */
#define STALL_SECONDS 30

/* What a call is for (tt_watch_purpose): a format with up to two %d and its
 * numbers, formatted only when a report is written. */
typedef struct {
    const char *what; /* NULL: not known */
    int a, b;
} watch_purpose;

/* The grid's communicators, in the order of the reports. */
enum { G_TP, G_PP, G_DP, G_WORLD, NG };

typedef struct {
    int valid, kind, tag, mb;
    const char *op;
    long step;
    double t; /* when it completed, monotonic seconds */
    watch_purpose why;
} watch_event;

typedef struct {
    int kind, group, peer, tag, mb;
    const char *op;
    long step;
    double since;
    watch_purpose why;
} watch_call;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake;
static pthread_t helper;
static int on, stopping, armed;
static double limit;
static const tt_grid *grid;
static watch_call now_in;               /* the call in progress, when armed */
static watch_event *sent, *received;    /* per world rank */
static watch_event coll[NG];            /* last collective per group */
/* The context: read by the main thread only, except under mu. */
static long ctx_step = -1;
static int ctx_mb = -1;
static watch_purpose ctx_why;

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *const group_name[NG] = {"TP", "PP", "DP", "world"};
static const char *const group_words[NG] = {"the TP group", "the PP group", "the DP group",
                                            "the world"};

/* Which of the grid's communicators comm is (anything else counts as the
 * world: the grid's own, or MPI_COMM_WORLD). */
static int group_of(MPI_Comm comm)
{
    return comm == grid->tp_comm ? G_TP
         : comm == grid->pp_comm ? G_PP
         : comm == grid->dp_comm ? G_DP
                                 : G_WORLD;
}

/* ---- the report (helper thread, under mu) ---------------------------------- */

typedef struct {
    char buf[4096];
    size_t n;
} text;

static void add(text *t, const char *fmt, ...)
{
    if (t->n >= sizeof t->buf - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t->buf + t->n, sizeof t->buf - t->n, fmt, ap);
    va_end(ap);
    if (k > 0)
        t->n += (size_t)k < sizeof t->buf - t->n ? (size_t)k : sizeof t->buf - 1 - t->n;
}

static void add_when(text *t, long step, int mb)
{
    if (step < 0)
        add(t, "before the first step");
    else if (mb < 0)
        add(t, "step %ld", step);
    else
        add(t, "step %ld, micro-batch %d", step, mb);
}

/* "the activation of micro-batch 3 into chunk 2": the caller's format, whose
 * numbers are the purpose's own (a format with fewer %d ignores the rest). */
static void add_purpose(text *t, const watch_purpose *w)
{
    add(t, "the ");
    add(t, w->what, w->a, w->b);
}

/* "a message with tag 5 (step 0, micro-batch 1) 3.1 s ago", or for a
 * collective "all-reduce (step 2) 0.4 s ago"; by its purpose when known:
 * "the gradient of micro-batch 1 back into chunk 0 (tag 5, step 0,
 * micro-batch 1) 3.1 s ago", "the loss all-reduce (all-reduce, step 2)". */
static void add_event(text *t, const watch_event *e, double now)
{
    if (!e->valid) {
        add(t, "nothing");
        return;
    }
    const int msg = e->kind == TT_WATCH_SEND || e->kind == TT_WATCH_RECV;
    if (e->why.what) {
        add_purpose(t, &e->why);
        if (msg)
            add(t, " (tag %d, ", e->tag);
        else
            add(t, " (%s, ", e->op);
    } else {
        if (msg)
            add(t, "a message with tag %d", e->tag);
        else
            add(t, "%s", e->op);
        add(t, " (");
    }
    add_when(t, e->step, e->mb);
    add(t, ") %.1f s ago", now - e->t);
}

/* Is world rank r in this rank's group g? */
static int in_group(int g, int r)
{
    const tt_grid *G = grid;
    switch (g) {
    case G_TP:
        return tt_grid_dp_of(G, r) == G->dp_rank && tt_grid_pp_of(G, r) == G->pp_rank;
    case G_PP:
        return tt_grid_dp_of(G, r) == G->dp_rank && tt_grid_tp_of(G, r) == G->tp_rank;
    case G_DP:
        return tt_grid_pp_of(G, r) == G->pp_rank && tt_grid_tp_of(G, r) == G->tp_rank;
    default:
        return 1;
    }
}

/* What this rank last did with peer r, on one line. */
static void add_peer(text *t, int r, double now)
{
    char name[64];
    add(t, "    %s: last received from it ", tt_gpu_name(grid, r, name, sizeof name));
    add_event(t, &received[r], now);
    add(t, "; last sent to it ");
    add_event(t, &sent[r], now);
    add(t, "\n");
}

static void report(double now)
{
    const watch_call *c = &now_in;
    const int g = c->group;
    char me[64], peer[64];
    text t = {.n = 0};
    tt_gpu_name(grid, grid->world_rank, me, sizeof me);
    add(&t, "tiny_transformer: watchdog: %s (world rank %d) has waited %.1f s in one "
            "communication (--watchdog %g); ending the job\n",
        me, grid->world_rank, now - c->since, limit);
    add(&t, "  waiting in: %s", c->op);
    if (c->kind != TT_WATCH_SENDS)
        add(&t, " on %s", group_words[g]);
    if (c->peer >= 0) {
        add(&t, " %s %s (world rank %d)", c->kind == TT_WATCH_RECV ? "from" : "to",
            tt_gpu_name(grid, c->peer, peer, sizeof peer), c->peer);
    } else if (c->kind == TT_WATCH_COLLECTIVE) {
        /* Who must also enter it for it to end. */
        int shown = 0;
        for (int r = 0; r < grid->world_size; r++)
            if (in_group(g, r) && shown++ < 16)
                add(&t, "%s%s", shown == 1 ? " {" : ", ", tt_gpu_name(grid, r, peer, sizeof peer));
        add(&t, shown > 16 ? ", ...}" : "}");
    }
    if (c->tag >= 0)
        add(&t, ", tag %d", c->tag);
    add(&t, ", ");
    add_when(&t, c->step, c->mb);
    add(&t, "\n");
    if (c->why.what) {
        add(&t, "  for: ");
        add_purpose(&t, &c->why);
        add(&t, "\n");
    }
    if (c->peer >= 0) {
        add(&t, "  what this GPU last saw of that peer:\n");
        add_peer(&t, c->peer, now);
    } else {
        /* A collective waits for every member: the last message of each one
         * that exchanged any with this GPU. */
        int shown = 0;
        for (int r = 0; r < grid->world_size && shown < 16; r++)
            if (r != grid->world_rank && in_group(g, r) && (sent[r].valid || received[r].valid)) {
                if (!shown++)
                    add(&t, "  what this GPU last saw of the members it exchanged "
                            "messages with:\n");
                add_peer(&t, r, now);
            }
    }
    /* Every member of a group reached the last collective completed on it. */
    add(&t, "  the last collective it completed on each group (all members reached it):");
    for (int k = 0; k < NG; k++) {
        add(&t, "%s %s ", k ? ";" : "", group_name[k]);
        add_event(&t, &coll[k], now);
    }
    add(&t, "\n");
    /* One write, so the report stays in one piece among the other ranks'. */
    const char *p = t.buf;
    size_t left = t.n;
    while (left > 0) {
        ssize_t w = write(STDERR_FILENO, p, left);
        if (w <= 0)
            break;
        p += w;
        left -= (size_t)w;
    }
}

/* The longest the thread sleeps: it also watches its own process. */
#define TICK_SECONDS 0.5

static void *watch_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    double last = mono();
    while (!stopping) {
        double now = mono();
        /* Woken a second or more after it asked: this process itself did
         * not run (stopped by SIGSTOP or a debugger, or starved), so it
         * cannot tell how long it waited for a peer; the time it was frozen
         * does not count. A rank stopped mid-run and continued when mpirun
         * ends the job would otherwise report a wait of its own and blame
         * a peer. */
        if (now - last > TICK_SECONDS + 1.0 && armed)
            now_in.since += now - last - TICK_SECONDS;
        last = now;
        if (armed && now - now_in.since >= limit) {
            report(now);
            _exit(1);
        }
        /* A tick, or less to the armed call's deadline: a call that begins
         * while this sleeps has its deadline after the wake-up (the limit is
         * at least a second), so no call is seen late. */
        double until = now + TICK_SECONDS;
        if (armed && now_in.since + limit < until)
            until = now_in.since + limit;
        struct timespec ts = {(time_t)until, (long)((until - (double)(time_t)until) * 1e9)};
        pthread_cond_timedwait(&wake, &mu, &ts);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* ---- the hooks (main thread) ----------------------------------------------- */

void tt_watch_start(const tt_grid *g, double seconds)
{
    grid = g; /* also for --inject-bug stall, which acts with the watchdog off */
    if (on || seconds <= 0)
        return;
    limit = seconds;
    sent = calloc((size_t)g->world_size, sizeof *sent);
    received = calloc((size_t)g->world_size, sizeof *received);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&wake, &ca);
    pthread_condattr_destroy(&ca);
    stopping = armed = 0;
    /* Without the thread (or the tables) there is no watchdog, but the run
     * itself is unaffected. */
    if (!sent || !received || pthread_create(&helper, NULL, watch_main, NULL) != 0) {
        fprintf(stderr, "tiny_transformer: warning: --watchdog could not be started\n");
        free(sent);
        free(received);
        sent = received = NULL;
        return;
    }
    on = 1;
}

void tt_watch_stop(void)
{
    if (!on)
        return;
    pthread_mutex_lock(&mu);
    stopping = 1;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&mu);
    pthread_join(helper, NULL);
    pthread_cond_destroy(&wake);
    free(sent);
    free(received);
    sent = received = NULL;
    on = 0;
}

/* --inject-bug stall: the last world rank stops before its first
 * communication of step 1, as a rank stuck in a long computation or a lost
 * message would, and its peers are left waiting for it. */
static void stall_here(void)
{
    static int done;
    if (done || ctx_step != 1 || !grid || grid->world_rank != grid->world_size - 1)
        return;
    done = 1;
    sleep(STALL_SECONDS);
}

void tt_watch_begin(tt_watch_kind kind, const char *op, MPI_Comm comm, int peer, int tag)
{
    if (tt_fault_active(TT_FAULT_STALL))
        stall_here();
    /* A purpose is this call's only (tt_watch_purpose), watched or not. */
    const watch_purpose why = ctx_why;
    ctx_why.what = NULL;
    if (!on)
        return;
    pthread_mutex_lock(&mu);
    now_in = (watch_call){kind, group_of(comm), peer, tag, ctx_mb, op, ctx_step, mono(), why};
    armed = 1;
    pthread_mutex_unlock(&mu);
}

void tt_watch_end(void)
{
    if (!on)
        return;
    pthread_mutex_lock(&mu);
    if (armed) {
        const watch_call *c = &now_in;
        watch_event e = {1, c->kind, c->tag, c->mb, c->op, c->step, mono(), c->why};
        if (c->kind == TT_WATCH_COLLECTIVE)
            coll[c->group] = e;
        else if (c->peer >= 0 && c->peer < grid->world_size)
            (c->kind == TT_WATCH_RECV ? received : sent)[c->peer] = e;
        armed = 0;
    }
    pthread_mutex_unlock(&mu);
}

void tt_watch_context(long step, int mb)
{
    ctx_step = step;
    ctx_mb = mb;
}

void tt_watch_purpose(const char *what, int a, int b)
{
    ctx_why = (watch_purpose){what, a, b};
}
