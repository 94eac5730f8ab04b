/* doorbell.c - waiting asleep, woken by the peer that ends the wait
 * (tt/comm/doorbell.h says why and who rings).
 *
 * The page: one cache line per rank of this host (its bell, a counter the
 * ringers increment, and whether it sleeps), then the arrival records. Rank
 * 0 of the host creates it as a POSIX shared-memory object, the others map
 * it, and the name is unlinked at once, so nothing outlives the job. A
 * record belongs to one communicator: its first collective through here
 * gives it the next free record of its rank 0 (broadcast once over MPI).
 * A record counts arrivals forever (member i's s-th arrival makes the count
 * reach n s at the latest), so it never needs resetting; the members'
 * bytes alternate between two rows by the parity of s, and a member can
 * write row s+2 only after everyone arrived at s+1, that is after everyone
 * has read row s. */
#define _GNU_SOURCE
#include "tt/comm/doorbell.h"
#include "tt/core/common.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __linux__
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#define TT_HAVE_FUTEX 1
#endif

enum {
    SLEEP_LIMIT = 1000000, /* ns: the longest sleep between tests or progress calls */
    LINE = 64,          /* one rank's bell per cache line: no false sharing */
    RECS_PER_RANK = 32, /* communicators each rank can lead */
    MAX_LOCAL = 256     /* ranks per host the page is made for */
};

typedef struct {
    _Atomic unsigned bell;
    _Atomic int sleeping; /* 0 awake; 1 + the world rank whose ring it waits for;
                             -1 asleep for any ring */
} bell_t;

typedef struct {
    _Atomic unsigned long long count; /* arrivals so far */
} record_head;

static struct {
    int on;              /* every rank of the job has its page */
    int L, me;           /* ranks on this host, this rank's index among them */
    int world_me;        /* this rank in MPI_COMM_WORLD */
    int *local_of;       /* [world size] host index of a world rank, or -1 */
    char *page;
    size_t len, rec_size;
    int next_rec;        /* records this rank has handed out */
    int keyval;
    MPI_Group host_group;
} B = {.keyval = MPI_KEYVAL_INVALID, .host_group = MPI_GROUP_NULL};

static bell_t *bell_of(int local) { return (bell_t *)(B.page + (size_t)local * LINE); }

static record_head *record(int id)
{
    return (record_head *)(B.page + (size_t)B.L * LINE + (size_t)id * B.rec_size);
}

/* Member i's bytes in row r (0 or 1) of a record: TT_BELL_SLOT of them. */
static char *slot(record_head *h, int r, int i)
{
    return (char *)h + LINE + ((size_t)r * B.L + i) * TT_BELL_SLOT;
}

/* ---- sleeping and ringing ------------------------------------------------ */

#ifdef TT_HAVE_FUTEX
static void futex_sleep(_Atomic unsigned *word, unsigned seen, long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT, seen, &ts, NULL, 0);
}
static void futex_wake(_Atomic unsigned *word)
{
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE, 1, NULL, NULL, 0);
}
#endif

/* Sleeps on this rank's bell unless it rang since `seen` was read, for at
 * most ns nanoseconds, waiting for a ring from world rank `from` (or any,
 * TT_BELL_ANY). The flag lets a ringer skip the system call when this rank
 * is awake or waits for somebody else (a ring it would only wake up to
 * ignore); it is set before the bell is compared again inside the futex, so
 * a ring between the two is never lost (both sides use sequentially
 * consistent operations). */
static void doze(unsigned seen, long ns, int from)
{
#ifdef TT_HAVE_FUTEX
    bell_t *b = bell_of(B.me);
    atomic_store(&b->sleeping, from >= 0 ? from + 1 : -1);
    futex_sleep(&b->bell, seen, ns);
    atomic_store(&b->sleeping, 0);
#else
    (void)seen, (void)from;
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
#endif
}

int tt_bell_local(int world_rank)
{
    return B.on && world_rank >= 0 && B.local_of[world_rank] >= 0;
}

static void ring_local(int local)
{
    bell_t *b = bell_of(local);
    atomic_fetch_add(&b->bell, 1u);
#ifdef TT_HAVE_FUTEX
    const int s = atomic_load(&b->sleeping);
    if (s == -1 || s == B.world_me + 1)
        futex_wake(&b->bell);
#endif
}

void tt_bell_ring(int world_rank)
{
    if (tt_bell_local(world_rank))
        ring_local(B.local_of[world_rank]);
}

/* Without bells: test, sleep 20 us, doubling to 500 us (a message that
 * arrives costs at most that much more latency). */
static void poll_wait(MPI_Request *req)
{
    int done = 0;
    long ns = 20000;
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
    while (!done) {
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        ns = ns < 500000 / 2 ? 2 * ns : 500000;
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
    }
}

