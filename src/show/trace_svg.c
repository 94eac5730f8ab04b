/* trace_svg.c - one training step of a captured trace as a self-contained SVG
 * Gantt chart (rank 0 only): a row per virtual GPU on a common time axis,
 * compute boxes numbered by micro-batch, a communication strip under each
 * row (a named call's purpose written over it), the measured idle fraction
 * at its right and a legend underneath.
 *
 * Plain SVG without script or stylesheet, so any browser shows it and a test
 * can parse it with an XML reader. The chart is measured first
 * (trace_svg_layout.c), because the SVG element must state the final width
 * and height; this file then writes the parts top to bottom. */
#include "tt/show/trace.h"
#include "tt/comm/comm.h"
#include "show/outfile.h"
#include "show/trace_name.h"
#include "show/trace_svg_layout.h"
#include "tt/core/vclock.h"

#include <math.h>
#include <string.h>

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

static void fill(FILE *f, rgb c) { fprintf(f, "fill=\"#%02x%02x%02x\"", c.r, c.g, c.b); }

/* Row r's idle fraction over its window. The busy time is a sum of span
 * lengths, which can exceed the window by a rounding when the row never
 * waits (one stage): that is no idle time, not "-0.0%". */
static double idle_of(const tt_svg_layout *L, int r)
{
    const double idle = 1.0 - L->busy[r] / (L->win_hi[r] - L->win_lo[r]);
    return idle > 0.0 ? idle : 0.0;
}

/* ---------- writing, top to bottom ---------- */

/* The SVG element, the white page, the title (step, layout, span), the
 * reading guide and the heading of the idle column. */
static void write_heading(FILE *f, const tt_svg_layout *L)
{
    const tt_grid *g = L->g;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n",
            L->width, L->height, L->width, L->height);
    fprintf(f, "<title>tiny_transformer timeline, step %d</title>\n", L->step);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", L->width, L->height);
    /* The clock's label holds the cluster's name, which a cluster file sets
     * ("R&D lab"): text, escaped. */
    fprintf(f, "<text class=\"title\" x=\"12\" y=\"24\" font-size=\"17\" font-weight=\"bold\" fill=\"#222\">"
               "Step %d: tp%d x pp%d x dp%d = %d virtual GPUs, span %.2f ms (",
            L->step, g->tp, g->pp, g->dp, g->world_size, L->empty ? 0.0 : L->span_ms);
    xml_text(f, tt_clock_label());
    fputs(")</text>\n", f);
    /* Two lines, so the guide stays clear of the idle column's heading
     * however narrow the plot. */
    fprintf(f, "<text x=\"12\" y=\"42\" font-size=\"11.5\" fill=\"#555\">"
               "Boxes: compute, numbered by micro-batch%s%s. Strip under each row: "
               "communication. Empty: idle.</text>\n"
               "<text x=\"12\" y=\"57\" font-size=\"11.5\" fill=\"#555\">"
               "Right: idle = 1 - (forward+backward) / window from the pipeline's first "
               "forward to its last backward (or W).</text>\n",
            L->has_wait ? "; pale red: waiting for the DP all-reduce" : "",
            L->has_oracle ? "; sand: the oracle's work, clocks paused (wall time only)" : "");
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#555\" text-anchor=\"middle\">idle</text>\n",
            PLOT_X + L->plot_w + IDLE_W / 2 + 4, TOP - 4);
}

/* Alternating row bands, so a row's empty stretches read as its own. */
static void write_bands(FILE *f, const tt_svg_layout *L)
{
    fprintf(f, "<g class=\"bands\">\n");
    for (int r = 0; r < L->g->world_size; r++)
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", PLOT_X,
                TOP + r * ROW_H, L->plot_w, ROW_H, r % 2 ? "#f3f3f3" : "#fafafa");
    fprintf(f, "</g>\n");
}

/* A tick spacing of 1, 2 or 5 x 10^k giving about `want` ticks over span. */
static double nice_step(double span, int want)
{
    double raw = span / want, mag = pow(10, floor(log10(raw))), n = raw / mag;
    return (n < 1.5 ? 1 : n < 3.5 ? 2 : n < 7.5 ? 5 : 10) * mag;
}

/* The time axis: vertical grid lines with tick labels in ms (none for an
 * empty step, which has no time scale), the base line and its caption. */
