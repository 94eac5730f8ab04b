/* slice.c - the longer time slice of ranks that share cores (TT_SLICE_MS),
 * given up while other programs want the same cores.
 *
 * A rank with a 20 ms slice keeps its core longer between the hand-overs at
 * its waits, which on a quiet 2-core machine took the 12-rank step from 111
 * to 104 ms (tt/comm/cores.h). But Linux's fair scheduler (EEVDF, 6.6 and
 * later) gives a task that wakes the core at once only when its deadline,
 * one slice ahead, comes before the running task's: a rank with a 20 ms
 * slice woken beside a busy program of the system's 1.4 ms waits behind it,
 * and every hand-over of the step waits so. On a laptop whose two cores
 * were busy with two other programs, the 12-rank run's 20 steps took 15 s
 * with the long slice against 2.5 s with the system's.
 *
 * So a thread of the host's first rank (the leader) compares, every quarter
 * second, the CPU time the cores the job may use spent busy (/proc/stat)
 * with the CPU time of the job's ranks (/proc/PID/stat). When other
 * programs took more than a quarter of a core, it gives every rank of the
 * host the system's slice back (sched_setattr on each rank's main thread);
 * after two quiet samples in a row it gives them the long one again. It
 * starts on the long slice, as the run's first lines say, and the run's last
 * lines say for how long it gave the slice up. What a rank computes does not
 * depend on its slice: the same bits either way. */
#define _GNU_SOURCE
#include "tt/comm/cores.h"
#include "comm/comm_internal.h"
#include "tt/core/common.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/types.h>
#include <unistd.h>
#ifdef __linux__
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#endif

enum {
    SLICE_MS = 20,     /* the time slice asked for on an oversubscribed host */
    SLICE_MAX_MS = 100 /* the longest Linux grants */
};
#define SAMPLE_EVERY 0.25 /* s between the leader's samples */
#define FOREIGN_CORES 0.25 /* other programs' CPU, in cores, that counts as busy */
#define QUIET_SAMPLES 2    /* quiet samples in a row before the long slice returns */
#define WINDOW 4           /* samples a decision spans (a second): the CPU times come in
                              ticks of 10 ms, each of the 13 or so processes' rounded
                              on its own, so a quarter second's sum is off by a few */
#define CPU_WORDS 16       /* 1024 CPUs, as a bit set in unsigned longs */

int tt_cores_slice_env(tt_err *e)
{
    const char *v = getenv("TT_SLICE_MS");
    if (!v || !*v)
        return SLICE_MS;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    /* (strtol skips leading blanks; the other settings take none: ' 5' is
     * refused as '5 ' is) */
    if (errno || end == v || *end != '\0' || v[0] < '0' || v[0] > '9' || x > SLICE_MAX_MS)
        return tt_fail(e, "TT_SLICE_MS='%s' in the environment: the time slice each rank asks "
                          "for on shared cores, in whole ms from 0 (the system's) to %d",
                       v, SLICE_MAX_MS);
    return (int)x;
}

static struct {
    int ms;                  /* the long slice granted to the host's ranks (0: none) */
    int n;                   /* the host's ranks */
    pid_t *pid;              /* leader: [n] */
    unsigned long cpus[CPU_WORDS]; /* leader: the CPUs any rank of the host may use */
    int ncpus;               /* leader: how many */
    double start;            /* leader: the first sample's time */
    double at[WINDOW];       /* leader: the last samples' times (the latest at k % WINDOW), ... */
    unsigned long long all[WINDOW], ours[WINDOW]; /* ... busy ticks and the ranks' */
    int k;                   /* leader: samples taken */
    int quiet, busy;         /* leader: quiet samples in a row; the slice given up */
    double busy_s;           /* leader: seconds the slice was given up, to the latest sample */
    int running, stop;       /* leader: the thread runs; asked to stop */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} sl = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

int tt_cores_slice_watch(double *given_up, double *watched)
{
    if (!sl.running)
        return 0;
    pthread_mutex_lock(&sl.mu);
    *given_up = sl.busy_s;
    *watched = sl.at[sl.k % WINDOW] - sl.start;
    pthread_mutex_unlock(&sl.mu);
    return 1;
}