void tt_bell_wait(MPI_Request *req, int ringer)
{
    if (!B.on || ringer == TT_BELL_NONE || (ringer >= 0 && !tt_bell_local(ringer))) {
        poll_wait(req);
        return;
    }
    /* One test per wake-up: Open MPI yields the core inside a test that
     * finds nothing to do (mpi_yield_when_idle, on when the cores are
     * oversubscribed), so every needless test costs a context switch. A
     * ring normally ends the sleep; the limit only bounds what a ring that
     * never comes can cost (a transfer that needs the peer's progress, on a
     * transport without single-copy, also moves once per limit). */
    for (;;) {
        int done = 0;
        unsigned seen = atomic_load(&bell_of(B.me)->bell);
        /* Tested after reading the bell: a ring after this test changes it. */
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (done)
            break;
        doze(seen, SLEEP_LIMIT, ringer);
    }
}

void tt_bell_wait_count(const _Atomic unsigned long long *count, unsigned long long target,
                        int ringer)
{
    for (;;) {
        unsigned seen = atomic_load(&bell_of(B.me)->bell);
        if (atomic_load(count) >= target)
            return;
        doze(seen, SLEEP_LIMIT, ringer);
        /* Woken, and still waiting (the limit, or a ring for a wait of
         * another kind): let MPI progress, as in a meeting (a transfer of
         * this rank's, a DP bucket beside compute, may wait for its help). */
        if (atomic_load(count) < target) {
            int flag;
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        }
    }
}

/* ---- the arrival records ------------------------------------------------- */

typedef struct {
    int ok;             /* all members on this host, a record assigned */
    int n, idx;         /* members, this rank's place among them */
    int *local;         /* [n] host index of each member */
    record_head *rec;
    unsigned long long seq;
} comm_info;

static int drop_info(MPI_Comm comm, int key, void *val, void *extra)
{
    (void)comm, (void)key, (void)extra;
    comm_info *ci = val;
    free(ci->local);
    free(ci);
    return MPI_SUCCESS;
}

/* Collective over comm (its first barrier here): are all members on this
 * host, and which record is theirs. Every member reaches the same answer:
 * "all on my host" is true for one member only if it is true for all. */
static comm_info *info_of(MPI_Comm comm)
{
    comm_info *ci;
    int flag = 0;
    MPI_Comm_get_attr(comm, B.keyval, &ci, &flag);
    if (flag)
        return ci;
    ci = tt_calloc(1, sizeof *ci);
    MPI_Comm_size(comm, &ci->n);
    MPI_Comm_rank(comm, &ci->idx);
    ci->local = tt_malloc((size_t)ci->n * sizeof *ci->local);
    int *ranks = tt_malloc((size_t)ci->n * sizeof *ranks);
    for (int i = 0; i < ci->n; i++)
        ranks[i] = i;
    MPI_Group grp;
    MPI_Comm_group(comm, &grp);
    MPI_Group_translate_ranks(grp, ci->n, ranks, B.host_group, ci->local);
    MPI_Group_free(&grp);
    free(ranks);
    ci->ok = 1;
    for (int i = 0; i < ci->n; i++)
        ci->ok &= ci->local[i] != MPI_UNDEFINED;
    if (ci->ok) {
        int id = -1;
        if (ci->idx == 0 && B.next_rec < RECS_PER_RANK)
            id = B.me * RECS_PER_RANK + B.next_rec++;
        MPI_Bcast(&id, 1, MPI_INT, 0, comm);
        ci->ok = id >= 0;
        ci->rec = id >= 0 ? record(id) : NULL;
    }
    MPI_Comm_set_attr(comm, B.keyval, ci);
    return ci;
}

int tt_bell_allgather(MPI_Comm comm, const void *mine, int bytes, void *all)
{
    if (!B.on || bytes < 0 || bytes > TT_BELL_SLOT)
        return -1;
    comm_info *ci = info_of(comm);
    if (!ci->ok)
        return -1;
    const unsigned long long s = ++ci->seq, target = (unsigned long long)ci->n * s;
    const int row = (int)(s & 1);
    record_head *h = ci->rec;
    memcpy(slot(h, row, ci->idx), mine, (size_t)bytes);
    unsigned long long c = atomic_fetch_add(&h->count, 1ull) + 1;
    if (c == target) {
        /* the last to arrive wakes the others */
        for (int i = 0; i < ci->n; i++)
            if (i != ci->idx)
                ring_local(ci->local[i]);
    } else {
        for (;;) {
            unsigned seen = atomic_load(&bell_of(B.me)->bell);
            if (atomic_load(&h->count) >= target)
                break;
            doze(seen, SLEEP_LIMIT, TT_BELL_ANY);
            /* MPI moves nothing while this rank sleeps: on every wake-up it
             * lets MPI progress, since a member still on its way here may
             * wait for a transfer that needs this rank's help. */
            int flag;
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        }
    }
    for (int i = 0; i < ci->n; i++)
        memcpy((char *)all + (size_t)i * bytes, slot(h, row, i), (size_t)bytes);
    return 0;
}

