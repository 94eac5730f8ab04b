/* cores.c - binding each DP replica's ranks to one core when a host has
 * more ranks than cores, and a longer time slice for them there
 * (tt/comm/cores.h says why and when). */
#define _GNU_SOURCE
#include "tt/comm/cores.h"
#include "tt/comm/doorbell.h"
#include "tt/comm/yield.h"
#include "comm/comm_internal.h"
#include "tt/core/common.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __linux__
#include <sched.h>
#include <unistd.h>
#define TT_HAVE_AFFINITY 1
#endif

/* Why the ranks were left to the operating system (index sent from rank 0). */
static const char *const reasons[] = {
    NULL,
    "--pin-ranks off",
    "each DP replica is a single rank",
    "a DP replica spans hosts",
    "the replicas do not divide evenly among the cores",
    "mpirun bound the ranks already",
    "this system cannot bind ranks to cores",
    "binding failed on some rank",
};
enum { OK, OFF, ONE_RANK, SPLIT, UNEVEN, BOUND, UNSUPPORTED, FAILED };

static tt_cores placed;
static int *core_of; /* [world size] each rank's core, -1: not bound */
static int known;    /* entries in core_of */

static void lend_free(void);

void tt_cores_forget(void)
{
    free(core_of);
    core_of = NULL;
    known = 0;
    lend_free();
    tt_slice_forget();
}

#ifdef TT_HAVE_AFFINITY
/* The k-th CPU (from 0) set in mask. */
static int nth_cpu(const cpu_set_t *mask, int k)
{
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, mask) && k-- == 0)
            return c;
    return -1;
}

/* The decision on this host; every local rank computes the same from the
 * same gathered values. Sets *core to this rank's core when pinning. */
static int decide(const tt_grid *g, MPI_Comm local, int want, int *ranks, int *cores,
                  int *replicas, int *core, cpu_set_t *mask)
{
    int n, me;
    MPI_Comm_size(local, &n);
    MPI_Comm_rank(local, &me);
    sched_getaffinity(0, sizeof *mask, mask);
    cpu_set_t *masks = tt_malloc((size_t)n * sizeof *masks);
    int *dps = tt_malloc((size_t)n * sizeof *dps);
    MPI_Allgather(mask, (int)sizeof *mask, MPI_BYTE, masks, (int)sizeof *mask, MPI_BYTE, local);
    MPI_Allgather(&g->dp_rank, 1, MPI_INT, dps, 1, MPI_INT, local);
    /* the cores this host's ranks may use: all of their masks together */
    cpu_set_t all;
    CPU_ZERO(&all);
    int same_mask = 1;
    for (int i = 0; i < n; i++) {
        CPU_OR(&all, &all, &masks[i]);
        same_mask &= CPU_EQUAL(&masks[i], mask);
    }
    *ranks = n;
    *cores = CPU_COUNT(&all);
    /* Whole replicas: each dp rank present here has all its tp x pp ranks
     * here. Replica index on this host: distinct dp ranks below mine. */
    int whole = 1, mine = 0, distinct = 0;
    for (int i = 0; i < n; i++) {
        int count = 0, first = 1;
        for (int j = 0; j < n; j++) {
            count += dps[j] == dps[i];
            first &= !(j < i && dps[j] == dps[i]);
        }
        whole &= count == g->tp * g->pp;
        distinct += first;
        mine += first && dps[i] < g->dp_rank;
    }
    *replicas = whole ? distinct : 0;
    free(masks);
    free(dps);
    if (n <= *cores)
        return OK; /* not oversubscribed: nothing to do, nothing to say */
    if (!want)
        return OFF;
    if (!same_mask)
        return BOUND;
    if (g->tp * g->pp == 1)
        return ONE_RANK;
    if (!whole)
        return SPLIT;
    if (*replicas % *cores != 0)
        return UNEVEN;
    *core = nth_cpu(mask, (int)((long)mine * *cores / *replicas));
    return OK;
}
#endif

int tt_cores_lend_env(tt_err *e)
{
    return tt_env_switch("TT_LEND_CORES", 1,
                         "whether a core whose ranks are done with their step lends itself to "
                         "the ranks still at work, 1 (the default) or 0",
                         e);
}

/* ---- lending a core that finished its step ------------------------------
 * The replicas of a host meet at the end of every step (the loss, the
 * gradient norm), and the one whose core ran slower that step (the turns
 * its six ranks took, the machine) sets the pace while the other core
 * idles: wall-clock traces of a 12-rank run on 2 cores showed one
 * replica's last backward 2 to 48 ms behind the other's (9 ms in the median
 * step of about 100). So the last rank of a
 * core to finish its step's pipeline work lends the core to the ranks of
 * the cores still working (adds it to their allowed CPUs), and the
 * scheduler moves a waking rank there: a TP pair of the late replica then
 * runs its two halves on two cores at once. Each rank takes its own core
 * back when its next step begins, which is after every rank has finished
 * this one (the step's loss and norm all-reduce meets them all). TT_LEND_CORES=0 in
 * the environment turns it off. Where a rank runs changes no bit. */
