/* tt/comm/doorbell.h - waiting for a peer asleep, woken by the peer.
 *
 * Twelve virtual GPUs on two cores: a rank that waits must not hold a core,
 * and it must not wake up to look either (on a virtual machine every
 * wake-up is a context switch that costs microseconds of kernel time). So
 * the ranks of one host share a page of "doorbells", one per rank: a waiting
 * rank sleeps on its bell (a Linux futex) and the rank that made its wait
 * end rings it - the sender of a message after posting it, the receiver
 * after taking it (a long send completes then), the last member to reach a
 * collective. Rings are only hints: every sleep has a time limit, after
 * which the waiter tests its request again (or, in a meeting, lets MPI
 * progress: a member on its way may need this rank's help with a transfer),
 * so a ring that never comes costs time, never a hang.
 *
 * The same page holds one arrival record per communicator whose members are
 * all on this host: tt_bell_gather_max is a barrier through shared memory
 * that also returns the largest of the members' doubles (the latest virtual
 * clock), with one wake-up per member.
 *
 * Off Linux, across hosts, or with TT_NO_DOORBELL=1 in the environment the
 * bells are off and waits poll with a growing sleep (doc/communication.md). */
#ifndef TT_COMM_DOORBELL_H
#define TT_COMM_DOORBELL_H

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>

#include "tt/core/common.h"

/* TT_NO_DOORBELL: 1 (bells off), 0 or unset (on); -1 with a message for
 * anything else, which the run refuses (exit 2). */
int tt_bell_env(tt_err *e);
/* Collective over MPI_COMM_WORLD: maps this host's bells (all ranks agree
 * whether they are on). */
void tt_bell_init(void);
void tt_bell_finalize(void);
/* 1 when waits on world rank r (and r's on ours) can use the bells. */
int tt_bell_local(int world_rank);
/* Wakes world rank r if it sleeps on its bell (nothing if r is not local). */
void tt_bell_ring(int world_rank);
/* Waits for req: asleep on this rank's bell between tests, woken by the
 * ring of world rank `ringer` (the peer that ends this wait), or by any
 * ring (TT_BELL_ANY: several peers); with a growing sleep between tests
 * when nobody will ring (TT_BELL_NONE), the ringer is on another host or
 * the bells are off. */
enum { TT_BELL_ANY = -1, TT_BELL_NONE = -2 };
void tt_bell_wait(MPI_Request *req, int ringer);
/* A barrier over comm that gives every member all members' `bytes` bytes
 * (at most TT_BELL_SLOT), in comm's rank order, in all. Returns -1 (and does
 * nothing) when comm's members are not all on this host or the bells are
 * off, as tt_bell_gather_max. */
enum { TT_BELL_SLOT = 64 };
int tt_bell_allgather(MPI_Comm comm, const void *mine, int bytes, void *all);
/* A barrier over comm that returns in *t the largest of the members' *t.
 * Returns -1 (and does nothing) when comm's members are not all on this
 * host or the bells are off: the caller then uses MPI. Every member gets the
 * same answer, so either all or none of them take this path. */
int tt_bell_gather_max(MPI_Comm comm, double *t);

/* Sleeps until *count (in memory shared on this host, raised by world rank
 * `ringer`, who rings after raising it) reaches target. */
void tt_bell_wait_count(const _Atomic unsigned long long *count, unsigned long long target,
                        int ringer);
/* Collective over comm, whose members are on one host: a new zeroed mapping
 * of len bytes that all members share, or NULL on every member when any of
 * them does not want it (want 0) or cannot map it. tt_bell_unshare drops
 * this member's view. */
void *tt_bell_share(MPI_Comm comm, size_t len, int want);
void tt_bell_unshare(void *p, size_t len);

#endif
