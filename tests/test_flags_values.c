/* test_flags_values.c - the parser on values (Check): bad ones refused with
 * the exact one-line messages users (and labs) see, a near miss naming the
 * flag that was meant, every numeric range enforced just past either end,
 * and the rows that parse specially (-h, --version, a seed above 2^32, lists,
 * choices in the papers' spelling, --watchdog's 0 for off). The table, --help
 * and the man page against each other: test_flags.c. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tt/app/flags.h"
#include "tt/parallel/pipeline.h"

#include "check_run.h"
#include "flags_check.h"

/* The message of a parse that must fail. */
static void expect_error(const char *msg, ...)
{
    tt_run_config c;
    tt_err e;
    va_list ap;
    va_start(ap, msg);
    const int rc = vparse(&c, &e, NULL, ap);
    va_end(ap);
    ck_assert_int_eq(rc, -1);
    ck_assert_str_eq(e.msg, msg);
}

START_TEST(bad_values_refused)
{
    expect_error("unknown option '--frobnicate' (see --help)", "--frobnicate", "3", NULL);
    expect_error("unknown option '--quiet' (see --help)", "--quiet=1", NULL);
    /* A near miss names the flag that was meant. */
    expect_error("unknown option '--micro-batch'; did you mean --micro-batches? (see --help)",
                 "--micro-batch", "2", NULL);
    expect_error("unknown option '--stpes'; did you mean --steps? (see --help)", "--stpes", "3",
                 NULL);
    /* A bare "--" or one letter is near no flag ("--tp" was two edits away). */
    expect_error("unknown option '--' (see --help)", "--", NULL);
    expect_error("unknown option '--x' (see --help)", "--x", NULL);
    expect_error("unknown option '--tq'; did you mean --tp? (see --help)", "--tq", "2", NULL);
    expect_error("unexpected argument 'stray' (options start with --; see --help)", "stray", NULL);
    expect_error("option --seq needs a value (see --help)", "--quiet", "--seq", NULL);
    expect_error("--layers expects an integer, got '2x'", "--layers", "2x", NULL);
    expect_error("--layers must be between 1 and 1024, got 0", "--layers=0", NULL);
    expect_error("--steps must be between 0 and 1000000000, got -4", "--steps", "-4", NULL);
    expect_error("--seed must be between 0 and 9223372036854775807, got -1", "--seed", "-1",
                 NULL);
    expect_error("--virtual-stages must be between 1 and 16, got 17", "--virtual-stages", "17",
                 NULL);
    expect_error("--lr expects a number, got 'fast'", "--lr", "fast", NULL);
    expect_error("--beta2 must be between 0 and 0.999999, got 1", "--beta2", "1", NULL);
    /* 0 is off, but a limit under a second would fire on ordinary waits. */
    expect_error("--watchdog must be between 1 and 1e+09 (or 0: off), got 0.000001", "--watchdog",
                 "0.000001", NULL);
    /* Named as typed: %g of the value printed 1 here. A number too large
     * for a double is out of range; one too small was called no number at
     * all, and is now the nearest double (0 here, a subnormal for 1e-310). */
    expect_error("--beta2 must be between 0 and 0.999999, got 0.9999995", "--beta2",
                 "0.9999995", NULL);
    expect_error("--lr must be between 0 and 10, got 1e999", "--lr", "1e999", NULL);
    expect_error("--lr expects a number, got 'nan'", "--lr", "nan", NULL);
    {
        tt_run_config c;
        tt_err e;
        ck_assert_int_eq(parse(&c, &e, NULL, "--weight-decay", "1e-400", NULL), 0);
        ck_assert(c.optim.weight_decay == 0.0);
        ck_assert_int_eq(parse(&c, &e, NULL, "--weight-decay", "1e-310", NULL), 0);
        ck_assert(c.optim.weight_decay > 0.0 && c.optim.weight_decay < 1e-300);
    }
    expect_error("--watchdog must be between 1 and 1e+09 (or 0: off), got -1", "--watchdog", "-1",
                 NULL);
    expect_error("--dp-bucket must be between 4 bytes and 1000T, got '3'", "--dp-bucket", "3",
                 NULL);
    expect_error("--gpu-mem expects a size such as 4096, 256K or 4M, got '4X'", "--gpu-mem=4X",
                 NULL);
    expect_error("--gpu-mem expects a size such as 4096, 256K or 4M, got '4iB'", "--gpu-mem=4iB",
                 NULL);
    /* The upper end the message names can be typed: 1000T is taken, just
     * past it is not. */
    expect_error("--dp-bucket must be between 4 bytes and 1000T, got '1000.001T'", "--dp-bucket",
                 "1000.001T", NULL);
    expect_error("--tp-mlp expects megatron or gather, got 'scatter'", "--tp-mlp", "scatter",
                 NULL);
    expect_error("--report expects comm, memory, shards or comm,memory,shards, got 'comm,disk'", "--report",
                 "comm,disk", NULL);
    expect_error("--schedule expects naive, gpipe, 1f1b, interleaved, zb-h1 or zb-v, got 'zigzag'",
                 "--schedule", "zigzag", NULL);
    expect_error("option --data needs a non-empty value", "--data=", NULL);
    expect_error("option --report needs a non-empty value", "--report", "", NULL);
}
END_TEST

