/* pipeline.c - pipeline schedules as data: building each stage's action list
 * (naive, GPipe, 1F1B, interleaved 1F1B), proving a set of lists correct and
 * deadlock-free by simulating them together, the bubble the theory predicts,
 * and a textbook-style narration of the simulated step.
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

#include <stdlib.h>
#include <string.h>

/* ---- names -------------------------------------------------------------- */

static const char *const kind_names[] = {"naive", "gpipe", "1f1b", "interleaved"};

int tt_schedule_parse(const char *name)
{
    if (!name)
        return -1;
    for (int k = 0; k < 4; k++)
        if (strcmp(name, kind_names[k]) == 0)
            return k;
    return -1;
}

const char *tt_schedule_name(tt_schedule_kind kind)
{
    return (unsigned)kind < 4 ? kind_names[kind] : "unknown";
}

int tt_schedule_validate_args(tt_schedule_kind kind, int p, int m, int v, tt_err *e)
{
    if ((unsigned)kind >= 4)
        return tt_fail(e, "unknown pipeline schedule %d (use naive, gpipe, 1f1b or interleaved)",
                       (int)kind);
    const char *name = kind_names[kind];
    if (p < 1)
        return tt_fail(e, "pipeline schedule %s needs at least 1 stage (got pp = %d)", name, p);
    if (m < 1)
        return tt_fail(e, "pipeline schedule %s needs at least 1 micro-batch (got %d)", name, m);
    if (kind != TT_SCHED_INTERLEAVED) {
        if (v != 1)
            return tt_fail(e,
                           "pipeline schedule %s runs one chunk per stage (got v = %d); "
                           "use v = 1, or the interleaved schedule for v > 1",
                           name, v);
        return 0;
    }
    if (v < 2)
        return tt_fail(e,
                       "the interleaved schedule needs v >= 2 chunks per stage (got v = %d); "
                       "use v >= 2, or the 1f1b schedule for one chunk per stage",
                       v);
    if (p < 2)
        return tt_fail(e,
                       "the interleaved schedule needs at least 2 pipeline stages (got pp = %d); "
                       "with one stage there is no bubble to shrink, use 1f1b",
                       p);
    if (m % p != 0) {
        int lo = m / p * p, hi = lo + p;
        if (lo == 0)
            return tt_fail(e,
                           "the interleaved schedule needs the micro-batches (%d) to be a "
                           "multiple of the pipeline stages (pp = %d); use %d micro-batches",
                           m, p, hi);
        return tt_fail(e,
                       "the interleaved schedule needs the micro-batches (%d) to be a multiple "
                       "of the pipeline stages (pp = %d); use %d or %d micro-batches",
                       m, p, lo, hi);
    }
    return 0;
}

double tt_bubble_theory(tt_schedule_kind kind, int p, int m, int v)
{
    switch (kind) {
    case TT_SCHED_NAIVE: return (double)(p - 1) / p;
    case TT_SCHED_GPIPE:
    case TT_SCHED_1F1B: return (double)(p - 1) / (m + p - 1);
    case TT_SCHED_INTERLEAVED: return (double)(p - 1) / ((double)v * m + p - 1);
    }
    return 0.0;
}

/* ---- building the lists ------------------------------------------------- */

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

/* The list builder: it knows the geometry (p stages, C = p*v chunks, chunk k on
 * stage k % p) and wraps each compute in the communication it needs. */
typedef struct {
    tt_action_list *out;
    int p, C;
} builder;

/* Forward of (mb, chunk): the input activation comes from the previous chunk
 * (none for chunk 0, which reads the tokens); the output goes to the next
 * chunk (none for the last, which computes the loss and so starts the
 * backward itself). */
static void fwd(builder *b, int mb, int k)
{
    if (k > 0)
        push(b->out, TT_ACT_RECV_ACT, mb, k, (k - 1) % b->p);
    push(b->out, TT_ACT_FWD, mb, k, -1);
    if (k < b->C - 1)
        push(b->out, TT_ACT_SEND_ACT, mb, k, (k + 1) % b->p);
}

