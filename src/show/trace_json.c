/* trace_json.c - a captured trace as a Chrome trace event file (rank 0 only),
 * the JSON that ui.perfetto.dev and chrome://tracing open: every event of
 * the captured steps, one process per virtual GPU.
 *
 * Streamed out event by event with fprintf, so no document tree of a long
 * trace is ever held in memory; the fixed field order also keeps the file
 * byte-for-byte reproducible for the same events. */
#include "tt/show/trace.h"
#include "tt/comm/comm.h"
#include "tt/core/vclock.h"
#include "show/outfile.h"
#include "show/trace_name.h"
#include <math.h>

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* Microseconds, the unit of "ts"; clamped at 0 because an event that began a
 * hair before the common origin would make viewers misplace it. */
static double usec(double seconds) { return seconds > 0 ? seconds * 1e6 : 0.0; }

/* The metadata of the virtual GPUs: a process per GPU, named with its
 * coordinates and sorted by world rank, with three threads so that
 * communication nested inside a forward (TP all-reduces) gets its own track
 * instead of overlapping the compute, and a non-blocking collective that
 * runs beside both (the overlapped DP all-reduce) a third; the wait for it
 * at the end of the step is on the communication track. Returns the
 * separator the next entry needs. */
static const char *write_gpu_tracks(FILE *f, const tt_grid *g)
{
    const char *sep = "";
    for (int r = 0; r < g->world_size; r++) {
        char name[48];
        tt_gpu_name(g, r, name, sizeof name);
        fprintf(f, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":",
                sep, r);
        json_str(f, name);
        fprintf(f, "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                   "\"args\":{\"sort_index\":%d}},\n",
                r, r);
        fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"compute\"}},\n"
                   "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"args\":{\"name\":\"communication\"}},\n"
                   "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":2,\"args\":{\"name\":\"beside compute\"}},\n"
                   "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":0}},\n"
                   "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"args\":{\"sort_index\":1}},\n"
                   "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":2,\"args\":{\"sort_index\":2}}",
                r, r, r, r, r, r);
        sep = ",\n";
    }
    return sep;
}

/* The args a transfer or collective adds: the raw operation, group, byte
 * count and peer, for queries the display name cannot answer, and the
 * purpose of a named call ("loss all-reduce"). */
static void write_comm_args(FILE *f, const tt_grid *g, const tt_event *v, const char *group)
{
    fprintf(f, ",\"op\":");
    json_str(f, v->name);
    if (v->purpose[0]) {
        fprintf(f, ",\"purpose\":");
        json_str(f, v->purpose);
    }
    fprintf(f, ",\"group\":");
    json_str(f, group);
    fprintf(f, ",\"bytes\":%lld,\"peer\":%d", v->bytes, v->peer);
    if (v->peer >= 0 && v->peer < g->world_size) {
        char pn[48];
        fprintf(f, ",\"peer_gpu\":");
        json_str(f, tt_gpu_name(g, v->peer, pn, sizeof pn));
    }
}

/* One complete ("X") event of world rank r, on its compute or comm track. A
 * wait for collectives started earlier is communication: on the comm track,
 * in its group's category, with what it waited for ("waits_for", not "op",
 * and "bytes_waited_for": the bytes are the collectives' own events'). */
static void write_event(FILE *f, const tt_grid *g, const tt_event *v, int r, const char *sep)
{
    char name[160];
    tt_trace_event_name(g, v, name, sizeof name);
    int comm = v->kind == TT_EV_COMM, wait = v->kind == TT_EV_WAIT;
    const char *cat = comm || wait ? (v->group[0] ? v->group : "other")
                      : v->kind == TT_EV_OPTIMIZER ? "optimizer"
                      : v->kind == TT_EV_PAUSED  ? "oracle" : "compute";
    fprintf(f, "%s{\"name\":", sep);
    json_str(f, name);
    fprintf(f, ",\"cat\":");
    json_str(f, cat);
    /* Both ends rounded to the nanosecond as printed, and the duration their
     * difference: rounding ts and dur apart made an event end 1 ns after the
     * next one on its track began, which the trace format forbids. */
    const double ts = rint(usec(v->t0) * 1e3) / 1e3, end = rint(usec(v->t1) * 1e3) / 1e3;
    fprintf(f, ",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%d",
            r, comm ? (v->peer == TT_PEER_BESIDE ? 2 : 1) : wait ? 1 : 0, ts, end > ts ? end - ts : 0.0,
            v->step);
    if (v->mb >= 0)
        fprintf(f, ",\"mb\":%d", v->mb);
    if (v->chunk >= 0)
        fprintf(f, ",\"chunk\":%d", v->chunk);
    if (v->carries[0])
        fprintf(f, ",\"carries\":\"%s\"", v->carries);
    if (comm)
        write_comm_args(f, g, v, cat);
    if (wait) {
        fprintf(f, ",\"waits_for\":");
        json_str(f, v->name);
        fprintf(f, ",\"group\":");
        json_str(f, cat);
        fprintf(f, ",\"bytes_waited_for\":%lld", v->bytes);
    }
    fprintf(f, "}}");
}

int tt_trace_write_json(const char *path, const tt_grid *g, const tt_event *ev,
                        const int *counts, tt_err *e)
{
    tt_outfile o;
    if (tt_outfile_open(&o, path, "trace", e) != 0)
        return -1;
    fprintf(o.f, "{\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"layout\":\"tp%d x pp%d x dp%d\","
                 "\"clock\":",
            g->tp, g->pp, g->dp);
    json_str(o.f, tt_clock_label());
    fprintf(o.f, "},\n\"traceEvents\":[\n");
    const char *sep = write_gpu_tracks(o.f, g);
    const tt_event *v = ev;
    for (int r = 0; r < g->world_size; r++)
        for (int i = 0; i < counts[r]; i++, v++)
            write_event(o.f, g, v, r, sep);
    fprintf(o.f, "\n]}\n");
    return tt_outfile_finish(&o, e);
}
