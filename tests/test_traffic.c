/* test_traffic.c - the closed-form traffic formulas of doc/communication.md,
 * checked against numbers worked out by hand here (not against the program's
 * counters: the integration tests test_tp.sh, test_pp.sh and test_dp.sh
 * compare measured with expected). Each parallelism's formula is asked on its
 * own, then tt_comm_expected, which adds them up for one GPU of a layout.
 * Single process, no MPI: the grids and configurations are filled by hand. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tt/comm/tensor_parallel.h"
#include "tt/parallel/data_parallel.h"
#include "tt/parallel/pipeline_run.h"
#include "tt/show/report_comm.h"

#include "check_run.h"

/* The sum of calls and bytes over every cell outside group `except` (pass
 * TT_NGROUPS for all of them): a formula must leave the other groups alone. */
static long long others(const tt_comm_stats *s, int except)
{
    long long sum = 0;
    for (int g = 0; g < TT_NGROUPS; g++)
        for (int op = 0; g != except && op < TT_NOPS; op++)
            sum += s->c[g][op].calls + s->c[g][op].bytes;
    return sum;
}

#define CALLS(s, g, op) ((s).c[TT_GROUP_##g][TT_OP_##op].calls)
#define BYTES(s, g, op) ((s).c[TT_GROUP_##g][TT_OP_##op].bytes)

/* ---- TP ------------------------------------------------------------------ */

START_TEST(tp_first_stage)
{
    /* 64 tokens per step (4 sequences of 16), C = 32, 2 blocks, embeddings
     * but no loss, 2 micro-batches, 3 steps.
     * Calls per micro-batch: 4 per block (proj, fc2 forward; q/k/v, fc1
     * backward) = 8, + 1 for the embedding = 9; 3 steps x 2 mbs x 9 = 54.
     * Floats per step: 4 x 2 blocks x 64 x 32 = 16384, + 64 x 32 = 2048 for
     * the embedding = 18432; bytes 3 x 4 x 18432 = 221184. */
    tt_comm_stats s;
    memset(&s, 0, sizeof s);
    tp_expected_traffic(&s, 64, 32, 2, 1, 0, 0, 0, 2, 3);
    ck_assert_int_eq(CALLS(s, TP, ALLREDUCE), 54);
    ck_assert_int_eq(BYTES(s, TP, ALLREDUCE), 221184);
    ck_assert_int_eq(CALLS(s, TP, ALLGATHER), 0);
    ck_assert_int_eq(CALLS(s, TP, REDUCE_SCATTER), 0);
    ck_assert_int_eq(others(&s, TT_GROUP_TP), 0);
}
END_TEST

START_TEST(tp_middle_stage)
{
    /* Neither end: 32 tokens, C = 16, 3 blocks, 4 micro-batches, 2 steps.
     * Calls 2 x 4 x (4 x 3) = 96; floats per step 4 x 3 x 32 x 16 = 6144,
     * bytes 2 x 4 x 6144 = 49152. */
    tt_comm_stats s;
    memset(&s, 0, sizeof s);
    tp_expected_traffic(&s, 32, 16, 3, 0, 0, 0, 0, 4, 2);
    ck_assert_int_eq(CALLS(s, TP, ALLREDUCE), 96);
    ck_assert_int_eq(BYTES(s, TP, ALLREDUCE), 49152);
    /* --recompute full runs each block's forward again in its backward: 2
     * more all-reduces per block and micro-batch (2 x 4 x 2 x 3 = 48 calls)
     * of 32 x 16 floats each step (2 x 3 x 32 x 16 = 3072 floats, 2 steps x
     * 4 bytes = 24576 bytes). */
    memset(&s, 0, sizeof s);
    tp_expected_traffic(&s, 32, 16, 3, 0, 0, 0, 1, 4, 2);
    ck_assert_int_eq(CALLS(s, TP, ALLREDUCE), 96 + 48);
    ck_assert_int_eq(BYTES(s, TP, ALLREDUCE), 49152 + 24576);
}
END_TEST

