/* schedule_internal.h - what the registry (schedule.c) and the builders
 * (schedule_build.c) share, and what the checker's passes (schedule_check.c)
 * hand the simulation (schedule_sim.c). */
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

/* ---- the checker (schedule_check.c) and the simulation (schedule_sim.c) -- */

/* Where each (mb, chunk) event sits: the index in the owning stage's list, or
 * -1. Each chunk has one owning stage, so the index alone locates the action.
 * One table per action kind, in the order of tt_action_kind. */
enum { T_FWD, T_BWD, T_SACT, T_RACT, T_SGRAD, T_RGRAD, T_W, T_N };
_Static_assert(T_FWD == (int)TT_ACT_FWD && T_BWD == (int)TT_ACT_BWD &&
                   T_SACT == (int)TT_ACT_SEND_ACT && T_RACT == (int)TT_ACT_RECV_ACT &&
                   T_SGRAD == (int)TT_ACT_SEND_GRAD && T_RGRAD == (int)TT_ACT_RECV_GRAD &&
                   T_W == (int)TT_ACT_W,
               "event tables follow tt_action_kind");

typedef struct {
    int p, m, K;
    tt_placement place;
    int split;    /* some list has a W: then every backward needs one */
    int *at[T_N]; /* [mb * K + chunk] */
} tt_sched_table;

/* An action as the messages name it: "send activations of mb3 chunk 1 to stage 2". */
void tt_sched_describe(char *buf, size_t n, const tt_action *a);
/* Pass 1: every field in range, every action on the stage that owns its
 * chunk, peers right, no event twice. Fills the table. */
int tt_sched_check_fields(const tt_action_list *lists, tt_sched_table *t, tt_err *e);
/* Pass 2: the order within a stage respects the data dependencies, every send
 * meets a receive on the peer (and vice versa), and nothing is forgotten. */
int tt_sched_check_order(const tt_action_list *lists, const tt_sched_table *t, tt_err *e);

#endif