#if defined(__linux__) && defined(SYS_sched_setattr)
/* The kernel's struct sched_attr (glibc has no wrapper before 2.41). */
typedef struct {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period; /* runtime: a fair task's slice, ns */
    uint32_t util_min, util_max;
} sched_attr_t;

/* Sets the slice of thread tid (0: the caller; a process id names its main
 * thread) to ms (0: the system's; Linux 6.12 and later take the runtime of a
 * SCHED_OTHER thread as its slice, up to 100 ms, earlier kernels ignore it)
 * and returns the slice the kernel then reports, in ms, or 0 where it
 * reports none or the thread runs under another policy (chrt: not ours to
 * change). */
static int set_slice(pid_t tid, int ms)
{
    sched_attr_t a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    if (syscall(SYS_sched_getattr, tid, &a, sizeof a, 0) != 0 || a.policy != SCHED_OTHER)
        return 0;
    a.size = sizeof a;
    a.flags = 0;
    a.runtime = (uint64_t)ms * 1000000u;
    if (syscall(SYS_sched_setattr, tid, &a, 0) != 0)
        return 0;
    memset(&a, 0, sizeof a);
    if (syscall(SYS_sched_getattr, tid, &a, sizeof a, 0) != 0)
        return 0;
    return (int)(a.runtime / 1000000u);
}

/* The busy ticks of the CPUs in sl.cpus (user, nice, system, irq, softirq,
 * steal: all but idle and iowait), or 0 when /proc/stat cannot be read. */
static unsigned long long cpus_busy(void)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return 0;
    char line[512];
    unsigned long long sum = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned cpu;
        unsigned long long u, ni, sy, id, io, irq, sirq, st;
        if (strncmp(line, "cpu", 3) != 0 || line[3] < '0' || line[3] > '9') /* not the total */
            continue;
        if (sscanf(line, "cpu%u %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &u, &ni, &sy, &id,
                   &io, &irq, &sirq, &st) != 9 ||
            cpu >= CPU_WORDS * 8 * sizeof(unsigned long))
            continue;
        const unsigned w = cpu / (8 * sizeof(unsigned long)), b = cpu % (8 * sizeof(unsigned long));
        if (sl.cpus[w] >> b & 1ul)
            sum += u + ni + sy + irq + sirq + st;
    }
    fclose(f);
    return sum;
}

/* The CPU ticks (user and system, all threads) the host's ranks used. */
static unsigned long long ranks_cpu(void)
{
    unsigned long long sum = 0;
    for (int i = 0; i < sl.n; i++) {
        char path[64], buf[1024];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)sl.pid[i]);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = '\0';
        /* after the command's name, which may hold blanks: state is field
         * 3, utime 14 and stime 15 */
        const char *p = strrchr(buf, ')');
        unsigned long long ut, st;
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                        &st) == 2)
            sum += ut + st;
    }
    return sum;
}

/* The leader's sample: gives the long slice up, or takes it back, for
 * every rank of the host. Called with sl.mu held. */
static void sample(void)
{
    const double now = tt_now();
    const unsigned long long all = cpus_busy(), ours = ranks_cpu();
    if (sl.busy)
        sl.busy_s += now - sl.at[sl.k % WINDOW];
    /* against the oldest sample of the window (the first, until it fills) */
    const int old = sl.k < WINDOW ? 0 : (sl.k + 1) % WINDOW;
    const double ticks = (double)sysconf(_SC_CLK_TCK) * (now - sl.at[old]);
    const double foreign = ((double)all - (double)sl.all[old]) - ((double)ours - (double)sl.ours[old]);
    const int failed = all == 0 || sl.all[old] == 0; /* /proc/stat unread at either end */
    sl.k++;
    const int slot = sl.k % WINDOW;
    sl.at[slot] = now;
    sl.all[slot] = all;
    sl.ours[slot] = ours;
    if (failed || ticks <= 0 || sl.k < 2) /* (a half second at least) */
        return;
    /* Each process's CPU time comes in whole ticks, rounded on its own, and
     * so does each CPU's busy time: their sum is off by up to about one tick
     * each, which a job of many ranks must not take for other programs. */
    const double noise = 0.5 * (double)(sl.n + sl.ncpus);
    int busy = sl.busy;
    if (foreign > FOREIGN_CORES * ticks && foreign > noise) {
        sl.quiet = 0;
        busy = 1;
    } else if (++sl.quiet >= QUIET_SAMPLES) {
        busy = 0;
    }
    if (busy != sl.busy)
        for (int i = 0; i < sl.n; i++)
            set_slice(sl.pid[i], busy ? 0 : sl.ms);
    sl.busy = busy;
}

