/* test_traffic.c - the closed-form traffic formulas of doc/communication.md,
 * checked against numbers worked out by hand here (not against the program's
 * counters: the integration tests test_tp.sh, test_pp.sh and test_dp.sh
 * compare measured with expected). Each parallelism's formula is asked on its
 * own, one table of cases per formula, then tt_comm_expected, which adds them
 * up for one GPU of a layout (a table of stages and layouts). Every case
 * names all the cells it books; every other cell must stay empty, so a
 * formula that books too much fails as well.
 * Single process, no MPI: the grids and configurations are filled by hand. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tt/comm/tensor_parallel.h"
#include "tt/parallel/data_parallel.h"
#include "tt/parallel/pipeline_run.h"
#include "tt/show/report_comm.h"

#include "check_run.h"

/* One cell a formula books: its calls and bytes, as the case's comment works
 * them out. A case lists at most MAXCELLS; the list ends at the first cell
 * without calls. */
typedef struct {
    tt_group g;
    tt_op op;
    long calls;
    long long bytes;
} cell;
enum { MAXCELLS = 4 };
#define CELL(g, op, calls, bytes) {TT_GROUP_##g, TT_OP_##op, calls, bytes}
#define NCASES(t) (sizeof t / sizeof t[0])

/* s holds the cells of want and nothing anywhere else. */
static void expect_cells(const tt_comm_stats *s, const cell *want, int nwant, const char *what)
{
    for (int g = 0; g < TT_NGROUPS; g++)
        for (int op = 0; op < TT_NOPS; op++) {
            const tt_comm_count *got = &s->c[g][op];
            const cell *w = NULL;
            for (int i = 0; i < nwant && want[i].calls; i++)
                if (want[i].g == (tt_group)g && want[i].op == (tt_op)op)
                    w = &want[i];
            if (!w) {
                ck_assert_msg(got->calls == 0 && got->bytes == 0,
                              "%s: %s %s holds %ld calls, %lld bytes; expected none", what,
                              tt_group_names[g], tt_op_names[op], got->calls, got->bytes);
                continue;
            }
            ck_assert_msg(got->calls == w->calls, "%s: %s %s calls %ld, expected %ld", what,
                          tt_group_names[g], tt_op_names[op], got->calls, w->calls);
            ck_assert_msg(got->bytes == w->bytes, "%s: %s %s bytes %lld, expected %lld", what,
                          tt_group_names[g], tt_op_names[op], got->bytes, w->bytes);
        }
}

/* ---- TP ------------------------------------------------------------------ */

/* tp_expected_traffic's arguments (tp_sp_expected_traffic's with sp, which
 * has no gather), how many times it is called on the same counters, and the
 * cells it must then hold. */
typedef struct {
    const char *what;           /* the case, as a failure names it */
    int sp;                     /* 1: --sequence-parallel's formula */
    long long tokens;           /* tokens per step on this GPU (all micro-batches) */
    long long C;                /* model width */
    long long blocks;           /* blocks on this stage */
    int first;                  /* the stage holds the embedding */
    int last;                   /* the stage holds lm_head and the loss */
    int gather;                 /* --tp-mlp gather */
    int recompute;              /* --recompute full */
    long long micro_batches;
    long steps;
    int times;                  /* calls on the same counters (they add up) */
    cell want[MAXCELLS];        /* the cells booked; every other one empty */
} tp_case;

