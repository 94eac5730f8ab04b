/* test_pipeline_zb.c - the zero-bubble schedules, whose backward is split
 * into B (input gradients) and W (weight gradients): zb-h1 computes each F, B
 * and W once and reaches its bubble formula for several cost ratios, its
 * lists checked once and simulated with each (the planner's way); zb-v
 * places two chunks per stage in a V (by hand and for every p), computes each
 * F, B and W once, reaches its own formula, and its lists are refused when
 * checked as if looped; the split of the blocks into chunks, by hand, under
 * both placements. Single process, no MPI. (The checker refusing a W before
 * its B, a missing W and a list over its memory bound:
 * test_pipeline_reject.c.) */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt/parallel/pipeline.h"
#include "tt/parallel/pipeline_run.h"

#include "check_run.h"
#include "pipeline_check.h"

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
 * doc/pipeline.md's (p-1) max(T_B, 2(T_B - T_W)) (a closed form the
 * simulation does not know) around 2m (T_F + T_B + T_W) of work. */
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
    const int loop[4] = {1, 2, 2, 1};
    for (int k = 0; k < 4; k++)
        ck_assert_int_eq(got[k], loop[k]);
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
    static const double costs[][3] = {{1, 1, 1}, {2, 3, 1}, {1, 2, 2}, {0.5, 2, 1},
                                      {3, 4, 3.5}, {1, 1.5, 1}, {1, 4, 1}};
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
                const double idle =
                    (p - 1) * fmax(costs[c][1], 2 * (costs[c][1] - costs[c][2]));
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
            /* Checked once, priced with every cost triple (as the planner
             * prices one layout's lists for each of its candidates): each
             * simulation must start afresh from the checked lists. */
            tt_checked_schedule *cs = tt_schedule_checked(L, p, m, 1, &e);
            ck_assert_msg(cs != NULL, "%s: %s", what, e.msg);
            for (size_t c = 0; c < sizeof costs / sizeof costs[0]; c++) {
                double f[PMAX], b[PMAX], w[PMAX];
                for (int k = 0; k < p; k++)
                    f[k] = costs[c][0], b[k] = costs[c][1], w[k] = costs[c][2];
                tt_sim_costs sc = {f, b, NULL, w};
                tt_sim_result r;
                ck_assert_msg(tt_schedule_simulate_checked(cs, &sc, &r, &e) == 0, "%s: %s", what,
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
            tt_checked_schedule_free(cs);
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

int main(void)
{
    const TTest *tests[] = {
        zb_h1_all, v_placement, zb_v_all, stage_split_by_hand, zb_v_planted_placement,
    };
    Suite *s = pipeline_suite("pipeline_zb", tests, sizeof tests / sizeof tests[0]);
    return tt_check_run(s);
}