START_TEST(tp_whole_model_with_gather)
{
    /* One stage holds everything, --tp-mlp gather: 16 tokens, C = 8, 1
     * block, 1 micro-batch, 1 step.
     * All-reduce calls: 4 (block) + 1 (embedding) + 1 (lm_head's input
     * gradient) + 3 (cross-entropy: max, target logit, sum of exps) = 9.
     * Floats: 4 x 16 x 8 = 512, + 128 (embedding), + 128 (lm_head), + 3 x 16
     * = 48 (cross-entropy) = 816; bytes 4 x 816 = 3264.
     * fc1 gathered: one all-gather of 16 x 4C = 512 floats = 2048 bytes
     * forward, one reduce-scatter of the same size backward. */
    tt_comm_stats s;
    memset(&s, 0, sizeof s);
    tp_expected_traffic(&s, 16, 8, 1, 1, 1, 1, 0, 1, 1);
    ck_assert_int_eq(CALLS(s, TP, ALLREDUCE), 9);
    ck_assert_int_eq(BYTES(s, TP, ALLREDUCE), 3264);
    ck_assert_int_eq(CALLS(s, TP, ALLGATHER), 1);
    ck_assert_int_eq(BYTES(s, TP, ALLGATHER), 2048);
    ck_assert_int_eq(CALLS(s, TP, REDUCE_SCATTER), 1);
    ck_assert_int_eq(BYTES(s, TP, REDUCE_SCATTER), 2048);
    /* It adds: a second call doubles every figure. */
    tp_expected_traffic(&s, 16, 8, 1, 1, 1, 1, 0, 1, 1);
    ck_assert_int_eq(CALLS(s, TP, ALLREDUCE), 18);
    ck_assert_int_eq(BYTES(s, TP, ALLGATHER), 4096);
}
END_TEST

START_TEST(tp_sequence_parallel)
{
    /* --sequence-parallel, one stage with everything: 16 tokens, C = 8, 1
     * block, 1 micro-batch, 1 step. Every gather and reduce-scatter moves a
     * full buffer of 16 x 8 = 128 floats = 512 bytes.
     * All-gathers: 6 per block (ln1, ln2 forward; the gradients of proj's
     * and fc2's outputs; ln2, ln1 again backward) + 1 (the embedding's
     * backward) + 2 (ln_f's output, forward and again backward) = 9: 4608
     * bytes. Reduce-scatters: 4 per block (proj, fc2 forward; fc1's and
     * q/k/v's input gradients) + 1 (the embedding) + 1 (lm_head's input
     * gradient) = 6: 3072 bytes. All-reduces: the cross-entropy's 3 (3 x 16
     * floats), the block's LayerNorm gradients (4C = 32 floats), ln_f's
     * (2C = 16): 5 calls, 4 x (48 + 32 + 16) = 384 bytes. */
    tt_comm_stats s;
    memset(&s, 0, sizeof s);
    tp_sp_expected_traffic(&s, 16, 8, 1, 1, 1, 0, 1, 1);
    ck_assert_int_eq(CALLS(s, TP, ALLGATHER), 9);
    ck_assert_int_eq(BYTES(s, TP, ALLGATHER), 4608);
    ck_assert_int_eq(CALLS(s, TP, REDUCE_SCATTER), 6);
    ck_assert_int_eq(BYTES(s, TP, REDUCE_SCATTER), 3072);
    ck_assert_int_eq(CALLS(s, TP, ALLREDUCE), 5);
    ck_assert_int_eq(BYTES(s, TP, ALLREDUCE), 384);
    ck_assert_int_eq(others(&s, TT_GROUP_TP), 0);
    /* A middle stage of 3 blocks, 4 micro-batches of 32 tokens (128 a step),
     * C = 16, 2 steps, --recompute full (the forward's 2 gathers and 2
     * reduce-scatters again). One collective position of a block moves
     * 128 x 16 floats = 8192 bytes a step over its 4 micro-batches.
     * Gathers: (6 + 2) x 3 blocks = 24 positions: 2 x 4 x 24 = 192 calls,
     * 2 x 24 x 8192 = 393216 bytes; reduce-scatters: (4 + 2) x 3 = 18: 144
     * calls, 294912 bytes; LayerNorm all-reduces: 2 x 4 x 3 = 24 calls of
     * 4C = 64 floats: 6144 bytes. */
    memset(&s, 0, sizeof s);
    tp_sp_expected_traffic(&s, 128, 16, 3, 0, 0, 1, 4, 2);
    ck_assert_int_eq(CALLS(s, TP, ALLGATHER), 192);
    ck_assert_int_eq(BYTES(s, TP, ALLGATHER), 393216);
    ck_assert_int_eq(CALLS(s, TP, REDUCE_SCATTER), 144);
    ck_assert_int_eq(BYTES(s, TP, REDUCE_SCATTER), 294912);
    ck_assert_int_eq(CALLS(s, TP, ALLREDUCE), 24);
    ck_assert_int_eq(BYTES(s, TP, ALLREDUCE), 6144);
}
END_TEST

