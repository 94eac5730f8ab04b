/* test_grid_comm_np8.c - the virtual GPU grid and the counted communication
 * layer on 8 ranks (tp 2 x pp 2 x dp 2): coordinates and groups against the
 * rank formula, every collective with rank-valued inputs against results
 * worked out by hand, and the counters against the calls made. Also the pure
 * layout chooser and checker (no MPI). */
#include <check.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "tt/comm/comm.h"
#include "tt/comm/grid.h"

#define TT_CHECK_MPI
#include "check_run.h"

static tt_grid g;

START_TEST(coordinates)
{
    /* world_rank = tp_rank + tp * (dp_rank + dp * pp_rank) */
    ck_assert_int_eq(g.world_rank, g.tp_rank + 2 * (g.dp_rank + 2 * g.pp_rank));
    int r;
    MPI_Comm_rank(g.tp_comm, &r);
    ck_assert_int_eq(r, g.tp_rank);
    MPI_Comm_rank(g.dp_comm, &r);
    ck_assert_int_eq(r, g.dp_rank);
    MPI_Comm_rank(g.pp_comm, &r);
    ck_assert_int_eq(r, g.pp_rank);
    /* Stage neighbours: same tp and dp, pp -+ 1, i.e. world rank -+ 4. */
    ck_assert_int_eq(g.prev_stage, g.pp_rank == 0 ? MPI_PROC_NULL : g.pp_rank - 1);
    ck_assert_int_eq(g.next_stage, g.pp_rank == 1 ? MPI_PROC_NULL : g.pp_rank + 1);
    char name[48];
    tt_gpu_name(&g, 5, name, sizeof name);
    ck_assert_str_eq(name, "gpu5(dp0,pp1,tp1)");
}
END_TEST

/* Members of this rank's group along an axis, as world ranks. */
static void members(tt_group group, int *out)
{
    for (int i = 0; i < 2; i++) {
        int tp = g.tp_rank, dp = g.dp_rank, pp = g.pp_rank;
        if (group == TT_GROUP_TP) tp = i;
        if (group == TT_GROUP_DP) dp = i;
        if (group == TT_GROUP_PP) pp = i;
        out[i] = tp + 2 * (dp + 2 * pp); /* the layout's rule, by hand */
        ck_assert_int_eq(tt_grid_rank_of(&g, dp, pp, tp), out[i]);
    }
}

START_TEST(collectives_and_counters)
{
    tt_comm_stats_reset();
    tt_group groups[3] = {TT_GROUP_TP, TT_GROUP_PP, TT_GROUP_DP};
    for (int k = 0; k < 3; k++) {
        int mem[2];
        members(groups[k], mem);
        /* all-reduce of (world rank, 1) = (sum of members' ranks, group size) */
        int v[2] = {g.world_rank, 1};
        tt_allreduce(&g, groups[k], v, 2, MPI_INT, MPI_SUM);
        ck_assert_int_eq(v[0], mem[0] + mem[1]);
        ck_assert_int_eq(v[1], 2);
        /* all-gather of (world rank) lists the members in group-rank order */
        int all[2] = {-1, -1};
        tt_allgather(&g, groups[k], &g.world_rank, all, 1, MPI_INT);
        ck_assert_int_eq(all[0], mem[0]);
        ck_assert_int_eq(all[1], mem[1]);
        /* reduce-scatter of [r, 10r, 100r, 1000r]: group rank i gets block i
         * of the sum: (r0 + r1) * (1, 10) or (100, 1000) */
        float in[4] = {(float)g.world_rank, 10.0f * g.world_rank, 100.0f * g.world_rank,
                       1000.0f * g.world_rank};
        float out[2];
        tt_reduce_scatter(&g, groups[k], in, out, 2, MPI_FLOAT);
        int me = mem[0] == g.world_rank ? 0 : 1;
        float s = (float)(mem[0] + mem[1]);
        ck_assert_float_eq(out[0], s * (me == 0 ? 1.0f : 100.0f));
        ck_assert_float_eq(out[1], s * (me == 0 ? 10.0f : 1000.0f));
        /* broadcast from group rank 1 */
        double b[3] = {g.world_rank, g.world_rank, g.world_rank};
        tt_bcast(&g, groups[k], b, 3, MPI_DOUBLE, 1);
        ck_assert(b[0] == mem[1] && b[2] == mem[1]);
    }
    /* Stage 0 sends 5 floats to stage 1; stage 1 answers with 3 doubles. */
    float f[5] = {0};
    double d[3] = {0};
    if (g.pp_rank == 0) {
        for (int i = 0; i < 5; i++)
            f[i] = (float)(g.world_rank * 10 + i);
        tt_send(&g, f, 5, MPI_FLOAT, g.next_stage, 1);
        tt_recv(&g, d, 3, MPI_DOUBLE, g.next_stage, 2);
        ck_assert(d[2] == g.world_rank + 4 + 0.5); /* the stage-1 GPU of this pipeline */
    } else {
        tt_recv(&g, f, 5, MPI_FLOAT, g.prev_stage, 1);
        ck_assert_float_eq(f[4], (float)((g.world_rank - 4) * 10 + 4));
        d[2] = g.world_rank + 0.5;
        tt_send(&g, d, 3, MPI_DOUBLE, g.prev_stage, 2);
    }
    /* Sends to MPI_PROC_NULL are no-ops and are not counted. */
    tt_send(&g, f, 5, MPI_FLOAT, MPI_PROC_NULL, 3);

    const tt_comm_stats *st = tt_comm_stats_get();
    for (int k = 0; k < 3; k++) {
        const tt_comm_count *c = st->c[groups[k]];
        ck_assert_int_eq(c[TT_OP_ALLREDUCE].calls, 1);
        ck_assert_int_eq(c[TT_OP_ALLREDUCE].bytes, 2 * 4);      /* 2 ints */
        ck_assert_int_eq(c[TT_OP_ALLGATHER].calls, 1);
        ck_assert_int_eq(c[TT_OP_ALLGATHER].bytes, 2 * 4);      /* 2 members x 1 int */
        ck_assert_int_eq(c[TT_OP_REDUCE_SCATTER].calls, 1);
        ck_assert_int_eq(c[TT_OP_REDUCE_SCATTER].bytes, 4 * 4); /* the full input */
        ck_assert_int_eq(c[TT_OP_BCAST].calls, 1);
        ck_assert_int_eq(c[TT_OP_BCAST].bytes, 3 * 8);
    }
    const tt_comm_count *pp = st->c[TT_GROUP_PP];
    ck_assert_int_eq(pp[TT_OP_SEND].calls, 1);
    ck_assert_int_eq(pp[TT_OP_RECV].calls, 1);
    ck_assert_int_eq(pp[TT_OP_SEND].bytes, g.pp_rank == 0 ? 5 * 4 : 3 * 8);
    ck_assert_int_eq(pp[TT_OP_RECV].bytes, g.pp_rank == 0 ? 3 * 8 : 5 * 4);
    ck_assert_int_eq(st->c[TT_GROUP_OTHER][TT_OP_ALLREDUCE].calls, 0);
}
END_TEST

