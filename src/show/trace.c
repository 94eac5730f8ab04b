/* trace.c - capturing a trace on every virtual GPU and gathering it to rank
 * 0 (the writers are trace_json.c for the Chrome trace and trace_svg.c for
 * the SVG timeline). */
#include "tt/show/trace.h"
#include "tt/comm/comm.h"
#include "tt/core/vclock.h"

#include <stdio.h>
#include <stdlib.h>

/* Every counted transfer becomes an event while the log records. */
static void observe_comm(int group, tt_op op, long long bytes, double t0, double t1, int peer,
                         const char *purpose)
{
    tt_events_add_comm(tt_op_names[op], tt_group_names[group], purpose, t0, t1, peer, bytes);
}

void tt_trace_begin(const tt_grid *g)
{
    /* A common instant: the virtual clocks are equal between steps; on the
     * wall clock, the first rank of each host to leave the all-reduce (the
     * host's ranks read one clock, but with more ranks than cores some leave
     * the all-reduce milliseconds after the others, which would shift their
     * rows against the rest; across hosts the clocks differ, and each
     * host's ranks leave at about the same time). */
    int sync = 0;
    tt_allreduce(g, TT_GROUP_OTHER, &sync, 1, MPI_INT, MPI_SUM);
    tt_events_start(tt_host_min(g, tt_clock_now()));
    tt_comm_set_observer(observe_comm);
}

tt_event *tt_trace_gather(const tt_grid *g, int **counts)
{
    /* Stop first, so the gathering itself is not in the log. */
    tt_comm_set_observer(NULL);
    int n = 0;
    tt_event *mine = tt_events_take(&n);
    int *bytes = NULL;
    tt_event *all = tt_gather_var_to_root(g, mine, n * (int)sizeof(tt_event), &bytes);
    free(mine);
    if (g->world_rank == 0) {
        *counts = tt_malloc((size_t)g->world_size * sizeof(int));
        for (int r = 0; r < g->world_size; r++)
            (*counts)[r] = bytes[r] / (int)sizeof(tt_event);
    }
    free(bytes);
    return all;
}

int tt_trace_finish(const tt_grid *g, const char *json, const char *svg, long last_step)
{
    int *counts = NULL;
    tt_event *ev = tt_trace_gather(g, &counts);
    return tt_trace_write_gathered(g, ev, counts, json, svg, last_step);
}

int tt_trace_write_gathered(const tt_grid *g, tt_event *ev, int *counts, const char *json,
                            const char *svg, long last_step)
{
    tt_err e;
    int bad = 0;
    if (g->world_rank == 0) {
        if (json && tt_trace_write_json(json, g, ev, counts, &e) == 0)
            printf("trace of steps %ld..%ld written to '%s' (open it in ui.perfetto.dev)\n",
                   last_step > 0 ? last_step - 1 : 0, last_step, json);
        else if (json)
            bad = 1;
        if (!bad && svg && tt_trace_write_svg(svg, g, ev, counts, (int)last_step, &e) == 0)
            printf("timeline of step %ld written to '%s'\n", last_step, svg);
        else if (!bad && svg)
            bad = 1;
        if (bad)
            fprintf(stderr, "tiny_transformer: %s\n", e.msg);
    }
    free(ev);
    free(counts);
    return tt_agree_status(g, bad);
}
