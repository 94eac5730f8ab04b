/* yield.c - whether MPI's blocking calls yield a shared core, and a wait
 * that does (tt/comm/yield.h says why). */
#define _GNU_SOURCE
#include "tt/comm/yield.h"

#include <sched.h>
#include <string.h>

/* 1 for a library whose blocking calls yield the core while they poll. Open
 * MPI's do where they can tell the host is oversubscribed, which is the only
 * place it matters; MPICH's and its derivatives' (Intel MPI, MVAPICH) poll
 * without yielding by default. */
static int library_yields(void)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    return strncmp(v, "Open MPI", 8) == 0;
}

int tt_mpi_yields_env(tt_err *e)
{
    return tt_env_switch("TT_MPI_YIELDS", library_yields(),
                         "whether MPI's blocking calls give the core away while they wait, 1 "
                         "or 0 (unset: 1 for Open MPI, 0 for other libraries)",
                         e);
}

int tt_mpi_yields(void)
{
    static int yields = -1; /* until first asked */
    if (yields < 0) {
        tt_err e; /* a bad TT_MPI_YIELDS was refused by main before any wait */
        yields = tt_mpi_yields_env(&e) == 1;
    }
    return yields;
}

void tt_wait_awake(MPI_Request *req)
{
    if (tt_mpi_yields()) {
        MPI_Wait(req, MPI_STATUS_IGNORE);
        return;
    }
    int done = 0;
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
    while (!done) {
        sched_yield();
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
    }
}