START_TEST(layout_choice)
{
    tt_layout_rules any = {.heads = 12, .layers = 12, .batch = 48, .micro_batches = 1};
    int tp = -1, pp = -1, dp = -1;
    ck_assert_int_eq(tt_grid_choose(12, &tp, &pp, &dp, &any, NULL), 0);
    ck_assert(tp == 2 && pp == 3 && dp == 2);
    tp = pp = dp = -1;
    ck_assert_int_eq(tt_grid_choose(8, &tp, &pp, &dp, &any, NULL), 0);
    ck_assert(tp == 2 && pp == 2 && dp == 2);
    tp = 4, pp = -1, dp = -1; /* a given size is kept */
    ck_assert_int_eq(tt_grid_choose(8, &tp, &pp, &dp, &any, NULL), 0);
    ck_assert(tp == 4 && pp * dp == 2);
    /* One head and one block allow neither TP nor PP: dp takes the world. */
    tt_layout_rules dp_only = {.heads = 1, .layers = 1, .batch = 48, .micro_batches = 2};
    tp = pp = dp = -1;
    ck_assert_int_eq(tt_grid_choose(4, &tp, &pp, &dp, &dp_only, NULL), 0);
    ck_assert(tp == 1 && pp == 1 && dp == 4);
}
END_TEST