/* Backward of (mb, chunk): the output gradient comes from the next chunk (the
 * last chunk has it from its own loss); the input gradient goes to the
 * previous chunk (chunk 0 ends in the embeddings, nothing to send). */
static void bwd(builder *b, int mb, int k)
{
    if (k < b->C - 1)
        push(b->out, TT_ACT_RECV_GRAD, mb, k, (k + 1) % b->p);
    push(b->out, TT_ACT_BWD, mb, k, -1);
    if (k > 0)
        push(b->out, TT_ACT_SEND_GRAD, mb, k, (k - 1) % b->p);
}

/* Naive: one micro-batch at a time. The stage does F then B of each
 * micro-batch; it cannot backward mb until the gradient came back through
 * every later stage, and the next forward waits behind that backward, so only
 * one stage is ever busy: idle fraction (p-1)/p. */
static void build_naive(builder *b, int m, int s)
{
    for (int mb = 0; mb < m; mb++) {
        fwd(b, mb, s);
        bwd(b, mb, s);
    }
}

/* GPipe: all forwards, then all backwards in reverse order (the last
 * micro-batch forwarded is the first whose gradient arrives from the last
 * stage). Every stage holds the activations of all m micro-batches. */
static void build_gpipe(builder *b, int m, int s)
{
    for (int mb = 0; mb < m; mb++)
        fwd(b, mb, s);
    for (int mb = m - 1; mb >= 0; mb--)
        bwd(b, mb, s);
}

/* 1F1B (PipeDream-flush, Megatron's non-interleaved schedule). Same bubble as
 * GPipe, but a micro-batch's backward starts as soon as its gradient can
 * arrive, so stage s never holds more than p - s micro-batches. */
