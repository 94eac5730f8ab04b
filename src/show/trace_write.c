/* trace_write.c - the two views of a captured trace (rank 0 only):
 *
 *   tt_trace_write_json  a Chrome trace event file for ui.perfetto.dev or
 *                        chrome://tracing, every event of the captured steps;
 *   tt_trace_write_svg   one training step as a self-contained SVG Gantt
 *                        chart, one row per virtual GPU, for a browser.
 *
 * Both write under "<path>.tmp.<pid>" and rename onto the path at the end,
 * so a failed write never leaves a half file where a good one was expected. */
#include "tt/show/trace.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------- writing through a temporary file ---------- */

static FILE *open_tmp(const char *path, char **tmp)
{
    size_t n = strlen(path) + 32;
    *tmp = tt_malloc(n);
    snprintf(*tmp, n, "%s.tmp.%ld", path, (long)getpid());
    return fopen(*tmp, "w");
}

/* Flushes, closes and renames; on any failure removes the temporary file and
 * reports "cannot write <what> '<path>': <reason>". */
static int finish_tmp(FILE *f, char *tmp, const char *path, const char *what, tt_err *e)
{
    int err = 0;
    errno = 0;
    /* fflush reports the errno of a write that failed (ENOSPC, EIO); ferror
     * catches an earlier failed fprintf whose errno may since be lost. */
    if (fflush(f) != 0 || ferror(f))
        err = errno ? errno : EIO;
    if (fclose(f) != 0 && !err)
        err = errno ? errno : EIO;
    if (!err && rename(tmp, path) != 0)
        err = errno;
    if (err)
        remove(tmp);
    free(tmp);
    if (err)
        return tt_fail(e, "cannot write %s '%s': %s", what, path, strerror(err));
    return 0;
}

/* "12.3 KB": decimal units, to label an event (the exact count is in args). */
static void fmt_bytes(char *buf, size_t n, long long b)
{
    if (b < 1000)
        snprintf(buf, n, "%lld B", b);
    else if (b < 1000000)
        snprintf(buf, n, "%.1f KB", b / 1e3);
    else
        snprintf(buf, n, "%.1f MB", b / 1e6);
}

/* ---------- Chrome trace (JSON) ---------- */

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

/* Microseconds, the unit of "ts" and "dur"; clamped at 0 because an event that
 * began a hair before the common origin would make viewers misplace it. */
static double usec(double seconds) { return seconds > 0 ? seconds * 1e6 : 0.0; }

/* The displayed name of an event, e.g. "forward mb3 chunk 1",
 * "all-reduce TP 12.3 KB", "send PP 6.1 KB to gpu4(dp0,pp1,tp0)". */
static void event_name(const tt_grid *g, const tt_event *v, char *buf, size_t n)
{
    char size[32], peer[64] = "";
    switch (v->kind) {
    case TT_EV_FORWARD:
    case TT_EV_BACKWARD:
        snprintf(buf, n, "%s mb%d chunk %d", v->kind == TT_EV_FORWARD ? "forward" : "backward",
                 v->mb, v->chunk);
        break;
    case TT_EV_COMM:
        fmt_bytes(size, sizeof size, v->bytes);
        if (v->peer >= 0 && v->peer < g->world_size) {
            char pn[48];
            snprintf(peer, sizeof peer, " %s %s", strcmp(v->name, "recv") == 0 ? "from" : "to",
                     tt_gpu_name(g, v->peer, pn, sizeof pn));
        }
        snprintf(buf, n, "%s %s %s%s", v->name, v->group[0] ? v->group : "other", size, peer);
        break;
    default:
        snprintf(buf, n, "%s", v->name);
    }
}

