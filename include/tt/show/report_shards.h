/* tt/show/report_shards.h - --report shards: what every virtual GPU holds,
 * tensor by tensor, as the global tensor's shape and the slice of it. */
#ifndef TT_REPORT_SHARDS_H
#define TT_REPORT_SHARDS_H

#include <stdio.h>
#include "tt/comm/grid.h"
#include "tt/model/model.h"

/* Collective over the world: every GPU sends its table to rank 0, which
 * prints it grouped per GPU ("blocks.0.attn.q.weight [96,96] rows 0:48"); a
 * DP replica holding exactly what dp 0 of its (pp, tp) holds is one line. */
void tt_report_shards(FILE *out, const tt_grid *g, const tt_model *m);

#endif
