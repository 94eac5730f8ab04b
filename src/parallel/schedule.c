/* schedule.c - the pipeline schedules' registry: one row per schedule (its
 * name, action-list builder, bubble formula, memory bound, placement, the
 * arguments it accepts). The builders are in schedule_build.c, checking a
 * set of lists in schedule_check.c and schedule_sim.c, narrating a checked
 * step in schedule_explain.c.
 *
 * A schedule is only an order of compute actions per stage. The sends and
 * receives are derived from it mechanically: a receive sits immediately
 * before the compute that needs the data, a send immediately after the
 * compute that produced it. With non-blocking sends and blocking receives
 * that placement adds no waiting beyond the data dependencies themselves, so
 * the lists deadlock only if the compute order does (any other placement -
 * receiving earlier or sending later - can only add waits). tt_schedule_check
 * does not trust this argument: it simulates every list. */
#include "schedule_internal.h"
#include "tt/parallel/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the bubble each schedule's theory predicts ------------------------- */

/* Only one stage is ever busy. */
static double bubble_one_at_a_time(int p, int m, int v)
{
    return (double)(p - 1) / p;
}

/* A fill of p - 1 stage-times and a drain of as many around m micro-batches. */
static double bubble_fill_drain(int p, int m, int v)
{
    return (double)(p - 1) / (m + p - 1);
}

/* The same fill and drain, but in chunk-times, 1/v of a stage-time. */
static double bubble_interleaved(int p, int m, int v)
{
    return (double)(p - 1) / ((double)v * m + p - 1);
}

/* ZB-H1 with the papers' unit costs F = B = W = 1 (doc/pipeline.md derives
 * the general (p-1)(T_F + max(T_B - T_W, 0)) of idle time): p - 1 idle units
 * around 3m of work. */
static double bubble_zb_h1(int p, int m, int v)
{
    return (double)(p - 1) / (3.0 * m + p - 1);
}

/* ZB-V with F = B = W = 1 per chunk: doc/pipeline.md gives each stage
 * (p-1) max(T_B, 2(T_B - T_W)) idle time units when T_F <= T_B, T_W <= T_B and
 * m >= 2p-2: here p - 1, around 2 chunks x 3 units of work per micro-batch. */
static double bubble_zb_v(int p, int m, int v)
{
    return (double)(p - 1) / (6.0 * m + p - 1);
}

/* ---- how much each schedule holds --------------------------------------- */

static int min_int(int a, int b) { return a < b ? a : b; }

static int held_one(int p, int m, int v, int s) { return 1; }
static int held_all(int p, int m, int v, int s) { return m; }
static int held_1f1b(int p, int m, int v, int s) { return min_int(p - s, m); }
static int held_interleaved(int p, int m, int v, int s)
{
    return min_int((p - s - 1) * 2 + (v - 1) * p + 1, v * m);
}
static int held_zb_h1(int p, int m, int v, int s) { return min_int(p, m); }
static int held_zb_v(int p, int m, int v, int s) { return 2 * min_int(p, m); }

/* ---- the fewest micro-batches ------------------------------------------- */

static int at_least_p(int p) { return p; }
/* The V's fill and drain are hidden behind the other chunk's work only from
 * 2(p-1) micro-batches on (doc/pipeline.md). */
static int at_least_2p_2(int p) { return p > 1 ? 2 * (p - 1) : 1; }

/* ---- the registry ------------------------------------------------------- */

typedef struct {
    const char *name;    /* as --schedule takes it */
    const char *about;   /* one line for help texts */
    void (*build)(tt_builder *b, int s);
    double (*bubble)(int p, int m, int v); /* idle fraction the theory predicts */
    const char *formula; /* that bubble as the report prints it */
    int many_chunks;     /* 0: one chunk per stage (v must be 1); 1: v >= 2 chunks per
                            stage, placed by `place` */
    int min_stages;      /* 2 when the schedule is pointless without a bubble */
    int m_multiple_of_p; /* micro-batches enter in groups of p */
    int split_w;         /* the backward runs as B and W (TT_ACT_W) */
    int (*held)(int p, int m, int v, int s); /* memory bound: (mb, chunk) pairs stage
                                                s holds at most */
    int (*min_m)(int p); /* the fewest micro-batches it runs with p stages (its
                            bubble formula assumes a full steady state); NULL: 1 */
    const char *min_m_is; /* that bound in words, for the refusal */
    tt_placement place;  /* where chunk k lives */
    int exact_v;         /* 0: any v the other fields allow; else exactly this many
                            chunks per stage */
    int planned;         /* 1: --plan tries it without --schedule naming it */
} schedule_row;

/* One row per schedule; a row's index is its tt_schedule_kind. Adding a
 * schedule is one builder function in schedule_build.c (declared in
 * schedule_internal.h) plus one row here: append it, and give it a name in
 * tt_schedule_kind only if code has to refer to it. Parsing, the argument
 * rules, the default chunks per stage, the bubble report and the planner's
 * search read the rows (--help's and the man page's word lists are text,
 * which tests/test_flags.c compares with the rows). What else moves is said in doc/design.md section 13 ("Where to
 * add"). Every row is exercised by tests/test_pipeline.c's registry test. */
