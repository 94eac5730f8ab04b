/* tt/comm/cores.h - which core each virtual GPU runs on when a host has
 * more ranks than cores.
 *
 * Twelve virtual GPUs on two cores share them by turns. A TP all-reduce or a
 * pipeline transfer hands the core from one rank to its peer; when the peer
 * waits on the other core, the hand-over is a wake-up across cores (an
 * interrupt, on a virtual machine a trip through the hypervisor) and the
 * peer's data moves between the cores' caches. A DP replica (its tp x pp
 * ranks) talks inside itself all through the step and to the other replicas
 * only at the gradient sum, so giving each core whole replicas keeps almost
 * every hand-over on one core.
 *
 * The rule (--pin-ranks auto, the default): on a host whose ranks outnumber
 * the cores they may use, where every DP replica lies whole on the host, a
 * replica has more than one rank (tp x pp > 1) and the replicas divide
 * evenly among the cores, the ranks of replica r (counted on this host, in
 * dp order) are bound to core r x cores / replicas. Anything else is left to
 * the operating system: a split replica or an uneven share would leave a
 * core idle while a pipeline fills (tp 2 x pp 6 on 2 cores ran 25% slower
 * bound by stages), and ranks that mpirun bound already (their allowed cores
 * differ) keep their binding. Only where a rank runs changes, never what it
 * computes: the same bits either way.
 *
 * On such a host every rank also asks for a time slice of 20 ms when the
 * whole job is on it and the doorbells are on (ranks that poll need the
 * core back soon after each short sleep)
 * (TT_SLICE_MS=N in the environment: N ms, 0 keeps the system's). The
 * ranks of a core hand it over at every wait, but when several have work
 * (the pipeline's stages in its steady state) the scheduler also switches
 * between them every slice (Linux's default: 0.7 ms, 0.75 ms in older
 * kernels, times 1 + log2 of the CPUs up to 8: 1.4 ms on our 2-core
 * machine, as sched_getattr reports it), in the middle of their
 * kernels. A longer slice lets a rank finish more before that: on
 * 2 cores the 12-rank tp 2 x pp 3 x dp 2 run's step went from 111.3 to
 * 104.5 ms (medians of 10 alternating runs, Linux 6.18). Kernels before
 * 6.12 ignore the request; the run's first lines say when it took. While
 * other programs keep the cores busy the ranks run on the system's slice
 * instead (src/comm/slice.c: a rank with a long slice, woken beside a busy
 * program, waits behind it). What a rank computes does not change.
 *
 * Bound replicas meet at the end of every step, and the one whose core ran
 * slower that step sets the pace while the other core idles. So the last
 * rank of a core to finish its step's pipeline work lends the core to the
 * ranks of the cores still at work (adds it to their allowed CPUs; the
 * scheduler then runs a waking rank there, and a TP pair of the late
 * replica computes its two halves at once), and each rank takes its core
 * back when its next step begins (TT_LEND_CORES=0: never). The run's last
 * lines say how often. */
#ifndef TT_COMM_CORES_H
#define TT_COMM_CORES_H

#include <stdio.h>

#include "tt/comm/grid.h"
#include "tt/core/common.h"

typedef struct {
    int ranks;      /* ranks on rank 0's host */
    int cores;      /* cores they may use (their affinity mask) */
    int replicas;   /* whole DP replicas on that host (0: some are split) */
    int pinned;     /* 1: each replica bound to one core */
    const char *why_not; /* when not pinned and ranks > cores: the reason */
    int slice_ms;   /* the time slice rank 0 got (its host's ranks all asked
                     * for the same; each rank's own grant is not gathered),
                     * 0: the system's */
} tt_cores;

/* The time slice TT_SLICE_MS asks for, in ms (unset or empty: 20), or -1
 * with an error naming the value when it is not a whole number from 0 to
 * 100 (the longest Linux grants). No communication. */
int tt_cores_slice_env(tt_err *e);
/* On the rank that watches its host's cores for other programs (the
 * host's first, when the long slice was granted): 1, with the seconds
 * watched since the placement and those of them the ranks ran on the
 * system's slice because other programs kept the cores busy
 * (src/comm/slice.c); elsewhere 0. */
int tt_cores_slice_watch(double *given_up, double *watched);
/* Whether TT_LEND_CORES lets the cores lend themselves (tt_cores_step_done):
 * 1 (unset, empty or 1), 0 (0), or -1 with an error naming any other
 * value. No communication. */
int tt_cores_lend_env(tt_err *e);
/* Collective over g->world: places this rank as above (want 0: never pins)
 * and returns, on every rank, what was done on rank 0's host. Call before
 * starting any thread that should inherit the placement. */
tt_cores tt_cores_place(const tt_grid *g, int want);
/* What the last placement did, for people: nothing when rank 0's host has
 * no more ranks than cores; else one line, and with detail each core's
 * virtual GPUs. */
void tt_cores_print(const tt_grid *g, FILE *out, int detail);
/* Frees what the last placement recorded (the binding stays). */
void tt_cores_forget(void);
/* A bound host's cores lend themselves at the end of a step
 * (src/comm/cores.c says why; TT_LEND_CORES=0: never): every rank calls
 * tt_cores_step_done once its step's pipeline work is over (the last of a
 * core then lends the core to the ranks of the cores still working) and
 * tt_cores_step_begin when its next step begins (it takes its own core
 * back), once per training step each, on every rank. No communication;
 * nothing to do where the ranks are not bound. */
void tt_cores_step_done(void);
void tt_cores_step_begin(void);
/* The steps at whose end this rank lent its core; whether its host's
 * cores lend at all. */
long tt_cores_lent(void);
int tt_cores_lending(void);

#endif