int tt_bell_gather_max(MPI_Comm comm, double *t)
{
    double v[MAX_LOCAL];
    int n;
    MPI_Comm_size(comm, &n);
    if (n > MAX_LOCAL || tt_bell_allgather(comm, t, sizeof *t, v) != 0)
        return -1;
    double m = -INFINITY;
    for (int i = 0; i < n; i++)
        m = fmax(m, v[i]);
    *t = m;
    return 0;
}

/* ---- the page ------------------------------------------------------------ */

void *tt_bell_share(MPI_Comm comm, size_t len, int want)
{
    int me, ok = want;
    void *p = NULL;
    MPI_Comm_rank(comm, &me);
#ifdef TT_HAVE_FUTEX
    static unsigned made; /* names this rank made: each is new */
    char name[96] = "";
    if (me == 0)
        snprintf(name, sizeof name, "/tiny_transformer-%ld-%ld-%u", (long)getpid(),
                 (long)time(NULL), made++);
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, comm);
    int fd = -1, created = 0;
    /* A file size limit (ulimit -f) below the page would end this process
     * with SIGXFSZ at the ftruncate, without a word: do without the page. */
    struct rlimit lim;
    if (ok && me == 0 && getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
        (uint64_t)lim.rlim_cur < (uint64_t)len)
        ok = 0;
    if (ok && me == 0) {
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        created = fd >= 0;
        /* the space itself, now: a mapping past what /dev/shm can hold
         * would fault (SIGBUS) at its first touch instead of failing here */
        if (fd >= 0 && (ftruncate(fd, (off_t)len) != 0 || posix_fallocate(fd, 0, (off_t)len) != 0)) {
            close(fd);
            fd = -1;
        }
    }
    /* the others open only what member 0 made (never another job's name) */
    MPI_Bcast(&created, 1, MPI_INT, 0, comm);
    if (ok && created && me != 0)
        fd = shm_open(name, O_RDWR, 0600);
    if (fd >= 0) {
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        p = p == MAP_FAILED ? NULL : p;
    }
    ok = ok && p != NULL;
    /* everyone has opened it (or failed) before the name goes */
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
    if (me == 0 && created)
        shm_unlink(name);
    if (!ok && p) {
        munmap(p, len);
        p = NULL;
    }
#else
    (void)len;
    ok = 0;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
#endif
    return p;
}

void tt_bell_unshare(void *p, size_t len)
{
#ifdef TT_HAVE_FUTEX
    if (p)
        munmap(p, len);
#else
    (void)p, (void)len;
#endif
}

int tt_bell_env(tt_err *e)
{
    return tt_env_switch("TT_NO_DOORBELL", 0,
                         "1 makes every wait poll instead of sleeping on the doorbells, 0 or "
                         "unset keeps them",
                         e);
}

void tt_bell_init(void)
{
    MPI_Comm host;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
    MPI_Comm_size(host, &B.L);
    MPI_Comm_rank(host, &B.me);
    MPI_Comm_rank(MPI_COMM_WORLD, &B.world_me);
    int ok = 0;
#ifdef TT_HAVE_FUTEX
    tt_err e; /* a value not 0 or 1 is refused once the run checks its settings */
    ok = tt_bell_env(&e) == 0 && B.L <= MAX_LOCAL;
    B.rec_size = LINE + 2 * (size_t)B.L * TT_BELL_SLOT;
    B.len = (size_t)B.L * LINE + (size_t)B.L * RECS_PER_RANK * B.rec_size;
    B.page = tt_bell_share(host, B.len, ok);
    ok = ok && B.page != NULL;
#endif
    /* All or none: a rank without its page would never ring the others. */
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    B.on = ok;
    int world;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    B.local_of = tt_malloc((size_t)world * sizeof *B.local_of);
    int *ranks = tt_malloc((size_t)world * sizeof *ranks);
    for (int i = 0; i < world; i++)
        ranks[i] = i;
    MPI_Group wg;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Comm_group(host, &B.host_group);
    MPI_Group_translate_ranks(wg, world, ranks, B.host_group, B.local_of);
    for (int i = 0; i < world; i++)
        if (B.local_of[i] == MPI_UNDEFINED)
            B.local_of[i] = -1;
    MPI_Group_free(&wg);
    free(ranks);
    MPI_Comm_free(&host);
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, drop_info, &B.keyval, NULL);
}

void tt_bell_finalize(void)
{
#ifdef TT_HAVE_FUTEX
    if (B.page)
        munmap(B.page, B.len);
#endif
    B.page = NULL;
    B.on = 0;
    free(B.local_of);
    B.local_of = NULL;
    if (B.host_group != MPI_GROUP_NULL)
        MPI_Group_free(&B.host_group);
    if (B.keyval != MPI_KEYVAL_INVALID)
        MPI_Comm_free_keyval(&B.keyval);
}
