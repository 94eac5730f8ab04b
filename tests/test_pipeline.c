/* test_pipeline.c - the pipeline schedules as data: every schedule for every
 * small (p, m, v) passes the simulation check, computes each (micro-batch,
 * chunk) forward and backward exactly once, and reaches the bubble and the
 * activation memory the theory predicts; the schedule registry's rows agree
 * with each other and with the simulation; broken lists (a missing receive, a
 * wrong order, a deadlock, ...) are rejected with a message that names the
 * problem; the narration reads like the textbook's; zb-h1 (B and W apart)
 * computes each F, B and W once, reaches its bubble formula for several cost
 * ratios, and the checker rejects a W before its B, a missing W and a list
 * over the schedule's memory bound. Single process, no MPI.
 *
 * K = p*v is the number of chunks, chunk k lives on stage k % p. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt/parallel/pipeline.h"
#include "tt/parallel/pipeline_run.h"

#include "check_run.h"

#define PMAX 8

static void build_all(tt_action_list *L, tt_schedule_kind kind, int p, int m, int v)
{
    for (int s = 0; s < p; s++)
        tt_schedule_build(&L[s], kind, p, m, v, s);
}

static void free_all(tt_action_list *L, int p)
{
    for (int s = 0; s < p; s++)
        tt_action_list_free(&L[s]);
}

/* Builds and checks one schedule; 0 on success (the message in e otherwise). */
static int run(tt_schedule_kind kind, int p, int m, int v, double fc, double bc,
               tt_sim_result *r, tt_err *e)
{
    tt_action_list L[PMAX];
    build_all(L, kind, p, m, v);
    int rc = tt_schedule_check(L, p, m, v, fc, bc, r, e);
    free_all(L, p);
    return rc;
}

/* The span the theory gives, in units of one chunk's forward fc and backward bc.
 * - naive: a micro-batch crosses p forwards and p backwards before the next
 *   one may start, so m * p * (fc + bc);
 * - gpipe: the last forward leaves stage p-1 at (m + p - 1) fc (m forwards on
 *   the last stage after a fill of p - 1); the backwards then drain the same
 *   way in reverse, reaching stage 0 after (m + p - 1) bc more;
 * - 1f1b: the last stage starts at (p - 1) fc, then alternates F and B with no
 *   gap (each new forward's input was sent during its previous pair), and the
 *   gradient of its final backward needs (p - 1) bc to reach stage 0:
 *   (p - 1) fc + m (fc + bc) + (p - 1) bc - the same as GPipe;
 * - interleaved: the same fill/drain argument over p*v chunks of one chunk-time
 *   each (Megatron-LM, Narayanan et al. 2021): m v (fc + bc) of work per stage
 *   plus a fill of (p - 1) fc and a drain of (p - 1) bc.
 * Every stage computes m v (fc + bc), so the idle fraction of every stage is
 * 1 - m v (fc + bc) / span, which is exactly tt_bubble_theory. */
static double theory_span(tt_schedule_kind kind, int p, int m, int v, double fc, double bc)
{
    switch (kind) {
    case TT_SCHED_NAIVE: return (double)m * p * (fc + bc);
    case TT_SCHED_GPIPE:
    case TT_SCHED_1F1B: return (double)(m + p - 1) * (fc + bc);
    case TT_SCHED_INTERLEAVED: return ((double)m * v + p - 1) * (fc + bc);
    }
    return -1;
}

/* Independently of the checker: each (mb, global chunk) is forwarded once and
 * backwarded once, on the stage that owns the chunk (chunk % p). */
static void count_compute(const tt_action_list *L, int p, int m, int v, const char *what)
{
    int K = p * v;
    int *nf = calloc((size_t)(m * K), sizeof *nf), *nb = calloc((size_t)(m * K), sizeof *nb);
    for (int s = 0; s < p; s++)
        for (int i = 0; i < L[s].n; i++) {
            const tt_action *a = &L[s].a[i];
            ck_assert_msg(a->chunk % p == s, "%s: stage %d holds action on chunk %d", what, s,
                          a->chunk);
            if (a->kind == TT_ACT_FWD)
                nf[a->mb * K + a->chunk]++;
            else if (a->kind == TT_ACT_BWD)
                nb[a->mb * K + a->chunk]++;
        }
    for (int i = 0; i < m * K; i++) {
        ck_assert_msg(nf[i] == 1, "%s: mb%d chunk %d forwarded %d times", what, i / K, i % K,
                      nf[i]);
        ck_assert_msg(nb[i] == 1, "%s: mb%d chunk %d backwarded %d times", what, i / K, i % K,
                      nb[i]);
    }
    free(nf);
    free(nb);
}

/* The most (mb, chunk) pairs stage s holds under interleaved 1F1B, worked
 * out from the list build_interleaved makes. The simulation's count goes up
 * at each forward and down at each backward, in list order, so only the
 * order matters, not the timing. Stage s first does the warm-up,
 *     W = min((p-s-1)*2 + (v-1)*p, m*v)
 * forwards with no backward (Megatron's count), holding W pairs. Then come
 * the m*v - W steady pairs, each one forward (W+1 held) followed by one
 * backward (W again); then the cool-down only backwards. So the peak is W+1
 * when there is a steady phase (W < m*v) and W = m*v when the warm-up takes
 * every forward: min((p-s-1)*2 + (v-1)*p + 1, m*v).
 * Example, p = 4, m = 8, v = 2 (m*v = 16): the warm-ups are 10, 8, 6, 4 for
 * stages 0..3, so the peaks are 11, 9, 7, 5; with m = 4 (m*v = 8) stages 0
 * and 1 forward all 8 pairs in their warm-up (8, 8) and stages 2, 3 reach
 * 6+1 = 7 and 4+1 = 5. */
static int interleaved_peak(int p, int m, int v, int s)
{
    int w = (p - s - 1) * 2 + (v - 1) * p + 1;
    return w < m * v ? w : m * v;
}