START_TEST(bad_layouts)
{
    tt_layout_rules r = {.heads = 6, .layers = 4, .batch = 48, .micro_batches = 2};
    tt_err e;
    int tp = 1, pp = 1, dp = 3;
    ck_assert_int_eq(tt_grid_choose(4, &tp, &pp, &dp, &r, &e), -1);
    ck_assert_msg(strstr(e.msg, "tp 1 x pp 1 x dp 3 = 3 GPUs, but 4 ranks were started") &&
                  strstr(e.msg, "\n   1  1  4") && strstr(e.msg, "mpirun --oversubscribe -np 3 "),
                  "%s", e.msg);
    tp = -1, pp = -1, dp = 0; /* a size of 0 given explicitly */
    ck_assert_int_eq(tt_grid_choose(4, &tp, &pp, &dp, &r, &e), -1);
    ck_assert_msg(strstr(e.msg, "--dp 0: every size must be at least 1") &&
                  strstr(e.msg, "\n   1  1  4"), "%s", e.msg);
    /* One rank started for tp 2: the count is the trouble, and the mpirun
     * line names the smallest count that works. */
    tp = 2, pp = -1, dp = -1;
    ck_assert_int_eq(tt_grid_choose(1, &tp, &pp, &dp, &r, &e), -1);
    ck_assert_msg(strstr(e.msg, "--tp 2 needs a multiple of 2 ranks, but only 1 rank was started") &&
                  strstr(e.msg, "\n  mpirun --oversubscribe -np 2 ./tiny_transformer --tp 2\n"),
                  "%s", e.msg);
    tt_layout_rules cmd = r;
    cmd.command = "./tiny_transformer --tp 4 --batch 48";
    tp = 4, pp = -1, dp = -1; /* 4 does not divide 6 heads: no count helps */
    ck_assert_int_eq(tt_grid_choose(2, &tp, &pp, &dp, &cmd, &e), -1);
    ck_assert_msg(strstr(e.msg, "tp 4 must divide --heads 6") && !strstr(e.msg, "mpirun"), "%s",
                  e.msg);
    /* tp 5 on 12 ranks with 12 heads breaks both rules, and the 18 layouts
     * that work (tp 1, 2, 3, 4, 6, 12, each with every pp dividing 12/tp: 6 +
     * 4 + 3 + 2 + 2 + 1) come as a table four to a line, sorted by tp then pp:
     * five lines, the last with two. */
    tt_layout_rules twelve = {.heads = 12, .layers = 12, .batch = 48, .micro_batches = 1};
    tp = 5, pp = -1, dp = -1;
    ck_assert_int_eq(tt_grid_choose(12, &tp, &pp, &dp, &twelve, &e), -1);
    ck_assert_msg(strstr(e.msg, "--tp 5 needs a multiple of 5 ranks, but 12 ranks were started; "
                                "tp 5 must divide --heads 12") &&
                  strstr(e.msg, "\n  tp pp dp    tp pp dp    tp pp dp    tp pp dp\n"
                                "   1  1 12     1  2  6     1  3  4     1  4  3\n") &&
                  strstr(e.msg, "\n   6  2  1    12  1  1") && !strstr(e.msg, "12  1  1\n"),
                  "%s", e.msg);
    /* Many layouts: the table stops within the message and says how many more. */
    tt_layout_rules many = {.heads = 720, .layers = 720, .batch = 720, .micro_batches = 1};
    tp = 7, pp = -1, dp = -1;
    ck_assert_int_eq(tt_grid_choose(720, &tp, &pp, &dp, &many, &e), -1);
    ck_assert_msg(strlen(e.msg) < sizeof e.msg - 1 && strstr(e.msg, " more)"), "%s", e.msg);
    tt_layout_rules b = {.heads = 1, .layers = 1, .batch = 10, .micro_batches = 1};
    tp = pp = dp = -1; /* dp 4 does not divide batch 10: nothing works on 4 */
    ck_assert_int_eq(tt_grid_choose(4, &tp, &pp, &dp, &b, &e), -1);
    ck_assert_msg(strstr(e.msg, "dp 4 must divide --batch 10") &&
                  strstr(e.msg, "no layout works on 4 ranks"), "%s", e.msg);
    /* A layout that breaks several rules names each. */
    ck_assert_int_eq(tt_layout_check(8, 4, 8, 1, &r, &e), -1);
    ck_assert_msg(strstr(e.msg, "= 32 GPUs, but only 8 ranks") && strstr(e.msg, "tp 4 must divide --heads 6") &&
                  strstr(e.msg, "pp 8 exceeds --layers 4"), "%s", e.msg);
    tt_layout_rules m = {.heads = 6, .layers = 4, .batch = 8, .micro_batches = 3}; /* 8/2 = 4 sequences per replica, 3 micro-batches */
    ck_assert_int_eq(tt_layout_check(2, 1, 1, 2, &m, &e), -1);
    ck_assert_msg(strstr(e.msg, "--micro-batches 3 must divide batch/dp = 8/2 = 4"), "%s", e.msg);
    ck_assert_int_eq(tt_layout_check(2, 1, 1, 2, &r, NULL), 0);
    ck_assert_int_eq(tt_layout_check(4, 4, 1, 1, &r, &e), -1); /* 4 does not divide 6 heads */
    ck_assert_msg(strstr(e.msg, "tp 4 must divide --heads 6"), "%s", e.msg);
}
END_TEST

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int world;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != 8) {
        fprintf(stderr, "run on 8 ranks\n");
        MPI_Finalize();
        return EXIT_FAILURE;
    }
    tt_grid_init(&g, 2, 2, 2, MPI_COMM_WORLD);
    Suite *s = suite_create("grid_comm");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, coordinates);
    tcase_add_test(tc, collectives_and_counters);
    tcase_add_test(tc, layout_choice);
    tcase_add_test(tc, bad_layouts);
    suite_add_tcase(s, tc);
    int status = tt_check_run_mpi(s);
    tt_grid_free(&g);
    MPI_Finalize();
    return status;
}
