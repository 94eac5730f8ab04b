/* schedule.c - the pipeline schedules: one registry row per schedule (its
 * name, action-list builder, bubble formula, the arguments it accepts) and
 * the builders themselves. Checking a set of lists lives in schedule_check.c,
 * narrating a checked step in schedule_explain.c.
 *
 * A schedule is only an order of compute actions per stage. The sends and
 * receives are derived from it mechanically: a receive sits immediately
 * before the compute that needs the data, a send immediately after the
 * compute that produced it. With non-blocking sends and blocking receives
 * that placement adds no waiting beyond the data dependencies themselves, so
 * the lists deadlock only if the compute order does (any other placement -
 * receiving earlier or sending later - can only add waits). tt_schedule_check
 * does not trust this argument: it simulates every list. */
#include "tt/parallel/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- building blocks shared by every builder ---------------------------- */

/* What a builder knows: the geometry (p stages, K = p*v chunks placed by
 * `place`, m micro-batches) and the list it appends to. */
typedef struct {
    tt_action_list *out;
    int p, v, K, m;
    tt_placement place;
} builder;

int tt_chunk_stage(tt_placement place, int p, int k)
{
    /* V: the odd rounds of p chunks run back up the stages. */
    if (place == TT_PLACE_V && (k / p) % 2 == 1)
        return p - 1 - k % p;
    return k % p;
}

int tt_stage_chunk(tt_placement place, int p, int s, int j)
{
    return j * p + (place == TT_PLACE_V && j % 2 == 1 ? p - 1 - s : s);
}

static void push(tt_action_list *l, tt_action_kind kind, int mb, int chunk, int peer)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        tt_action *a = tt_malloc((size_t)l->cap * sizeof *a); /* aborts on OOM */
        if (l->n)
            memcpy(a, l->a, (size_t)l->n * sizeof *a);
        free(l->a);
        l->a = a;
    }
    l->a[l->n++] = (tt_action){kind, mb, chunk, peer};
}

/* Forward of (mb, chunk k): the input activation comes from the previous
 * chunk (none for chunk 0, which reads the tokens); the output goes to the
 * next chunk (none for the last, which computes the loss and so starts the
 * backward itself). */
static void fwd(builder *b, int mb, int k)
{
    if (k > 0)
        push(b->out, TT_ACT_RECV_ACT, mb, k, tt_chunk_stage(b->place, b->p, k - 1));
    push(b->out, TT_ACT_FWD, mb, k, -1);
    if (k < b->K - 1)
        push(b->out, TT_ACT_SEND_ACT, mb, k, tt_chunk_stage(b->place, b->p, k + 1));
}

/* Backward of (mb, chunk k): the output gradient comes from the next chunk
 * (the last chunk has it from its own loss); the input gradient goes to the
 * previous chunk (chunk 0 ends in the embeddings, nothing to send). */
static void bwd(builder *b, int mb, int k)
{
    if (k < b->K - 1)
        push(b->out, TT_ACT_RECV_GRAD, mb, k, tt_chunk_stage(b->place, b->p, k + 1));
    push(b->out, TT_ACT_BWD, mb, k, -1);
    if (k > 0)
        push(b->out, TT_ACT_SEND_GRAD, mb, k, tt_chunk_stage(b->place, b->p, k - 1));
}

/* W of (mb, chunk k): the weight gradients, from what B kept on this stage;
 * nothing travels. */
static void wgt(builder *b, int mb, int k) { push(b->out, TT_ACT_W, mb, k, -1); }

/* ---- the builders: stage s's compute order ------------------------------ */

/* Naive: one micro-batch at a time. The stage does F then B of each
 * micro-batch; it cannot backward mb until the gradient came back through
 * every later stage, and the next forward waits behind that backward, so only
 * one stage is ever busy: idle fraction (p-1)/p. */
static void build_naive(builder *b, int s)
{
    for (int mb = 0; mb < b->m; mb++) {
        fwd(b, mb, s);
        bwd(b, mb, s);
    }
}

/* GPipe: all forwards, then all backwards in reverse order (the last
 * micro-batch forwarded is the first whose gradient arrives from the last
 * stage). Every stage holds the activations of all m micro-batches. */
static void build_gpipe(builder *b, int s)
{
    for (int mb = 0; mb < b->m; mb++)
        fwd(b, mb, s);
    for (int mb = b->m - 1; mb >= 0; mb--)
        bwd(b, mb, s);
}

/* 1F1B (PipeDream-flush, Megatron's non-interleaved schedule). Same bubble as
 * GPipe, but a micro-batch's backward starts as soon as its gradient can
 * arrive, so stage s never holds more than p - s micro-batches. */