static const tp_case TP_CASES[] = {
    /* 64 tokens per step (4 sequences of 16), C = 32, 2 blocks, embeddings
     * but no loss, 2 micro-batches, 3 steps.
     * Calls per micro-batch: 4 per block (proj, fc2 forward; q/k/v, fc1
     * backward) = 8, + 1 for the embedding = 9; 3 steps x 2 mbs x 9 = 54.
     * Floats per step: 4 x 2 blocks x 64 x 32 = 16384, + 64 x 32 = 2048 for
     * the embedding = 18432; bytes 3 x 4 x 18432 = 221184. No gather, no
     * reduce-scatter. */
    {"TP first stage", 0, 64, 32, 2, 1, 0, 0, 0, 2, 3, 1, {CELL(TP, ALLREDUCE, 54, 221184)}},
    /* Neither end: 32 tokens, C = 16, 3 blocks, 4 micro-batches, 2 steps.
     * Calls 2 x 4 x (4 x 3) = 96; floats per step 4 x 3 x 32 x 16 = 6144,
     * bytes 2 x 4 x 6144 = 49152. */
    {"TP middle stage", 0, 32, 16, 3, 0, 0, 0, 0, 4, 2, 1, {CELL(TP, ALLREDUCE, 96, 49152)}},
    /* The same with --recompute full, which runs each block's forward again
     * in its backward: 2 more all-reduces per block and micro-batch
     * (2 x 4 x 2 x 3 = 48 calls) of 32 x 16 floats each step (2 x 3 x 32 x 16
     * = 3072 floats, 2 steps x 4 bytes = 24576 bytes). */
    {"TP middle stage, --recompute full", 0, 32, 16, 3, 0, 0, 0, 1, 4, 2, 1,
     {CELL(TP, ALLREDUCE, 96 + 48, 49152 + 24576)}},
    /* One stage holds everything, --tp-mlp gather: 16 tokens, C = 8, 1
     * block, 1 micro-batch, 1 step.
     * All-reduce calls: 4 (block) + 1 (embedding) + 1 (lm_head's input
     * gradient) + 3 (cross-entropy: max, target logit, sum of exps) = 9.
     * Floats: 4 x 16 x 8 = 512, + 128 (embedding), + 128 (lm_head), + 3 x 16
     * = 48 (cross-entropy) = 816; bytes 4 x 816 = 3264.
     * fc1 gathered: one all-gather of 16 x 4C = 512 floats = 2048 bytes
     * forward, one reduce-scatter of the same size backward. */
    {"TP whole model, --tp-mlp gather", 0, 16, 8, 1, 1, 1, 1, 0, 1, 1, 1,
     {CELL(TP, ALLREDUCE, 9, 3264), CELL(TP, ALLGATHER, 1, 2048),
      CELL(TP, REDUCE_SCATTER, 1, 2048)}},
    /* It adds: a second call doubles every figure of the case above. */
    {"TP whole model, --tp-mlp gather, called twice", 0, 16, 8, 1, 1, 1, 1, 0, 1, 1, 2,
     {CELL(TP, ALLREDUCE, 18, 6528), CELL(TP, ALLGATHER, 2, 4096),
      CELL(TP, REDUCE_SCATTER, 2, 4096)}},
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
    {"TP whole model, --sequence-parallel", 1, 16, 8, 1, 1, 1, 0, 0, 1, 1, 1,
     {CELL(TP, ALLGATHER, 9, 4608), CELL(TP, REDUCE_SCATTER, 6, 3072),
      CELL(TP, ALLREDUCE, 5, 384)}},
    /* A middle stage of 3 blocks, 4 micro-batches of 32 tokens (128 a step),
     * C = 16, 2 steps, --sequence-parallel --recompute full (the forward's 2
     * gathers and 2 reduce-scatters again). One collective position of a
     * block moves 128 x 16 floats = 8192 bytes a step over its 4
     * micro-batches.
     * Gathers: (6 + 2) x 3 blocks = 24 positions: 2 x 4 x 24 = 192 calls,
     * 2 x 24 x 8192 = 393216 bytes; reduce-scatters: (4 + 2) x 3 = 18: 144
     * calls, 294912 bytes; LayerNorm all-reduces: 2 x 4 x 3 = 24 calls of
     * 4C = 64 floats: 6144 bytes. */
    {"TP middle stage, --sequence-parallel --recompute full", 1, 128, 16, 3, 0, 0, 0, 1, 4, 2, 1,
     {CELL(TP, ALLGATHER, 192, 393216), CELL(TP, REDUCE_SCATTER, 144, 294912),
      CELL(TP, ALLREDUCE, 24, 6144)}},
};

START_TEST(tp_formulas)
{
    for (const tp_case *c = TP_CASES; c < TP_CASES + NCASES(TP_CASES); c++) {
        tt_comm_stats s;
        memset(&s, 0, sizeof s);
        for (int t = 0; t < c->times; t++)
            if (c->sp)
                tp_sp_expected_traffic(&s, c->tokens, c->C, c->blocks, c->first, c->last,
                                       c->recompute, c->micro_batches, c->steps);
            else
                tp_expected_traffic(&s, c->tokens, c->C, c->blocks, c->first, c->last,
                                    c->gather, c->recompute, c->micro_batches, c->steps);
        expect_cells(&s, c->want, MAXCELLS, c->what);
    }
}
END_TEST

