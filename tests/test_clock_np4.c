/* test_clock_np4.c - the cost model and the virtual GPU clocks on 4 ranks
 * (tp 1 x dp 2 x pp 2, two GPUs per server: each stage is one server), every
 * figure worked out by hand from the cluster below: compute by FLOPs and by
 * bytes, a 2-stage pipeline transfer, ring all-reduces inside a server and
 * across two, a paused and a stopped clock. Also the classroom cluster's
 * calibration (doc/design.md section 12) for the default model. */
#include <check.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tt/comm/comm.h"
#include "tt/comm/grid.h"
#include "tt/core/cluster.h"
#include "tt/core/vclock.h"

#define TT_CHECK_MPI
#include "check_run.h"

static tt_grid g;

/* Round numbers: 5e8 FLOP/s achieved, 1 GB/s memory; NVLink 1 MB/s with a
 * 1 ms latency, network 100 kB/s with 10 ms. */
static const tt_cluster test_cluster = {
    .name = "test", .gpus_per_server = 2, .peak_flops = 8e9, .peak_flops_fp32 = 1e9,
    .gemm_efficiency = 0.5, .memory_bandwidth = 1e9, .gpu_memory_bytes = 1e9,
    .nvlink = {1e6, 1e-3}, .network = {1e5, 1e-2}};

#define EPS 1e-12
#define ck_near(a, b) ck_assert_msg(fabs((a) - (b)) <= EPS * (1 + fabs(b)), \
                                    "%s = %.15g, expected %.15g", #a, (double)(a), (double)(b))

START_TEST(cost_functions)
{
    const tt_cluster *c = &test_cluster;
    ck_near(tt_cost_compute(c, 1e9, 0), 2.0);          /* 1e9 / (1e9 x 0.5) */
    ck_near(tt_cost_compute(c, 0, 3e9), 3.0);          /* memory-bound: 3e9 / 1e9 */
    ck_near(tt_cost_compute(c, 1e9, 1e9), 2.0);        /* the larger of the two */
    ck_near(tt_cost_link(&c->network, 4000), 0.05);    /* 0.01 + 4000 / 1e5 */
    /* Ring all-reduce on 4: 2(n-1) = 6 steps of (alpha + B/n / bw). */
    ck_near(tt_cost_collective(&c->nvlink, TT_COLL_ALLREDUCE, 4, 4e6), 6 * (1e-3 + 1.0));
    ck_near(tt_cost_collective(&c->nvlink, TT_COLL_ALLGATHER, 4, 4e6), 3 * (1e-3 + 1.0));
    ck_near(tt_cost_collective(&c->nvlink, TT_COLL_REDUCE_SCATTER, 4, 4e6), 3 * (1e-3 + 1.0));
    ck_near(tt_cost_collective(&c->nvlink, TT_COLL_ALLREDUCE, 1, 4e6), 0.0);
    ck_near(tt_ring_bytes(TT_COLL_ALLREDUCE, 4, 4e6), 6e6); /* 2(n-1)/n */
    ck_near(tt_ring_bytes(TT_COLL_ALLGATHER, 4, 4e6), 3e6); /* (n-1)/n */
    const tt_link free_link = {0, 0};
    ck_near(tt_cost_collective(&free_link, TT_COLL_ALLREDUCE, 8, 1e9), 0.0);
    ck_assert_int_eq(tt_cluster_server(c, 3), 1);
}
END_TEST

/* A 2-stage pipeline with known FLOPs, then collectives on each kind of
 * group; the clock of every rank after each operation. */
