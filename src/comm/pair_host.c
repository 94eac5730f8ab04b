/* pair_host.c - the sum, all-gather and reduce-scatter of two members on
 * one host through memory both of them map (tt/comm/pair_reduce.h:
 * tt_pair_host_allreduce, _allgather, _reduce_scatter).
 *
 * The MPI exchange of pair_reduce.c costs, on a machine with more ranks
 * than cores, more than the sum it carries: two requests per member, a
 * test that finds nothing and gives the core away (Open MPI yields there
 * when oversubscribed), a kernel copy between the processes for anything
 * over a few KiB. Between two ranks of one host the same exchange is a copy
 * into a slot the other reads: each member writes its buffer (and its
 * clock) into its slot, raises its counter, rings the other, sleeps until
 * the other's counter comes up, and folds member 0's values with member
 * 1's, as the exchange does: the same bits. A caller that asks for its
 * slot first (tt_pair_host_slot) makes its values there, and the exchange
 * copies nothing in: the TP sums' row-parallel outputs and input gradients
 * are made so.
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
#include <stdio.h>
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

/* This pair's state with slots that hold `bytes` (collective over the pair
 * when they must grow), or NULL where the pair cannot use its slots: both
 * members get the same answer. */
static pair_host *ready(MPI_Comm comm, size_t bytes)
{
    int n;
    MPI_Comm_size(comm, &n);
    if (n != 2 || bytes > MAX_SLOT)
        return NULL;
    pair_host *ph = state_of(comm);
    if (!ph->usable || ((!ph->base || bytes > ph->cap) && grow(comm, ph, bytes) != 0))
        return NULL;
    return ph;
}

/* The exchange itself: this member's `bytes` (and clock) into its slot,
 * the other's back. Returns the other's bytes - valid until this member's
 * next exchange on comm, since the other writes that slot again only after
 * this member posted its next one - or NULL (having done nothing) where the
 * pair cannot use its slots; both members get the same answer. *clock, if
 * not NULL, becomes the larger of the two. */
static const char *swap(MPI_Comm comm, const void *mine_data, size_t bytes, double *clock)
{
    pair_host *ph = ready(comm, bytes);
    if (!ph)
        return NULL;
    const unsigned long long s = ++ph->seq;
    char *mine = slot(ph, s, ph->me), *theirs = slot(ph, s, 1 - ph->me);
    /* the slot's first line: the clock, then the size (both members must
     * move the same: MPI would stop a mismatch with a truncation error) */
    const unsigned long long size = bytes;
    if (clock)
        memcpy(mine, clock, sizeof *clock);
    memcpy(mine + sizeof(double), &size, sizeof size);
    if (mine_data != mine + LINE) /* else made in place (tt_pair_host_slot) */
        memcpy(mine + LINE, mine_data, bytes);
    atomic_store(posted(ph, ph->me), s);
    tt_bell_ring(ph->peer);
    tt_bell_wait_count(posted(ph, 1 - ph->me), s, ph->peer);
    unsigned long long other_size;
    memcpy(&other_size, theirs + sizeof(double), sizeof other_size);
    if (other_size != size) {
        fprintf(stderr, "tiny_transformer: internal error: a two-member collective moved %llu "
                        "bytes on one member and %llu on the other\n", size, other_size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (clock) {
        double other;
        memcpy(&other, theirs, sizeof other);
        *clock = fmax(*clock, other);
    }
    return theirs + LINE;
}

static int me_in(MPI_Comm comm)
{
    int me;
    MPI_Comm_rank(comm, &me);
    return me;
}

/* Collective over the pair, as the exchange it prepares: its data part,
 * `bytes` long, of this member's slot for the next exchange, or NULL where
 * swap would not use the slots (the same conditions, the same answer on
 * both). Writing it is safe at once: the other member posted this member's
 * last exchange, so it has read this slot's previous contents. */
void *tt_pair_host_slot(MPI_Comm comm, size_t bytes)
{
    pair_host *ph = ready(comm, bytes);
    return ph ? slot(ph, ph->seq + 1, ph->me) + LINE : NULL;
}

const void *tt_pair_host_exchange(MPI_Comm comm, const void *send, size_t bytes, double *clock,
                                  int *me)
{
    const char *theirs = swap(comm, send, bytes, clock);
    if (theirs)
        *me = me_in(comm);
    return theirs;
}

int tt_pair_host_allreduce_to(MPI_Comm comm, const void *send, void *recv, int count,
                              MPI_Datatype type, MPI_Op op, double *clock)
{
    const size_t elem = tt_reduce_elem(type, op);
    int me;
    const void *theirs = elem == 0 || count < 0 ? NULL
                         : tt_pair_host_exchange(comm, send, elem * (size_t)count, clock, &me);
    if (!theirs)
        return -1;
    /* member 0's values first */
    tt_reduce_fold(recv, me == 0 ? send : theirs, me == 0 ? theirs : send, count, type, op);
    return 0;
}

int tt_pair_host_allreduce(MPI_Comm comm, void *buf, int count, MPI_Datatype type, MPI_Op op,
                           double *clock)
{
    return tt_pair_host_allreduce_to(comm, buf, buf, count, type, op, clock);
}

int tt_pair_host_allgather(MPI_Comm comm, const void *send, void *recv, int count,
                           MPI_Datatype type, double *clock)
{
    int size;
    MPI_Type_size(type, &size);
    const size_t bytes = (size_t)size * (size_t)(count > 0 ? count : 0);
    if (size <= 0 || count < 0)
        return -1;
    const int me = me_in(comm);
    /* in place (MPI_IN_PLACE): this member's block is already in recv */
    const void *own = send == MPI_IN_PLACE ? (char *)recv + (size_t)me * bytes : send;
    const char *theirs = swap(comm, own, bytes, clock);
    if (!theirs)
        return -1;
    if (send != MPI_IN_PLACE)
        memmove((char *)recv + (size_t)me * bytes, send, bytes);
    memcpy((char *)recv + (size_t)(1 - me) * bytes, theirs, bytes);
    return 0;
}

int tt_pair_host_reduce_scatter(MPI_Comm comm, const void *send, void *recv, int count,
                                MPI_Datatype type, double *clock)
{
    const size_t elem = tt_reduce_elem(type, MPI_SUM);
    if (elem == 0 || count < 0)
        return -1;
    const size_t bytes = elem * (size_t)count;
    int n;
    MPI_Comm_size(comm, &n);
    if (n != 2)
        return -1;
    const int me = me_in(comm);
    /* in place (MPI_IN_PLACE): the 2 count elements are in recv, and the
     * sum goes to its start, as MPI_Reduce_scatter_block does */
    const char *in = send == MPI_IN_PLACE ? (const char *)recv : (const char *)send;
    /* the other member's block of this member's buffer is what it sums;
     * the exchange copies it out before the sum may overwrite it */
    const char *theirs = swap(comm, in + (size_t)(1 - me) * bytes, bytes, clock);
    if (!theirs)
        return -1;
    const char *own = in + (size_t)me * bytes;
    tt_reduce_fold(recv, me == 0 ? own : theirs, me == 0 ? theirs : own, count, type, MPI_SUM);
    return 0;
}

void tt_pair_host_free(void)
{
    if (keyval != MPI_KEYVAL_INVALID)
        MPI_Comm_free_keyval(&keyval);
}
