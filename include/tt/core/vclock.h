/* tt/core/vclock.h - the virtual GPU clock of this rank (doc/design.md section 12).
 *
 * Each rank plays one GPU of the modelled cluster (tt/core/cluster.h) and
 * keeps that GPU's clock: the kernels advance it by their cost on the modelled
 * GPU, and comm (src/comm/comm.c) moves it at every transfer: a receiver goes
 * on at max(own clock, sender's clock + link cost), a collective ends for all
 * members at the latest entry plus the algorithm's cost. The clock therefore
 * depends only on the operations and the model, never on how busy the laptop
 * is: the same run gives the same times on any machine.
 *
 * Only training advances it: the clock runs between tt_vclock_run(1) and
 * tt_vclock_run(0) (the training step) and is paused around the oracle;
 * eval, sampling and everything else leave it alone. Event times (the trace,
 * the timeline) and step times come from tt_clock_now(): the virtual clock,
 * or the wall clock under --clock wall. */
#ifndef TT_CORE_VCLOCK_H
#define TT_CORE_VCLOCK_H

#include "tt/core/cluster.h"

typedef enum { TT_CLOCK_VIRTUAL, TT_CLOCK_WALL } tt_clock_mode;

/* The machine this rank models and its place on it; resets the clock to 0. */
void tt_vclock_setup(const tt_cluster *c, tt_clock_mode mode, int world_rank);
const tt_cluster *tt_vclock_cluster(void);
tt_clock_mode tt_vclock_mode(void);
/* "virtual time on classroom" or "wall clock of this machine", for labels. */
const char *tt_clock_label(void);

/* Starts (1) or stops (0) the clock for a training step. Stopping also
 * resumes a pause. */
void tt_vclock_run(int on);
/* Pauses the clock inside a step (the oracle's work is not the GPU's); nests. */
void tt_vclock_pause(void);
void tt_vclock_resume(void);
/* 1 while the clock runs and is not paused (virtual mode): comm exchanges
 * clocks only then, and every rank of a group is in the same state at the same
 * collective, because they are switched at the same points of the program. */
int tt_vclock_ticking(void);
/* 1 while a training step runs (either clock), paused or not: events are
 * recorded only then. */
int tt_vclock_in_step(void);
int tt_vclock_paused(void);

/* The virtual clock in seconds (it keeps its value while stopped). */
double tt_vclock_now(void);
void tt_vclock_set(double t);
void tt_vclock_advance(double seconds);

/* A kernel's work: advances the clock by tt_cost_compute (when ticking and
 * no fixed chunk costs are set). */
void tt_vclock_compute(double flops, double bytes);

/* The time figures use: the virtual clock, or tt_now() under --clock wall. */
double tt_clock_now(void);

#endif
