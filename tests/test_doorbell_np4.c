/* test_doorbell_np4.c - waiting asleep (tt/comm/doorbell.h) and the
 * reductions that go with it (tt/comm/pair_reduce.h, tt_allreduce) on 4
 * ranks of one host:
 *  - a two-member all-reduce by exchange gives MPI_Allreduce's bits (sum of
 *    random floats; a NaN under max gives both members one answer), and
 *    maxloc's ties go to the lower index;
 *  - the same sum through the pair's shared slots (tt_pair_host_allreduce)
 *    gives MPI_Allreduce's bits for sizes from 1 float to past the first
 *    slot (the mapping grows), many times in a row (the slots' parities),
 *    returns the larger clock, and leaves what it cannot do to MPI; its
 *    all-gather and reduce-scatter (in place too) equal MPI's; a sum made
 *    in this member's slot (tt_pair_host_slot, tt_allreduce_space) and
 *    summed out of place gives the same bits without the copy;
 *  - tt_clock_max_n gives each value's maximum over the members, a few
 *    through the doorbells' page, more through MPI;
 *  - the shared-memory gather returns every member's bytes in rank order,
 *    over and over (the records' two rows), and its maximum is the largest;
 *  - tt_allreduce of a few numbers over 4 members equals the rank-order sum
 *    worked out here (tests/test_doorbell.sh shows whole runs give the
 *    same bits with the bells off);
 *  - a rank waiting 300 ms for a message sleeps: it uses well under half of
 *    a third of that in CPU time, and far less than a plain MPI_Recv, the
 *    control, which polls. */
#include <check.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tt/comm/comm.h"
#include "tt/comm/doorbell.h"
#include "tt/comm/grid.h"
#include "tt/comm/pair_reduce.h"

#define TT_CHECK_MPI
#include "check_run.h"

static tt_grid g;
static int rank;

/* A float of member r's i-th value: spread over many binades so that the
 * order of a sum matters for three or more members. */
static float value(int r, int i)
{
    unsigned x = (unsigned)(r * 7919 + i * 104729 + 17) * 2654435761u;
    return ((float)(x % 20001) - 10000.0f) * powf(2.0f, (float)((int)(x >> 24) % 21 - 10));
}

START_TEST(pair_equals_mpi)
{
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &pair);
    enum { N = 5000 };
    float *mine = malloc(N * sizeof *mine), *ref = malloc(N * sizeof *ref);
    for (int i = 0; i < N; i++)
        mine[i] = ref[i] = value(rank, i);
    MPI_Allreduce(MPI_IN_PLACE, ref, N, MPI_FLOAT, MPI_SUM, pair);
    tt_pair_req p;
    ck_assert_int_eq(tt_pair_start(pair, mine, N, MPI_FLOAT, MPI_SUM, 7, &p), 0);
    tt_pair_finish(&p);
    tt_pair_flush();
    ck_assert_msg(memcmp(mine, ref, N * sizeof *mine) == 0, "pair sum differs from MPI_Allreduce");
    /* max with a NaN on member 0: both members get the same bits */
    float m[2] = {rank % 2 == 0 ? NAN : 1.0f, rank % 2 == 0 ? 2.0f : NAN}, other[2];
    ck_assert_int_eq(tt_pair_start(pair, m, 2, MPI_FLOAT, MPI_MAX, 7, &p), 0);
    tt_pair_finish(&p);
    tt_pair_flush();
    int partner = rank ^ 1;
    MPI_Sendrecv(m, 2, MPI_FLOAT, partner, 9, other, 2, MPI_FLOAT, partner, 9, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    ck_assert_msg(memcmp(m, other, sizeof m) == 0, "max with a NaN: the members disagree");
    /* maxloc: a tie goes to the lower index on both */
    struct { float v; int i; } best = {3.0f, 10 - rank};
    ck_assert_int_eq(tt_pair_start(pair, &best, 1, MPI_FLOAT_INT, MPI_MAXLOC, 7, &p), 0);
    tt_pair_finish(&p);
    tt_pair_flush();
    ck_assert_int_eq(best.i, 10 - (rank | 1));
    /* what a pair does not combine goes back to MPI */
    unsigned u = 1u << rank;
    ck_assert_int_eq(tt_pair_start(pair, &u, 1, MPI_UNSIGNED, MPI_BOR, 7, &p), -1);
    free(mine);
    free(ref);
    MPI_Comm_free(&pair);
}
END_TEST