/* ---- PP ------------------------------------------------------------------ */

/* A pipeline of p stages x v chunks, this GPU on `stage`, without MPI: the
 * formula reads only sizes and coordinates. Micro-batches of 2 sequences of
 * 16 tokens of width 32: every message is 2 x 16 x 32 floats = 4096 bytes. */
typedef struct {
    const char *what;           /* the case, as a failure names it */
    int p;                      /* pipeline stages */
    int v;                      /* chunks per stage (interleaved: 2) */
    int dp;                     /* DP replicas (the batch grows with them) */
    int stage;                  /* this GPU's stage */
    int micro_batches;
    long steps;
    cell want[MAXCELLS];        /* the cells booked; every other one empty */
} pp_case;

static const pp_case PP_CASES[] = {
    /* 4 stages, 2 micro-batches, dp 2, 3 steps. The first stage sends each
     * micro-batch's activation forward and receives its gradient: 1 send
     * and 1 recv per micro-batch, 3 x 2 = 6 of each, 6 x 4096 = 24576 bytes. */
    {"PP first of 4 stages", 4, 1, 2, 0, 2, 3,
     {CELL(PP, SEND, 6, 24576), CELL(PP, RECV, 6, 24576)}},
    /* The last stage mirrors it (receives the activation, sends the
     * gradient back). */
    {"PP last of 4 stages", 4, 1, 2, 3, 2, 3,
     {CELL(PP, SEND, 6, 24576), CELL(PP, RECV, 6, 24576)}},
    /* A middle stage does both: 12 of each, 49152 bytes. */
    {"PP a middle stage of 4", 4, 1, 2, 1, 2, 3,
     {CELL(PP, SEND, 12, 49152), CELL(PP, RECV, 12, 49152)}},
    /* Interleaved: 2 stages x 2 chunks = 4 chunks; stage 0 holds chunks 0
     * and 2, stage 1 chunks 1 and 3. Stage 0: chunk 0 sends 1, receives 1;
     * chunk 2 (a middle chunk) sends 2, receives 2: 3 each per micro-batch.
     * Stage 1: chunk 1 2, chunk 3 1: also 3. With 4 micro-batches and 1
     * step: 12 sends, 12 x 4096 = 49152 bytes, and as many receives. */
    {"PP interleaved, stage 0 of 2", 2, 2, 1, 0, 4, 1,
     {CELL(PP, SEND, 12, 49152), CELL(PP, RECV, 12, 49152)}},
    {"PP interleaved, stage 1 of 2", 2, 2, 1, 1, 4, 1,
     {CELL(PP, SEND, 12, 49152), CELL(PP, RECV, 12, 49152)}},
};

START_TEST(pp_formulas)
{
    for (const pp_case *c = PP_CASES; c < PP_CASES + NCASES(PP_CASES); c++) {
        tt_run_config rc;
        memset(&rc, 0, sizeof rc);
        rc.model.T = 16;
        rc.model.C = 32;
        rc.micro_batches = c->micro_batches;
        rc.batch = 2 * c->micro_batches * c->dp;
        rc.virtual_stages = c->v;
        tt_grid g = {.tp = 1, .pp = c->p, .dp = c->dp, .pp_rank = c->stage};
        tt_comm_stats s;
        memset(&s, 0, sizeof s);
        tt_pipe_expected_traffic(&s, &rc, &g, c->steps);
        expect_cells(&s, c->want, MAXCELLS, c->what);
    }
}
END_TEST

/* ---- DP ------------------------------------------------------------------ */

/* 1000 floats (4000 bytes) of gradients in buckets of bucket bytes. */
typedef struct {
    const char *what;           /* the case, as a failure names it */
    size_t bucket;              /* --dp-bucket, bytes */
    long steps;
    cell want[MAXCELLS];        /* the cells booked; every other one empty */
} dp_case;

static const dp_case DP_CASES[] = {
    /* Buckets of 1 KiB = 256 floats: 256, 256, 256, 232 = 4 all-reduces per
     * step; 5 steps: 20 calls, 20000 bytes. */
    {"DP buckets of 1 KiB", 1024, 5, {CELL(DP, ALLREDUCE, 20, 20000)}},
    /* Buckets that divide the buffer exactly (2000 bytes = 500 floats): 2
     * calls. Bytes do not depend on the buckets. */
    {"DP buckets of 2000 bytes", 2000, 1, {CELL(DP, ALLREDUCE, 2, 4000)}},
    /* One bucket larger than the buffer: 1 call. */
    {"DP one bucket of 1 MiB", 1 << 20, 1, {CELL(DP, ALLREDUCE, 1, 4000)}},
};