static const schedule_row rows[] = {
    [TT_SCHED_NAIVE] = {.name = "naive", .about = "one micro-batch at a time through the whole pipe",
                        .build = tt_build_naive, .bubble = bubble_one_at_a_time,
                        .formula = "(p-1)/p", .min_stages = 1, .held = held_one},
    [TT_SCHED_GPIPE] = {.name = "gpipe", .about = "all forwards, then all backwards",
                        .build = tt_build_gpipe, .bubble = bubble_fill_drain,
                        .formula = "(p-1)/(m + p-1)", .min_stages = 1, .held = held_all,
                        .planned = 1},
    [TT_SCHED_1F1B] = {.name = "1f1b", .about = "warm-up, one forward one backward, cool-down",
                       .build = tt_build_1f1b, .bubble = bubble_fill_drain,
                       .formula = "(p-1)/(m + p-1)", .min_stages = 1, .held = held_1f1b,
                       .planned = 1},
    [TT_SCHED_INTERLEAVED] = {.name = "interleaved",
                              .about = "1F1B over v chunks per stage (Megatron-LM)",
                              .build = tt_build_interleaved, .bubble = bubble_interleaved,
                              .formula = "(p-1)/(v m + p-1)", .many_chunks = 1,
                              .min_stages = 2, .m_multiple_of_p = 1, .held = held_interleaved,
                              .planned = 1},
    /* The zero-bubble schedules are planned only when asked for: their W
     * costs are an estimate (tt_plan_evaluate). */
    [TT_SCHED_ZB_H1] = {.name = "zb-h1",
                        .about = "1F1B with B and W apart, W filling the cool-down (zero bubble)",
                        .build = tt_build_zb_h1, .bubble = bubble_zb_h1,
                        .formula = "(p-1)/(3m + p-1)", .min_stages = 1, .split_w = 1,
                        .held = held_zb_h1,
                        .min_m = at_least_p,
                        .min_m_is = "as many micro-batches as pipeline stages"},
    [TT_SCHED_ZB_V] = {.name = "zb-v",
                       .about = "two chunks per stage in a V, B and W apart (zero bubble)",
                       .build = tt_build_zb_v, .bubble = bubble_zb_v,
                       .formula = "(p-1)/(6m + p-1)", .many_chunks = 1, .min_stages = 2,
                       .split_w = 1, .held = held_zb_v, .min_m = at_least_2p_2,
                       .min_m_is = "2(pp-1) micro-batches, which hide the V's fill and drain",
                       .place = TT_PLACE_V, .exact_v = 2},
};

enum { N_ROWS = (int)(sizeof rows / sizeof rows[0]) };

static const schedule_row *row_of(tt_schedule_kind kind)
{
    return (unsigned)kind < N_ROWS ? &rows[kind] : NULL;
}

int tt_schedule_count(void) { return N_ROWS; }

int tt_schedule_parse(const char *name)
{
    if (!name)
        return -1;
    /* Papers write 1F1B and GPipe: any case is accepted. */
    for (int k = 0; k < N_ROWS; k++)
        if (strcasecmp(name, rows[k].name) == 0)
            return k;
    return -1;
}

const char *tt_schedule_name(tt_schedule_kind kind)
{
    const schedule_row *r = row_of(kind);
    return r ? r->name : "unknown";
}

const char *tt_schedule_about(tt_schedule_kind kind)
{
    const schedule_row *r = row_of(kind);
    return r ? r->about : "unknown schedule";
}

const char *tt_schedule_formula(tt_schedule_kind kind)
{
    const schedule_row *r = row_of(kind);
    return r ? r->formula : "?";
}

tt_placement tt_schedule_placement(tt_schedule_kind kind)
{
    const schedule_row *r = row_of(kind);
    return r ? r->place : TT_PLACE_LOOP;
}

tt_schedule_kind tt_schedule_as_run(tt_schedule_kind kind, int p, int v)
{
    return p == 1 && v == 1 ? TT_SCHED_1F1B : kind;
}

int tt_schedule_splits_w(tt_schedule_kind kind)
{
    const schedule_row *r = row_of(kind);
    return r ? r->split_w : 0;
}

int tt_schedule_held_bound(tt_schedule_kind kind, int p, int m, int v, int s)
{
    const schedule_row *r = row_of(kind);
    return r ? r->held(p, m, tt_schedule_chunks_per_stage(kind, v), s) : 0;
}

int tt_schedule_check_bound(tt_schedule_kind kind, const tt_sim_result *res, tt_err *e)
{
    for (int s = 0; s < res->p; s++) {
        int bound = tt_schedule_held_bound(kind, res->p, res->m, res->v, s);
        if (res->peak_held[s] > bound)
            return tt_fail(e,
                           "stage %d holds the activations of %d (micro-batch, chunk) pairs "
                           "at once, more than the %s schedule's bound of %d",
                           s, res->peak_held[s], tt_schedule_name(kind), bound);
    }
    return 0;
}

int tt_schedule_chunks_per_stage(tt_schedule_kind kind, int v)
{
    const schedule_row *r = row_of(kind);
    return r && r->many_chunks ? v : 1;
}