static void *watch(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&sl.mu);
    while (!sl.stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += (long)(SAMPLE_EVERY * 1e9);
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        if (pthread_cond_timedwait(&sl.cv, &sl.mu, &until) == ETIMEDOUT && !sl.stop)
            sample();
    }
    pthread_mutex_unlock(&sl.mu);
    return NULL;
}
#else
static int set_slice(pid_t tid, int ms)
{
    (void)tid;
    (void)ms;
    return 0;
}
#endif

int tt_slice_lengthen(MPI_Comm local)
{
    tt_err e;
    const int ms = tt_cores_slice_env(&e); /* main refused a bad value before */
    tt_slice_forget();
    int got = ms > 0 ? set_slice(0, ms) : 0, rank, all_got;
    /* Watched only when every rank of the host has it (the leader sets them
     * all the same) and the leader can start its thread. */
    MPI_Comm_rank(local, &rank);
    MPI_Comm_size(local, &sl.n);
    MPI_Allreduce(&got, &all_got, 1, MPI_INT, MPI_MIN, local);
    pid_t mine = getpid();
    sl.pid = tt_malloc((size_t)sl.n * sizeof *sl.pid);
    MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, sl.pid, (int)sizeof mine, MPI_BYTE, 0, local);
    unsigned long bits[CPU_WORDS] = {0};
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_WORDS * 8 * (int)sizeof(unsigned long) && c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set))
                bits[c / (8 * sizeof(unsigned long))] |= 1ul << (c % (8 * sizeof(unsigned long)));
#endif
    MPI_Reduce(bits, sl.cpus, CPU_WORDS, MPI_UNSIGNED_LONG, MPI_BOR, 0, local);
    int watching = 0;
#if defined(__linux__) && defined(SYS_sched_setattr)
    if (rank == 0 && all_got > 0) {
        for (int w = 0; w < CPU_WORDS; w++)
            sl.ncpus += __builtin_popcountl(sl.cpus[w]);
        sl.ms = all_got;
        sl.start = sl.at[0] = tt_now();
        sl.all[0] = cpus_busy();
        sl.ours[0] = ranks_cpu();
        sl.k = 0;
        sl.stop = 0;
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&sl.cv, &ca);
        pthread_condattr_destroy(&ca);
        sl.running = pthread_create(&sl.thread, NULL, watch, NULL) == 0;
        watching = sl.running;
    }
#endif
    /* All or none: a rank that could not take the long slice (under chrt,
     * say), or a watcher that could not start, leaves every rank of the host
     * on the system's slice, as the run's first lines then say. */
    MPI_Bcast(&watching, 1, MPI_INT, 0, local);
    if (!watching) {
        if (got > 0)
            set_slice(0, 0);
        return 0;
    }
    return all_got;
}

void tt_slice_forget(void)
{
    if (sl.running) {
        pthread_mutex_lock(&sl.mu);
        sl.stop = 1;
        pthread_cond_signal(&sl.cv);
        pthread_mutex_unlock(&sl.mu);
        pthread_join(sl.thread, NULL);
    }
    free(sl.pid);
    sl.pid = NULL;
    sl.running = sl.stop = sl.busy = sl.quiet = sl.ms = sl.n = sl.ncpus = 0;
    sl.busy_s = 0.0;
}