static void sweep(tt_schedule_kind kind)
{
    int vlo = kind == TT_SCHED_INTERLEAVED ? 2 : 1, vhi = kind == TT_SCHED_INTERLEAVED ? 4 : 1;
    int ran = 0;
    for (int p = 1; p <= PMAX; p++)
        for (int m = 1; m <= 16; m++)
            for (int v = vlo; v <= vhi; v++) {
                tt_err e;
                if (kind == TT_SCHED_INTERLEAVED && (p < 2 || m % p != 0)) {
                    ck_assert_int_eq(tt_schedule_validate_args(kind, p, m, v, &e), -1);
                    continue;
                }
                ck_assert_msg(tt_schedule_validate_args(kind, p, m, v, &e) == 0, "%s", e.msg);
                char what[96];
                snprintf(what, sizeof what, "%s p=%d m=%d v=%d", tt_schedule_name(kind), p, m, v);
                tt_action_list L[PMAX];
                build_all(L, kind, p, m, v);
                count_compute(L, p, m, v, what);
                tt_sim_result r;
                ck_assert_msg(tt_schedule_check(L, p, m, v, 1, 1, &r, &e) == 0, "%s: %s", what,
                              e.msg);
                ck_assert_int_eq(r.p, p);
                double span = theory_span(kind, p, m, v, 1, 1);
                ck_assert_msg(r.span == span, "%s: span %g, theory %g", what, r.span, span);
                double theory = tt_bubble_theory(kind, p, m, v);
                for (int s = 0; s < p; s++) {
                    ck_assert_msg(r.busy[s] == 2.0 * m * v, "%s: stage %d busy %g", what, s,
                                  r.busy[s]);
                    double idle = (r.span - r.busy[s]) / r.span;
                    ck_assert_msg(fabs(idle - theory) < 1e-12, "%s: stage %d idle %g, theory %g",
                                  what, s, idle, theory);
                    int want = kind == TT_SCHED_NAIVE  ? 1
                               : kind == TT_SCHED_GPIPE ? m
                               : kind == TT_SCHED_1F1B  ? (p - s < m ? p - s : m)
                                                        : interleaved_peak(p, m, v, s);
                    ck_assert_msg(r.peak_held[s] == want, "%s: stage %d peak held %d, want %d",
                                  what, s, r.peak_held[s], want);
                }
                tt_sim_result_free(&r);
                /* A backward twice as long as a forward: the same formulas hold. */
                ck_assert_msg(tt_schedule_check(L, p, m, v, 1, 2, &r, &e) == 0, "%s", e.msg);
                span = theory_span(kind, p, m, v, 1, 2);
                ck_assert_msg(r.span == span, "%s fc=1 bc=2: span %g, theory %g", what, r.span,
                              span);
                tt_sim_result_free(&r);
                free_all(L, p);
                ran++;
            }
    ck_assert_int_gt(ran, 0);
}

START_TEST(naive_all) { sweep(TT_SCHED_NAIVE); }
END_TEST
START_TEST(gpipe_all) { sweep(TT_SCHED_GPIPE); }
END_TEST
START_TEST(one_f_one_b_all) { sweep(TT_SCHED_1F1B); }
END_TEST
START_TEST(interleaved_all) { sweep(TT_SCHED_INTERLEAVED); }
END_TEST

/* The worked example above, as literal numbers (no formula in between). */
START_TEST(interleaved_peak_by_hand)
{
    static const struct {
        int m, peak[4];
    } cases[] = {{8, {11, 9, 7, 5}}, {4, {8, 8, 7, 5}}};
    for (int c = 0; c < 2; c++) {
        tt_sim_result r;
        tt_err e;
        ck_assert_msg(run(TT_SCHED_INTERLEAVED, 4, cases[c].m, 2, 1, 1, &r, &e) == 0, "%s",
                      e.msg);
        for (int s = 0; s < 4; s++)
            ck_assert_msg(r.peak_held[s] == cases[c].peak[s], "m=%d stage %d: peak %d, want %d",
                          cases[c].m, s, r.peak_held[s], cases[c].peak[s]);
        tt_sim_result_free(&r);
    }
}
END_TEST

/* Interleaving shrinks the bubble: with chunk costs 1/v of a stage (here the
 * 1F1B stage costs v and the interleaved chunk 1, to stay in integers) the
 * interleaved step is shorter for every m >= p. */
START_TEST(interleaved_beats_1f1b)
{
    for (int p = 2; p <= PMAX; p++)
        for (int m = p; m <= 16; m += p)
            for (int v = 2; v <= 4; v++) {
                tt_sim_result a, b;
                tt_err e;
                ck_assert_msg(run(TT_SCHED_1F1B, p, m, 1, v, v, &a, &e) == 0, "%s", e.msg);
                ck_assert_msg(run(TT_SCHED_INTERLEAVED, p, m, v, 1, 1, &b, &e) == 0, "%s", e.msg);
                ck_assert_msg(b.span < a.span, "p=%d m=%d v=%d: interleaved %g >= 1f1b %g", p, m,
                              v, b.span, a.span);
                /* Same work per stage, so the difference is all bubble. */
                ck_assert(a.busy[0] == b.busy[0]);
                tt_sim_result_free(&a);
                tt_sim_result_free(&b);
            }
}
END_TEST

/* ---- broken schedules ---------------------------------------------------- */

static int find(const tt_action_list *l, tt_action_kind kind, int mb)
{
    for (int i = 0; i < l->n; i++)
        if (l->a[i].kind == kind && l->a[i].mb == mb)
            return i;
    ck_abort_msg("action not found");
    return -1;
}

static void erase(tt_action_list *l, int i)
{
    memmove(&l->a[i], &l->a[i + 1], (size_t)(l->n - i - 1) * sizeof *l->a);
    l->n--;
}

static void insert(tt_action_list *l, int i, tt_action a)
{
    if (l->n == l->cap) {
        l->cap = 2 * l->cap + 1;
        l->a = realloc(l->a, (size_t)l->cap * sizeof *l->a);
    }
    memmove(&l->a[i + 1], &l->a[i], (size_t)(l->n - i) * sizeof *l->a);
    l->a[i] = a;
    l->n++;
}

/* The parts of an expected message that name action numbers, which only the
 * built lists know (unused ones stay empty). */
enum { NAT = 2, ATLEN = 160 };
typedef char at_text[NAT][ATLEN];

/* An action: the first of its kind and micro-batch on a stage (stage -1:
 * none). */
typedef struct {
    int stage;
    tt_action_kind kind;
    int mb;
} action_at;
#define NONE {-1, TT_ACT_FWD, 0}

/* The commonest fault, a missing action: `gone` erased; the message then
 * names `blamed` as "stage S action I", I counted after the erasure. */
static void erase_action(tt_action_list *L, action_at gone, action_at blamed, at_text at)
{
    erase(&L[gone.stage], find(&L[gone.stage], gone.kind, gone.mb));
    if (blamed.stage >= 0)
        snprintf(at[0], ATLEN, "stage %d action %d", blamed.stage,
                 find(&L[blamed.stage], blamed.kind, blamed.mb));
}

/* The other faults: each break_* plants one in freshly built lists and
 * writes the at[] parts of the message. */

static void break_duplicated_forward(tt_action_list *L, at_text at)
{
    int f = find(&L[0], TT_ACT_FWD, 0);
    insert(&L[0], f + 1, L[0].a[f]);
    snprintf(at[0], ATLEN, "stage 0 action %d", f + 1);
}

/* Swaps micro-batch mb's `first` action with its `second`, which must come
 * right after it; returns where `first` was. */
static int swap_adjacent(tt_action_list *l, tt_action_kind first, tt_action_kind second, int mb)
{
    int i = find(l, first, mb), j = find(l, second, mb);
    ck_assert_int_eq(j, i + 1);
    tt_action t = l->a[i];
    l->a[i] = l->a[j];
    l->a[j] = t;
    return i;
}

static void break_backward_before_forward(tt_action_list *L, at_text at)
{
    /* The last stage: ... FWD(2), BWD(2) ... becomes ... BWD(2), FWD(2) ... */
    int f = swap_adjacent(&L[1], TT_ACT_FWD, TT_ACT_BWD, 2);
    snprintf(at[0], ATLEN, "stage 1 action %d (backward mb2 chunk 1)", f);
    snprintf(at[1], ATLEN, "comes before its forward (action %d)", f + 1);
}

