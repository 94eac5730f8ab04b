/* tt/show/trace.h - what every virtual GPU did, and when: the event logs
 * (tt/core/events.h) of the steps --trace / --timeline ask for, gathered to
 * rank 0 and written as a Chrome trace (Perfetto) or an SVG Gantt chart. */
#ifndef TT_TRACE_H
#define TT_TRACE_H

#include <stdio.h>
#include "tt/core/common.h"
#include "tt/core/events.h"
#include "tt/comm/grid.h"

/* Collective: a common origin on every rank, then the event log records,
 * communication included (through comm's observer). */
void tt_trace_begin(const tt_grid *g);

/* Collective: stops the logs and brings every rank's events to rank 0;
 * returns them (rank 0; NULL elsewhere) with *counts[r] = events of world
 * rank r, in rank order. */
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

/* Collective: gathers the events and writes the Chrome trace `json` (steps
 * last_step-1 and last_step) and the timeline `svg` (last_step), either may be
 * NULL; rank 0 says where they went, or prints the one error. Returns 1 on
 * every rank if a file could not be written, else 0. */
int tt_trace_finish(const tt_grid *g, const char *json, const char *svg, long last_step);

/* Collective: the second half of tt_trace_finish, for a run that gathers
 * first and writes later (the checkpoint goes in between, so a bad trace path
 * cannot lose it). Frees ev and counts (tt_trace_gather's). */
int tt_trace_write_gathered(const tt_grid *g, tt_event *ev, int *counts, const char *json,
                            const char *svg, long last_step);

#endif
