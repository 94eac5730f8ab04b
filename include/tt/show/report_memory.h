/* tt/show/report_memory.h - every virtual GPU's memory account
 * (tt/core/memory.h) brought to rank 0: the table at each GPU's peak, and
 * the one verdict on whether any GPU went over its budget. */
#ifndef TT_SHOW_REPORT_MEMORY_H
#define TT_SHOW_REPORT_MEMORY_H

#include <stdio.h>
#include "tt/comm/grid.h"

/* Rank 0 prints every GPU's memory: the account by category at its peak,
 * the peak and the budget. Collective. */
void tt_report_memory(FILE *out, const tt_grid *g);

/* Collective: if any GPU went over its budget, rank 0 prints the first such
 * GPU's message and every rank returns 1. */
int tt_check_oom(const tt_grid *g);

#endif