/* ---- PP ------------------------------------------------------------------ */

/* A pipeline of p stages x v chunks, this GPU on `stage`, without MPI: the
 * formula reads only sizes and coordinates. Micro-batches of 2 sequences of
 * 16 tokens of width 32: every message is 2 x 16 x 32 floats = 4096 bytes. */
static tt_comm_stats pp_traffic(int p, int v, int dp, int stage, int micro_batches, long steps)
{
    tt_run_config rc;
    memset(&rc, 0, sizeof rc);
    rc.model.T = 16;
    rc.model.C = 32;
    rc.micro_batches = micro_batches;
    rc.batch = 2 * micro_batches * dp;
    rc.virtual_stages = v;
    tt_grid g = {.tp = 1, .pp = p, .dp = dp, .pp_rank = stage};
    tt_comm_stats s;
    memset(&s, 0, sizeof s);
    tt_pipe_expected_traffic(&s, &rc, &g, steps);
    ck_assert_int_eq(others(&s, TT_GROUP_PP), 0);
    return s;
}

START_TEST(pp_ends_and_middle)
{
    /* 4 stages, 2 micro-batches, dp 2, 3 steps. The first stage sends each
     * micro-batch's activation forward and receives its gradient: 1 send
     * and 1 recv per micro-batch, 3 x 2 = 6 of each, 6 x 4096 = 24576 bytes.
     * The last stage mirrors it (receives the activation, sends the
     * gradient back). A middle stage does both: 12 of each, 49152 bytes. */
    tt_comm_stats first = pp_traffic(4, 1, 2, 0, 2, 3);
    ck_assert_int_eq(CALLS(first, PP, SEND), 6);
    ck_assert_int_eq(BYTES(first, PP, SEND), 24576);
    ck_assert_int_eq(CALLS(first, PP, RECV), 6);
    ck_assert_int_eq(BYTES(first, PP, RECV), 24576);
    tt_comm_stats middle = pp_traffic(4, 1, 2, 1, 2, 3);
    ck_assert_int_eq(CALLS(middle, PP, SEND), 12);
    ck_assert_int_eq(BYTES(middle, PP, SEND), 49152);
    ck_assert_int_eq(CALLS(middle, PP, RECV), 12);
    tt_comm_stats last = pp_traffic(4, 1, 2, 3, 2, 3);
    ck_assert_int_eq(CALLS(last, PP, SEND), 6);
    ck_assert_int_eq(BYTES(last, PP, RECV), 24576);
}
END_TEST

START_TEST(pp_interleaved)
{
    /* 2 stages x 2 chunks = 4 chunks; stage 0 holds chunks 0 and 2, stage 1
     * chunks 1 and 3. Stage 0: chunk 0 sends 1, receives 1; chunk 2 (a
     * middle chunk) sends 2, receives 2: 3 each per micro-batch. Stage 1:
     * chunk 1 2, chunk 3 1: also 3. With 4 micro-batches and 1 step: 12
     * sends, 12 x 4096 = 49152 bytes, and as many receives. */
    for (int stage = 0; stage < 2; stage++) {
        tt_comm_stats s = pp_traffic(2, 2, 1, stage, 4, 1);
        ck_assert_int_eq(CALLS(s, PP, SEND), 12);
        ck_assert_int_eq(BYTES(s, PP, SEND), 49152);
        ck_assert_int_eq(CALLS(s, PP, RECV), 12);
        ck_assert_int_eq(BYTES(s, PP, RECV), 49152);
    }
}
END_TEST

/* ---- DP ------------------------------------------------------------------ */