int tt_schedule_default_v(tt_schedule_kind kind)
{
    const schedule_row *r = row_of(kind);
    if (!r || !r->many_chunks)
        return 1;
    return r->exact_v ? r->exact_v : 2; /* the fewest that interleave */
}

int tt_schedule_planned(tt_schedule_kind kind)
{
    const schedule_row *r = row_of(kind);
    return r ? r->planned : 0;
}

const char *tt_schedule_names(char *buf, size_t n)
{
    size_t len = 0;
    if (n)
        buf[0] = 0;
    for (int k = 0; k < N_ROWS && len < n; k++) {
        const char *sep = k == 0 ? "" : k == N_ROWS - 1 ? " or " : ", ";
        int w = snprintf(buf + len, n - len, "%s%s", sep, rows[k].name);
        if (w < 0)
            break;
        len += (size_t)w;
    }
    return buf;
}

double tt_bubble_theory(tt_schedule_kind kind, int p, int m, int v)
{
    const schedule_row *r = row_of(kind);
    return r ? r->bubble(p, m, v) : 0.0;
}

/* The chunks per stage a schedule runs, apart from the layout: checked again
 * by tt_config_check before any layout is chosen, because the layout's rule
 * (pp x v chunks <= --layers) would otherwise count chunks the schedule
 * refuses anyway, and suggest a --layers that does not help. */
int tt_schedule_validate_chunks(tt_schedule_kind kind, int v, tt_err *e)
{
    const schedule_row *r = row_of(kind);
    if (!r)
        return 0; /* tt_schedule_validate_args names it */
    const char *name = r->name;
    if (!r->many_chunks && v != 1)
        return tt_fail(e,
                       "pipeline schedule %s runs one chunk per stage (got v = %d); "
                       "use v = 1, or the interleaved schedule for v > 1",
                       name, v);
    if (r->exact_v && v != r->exact_v)
        return tt_fail(e,
                       "the %s schedule runs exactly %d chunks per stage (got v = %d); "
                       "leave --virtual-stages out, or give %d",
                       name, r->exact_v, v, r->exact_v);
    if (r->many_chunks && v < 2)
        return tt_fail(e,
                       "the %s schedule needs v >= 2 chunks per stage (got v = %d); "
                       "use v >= 2, or the 1f1b schedule for one chunk per stage",
                       name, v);
    return 0;
}

/* The rules of a row. The hints name the schedule to use instead; the checks
 * run in the order a user fixes them: stages and micro-batches, then chunks. */
int tt_schedule_validate_args(tt_schedule_kind kind, int p, int m, int v, tt_err *e)
{
    const schedule_row *r = row_of(kind);
    if (!r) {
        char names[128];
        return tt_fail(e, "unknown pipeline schedule %d (use %s)", (int)kind,
                       tt_schedule_names(names, sizeof names));
    }
    const char *name = r->name;
    if (p < 1)
        return tt_fail(e, "pipeline schedule %s needs at least 1 stage (got pp = %d)", name, p);
    if (m < 1)
        return tt_fail(e, "pipeline schedule %s needs at least 1 micro-batch (got %d)", name, m);
    if (tt_schedule_validate_chunks(kind, v, e))
        return -1;
    /* p >= 1 holds here, so failing min_stages = 2 means one stage. */
    if (p < r->min_stages)
        return tt_fail(e,
                       "the %s schedule needs at least %d pipeline stages (got pp = %d); "
                       "with one stage there is no bubble to shrink, use 1f1b",
                       name, r->min_stages, p);
    if (r->min_m && m < r->min_m(p))
        return tt_fail(e,
                       "the %s schedule needs at least %s (got %d micro-batch%s, pp = %d); "
                       "use %d or more micro-batches",
                       name, r->min_m_is, m, m == 1 ? "" : "es", p, r->min_m(p));
    if (r->m_multiple_of_p && m % p != 0) {
        int lo = m / p * p, hi = lo + p;
        if (lo == 0)
            return tt_fail(e,
                           "the %s schedule needs the micro-batches (%d) to be a "
                           "multiple of the pipeline stages (pp = %d); use %d micro-batches",
                           name, m, p, hi);
        return tt_fail(e,
                       "the %s schedule needs the micro-batches (%d) to be a multiple "
                       "of the pipeline stages (pp = %d); use %d or %d micro-batches",
                       name, m, p, lo, hi);
    }
    return 0;
}

void tt_schedule_build(tt_action_list *out, tt_schedule_kind kind, int p, int m, int v,
                       int stage)
{
    out->n = out->cap = 0;
    out->a = NULL;
    out->place = TT_PLACE_LOOP;
    const schedule_row *r = row_of(kind);
    if (!r)
        return;
    int per_stage = tt_schedule_chunks_per_stage(kind, v);
    out->place = r->place;
    tt_builder b = {out, p, per_stage, p * per_stage, m, r->place};
    r->build(&b, stage);
}

void tt_action_list_free(tt_action_list *l)
{
    if (!l)
        return;
    free(l->a);
    l->a = NULL;
    l->n = l->cap = 0;
}