static void break_forward_before_its_input(tt_action_list *L, at_text at)
{
    int r = swap_adjacent(&L[1], TT_ACT_RECV_ACT, TT_ACT_FWD, 1);
    snprintf(at[0], ATLEN, "stage 1 action %d (forward mb1 chunk 1)", r);
    snprintf(at[1], ATLEN, "comes before the receive of its input activations (action %d)",
             r + 1);
}

static void break_deadlock(tt_action_list *L, at_text at)
{
    int r = find(&L[0], TT_ACT_RECV_GRAD, 0);
    tt_action a = L[0].a[r];
    erase(&L[0], r);
    insert(&L[0], 0, a);
    ck_assert_int_eq(L[1].a[0].kind, TT_ACT_RECV_ACT);
}

static void break_cross_stage_deadlock(tt_action_list *L, at_text at)
{
    for (int i = 0; i < L[1].n; i++)
        L[1].a[i].mb ^= 1; /* stage 1: mb1 then mb0 */
    snprintf(at[0], ATLEN, "stage 0 waits at action %d (receive gradients of mb0 chunk 0 "
             "from stage 1) for stage 1's action %d", find(&L[0], TT_ACT_RECV_GRAD, 0),
             find(&L[1], TT_ACT_SEND_GRAD, 0));
    snprintf(at[1], ATLEN, "stage 1 waits at action 0 (receive activations of mb1 chunk 1 "
             "from stage 0) for stage 0's action %d", find(&L[0], TT_ACT_SEND_ACT, 1));
}

static void break_wrong_peer(tt_action_list *L, at_text at)
{
    int i = find(&L[1], TT_ACT_SEND_ACT, 0);
    L[1].a[i].peer = 0;
    snprintf(at[0], ATLEN, "stage 1 action %d", i);
}

static void break_wrong_stage(tt_action_list *L, at_text at)
{
    int i = find(&L[2], TT_ACT_FWD, 1);
    L[2].a[i].chunk = 1;
    snprintf(at[0], ATLEN, "stage 2 action %d", i);
}

static void break_w_before_b(tt_action_list *L, at_text at)
{
    /* Stage 0 does W right after each B: move W(1) in front of B(1). */
    int b = find(&L[0], TT_ACT_BWD, 1), w = find(&L[0], TT_ACT_W, 1);
    ck_assert_int_gt(w, b);
    tt_action wa = L[0].a[w];
    erase(&L[0], w);
    insert(&L[0], b, wa);
    snprintf(at[0], ATLEN, "stage 0 action %d (W (weight gradients) mb1 chunk 0)", b);
}

/* A schedule (p stages, m micro-batches, one chunk each), the fault planted
 * in it (an erased action and the one the message blames, or a plant
 * function), the backward's cost in forwards (2 for the zero-bubble
 * schedules: B and W of 1 each), and the fixed strings the rejection must
 * hold besides the at[] parts. */
static const struct {
    const char *what;
    tt_schedule_kind kind;
    int p, m;
    double backward;
    action_at gone, blamed;
    void (*plant)(tt_action_list *L, at_text at);
    const char *want[6];
} REJECT[] = {
    {"missing backward", TT_SCHED_GPIPE, 2, 3, 1, {0, TT_ACT_BWD, 1}, {0, TT_ACT_FWD, 1}, NULL,
     {"forward mb1 chunk 0", "never backwarded"}},
    {"duplicated forward", TT_SCHED_GPIPE, 2, 3, 1, NONE, NONE, break_duplicated_forward,
     {"forward mb0 chunk 0", "twice"}},
    /* Missing receive: the send (or the backward that needs the gradient) is
     * left without its partner. */
    {"missing receive of activations", TT_SCHED_1F1B, 2, 3, 1, {1, TT_ACT_RECV_ACT, 1},
     {0, TT_ACT_SEND_ACT, 1}, NULL,
     {"send activations of mb1 chunk 0 to stage 1", "has no matching receive on stage 1"}},
    {"missing receive of a gradient", TT_SCHED_1F1B, 2, 3, 1, {0, TT_ACT_RECV_GRAD, 0},
     {0, TT_ACT_BWD, 0}, NULL, {"backward mb0 chunk 0", "its output gradient is never received"}},
    {"receive without send", TT_SCHED_1F1B, 2, 3, 1, {0, TT_ACT_SEND_ACT, 2},
     {1, TT_ACT_RECV_ACT, 2}, NULL,
     {"receive activations of mb2 chunk 1 from stage 0", "no matching send"}},
    {"backward before forward", TT_SCHED_GPIPE, 2, 3, 1, NONE, NONE,
     break_backward_before_forward, {NULL}},
    /* Wrong order, the other way round: a forward before the receive of its
     * input. */
    {"forward before its input", TT_SCHED_1F1B, 2, 3, 1, NONE, NONE,
     break_forward_before_its_input, {NULL}},
    /* Naive, 2 stages, 1 micro-batch; stage 0 first waits for the gradient
     * that stage 1 can only send after the activation stage 0 would send
     * later: each stage's first action is a receive from the other. */
    {"deadlock", TT_SCHED_NAIVE, 2, 1, 1, NONE, NONE, break_deadlock,
     {"deadlock", "stage 0 waits at action 0", "receive gradients of mb0 chunk 0 from stage 1",
      "stage 1 waits at action 0", "receive activations of mb0 chunk 1 from stage 0"}},
    /* A deadlock that no single list shows: each stage's order is fine on
     * its own (every receive before the compute that needs it), but stage 0
     * does mb0 first and stage 1 mb1 first. Stage 0 waits for mb0's
     * gradient, which stage 1 sends only after mb1, whose activations stage
     * 0 sends only after mb0's backward: only the simulation can catch it. */
    {"cross-stage deadlock", TT_SCHED_NAIVE, 2, 2, 1, NONE, NONE, break_cross_stage_deadlock,
     {"deadlock:"}},
    {"wrong peer", TT_SCHED_1F1B, 3, 2, 1, NONE, NONE, break_wrong_peer,
     {"peer should be stage 2"}},
    {"chunk on the wrong stage", TT_SCHED_1F1B, 3, 2, 1, NONE, NONE, break_wrong_stage,
     {"chunk 1 lives on stage 1"}},
    /* zb-h1 (F 1, backward 2 split 1 + 1). */
    {"W before its B", TT_SCHED_ZB_H1, 2, 3, 2, NONE, NONE, break_w_before_b,
     {"comes before its B"}},
    {"missing W", TT_SCHED_ZB_H1, 2, 3, 2, {1, TT_ACT_W, 2}, {1, TT_ACT_BWD, 2}, NULL,
     {"backward mb2 chunk 1", "never followed by its W"}},
    /* A W whose micro-batch has no B at all. */
    {"W without B", TT_SCHED_ZB_H1, 2, 3, 2, {0, TT_ACT_BWD, 0}, NONE, NULL, {"stage 0", "never"}},
};

/* Every planted fault is rejected (-1, nothing to free) with a message that
 * holds every expected string. */