START_TEST(dp_buckets)
{
    /* 1000 floats (4000 bytes) in buckets of 1 KiB = 256 floats: 256, 256,
     * 256, 232 = 4 all-reduces per step; 5 steps: 20 calls, 20000 bytes. */
    tt_params p;
    memset(&p, 0, sizeof p);
    p.total = 1000;
    tt_comm_stats s;
    memset(&s, 0, sizeof s);
    tt_dp_expected_traffic(&s, &p, 1024, 5);
    ck_assert_int_eq(CALLS(s, DP, ALLREDUCE), 20);
    ck_assert_int_eq(BYTES(s, DP, ALLREDUCE), 20000);
    ck_assert_int_eq(others(&s, TT_GROUP_DP), 0);
    /* Buckets that divide the buffer exactly (2000 bytes = 500 floats): 2
     * calls; one bucket larger than the buffer: 1 call. Bytes do not depend
     * on the buckets. */
    memset(&s, 0, sizeof s);
    tt_dp_expected_traffic(&s, &p, 2000, 1);
    ck_assert_int_eq(CALLS(s, DP, ALLREDUCE), 2);
    ck_assert_int_eq(BYTES(s, DP, ALLREDUCE), 4000);
    memset(&s, 0, sizeof s);
    tt_dp_expected_traffic(&s, &p, 1 << 20, 1);
    ck_assert_int_eq(CALLS(s, DP, ALLREDUCE), 1);
    ck_assert_int_eq(BYTES(s, DP, ALLREDUCE), 4000);
}
END_TEST

/* ---- ZeRO ---------------------------------------------------------------- */

START_TEST(zero_units)
{
    /* Units of 40, 20 and 44 floats (embeddings, a block, the head) over dp 3
     * pad to 42, 21, 45: 108 floats, 432 bytes. Stage 1, 5 steps: per step
     * one reduce-scatter and one all-gather per unit, each booked at the
     * whole padded unit: 15 calls and 5 x 432 = 2160 bytes each way. In ring
     * bytes each is (3-1)/3 of that, together 2 x 2/3 x 432 = 576 per step:
     * the all-reduce's 2(n-1)/n of the (padded) buffer. */
    tt_params p;
    memset(&p, 0, sizeof p);
    tt_params_add(&p, "tok_emb.weight", 2, 10, 4, TT_SPLIT_NONE, 0, 0);
    tt_params_add(&p, "blocks.0.ln1.weight", 1, 4, 1, TT_SPLIT_NONE, 0, 0);
    tt_params_add(&p, "blocks.0.attn.q.weight", 2, 4, 4, TT_SPLIT_NONE, 0, 0);
    tt_params_add(&p, "ln_f.weight", 1, 4, 1, TT_SPLIT_NONE, 0, 0);
    tt_params_add(&p, "lm_head.weight", 2, 10, 4, TT_SPLIT_NONE, 0, 0);
    tt_params_set_zero(&p, 1, 3, 0);
    tt_comm_stats s;
    memset(&s, 0, sizeof s);
    tt_zero_expected_traffic(&s, &p, 4, 5);
    ck_assert_int_eq(CALLS(s, DP, REDUCE_SCATTER), 15);
    ck_assert_int_eq(BYTES(s, DP, REDUCE_SCATTER), 2160);
    ck_assert_int_eq(CALLS(s, DP, ALLGATHER), 15);
    ck_assert_int_eq(BYTES(s, DP, ALLGATHER), 2160);
    ck_assert_int_eq(others(&s, TT_GROUP_DP), 0);
    /* Stage 2, 4 micro-batches, 1 step: every unit reduced once per
     * micro-batch: 12 reduce-scatters, 4 x 432 = 1728 bytes; the weights
     * gathered once: 3 calls, 432 bytes. */
    tt_params_set_zero(&p, 2, 3, 0);
    memset(&s, 0, sizeof s);
    tt_zero_expected_traffic(&s, &p, 4, 1);
    ck_assert_int_eq(CALLS(s, DP, REDUCE_SCATTER), 12);
    ck_assert_int_eq(BYTES(s, DP, REDUCE_SCATTER), 1728);
    ck_assert_int_eq(CALLS(s, DP, ALLGATHER), 3);
    ck_assert_int_eq(BYTES(s, DP, ALLGATHER), 432);
    /* Stage 3, 4 micro-batches, 2 steps: every unit gathered before its
     * forward and before its backward and reduced once, per micro-batch:
     * 2 x 4 x 3 = 24 reduce-scatters of 2 x 4 x 432 = 3456 bytes, 48
     * all-gathers of 6912 bytes, none after the update. In ring bytes per
     * micro-batch 3 x 2/3 x 432 = 864 against DP's 576 per step: 1.5x with
     * one micro-batch, 3m/2 with m (DESIGN's (2m+1)/2 would reduce once per
     * step, which needs the whole gradient kept: stage 2's saving gone). */
    tt_params_set_zero(&p, 3, 3, 0);
    memset(&s, 0, sizeof s);
    tt_zero_expected_traffic(&s, &p, 4, 2);
    ck_assert_int_eq(CALLS(s, DP, REDUCE_SCATTER), 24);
    ck_assert_int_eq(BYTES(s, DP, REDUCE_SCATTER), 3456);
    ck_assert_int_eq(CALLS(s, DP, ALLGATHER), 48);
    ck_assert_int_eq(BYTES(s, DP, ALLGATHER), 6912);
    ck_assert_int_eq(others(&s, TT_GROUP_DP), 0);
    tt_params_free(&p);
}
END_TEST