START_TEST(dp_formulas)
{
    tt_params p;
    memset(&p, 0, sizeof p);
    p.total = 1000;
    for (const dp_case *c = DP_CASES; c < DP_CASES + NCASES(DP_CASES); c++) {
        tt_comm_stats s;
        memset(&s, 0, sizeof s);
        tt_dp_expected_traffic(&s, &p, c->bucket, c->steps);
        expect_cells(&s, c->want, MAXCELLS, c->what);
    }
}
END_TEST

/* ---- ZeRO ---------------------------------------------------------------- */

/* Units of 40, 20 and 44 floats (embeddings, a block, the head) over dp 3
 * pad to 42, 21, 45: 108 floats, 432 bytes. In ring bytes a reduce-scatter
 * and an all-gather each move (3-1)/3 of the padded unit, together
 * 2 x 2/3 x 432 = 576 per step: the all-reduce's 2(n-1)/n of the (padded)
 * buffer. */
typedef struct {
    const char *what;           /* the case, as a failure names it */
    int stage;                  /* --zero */
    int micro_batches;
    long steps;
    cell want[MAXCELLS];        /* the cells booked; every other one empty */
} zero_case;

static const zero_case ZERO_CASES[] = {
    /* Stage 1, 5 steps: per step one reduce-scatter and one all-gather per
     * unit, each booked at the whole padded unit: 15 calls and 5 x 432 =
     * 2160 bytes each way. */
    {"ZeRO-1, 5 steps", 1, 4, 5,
     {CELL(DP, REDUCE_SCATTER, 15, 2160), CELL(DP, ALLGATHER, 15, 2160)}},
    /* Stage 2, 4 micro-batches, 1 step: every unit reduced once per
     * micro-batch: 12 reduce-scatters, 4 x 432 = 1728 bytes; the weights
     * gathered once: 3 calls, 432 bytes. */
    {"ZeRO-2, 4 micro-batches", 2, 4, 1,
     {CELL(DP, REDUCE_SCATTER, 12, 1728), CELL(DP, ALLGATHER, 3, 432)}},
    /* Stage 3, 4 micro-batches, 2 steps: every unit gathered before its
     * forward and before its backward and reduced once, per micro-batch:
     * 2 x 4 x 3 = 24 reduce-scatters of 2 x 4 x 432 = 3456 bytes, 48
     * all-gathers of 6912 bytes, none after the update. In ring bytes per
     * micro-batch 3 x 2/3 x 432 = 864 against DP's 576 per step: 1.5x with
     * one micro-batch, 3m/2 with m (design.md's (2m+1)/2 would reduce once per
     * step, which needs the whole gradient kept: stage 2's saving gone). */
    {"ZeRO-3, 4 micro-batches, 2 steps", 3, 4, 2,
     {CELL(DP, REDUCE_SCATTER, 24, 3456), CELL(DP, ALLGATHER, 48, 6912)}},
};

START_TEST(zero_formulas)
{
    tt_params p;
    memset(&p, 0, sizeof p);
    tt_params_add(&p, "tok_emb.weight", 2, 10, 4, TT_SPLIT_NONE, 0, 0);
    tt_params_add(&p, "blocks.0.ln1.weight", 1, 4, 1, TT_SPLIT_NONE, 0, 0);
    tt_params_add(&p, "blocks.0.attn.q.weight", 2, 4, 4, TT_SPLIT_NONE, 0, 0);
    tt_params_add(&p, "ln_f.weight", 1, 4, 1, TT_SPLIT_NONE, 0, 0);
    tt_params_add(&p, "lm_head.weight", 2, 10, 4, TT_SPLIT_NONE, 0, 0);
    for (const zero_case *c = ZERO_CASES; c < ZERO_CASES + NCASES(ZERO_CASES); c++) {
        tt_params_set_zero(&p, c->stage, 3, 0);
        tt_comm_stats s;
        memset(&s, 0, sizeof s);
        tt_zero_expected_traffic(&s, &p, c->micro_batches, c->steps);
        expect_cells(&s, c->want, MAXCELLS, c->what);
    }
    tt_params_free(&p);
}
END_TEST