static void build_1f1b(builder *b, int s)
{
    int p = b->p, m = b->m;
    /* Warm-up: stage s forwards p - s - 1 micro-batches before the first
     * gradient can possibly reach it (the last stage needs none: it turns its
     * own forward into a backward at once). */
    int warmup = p - s - 1 < m ? p - s - 1 : m;
    int steady = m - warmup;
    for (int i = 0; i < warmup; i++)
        fwd(b, i, s);
    /* Steady state: one forward of a new micro-batch, then one backward of
     * the oldest one still held. */
    for (int i = 0; i < steady; i++) {
        fwd(b, warmup + i, s);
        bwd(b, i, s);
    }
    /* Cool-down: drain the warm-up's micro-batches. */
    for (int i = steady; i < m; i++)
        bwd(b, i, s);
}

/* Interleaved 1F1B (Megatron-LM): stage s holds v chunks s, s+p, s+2p, ...
 * The stage walks "virtual micro-batches" k = 0..m*v-1 in groups of p: p
 * micro-batches through local chunk 0, the same p through local chunk 1, ...,
 * then the next p micro-batches. A micro-batch crosses a stage v times, each
 * time on a chunk 1/v as long, so the fill and drain (the bubble) cost
 * (p-1) chunk-times instead of (p-1) stage-times. */
static void interleaved_step(int k, int p, int v, int *local, int *mb)
{
    *local = (k / p) % v;
    *mb = (k / (p * v)) * p + k % p;
}

static void build_interleaved(builder *b, int s)
{
    int p = b->p, v = b->v, total = b->m * v;
    /* Warm-up (Megatron's count): the (v-1)*p forwards of the other chunks
     * before the first chunk's work comes back around, plus two per stage
     * still ahead of s in the pipe. */
    int warmup = (p - s - 1) * 2 + (v - 1) * p;
    if (warmup > total)
        warmup = total;
    int steady = total - warmup;
    int j, mb;
    for (int k = 0; k < warmup; k++) {
        interleaved_step(k, p, v, &j, &mb);
        fwd(b, mb, j * p + s);
    }
    /* Steady state: forward of virtual micro-batch warmup + i, then the
     * backward of virtual micro-batch i, whose chunks run in reverse (the
     * gradient enters through the last chunk). */
    for (int i = 0; i < steady; i++) {
        interleaved_step(warmup + i, p, v, &j, &mb);
        fwd(b, mb, j * p + s);
        interleaved_step(i, p, v, &j, &mb);
        bwd(b, mb, (v - 1 - j) * p + s);
    }
    /* Cool-down: the backwards still owed for the warm-up's forwards. */
    for (int i = steady; i < total; i++) {
        interleaved_step(i, p, v, &j, &mb);
        bwd(b, mb, (v - 1 - j) * p + s);
    }
}

/* ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", the schedule
 * with 1F1B's memory): 1F1B's order of forwards and B's, with each W placed
 * after a B. Stage s lets its first s W's wait: the later a stage, the sooner
 * its B's must reach the stages before it, and a B without its W travels
 * back T_B per stage instead of T_B + T_W. The waiting W's then fill the
 * cool-down, where 1F1B idles for gradients. Stage s holds its p - s - 1
 * warm-up micro-batches, the one just forwarded and the s whose W waits: p at
 * most, as 1F1B's stage 0. */
static void build_zb_h1(builder *b, int s)
{
    int p = b->p, m = b->m;
    int warmup = p - s - 1 < m ? p - s - 1 : m;
    int steady = m - warmup, next_w = 0;
    for (int i = 0; i < warmup; i++)
        fwd(b, i, s);
    for (int i = 0; i < steady; i++) {
        fwd(b, warmup + i, s);
        bwd(b, i, s);
        if (i >= s)
            wgt(b, next_w++, s);
    }
    for (int i = steady; i < m; i++) {
        bwd(b, i, s);
        wgt(b, next_w++, s);
    }
    while (next_w < m)
        wgt(b, next_w++, s);
}

/* ZB-V (Qi et al., the V-shaped zero-bubble schedule): two chunks per stage,
 * placed in a V (stage s holds chunk d = s on the way down and u = 2p-1-s on
 * the way up, so stage 0 holds the embeddings and the loss and every stage
 * holds the same blocks' worth), B and W apart. Each stage counts how many
 * forwards, B's and W's of each of its chunks it has issued; the phases only
 * say which to issue next:
 *  1. the down leg: 2(p-s)-1 forwards of d - the time micro-batch 0 takes
 *     to cross the p-1-s stages below twice and come back to s on chunk u;
 *  2. s rounds of (forward of u, forward of d): while micro-batch 0 climbs
 *     the s stages above and its backward comes back down to s;
 *  3. p-s rounds of (forward of u, B and W of u): the backwards have begun;
 *  4. the steady state, one micro-batch of each chunk a round: F, B, W of d,
 *     then F, B, W of u, until every forward is issued;
 *  5. the drain: the B's still owed go first, their W's fill the time the
 *     stage would otherwise wait for gradients.
 * Stage s holds at most 2p (micro-batch, chunk) pairs, p micro-batches of
 * its two half-size chunks: 1F1B's memory. */
typedef struct {
    builder *b;
    int chunk[2];              /* d and u */
    int f[2], bw[2], w[2];     /* issued so far, per chunk */
} vstage;