static void build_1f1b(builder *b, int m, int s)
{
    int p = b->p;
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

static void build_interleaved(builder *b, int m, int v, int s)
{
    int p = b->p, total = m * v;
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

void tt_schedule_build(tt_action_list *out, tt_schedule_kind kind, int p, int m, int v,
                       int stage)
{
    out->n = out->cap = 0;
    out->a = NULL;
    builder b = {out, p, p * (kind == TT_SCHED_INTERLEAVED ? v : 1)};
    switch (kind) {
    case TT_SCHED_NAIVE: build_naive(&b, m, stage); break;
    case TT_SCHED_GPIPE: build_gpipe(&b, m, stage); break;
    case TT_SCHED_1F1B: build_1f1b(&b, m, stage); break;
    case TT_SCHED_INTERLEAVED: build_interleaved(&b, m, v, stage); break;
    }
}

void tt_action_list_free(tt_action_list *l)
{
    if (!l)
        return;
    free(l->a);
    l->a = NULL;
    l->n = l->cap = 0;
}

/* ---- checking by simulation --------------------------------------------- */

static void describe(char *buf, size_t n, const tt_action *a)
{
    switch (a->kind) {
    case TT_ACT_FWD: snprintf(buf, n, "forward mb%d chunk %d", a->mb, a->chunk); break;
    case TT_ACT_BWD: snprintf(buf, n, "backward mb%d chunk %d", a->mb, a->chunk); break;
    case TT_ACT_SEND_ACT:
        snprintf(buf, n, "send activations of mb%d chunk %d to stage %d", a->mb, a->chunk,
                 a->peer);
        break;
    case TT_ACT_RECV_ACT:
        snprintf(buf, n, "receive activations of mb%d chunk %d from stage %d", a->mb, a->chunk,
                 a->peer);
        break;
    case TT_ACT_SEND_GRAD:
        snprintf(buf, n, "send gradients of mb%d chunk %d to stage %d", a->mb, a->chunk,
                 a->peer);
        break;
    case TT_ACT_RECV_GRAD:
        snprintf(buf, n, "receive gradients of mb%d chunk %d from stage %d", a->mb, a->chunk,
                 a->peer);
        break;
    default: snprintf(buf, n, "action of unknown kind %d", (int)a->kind); break;
    }
}

/* Where each (mb, chunk) event sits: the index in the owning stage's list, or
 * -1. The owning stage is chunk % p, so the index alone locates the action. */
enum { T_FWD, T_BWD, T_SACT, T_RACT, T_SGRAD, T_RGRAD, T_N };

typedef struct {
    int p, m, C;
    int *at[T_N]; /* [mb * C + chunk] */
} event_table;

static int table_of(tt_action_kind k)
{
    switch (k) {
    case TT_ACT_FWD: return T_FWD;
    case TT_ACT_BWD: return T_BWD;
    case TT_ACT_SEND_ACT: return T_SACT;
    case TT_ACT_RECV_ACT: return T_RACT;
    case TT_ACT_SEND_GRAD: return T_SGRAD;
    case TT_ACT_RECV_GRAD: return T_RGRAD;
    }
    return -1;
}

/* Pass 1: every field in range, every action on the stage that owns its
 * chunk, peers right, no event twice. Fills the table. */
static int check_fields(const tt_action_list *lists, event_table *t, tt_err *e)
{
    int p = t->p, m = t->m, C = t->C;
    char d[160];
    for (int s = 0; s < p; s++) {
        for (int i = 0; i < lists[s].n; i++) {
            const tt_action *a = &lists[s].a[i];
            int tab = table_of(a->kind);
            if (tab < 0)
                return tt_fail(e, "stage %d action %d: unknown action kind %d", s, i,
                               (int)a->kind);
            describe(d, sizeof d, a);
            if (a->mb < 0 || a->mb >= m)
                return tt_fail(e, "stage %d action %d (%s): micro-batch outside 0..%d", s, i, d,
                               m - 1);
            if (a->chunk < 0 || a->chunk >= C)
                return tt_fail(e, "stage %d action %d (%s): chunk outside 0..%d", s, i, d, C - 1);
            if (a->chunk % p != s)
                return tt_fail(e, "stage %d action %d (%s): chunk %d lives on stage %d", s, i, d,
                               a->chunk, a->chunk % p);
            int k = a->chunk, want;
            switch (a->kind) {
            case TT_ACT_FWD:
            case TT_ACT_BWD: want = -1; break;
            case TT_ACT_RECV_ACT:
                if (k == 0)
                    return tt_fail(e, "stage %d action %d (%s): chunk 0 reads the tokens, it "
                                      "receives no activations", s, i, d);
                want = (k - 1) % p;
                break;
            case TT_ACT_SEND_GRAD:
                if (k == 0)
                    return tt_fail(e, "stage %d action %d (%s): chunk 0 has no previous chunk "
                                      "to send gradients to", s, i, d);
                want = (k - 1) % p;
                break;
            case TT_ACT_SEND_ACT:
                if (k == C - 1)
                    return tt_fail(e, "stage %d action %d (%s): the last chunk computes the "
                                      "loss, it sends no activations", s, i, d);
                want = (k + 1) % p;
                break;
            default: /* TT_ACT_RECV_GRAD */
                if (k == C - 1)
                    return tt_fail(e, "stage %d action %d (%s): the last chunk gets its "
                                      "gradient from the loss, it receives none", s, i, d);
                want = (k + 1) % p;
                break;
            }
            if (a->peer != want)
                return tt_fail(e, "stage %d action %d (%s): peer should be %s%d", s, i, d,
                               want < 0 ? "" : "stage ", want);
            int *slot = &t->at[tab][a->mb * C + k];
            if (*slot >= 0)
                return tt_fail(e, "stage %d action %d (%s) appears twice (also action %d)", s,
                               i, d, *slot);
            *slot = i;
        }
    }
    return 0;
}

/* Pass 2: the order within a stage respects the data dependencies, and every
 * send meets a receive on the peer (and vice versa). */
static int check_order(const tt_action_list *lists, const event_table *t, tt_err *e)
{
    int p = t->p, m = t->m, C = t->C;
    char d[160];
    for (int s = 0; s < p; s++) {
        for (int i = 0; i < lists[s].n; i++) {
            const tt_action *a = &lists[s].a[i];
            int k = a->chunk, id = a->mb * C + k;
            describe(d, sizeof d, a);
            switch (a->kind) {
            case TT_ACT_FWD: {
                int r = k > 0 ? t->at[T_RACT][id] : -1;
                if (k > 0 && r < 0)
                    return tt_fail(e, "stage %d action %d (%s): its input activations are "
                                      "never received", s, i, d);
                if (k > 0 && r > i)
                    return tt_fail(e, "stage %d action %d (%s) comes before the receive of its "
                                      "input activations (action %d)", s, i, d, r);
                if (t->at[T_BWD][id] < 0)
                    return tt_fail(e, "stage %d action %d (%s) is never backwarded (no "
                                      "backward of mb%d chunk %d in the list)", s, i, d, a->mb, k);
                break;
            }
            case TT_ACT_BWD: {
                int f = t->at[T_FWD][id];
                if (f < 0)
                    return tt_fail(e, "stage %d action %d (%s): the micro-batch is never "
                                      "forwarded through this chunk", s, i, d);
                if (f > i)
                    return tt_fail(e, "stage %d action %d (%s) comes before its forward "
                                      "(action %d)", s, i, d, f);
                int r = k < C - 1 ? t->at[T_RGRAD][id] : -1;
                if (k < C - 1 && r < 0)
                    return tt_fail(e, "stage %d action %d (%s): its output gradient is never "
                                      "received", s, i, d);
                if (k < C - 1 && r > i)
                    return tt_fail(e, "stage %d action %d (%s) comes before the receive of its "
                                      "output gradient (action %d)", s, i, d, r);
                break;
            }
            case TT_ACT_SEND_ACT: {
                int f = t->at[T_FWD][id];
                if (f < 0 || f > i)
                    return tt_fail(e, "stage %d action %d (%s): sends activations %s", s, i, d,
                                   f < 0 ? "that are never computed" : "before computing them");
                if (t->at[T_RACT][id + 1] < 0)
                    return tt_fail(e, "stage %d action %d (%s) has no matching receive on "
                                      "stage %d", s, i, d, a->peer);
                break;
            }
            case TT_ACT_RECV_ACT:
                if (t->at[T_SACT][id - 1] < 0)
                    return tt_fail(e, "stage %d action %d (%s) has no matching send (of chunk "
                                      "%d on stage %d)", s, i, d, k - 1, a->peer);
                break;
            case TT_ACT_SEND_GRAD: {
                int b = t->at[T_BWD][id];
                if (b < 0 || b > i)
                    return tt_fail(e, "stage %d action %d (%s): sends gradients %s", s, i, d,
                                   b < 0 ? "that are never computed" : "before computing them");
                if (t->at[T_RGRAD][id - 1] < 0)
                    return tt_fail(e, "stage %d action %d (%s) has no matching receive on "
                                      "stage %d", s, i, d, a->peer);
                break;
            }
            case TT_ACT_RECV_GRAD:
                if (t->at[T_SGRAD][id + 1] < 0)
                    return tt_fail(e, "stage %d action %d (%s) has no matching send (of chunk "
                                      "%d on stage %d)", s, i, d, k + 1, a->peer);
                break;
            }
        }
    }
    /* Nothing forgotten: every (mb, chunk) is forwarded (and, by pass 2 above,
     * then backwarded) on its stage. */
    for (int mb = 0; mb < m; mb++)
        for (int k = 0; k < C; k++)
            if (t->at[T_FWD][mb * C + k] < 0)
                return tt_fail(e, "stage %d (%d actions): mb%d is never forwarded or "
                                  "backwarded through chunk %d", k % p, lists[k % p].n, mb, k);
    return 0;
}

/* Pass 3: run the lists together. Stage s is at item pc[s] at time clock[s].
 * Sends take no time and record when they were issued; a receive moves the
 * stage's clock to the issue time of its send, or blocks until that send has
 * been issued; a compute starts at the stage's clock and advances it. The
 * run is a dataflow network with fixed pairings, so the times do not depend
 * on the order in which the loop below visits the stages; a full sweep in
 * which no stage advances while some still have items is a deadlock. The
 * start time recorded for a receive is when it completes (the later of the
 * stage reaching it and its send being issued); for a send, when it is issued. */
static int simulate(const tt_action_list *lists, const event_table *t, double fc, double bc,
                    double **start, double *busy, int *peak, double *span, tt_err *e)
{
    int p = t->p, C = t->C, n_ev = t->m * C;
    double *sent_act = tt_malloc((size_t)n_ev * sizeof *sent_act);
    double *sent_grad = tt_malloc((size_t)n_ev * sizeof *sent_grad);
    int *pc = tt_calloc((size_t)p, sizeof *pc), *held = tt_calloc((size_t)p, sizeof *held);
    double *clock = tt_calloc((size_t)p, sizeof *clock);
    for (int i = 0; i < n_ev; i++)
        sent_act[i] = sent_grad[i] = -1.0;
    int rc = 0;
    for (;;) {
        int progressed = 0, left = 0;
        for (int s = 0; s < p; s++) {
            while (pc[s] < lists[s].n) {
                const tt_action *a = &lists[s].a[pc[s]];
                int id = a->mb * C + a->chunk;
                double ready = clock[s];
                if (a->kind == TT_ACT_RECV_ACT || a->kind == TT_ACT_RECV_GRAD) {
                    double when = a->kind == TT_ACT_RECV_ACT ? sent_act[id - 1] : sent_grad[id + 1];
                    if (when < 0)
                        break; /* blocked: the send has not been issued yet */
                    if (when > ready)
                        ready = when;
                }
                start[s][pc[s]] = ready;
                clock[s] = ready;
                switch (a->kind) {
                case TT_ACT_FWD:
                    clock[s] += fc;
                    busy[s] += fc;
                    if (++held[s] > peak[s])
                        peak[s] = held[s];
                    break;
                case TT_ACT_BWD:
                    clock[s] += bc;
                    busy[s] += bc;
                    held[s]--;
                    break;
                case TT_ACT_SEND_ACT: sent_act[id] = ready; break;
                case TT_ACT_SEND_GRAD: sent_grad[id] = ready; break;
                default: break;
                }
                pc[s]++;
                progressed = 1;
            }
            left += pc[s] < lists[s].n;
        }
        if (!left)
            break;
        if (!progressed) {
            /* Deadlock: every unfinished stage waits in a receive whose send
             * sits further down some other stage's list. Name them all. */
            char buf[512], d[160];
            size_t len = (size_t)snprintf(buf, sizeof buf, "deadlock:");
            for (int s = 0; s < p && len < sizeof buf; s++) {
                if (pc[s] >= lists[s].n)
                    continue;
                const tt_action *a = &lists[s].a[pc[s]];
                int id = a->mb * C + a->chunk;
                int sidx = a->kind == TT_ACT_RECV_ACT ? t->at[T_SACT][id - 1]
                                                      : t->at[T_SGRAD][id + 1];
                describe(d, sizeof d, a);
                len += (size_t)snprintf(buf + len, sizeof buf - len,
                                        "%s stage %d waits at action %d (%s) for stage %d's "
                                        "action %d, never reached",
                                        len > 9 ? ";" : "", s, pc[s], d, a->peer, sidx);
            }
            rc = tt_fail(e, "%s", buf);
            break;
        }
    }
    *span = 0.0;
    for (int s = 0; s < p; s++)
        if (clock[s] > *span)
            *span = clock[s];
    free(sent_act);
    free(sent_grad);
    free(pc);
    free(held);
    free(clock);
    return rc;
}

int tt_schedule_check(const tt_action_list *lists, int p, int m, int v, double fwd_cost,
                      double bwd_cost, tt_sim_result *res, tt_err *e)
{
    if (res)
        memset(res, 0, sizeof *res);
    if (p < 1 || m < 1 || v < 1)
        return tt_fail(e, "schedule check: need p >= 1, m >= 1, v >= 1 (got p = %d, m = %d, "
                          "v = %d)", p, m, v);
    event_table t = {p, m, p * v, {0}};
    size_t n_ev = (size_t)m * (size_t)t.C;
    for (int k = 0; k < T_N; k++) {
        t.at[k] = tt_malloc(n_ev * sizeof(int));
        for (size_t i = 0; i < n_ev; i++)
            t.at[k][i] = -1;
    }
    double **start = tt_calloc((size_t)p, sizeof *start);
    double *busy = tt_calloc((size_t)p, sizeof *busy);
    int *peak = tt_calloc((size_t)p, sizeof *peak);
    for (int s = 0; s < p; s++)
        start[s] = tt_calloc((size_t)lists[s].n, sizeof **start);
    double span = 0.0;
    int rc = check_fields(lists, &t, e);
    if (rc == 0)
        rc = check_order(lists, &t, e);
    if (rc == 0)
        rc = simulate(lists, &t, fwd_cost, bwd_cost, start, busy, peak, &span, e);
    for (int k = 0; k < T_N; k++)
        free(t.at[k]);
    if (rc == 0 && res) {
        res->p = p;
        res->m = m;
        res->v = v;
        res->start = start;
        res->span = span;
        res->busy = busy;
        res->peak_held = peak;
        return 0;
    }
    for (int s = 0; s < p; s++)
        free(start[s]);
    free(start);
    free(busy);
    free(peak);
    return rc;
}

void tt_sim_result_free(tt_sim_result *res)
{
    if (!res)
        return;
    if (res->start)
        for (int s = 0; s < res->p; s++)
            free(res->start[s]);
    free(res->start);
    free(res->busy);
    free(res->peak_held);
    memset(res, 0, sizeof *res);
}

/* ---- narration ---------------------------------------------------------- */

/* With unit costs a compute that starts at time t fills time step t + 1, and
 * the sends it triggers are issued at its end, time t + 1: those are the
 * step's communication, as in the textbook's "Time step N: Computing ...
 * Communication ... Active GPUs". */
void tt_schedule_explain(FILE *out, const tt_action_list *lists, const tt_sim_result *res,
                         const char *const *names)
{
    int p = res->p, steps = (int)(res->span + 0.5);
    char fallback[32];
#define NAME(s) (names ? names[s] : (snprintf(fallback, sizeof fallback, "stage%d", (s)), fallback))
    for (int t = 1; t <= steps; t++) {
        fprintf(out, "Time step %d\n  computing:", t);
        int active = 0, first = 1;
        char *busy = tt_calloc((size_t)p, 1);
        for (int s = 0; s < p; s++)
            for (int i = 0; i < lists[s].n; i++) {
                const tt_action *a = &lists[s].a[i];
                if ((a->kind != TT_ACT_FWD && a->kind != TT_ACT_BWD) ||
                    (int)(res->start[s][i] + 0.5) != t - 1)
                    continue;
                fprintf(out, "%s %s %s mb%d of chunk %d", first ? "" : ";", NAME(s),
                        a->kind == TT_ACT_FWD ? "forward" : "backward", a->mb, a->chunk);
                first = 0;
                if (!busy[s]) {
                    busy[s] = 1;
                    active++;
                }
            }
        if (first)
            fprintf(out, " nothing");
        fprintf(out, "\n  communication:");
        first = 1;
        for (int s = 0; s < p; s++)
            for (int i = 0; i < lists[s].n; i++) {
                const tt_action *a = &lists[s].a[i];
                if ((a->kind != TT_ACT_SEND_ACT && a->kind != TT_ACT_SEND_GRAD) ||
                    (int)(res->start[s][i] + 0.5) != t)
                    continue;
                int act = a->kind == TT_ACT_SEND_ACT;
                fprintf(out, "%s %s -> ", first ? "" : ";", NAME(s));
                fprintf(out, "%s %s of mb%d", NAME(a->peer), act ? "activations" : "gradients",
                        a->mb);
                if (res->v > 1) /* interleaved: say which chunk boundary is crossed */
                    fprintf(out, " (chunk %d -> %d)", a->chunk, act ? a->chunk + 1 : a->chunk - 1);
                first = 0;
            }
        if (first)
            fprintf(out, " none");
        fprintf(out, "\n  active GPUs %d%%:", (100 * active + p / 2) / p);
        first = 1;
        for (int s = 0; s < p; s++)
            if (busy[s]) {
                fprintf(out, "%s %s", first ? "" : ",", NAME(s));
                first = 0;
            }
        if (active < p) {
            fprintf(out, " (idle:");
            for (int s = 0; s < p; s++)
                if (!busy[s])
                    fprintf(out, " %s", NAME(s));
            fprintf(out, ")");
        }
        fprintf(out, "\n");
        free(busy);
    }
#undef NAME
}
