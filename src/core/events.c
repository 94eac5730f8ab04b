/* events.c - the per-GPU event log behind --trace and --timeline. */
#include "tt/core/events.h"
#include "tt/core/vclock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One process is one virtual GPU: one event log per process. */
static struct {
    int active, step;
    int tag_mb, tag_chunk; /* what a communication now serves, -1: none */
    const char *tag_carries;
    double origin;
    tt_event *ev;
    int n, cap;
} log_;

void tt_events_start(double origin)
{
    log_.active = 1;
    log_.origin = origin;
    log_.step = -1;
    log_.tag_mb = log_.tag_chunk = -1;
    log_.tag_carries = NULL;
}

void tt_events_set_step(int step) { log_.step = step; }

void tt_events_tag(int mb, int chunk, const char *carries)
{
    log_.tag_mb = mb;
    log_.tag_chunk = chunk;
    log_.tag_carries = carries;
}

/* Appends an event and returns it, or NULL when nothing is recorded now. */
static tt_event *append(int kind, const char *name, const char *group, double t0_abs,
                        double t1_abs, int mb, int chunk, int peer, long long bytes)
{
    /* Training only: the oracle's work (paused) and eval or sampling (outside
     * a step) are not what the GPUs of the schedule do. */
    if (!log_.active || !tt_vclock_in_step() || tt_vclock_paused())
        return NULL;
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
    return e;
}

void tt_events_add(int kind, const char *name, const char *group, double t0_abs, double t1_abs,
                   int mb, int chunk, int peer, long long bytes)
{
    append(kind, name, group, t0_abs, t1_abs, mb, chunk, peer, bytes);
}

void tt_events_add_comm(const char *op, const char *group, const char *purpose, double t0_abs,
                        double t1_abs, int peer, long long bytes)
{
    /* The tag is a micro-batch's: the pipeline's transfers and the TP
     * collectives inside its compute. A DP collective that starts there
     * (a bucket beside the backward, ZeRO's gathers) serves them all. */
    const int tagged = group && (strcmp(group, "PP") == 0 || strcmp(group, "TP") == 0);
    tt_event *e = append(TT_EV_COMM, op, group, t0_abs, t1_abs, tagged ? log_.tag_mb : -1,
                         tagged ? log_.tag_chunk : -1, peer, bytes);
    if (e && purpose)
        snprintf(e->purpose, sizeof e->purpose, "%s", purpose);
    if (e && tagged && log_.tag_carries)
        snprintf(e->carries, sizeof e->carries, "%s", log_.tag_carries);
}

tt_event *tt_events_take(int *n)
{
    tt_event *ev = log_.ev;
    *n = log_.n;
    log_.active = 0;
    log_.ev = NULL;
    log_.n = log_.cap = 0;
    return ev;
}