START_TEST(host_pair_equals_mpi)
{
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &pair);
    /* 1 float to 100000 (400 KB: past the first 64 KiB slot), back down */
    static const int sizes[] = {1, 7, 16, 5000, 16384, 16385, 100000, 3, 40000, 1};
    enum { MAXN = 100000 };
    float *mine = malloc(MAXN * sizeof *mine), *ref = malloc(MAXN * sizeof *ref);
    for (int k = 0; k < (int)(sizeof sizes / sizeof *sizes); k++) {
        const int n = sizes[k];
        for (int i = 0; i < n; i++)
            mine[i] = ref[i] = value(rank + k, i);
        MPI_Allreduce(MPI_IN_PLACE, ref, n, MPI_FLOAT, MPI_SUM, pair);
        double clock = 10.0 * k + rank % 2; /* member 1's is later */
        ck_assert_int_eq(tt_pair_host_allreduce(pair, mine, n, MPI_FLOAT, MPI_SUM, &clock), 0);
        ck_assert_msg(memcmp(mine, ref, (size_t)n * sizeof *mine) == 0,
                      "size %d: the shared-slot sum differs from MPI_Allreduce", n);
        ck_assert(clock == 10.0 * k + 1);
    }
    /* all-gather and reduce-scatter through the same slots, out of place
     * and in place, against MPI's (data movement and a + b: the same bits) */
    enum { G = 3000 };
    float send[2 * G], got[2 * G], want[2 * G];
    for (int i = 0; i < 2 * G; i++)
        send[i] = value(rank + 11, i);
    MPI_Allgather(send, G, MPI_FLOAT, want, G, MPI_FLOAT, pair);
    ck_assert_int_eq(tt_pair_host_allgather(pair, send, got, G, MPI_FLOAT, NULL), 0);
    ck_assert(memcmp(got, want, sizeof want) == 0);
    /* in place: only this member's block is there, the other's is NaN */
    for (int i = 0; i < 2 * G; i++)
        got[i] = NAN;
    memcpy(got + (rank % 2) * G, send, G * sizeof *send);
    ck_assert_int_eq(tt_pair_host_allgather(pair, MPI_IN_PLACE, got, G, MPI_FLOAT, NULL), 0);
    ck_assert_msg(memcmp(got, want, sizeof want) == 0, "in-place all-gather differs from MPI's");
    MPI_Reduce_scatter_block(send, want, G, MPI_FLOAT, MPI_SUM, pair);
    double clock = 5.0 - rank % 2; /* member 0's is later */
    ck_assert_int_eq(tt_pair_host_reduce_scatter(pair, send, got, G, MPI_FLOAT, &clock), 0);
    ck_assert(memcmp(got, want, G * sizeof *got) == 0);
    ck_assert(clock == 5.0);
    memcpy(got, send, sizeof send);
    ck_assert_int_eq(tt_pair_host_reduce_scatter(pair, MPI_IN_PLACE, got, G, MPI_FLOAT, NULL), 0);
    ck_assert_msg(memcmp(got, want, G * sizeof *got) == 0,
                  "in-place reduce-scatter differs from MPI's");
    /* two NaNs with other payloads (a vector block and a tail): both
     * members get member 0's, whichever side of the sum its buffer is */
    float q[19], q_other[19];
    for (int i = 0; i < 19; i++) {
        unsigned bits = 0x7fc00001u + (unsigned)(rank % 2);
        memcpy(&q[i], &bits, sizeof bits);
    }
    ck_assert_int_eq(tt_pair_host_allreduce(pair, q, 19, MPI_FLOAT, MPI_SUM, NULL), 0);
    MPI_Sendrecv(q, 19, MPI_FLOAT, rank ^ 1, 3, q_other, 19, MPI_FLOAT, rank ^ 1, 3,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    ck_assert_msg(memcmp(q, q_other, sizeof q) == 0, "NaN + NaN: the members disagree");
    /* a sum of nothing is still a meeting, first or not */
    ck_assert_int_eq(tt_pair_host_allreduce(pair, q, 0, MPI_FLOAT, MPI_SUM, NULL), 0);
    /* ints under max, no clock */
    int v[3] = {rank, -rank, 5};
    ck_assert_int_eq(tt_pair_host_allreduce(pair, v, 3, MPI_INT, MPI_MAX, NULL), 0);
    ck_assert_int_eq(v[0], rank | 1);
    ck_assert_int_eq(v[1], -(rank & ~1));
    ck_assert_int_eq(v[2], 5);
    /* not a pair, or not an operation it folds: MPI's job */
    unsigned u = 1u << rank;
    ck_assert_int_eq(tt_pair_host_allreduce(pair, &u, 1, MPI_UNSIGNED, MPI_BOR, NULL), -1);
    ck_assert_int_eq(tt_pair_host_allreduce(MPI_COMM_WORLD, mine, 4, MPI_FLOAT, MPI_SUM, NULL), -1);
    free(mine);
    free(ref);
    MPI_Comm_free(&pair);
}
END_TEST