static void write_axis(FILE *f, const tt_svg_layout *L)
{
    fprintf(f, "<g class=\"axis\" font-size=\"10.5\" fill=\"#444\" text-anchor=\"middle\">\n");
    if (!L->empty) {
        double tick = nice_step(L->span_ms, 8);
        int decimals = tick >= 1 ? 0 : (int)ceil(-log10(tick) - 1e-9);
        for (int k = 0; k * tick <= L->span_ms * (1 + 1e-9); k++) {
            double x = PLOT_X + k * tick * L->px_per_ms;
            fprintf(f, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"#d0d0d0\" stroke-width=\"0.7\"/>\n",
                    x, TOP, x, L->axis_y + 4);
            fprintf(f, "<text x=\"%.2f\" y=\"%d\">%.*f</text>\n", x, L->axis_y + 16, decimals, k * tick);
        }
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#888\" stroke-width=\"1\"/>\n", PLOT_X,
            L->axis_y, PLOT_X + L->plot_w, L->axis_y);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\">time (ms, ", PLOT_X + L->plot_w / 2,
            L->axis_y + 32);
    xml_text(f, tt_clock_label());
    fputs(") from the step's first event</text>\n", f);
    /* Under the idle column, the mean over the GPUs: the pipeline's bubble,
     * the figure the schedule's formula predicts for equal stages. */
    double sum = 0.0;
    int n = 0;
    for (int r = 0; r < L->g->world_size; r++)
        if (L->win_hi[r] > L->win_lo[r])
            sum += idle_of(L, r), n++;
    if (n > 0)
        fprintf(f, "<text class=\"idle-mean\" x=\"%d\" y=\"%d\" font-size=\"12.5\" "
                   "text-anchor=\"end\" fill=\"#222\">mean %.1f%%</text>\n",
                PLOT_X + L->plot_w + IDLE_W - 8, L->axis_y + 16, 100.0 * sum / n);
    fprintf(f, "</g>\n");
}

/* An event's left edge and width on the plot. */
static void event_span(const tt_svg_layout *L, const tt_event *x, double *bx, double *bw)
{
    *bx = PLOT_X + (x->t0 - L->t_lo) * 1e3 * L->px_per_ms;
    *bw = (x->t1 - x->t0) * 1e3 * L->px_per_ms;
}

/* A tooltip: the event's name and duration. */
static void write_tooltip(FILE *f, const tt_svg_layout *L, const tt_event *x)
{
    char desc[160];
    tt_trace_event_name(L->g, x, desc, sizeof desc);
    fprintf(f, "><title>");
    xml_text(f, desc);
    fprintf(f, ": %.3f ms</title></rect>\n", (x->t1 - x->t0) * 1e3);
}

/* Text centred in a box of width bw at bx, in the middle of the box area of
 * the row at y, in the largest size from 10 down to 7 units that fits (a
 * character is about 0.58 em in sans-serif); else the short form, if any;
 * else nothing (the tooltip still names it). */
static void write_box_label(FILE *f, const char *cls, const char *text, const char *shrt,
                            double bx, double bw, int y)
{
    for (int pass = 0; pass < 2; pass++) {
        const char *s = pass ? shrt : text;
        if (!s || !*s)
            return;
        double fs = (bw - 4) / (0.58 * (double)strlen(s));
        if (fs > 10)
            fs = 10;
        if (fs < 7)
            continue;
        fprintf(f, "<text class=\"%s\" x=\"%.2f\" y=\"%.2f\" font-size=\"%.1f\" "
                   "text-anchor=\"middle\" fill=\"#444\">",
                cls, bx + bw / 2, y + BOX_Y + BOX_H / 2 + fs * 0.36, fs);
        xml_text(f, s);
        fprintf(f, "</text>\n");
        return;
    }
}

/* A transfer or collective in the strip under the row at y; a non-blocking
 * one, which runs beside the compute, in its own strip over the boxes. A
 * named blocking call (the step's loss and norm all-reduce) is labelled
 * over its strip, where the GPU has nothing else to draw while it waits in
 * the call: "loss and norm all-reduce", or "loss" (the first word's last
 * part after a dash) where the whole does not fit. */
