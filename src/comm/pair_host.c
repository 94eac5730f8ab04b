/* pair_host.c - the all-reduce of two members on one host through memory
 * both of them map (tt/comm/pair_reduce.h: tt_pair_host_allreduce).
 *
 * The MPI exchange of pair_reduce.c costs, on a machine with more ranks
 * than cores, more than the sum it carries: two requests per member, a
 * test that finds nothing and gives the core away (Open MPI yields there
 * when oversubscribed), a kernel copy between the processes for anything
 * over a few KiB. Between two ranks of one host the same exchange is a copy
 * into a slot the other reads: each member writes its buffer (and its
 * clock) into its slot, raises its counter, rings the other, sleeps until
 * the other's counter comes up, and folds member 0's values with member
 * 1's, as the exchange does: the same bits.
 *
 * The mapping of a pair: a cache line per member with its counter (the
 * number of its exchanges posted so far), then four slots, one per member
 * and parity of the exchange's number s. A member writes its slot of
 * parity s % 2 only after the other posted s - 1, which it did after
 * reading everything of s - 2: no slot is written while being read. It
 * grows (a new mapping, counters from 0) when a sum outgrows it; both
 * members see the same sizes in the same order, so both grow together. */
#include "tt/comm/doorbell.h"
#include "tt/comm/pair_reduce.h"
#include "tt/core/common.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum {
    LINE = 64,
    MIN_SLOT = 64 << 10,  /* bytes: a first slot (TP sums of a micro-batch) */
    MAX_SLOT = 16 << 20   /* larger sums go through MPI's exchange */
};

typedef struct {
    int usable;      /* both members on this host with the bells on */
    int me, peer;    /* this member's index; the other's world rank */
    char *base;
    size_t len, cap; /* the mapping; bytes of data per slot */
    unsigned long long seq;
} pair_host;

static int keyval = MPI_KEYVAL_INVALID;

static int drop_state(MPI_Comm comm, int key, void *val, void *extra)
{
    (void)comm, (void)key, (void)extra;
    pair_host *ph = val;
    tt_bell_unshare(ph->base, ph->len);
    free(ph);
    return MPI_SUCCESS;
}

static _Atomic unsigned long long *posted(pair_host *ph, int member)
{
    return (_Atomic unsigned long long *)(ph->base + (size_t)member * LINE);
}

/* A slot: the clock in its first line, the data after it. */
static char *slot(pair_host *ph, unsigned long long s, int member)
{
    return ph->base + 2 * LINE + ((size_t)(s & 1) * 2 + (size_t)member) * (LINE + ph->cap);
}

/* Collective over the pair (both members come here in the same call):
 * a mapping whose slots hold `bytes`; 0, or -1 on both if it failed. */
static int grow(MPI_Comm comm, pair_host *ph, size_t bytes)
{
    size_t cap = MIN_SLOT;
    while (cap < bytes)
        cap *= 2;
    tt_bell_unshare(ph->base, ph->len);
    ph->len = 2 * LINE + 4 * (LINE + cap);
    ph->base = tt_bell_share(comm, ph->len, 1);
    ph->cap = ph->base ? cap : 0;
    ph->seq = 0;
    ph->usable = ph->base != NULL;
    return ph->usable ? 0 : -1;
}

/* This pair's state, made at its first sum (collective, as that sum is). */
static pair_host *state_of(MPI_Comm comm)
{
    if (keyval == MPI_KEYVAL_INVALID)
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, drop_state, &keyval, NULL);
    pair_host *ph;
    int flag = 0;
    MPI_Comm_get_attr(comm, keyval, &ph, &flag);
    if (flag)
        return ph;
    ph = tt_calloc(1, sizeof *ph);
    MPI_Comm_rank(comm, &ph->me);
    ph->peer = tt_pair_peer_world(comm);
    /* the same answer on both: each asks about the other */
    int local = tt_bell_local(ph->peer);
    MPI_Allreduce(MPI_IN_PLACE, &local, 1, MPI_INT, MPI_MIN, comm);
    ph->usable = local;
    MPI_Comm_set_attr(comm, keyval, ph);
    return ph;
}

int tt_pair_host_allreduce(MPI_Comm comm, void *buf, int count, MPI_Datatype type, MPI_Op op,
                           double *clock)
{
    int n;
    MPI_Comm_size(comm, &n);
    const size_t elem = tt_reduce_elem(type, op), bytes = elem * (size_t)count;
    if (n != 2 || elem == 0 || count < 0 || bytes > MAX_SLOT)
        return -1;
    pair_host *ph = state_of(comm);
    if (!ph->usable || (bytes > ph->cap && grow(comm, ph, bytes) != 0))
        return -1;
    const unsigned long long s = ++ph->seq;
    char *mine = slot(ph, s, ph->me), *theirs = slot(ph, s, 1 - ph->me);
    if (clock)
        memcpy(mine, clock, sizeof *clock);
    memcpy(mine + LINE, buf, bytes);
    atomic_store(posted(ph, ph->me), s);
    tt_bell_ring(ph->peer);
    tt_bell_wait_count(posted(ph, 1 - ph->me), s, ph->peer);
    const void *x0 = ph->me == 0 ? buf : theirs + LINE;
    const void *x1 = ph->me == 0 ? theirs + LINE : buf;
    tt_reduce_fold(buf, x0, x1, count, type, op);
    if (clock) {
        double other;
        memcpy(&other, theirs, sizeof other);
        *clock = fmax(*clock, other);
    }
    return 0;
}

void tt_pair_host_free(void)
{
    if (keyval != MPI_KEYVAL_INVALID)
        MPI_Comm_free_keyval(&keyval);
}
