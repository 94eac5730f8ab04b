/* comm_internal.h - what the communication layer's files share and nobody
 * else needs: the books, the watchdog's hook for a collective and the time
 * slice's hooks for the cores. */
#ifndef TT_COMM_INTERNAL_H
#define TT_COMM_INTERNAL_H

#include "tt/comm/comm.h"
#include "tt/comm/watchdog.h"

/* Books one call in group `where` (TT_BOOKKEEPING: as other), and tells the
 * observer (a trace being captured). t0 and t1 are tt_clock_now() at entry
 * and exit (virtual time unless --clock wall); peer a world rank, -1, or
 * TT_PEER_BESIDE. */
void tt_comm_book(int where, tt_op op, long long bytes, double t0, double t1, int peer);
/* The same, ending now, with no peer. */
void tt_comm_tally(int where, tt_op op, long long bytes, double t0);
long long tt_comm_type_size(MPI_Datatype type);

/* The watchdog's hook before a blocking collective (tt/comm/watchdog.h); the
 * call's end is booked by tt_comm_tally. */
#define WATCH_COLLECTIVE(op, g, where) \
    tt_watch_begin(TT_WATCH_COLLECTIVE, tt_op_names[op], tt_group_comm(g, where), -1, -1)

/* The longer time slice (slice.c): asked for by this rank, collective over
 * the host's ranks (local), watched by a thread of the host's first rank;
 * returns the slice granted in ms (0: the system's). tt_slice_forget stops
 * the watching. */
int tt_slice_lengthen(MPI_Comm local);
void tt_slice_forget(void);

#endif
