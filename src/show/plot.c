/* plot.c - loss curves as a self-contained SVG chart (--plot), rank 0 only.
 *
 * Each polyline carries the (step, loss) pairs it draws (data-points) beside
 * its points in pixels, and the group states the map from one to the other
 * (data-transform): so the file states the numbers it shows, and a test
 * reads them back, compares them with the CSV and checks each pixel against
 * the map. The pixels are plain SVG 1.1 for every renderer (drawn in data
 * coordinates under a transform, the strokes needed vector-effect, which
 * SVG 1.1 lacks: rsvg-convert stretched them over the whole chart). No
 * script, like the timeline (trace_svg.c). */
#define _POSIX_C_SOURCE 200809L /* fdopen */
#include "tt/show/plot.h"
#include "show/outfile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A series' legend line, "name (last 1.2345)", into buf; its length. */
static size_t legend_line(char *buf, size_t n, const tt_plot_series *sr)
{
    if (sr->n)
        snprintf(buf, n, "%s (last %.4f)", sr->name, sr->loss[sr->n - 1]);
    else
        snprintf(buf, n, "%s", sr->name);
    return strlen(buf);
}

/* One polyline of series k: the finite (step, y) pairs in pixels, and as
 * data-points the pairs themselves; the eval curve dashed. */
static void curve(FILE *f, const char *cls, int k, const char *c, const tt_plot_series *sr,
                  const double *y, double sx, double sy, double tx, double ty)
{
    fprintf(f, "<polyline class=\"%s\" data-series=\"%d\" fill=\"none\" stroke=\"%s\" "
               "stroke-width=\"1.6\"%s points=\"", cls, k, c,
            strcmp(cls, "eval") == 0 ? " stroke-dasharray=\"6 4\"" : "");
    int first = 1;
    for (long i = 0; i < sr->n; i++)
        if (isfinite(y[i])) {
            fprintf(f, "%s%.3f,%.3f", first ? "" : " ", tx + sx * (double)sr->step[i],
                    ty - sy * y[i]);
            first = 0;
        }
    fprintf(f, "\" data-points=\"");
    first = 1;
    for (long i = 0; i < sr->n; i++)
        if (isfinite(y[i])) {
            fprintf(f, "%s%ld,%.9g", first ? "" : " ", sr->step[i], y[i]);
            first = 0;
        }
    fprintf(f, "\"/>\n");
}

/* p with room for cap elements of size sz, the first n kept. */
static void *grow(void *p, long n, long cap, size_t sz)
{
    void *q = tt_malloc((size_t)cap * sz);
    if (n)
        memcpy(q, p, (size_t)n * sz);
    free(p);
    return q;
}

void tt_plot_add(tt_plot_series *s, long step, double loss, double eval)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->step = grow(s->step, s->n, s->cap, sizeof *s->step);
        s->loss = grow(s->loss, s->n, s->cap, sizeof *s->loss);
        s->eval = grow(s->eval, s->n, s->cap, sizeof *s->eval);
    }
    s->step[s->n] = step;
    s->loss[s->n] = loss;
    s->eval[s->n] = eval;
    s->n++;
}

void tt_plot_free(tt_plot_series *s)
{
    free(s->step);
    free(s->loss);
    free(s->eval);
    s->step = NULL;
    s->loss = s->eval = NULL;
    s->n = s->cap = 0;
}

/* The index of column `name` in a header line, or -1. */
static int column(const char *header, const char *name)
{
    int k = 0;
    size_t len = strlen(name);
    for (const char *p = header;; k++) {
        const char *end = p + strcspn(p, ",\r\n");
        if ((size_t)(end - p) == len && strncmp(p, name, len) == 0)
            return k;
        if (*end != ',')
            return -1;
        p = end + 1;
    }
}

/* Field k of a CSV line (no quoting: the log has none) into buf. */
static void field(const char *line, int k, char *buf, size_t n)
{
    const char *p = line;
    for (int i = 0; i < k && p; i++) {
        p = strchr(p, ',');
        if (p)
            p++;
    }
    size_t len = p ? strcspn(p, ",\r\n") : 0;
    if (len >= n)
        len = n - 1;
    memcpy(buf, p ? p : "", len);
    buf[len] = '\0';
}

