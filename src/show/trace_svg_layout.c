/* trace_svg_layout.c - measuring the SVG timeline before it is drawn: the
 * step's extent on each row and over all rows, the plot's width and time
 * scale, and how the legend wraps (which sets the chart's height). */
#include "show/trace_svg_layout.h"

#include <math.h>
#include <stdlib.h>

/* Each row's extent and compute time within the step (its idle fraction),
 * and over all rows the step's extent, the widest row in boxes and the
 * number of chunks per stage. */
static void measure_rows(tt_svg_layout *L, const int *counts)
{
    const int W = L->g->world_size;
    L->first = tt_malloc((size_t)(W + 1) * sizeof(int));
    L->first[0] = 0;
    for (int r = 0; r < W; r++)
        L->first[r + 1] = L->first[r] + counts[r];
    L->row_lo = tt_malloc((size_t)W * sizeof(double));
    L->row_hi = tt_malloc((size_t)W * sizeof(double));
    L->busy = tt_calloc((size_t)W, sizeof(double));
    L->win_lo = tt_malloc((size_t)W * sizeof(double));
    L->win_hi = tt_malloc((size_t)W * sizeof(double));
    for (int r = 0; r < W; r++)
        L->win_lo[r] = INFINITY, L->win_hi[r] = -INFINITY;
    L->t_lo = INFINITY, L->t_hi = -INFINITY;
    L->max_boxes = 0, L->v = 1, L->has_w = 0, L->has_wait = 0, L->has_oracle = 0;
    for (int r = 0; r < W; r++) {
        L->row_lo[r] = INFINITY, L->row_hi[r] = -INFINITY;
        int boxes = 0;
        for (int i = L->first[r]; i < L->first[r + 1]; i++) {
            const tt_event *x = &L->ev[i];
            if (x->step != L->step)
                continue;
            L->row_lo[r] = fmin(L->row_lo[r], x->t0);
            L->row_hi[r] = fmax(L->row_hi[r], x->t1);
            /* A wait is drawn when it lasted (0 s: the rings had ended). */
            L->has_wait |= x->kind == TT_EV_WAIT && x->t1 > x->t0;
            L->has_oracle |= x->kind == TT_EV_PAUSED && x->t1 > x->t0;
            /* Only forwards and backwards are busy: a wait is communication. */
            if (x->kind == TT_EV_FORWARD || x->kind == TT_EV_BACKWARD) {
                L->busy[r] += x->t1 - x->t0;
                L->win_lo[r] = fmin(L->win_lo[r], x->t0);
                L->win_hi[r] = fmax(L->win_hi[r], x->t1);
                boxes++;
                L->has_w |= tt_event_is_w(x);
                if (x->chunk >= 0 && x->chunk / L->g->pp + 1 > L->v)
                    L->v = x->chunk / L->g->pp + 1;
            }
        }
        L->t_lo = fmin(L->t_lo, L->row_lo[r]);
        L->t_hi = fmax(L->t_hi, L->row_hi[r]);
        if (boxes > L->max_boxes)
            L->max_boxes = boxes;
    }
    /* The bubble's window (design.md section 12) is the pipeline's, shared by
     * every GPU of one DP replica: DP sync, clipping and the optimizer come
     * after it and are not idle time of the schedule. */
    for (int d = 0; d < L->g->dp; d++) {
        double lo = INFINITY, hi = -INFINITY;
        for (int r = 0; r < W; r++)
            if (tt_grid_dp_of(L->g, r) == d)
                lo = fmin(lo, L->win_lo[r]), hi = fmax(hi, L->win_hi[r]);
        for (int r = 0; r < W; r++)
            if (tt_grid_dp_of(L->g, r) == d)
                L->win_lo[r] = lo, L->win_hi[r] = hi;
    }
}

/* The plot's width and time scale, and where the axis and legend go. */
static void scale_plot(tt_svg_layout *L)
{
    L->empty = !(L->t_hi > L->t_lo);
    L->span_ms = L->empty ? 1.0 : (L->t_hi - L->t_lo) * 1e3;
    /* About 40 units per compute box leaves room for a two-digit micro-batch
     * number in the forwards (a third of a forward+backward pair) once the
     * bubble takes its share; clamped so small runs are not cramped and big
     * ones stay on a screen (a browser zooms the viewBox further). */
    int plot_w = L->max_boxes * 40;
    L->plot_w = plot_w < 900 ? 900 : plot_w > 2000 ? 2000 : plot_w;
    L->px_per_ms = L->plot_w / L->span_ms;
    L->plot_h = L->g->world_size * ROW_H;
    L->axis_y = TOP + L->plot_h;
    L->legend_y = L->axis_y + 44;
    L->width = LABEL_W + L->plot_w + IDLE_W + 10;
}

