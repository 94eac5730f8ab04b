/* tt/comm/yield.h - how MPI's own waits treat a shared core, and a wait that
 * gives the core away where MPI's would not.
 *
 * Open MPI's blocking calls poll and, on a host with more ranks than cores
 * (its mpi_yield_when_idle), call sched_yield each time they find nothing to
 * do. MPICH's ch4 device polls without yielding: a rank in a blocking
 * collective keeps its core for its whole time slice while the peers it
 * needs, sharing that core, cannot run (12 ranks on 2 cores stepped 3.4
 * times slower). The collectives therefore ask tt_mpi_yields, and where it
 * is 0 they start MPI's non-blocking twin and wait with tt_wait_awake
 * (doc/communication.md, "Under MPICH"). */
#ifndef TT_COMM_YIELD_H
#define TT_COMM_YIELD_H

#include <mpi.h>

#include "tt/core/common.h"

/* 1 when MPI's blocking calls yield the core while they wait: by library (1
 * for Open MPI, 0 for any other) unless TT_MPI_YIELDS=1 or 0 says otherwise
 * (tests run MPICH's path under Open MPI with 0). */
int tt_mpi_yields(void);
/* The same from the environment, -1 with a message naming a value other
 * than 0 or 1 (main refuses it before any work). */
int tt_mpi_yields_env(tt_err *e);
/* Waits for req among peers that are all awake (they have just met): MPI's
 * own MPI_Wait where it yields, else a test with a sched_yield between
 * tests, which is what Open MPI's wait does there. */
void tt_wait_awake(MPI_Request *req);

#endif