START_TEST(sum_made_in_the_slot)
{
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &pair);
    /* made where the exchange reads it, no copy: the same bits as MPI's,
     * through a growing mapping (16385 floats pass the first 64 KiB slot)
     * and both parities (an in-place sum between) */
    static const int sizes[] = {5000, 16385, 100000, 7, 40000};
    enum { MAXN = 100000 };
    float *ref = malloc(MAXN * sizeof *ref), *out = malloc(MAXN * sizeof *out);
    for (int k = 0; k < (int)(sizeof sizes / sizeof *sizes); k++) {
        const int n = sizes[k];
        float *space = tt_pair_host_slot(pair, (size_t)n * sizeof(float));
        ck_assert_ptr_nonnull(space);
        ck_assert_ptr_eq(tt_pair_host_slot(pair, (size_t)n * sizeof(float)), space);
        for (int i = 0; i < n; i++)
            space[i] = ref[i] = value(rank + 3 * k, i);
        MPI_Allreduce(MPI_IN_PLACE, ref, n, MPI_FLOAT, MPI_SUM, pair);
        double clock = 2.0 * k + rank % 2;
        ck_assert_int_eq(tt_pair_host_allreduce_to(pair, space, out, n, MPI_FLOAT, MPI_SUM, &clock), 0);
        ck_assert_msg(memcmp(out, ref, (size_t)n * sizeof *out) == 0,
                      "size %d: the sum made in the slot differs from MPI_Allreduce", n);
        ck_assert(clock == 2.0 * k + 1);
        ck_assert_int_eq(tt_pair_host_allreduce(pair, out, 1, MPI_FLOAT, MPI_SUM, NULL), 0);
    }
    /* past the largest slot, or not a pair: no slot */
    ck_assert_ptr_null(tt_pair_host_slot(pair, ((size_t)16 << 20) + 4));
    ck_assert_ptr_null(tt_pair_host_slot(MPI_COMM_WORLD, 64));
    /* the grid's calls: a pair (the PP group here) gets its slot, a group
     * of 4 its own buffer back; out of place equals in place */
    float own[300], sum[300], want[300];
    for (int i = 0; i < 300; i++)
        want[i] = own[i] = value(rank, i);
    tt_allreduce(&g, TT_GROUP_PP, want, 300, MPI_FLOAT, MPI_SUM);
    float *made = tt_allreduce_space(&g, TT_GROUP_PP, own, 300, MPI_FLOAT);
    ck_assert_ptr_ne(made, own);
    memcpy(made, own, sizeof own);
    tt_allreduce_to(&g, TT_GROUP_PP, made, sum, 300, MPI_FLOAT, MPI_SUM);
    ck_assert(memcmp(sum, want, sizeof sum) == 0);
    ck_assert_ptr_eq(tt_allreduce_space(&g, TT_GROUP_OTHER, own, 300, MPI_FLOAT), own);
    memcpy(want, own, sizeof own);
    tt_allreduce(&g, TT_GROUP_OTHER, want, 300, MPI_FLOAT, MPI_SUM);
    tt_allreduce_to(&g, TT_GROUP_OTHER, own, sum, 300, MPI_FLOAT, MPI_SUM);
    ck_assert(memcmp(sum, want, sizeof sum) == 0);
    free(ref);
    free(out);
    MPI_Comm_free(&pair);
}
END_TEST

START_TEST(clock_max_of_several)
{
    /* two values in one meeting (the doorbells' page), and ten (over the
     * page's slot: MPI), each the largest of the members' */
    double two[2] = {rank, -rank};
    tt_clock_max_n(&g, TT_GROUP_OTHER, two, 2);
    ck_assert(two[0] == 3.0 && two[1] == 0.0);
    double ten[10];
    for (int i = 0; i < 10; i++)
        ten[i] = (i + rank) % 4;
    tt_clock_max_n(&g, TT_GROUP_OTHER, ten, 10);
    for (int i = 0; i < 10; i++)
        ck_assert(ten[i] == 3.0);
    /* the PP groups (tp 1, pp 2, dp 2: world rank = dp + 2 pp) are {0, 2} and {1, 3} */
    ck_assert(tt_clock_max(&g, TT_GROUP_PP, 1.5 * rank) == 1.5 * (rank | 2));
}
END_TEST

START_TEST(gather_in_rank_order)
{
    for (int round = 0; round < 5; round++) {
        int mine[3] = {rank, round, rank * round}, all[12];
        ck_assert_int_eq(tt_bell_allgather(MPI_COMM_WORLD, mine, sizeof mine, all), 0);
        for (int r = 0; r < 4; r++) {
            ck_assert_int_eq(all[3 * r], r);
            ck_assert_int_eq(all[3 * r + 1], round);
            ck_assert_int_eq(all[3 * r + 2], r * round);
        }
        double t = 1.5 * ((rank + round) % 4);
        ck_assert_int_eq(tt_bell_gather_max(MPI_COMM_WORLD, &t), 0);
        ck_assert(t == 4.5);
    }
    /* more bytes than a slot holds: the caller must use MPI */
    char big[TT_BELL_SLOT + 1] = {0}, out[4 * (TT_BELL_SLOT + 1)];
    ck_assert_int_eq(tt_bell_allgather(MPI_COMM_WORLD, big, sizeof big, out), -1);
}
END_TEST