static legend_item *add_legend_item(tt_svg_layout *L, rgb c, int strip)
{
    legend_item *it = &L->items[L->n_items++];
    it->c = c;
    it->strip = strip;
    return it;
}

/* A group's legend entry: "other communication: loss and norm all-reduce"
 * with the purposes of the step's named calls in
 * the group (the strip's label is drawn only where it fits), ", others"
 * when unnamed calls share the colour. */
static void name_group(const tt_svg_layout *L, legend_item *it, const char *grp)
{
    size_t n = (size_t)snprintf(it->text, sizeof it->text, "%s communication", grp);
    const char *seen[4];
    int k = 0, unnamed = 0;
    for (int i = 0; i < L->first[L->g->world_size]; i++) {
        const tt_event *x = &L->ev[i];
        if (x->step != L->step || x->kind != TT_EV_COMM || strcmp(x->group, grp) != 0)
            continue;
        int j = 0;
        while (j < k && strcmp(seen[j], x->purpose) != 0)
            j++;
        if (!x->purpose[0])
            unnamed = 1;
        else if (j == k && k < 4)
            seen[k++] = x->purpose;
    }
    for (int j = 0; j < k && n < sizeof it->text; j++)
        n += (size_t)snprintf(it->text + n, sizeof it->text - n, "%s%s", j ? ", " : ": ",
                              seen[j]);
    if (k && unnamed && n < sizeof it->text)
        snprintf(it->text + n, sizeof it->text - n, ", others");
}

/* The legend's entries, wrapped into lines across the chart's width; the
 * number of lines sets the chart's height. At most eight shades a kind of
 * compute (forward, B or backward, W) are listed, which is what bounds
 * items[]. */
static void lay_out_legend(tt_svg_layout *L)
{
    /* not static: C_FWD and the others are objects, which a static
     * initializer may not name in standard C (gcc allows it, clang not) */
    const rgb base[3] = {C_FWD, C_BWD, C_W};
    L->n_items = 0;
    for (int k = 0; k < (L->has_w ? 3 : 2); k++)
        for (int i = 0; i < L->v && i < 8; i++) {
            legend_item *it = add_legend_item(L, chunk_shade(base[k], i, L->v), 0);
            const char *what = k == 0 ? "forward"
                               : k == 2 ? "W (weight gradients)"
                               : L->has_w ? "B (input gradient)" : "backward";
            if (L->v > 1)
                snprintf(it->text, sizeof it->text, "%s, stage's chunk %d", what, i);
            else
                snprintf(it->text, sizeof it->text, "%s", what);
        }
    snprintf(add_legend_item(L, C_OPT, 0)->text, sizeof L->items[0].text,
             "optimizer (gradient norm; clip + AdamW)");
    if (L->has_wait)
        snprintf(add_legend_item(L, C_WAIT, 0)->text, sizeof L->items[0].text,
                 "DP all-reduce (wait)");
    if (L->has_oracle)
        snprintf(add_legend_item(L, C_ORACLE, 0)->text, sizeof L->items[0].text,
                 "oracle (--validate or spot check; clocks paused)");
    const char *groups[] = {"TP", "PP", "DP", "other"};
    for (int k = 0; k < 4; k++)
        name_group(L, add_legend_item(L, group_colour(groups[k]), 1), groups[k]);
    /* Text width estimated at 0.57 em per character: no font metrics in
     * plain SVG, so this errs on the wide side. */
    int line = 0;
    for (int k = 0, lx = 12; k < L->n_items; k++) {
        int w = 22 + (int)(6.6 * strlen(L->items[k].text)) + 18;
        if (lx + w > L->width - 10)
            lx = 12, line++;
        L->items[k].x = lx, L->items[k].line = line;
        lx += w;
    }
    L->last_line = line;
    L->height = L->legend_y + (line + 2) * 20 + 8;
}

void tt_svg_layout_measure(tt_svg_layout *L, const tt_grid *g, const tt_event *ev,
                           const int *counts, int step)
{
    memset(L, 0, sizeof *L);
    L->g = g, L->ev = ev, L->step = step;
    measure_rows(L, counts);
    scale_plot(L);
    lay_out_legend(L);
}

void tt_svg_layout_free(tt_svg_layout *L)
{
    free(L->first), free(L->row_lo), free(L->row_hi), free(L->busy);
    free(L->win_lo), free(L->win_hi);
    L->first = NULL, L->row_lo = L->row_hi = L->busy = L->win_lo = L->win_hi = NULL;
}
