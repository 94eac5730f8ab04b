/* schedule_explain.c - a checked step told the way the papers draw it, on
 * their time steps (a forward fills one, a backward two, a transfer none):
 * an ASCII Gantt chart (one row per stage, one column per time step, cells
 * F3 / B3 for micro-batch 3, '.' idle), then the step narrated one time step
 * at a time ("Time step 3 / computing: g0 forward of micro-batch 2 on chunk 0
 * / communication: g0 -> g1 activations of micro-batch 2 / active GPUs
 * 75%"). Both read the start times of tt_schedule_textbook's simulation.
 *
 * Both renderers are driven by the label tables below, so a new action kind
 * (a zero-bubble schedule's weight-gradient W) is one row there, with the
 * letter it gets in the chart, its words and how many time steps it fills.
 * Output lines stay within EXPLAIN_WIDTH characters: long lists wrap, a wide
 * chart is cut into blocks of columns. */
#include "tt/parallel/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPLAIN_WIDTH 100

/* ---- the label tables ---------------------------------------------------- */

/* Actions that compute: each fills `steps` textbook time steps. */
typedef struct {
    tt_action_kind kind;
    char letter;      /* in the chart: F3 */
    const char *what; /* in the narration: "forward of micro-batch 3" */
    int steps;        /* time steps one takes on the papers' grid */
    const char *one;  /* in the legend: "a forward takes 1" */
} compute_label;

static const compute_label compute_labels[] = {
    {TT_ACT_FWD, 'F', "forward", 1, "a forward"},
    {TT_ACT_BWD, 'B', "backward", 2, "a backward"},
};
#define N_COMPUTE (int)(sizeof compute_labels / sizeof compute_labels[0])

/* Zero-bubble schedules split the backward in two halves of one step each:
 * B (the input gradient, what the previous stage waits for) and W (the
 * weight gradients, which can wait). Lists holding a W use this table. */
static const compute_label split_labels[] = {
    {TT_ACT_FWD, 'F', "forward", 1, "a forward"},
    {TT_ACT_BWD, 'B', "input gradient (B)", 1, "an input gradient (B)"},
    {TT_ACT_W, 'W', "weight gradients (W)", 1, "a weight-gradient pass (W)"},
};
#define N_SPLIT (int)(sizeof split_labels / sizeof split_labels[0])

static int lists_split(const tt_action_list *lists, int p)
{
    for (int s = 0; s < p; s++)
        for (int i = 0; i < lists[s].n; i++)
            if (lists[s].a[i].kind == TT_ACT_W)
                return 1;
    return 0;
}

/* Actions that send: what leaves, and which way the chunk index moves. */
typedef struct {
    tt_action_kind kind;
    const char *what;
    int chunk_step; /* the receiving chunk is chunk + this */
} send_label;

static const send_label send_labels[] = {
    {TT_ACT_SEND_ACT, "activations", +1},
    {TT_ACT_SEND_GRAD, "gradients", -1},
};
#define N_SEND (int)(sizeof send_labels / sizeof send_labels[0])

static const compute_label *compute_of(tt_action_kind k, int split)
{
    const compute_label *t = split ? split_labels : compute_labels;
    for (int i = 0, n = split ? N_SPLIT : N_COMPUTE; i < n; i++)
        if (t[i].kind == k)
            return &t[i];
    return NULL;
}

static const send_label *send_of(tt_action_kind k)
{
    for (int i = 0; i < N_SEND; i++)
        if (send_labels[i].kind == k)
            return &send_labels[i];
    return NULL;
}

static double steps_of(tt_action_kind k, int split)
{
    const compute_label *c = compute_of(k, split);
    return c ? c->steps : 0;
}

int tt_schedule_textbook(const tt_action_list *lists, int p, int m, int v, tt_sim_result *res,
                         tt_err *e)
{
    /* The checker's backward cost is B's and W's together (it halves it
     * between them when a list holds W). */
    const int split = lists_split(lists, p);
    return tt_schedule_check(lists, p, m, v, steps_of(TT_ACT_FWD, split),
                             steps_of(TT_ACT_BWD, split) + steps_of(TT_ACT_W, split), res, e);
}

