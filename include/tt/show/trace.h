/* tt/trace.h - what every virtual GPU did, and when: a log of events (each
 * forward and backward of a micro-batch and chunk, each transfer and
 * collective, the optimizer step) with wall-clock times, captured for the
 * steps --trace / --timeline ask for, gathered to rank 0 and written as a
 * Chrome trace (Perfetto) or an SVG Gantt chart. */
#ifndef TT_TRACE_H
#define TT_TRACE_H

#include <stdio.h>
#include "tt/core/common.h"
#include "tt/comm/grid.h"

typedef enum {
    TT_EV_FORWARD, TT_EV_BACKWARD,   /* compute of (mb, chunk) */
    TT_EV_COMM,                      /* a transfer or collective (name = operation) */
    TT_EV_OPTIMIZER                  /* clipping + AdamW */
} tt_event_kind;

typedef struct {
    int kind;           /* tt_event_kind */
    char name[24];      /* "forward", "all-reduce", "send", ... */
    char group[8];      /* comm: "TP", "PP", "DP", "other"; else "" */
    double t0, t1;      /* seconds since the trace's origin (common to all ranks) */
    int step, mb, chunk;/* -1 when not applicable */
    int peer;           /* send/recv: the other world rank; else -1 */
    long long bytes;    /* comm: bytes booked; else 0 */
} tt_event;

/* Starts capturing on this rank; origin is tt_now() at a moment common to
 * all ranks (taken right after a collective). */
void tt_trace_start(double origin);
void tt_trace_stop(void);
int tt_trace_active(void);
/* The step the following events belong to. */
void tt_trace_set_step(int step);
/* Records an event with absolute tt_now() times (converted to the origin). */
void tt_trace_add(int kind, const char *name, const char *group, double t0_abs, double t1_abs,
                  int mb, int chunk, int peer, long long bytes);

/* Collective: every rank's events to rank 0; returns them (rank 0; NULL
 * elsewhere) with *counts[r] = events of world rank r, in rank order. */
tt_event *tt_trace_gather(const tt_grid *g, int **counts);

/* Rank 0: a Chrome trace (JSON: one track per virtual GPU, named with its
 * coordinates). */
int tt_trace_write_json(const char *path, const tt_grid *g, const tt_event *ev,
                        const int *counts, tt_err *e);
/* Rank 0: one training step as an SVG Gantt chart: one row per virtual GPU,
 * a colour per kind of action, the micro-batch number in each box, the idle
 * time left empty, a legend and the measured idle fraction of each row. */
int tt_trace_write_svg(const char *path, const tt_grid *g, const tt_event *ev, const int *counts,
                       int step, tt_err *e);

#endif