int tt_trace_write_json(const char *path, const tt_grid *g, const tt_event *ev,
                        const int *counts, tt_err *e)
{
    char *tmp;
    FILE *f = open_tmp(path, &tmp);
    if (!f) {
        int err = errno;
        free(tmp);
        return tt_fail(e, "cannot write trace '%s': %s", path, strerror(err));
    }
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"layout\":\"tp%d x pp%d x dp%d\"},\n"
               "\"traceEvents\":[\n",
            g->tp, g->pp, g->dp);
    const char *sep = "";
    /* A process per virtual GPU, named with its coordinates and sorted by
     * world rank; two threads so that communication nested inside a forward
     * (TP all-reduces) gets its own track instead of overlapping the compute. */
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
                   "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":0}},\n"
                   "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"args\":{\"sort_index\":1}}",
                r, r, r, r);
        sep = ",\n";
    }
    const tt_event *v = ev;
    for (int r = 0; r < g->world_size; r++) {
        for (int i = 0; i < counts[r]; i++, v++) {
            char name[160];
            event_name(g, v, name, sizeof name);
            int comm = v->kind == TT_EV_COMM;
            const char *cat = comm ? (v->group[0] ? v->group : "other")
                              : v->kind == TT_EV_OPTIMIZER ? "optimizer" : "compute";
            fprintf(f, "%s{\"name\":", sep);
            json_str(f, name);
            fprintf(f, ",\"cat\":");
            json_str(f, cat);
            double dur = v->t1 > v->t0 ? v->t1 - v->t0 : 0.0;
            fprintf(f, ",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%d",
                    r, comm ? 1 : 0, usec(v->t0), dur * 1e6, v->step);
            if (v->mb >= 0)
                fprintf(f, ",\"mb\":%d", v->mb);
            if (v->chunk >= 0)
                fprintf(f, ",\"chunk\":%d", v->chunk);
            if (comm) {
                fprintf(f, ",\"op\":");
                json_str(f, v->name);
                fprintf(f, ",\"group\":");
                json_str(f, cat);
                fprintf(f, ",\"bytes\":%lld,\"peer\":%d", v->bytes, v->peer);
                if (v->peer >= 0 && v->peer < g->world_size) {
                    char pn[48];
                    fprintf(f, ",\"peer_gpu\":");
                    json_str(f, tt_gpu_name(g, v->peer, pn, sizeof pn));
                }
            }
            fprintf(f, "}}");
        }
    }
    fprintf(f, "\n]}\n");
    return finish_tmp(f, tmp, path, "trace", e);
}

/* ---------- SVG timeline ---------- */

/* Layout, in SVG user units (pixels at 100%). */
enum {
    LABEL_W = 170,  /* row labels, right-aligned against the plot */
    IDLE_W = 96,    /* the idle fraction at the right of each row */
    ROW_H = 34,     /* row pitch */
    BOX_Y = 4,      /* compute boxes inside a row */
    BOX_H = 20,
    COMM_Y = 26,    /* the communication strip under the boxes */
    COMM_H = 5,
    TOP = 58,       /* title and subtitle above the plot */
};

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            /* Control characters are not allowed in XML 1.0. */
            if ((unsigned char)*s >= 0x20 || *s == '\t' || *s == '\n')
                fputc(*s, f);
        }
    }
}

typedef struct {
    unsigned char r, g, b;
} rgb;

static const rgb C_FWD = {0x5b, 0x8f, 0xd6}, C_BWD = {0xf2, 0x9b, 0x45}, C_OPT = {0x4d, 0x4d, 0x4d};

/* A comm group's colour: TP purple, PP green, DP red, anything else grey. */
static rgb group_colour(const char *grp)
{
    if (strcmp(grp, "TP") == 0)
        return (rgb){0x94, 0x67, 0xbd};
    if (strcmp(grp, "PP") == 0)
        return (rgb){0x2c, 0xa0, 0x2c};
    if (strcmp(grp, "DP") == 0)
        return (rgb){0xd6, 0x27, 0x28};
    return (rgb){0xa0, 0xa0, 0xa0};
}

/* The i-th of v chunks of a stage: the first in the base colour, later ones
 * mixed towards white, so black digits stay readable on every shade. */
static rgb chunk_shade(rgb c, int i, int v)
{
    double t = v > 1 ? 0.55 * i / (v - 1) : 0.0;
    return (rgb){(unsigned char)(c.r + (255 - c.r) * t), (unsigned char)(c.g + (255 - c.g) * t),
                 (unsigned char)(c.b + (255 - c.b) * t)};
}

static void fill(FILE *f, rgb c) { fprintf(f, "fill=\"#%02x%02x%02x\"", c.r, c.g, c.b); }

/* A tick spacing of 1, 2 or 5 x 10^k giving about `want` ticks over span. */
static double nice_step(double span, int want)
{
    double raw = span / want, mag = pow(10, floor(log10(raw))), n = raw / mag;
    return (n < 1.5 ? 1 : n < 3.5 ? 2 : n < 7.5 ? 5 : 10) * mag;
}