int tt_plot_read_csv(const char *path, tt_plot_series *s, tt_err *e)
{
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", path);
    const char *why = NULL;
    FILE *f = tt_fopen_regular(path, "r", &why);
    if (!f)
        return tt_fail(e, "--plot: cannot read '%s': %s", path, why);
    char line[1024];
    int rc = 0, cs = -1, cl = -1, ce = -1;
    long lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        /* A line longer than the buffer would be read in pieces, each taken
         * for a line of its own (and the next one's number off by one). */
        if (!strchr(line, '\n') && !feof(f)) {
            rc = tt_fail(e, "--plot: '%s' line %ld is longer than %d bytes: not a --log row",
                         path, lineno, (int)sizeof line - 2);
            break;
        }
        if (lineno == 1) {
            cs = column(line, "step"), cl = column(line, "loss"), ce = column(line, "eval_loss");
            if (cs < 0 || cl < 0) {
                rc = tt_fail(e, "--plot: '%s' is not a --log CSV (its first line names no "
                                "step and loss columns)", path);
                break;
            }
            continue;
        }
        if (line[0] == '\n' || line[0] == '\0')
            continue;
        char a[64], b[64], c[64], *end;
        field(line, cs, a, sizeof a);
        field(line, cl, b, sizeof b);
        if (ce >= 0)
            field(line, ce, c, sizeof c);
        else
            c[0] = '\0';
        long step = strtol(a, &end, 10);
        int bad = a[0] == '\0' || *end != '\0';
        double loss = strtod(b, &end);
        bad |= b[0] == '\0' || *end != '\0';
        double ev = c[0] ? strtod(c, &end) : NAN;
        bad |= c[0] && *end != '\0';
        if (bad) {
            rc = tt_fail(e, "--plot: '%s' line %ld: expected a step and a loss, got '%.60s'",
                         path, lineno, strtok(line, "\r\n"));
            break;
        }
        tt_plot_add(s, step, loss, ev);
    }
    fclose(f);
    if (rc == 0 && s->n == 0)
        rc = tt_fail(e, "--plot: '%s' has no rows", path);
    if (rc)
        tt_plot_free(s);
    return rc;
}

/* A round tick spacing giving about `want` ticks over span. */
static double tick_step(double span, int want)
{
    double raw = span / want, mag = pow(10, floor(log10(raw)));
    double r = raw / mag;
    return mag * (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10);
}

/* How many multiples of step lie in [lo, hi]; at most 64 (a tick every
 * span/8 or so gives about ten). */
static long ticks(double lo, double hi, double step)
{
    long n = 0;
    for (double first = ceil(lo / step) * step; n < 64 && first + n * step <= hi; n++)
        ;
    return n;
}

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else if ((unsigned char)*s >= 0x20)
            fputc(*s, f);
    }
}

/* The plot area is W0 - LEFT - RIGHT0 wide; the image widens past W0 when
 * the legend's longest line needs it (LEGEND_CHAR: a generous width of one
 * character of its 11.5 px sans-serif). */
enum { W0 = 860, H = 480, LEFT = 70, RIGHT0 = 250, TOP = 44, BOTTOM = 56, LEGEND_X = 44 };
#define LEGEND_CHAR 7.0