void tt_schedule_legend(FILE *out, int split)
{
    const compute_label *t = split ? split_labels : compute_labels;
    char line[256];
    size_t len = (size_t)snprintf(line, sizeof line, "time steps as the papers draw them:");
    for (int i = 0, n = split ? N_SPLIT : N_COMPUTE; i < n && len < sizeof line; i++)
        len += (size_t)snprintf(line + len, sizeof line - len, "%s %s takes %d", i ? "," : "",
                                t[i].one, t[i].steps);
    if (len < sizeof line)
        snprintf(line + len, sizeof line - len, ", a transfer none");
    /* at most 100 characters a line, as the rest of --explain: cut after
     * the last comma that fits */
    char *rest = line;
    for (size_t width = 100; strlen(rest) > width; width = 99) { /* later lines: 1 indent */
        char *cut = rest + width - 1; /* the comma ends the line: at most width */
        while (cut > rest && *cut != ',')
            cut--;
        if (cut == rest)
            break;
        fprintf(out, "%.*s\n ", (int)(cut - rest + 1), rest);
        rest = cut + 1;
    }
    fprintf(out, "%s\n", rest);
}

/* Action i of stage s starts at time t (the simulation's times are whole
 * numbers on this grid; rounding guards against representation). */
static int start_of(const tt_sim_result *res, int s, int i)
{
    return (int)(res->start[s][i] + 0.5);
}

/* ---- wrapped lists ------------------------------------------------------- */

/* Items separated by `sep`, wrapped before EXPLAIN_WIDTH with an indent. */
typedef struct {
    FILE *out;
    int col, indent, items;
} wrap;

static void wrap_start(wrap *w, FILE *out, const char *head, int indent)
{
    w->out = out;
    w->indent = indent;
    w->items = 0;
    w->col = fprintf(out, "%s", head);
}

static void wrap_item(wrap *w, const char *sep, const char *text)
{
    /* Room is kept for one more separator: a line that wraps ends with it. */
    int len = (int)strlen(text), slen = (int)strlen(sep);
    if (w->items && w->col + 2 * slen + 1 + len > EXPLAIN_WIDTH) {
        fprintf(w->out, "%s\n%*s", sep[0] == ' ' ? "" : sep, w->indent, "");
        w->col = w->indent;
    } else {
        w->col += fprintf(w->out, "%s ", w->items ? sep : "");
    }
    w->col += fprintf(w->out, "%s", text);
    w->items++;
}

/* ---- the Gantt chart ----------------------------------------------------- */

/* A cell's text: letter, micro-batch, and with interleaving the chunk. */
static void cell_text(char *buf, size_t n, const compute_label *c, const tt_action *a, int v)
{
    if (v > 1)
        snprintf(buf, n, "%c%dc%d", c->letter, a->mb, a->chunk);
    else
        snprintf(buf, n, "%c%d", c->letter, a->mb);
}

void tt_schedule_gantt(FILE *out, const tt_action_list *lists, const tt_sim_result *res,
                       const char *const *names)
{
    const int p = res->p, span = (int)(res->span + 0.5);
    if (span <= 0)
        return;
    /* cells[s][t]: the label filling time step t + 1 on stage s, or "." */
    char(*cells)[16] = tt_calloc((size_t)p * (size_t)span, sizeof *cells);
    const int split = lists_split(lists, p);
    int cw = 1, nw = 4; /* cell and name widths; "time" heads the names */
    for (int s = 0; s < p; s++) {
        if ((int)strlen(names[s]) > nw)
            nw = (int)strlen(names[s]);
        for (int t = 0; t < span; t++)
            strcpy(cells[s * span + t], ".");
        for (int i = 0; i < lists[s].n; i++) {
            const tt_action *a = &lists[s].a[i];
            const compute_label *c = compute_of(a->kind, split);
            if (!c)
                continue;
            for (int k = 0, t0 = start_of(res, s, i); k < c->steps && t0 + k < span; k++) {
                cell_text(cells[s * span + t0 + k], sizeof cells[0], c, a, res->v);
                if ((int)strlen(cells[s * span + t0 + k]) > cw)
                    cw = (int)strlen(cells[s * span + t0 + k]);
            }
        }
    }
    char num[16];
    if ((int)snprintf(num, sizeof num, "%d", span) > cw)
        cw = (int)strlen(num);
    /* Columns per block so that a row fits in EXPLAIN_WIDTH. */
    int per = (EXPLAIN_WIDTH - nw) / (cw + 1);
    if (per < 1)
        per = 1;
    for (int t0 = 0; t0 < span; t0 += per) {
        int t1 = t0 + per < span ? t0 + per : span;
        if (t0)
            fprintf(out, "\n");
        fprintf(out, "%-*s", nw, "time");
        for (int t = t0; t < t1; t++)
            fprintf(out, " %*d", cw, t + 1);
        fprintf(out, "\n");
        for (int s = 0; s < p; s++) {
            fprintf(out, "%-*s", nw, names[s]);
            for (int t = t0; t < t1; t++)
                fprintf(out, " %*s", cw, cells[s * span + t]);
            fprintf(out, "\n");
        }
    }
    free(cells);
}