typedef struct {
    _Atomic unsigned long long done; /* this core's ranks through their pipeline work, all steps */
    char pad[64 - sizeof(unsigned long long)];
} core_count;

static struct {
    int on;
    int me, home;                 /* this rank among the host's ranks; its core's index */
    int n, ncores;                /* the host's ranks, its cores */
    int *home_of;                 /* [n] each rank's core index */
    int *cpu;                     /* [ncores] the CPU of each index */
    int *per_core;                /* [ncores] ranks bound there */
    pid_t *pid;                   /* [n] */
    core_count *count;            /* [ncores], shared by the host's ranks */
    _Atomic int *widened;         /* [n], shared: another core was lent to rank i */
    size_t len;
    unsigned long long steps;     /* this rank's steps so far */
    long lent;                    /* steps whose end this rank lent its core in */
} lend = {0};

static void lend_free(void)
{
    tt_bell_unshare(lend.count, lend.len);
    free(lend.home_of);
    free(lend.cpu);
    free(lend.per_core);
    free(lend.pid);
    memset(&lend, 0, sizeof lend);
}

#ifdef TT_HAVE_AFFINITY
/* Collective over local (the host's ranks), after every one of them was
 * bound (core: this rank's CPU): the shared counters and who is where. */
static void lend_setup(MPI_Comm local, int core)
{
    lend_free();
    tt_err e;
    int want = tt_cores_lend_env(&e) == 1; /* main refused a bad value before */
    MPI_Allreduce(MPI_IN_PLACE, &want, 1, MPI_INT, MPI_MIN, local);
    if (!want)
        return;
    MPI_Comm_size(local, &lend.n);
    MPI_Comm_rank(local, &lend.me);
    int *cpus = tt_malloc((size_t)lend.n * sizeof *cpus);
    lend.pid = tt_malloc((size_t)lend.n * sizeof *lend.pid);
    pid_t mine = getpid();
    MPI_Allgather(&core, 1, MPI_INT, cpus, 1, MPI_INT, local);
    MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, lend.pid, (int)sizeof mine, MPI_BYTE, local);
    /* the cores in use, each once, in the order first met */
    lend.cpu = tt_malloc((size_t)lend.n * sizeof *lend.cpu);
    lend.home_of = tt_malloc((size_t)lend.n * sizeof *lend.home_of);
    lend.per_core = tt_calloc((size_t)lend.n, sizeof *lend.per_core);
    for (int i = 0; i < lend.n; i++) {
        int c = 0;
        while (c < lend.ncores && lend.cpu[c] != cpus[i])
            c++;
        if (c == lend.ncores)
            lend.cpu[lend.ncores++] = cpus[i];
        lend.home_of[i] = c;
        lend.per_core[c]++;
    }
    free(cpus);
    lend.home = lend.home_of[lend.me];
    lend.len = (size_t)lend.ncores * sizeof(core_count) + (size_t)lend.n * sizeof(_Atomic int);
    lend.count = tt_bell_share(local, lend.len, 1); /* zeroed: a new object */
    if (!lend.count) {
        lend_free();
        return;
    }
    lend.widened = (_Atomic int *)(lend.count + lend.ncores);
    lend.on = 1;
}
#endif

void tt_cores_step_begin(void)
{
#ifdef TT_HAVE_AFFINITY
    if (!lend.on || !atomic_exchange(&lend.widened[lend.me], 0))
        return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(lend.cpu[lend.home], &one);
    sched_setaffinity(0, sizeof one, &one);
#endif
}

void tt_cores_step_done(void)
{
#ifdef TT_HAVE_AFFINITY
    if (!lend.on)
        return;
    const unsigned long long s = ++lend.steps;
    const unsigned long long v = atomic_fetch_add(&lend.count[lend.home].done, 1ull) + 1;
    if (v != s * (unsigned long long)lend.per_core[lend.home])
        return; /* not the last of this core */
    int any = 0;
    for (int i = 0; i < lend.n; i++) {
        const int h = lend.home_of[i];
        if (h == lend.home ||
            atomic_load(&lend.count[h].done) >= s * (unsigned long long)lend.per_core[h])
            continue; /* this core, or one that is done too */
        cpu_set_t set;
        if (sched_getaffinity(lend.pid[i], sizeof set, &set) != 0)
            continue;
        CPU_SET(lend.cpu[lend.home], &set);
        atomic_store(&lend.widened[i], 1);
        any |= sched_setaffinity(lend.pid[i], sizeof set, &set) == 0;
    }
    lend.lent += any;
#endif
}