int tt_plot_write_svg(const char *path, const tt_plot_series *s, int ns, tt_err *e)
{
    static const char *colour[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#17becf"};
    /* The data's extent over every series, losses and eval losses alike. */
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int k = 0; k < ns; k++)
        for (long i = 0; i < s[k].n; i++) {
            x0 = fmin(x0, (double)s[k].step[i]);
            x1 = fmax(x1, (double)s[k].step[i]);
            double v[2] = {s[k].loss[i], s[k].eval[i]};
            for (int j = 0; j < 2; j++)
                if (isfinite(v[j])) {
                    y0 = fmin(y0, v[j]);
                    y1 = fmax(y1, v[j]);
                }
        }
    if (!(x0 <= x1) || !(y0 <= y1))
        return tt_fail(e, "--plot: nothing to plot (no finite loss)");
    const double data_y0 = y0, data_y1 = y1;
    if (x1 == x0)
        x0 -= 0.5, x1 += 0.5;
    double pad = y1 > y0 ? 0.05 * (y1 - y0) : 0.5;
    y0 -= pad;
    y1 += pad;
    /* Steps or losses so large that their spread is lost in rounding (or
     * overflows) leave no scale to draw with; the tick loops below would
     * never advance. */
    if (!(x1 - x0 > 0) || !isfinite(x1 - x0) || !(y1 - y0 > 0) || !isfinite(y1 - y0))
        return tt_fail(e, "--plot: cannot draw steps %.6g to %.6g and losses %.6g to %.6g "
                          "(a range too large, or too narrow for its magnitude)",
                       x0, x1, data_y0, data_y1);
    const double pw = W0 - LEFT - RIGHT0, ph = H - TOP - BOTTOM;
    /* The legend's lines, "name (last 1.2345)", measured as printed. */
    size_t longest = 0;
    for (int k = 0; k < ns; k++) {
        char line[sizeof s[k].name + 48];
        size_t n = legend_line(line, sizeof line, &s[k]);
        longest = n > longest ? n : longest;
    }
    const int legend_w = LEGEND_X + (int)ceil(LEGEND_CHAR * (double)longest) + 12;
    const int W = LEFT + (int)pw + legend_w > W0 ? LEFT + (int)pw + legend_w : W0;
    const double sx = pw / (x1 - x0), sy = ph / (y1 - y0);

    tt_outfile o;
    if (tt_outfile_open(&o, path, "plot", e))
        return -1;
    FILE *f = o.f;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
               "<title>tiny_transformer loss against step</title>\n"
               "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
            W, H, W, H, W, H);
    fprintf(f, "<text x=\"%d\" y=\"26\" font-size=\"16\" font-weight=\"bold\" fill=\"#222\">"
               "Loss against step (solid: training loss; dashed with dots: eval loss)</text>\n",
            LEFT);
    /* Axes, grid and tick labels. */
    fprintf(f, "<rect class=\"area\" x=\"%d\" y=\"%d\" width=\"%g\" height=\"%g\" fill=\"none\" "
               "stroke=\"#444\"/>\n", LEFT, TOP, pw, ph);
    double dx = tick_step(x1 - x0, 8), dy = tick_step(y1 - y0, 6);
    if (dx < 1)
        dx = 1;
    /* Tick i at first + i * step, not a running sum: where the step is
     * below the values' rounding, a sum would never reach the end. */
    for (long i = 0, n = ticks(x0, x1 + 1e-9, dx); i < n; i++) {
        double t = ceil(x0 / dx) * dx + i * dx;
        double px = LEFT + (t - x0) * sx;
        fprintf(f, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%g\" stroke=\"#e4e4e4\"/>"
                   "<text x=\"%.2f\" y=\"%g\" font-size=\"11\" fill=\"#444\" "
                   "text-anchor=\"middle\">%g</text>\n",
                px, TOP, px, TOP + ph, px, TOP + ph + 16, t);
    }
    for (long i = 0, n = ticks(y0, y1 + 1e-12, dy); i < n; i++) {
        double t = ceil(y0 / dy) * dy + i * dy;
        double py = TOP + (y1 - t) * sy;
        fprintf(f, "<line x1=\"%d\" y1=\"%.2f\" x2=\"%g\" y2=\"%.2f\" stroke=\"#e4e4e4\"/>"
                   "<text x=\"%d\" y=\"%.2f\" font-size=\"11\" fill=\"#444\" "
                   "text-anchor=\"end\">%g</text>\n",
                LEFT, py, LEFT + pw, py, LEFT - 6, py + 4, t);
    }
    fprintf(f, "<text x=\"%g\" y=\"%d\" font-size=\"12\" fill=\"#222\" text-anchor=\"middle\">"
               "step</text>\n", LEFT + pw / 2, H - 14);
    fprintf(f, "<text x=\"16\" y=\"%g\" font-size=\"12\" fill=\"#222\" text-anchor=\"middle\" "
               "transform=\"rotate(-90 16 %g)\">loss (nats per byte)</text>\n",
            TOP + ph / 2, TOP + ph / 2);
    /* The curves: pixel = (tx + sx step, ty - sy loss), the map stated. */
    const double tx = LEFT - x0 * sx, ty = TOP + y1 * sy;
    fprintf(f, "<g class=\"curves\" data-transform=\"matrix(%.9g 0 0 %.9g %.9g %.9g)\">\n", sx,
            -sy, tx, ty);
    for (int k = 0; k < ns; k++) {
        int evals = 0;
        for (long i = 0; i < s[k].n; i++)
            evals += isfinite(s[k].eval[i]);
        curve(f, "loss", k, colour[k % 8], &s[k], s[k].loss, sx, sy, tx, ty);
        if (evals > 0)
            curve(f, "eval", k, colour[k % 8], &s[k], s[k].eval, sx, sy, tx, ty);
    }
    fprintf(f, "</g>\n");
    /* Eval points as dots. */
    for (int k = 0; k < ns; k++)
        for (long i = 0; i < s[k].n; i++)
            if (isfinite(s[k].eval[i]))
                fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"/>\n",
                        LEFT + (s[k].step[i] - x0) * sx, TOP + (y1 - s[k].eval[i]) * sy,
                        colour[k % 8]);
    /* The legend: one line a series, with its last loss. */
    for (int k = 0; k < ns; k++) {
        double y = TOP + 14 + 22 * k;
        fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" "
                   "stroke-width=\"2.5\"/>\n",
                LEFT + pw + 14, y, LEFT + pw + 38, y, colour[k % 8]);
        fprintf(f, "<text class=\"legend\" x=\"%g\" y=\"%g\" font-size=\"11.5\" fill=\"#222\">",
                LEFT + pw + 44, y + 4);
        char line[sizeof s[k].name + 48];
        legend_line(line, sizeof line, &s[k]);
        xml_text(f, line);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</svg>\n");
    return tt_outfile_finish(&o, e);
}
