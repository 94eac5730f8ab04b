/* test_pipeline_narrate.c - the pipeline step told for people: the
 * narration of GPipe on the papers' grid reads like the textbook's, the Gantt
 * charts of GPipe and 1F1B match charts worked out by hand, and every line of
 * chart and narration fits in 100 characters, a wide chart cut into blocks
 * that together hold every time step once. Single process, no MPI. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt/parallel/pipeline.h"

#include "check_run.h"
#include "pipeline_check.h"

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
    tt_action_list L[PMAX] = {{0}};
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
                /* the time rows' numbers run 1, 2, ... across the blocks:
                 * every step once, in order */
                for (char *q = t + 4; q < nl; q++)
                    if (q[0] == ' ' && q[1] != ' ') {
                        cols++;
                        ck_assert_int_eq(atoi(q + 1), cols);
                    }
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

int main(void)
{
    const TTest *tests[] = {
        explain_gpipe_4x4, gantt_by_hand, explain_width,
    };
    Suite *s = pipeline_suite("pipeline_narrate", tests, sizeof tests / sizeof tests[0]);
    return tt_check_run(s);
}