/* Just past either end of every numeric range is refused, naming the range. */
START_TEST(ranges_enforced)
{
    for (size_t i = 0; i < tt_flag_count; i++) {
        const tt_flag *f = &tt_flags[i];
        char below[64] = "", above[64] = "";
        if (f->kind == TT_FLAG_INT || f->kind == TT_FLAG_LONG || f->kind == TT_FLAG_U64) {
            snprintf(below, sizeof below, "%ld", f->lo - 1);
            if (f->hi < LONG_MAX)
                snprintf(above, sizeof above, "%ld", f->hi + 1);
            else /* LONG_MAX + 1, which a long cannot hold */
                snprintf(above, sizeof above, "%lu0", (unsigned long)LONG_MAX / 10 + 1);
        } else if (f->kind == TT_FLAG_DOUBLE) {
            /* A small step out, but not into the denormals strtod refuses. */
            snprintf(below, sizeof below, "%.17g", f->dlo - fmax(fabs(f->dlo) * 1e-9, 1e-12));
            snprintf(above, sizeof above, "%.17g", f->dhi + fmax(fabs(f->dhi) * 1e-9, 1e-12));
        } else {
            continue;
        }
        for (int k = 0; k < 2; k++) {
            const char *v = k ? above : below;
            if (!v[0])
                continue;
            tt_run_config c;
            tt_err e;
            ck_assert_msg(parse(&c, &e, NULL, f->name, v, NULL) == -1, "%s %s accepted",
                          f->name, v);
            char want[128];
            snprintf(want, sizeof want, "%s must be between ", f->name);
            ck_assert_msg(strncmp(e.msg, want, strlen(want)) == 0, "%s %s: %s", f->name, v, e.msg);
        }
    }
}
END_TEST

START_TEST(special_rows)
{
    tt_run_config c;
    tt_err e;
    ck_assert_int_eq(parse(&c, &e, NULL, "-h", NULL), 1);
    ck_assert_int_eq(parse(&c, &e, NULL, "--steps", "3", "--version", NULL), 1);
    /* A seed above 2^32 survives the trip through the long. */
    ck_assert_int_eq(parse(&c, &e, NULL, "--seed=9000000000", NULL), 0);
    ck_assert(c.seed == 9000000000ULL && (c.given & TT_GIVEN_SEED));
    ck_assert_int_eq(parse(&c, &e, NULL, "--tp-mlp", "gather", "--report", "memory", NULL), 0);
    ck_assert(c.tp_mlp_gather == 1 && c.report_memory == 1 && c.report_comm == 0);
    ck_assert_int_eq(parse(&c, &e, NULL, "--report=comm,memory", "--tp-mlp=megatron", NULL), 0);
    ck_assert(c.tp_mlp_gather == 0 && c.report_memory == 1 && c.report_comm == 1);
    /* Sizes take K, M, G and T, up to the 1000T the range's message names. */
    ck_assert_int_eq(parse(&c, &e, NULL, "--dp-bucket", "1000T", "--gpu-mem=2t", NULL), 0);
    ck_assert(c.dp_bucket == (size_t)1000 << 40 && c.gpu_mem == (size_t)2 << 40);
    /* ... and the units the program prints sizes in: MiB is M. */
    ck_assert_int_eq(parse(&c, &e, NULL, "--gpu-mem", "16MiB", "--dp-bucket=256KiB", NULL), 0);
    ck_assert(c.gpu_mem == (size_t)16 << 20 && c.dp_bucket == (size_t)256 << 10);
    /* --watchdog takes 0 (off) below its range of 1 s and up. */
    ck_assert_int_eq(parse(&c, &e, NULL, "--watchdog", "0", NULL), 0);
    ck_assert(c.watchdog == 0);
    ck_assert_int_eq(parse(&c, &e, NULL, "--watchdog=1", NULL), 0);
    ck_assert(c.watchdog == 1);
    /* Interleaving defaults to two chunks per stage, unless told otherwise. */
    ck_assert_int_eq(parse(&c, &e, NULL, "--schedule", "interleaved", NULL), 0);
    ck_assert(c.virtual_stages == 2 && !(c.given & TT_GIVEN_VIRTUAL));
    ck_assert_int_eq(parse(&c, &e, NULL, "--virtual-stages", "3", "--schedule=interleaved", NULL),
                     0);
    ck_assert(c.virtual_stages == 3 && (c.given & TT_GIVEN_VIRTUAL));
    /* Schedules in the papers' spelling. */
    ck_assert_int_eq(parse(&c, &e, NULL, "--schedule", "1F1B", NULL), 0);
    ck_assert_int_eq(c.schedule, TT_SCHED_1F1B);
    /* and every other word of a choice or list in any case alike */
    ck_assert_int_eq(parse(&c, &e, NULL, "--recompute", "Full", "--report", "Comm,MEMORY", NULL),
                     0);
    ck_assert(c.recompute == TT_RECOMPUTE_FULL && c.report_comm && c.report_memory &&
              !c.report_shards);
    ck_assert_int_eq(parse(&c, &e, NULL, "--clock", "wall", "--cluster", "dgx-h100", NULL), 0);
    ck_assert(c.clock_wall == 1 && strcmp(c.cluster, "dgx-h100") == 0);
    ck_assert_int_eq(parse(&c, &e, NULL, "--no-spot-check", "--quiet", NULL), 0);
    ck_assert(c.spot_check == 0 && c.quiet == 1 && c.given == 0);
    /* The fault module judges the name; the parser only keeps it. */
    ck_assert_int_eq(parse(&c, &e, NULL, "--inject-bug", "list", NULL), 0);
    ck_assert_str_eq(c.inject_bug, "list");
    ck_assert_int_eq(parse(&c, &e, NULL, "--prompt", "-h", "--layers", "2", NULL), 0);
    ck_assert(strcmp(c.prompt, "-h") == 0 && c.model.L == 2 && c.given == TT_GIVEN_LAYERS);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("flags_values");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, bad_values_refused);
    tcase_add_test(tc, ranges_enforced);
    tcase_add_test(tc, special_rows);
    suite_add_tcase(s, tc);
    return tt_check_run(s);
}
