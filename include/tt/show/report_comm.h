/* tt/show/report_comm.h - the communication report: what every virtual GPU
 * sent and received, measured by the counters of tt/comm/comm.h, next to the
 * closed-form expectation for the configuration (formulas in
 * doc/communication.md, computed by each parallelism's own module). */
#ifndef TT_SHOW_REPORT_COMM_H
#define TT_SHOW_REPORT_COMM_H

#include <stdio.h>
#include "tt/comm/comm.h"
#include "tt/comm/grid.h"
#include "tt/core/config.h"
#include "tt/model/model.h"

/* Expected TP, PP and DP traffic of this GPU for `steps` training steps: the
 * sum of tp_expected_traffic, tt_pipe_expected_traffic and
 * tt_dp_expected_traffic over the groups of more than one GPU. */
void tt_comm_expected(tt_comm_stats *exp, const tt_run_config *rc, const tt_grid *g,
                      const tt_model *m, long steps);

/* Prints the measured and expected table of rank 0 (of every GPU with
 * all_gpus), and returns 1 when every GPU's TP/PP/DP counts equal their
 * formulas. Collective. */
int tt_report_comm(FILE *out, const tt_run_config *rc, const tt_grid *g, const tt_model *m,
                   const tt_comm_stats *measured, long steps, int all_gpus);

#endif