/* ---- one GPU of a layout: the sum ---------------------------------------- */

/* One GPU of a layout, for tt_comm_expected, which adds up the formulas of
 * the groups of more than one GPU. Every case: batch 8, T 16, C 32, 2
 * micro-batches, 1 step; the GPU holds 2 blocks and 1000 floats of
 * parameters; 1 KiB DP buckets. */
typedef struct {
    const char *what;           /* the case, as a failure names it */
    int tp, pp, dp;             /* the layout */
    int stage;                  /* this GPU's pipeline stage */
    int first;                  /* the stage holds the embedding */
    int last;                   /* the stage holds lm_head and the loss */
    cell want[MAXCELLS];        /* the cells booked; every other one empty */
} sum_case;

static const sum_case SUM_CASES[] = {
    /* 12 GPUs as tp 2 pp 3 dp 2, the GPU on the middle stage.
     * TP: 8 / 2 = 4 sequences = 64 tokens; no ends: 2 x 8 = 16 calls,
     * 4 x (4 x 2 x 64 x 32) = 65536 bytes.
     * PP: micro-batch of 2 sequences, messages of 4096 bytes; middle stage:
     * 2 sends and 2 recvs per micro-batch = 4 of each, 16384 bytes.
     * DP: as the 1 KiB buckets above, one step: 4 calls, 4000 bytes. */
    {"tp 2 pp 3 dp 2, middle stage", 2, 3, 2, 1, 0, 0,
     {CELL(TP, ALLREDUCE, 16, 65536), CELL(PP, SEND, 4, 16384), CELL(PP, RECV, 4, 16384),
      CELL(DP, ALLREDUCE, 4, 4000)}},
    /* The first stage of the same: TP also the embedding's all-reduce, 9
     * calls per micro-batch = 18, and its 64 x 32 floats: 4 x (16384 + 2048)
     * = 73728 bytes; PP one send and one recv per micro-batch, 2 of each,
     * 8192 bytes; DP as above. */
    {"tp 2 pp 3 dp 2, first stage", 2, 3, 2, 0, 1, 0,
     {CELL(TP, ALLREDUCE, 18, 73728), CELL(PP, SEND, 2, 8192), CELL(PP, RECV, 2, 8192),
      CELL(DP, ALLREDUCE, 4, 4000)}},
    /* The last stage: TP also lm_head's input gradient (64 x 32 floats) and
     * the cross-entropy's 3 (3 x 64 floats): 8 + 1 + 3 = 12 calls per
     * micro-batch = 24, 4 x (16384 + 2048 + 192) = 74496 bytes; PP and DP
     * as the first stage. */
    {"tp 2 pp 3 dp 2, last stage", 2, 3, 2, 2, 0, 1,
     {CELL(TP, ALLREDUCE, 24, 74496), CELL(PP, SEND, 2, 8192), CELL(PP, RECV, 2, 8192),
      CELL(DP, ALLREDUCE, 4, 4000)}},
    /* One GPU: no group of more than one, no traffic. */
    {"one GPU", 1, 1, 1, 0, 1, 1, {{0}}},
};

START_TEST(expected_sums_the_groups)
{
    tt_run_config rc;
    memset(&rc, 0, sizeof rc);
    rc.model.T = 16;
    rc.model.C = 32;
    rc.batch = 8;
    rc.micro_batches = 2;
    rc.virtual_stages = 1;
    rc.dp_bucket = 1024;
    static tt_model m; /* large: zeroed, only the shape is read */
    m.nl = 2;
    m.P.total = 1000;
    for (const sum_case *c = SUM_CASES; c < SUM_CASES + NCASES(SUM_CASES); c++) {
        tt_grid g = {.tp = c->tp, .pp = c->pp, .dp = c->dp, .pp_rank = c->stage};
        m.sh.first_stage = c->first;
        m.sh.last_stage = c->last;
        tt_comm_stats s;
        tt_comm_expected(&s, &rc, &g, &m, 1);
        expect_cells(&s, c->want, MAXCELLS, c->what);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("traffic");
    TCase *tc = tcase_create("formulas");
    tcase_add_test(tc, tp_formulas);
    tcase_add_test(tc, pp_formulas);
    tcase_add_test(tc, dp_formulas);
    tcase_add_test(tc, zero_formulas);
    tcase_add_test(tc, expected_sums_the_groups);
    suite_add_tcase(s, tc);
    return tt_check_run(s);
}
