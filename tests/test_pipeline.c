/* test_pipeline.c - the pipeline schedules as data: every schedule for every
 * small (p, m, v) passes the simulation check, computes each (micro-batch,
 * chunk) forward and backward exactly once, and reaches the bubble and the
 * activation memory the theory predicts; interleaving beats 1F1B; the
 * argument rules and the schedule registry's rows agree with each other and
 * with the simulation; last, the bubble table (simulated next to theory) is
 * printed. Single process, no MPI.
 *
 * The rest of the pipeline's tests: broken lists rejected
 * (test_pipeline_reject.c), the zero-bubble schedules zb-h1 and zb-v
 * (test_pipeline_zb.c), the narration and the chart (test_pipeline_narrate.c).
 *
 * K = p*v is the number of chunks, chunk k lives on stage k % p. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt/parallel/pipeline.h"

#include "check_run.h"
#include "pipeline_check.h"

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
    case TT_SCHED_ZB_H1:
    case TT_SCHED_ZB_V: break; /* B and W apart: their spans are test_pipeline_zb.c's */
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
    /* After the rows, so that a row added is checked before this fails:
     * the six schedules of doc/design.md section 9. */
    ck_assert_int_eq(n, 6);
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

/* One line per schedule, for the log: the simulated idle fraction next to
 * the theory (registry_rows_consistent asserts that they agree); an (m, v)
 * the schedule refuses is said and skipped. Fails only where a run does. */
static int print_summary(void)
{
    int rc = 0;
    static const int ms[] = {4, 8};
    for (int k = 0; k < tt_schedule_count(); k++)
        for (int i = 0; i < 2; i++) {
            int p = 4, m = ms[i], v = tt_schedule_chunks_per_stage(k, 2);
            tt_sim_result r;
            tt_err e;
            if (tt_schedule_validate_args(k, p, m, v, &e) != 0) {
                printf("%-11s p=%d m=%d v=%d: refused (%s)\n", tt_schedule_name(k), p, m, v,
                       e.msg);
                continue;
            }
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
    const TTest *tests[] = {
        naive_all, gpipe_all, one_f_one_b_all, interleaved_all, interleaved_peak_by_hand,
        interleaved_beats_1f1b, arguments_and_names, registry_rows_consistent,
    };
    Suite *s = pipeline_suite("pipeline", tests, sizeof tests / sizeof tests[0]);
    int status = tt_check_run(s);
    if (print_summary() != 0)
        status = EXIT_FAILURE;
    return status;
}
