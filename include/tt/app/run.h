/* tt/app/run.h - the whole program on one virtual GPU: set up, train, report,
 * save (src/app/run.c). */
#ifndef TT_APP_RUN_H
#define TT_APP_RUN_H

#include "tt/comm/grid.h"
#include "tt/core/config.h"

/* Runs the configuration on this rank's virtual GPU of grid g (rc already
 * parsed, and completed by tt_resume_prepare when resuming): returns the
 * exit status, the same on every rank. */
int tt_run_main(const tt_run_config *rc, const tt_grid *g);

/* 0 when the run of rc can take the layout tp x pp x dp (ZeRO's data-parallel
 * group, sequence parallelism's tokens, the stage split, the schedule's
 * rules), else -1 with the first rule it breaks in e (NULL: no message).
 * The layout's own sizes are tt_layout_check's (tt/comm/grid.h). */
int tt_run_layout_check(const tt_run_config *rc, int tp, int pp, int dp, tt_err *e);

#endif