long tt_cores_lent(void) { return lend.lent; }
int tt_cores_lending(void) { return lend.on; }

tt_cores tt_cores_place(const tt_grid *g, int want)
{
    tt_cores out = {0};
    int reason = UNSUPPORTED, info[6] = {0}, my_core = -1;
#ifdef TT_HAVE_AFFINITY
    MPI_Comm local;
    MPI_Comm_split_type(g->world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    cpu_set_t mask;
    int core = -1;
    reason = decide(g, local, want, &info[0], &info[1], &info[2], &core, &mask);
    int failed = 0;
    if (core >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(core, &one);
        failed = sched_setaffinity(0, sizeof one, &one) != 0;
    }
    /* All or none of a host's ranks are bound: a half-bound host would
     * crowd the bound cores. */
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, local);
    if (any_failed) {
        sched_setaffinity(0, sizeof mask, &mask);
        reason = FAILED;
    } else if (core >= 0) {
        my_core = core;
    }
    /* every rank of the host is bound (all or none): the cores may lend */
    if (!any_failed && core >= 0)
        lend_setup(local, core);
    else
        lend_free();

    info[3] = my_core >= 0;
    /* Bound or not, ranks that share a core take turns on it: a longer
     * slice lets each run on longer before the next takes its caches. Only
     * for a job on one host with the doorbells on: a rank that polls (across
     * hosts, or TT_NO_DOORBELL) wakes from its short sleeps to test, and
     * behind other ranks' 20 ms slices each test came late (a 3-host run
     * on 2 cores went from 2 s to over 90 s at times). Given up while other
     * programs want the cores (slice.c). */
    if (info[0] > info[1] && info[0] == g->world_size && tt_bell_local(g->world_rank))
        info[5] = tt_slice_lengthen(local);
    else
        tt_slice_forget();
    MPI_Comm_free(&local);
#endif
    info[4] = reason;
    MPI_Bcast(info, 6, MPI_INT, 0, g->world);
    out.ranks = info[0];
    out.cores = info[1];
    out.replicas = info[2];
    out.pinned = info[3];
    out.why_not = reasons[info[4]];
    out.slice_ms = info[5];
    free(core_of);
    core_of = tt_malloc((size_t)g->world_size * sizeof *core_of);
    MPI_Allgather(&my_core, 1, MPI_INT, core_of, 1, MPI_INT, g->world);
    known = g->world_size;
    placed = out;
    return out;
}

void tt_cores_print(const tt_grid *g, FILE *out, int detail)
{
    const tt_cores *c = &placed;
    if (c->cores <= 0 || c->ranks <= c->cores)
        return;
    if (!c->pinned)
        fprintf(out, "cores: %d ranks share %d cores on this host, placed by the operating "
                     "system (not bound: %s)\n", c->ranks, c->cores, c->why_not);
    else
        fprintf(out, "cores: %d ranks share %d cores on this host; each DP replica's %d ranks "
                     "are bound to one core (%d replica%s a core; with --pin-ranks off the OS "
                     "would place them)\n", c->ranks, c->cores, g->tp * g->pp, c->replicas / c->cores,
                c->replicas / c->cores > 1 ? "s" : "");
    if (c->slice_ms > 0)
        fprintf(out, "cores: each rank may run %d ms before the next one sharing its core, "
                     "while no other program keeps these cores busy (TT_SLICE_MS=0: the "
                     "system's time slice)\n", c->slice_ms);
    if (!tt_mpi_yields())
        fprintf(out, "cores: this MPI's blocking calls keep the core while they wait, so "
                     "collectives run non-blocking, tested with a yield of the core between "
                     "tests (TT_MPI_YIELDS=1: MPI's own blocking calls)\n");
    if (!detail || !c->pinned)
        return;
    /* every bound rank of the job, by core (across hosts a core number
     * names one core on each host) */
    int top = -1;
    for (int r = 0; r < known; r++)
        top = core_of[r] > top ? core_of[r] : top;
    char name[48];
    for (int core = 0; core <= top; core++) {
        int any = 0;
        for (int r = 0; r < known; r++)
            if (core_of[r] == core) {
                if (!any)
                    fprintf(out, "  core %d:", core);
                fprintf(out, " %s", tt_gpu_name(g, r, name, sizeof name));
                any = 1;
            }
        if (any)
            fprintf(out, "\n");
    }
}
