/* trace_svg_layout.h - the geometry and colours of the SVG timeline, and its
 * layout: everything trace_svg.c needs to know before writing a byte (the
 * SVG element states the chart's final width and height up front, and those
 * depend on the events and on how the legend wraps).
 *
 * Internal to the library (not installed): trace_svg_layout.c measures,
 * trace_svg.c draws. */
#ifndef TT_SHOW_TRACE_SVG_LAYOUT_H
#define TT_SHOW_TRACE_SVG_LAYOUT_H

#include <string.h>
#include "tt/show/trace.h"

/* Fixed geometry, in SVG user units (pixels at 100%). */
enum {
    LABEL_W = 170,    /* row labels, right-aligned against the plot */
    PLOT_X = LABEL_W, /* the plot's left edge: time 0 of the step */
    IDLE_W = 96,      /* the idle fraction at the right of each row */
    ROW_H = 34,       /* row pitch */
    BOX_Y = 4,        /* compute boxes inside a row */
    BOX_H = 20,
    COMM_Y = 26,      /* the communication strip under the boxes */
    COMM_H = 5,
    BESIDE_Y = 0,     /* non-blocking collectives beside compute (the
                         overlapped DP all-reduce): a strip over the boxes */
    BESIDE_H = 3,
    TOP = 74,         /* title and the two lines of the guide above the plot */
};

/* ---------- colours: the legend and the boxes must agree ---------- */

typedef struct {
    unsigned char r, g, b;
} rgb;

static const rgb C_FWD = {0x5b, 0x8f, 0xd6}, C_BWD = {0xf2, 0x9b, 0x45}, C_OPT = {0x4d, 0x4d, 0x4d};
/* W (weight gradients) of a zero-bubble schedule, apart from B's orange. */
static const rgb C_W = {0xb8, 0x9b, 0x2e};
/* A wait for collectives started earlier (the overlapped DP all-reduce): a
 * box, because the GPU does nothing else meanwhile, in a pale shade of its
 * group's colour (DP red), so it reads as communication, not compute. */
static const rgb C_WAIT = {0xf0, 0xa8, 0xa8};
/* The oracle's work while the clock is paused (--clock wall only): pale
 * sand, apart from every colour of the GPUs' own work. */
static const rgb C_ORACLE = {0xe8, 0xdc, 0xb0};

/* A backward event that is a W (pipeline_run.c names them so). */
static inline int tt_event_is_w(const tt_event *x)
{
    return x->kind == TT_EV_BACKWARD && strcmp(x->name, "W") == 0;
}

/* A comm group's colour: TP purple, PP green, DP red, anything else grey. */
static inline rgb group_colour(const char *grp)
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
static inline rgb chunk_shade(rgb c, int i, int v)
{
    double t = v > 1 ? 0.55 * i / (v - 1) : 0.0;
    return (rgb){(unsigned char)(c.r + (255 - c.r) * t), (unsigned char)(c.g + (255 - c.g) * t),
                 (unsigned char)(c.b + (255 - c.b) * t)};
}

/* ---------- the layout ---------- */

typedef struct {
    rgb c;
    int strip;     /* drawn as a thin comm strip rather than a box */
    char text[96];
    double x;      /* left edge of the swatch */
    int line;      /* which line of the legend the entry wrapped to */
} legend_item;

typedef struct {
    const tt_grid *g;
    const tt_event *ev;
    int step;
    int *first;              /* ev[first[r] .. first[r+1]) are world rank r's */
    double *row_lo, *row_hi; /* each row's own extent within the step */
    double *busy;            /* each row's forward+backward seconds (not the
                                optimizer, not a wait: communication) */
    double *win_lo, *win_hi; /* the pipeline window of each row's DP replica:
                                its first forward to its last backward */
    double t_lo, t_hi;       /* the step over all rows: the common time axis */
    int empty;               /* no event of the step on any row */
    int max_boxes;           /* the most compute boxes on one row */
    int has_w;               /* a zero-bubble schedule: backwards are B and W apart */
    int has_wait;            /* a wait for the DP all-reduce drawn on some row */
    int has_oracle;          /* the oracle's paused work drawn on some row */
    int v;                   /* chunks per pipeline stage (the shades) */
    double span_ms, px_per_ms;
    int plot_w, plot_h, axis_y, legend_y, width, height;
    legend_item items[32];   /* 3 x 8 compute shades, optimizer, wait, oracle,
                                4 groups */
    int n_items, last_line;
} tt_svg_layout;

/* Lays out the chart of `step` for the events of tt_trace_gather
 * (counts[r] of world rank r, in rank order). */
void tt_svg_layout_measure(tt_svg_layout *L, const tt_grid *g, const tt_event *ev,
                           const int *counts, int step);
void tt_svg_layout_free(tt_svg_layout *L);

#endif