/* ---- one GPU of a layout: the sum ---------------------------------------- */

START_TEST(expected_sums_the_groups)
{
    /* 12 GPUs as tp 2 pp 3 dp 2, the GPU on the middle stage: batch 8, T 16,
     * C 32, 2 micro-batches, 1 step; it holds 2 blocks and 1000 floats of
     * parameters; 1 KiB buckets.
     * TP: 8 / 2 = 4 sequences = 64 tokens; no ends: 2 x 8 = 16 calls,
     * 4 x (4 x 2 x 64 x 32) = 65536 bytes.
     * PP: micro-batch of 2 sequences, messages of 4096 bytes; middle stage:
     * 2 sends and 2 recvs per micro-batch = 4 of each, 16384 bytes.
     * DP: as dp_buckets, one step: 4 calls, 4000 bytes. */
    tt_run_config rc;
    memset(&rc, 0, sizeof rc);
    rc.model.T = 16;
    rc.model.C = 32;
    rc.batch = 8;
    rc.micro_batches = 2;
    rc.virtual_stages = 1;
    rc.dp_bucket = 1024;
    tt_grid g = {.tp = 2, .pp = 3, .dp = 2, .pp_rank = 1};
    static tt_model m; /* large: zeroed, only the shape is read */
    m.nl = 2;
    m.P.total = 1000;
    tt_comm_stats s;
    tt_comm_expected(&s, &rc, &g, &m, 1);
    ck_assert_int_eq(CALLS(s, TP, ALLREDUCE), 16);
    ck_assert_int_eq(BYTES(s, TP, ALLREDUCE), 65536);
    ck_assert_int_eq(CALLS(s, PP, SEND), 4);
    ck_assert_int_eq(BYTES(s, PP, RECV), 16384);
    ck_assert_int_eq(CALLS(s, DP, ALLREDUCE), 4);
    ck_assert_int_eq(BYTES(s, DP, ALLREDUCE), 4000);
    /* Nothing else: the cells above are all there is. */
    ck_assert_int_eq(others(&s, TT_NGROUPS), 16 + 65536 + 2 * (4 + 16384) + 4 + 4000);
    /* One GPU: no group of more than one, no traffic. */
    tt_grid one = {.tp = 1, .pp = 1, .dp = 1};
    tt_comm_expected(&s, &rc, &one, &m, 1);
    ck_assert_int_eq(others(&s, TT_NGROUPS), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("traffic");
    TCase *tc = tcase_create("formulas");
    tcase_add_test(tc, tp_first_stage);
    tcase_add_test(tc, tp_middle_stage);
    tcase_add_test(tc, tp_whole_model_with_gather);
    tcase_add_test(tc, tp_sequence_parallel);
    tcase_add_test(tc, pp_ends_and_middle);
    tcase_add_test(tc, pp_interleaved);
    tcase_add_test(tc, dp_buckets);
    tcase_add_test(tc, zero_units);
    tcase_add_test(tc, expected_sums_the_groups);
    suite_add_tcase(s, tc);
    return tt_check_run(s);
}
