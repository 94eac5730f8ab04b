/* trace.c - capturing events on each rank and gathering them to rank 0 (the
 * writers of the Chrome trace and the SVG timeline are in trace_json.c and
 * trace_svg.c). */
#include "tt/show/trace.h"
#include "tt/comm/comm.h"

#include <stdlib.h>
#include <string.h>

/* One process is one virtual GPU: one event log per process. */
static struct {
    int active, step;
    double origin;
    tt_event *ev;
    int n, cap;
} log_;

void tt_trace_start(double origin)
{
    log_.active = 1;
    log_.origin = origin;
    log_.step = -1;
}

void tt_trace_stop(void) { log_.active = 0; }
int tt_trace_active(void) { return log_.active; }
void tt_trace_set_step(int step) { log_.step = step; }

void tt_trace_add(int kind, const char *name, const char *group, double t0_abs, double t1_abs,
                  int mb, int chunk, int peer, long long bytes)
{
    if (!log_.active)
        return;
    if (log_.n == log_.cap) {
        log_.cap = log_.cap ? 2 * log_.cap : 1024;
        tt_event *n = realloc(log_.ev, (size_t)log_.cap * sizeof *n);
        if (!n)
            abort();
        log_.ev = n;
    }
    tt_event *e = &log_.ev[log_.n++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->group, sizeof e->group, "%s", group ? group : "");
    e->t0 = t0_abs - log_.origin;
    e->t1 = t1_abs - log_.origin;
    e->step = log_.step;
    e->mb = mb;
    e->chunk = chunk;
    e->peer = peer;
    e->bytes = bytes;
}

tt_event *tt_trace_gather(const tt_grid *g, int **counts)
{
    /* Stop first, so the gathering itself is not in the log. */
    log_.active = 0;
    const int W = g->world_size, sz = (int)sizeof(tt_event);
    int mine = log_.n * sz;
    int *bytes = g->world_rank == 0 ? tt_malloc((size_t)W * sizeof(int)) : NULL;
    int *displs = g->world_rank == 0 ? tt_malloc((size_t)W * sizeof(int)) : NULL;
    /* Sizes first (gather of one int each), then the events. */
    int *sizes = g->world_rank == 0 ? tt_malloc((size_t)W * sizeof(int)) : NULL;
    int *ones = g->world_rank == 0 ? tt_malloc((size_t)W * sizeof(int)) : NULL;
    int *idx = g->world_rank == 0 ? tt_malloc((size_t)W * sizeof(int)) : NULL;
    for (int r = 0; g->world_rank == 0 && r < W; r++)
        ones[r] = 1, idx[r] = r;
    tt_gatherv(g, TT_GROUP_OTHER, &mine, 1, sizes, ones, idx, MPI_INT, 0);
    tt_event *all = NULL;
    size_t total = 0;
    if (g->world_rank == 0) {
        for (int r = 0; r < W; r++) {
            bytes[r] = sizes[r];
            displs[r] = (int)total;
            total += (size_t)sizes[r];
        }
        all = tt_malloc(total ? total : 1);
        *counts = tt_malloc((size_t)W * sizeof(int));
        for (int r = 0; r < W; r++)
            (*counts)[r] = sizes[r] / sz;
    }
    tt_gatherv(g, TT_GROUP_OTHER, log_.ev, mine, all, bytes, displs, MPI_BYTE, 0);
    free(bytes);
    free(displs);
    free(sizes);
    free(ones);
    free(idx);
    free(log_.ev);
    log_.ev = NULL;
    log_.n = log_.cap = 0;
    return all;
}
