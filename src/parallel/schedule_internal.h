/* schedule_internal.h - what the registry (schedule.c) and the builders
 * (schedule_build.c) share. */
#ifndef TT_SCHEDULE_INTERNAL_H
#define TT_SCHEDULE_INTERNAL_H

#include "tt/parallel/pipeline.h"

/* What a builder knows: the geometry (p stages, K = p*v chunks placed by
 * `place`, m micro-batches) and the list it appends to. */
typedef struct {
    tt_action_list *out;
    int p, v, K, m;
    tt_placement place;
} tt_builder;

/* Stage s's list, appended to b->out: one builder per registry row. */
void tt_build_naive(tt_builder *b, int s);
void tt_build_gpipe(tt_builder *b, int s);
void tt_build_1f1b(tt_builder *b, int s);
void tt_build_interleaved(tt_builder *b, int s);
void tt_build_zb_h1(tt_builder *b, int s);
void tt_build_zb_v(tt_builder *b, int s);

#endif