static void write_comm(FILE *f, const tt_svg_layout *L, const tt_event *x, int y)
{
    double bx, bw;
    event_span(L, x, &bx, &bw);
    const int beside = x->peer == TT_PEER_BESIDE;
    /* Comm calls last microseconds: a minimum width keeps each one visible
     * as a tick in the strip. */
    fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" ", bx,
            y + (beside ? BESIDE_Y : COMM_Y), bw < 0.8 ? 0.8 : bw, beside ? BESIDE_H : COMM_H);
    fill(f, group_colour(x->group));
    write_tooltip(f, L, x);
    if (x->purpose[0] && !beside) {
        char shrt[sizeof x->purpose];
        size_t n = strcspn(x->purpose, " ");
        snprintf(shrt, sizeof shrt, "%.*s", (int)n, x->purpose);
        const char *dash = strrchr(shrt, '-');
        write_box_label(f, "comm-label", x->purpose, dash ? dash + 1 : shrt, bx, bw, y);
    }
}

/* The micro-batch number centred in a box, shrunk to fit (a digit is about
 * 0.6 em wide in sans-serif), left out when it would be too small to read. */
static void write_mb_number(FILE *f, const tt_event *x, double bx, double bw, int y)
{
    char num[16];
    int len = snprintf(num, sizeof num, "%d", x->mb);
    double fs = (bw - 2) / (0.62 * len);
    if (fs > 11.5)
        fs = 11.5;
    if (fs < 6)
        return;
    fprintf(f, "<text class=\"mb\" x=\"%.2f\" y=\"%.2f\" font-size=\"%.1f\" text-anchor=\"middle\" "
               "fill=\"#111\">%s</text>\n",
            bx + bw / 2, y + BOX_Y + BOX_H / 2 + fs * 0.36, fs, num);
}

/* A forward, backward, optimizer step, wait or the oracle's paused work as
 * a box in the row at y. An optimizer event or wait of 0 s is not drawn: a
 * wait whose rings had ended before it, or the gradient norm of a replica
 * that counts no tensor. */
static void write_box(FILE *f, const tt_svg_layout *L, const tt_event *x, int y)
{
    double bx, bw;
    event_span(L, x, &bx, &bw);
    if ((x->kind == TT_EV_WAIT || x->kind == TT_EV_OPTIMIZER || x->kind == TT_EV_PAUSED) &&
        !(x->t1 > x->t0))
        return;
    rgb c = x->kind == TT_EV_OPTIMIZER ? C_OPT
            : x->kind == TT_EV_WAIT  ? C_WAIT
            : x->kind == TT_EV_PAUSED ? C_ORACLE
            : chunk_shade(x->kind == TT_EV_FORWARD ? C_FWD : tt_event_is_w(x) ? C_W : C_BWD,
                          x->chunk >= 0 ? x->chunk / L->g->pp : 0, L->v);
    fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" ", bx, y + BOX_Y,
            bw < 0.5 ? 0.5 : bw, BOX_H);
    fill(f, c);
    /* A white edge separates back-to-back boxes; on a sliver it would paint
     * over the whole box, so only on wide ones. */
    if (bw > 4)
        fprintf(f, " stroke=\"#ffffff\" stroke-width=\"0.6\"");
    write_tooltip(f, L, x);
    if (x->kind != TT_EV_OPTIMIZER && x->mb >= 0)
        write_mb_number(f, x, bx, bw, y);
    /* The wall time no GPU of the model spends: say whose it is. */
    if (x->kind == TT_EV_PAUSED)
        write_box_label(f, "oracle-label", x->name, "oracle", bx, bw, y);
}

/* The idle fraction of row r over its DP replica's pipeline window (first
 * forward to last backward or W of the step); "-" when the row has no
 * forward or backward in it. */
static void write_idle(FILE *f, const tt_svg_layout *L, int r, int y)
{
    fprintf(f, "<text class=\"idle\" x=\"%d\" y=\"%d\" font-size=\"12.5\" text-anchor=\"end\" fill=\"#222\">",
            PLOT_X + L->plot_w + IDLE_W - 8, y + BOX_Y + 15);
    if (L->win_hi[r] > L->win_lo[r])
        fprintf(f, "%.1f%%", 100.0 * idle_of(L, r));
    else
        fprintf(f, "-");
    fprintf(f, "</text>\n");
}

/* The row of world rank r: a rule above it where a new pipeline stage
 * begins (rows are in world-rank order, i.e. grouped by stage, TP fastest),
 * its label, its events and its idle fraction. */