/* Member r's k-th double: large values that cancel and small ones that are
 * rounded away beside them, by how much depending on what they are added
 * to: the order of the sum matters (checked below). */
static double term(int r, int k)
{
    static const double x[4][3] = {{1e16, 3e16, -7e15}, {1.0, 3.0, 1.0},
                                   {-1e16, -3e16, 7e15}, {1.0, 1.0, 3.0}};
    return x[r][k];
}

START_TEST(small_allreduce_in_rank_order)
{
    double v[3], want[3], backwards[3];
    for (int k = 0; k < 3; k++) {
        v[k] = term(rank, k);
        /* ((x0 + x1) + x2) + x3, worked out on every rank */
        want[k] = term(0, k);
        for (int r = 1; r < 4; r++)
            want[k] += term(r, k);
        backwards[k] = term(3, k);
        for (int r = 2; r >= 0; r--)
            backwards[k] += term(r, k);
    }
    ck_assert_msg(memcmp(want, backwards, sizeof want) != 0,
                  "the values sum to the same bits in any order: the test could not fail");
    tt_allreduce(&g, TT_GROUP_OTHER, v, 3, MPI_DOUBLE, MPI_SUM);
    ck_assert_msg(memcmp(v, want, sizeof v) == 0, "%.17g %.17g %.17g against %.17g %.17g %.17g",
                  v[0], v[1], v[2], want[0], want[1], want[2]);
}
END_TEST

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* The CPU time rank pp 1 spends receiving what pp 0 sends after 300 ms,
 * through tt_recv (asleep) or, for the control, a plain MPI_Recv (Open MPI
 * polls its shared-memory queues: a busy core). */
static double cpu_waiting(int plain)
{
    double used = 0.0;
    int payload = 42;
    if (g.pp_rank == 0) {
        struct timespec ts = {0, 300000000L};
        nanosleep(&ts, NULL);
        MPI_Request req;
        tt_isend(&g, &payload, 1, MPI_INT, 1, 5, &req);
        tt_wait_all(1, &req);
    } else {
        payload = 0;
        double c0 = cpu_seconds();
        if (plain)
            MPI_Recv(&payload, 1, MPI_INT, 0, 5, g.pp_comm, MPI_STATUS_IGNORE);
        else
            tt_recv(&g, &payload, 1, MPI_INT, 0, 5);
        used = cpu_seconds() - c0;
        ck_assert_int_eq(payload, 42);
    }
    return used;
}

START_TEST(waiting_sleeps)
{
    /* The control first: a measure that cannot see MPI's polling could not
     * see ours either. */
    double polled = cpu_waiting(1);
    double used = cpu_waiting(0);
    if (g.pp_rank == 1) {
        printf("waiting 300 ms for a message: %.3f s of CPU through MPI_Recv, %.3f s through tt_recv\n",
               polled, used);
        /* Here the control used 0.15 to 0.24 s (two pollers share two
         * cores with the machine), tt_recv 0.008 to 0.019 s. */
        ck_assert_msg(polled > 2 * used + 0.03, "the control, MPI_Recv, used %.3f s of CPU waiting 300 ms, "
                      "tt_recv %.3f s: this measure cannot tell polling from sleeping here", polled, used);
        ck_assert_msg(used < 0.1, "waiting 300 ms for a message used %.3f s of CPU", used);
    }
}
END_TEST

int main(int argc, char **argv)
{
    int threads;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &threads);
    int world;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (world != 4) {
        fprintf(stderr, "run on 4 ranks\n");
        MPI_Finalize();
        return EXIT_FAILURE;
    }
    tt_bell_init();
    tt_grid_init(&g, 1, 2, 2, MPI_COMM_WORLD);
    Suite *s = suite_create("doorbell");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, pair_equals_mpi);
    tcase_add_test(tc, host_pair_equals_mpi);
    tcase_add_test(tc, sum_made_in_the_slot);
    tcase_add_test(tc, clock_max_of_several);
    tcase_add_test(tc, gather_in_rank_order);
    tcase_add_test(tc, small_allreduce_in_rank_order);
    tcase_add_test(tc, waiting_sleeps);
    suite_add_tcase(s, tc);
    int status = tt_check_run_mpi(s);
    tt_pair_flush();
    tt_pair_host_free();
    tt_grid_free(&g);
    tt_bell_finalize();
    MPI_Finalize();
    return status;
}
