/* trace_name.c - the one-line name of a trace event (see trace_name.h). */
#include "show/trace_name.h"
#include "tt/comm/comm.h"

#include <string.h>

/* "12.3 KB": decimal units and one decimal, short enough for a label (the
 * exact count is in the event's args). */
static void fmt_bytes(char *buf, size_t n, long long b)
{
    if (b < 1000)
        snprintf(buf, n, "%lld B", b);
    else if (b < 1000000)
        snprintf(buf, n, "%.1f KB", b / 1e3);
    else
        snprintf(buf, n, "%.1f MB", b / 1e6);
}

void tt_trace_event_name(const tt_grid *g, const tt_event *v, char *buf, size_t n)
{
    char size[32], peer[64] = "";
    switch (v->kind) {
    case TT_EV_FORWARD:
    case TT_EV_BACKWARD:
        /* A zero-bubble schedule's backward events are named B and W. */
        snprintf(buf, n, "%s mb%d chunk %d",
                 v->kind == TT_EV_FORWARD ? "forward" : v->name[0] ? v->name : "backward", v->mb,
                 v->chunk);
        break;
    case TT_EV_COMM:
        fmt_bytes(size, sizeof size, v->bytes);
        /* A peer outside the world (a bad record) is left unnamed rather
         * than given the coordinates of a GPU that does not exist. */
        if (v->peer >= 0 && v->peer < g->world_size) {
            char pn[48];
            snprintf(peer, sizeof peer, " %s %s", strcmp(v->name, "recv") == 0 ? "from" : "to",
                     tt_gpu_name(g, v->peer, pn, sizeof pn));
        } else if (v->peer == TT_PEER_BESIDE) {
            snprintf(peer, sizeof peer, " (non-blocking, beside compute)");
        }
        /* A named call by what it is for, its group after it, as a wait's:
         * "loss all-reduce (other) 8 B" (the bare "all-reduce other 8 B"
         * says neither which one nor why a GPU spent long in it). */
        if (v->purpose[0])
            snprintf(buf, n, "%s (%s) %s%s", v->purpose, v->group[0] ? v->group : "other", size,
                     peer);
        else
            snprintf(buf, n, "%s %s %s%s", v->name, v->group[0] ? v->group : "other", size, peer);
        break;
    case TT_EV_WAIT:
        /* The group first, as the legend says it: "DP all-reduce (wait)". */
        fmt_bytes(size, sizeof size, v->bytes);
        snprintf(buf, n, "%s %s (wait) %s", v->group[0] ? v->group : "other", v->name, size);
        break;
    default:
        snprintf(buf, n, "%s", v->name);
    }
}