static void write_row(FILE *f, const tt_svg_layout *L, int r)
{
    const tt_grid *g = L->g;
    int y = TOP + r * ROW_H;
    char name[48];
    fprintf(f, "<g class=\"row\" id=\"row%d\">\n", r);
    if (r > 0 && r % (g->tp * g->dp) == 0)
        fprintf(f, "<line x1=\"8\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\" stroke-width=\"1\"/>\n", y,
                PLOT_X + L->plot_w + IDLE_W, y);
    fprintf(f, "<text class=\"label\" x=\"%d\" y=\"%d\" font-size=\"12.5\" text-anchor=\"end\" fill=\"#222\">",
            PLOT_X - 8, y + BOX_Y + 15);
    xml_text(f, tt_gpu_name(g, r, name, sizeof name));
    fprintf(f, "</text>\n");
    /* Communication first, then compute over it: nothing hides a box. */
    for (int pass = 0; pass < 2; pass++)
        for (int i = L->first[r]; i < L->first[r + 1]; i++) {
            const tt_event *x = &L->ev[i];
            if (x->step != L->step || (x->kind == TT_EV_COMM) != (pass == 0))
                continue;
            if (pass == 0)
                write_comm(f, L, x, y);
            else
                write_box(f, L, x, y);
        }
    write_idle(f, L, r, y);
    fprintf(f, "</g>\n");
}

/* A swatch and a caption per colour, where the layout put them, then what
 * empty space means and, with interleaving, how chunks are shaded. */
static void write_legend(FILE *f, const tt_svg_layout *L)
{
    fprintf(f, "<g class=\"legend\" font-size=\"11.5\" fill=\"#222\">\n");
    for (int k = 0; k < L->n_items; k++) {
        const legend_item *it = &L->items[k];
        int ly = L->legend_y + 20 * it->line;
        fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"16\" height=\"%d\" ", it->x,
                it->strip ? ly - 5 : ly - 11, it->strip ? COMM_H : 14);
        fill(f, it->c);
        fprintf(f, "/>\n<text x=\"%.1f\" y=\"%d\">", it->x + 22, ly);
        xml_text(f, it->text);
        fprintf(f, "</text>\n");
    }
    int ly = L->legend_y + 20 * (L->last_line + 1);
    fprintf(f, "<rect x=\"12\" y=\"%d\" width=\"16\" height=\"14\" fill=\"#f3f3f3\" stroke=\"#bbb\" stroke-width=\"0.6\"/>\n"
               "<text x=\"34\" y=\"%d\">empty: idle (bubble)</text>\n",
            ly - 11, ly);
    int beside = 0; /* any non-blocking collective drawn over the boxes? */
    for (int r = 0; r < L->g->world_size && !beside; r++)
        for (int i = L->first[r]; i < L->first[r + 1]; i++)
            beside |= L->ev[i].step == L->step && L->ev[i].kind == TT_EV_COMM &&
                      L->ev[i].peer == TT_PEER_BESIDE;
    if (beside)
        fprintf(f, "<text x=\"%d\" y=\"%d\">thin strip over a row: an all-reduce beside "
                   "compute (non-blocking, no link contention modelled)</text>\n",
                L->v > 1 ? 34 : 12 + 170, ly + 20 * (L->v > 1));
    if (L->v > 1)
        fprintf(f, "<text x=\"%d\" y=\"%d\">%d chunks per stage: the stage's chunk i is drawn "
                   "lighter as i grows (which global chunks each stage holds: the start-up "
                   "lines, `pipeline: ... stage s: ...`)</text>\n",
                12 + 170, ly, L->v);
    fprintf(f, "</g>\n");
}

int tt_trace_write_svg(const char *path, const tt_grid *g, const tt_event *ev, const int *counts,
                       int step, tt_err *e)
{
    tt_svg_layout L;
    tt_svg_layout_measure(&L, g, ev, counts, step);
    tt_outfile o;
    if (tt_outfile_open(&o, path, "timeline", e) != 0) {
        tt_svg_layout_free(&L);
        return -1;
    }
    write_heading(o.f, &L);
    write_bands(o.f, &L);
    write_axis(o.f, &L);
    for (int r = 0; r < g->world_size; r++)
        write_row(o.f, &L, r);
    if (L.empty)
        fprintf(o.f, "<text x=\"%d\" y=\"%d\" font-size=\"14\" text-anchor=\"middle\" fill=\"#a00\">"
                     "no events recorded for step %d</text>\n",
                PLOT_X + L.plot_w / 2, TOP + L.plot_h / 2, step);
    write_legend(o.f, &L);
    fprintf(o.f, "</svg>\n");
    tt_svg_layout_free(&L);
    return tt_outfile_finish(&o, e);
}
