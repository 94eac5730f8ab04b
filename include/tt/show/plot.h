/* tt/show/plot.h - loss curves as an SVG chart (--plot): the training loss
 * and the eval loss against the step, for this run or for several --log
 * CSVs overlaid, so layouts or settings can be compared at a glance. */
#ifndef TT_SHOW_PLOT_H
#define TT_SHOW_PLOT_H

#include "tt/core/common.h"

/* One run's curve: n steps, each with its loss, and the eval loss where one
 * was measured (NAN elsewhere). */
typedef struct {
    char name[128]; /* the legend's label: a CSV's path, or "this run" */
    long n, cap;
    long *step;
    double *loss, *eval;
} tt_plot_series;

/* Adds a point (grows the arrays). */
void tt_plot_add(tt_plot_series *s, long step, double loss, double eval);
void tt_plot_free(tt_plot_series *s);

/* Reads a --log CSV (its header names the columns; step, loss and eval_loss
 * are used). 0, or -1 with the file and line in e. */
int tt_plot_read_csv(const char *path, tt_plot_series *s, tt_err *e);

/* Writes the chart of ns series to path (under a temporary name, renamed at
 * the end). Each series is one polyline of its losses (class "loss") and
 * one of its eval losses (class "eval", where there are any), in its own
 * colour; both axes are linear and labelled. 0, or -1 with e. */
int tt_plot_write_svg(const char *path, const tt_plot_series *s, int ns, tt_err *e);

#endif