static void v_fwd(vstage *v, int c)
{
    if (v->f[c] < v->b->m)
        fwd(v->b, v->f[c]++, v->chunk[c]);
}
static void v_b(vstage *v, int c)
{
    if (v->bw[c] < v->f[c])
        bwd(v->b, v->bw[c]++, v->chunk[c]);
}
static void v_w(vstage *v, int c)
{
    if (v->w[c] < v->bw[c])
        wgt(v->b, v->w[c]++, v->chunk[c]);
}

static void build_zb_v(builder *b, int s)
{
    const int p = b->p, m = b->m, D = 0, U = 1;
    vstage v = {b, {tt_stage_chunk(TT_PLACE_V, p, s, 0), tt_stage_chunk(TT_PLACE_V, p, s, 1)},
                {0, 0}, {0, 0}, {0, 0}};
    for (int i = 0; i < 2 * (p - s) - 1; i++)
        v_fwd(&v, D);
    for (int i = 0; i < s; i++) {
        v_fwd(&v, U);
        v_fwd(&v, D);
    }
    for (int i = 0; i < p - s; i++) {
        v_fwd(&v, U);
        v_b(&v, U);
        v_w(&v, U);
    }
    while (v.f[U] < m) {
        v_fwd(&v, D);
        v_b(&v, D);
        v_w(&v, D);
        v_fwd(&v, U);
        v_b(&v, U);
        v_w(&v, U);
    }
    /* The drain: s rounds of both chunks' B's, p-s of d's B with a W of u
     * behind it, then the W's left, alternating. */
    for (int i = 0; i < s; i++) {
        v_b(&v, D);
        v_b(&v, U);
    }
    for (int i = 0; i < p - s; i++) {
        v_b(&v, D);
        v_w(&v, U);
    }
    while (v.w[D] < m || v.w[U] < m) {
        int wd = v.w[D], wu = v.w[U];
        v_w(&v, D);
        v_w(&v, U);
        if (v.w[D] == wd && v.w[U] == wu)
            break; /* nothing more can be issued: the checker says what is missing */
    }
}

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
 * (p-1)(2 T_B - T_W) idle time units when T_F <= T_B, T_W <= T_B and
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
    void (*build)(builder *b, int s);
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
} schedule_row;

/* One row per schedule; a row's index is its tt_schedule_kind. Adding a
 * schedule is one builder function above plus one row here (append it, and
 * give it a name in tt_schedule_kind only if code has to refer to it). Every
 * row is exercised by tests/test_pipeline.c's registry test. */
static const schedule_row rows[] = {
    [TT_SCHED_NAIVE] = {"naive", "one micro-batch at a time through the whole pipe",
                        build_naive, bubble_one_at_a_time, "(p-1)/p", 0, 1, 0, 0, held_one},
    [TT_SCHED_GPIPE] = {"gpipe", "all forwards, then all backwards",
                        build_gpipe, bubble_fill_drain, "(p-1)/(m + p-1)", 0, 1, 0, 0,
                        held_all},
    [TT_SCHED_1F1B] = {"1f1b", "warm-up, one forward one backward, cool-down",
                       build_1f1b, bubble_fill_drain, "(p-1)/(m + p-1)", 0, 1, 0, 0, held_1f1b},
    [TT_SCHED_INTERLEAVED] = {"interleaved", "1F1B over v chunks per stage (Megatron-LM)",
                              build_interleaved, bubble_interleaved, "(p-1)/(v m + p-1)", 1, 2,
                              1, 0, held_interleaved},
    [TT_SCHED_ZB_H1] = {"zb-h1", "1F1B with B and W apart, W filling the cool-down (zero bubble)",
                        build_zb_h1, bubble_zb_h1, "(p-1)/(3m + p-1)", 0, 1, 0, 1, held_zb_h1,
                        at_least_p, "as many micro-batches as pipeline stages"},
    [TT_SCHED_ZB_V] = {"zb-v", "two chunks per stage in a V, B and W apart (zero bubble)",
                       build_zb_v, bubble_zb_v, "(p-1)/(6m + p-1)", 1, 2, 0, 1, held_zb_v,
                       at_least_2p_2, "2(pp-1) micro-batches, which hide the V's fill and drain",
                       TT_PLACE_V, 2},
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
    /* p >= 1 holds here, so failing min_stages = 2 means one stage. */
    if (p < r->min_stages)
        return tt_fail(e,
                       "the %s schedule needs at least %d pipeline stages (got pp = %d); "
                       "with one stage there is no bubble to shrink, use 1f1b",
                       name, r->min_stages, p);
    if (r->min_m && m < r->min_m(p))
        return tt_fail(e,
                       "the %s schedule needs at least %s (got %d micro-batches, pp = %d); "
                       "use %d or more micro-batches",
                       name, r->min_m_is, m, p, r->min_m(p));
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
    builder b = {out, p, per_stage, p * per_stage, m, r->place};
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