START_TEST(pipeline_and_collectives)
{
    tt_vclock_setup(&test_cluster, TT_CLOCK_VIRTUAL, g.world_rank);
    tt_vclock_run(1);
    float buf[1000] = {0};
    const int first = g.pp_rank == 0;
    /* Stage 0 computes 1e9 FLOPs (2 s) and sends 4000 bytes across servers. */
    if (first) {
        tt_vclock_compute(1e9, 0);
        tt_send(&g, buf, 1000, MPI_FLOAT, g.next_stage, 7);
        ck_near(tt_vclock_now(), 2.0); /* the sender does not wait */
    } else {
        tt_recv(&g, buf, 1000, MPI_FLOAT, g.prev_stage, 7);
        ck_near(tt_vclock_now(), 2.0 + 0.01 + 4000 / 1e5); /* sent + alpha + bytes/bw */
        tt_vclock_compute(2e9, 0);                         /* 4 s more */
    }
    const double t_stage1 = 2.05 + 4.0;
    /* Non-blocking the other way: stage 1 sends at 6.05; stage 0, idle at
     * 2.0, goes on when the message arrives. */
    MPI_Request req = MPI_REQUEST_NULL;
    if (first)
        tt_recv(&g, buf, 1000, MPI_FLOAT, g.next_stage, 8);
    else
        tt_isend(&g, buf, 1000, MPI_FLOAT, g.prev_stage, 8, &req);
    tt_wait_all(first ? 0 : 1, &req);
    ck_near(tt_vclock_now(), first ? t_stage1 + 0.05 : t_stage1);
    /* PP all-reduce: the pair spans two servers, latest entry 6.1: two steps
     * of 0.01 + 2000 / 1e5 on the network. */
    double t = t_stage1 + 0.05 + 2 * (0.01 + 0.02);
    tt_allreduce(&g, TT_GROUP_PP, buf, 1000, MPI_FLOAT, MPI_SUM);
    ck_near(tt_vclock_now(), t);
    /* DP all-reduce inside a server: two steps of 0.001 + 2000 / 1e6. */
    t += 2 * (0.001 + 0.002);
    tt_allreduce(&g, TT_GROUP_DP, buf, 1000, MPI_FLOAT, MPI_SUM);
    ck_near(tt_vclock_now(), t);
    /* All four across two servers: six steps of 0.01 + 1000 / 1e5. */
    t += 6 * (0.01 + 0.01);
    tt_allreduce(&g, TT_GROUP_OTHER, buf, 1000, MPI_FLOAT, MPI_SUM);
    ck_near(tt_vclock_now(), t);
    /* All-gather on DP: the gathered 8000 bytes, one step of 4000. */
    float two[2000];
    t += 1 * (0.001 + 0.004);
    tt_allgather(&g, TT_GROUP_DP, buf, two, 1000, MPI_FLOAT);
    ck_near(tt_vclock_now(), t);
    /* Paused (the oracle): neither compute nor a collective moves it. */
    tt_vclock_pause();
    tt_vclock_compute(1e12, 0);
    tt_allreduce(&g, TT_GROUP_OTHER, buf, 1000, MPI_FLOAT, MPI_SUM);
    tt_vclock_resume();
    ck_near(tt_vclock_now(), t);
    /* Stopped (eval, sampling): the same. */
    tt_vclock_run(0);
    tt_vclock_compute(1e12, 0);
    tt_allreduce(&g, TT_GROUP_OTHER, buf, 1000, MPI_FLOAT, MPI_SUM);
    ck_near(tt_vclock_now(), t);
    /* Clock exchanges are not transfers of the modelled GPUs: the counters
     * hold only the calls made above (1 send or recv each way, the
     * all-reduces booked in their groups, 1 all-gather); the one made while
     * paused inside the step is the oracle's, booked apart. */
    const tt_comm_stats *st = tt_comm_stats_get();
    ck_assert_int_eq(st->c[TT_GROUP_PP][TT_OP_SEND].calls, 1);
    ck_assert_int_eq(st->c[TT_GROUP_PP][TT_OP_RECV].calls, 1);
    ck_assert_int_eq(st->c[TT_GROUP_OTHER][TT_OP_ALLREDUCE].calls, 2);
    ck_assert_int_eq(st->c[TT_GROUP_ORACLE][TT_OP_ALLREDUCE].calls, 1);
}
END_TEST

/* design.md section 12: on classroom, for the default model (C 96, T 64, 3
 * sequences per micro-batch, tp 2 inside a server, stages on servers of
 * their own), a block's TP all-reduces cost 10-30% of its compute and a
 * pipeline transfer 5-15% of a 2-block stage's forward. Compute here is the
 * matrix products and attention by the model-FLOPs count (the memory-bound
 * kernels would only lower both ratios a little). */
