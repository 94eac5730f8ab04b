/* test_pipeline_reject.c - the pipeline checker refuses broken lists: a
 * missing action, a duplicated forward, a missing receive or send, a wrong
 * order, a deadlock (one a single list shows, and one that only the
 * simulation of all stages can), a wrong peer, a chunk on the wrong stage, a
 * W before its B, a missing W; each with a message that names the problem
 * and the action. And a zb-h1 list that is correct but over the schedule's
 * memory bound passes the check and fails the bound. Single process, no MPI.
 * (The schedules themselves: test_pipeline.c.) */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt/parallel/pipeline.h"

#include "check_run.h"
#include "pipeline_check.h"

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

static void break_w_without_b(tt_action_list *L, at_text at)
{
    /* Stage 0 keeps only mb0's W: its forward, its transfers and its B are
     * gone, so the W is the first action the checker finds wanting (an
     * erased B alone is caught at its forward, "never backwarded"). */
    static const tt_action_kind gone[] = {TT_ACT_FWD, TT_ACT_SEND_ACT, TT_ACT_RECV_GRAD,
                                          TT_ACT_BWD};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        erase(&L[0], find(&L[0], gone[i], 0));
    snprintf(at[0], ATLEN, "stage 0 action %d (W (weight gradients) mb0 chunk 0)",
             find(&L[0], TT_ACT_W, 0));
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
    {"W without B", TT_SCHED_ZB_H1, 2, 3, 2, NONE, NONE, break_w_without_b,
     {"the micro-batch is never backwarded (B) through this chunk"}},
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

int main(void)
{
    const TTest *tests[] = {
        reject_broken, reject_over_bound,
    };
    Suite *s = pipeline_suite("pipeline_reject", tests, sizeof tests / sizeof tests[0]);
    return tt_check_run(s);
}