START_TEST(reject_broken)
{
    for (size_t k = 0; k < sizeof REJECT / sizeof REJECT[0]; k++) {
        tt_action_list L[PMAX];
        at_text at = {{0}};
        build_all(L, REJECT[k].kind, REJECT[k].p, REJECT[k].m, 1);
        if (REJECT[k].plant)
            REJECT[k].plant(L, at);
        else
            erase_action(L, REJECT[k].gone, REJECT[k].blamed, at);
        tt_err e;
        tt_sim_result r;
        e.msg[0] = 0;
        ck_assert_msg(tt_schedule_check(L, REJECT[k].p, REJECT[k].m, 1, 1, REJECT[k].backward,
                                        &r, &e) == -1,
                      "%s: not rejected", REJECT[k].what);
        ck_assert_msg(r.start == NULL, "%s: a result to free after a failure", REJECT[k].what);
        for (int i = 0; i < NAT; i++)
            ck_assert_msg(!at[i][0] || strstr(e.msg, at[i]), "%s: message \"%s\" lacks \"%s\"",
                          REJECT[k].what, e.msg, at[i]);
        for (const char *const *w = REJECT[k].want; *w; w++)
            ck_assert_msg(strstr(e.msg, *w), "%s: message \"%s\" lacks \"%s\"", REJECT[k].what,
                          e.msg, *w);
        free_all(L, REJECT[k].p);
    }
}
END_TEST

/* ---- arguments, names, theory ------------------------------------------ */

START_TEST(arguments_and_names)
{
    tt_err e;
    ck_assert_int_eq(tt_schedule_validate_args(TT_SCHED_1F1B, 4, 8, 1, &e), 0);
    ck_assert_int_eq(tt_schedule_validate_args(TT_SCHED_INTERLEAVED, 4, 8, 2, &e), 0);
    ck_assert_int_eq(tt_schedule_validate_args(TT_SCHED_1F1B, 4, 8, 2, &e), -1);
    ck_assert(strstr(e.msg, "v = 2") && strstr(e.msg, "interleaved"));
    ck_assert_int_eq(tt_schedule_validate_args(TT_SCHED_INTERLEAVED, 4, 6, 2, &e), -1);
    ck_assert_msg(strstr(e.msg, "(6)") && strstr(e.msg, "pp = 4") && strstr(e.msg, "4 or 8"),
                  "%s", e.msg);
    ck_assert_int_eq(tt_schedule_validate_args(TT_SCHED_INTERLEAVED, 4, 2, 2, &e), -1);
    ck_assert_msg(strstr(e.msg, "use 4 micro-batches"), "%s", e.msg);
    ck_assert_int_eq(tt_schedule_validate_args(TT_SCHED_INTERLEAVED, 4, 8, 1, &e), -1);
    ck_assert(strstr(e.msg, "v >= 2") && strstr(e.msg, "v = 1"));
    ck_assert_int_eq(tt_schedule_validate_args(TT_SCHED_INTERLEAVED, 1, 4, 2, &e), -1);
    ck_assert(strstr(e.msg, "pp = 1"));
    ck_assert_int_eq(tt_schedule_validate_args(TT_SCHED_GPIPE, 0, 4, 1, &e), -1);
    ck_assert(strstr(e.msg, "pp = 0"));
    ck_assert_int_eq(tt_schedule_validate_args(TT_SCHED_GPIPE, 2, 0, 1, &e), -1);
    ck_assert(strstr(e.msg, "(got 0)"));
    ck_assert_int_eq(tt_schedule_validate_args(99, 2, 4, 1, &e), -1);
    ck_assert_str_eq(e.msg, "unknown pipeline schedule 99 (use naive, gpipe, 1f1b, interleaved, "
                            "zb-h1 or zb-v)");
    ck_assert_str_eq(tt_schedule_name(99), "unknown");
    ck_assert_int_eq(tt_schedule_parse("1F1B-ish"), -1);
    ck_assert_int_eq(tt_schedule_parse(NULL), -1);
    /* The textbook's figure: p = 4, m = 4 -> 3/7 idle. */
    ck_assert(tt_bubble_theory(TT_SCHED_GPIPE, 4, 4, 1) == 3.0 / 7.0);
    ck_assert(tt_bubble_theory(TT_SCHED_NAIVE, 4, 4, 1) == 0.75);
    ck_assert(tt_bubble_theory(TT_SCHED_INTERLEAVED, 4, 4, 2) == 3.0 / 11.0);
}
END_TEST

/* The registry: one row per schedule, and the rows must agree with each other
 * and with the simulation. For every row: its name parses back to its kind
 * and is in the list of names; for a few (p, m, v) its argument rules accept,
 * the chunks-per-stage rule gives that v, the builder's lists pass the check,
 * and the row's bubble formula equals the simulated idle fraction of every
 * stage with forward = backward = 1. The formulas are exact for every row
 * today (interleaved accepts only m a multiple of p, where Megatron's formula
 * is exact); a row whose formula is only an approximation would need its own
 * tolerance here. */
START_TEST(registry_rows_consistent)
{
    char names[256];
    tt_schedule_names(names, sizeof names);
    const int n = tt_schedule_count();
    ck_assert_int_eq(n, 6);
    for (int k = 0; k < n; k++) {
        const char *name = tt_schedule_name(k);
        ck_assert_int_eq(tt_schedule_parse(name), k);
        ck_assert_msg(strstr(names, name), "%s not in \"%s\"", name, names);
        ck_assert(tt_schedule_about(k)[0] != 0);
        int accepted = 0;
        for (int p = 1; p <= 4; p++)
            for (int m = 1; m <= 8; m++)
                for (int v = 1; v <= 3; v++) {
                    tt_err e;
                    if (tt_schedule_validate_args(k, p, m, v, &e) != 0)
                        continue;
                    accepted++;
                    ck_assert_int_eq(tt_schedule_chunks_per_stage(k, v), v);
                    tt_sim_result r;
                    /* A row that splits the backward states its bubble for
                     * the papers' F = B = W: backward 2, split 1 and 1. */
                    const double bc = tt_schedule_splits_w(k) ? 2 : 1;
                    ck_assert_msg(run(k, p, m, v, 1, bc, &r, &e) == 0, "%s p=%d m=%d v=%d: %s",
                                  name, p, m, v, e.msg);
                    ck_assert_int_eq(tt_schedule_check_bound(k, &r, &e), 0);
                    double theory = tt_bubble_theory(k, p, m, v);
                    for (int s = 0; s < p; s++) {
                        double idle = (r.span - r.busy[s]) / r.span;
                        ck_assert_msg(fabs(idle - theory) < 1e-12,
                                      "%s p=%d m=%d v=%d stage %d: idle %g, %s = %g", name, p, m,
                                      v, s, idle, tt_schedule_formula(k), theory);
                    }
                    tt_sim_result_free(&r);
                }
        ck_assert_msg(accepted > 0, "%s: no (p, m, v) accepted", name);
    }
    /* The names as the flag parser and the help will list them, and the
     * formulas as the bubble report prints them. */
    ck_assert_str_eq(names, "naive, gpipe, 1f1b, interleaved, zb-h1 or zb-v");
    ck_assert_str_eq(tt_schedule_names(names, 10), "naive, gp");
    ck_assert_str_eq(tt_schedule_formula(TT_SCHED_NAIVE), "(p-1)/p");
    ck_assert_str_eq(tt_schedule_formula(TT_SCHED_GPIPE), "(p-1)/(m + p-1)");
    ck_assert_str_eq(tt_schedule_formula(TT_SCHED_1F1B), "(p-1)/(m + p-1)");
    ck_assert_str_eq(tt_schedule_formula(TT_SCHED_INTERLEAVED), "(p-1)/(v m + p-1)");
    ck_assert_int_eq(tt_schedule_chunks_per_stage(TT_SCHED_1F1B, 3), 1);
    ck_assert_int_eq(tt_schedule_chunks_per_stage(TT_SCHED_INTERLEAVED, 3), 3);
}
END_TEST