START_TEST(classroom_calibration)
{
    tt_cluster c;
    ck_assert_int_eq(tt_cluster_load(&c, "classroom", NULL), 0);
    const double C = 96, T = 64, N = 3 * T, tp = 2;
    const double block_flops = (24 * N * C * C + 4 * N * T * C) / tp;
    const double block = tt_cost_compute(&c, block_flops, 0);
    const double act = N * C * 4; /* one activation, bytes */
    const double tp_comm = 2 * tt_cost_collective(&c.nvlink, TT_COLL_ALLREDUCE, 2, act);
    const double pp_comm = tt_cost_link(&c.network, act);
    if (g.world_rank == 0)
        printf("classroom, default model: TP all-reduces %.1f%% of a block's compute, "
               "pipeline transfer %.1f%% of a stage's forward\n",
               100 * tp_comm / block, 100 * pp_comm / (2 * block));
    ck_assert(tp_comm / block >= 0.10 && tp_comm / block <= 0.30);
    ck_assert(pp_comm / (2 * block) >= 0.05 && pp_comm / (2 * block) <= 0.15);
    /* A TP group that crosses servers is slower: the lesson must show. */
    ck_assert(c.network.bandwidth * 1.5 <= c.nvlink.bandwidth);
}
END_TEST

/* Cluster files: a complete one, one based on a built-in, and bad ones named. */
START_TEST(cluster_files)
{
    if (g.world_rank != 0)
        return;
    char path[] = "/tmp/tt_clusterXXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs("{\"based_on\": \"dgx-a100\", \"name\": \"mine\", \"network_bandwidth\": 12.5e9}", f);
    fclose(f);
    tt_cluster c;
    tt_err e;
    ck_assert_int_eq(tt_cluster_load(&c, path, &e), 0);
    ck_assert_str_eq(c.name, "mine");
    ck_near(c.network.bandwidth, 12.5e9);
    ck_near(c.nvlink.bandwidth, 300e9); /* from dgx-a100 */
    f = fopen(path, "w");
    fputs("{\"based_on\": \"classroom\", \"nvlink_bandwidth\": -1}", f);
    fclose(f);
    ck_assert_int_eq(tt_cluster_load(&c, path, &e), -1);
    ck_assert_msg(strstr(e.msg, "nvlink_bandwidth must be a number"), "%s", e.msg);
    f = fopen(path, "w");
    fputs("{\"based_on\": \"classroom\", \"nvlink_speed\": 1}", f);
    fclose(f);
    ck_assert_int_eq(tt_cluster_load(&c, path, &e), -1);
    ck_assert_msg(strstr(e.msg, "unknown field \"nvlink_speed\""), "%s", e.msg);
    f = fopen(path, "w");
    fputs("{\"name\": \"partial\", \"gpus_per_server\": 8}", f);
    fclose(f);
    ck_assert_int_eq(tt_cluster_load(&c, path, &e), -1);
    ck_assert_msg(strstr(e.msg, "missing"), "%s", e.msg);
    unlink(path);
    ck_assert_int_eq(tt_cluster_load(&c, "dgx-b200", &e), -1);
    ck_assert_msg(strstr(e.msg, "classroom|dgx-a100|dgx-h100"), "%s", e.msg);
}
END_TEST

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int world;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != 4) {
        fprintf(stderr, "run on 4 ranks\n");
        MPI_Finalize();
        return EXIT_FAILURE;
    }
    tt_grid_init(&g, 1, 2, 2, MPI_COMM_WORLD);
    Suite *s = suite_create("clock");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, cost_functions);
    tcase_add_test(tc, pipeline_and_collectives);
    tcase_add_test(tc, classroom_calibration);
    tcase_add_test(tc, cluster_files);
    suite_add_tcase(s, tc);
    int status = tt_check_run_mpi(s);
    tt_grid_free(&g);
    MPI_Finalize();
    return status;
}