int tt_trace_write_svg(const char *path, const tt_grid *g, const tt_event *ev, const int *counts,
                       int step, tt_err *e)
{
    const int W = g->world_size;
    int *first = tt_malloc((size_t)(W + 1) * sizeof(int));
    first[0] = 0;
    for (int r = 0; r < W; r++)
        first[r + 1] = first[r] + counts[r];

    /* The step's extent over all GPUs (the common time axis), each row's own
     * extent and compute time (its idle fraction), the most compute boxes on
     * a row (the plot's width) and the chunks per stage (the shades). */
    double t_lo = INFINITY, t_hi = -INFINITY;
    double *row_lo = tt_malloc((size_t)W * sizeof(double)), *row_hi = tt_malloc((size_t)W * sizeof(double));
    double *busy = tt_calloc((size_t)W, sizeof(double));
    int max_boxes = 0, v = 1;
    for (int r = 0; r < W; r++) {
        row_lo[r] = INFINITY, row_hi[r] = -INFINITY;
        int boxes = 0;
        for (int i = first[r]; i < first[r + 1]; i++) {
            const tt_event *x = &ev[i];
            if (x->step != step)
                continue;
            row_lo[r] = fmin(row_lo[r], x->t0);
            row_hi[r] = fmax(row_hi[r], x->t1);
            if (x->kind == TT_EV_FORWARD || x->kind == TT_EV_BACKWARD) {
                busy[r] += x->t1 - x->t0;
                boxes++;
                if (x->chunk >= 0 && x->chunk / g->pp + 1 > v)
                    v = x->chunk / g->pp + 1;
            }
        }
        t_lo = fmin(t_lo, row_lo[r]);
        t_hi = fmax(t_hi, row_hi[r]);
        if (boxes > max_boxes)
            max_boxes = boxes;
    }
    int empty = !(t_hi > t_lo);
    double span_ms = empty ? 1.0 : (t_hi - t_lo) * 1e3;

    /* About 40 units per compute box leaves room for a two-digit micro-batch
     * number in the forwards (a third of a forward+backward pair) once the
     * bubble takes its share; clamped so small runs are not cramped and big
     * ones stay on a screen (a browser zooms the viewBox further). */
    int plot_w = max_boxes * 40;
    plot_w = plot_w < 900 ? 900 : plot_w > 2000 ? 2000 : plot_w;
    const double px_per_ms = plot_w / span_ms;
    const int x0 = LABEL_W, plot_h = W * ROW_H;
    const int axis_y = TOP + plot_h;
    const int legend_y = axis_y + 44;
    const int width = LABEL_W + plot_w + IDLE_W + 10;
    /* The legend's entries, and how many lines they wrap to (the height). */
    struct {
        rgb c;
        int strip;
        char text[64];
        double x;
        int line;
    } items[24];
    int n = 0;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < v && i < 8; i++) {
            items[n].c = chunk_shade(k ? C_BWD : C_FWD, i, v);
            items[n].strip = 0;
            if (v > 1)
                snprintf(items[n].text, sizeof items[n].text, "%s, stage's chunk %d", k ? "backward" : "forward", i);
            else
                snprintf(items[n].text, sizeof items[n].text, "%s", k ? "backward" : "forward");
            n++;
        }
    items[n].c = C_OPT, items[n].strip = 0;
    snprintf(items[n++].text, sizeof items[0].text, "optimizer step");
    const char *groups[] = {"TP", "PP", "DP", "other"};
    for (int k = 0; k < 4; k++) {
        items[n].c = group_colour(groups[k]), items[n].strip = 1;
        snprintf(items[n++].text, sizeof items[0].text, "%s communication", groups[k]);
    }
    /* Text width estimated at 0.57 em per character: no font metrics in
     * plain SVG, so this errs on the wide side. */
    int line = 0;
    for (int k = 0, lx = 12; k < n; k++) {
        int w = 22 + (int)(6.6 * strlen(items[k].text)) + 18;
        if (lx + w > width - 10)
            lx = 12, line++;
        items[k].x = lx, items[k].line = line;
        lx += w;
    }
    const int height = legend_y + (line + 2) * 20 + 8;

    char *tmp;
    FILE *f = open_tmp(path, &tmp);
    if (!f) {
        int err = errno;
        free(tmp);
        free(first), free(row_lo), free(row_hi), free(busy);
        return tt_fail(e, "cannot write timeline '%s': %s", path, strerror(err));
    }
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n",
            width, height, width, height);
    fprintf(f, "<title>tiny_transformer timeline, step %d</title>\n", step);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", width, height);

    /* Title: step, layout, span. */
    fprintf(f, "<text class=\"title\" x=\"12\" y=\"24\" font-size=\"17\" font-weight=\"bold\" fill=\"#222\">"
               "Step %d: tp%d x pp%d x dp%d = %d virtual GPUs, span %.2f ms</text>\n",
            step, g->tp, g->pp, g->dp, W, empty ? 0.0 : span_ms);
    fprintf(f, "<text x=\"12\" y=\"44\" font-size=\"11.5\" fill=\"#555\">"
               "Boxes: compute, numbered by micro-batch. Strip under each row: communication. "
               "Empty space: idle (pipeline bubble, waiting). Right: idle = 1 - (forward+backward) / "
               "row span.</text>\n");
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#555\" text-anchor=\"middle\">idle</text>\n",
            x0 + plot_w + IDLE_W / 2 + 4, TOP - 4);

    /* Row bands (alternating, so a row's empty stretches read as its own),
     * a rule between pipeline stages, since rows come in world-rank order,
     * i.e. grouped by stage (TP fastest). */
    fprintf(f, "<g class=\"bands\">\n");
    for (int r = 0; r < W; r++)
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", x0,
                TOP + r * ROW_H, plot_w, ROW_H, r % 2 ? "#f3f3f3" : "#fafafa");
    fprintf(f, "</g>\n");

    /* Time axis: vertical grid lines and tick labels in ms. */
    fprintf(f, "<g class=\"axis\" font-size=\"10.5\" fill=\"#444\" text-anchor=\"middle\">\n");
    if (!empty) {
        double tick = nice_step(span_ms, 8);
        int decimals = tick >= 1 ? 0 : (int)ceil(-log10(tick) - 1e-9);
        for (int k = 0; k * tick <= span_ms * (1 + 1e-9); k++) {
            double x = x0 + k * tick * px_per_ms;
            fprintf(f, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"#d0d0d0\" stroke-width=\"0.7\"/>\n",
                    x, TOP, x, axis_y + 4);
            fprintf(f, "<text x=\"%.2f\" y=\"%d\">%.*f</text>\n", x, axis_y + 16, decimals, k * tick);
        }
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#888\" stroke-width=\"1\"/>\n", x0,
            axis_y, x0 + plot_w, axis_y);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\">time (ms) from the step's first event</text>\n",
            x0 + plot_w / 2, axis_y + 32);
    fprintf(f, "</g>\n");

    for (int r = 0; r < W; r++) {
        int y = TOP + r * ROW_H;
        char name[48];
        fprintf(f, "<g class=\"row\" id=\"row%d\">\n", r);
        if (r > 0 && r % (g->tp * g->dp) == 0)
            fprintf(f, "<line x1=\"8\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\" stroke-width=\"1\"/>\n", y,
                    x0 + plot_w + IDLE_W, y);
        fprintf(f, "<text class=\"label\" x=\"%d\" y=\"%d\" font-size=\"12.5\" text-anchor=\"end\" fill=\"#222\">",
                x0 - 8, y + BOX_Y + 15);
        xml_text(f, tt_gpu_name(g, r, name, sizeof name));
        fprintf(f, "</text>\n");
        /* Communication first, then compute over it: nothing hides a box. */
        for (int pass = 0; pass < 2; pass++) {
            for (int i = first[r]; i < first[r + 1]; i++) {
                const tt_event *x = &ev[i];
                if (x->step != step || (x->kind == TT_EV_COMM) != (pass == 0))
                    continue;
                double bx = x0 + (x->t0 - t_lo) * 1e3 * px_per_ms;
                double bw = (x->t1 - x->t0) * 1e3 * px_per_ms;
                char desc[160];
                event_name(g, x, desc, sizeof desc);
                if (x->kind == TT_EV_COMM) {
                    /* Comm calls last microseconds: a minimum width keeps
                     * each one visible as a tick in the strip. */
                    fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" ", bx, y + COMM_Y,
                            bw < 0.8 ? 0.8 : bw, COMM_H);
                    fill(f, group_colour(x->group));
                    fprintf(f, "><title>");
                    xml_text(f, desc);
                    fprintf(f, ": %.3f ms</title></rect>\n", (x->t1 - x->t0) * 1e3);
                    continue;
                }
                rgb c = x->kind == TT_EV_OPTIMIZER ? C_OPT
                        : chunk_shade(x->kind == TT_EV_FORWARD ? C_FWD : C_BWD,
                                      x->chunk >= 0 ? x->chunk / g->pp : 0, v);
                fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" ", bx, y + BOX_Y,
                        bw < 0.5 ? 0.5 : bw, BOX_H);
                fill(f, c);
                /* A white edge separates back-to-back boxes; on a sliver it
                 * would paint over the whole box, so only on wide ones. */
                if (bw > 4)
                    fprintf(f, " stroke=\"#ffffff\" stroke-width=\"0.6\"");
                fprintf(f, "><title>");
                xml_text(f, desc);
                fprintf(f, ": %.3f ms</title></rect>\n", (x->t1 - x->t0) * 1e3);
                if (x->kind == TT_EV_OPTIMIZER || x->mb < 0)
                    continue;
                /* The micro-batch number, shrunk to fit the box (a digit is
                 * about 0.6 em wide in sans-serif), left out when it would be
                 * too small to read. */
                char num[16];
                int len = snprintf(num, sizeof num, "%d", x->mb);
                double fs = (bw - 2) / (0.62 * len);
                if (fs > 11.5)
                    fs = 11.5;
                if (fs < 6)
                    continue;
                fprintf(f, "<text class=\"mb\" x=\"%.2f\" y=\"%.2f\" font-size=\"%.1f\" text-anchor=\"middle\" "
                           "fill=\"#111\">%s</text>\n",
                        bx + bw / 2, y + BOX_Y + BOX_H / 2 + fs * 0.36, fs, num);
            }
        }
        /* Idle fraction of this row over its own span of the step. */
        fprintf(f, "<text class=\"idle\" x=\"%d\" y=\"%d\" font-size=\"12.5\" text-anchor=\"end\" fill=\"#222\">",
                x0 + plot_w + IDLE_W - 8, y + BOX_Y + 15);
        if (row_hi[r] > row_lo[r])
            fprintf(f, "%.1f%%", 100.0 * (1.0 - busy[r] / (row_hi[r] - row_lo[r])));
        else
            fprintf(f, "-");
        fprintf(f, "</text>\n</g>\n");
    }
    if (empty)
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"14\" text-anchor=\"middle\" fill=\"#a00\">"
                   "no events recorded for step %d</text>\n",
                x0 + plot_w / 2, TOP + plot_h / 2, step);

    /* Legend: a swatch and a word per colour, laid out left to right. */
    fprintf(f, "<g class=\"legend\" font-size=\"11.5\" fill=\"#222\">\n");
    for (int k = 0; k < n; k++) {
        double lx = items[k].x;
        int ly = legend_y + 20 * items[k].line;
        fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"16\" height=\"%d\" ", lx,
                items[k].strip ? ly - 5 : ly - 11, items[k].strip ? COMM_H : 14);
        fill(f, items[k].c);
        fprintf(f, "/>\n<text x=\"%.1f\" y=\"%d\">", lx + 22, ly);
        xml_text(f, items[k].text);
        fprintf(f, "</text>\n");
    }
    int ly = legend_y + 20 * (line + 1);
    fprintf(f, "<rect x=\"12\" y=\"%d\" width=\"16\" height=\"14\" fill=\"#f3f3f3\" stroke=\"#bbb\" stroke-width=\"0.6\"/>\n"
               "<text x=\"34\" y=\"%d\">empty: idle (bubble)</text>\n",
            ly - 11, ly);
    if (v > 1)
        fprintf(f, "<text x=\"%d\" y=\"%d\">interleaved: stage s holds the global chunks s, s+%d, ...; "
                   "the stage's chunk i (global chunk s+%d\xc2\xb7i) is drawn lighter as i grows</text>\n",
                12 + 170, ly, g->pp, g->pp);
    fprintf(f, "</g>\n</svg>\n");
    free(first), free(row_lo), free(row_hi), free(busy);
    return finish_tmp(f, tmp, path, "timeline", e);
}