/* ---- zb-v: two chunks per stage in a V -------------------------------------- */

/* Where the V puts the chunks, by hand for p = 4 (pipeline.h's worked
 * example), and the two functions inverse to each other for every p. */
START_TEST(v_placement)
{
    static const int stage_of[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    for (int k = 0; k < 8; k++)
        ck_assert_int_eq(tt_chunk_stage(TT_PLACE_V, 4, k), stage_of[k]);
    ck_assert_int_eq(tt_stage_chunk(TT_PLACE_V, 4, 0, 1), 7);
    ck_assert_int_eq(tt_stage_chunk(TT_PLACE_V, 4, 3, 1), 4);
    ck_assert_int_eq(tt_chunk_stage(TT_PLACE_LOOP, 4, 6), 2);
    for (int p = 1; p <= PMAX; p++)
        for (int s = 0; s < p; s++)
            for (int j = 0; j < 2; j++) {
                ck_assert_int_eq(tt_chunk_stage(TT_PLACE_V, p, tt_stage_chunk(TT_PLACE_V, p, s, j)), s);
                ck_assert_int_eq(tt_stage_chunk(TT_PLACE_V, p, s, j) / p, j);
            }
    ck_assert_int_eq(tt_schedule_placement(TT_SCHED_ZB_V), TT_PLACE_V);
    ck_assert_int_eq(tt_schedule_placement(TT_SCHED_INTERLEAVED), TT_PLACE_LOOP);
}
END_TEST

/* ZB-V for p = 2..PMAX and m from its smallest, 2(p-1), on: every F, B and W
 * once per (mb, chunk) of the 2p chunks (counted here, not by the checker),
 * the checker passes, 1F1B's memory (2p half-size pairs), and for costs with
 * T_F <= T_B and T_W <= T_B per chunk every stage idles exactly
 * doc/pipeline.md's (p-1)(2 T_B - T_W) (a closed form the simulation does
 * not know) around 2m (T_F + T_B + T_W) of work. */
/* The stage split by hand, on the default model (C 96, V 256, T 64) with
 * pp 2: the head costs 2CV / (24C^2 + 4TC) = 49152 / 245760 = 0.2 of a
 * block; 6 blocks in 4 chunks.
 * - loop placement (chunk k on stage k % 2): the costliest chunk is what
 *   counts. A last chunk of 2 costs 2.2; of 1, 1.2, leaving 5 blocks to 3
 *   chunks, 2 at most: so the costliest is 2, the last chunk 1 block.
 * - the V (stage 0: chunks 0 and 3 with the head; stage 1: chunks 1 and 2):
 *   a stage's total is what counts. Stage 0 n0 + 0.2, stage 1 6 - n0: n0 = 3
 *   gives 3.2 and 3, the least maximum (n0 = 2: 4; n0 = 4: 4.2). Each
 *   stage's chunks as even as they go: stage 0 down 2, up 1 (1.2 with the
 *   head); stage 1 down 1, up 2 (a tie, the first cut tried): 2, 1, 2, 1.
 *   The loop's split (1, 2, 2, 1 by its tie rule) would load stage 1 with 4
 *   blocks: a step 4 / 3.2 = 1.25 times longer where stages limit it. */
START_TEST(stage_split_by_hand)
{
    tt_config cfg = {.V = 256, .C = 96, .L = 6, .NH = 4, .T = 64};
    int got[4];
    tt_err e = {0};
    ck_assert_int_eq(tt_stage_split(got, &cfg, 4, TT_PLACE_LOOP, NULL, &e), 0);
    int most = 0, sum = 0;
    for (int k = 0; k < 4; k++) {
        most = got[k] > most ? got[k] : most;
        sum += got[k];
    }
    ck_assert_int_eq(sum, 6);
    ck_assert_int_eq(most, 2);
    ck_assert_int_eq(got[3], 1);
    const int v[4] = {2, 1, 2, 1};
    ck_assert_int_eq(tt_stage_split(got, &cfg, 4, TT_PLACE_V, NULL, &e), 0);
    for (int k = 0; k < 4; k++)
        ck_assert_msg(got[k] == v[k], "V split: chunk %d has %d blocks, expected %d", k, got[k],
                      v[k]);
    /* --stage-layers wins over both */
    ck_assert_int_eq(tt_stage_split(got, &cfg, 4, TT_PLACE_V, "1,1,1,3", &e), 0);
    ck_assert_int_eq(got[3], 3);
}
END_TEST

START_TEST(zb_v_all)
{
    static const double costs[][3] = {{1, 1, 1}, {2, 3, 1}, {1, 2, 2}, {0.5, 2, 1}, {3, 4, 3.5}};
    int ran = 0;
    for (int p = 2; p <= PMAX; p++)
        for (int m = 1; m <= 2 * p + 4; m++) {
            tt_err e;
            if (m < 2 * (p - 1)) {
                ck_assert_int_eq(tt_schedule_validate_args(TT_SCHED_ZB_V, p, m, 2, &e), -1);
                char use[48];
                snprintf(use, sizeof use, "use %d or more micro-batches", 2 * (p - 1));
                ck_assert_msg(strstr(e.msg, "at least 2(pp-1) micro-batches") && strstr(e.msg, use),
                              "%s", e.msg);
                continue;
            }
            ck_assert_msg(tt_schedule_validate_args(TT_SCHED_ZB_V, p, m, 2, &e) == 0, "%s", e.msg);
            const int K = 2 * p;
            tt_action_list L[PMAX];
            build_all(L, TT_SCHED_ZB_V, p, m, 2);
            int *n = calloc((size_t)(3 * m * K), sizeof *n);
            for (int s = 0; s < p; s++)
                for (int i = 0; i < L[s].n; i++) {
                    const tt_action *a = &L[s].a[i];
                    int c = a->kind == TT_ACT_FWD ? 0 : a->kind == TT_ACT_BWD ? 1
                          : a->kind == TT_ACT_W   ? 2 : -1;
                    if (c >= 0)
                        n[(a->mb * K + a->chunk) * 3 + c]++;
                }
            for (int i = 0; i < 3 * m * K; i++)
                ck_assert_msg(n[i] == 1, "zb-v p=%d m=%d: mb%d chunk %d has %d %c", p, m,
                              i / 3 / K, i / 3 % K, n[i], "FBW"[i % 3]);
            free(n);
            for (size_t c = 0; c < sizeof costs / sizeof costs[0]; c++) {
                double f[2 * PMAX], b[2 * PMAX], w[2 * PMAX];
                for (int k = 0; k < K; k++)
                    f[k] = costs[c][0], b[k] = costs[c][1], w[k] = costs[c][2];
                tt_sim_costs sc = {f, b, NULL, w};
                tt_sim_result r;
                ck_assert_msg(tt_schedule_simulate(L, p, m, 2, &sc, &r, &e) == 0, "zb-v p=%d m=%d: %s",
                              p, m, e.msg);
                const double work = 2 * m * (costs[c][0] + costs[c][1] + costs[c][2]);
                const double idle = (p - 1) * (2 * costs[c][1] - costs[c][2]);
                ck_assert_msg(fabs(r.span - work - idle) < 1e-9,
                              "zb-v p=%d m=%d F=%g B=%g W=%g: span %g, want %g", p, m, costs[c][0],
                              costs[c][1], costs[c][2], r.span, work + idle);
                for (int s = 0; s < p; s++) {
                    ck_assert(fabs(r.busy[s] - work) < 1e-9);
                    ck_assert_msg(r.peak_held[s] <= 2 * p, "zb-v p=%d m=%d stage %d holds %d", p, m,
                                  s, r.peak_held[s]);
                }
                ck_assert_int_eq(tt_schedule_check_bound(TT_SCHED_ZB_V, &r, &e), 0);
                tt_sim_result_free(&r);
            }
            free_all(L, p);
            ran++;
        }
    ck_assert_int_gt(ran, 0);
    /* The papers' equal costs, p = 4, m = 8, by hand: 3 idle units around 48
     * of work per stage, 3/51 - a third of zb-h1's 3/27 per unit of work... */
    ck_assert(tt_bubble_theory(TT_SCHED_ZB_V, 4, 8, 2) == 3.0 / 51.0);
    /* ...and the v it runs: 2 and nothing else. */
    tt_err e;
    ck_assert_int_eq(tt_schedule_validate_args(TT_SCHED_ZB_V, 4, 8, 3, &e), -1);
    ck_assert_msg(strstr(e.msg, "exactly 2 chunks per stage (got v = 3)"), "%s", e.msg);
}
END_TEST

/* Planted: the V's lists checked as if the chunks were looped (chunk k on
 * stage k % p) fail on the first action of a chunk that moved, and lists
 * that disagree on the placement are refused. */
START_TEST(zb_v_planted_placement)
{
    tt_action_list L[4];
    tt_err e;
    build_all(L, TT_SCHED_ZB_V, 4, 6, 2);
    ck_assert_int_eq(tt_schedule_check(L, 4, 6, 2, 1, 2, NULL, &e), 0);
    for (int s = 0; s < 4; s++)
        L[s].place = TT_PLACE_LOOP;
    ck_assert_int_eq(tt_schedule_check(L, 4, 6, 2, 1, 2, NULL, &e), -1);
    ck_assert_msg(strstr(e.msg, "lives on stage"), "%s", e.msg);
    L[0].place = TT_PLACE_V;
    ck_assert_int_eq(tt_schedule_check(L, 4, 6, 2, 1, 2, NULL, &e), -1);
    ck_assert_msg(strstr(e.msg, "places the chunks"), "%s", e.msg);
    free_all(L, 4);
}
END_TEST

/* ---- zero bubble (B and W apart) ------------------------------------------ */

/* Counts of F, B and W per (mb, chunk), independently of the checker. */
static void count_fbw(const tt_action_list *L, int p, int m, const char *what)
{
    int *n = calloc((size_t)(3 * m * p), sizeof *n);
    for (int s = 0; s < p; s++)
        for (int i = 0; i < L[s].n; i++) {
            const tt_action *a = &L[s].a[i];
            int c = a->kind == TT_ACT_FWD ? 0 : a->kind == TT_ACT_BWD ? 1 : a->kind == TT_ACT_W ? 2 : -1;
            if (c >= 0)
                n[(a->mb * p + a->chunk) * 3 + c]++;
        }
    for (int i = 0; i < 3 * m * p; i++)
        ck_assert_msg(n[i] == 1, "%s: mb%d chunk %d has %d %c", what, i / 3 / p, i / 3 % p, n[i],
                      "FBW"[i % 3]);
    free(n);
}

/* ZB-H1's idle time per stage, worked out in doc/pipeline.md:
 * (p-1)(T_F + max(T_B - T_W, 0)), around m (T_F + T_B + T_W) of work. */
static double zb_h1_idle(int p, double f, double b, double w)
{
    return (p - 1) * (f + (b > w ? b - w : 0.0));
}

START_TEST(zb_h1_all)
{
    /* Cost triples (F, B, W): the papers' equal costs, B dearer than W (our
     * blocks: attention has no weights), W dearer than B, and F dearer. */
    static const double costs[][3] = {{1, 1, 1}, {2, 3, 1}, {2, 1, 3}, {3, 2, 2}, {4, 5, 3}};
    int ran = 0;
    for (int p = 1; p <= PMAX; p++)
        for (int m = 1; m <= 16; m++) {
            tt_err e;
            if (m < p) {
                ck_assert_int_eq(tt_schedule_validate_args(TT_SCHED_ZB_H1, p, m, 1, &e), -1);
                ck_assert_msg(strstr(e.msg, "at least as many micro-batches"), "%s", e.msg);
                continue;
            }
            ck_assert_msg(tt_schedule_validate_args(TT_SCHED_ZB_H1, p, m, 1, &e) == 0, "%s",
                          e.msg);
            char what[64];
            snprintf(what, sizeof what, "zb-h1 p=%d m=%d", p, m);
            tt_action_list L[PMAX];
            build_all(L, TT_SCHED_ZB_H1, p, m, 1);
            count_fbw(L, p, m, what);
            for (size_t c = 0; c < sizeof costs / sizeof costs[0]; c++) {
                double f[PMAX], b[PMAX], w[PMAX];
                for (int k = 0; k < p; k++)
                    f[k] = costs[c][0], b[k] = costs[c][1], w[k] = costs[c][2];
                tt_sim_costs sc = {f, b, NULL, w};
                tt_sim_result r;
                ck_assert_msg(tt_schedule_simulate(L, p, m, 1, &sc, &r, &e) == 0, "%s: %s", what,
                              e.msg);
                const double work = m * (costs[c][0] + costs[c][1] + costs[c][2]);
                const double idle = zb_h1_idle(p, costs[c][0], costs[c][1], costs[c][2]);
                ck_assert_msg(r.span == work + idle, "%s F=%g B=%g W=%g: span %g, want %g", what,
                              costs[c][0], costs[c][1], costs[c][2], r.span, work + idle);
                for (int s = 0; s < p; s++) {
                    ck_assert(r.busy[s] == work);
                    /* 1F1B's memory: p pairs at most on every stage. */
                    ck_assert_msg(r.peak_held[s] <= p, "%s: stage %d holds %d", what, s,
                                  r.peak_held[s]);
                }
                ck_assert_int_eq(tt_schedule_check_bound(TT_SCHED_ZB_H1, &r, &e), 0);
                tt_sim_result_free(&r);
            }
            /* Against 1F1B with the same costs (its backward B + W = 2):
             * the same on one stage, shorter on more. */
            tt_action_list O[PMAX];
            build_all(O, TT_SCHED_1F1B, p, m, 1);
            tt_sim_result a, z;
            ck_assert(tt_schedule_check(O, p, m, 1, 1, 2, &a, &e) == 0);
            ck_assert(tt_schedule_check(L, p, m, 1, 1, 2, &z, &e) == 0);
            ck_assert_msg(p == 1 ? z.span == a.span : z.span < a.span, "%s: zb %g, 1f1b %g", what,
                          z.span, a.span);
            tt_sim_result_free(&a);
            tt_sim_result_free(&z);
            free_all(O, p);
            free_all(L, p);
            ran++;
        }
    ck_assert_int_gt(ran, 0);
    /* The textbook's unit costs, p = 4, m = 8, by hand: 3 idle units around
     * 24 of work, 3/27; 1F1B idles 9 of 33. */
    ck_assert(tt_bubble_theory(TT_SCHED_ZB_H1, 4, 8, 1) == 3.0 / 27.0);
}
END_TEST

/* Over the bound: stage 1 of a ZB-H1 with p = 2, m = 4 deferring every W to
 * the end holds all 4 micro-batches, more than 1F1B's p = 2. The lists are
 * otherwise correct (the plain check passes); only the bound rejects them. */
START_TEST(reject_over_bound)
{
    tt_action_list L[2];
    build_all(L, TT_SCHED_ZB_H1, 2, 4, 1);
    for (int mb = 0; mb < 4; mb++) {
        int w = find(&L[1], TT_ACT_W, mb);
        tt_action wa = L[1].a[w];
        erase(&L[1], w);
        insert(&L[1], L[1].n, wa);
    }
    tt_sim_result r;
    tt_err e;
    ck_assert_msg(tt_schedule_check(L, 2, 4, 1, 1, 2, &r, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r.peak_held[1], 4);
    ck_assert_int_eq(tt_schedule_check_bound(TT_SCHED_ZB_H1, &r, &e), -1);
    ck_assert_msg(strstr(e.msg, "stage 1 holds the activations of 4") &&
                      strstr(e.msg, "bound of 2"),
                  "%s", e.msg);
    /* The unchanged lists stay within it. */
    tt_sim_result_free(&r);
    free_all(L, 2);
    build_all(L, TT_SCHED_ZB_H1, 2, 4, 1);
    ck_assert(tt_schedule_check(L, 2, 4, 1, 1, 2, &r, &e) == 0);
    ck_assert_int_eq(tt_schedule_check_bound(TT_SCHED_ZB_H1, &r, &e), 0);
    tt_sim_result_free(&r);
    free_all(L, 2);
}
END_TEST

/* ---- narration ----------------------------------------------------------- */

/* The step narrated on the papers' grid: a forward fills one time step, a
 * backward two, so GPipe's 4 stages and 4 micro-batches take
 * (m + p - 1) x 3 = 21 time steps. */
START_TEST(explain_gpipe_4x4)
{
    tt_action_list L[4];
    build_all(L, TT_SCHED_GPIPE, 4, 4, 1);
    tt_sim_result r;
    tt_err e;
    ck_assert_msg(tt_schedule_textbook(L, 4, 4, 1, &r, &e) == 0, "%s", e.msg);
    const char *names[] = {"g0", "g1", "g2", "g3"};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    tt_schedule_explain(f, L, &r, names);
    fclose(f);
    ck_assert(strstr(text, "Time step 1\n"));
    ck_assert(strstr(text, "computing: g0 forward of micro-batch 0 on chunk 0\n"));
    ck_assert(strstr(text, "communication: g0 -> g1 activations of micro-batch 0\n"));
    ck_assert(strstr(text, "active GPUs 25%: g0 (idle: g1 g2 g3)\n"));
    ck_assert(strstr(text, "active GPUs 100%: g0, g1, g2, g3\n"));
    ck_assert(strstr(text, "g1 -> g0 gradients of micro-batch 0"));
    /* Stage 3's first backward (micro-batch 3, GPipe backwards in reverse)
     * fills time steps 8 and 9 and sends its gradient at the end of 9. */
    ck_assert(strstr(text, "Time step 8\n  computing: g3 backward of micro-batch 3 on chunk 3 "
                           "(part 1 of 2)\n  communication: none\n"));
    ck_assert(strstr(text, "Time step 9\n  computing: g3 backward of micro-batch 3 on chunk 3 "
                           "(part 2 of 2)\n  communication: g3 -> g2 gradients of micro-batch 3\n"));
    int last = 0, steps = 0;
    for (const char *s = text; (s = strstr(s, "Time step ")); s++, steps++)
        last = atoi(s + 10);
    ck_assert_int_eq(steps, 21);
    ck_assert_int_eq(last, (int)r.span);
    ck_assert_int_eq(last, 21);
    /* Step 21 is stage 0's final backward alone. */
    ck_assert(strstr(text, "Time step 21\n  computing: g0 backward of micro-batch 0 on chunk 0 "
                           "(part 2 of 2)\n  communication: none\n  active GPUs 25%: g0"));
    free(text);
    tt_sim_result_free(&r);
    free_all(L, 4);
}
END_TEST

/* The chart of `kind` on p stages, m micro-batches, v chunks per stage, with
 * stage s named g<s>, into a string the caller frees. */
static char *gantt_of(tt_schedule_kind kind, int p, int m, int v)
{
    tt_action_list L[PMAX];
    build_all(L, kind, p, m, v);
    tt_sim_result r;
    tt_err e;
    ck_assert_msg(tt_schedule_textbook(L, p, m, v, &r, &e) == 0, "%s", e.msg);
    char names[PMAX][8];
    const char *np[PMAX];
    for (int s = 0; s < p; s++) {
        snprintf(names[s], sizeof names[s], "g%d", s);
        np[s] = names[s];
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    tt_schedule_gantt(f, L, &r, np);
    fclose(f);
    tt_sim_result_free(&r);
    free_all(L, p);
    return text;
}

/* The charts worked out by hand from the schedules' definitions (GPipe: all
 * forwards, then the backwards last micro-batch first; 1F1B: stage s warms up
 * with p - s - 1 forwards, then alternates, then cools down), with a forward
 * filling one time step and a backward two, each starting as soon as its
 * stage is free and its input (activation or gradient) has been sent. */
static const struct {
    tt_schedule_kind kind;
    int p;
    const char *chart;
} hand_charts[] = {
    {TT_SCHED_GPIPE, 2,
     "time  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15\n"
     "g0   F0 F1 F2 F3  .  .  . B3 B3 B2 B2 B1 B1 B0 B0\n"
     "g1    . F0 F1 F2 F3 B3 B3 B2 B2 B1 B1 B0 B0  .  .\n"},
    {TT_SCHED_GPIPE, 3,
     "time  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18\n"
     "g0   F0 F1 F2 F3  .  .  .  .  .  . B3 B3 B2 B2 B1 B1 B0 B0\n"
     "g1    . F0 F1 F2 F3  .  .  . B3 B3 B2 B2 B1 B1 B0 B0  .  .\n"
     "g2    .  . F0 F1 F2 F3 B3 B3 B2 B2 B1 B1 B0 B0  .  .  .  .\n"},
    {TT_SCHED_GPIPE, 4,
     "time  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 19 20 21\n"
     "g0   F0 F1 F2 F3  .  .  .  .  .  .  .  .  . B3 B3 B2 B2 B1 B1 B0 B0\n"
     "g1    . F0 F1 F2 F3  .  .  .  .  .  . B3 B3 B2 B2 B1 B1 B0 B0  .  .\n"
     "g2    .  . F0 F1 F2 F3  .  .  . B3 B3 B2 B2 B1 B1 B0 B0  .  .  .  .\n"
     "g3    .  .  . F0 F1 F2 F3 B3 B3 B2 B2 B1 B1 B0 B0  .  .  .  .  .  .\n"},
    {TT_SCHED_1F1B, 2,
     "time  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15\n"
     "g0   F0 F1  .  . B0 B0 F2 B1 B1 F3 B2 B2  . B3 B3\n"
     "g1    . F0 B0 B0 F1 B1 B1 F2 B2 B2 F3 B3 B3  .  .\n"},
    {TT_SCHED_1F1B, 3,
     "time  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18\n"
     "g0   F0 F1 F2  .  .  .  . B0 B0 F3 B1 B1  . B2 B2  . B3 B3\n"
     "g1    . F0 F1  .  . B0 B0 F2 B1 B1 F3 B2 B2  . B3 B3  .  .\n"
     "g2    .  . F0 B0 B0 F1 B1 B1 F2 B2 B2 F3 B3 B3  .  .  .  .\n"},
    {TT_SCHED_1F1B, 4,
     "time  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 19 20 21\n"
     "g0   F0 F1 F2 F3  .  .  .  .  .  . B0 B0  . B1 B1  . B2 B2  . B3 B3\n"
     "g1    . F0 F1 F2  .  .  .  . B0 B0 F3 B1 B1  . B2 B2  . B3 B3  .  .\n"
     "g2    .  . F0 F1  .  . B0 B0 F2 B1 B1 F3 B2 B2  . B3 B3  .  .  .  .\n"
     "g3    .  .  . F0 B0 B0 F1 B1 B1 F2 B2 B2 F3 B3 B3  .  .  .  .  .  .\n"},
};

START_TEST(gantt_by_hand)
{
    for (size_t i = 0; i < sizeof hand_charts / sizeof hand_charts[0]; i++) {
        char *got = gantt_of(hand_charts[i].kind, hand_charts[i].p, 4, 1);
        ck_assert_msg(strcmp(got, hand_charts[i].chart) == 0, "%s p %d m 4: got\n%swant\n%s",
                      tt_schedule_name(hand_charts[i].kind), hand_charts[i].p, got,
                      hand_charts[i].chart);
        free(got);
    }
}
END_TEST

/* Every line of the chart and the narration fits in 100 characters: a
 * chart wider than that is cut into blocks of columns, each with its own
 * time row, and together the blocks hold every time step once. */
START_TEST(explain_width)
{
    static const struct {
        tt_schedule_kind kind;
        int p, m, v;
    } cases[] = {{TT_SCHED_GPIPE, 2, 16, 1}, {TT_SCHED_NAIVE, 8, 8, 1},
                 {TT_SCHED_INTERLEAVED, 8, 16, 2}, {TT_SCHED_1F1B, 8, 12, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int p = cases[c].p, m = cases[c].m, v = cases[c].v;
        char *chart = gantt_of(cases[c].kind, p, m, v);
        tt_action_list L[PMAX];
        build_all(L, cases[c].kind, p, m, v);
        tt_sim_result r;
        tt_err e;
        ck_assert_msg(tt_schedule_textbook(L, p, m, v, &r, &e) == 0, "%s", e.msg);
        const char *names[PMAX] = {"g10", "g11", "g12", "g13", "g14", "g15", "g16", "g17"};
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        tt_schedule_explain(f, L, &r, names);
        fclose(f);
        int cols = 0, blocks = 0, cells = 0;
        for (char *t = chart; *t;) {
            char *nl = strchr(t, '\n');
            ck_assert_msg(nl - t <= 100, "%s chart line of %d chars", tt_schedule_name(cases[c].kind),
                          (int)(nl - t));
            if (strncmp(t, "time", 4) == 0) {
                blocks++;
                for (char *q = t + 4; q < nl; q++)
                    cols += (q[0] == ' ' && q[1] != ' ');
            } else if (strncmp(t, "g0", 2) == 0) { /* stage 0 computes m v (1 + 2) steps */
                for (char *q = t + 2; q < nl; q++)
                    cells += (q[0] == 'F' || q[0] == 'B');
            }
            t = nl + 1;
        }
        ck_assert_int_eq(cols, (int)(r.span + 0.5));
        ck_assert_int_eq(cells, 3 * m * v);
        ck_assert_msg(blocks >= 2, "%d time steps in %d block", cols, blocks); /* all > 100 wide */
        for (char *t = text; *t;) {
            char *nl = strchr(t, '\n');
            ck_assert_msg(nl - t <= 100, "narration line of %d chars: %.*s", (int)(nl - t),
                          (int)(nl - t), t);
            t = nl + 1;
        }
        free(text);
        free(chart);
        tt_sim_result_free(&r);
        free_all(L, p);
    }
}
END_TEST

/* One line per schedule: the simulated idle fraction next to the theory. */
static int print_summary(void)
{
    int rc = 0;
    static const int ms[] = {4, 8};
    for (int k = 0; k < tt_schedule_count(); k++)
        for (int i = 0; i < 2; i++) {
            int p = 4, m = ms[i], v = tt_schedule_chunks_per_stage(k, 2);
            tt_sim_result r;
            tt_err e;
            if (run(k, p, m, v, 1, tt_schedule_splits_w(k) ? 2 : 1, &r, &e)) {
                printf("%-11s p=%d m=%d v=%d: FAILED %s\n", tt_schedule_name(k), p, m, v, e.msg);
                rc = 1;
                continue;
            }
            printf("%-11s p=%d m=%d v=%d: span %3.0f, bubble simulated %.4f theory %.4f, "
                   "peak held",
                   tt_schedule_name(k), p, m, v, r.span, (r.span - r.busy[0]) / r.span,
                   tt_bubble_theory(k, p, m, v));
            for (int s = 0; s < p; s++)
                printf(" %d", r.peak_held[s]);
            printf("\n");
            tt_sim_result_free(&r);
        }
    return rc;
}

int main(void)
{
    Suite *s = suite_create("pipeline");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, naive_all);
    tcase_add_test(tc, gpipe_all);
    tcase_add_test(tc, one_f_one_b_all);
    tcase_add_test(tc, interleaved_all);
    tcase_add_test(tc, interleaved_peak_by_hand);
    tcase_add_test(tc, interleaved_beats_1f1b);
    tcase_add_test(tc, reject_broken);
    tcase_add_test(tc, arguments_and_names);
    tcase_add_test(tc, registry_rows_consistent);
    tcase_add_test(tc, explain_gpipe_4x4);
    tcase_add_test(tc, gantt_by_hand);
    tcase_add_test(tc, explain_width);
    tcase_add_test(tc, zb_h1_all);
    tcase_add_test(tc, v_placement);
    tcase_add_test(tc, zb_v_all);
    tcase_add_test(tc, stage_split_by_hand);
    tcase_add_test(tc, zb_v_planted_placement);
    tcase_add_test(tc, reject_over_bound);
    suite_add_tcase(s, tc);
    int status = tt_check_run(s);
    if (print_summary() != 0) /* the bubble table checks its own figures too */
        status = EXIT_FAILURE;
    return status;
}