void tt_schedule_gantt_key(FILE *out, int v, int split)
{
    const compute_label *t = split ? split_labels : compute_labels;
    wrap w;
    wrap_start(&w, out, "key:", 2);
    char item[96];
    for (int i = 0, n = split ? N_SPLIT : N_COMPUTE; i < n; i++) {
        snprintf(item, sizeof item, "%c3%s = %s of micro-batch 3%s", t[i].letter,
                 v > 1 ? "c5" : "", t[i].what, v > 1 ? " on chunk 5" : "");
        wrap_item(&w, ",", item);
    }
    wrap_item(&w, ",", ". = idle");
    fprintf(out, "\n");
}

/* ---- the narration ------------------------------------------------------- */

/* "computing:" - every action filling step t (started at most its length
 * before); marks the stages that compute in busy[] and returns how many do. */
static int print_computing(FILE *out, const tt_action_list *lists, const tt_sim_result *res,
                           const char *const *names, int t, char *busy)
{
    int active = 0;
    const int split = lists_split(lists, res->p);
    wrap w;
    wrap_start(&w, out, "  computing:", 4);
    for (int s = 0; s < res->p; s++)
        for (int i = 0; i < lists[s].n; i++) {
            const tt_action *a = &lists[s].a[i];
            const compute_label *c = compute_of(a->kind, split);
            int k = c ? t - 1 - start_of(res, s, i) : -1; /* which of its steps this is */
            if (!c || k < 0 || k >= c->steps)
                continue;
            char item[160], part[40] = "";
            if (c->steps > 1)
                snprintf(part, sizeof part, " (part %d of %d)", k + 1, c->steps);
            snprintf(item, sizeof item, "%s %s of micro-batch %d on chunk %d%s", names[s], c->what,
                     a->mb, a->chunk, part);
            wrap_item(&w, ";", item);
            if (!busy[s]) {
                busy[s] = 1;
                active++;
            }
        }
    if (!w.items)
        fprintf(out, " nothing");
    fprintf(out, "\n");
    return active;
}

/* "communication:" - the sends issued at the end of step t. */
static void print_communication(FILE *out, const tt_action_list *lists,
                                const tt_sim_result *res, const char *const *names, int t)
{
    wrap w;
    wrap_start(&w, out, "  communication:", 4);
    for (int s = 0; s < res->p; s++)
        for (int i = 0; i < lists[s].n; i++) {
            const tt_action *a = &lists[s].a[i];
            const send_label *l = send_of(a->kind);
            if (!l || start_of(res, s, i) != t)
                continue;
            char item[160];
            int n = snprintf(item, sizeof item, "%s -> %s %s of micro-batch %d", names[s],
                             names[a->peer], l->what, a->mb);
            /* which boundary is crossed; zb-v's turn joins two chunks of one GPU */
            if (res->v > 1 && n > 0 && (size_t)n < sizeof item)
                snprintf(item + n, sizeof item - (size_t)n, " (chunk %d -> %d%s)", a->chunk,
                         a->chunk + l->chunk_step, a->peer == s ? ", a copy on the GPU" : "");
            wrap_item(&w, ";", item);
        }
    if (!w.items)
        fprintf(out, " none");
    fprintf(out, "\n");
}

/* "active GPUs N%:" - the busy ones, then the idle ones in brackets. */
static void print_active(FILE *out, int p, const char *const *names, const char *busy,
                         int active)
{
    char head[48];
    snprintf(head, sizeof head, "  active GPUs %d%%:", (100 * active + p / 2) / p);
    wrap w;
    wrap_start(&w, out, head, 4);
    for (int s = 0; s < p; s++)
        if (busy[s])
            wrap_item(&w, ",", names[s]);
    if (active < p) {
        int first = 1;
        for (int s = 0; s < p; s++)
            if (!busy[s]) {
                char item[64];
                snprintf(item, sizeof item, "%s%s", first ? "(idle: " : "", names[s]);
                wrap_item(&w, first ? "" : "", item);
                first = 0;
            }
        fprintf(out, ")");
    }
    fprintf(out, "\n");
}

void tt_schedule_explain(FILE *out, const tt_action_list *lists, const tt_sim_result *res,
                         const char *const *names)
{
    int p = res->p, steps = (int)(res->span + 0.5);
    char *busy = tt_calloc((size_t)p, 1);
    for (int t = 1; t <= steps; t++) {
        fprintf(out, "Time step %d\n", t);
        for (int s = 0; s < p; s++)
            busy[s] = 0;
        int active = print_computing(out, lists, res, names, t, busy);
        print_communication(out, lists, res, names, t);
        print_active(out, p, names, busy, active);
    }
    free(busy);
}
