/* test_zero_partition.c - ZeRO's partition of the parameter table, without MPI: the
 * memory account of each stage against bytes worked out by hand, every
 * element owned by exactly one DP rank, the clipping norm counting each
 * element once, and AdamW on the owned pieces giving the unsharded update
 * bit for bit. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tt/core/memory.h"
#include "tt/core/params.h"
#include "tt/train/optim.h"

#include "check_run.h"

/* A small table with the three kinds of unit: the embeddings (tok_emb 10x4
 * = 40), one block (ln1 4 + q 4x4 = 20), the head (ln_f 4 + lm_head 10x4 =
 * 44): P = 104 parameters. */
static void small_table(tt_params *p, int stage, int parts, int rank)
{
    memset(p, 0, sizeof *p);
    tt_params_add(p, "tok_emb.weight", 2, 10, 4, TT_SPLIT_NONE, 0, 0);
    tt_params_add(p, "blocks.0.ln1.weight", 1, 4, 1, TT_SPLIT_NONE, 0, 0);
    tt_params_add(p, "blocks.0.attn.q.weight", 2, 4, 4, TT_SPLIT_NONE, 0, 0);
    tt_params_add(p, "ln_f.weight", 1, 4, 1, TT_SPLIT_NONE, 0, 0);
    tt_params_add(p, "lm_head.weight", 2, 10, 4, TT_SPLIT_NONE, 0, 0);
    tt_params_set_zero(p, stage, parts, rank);
}

/* The account of stages 3, 2, 1 and 0 (in that order, each total larger
 * than the last, so each becomes the peak and its categories can be read).
 * Over dp 3 the units 40, 20, 44 pad to 42, 21, 45: padded 108, owned 36 per
 * rank, largest unit 45. By hand:
 *   stage 3: weights 4 x (36 owned + 45 gathered) = 324, gradients 324,
 *            Adam 288                                  (total 936)
 *   stage 2: weights 4 x 108 = 432, gradients 4 x (45 scratch + 36 owned)
 *            = 324, Adam 2 x 4 x 36 = 288            (total 1044)
 *   stage 1: weights 432, gradients 4 x 108 = 432, Adam 288   (1152)
 *   stage 0: weights 4 x 104 = 416, gradients 416, Adam 832   (1664) */
START_TEST(memory_account_per_stage)
{
    const int stages[4] = {3, 2, 1, 0};
    const size_t want[4][3] = {
        {324, 324, 288}, {432, 324, 288}, {432, 432, 288}, {416, 416, 832}};
    tt_mem_tracking(1);
    for (int k = 0; k < 4; k++) {
        tt_params p;
        small_table(&p, stages[k], 3, 1);
        size_t w, g, o, at_peak[TT_MEM_NCAT];
        tt_params_zero_bytes(&p, &w, &g, &o);
        ck_assert_uint_eq(w, want[k][0]);
        ck_assert_uint_eq(g, want[k][1]);
        ck_assert_uint_eq(o, want[k][2]);
        tt_params_alloc(&p);
        size_t peak = tt_mem_peak(at_peak);
        ck_assert_uint_eq(peak, want[k][0] + want[k][1] + want[k][2]);
        ck_assert_uint_eq(at_peak[TT_MEM_WEIGHTS], want[k][0]);
        ck_assert_uint_eq(at_peak[TT_MEM_GRADS], want[k][1]);
        ck_assert_uint_eq(at_peak[TT_MEM_OPTIMIZER], want[k][2]);
        tt_params_free(&p);
    }
}
END_TEST

/* The closed form of doc/memory.md at a size where padding vanishes: P =
 * 4 x 10^6 parameters in units divisible by dp 4 give weights 4P, gradients
 * 4P (stage 1) or scratch + 4P/dp (stages 2, 3), Adam 8P/dp; stage 3's
 * weights 4P/dp + the largest unit gathered. */
START_TEST(memory_closed_form)
{
    tt_params p;
    memset(&p, 0, sizeof p);
    tt_params_add(&p, "tok_emb.weight", 2, 1000, 1000, TT_SPLIT_NONE, 0, 0); /* 10^6 */
    tt_params_add(&p, "blocks.0.mlp.fc1.weight", 2, 2000, 1000, TT_SPLIT_NONE, 0, 0);
    tt_params_add(&p, "lm_head.weight", 2, 1000, 1000, TT_SPLIT_NONE, 0, 0);
    const size_t P = 4000000;
    size_t w, g, o;
    tt_params_set_zero(&p, 1, 4, 0);
    tt_params_zero_bytes(&p, &w, &g, &o);
    ck_assert_uint_eq(w, 4 * P);
    ck_assert_uint_eq(g, 4 * P);
    ck_assert_uint_eq(o, 8 * P / 4);
    tt_params_set_zero(&p, 2, 4, 0);
    tt_params_zero_bytes(&p, &w, &g, &o);
    ck_assert_uint_eq(w, 4 * P);
    ck_assert_uint_eq(g, 4 * 2000000 + 4 * P / 4); /* the block is the largest unit */
    ck_assert_uint_eq(o, 8 * P / 4);
    tt_params_set_zero(&p, 3, 4, 0);
    tt_params_zero_bytes(&p, &w, &g, &o);
    ck_assert_uint_eq(w, 4 * P / 4 + 4 * 2000000);
    ck_assert_uint_eq(g, 4 * 2000000 + 4 * P / 4);
    ck_assert_uint_eq(o, 8 * P / 4);
    tt_params_free(&p);
}
END_TEST

/* Over every rank of a DP group of 3, each element of each tensor is owned
 * exactly once, and the owned pieces of a rank add up to its shard. */
START_TEST(owned_pieces_tile_the_table)
{
    tt_params p[3];
    for (int r = 0; r < 3; r++)
        small_table(&p[r], 1, 3, r);
    for (int i = 0; i < p[0].n; i++) {
        int *held = calloc(p[0].t[i].numel, sizeof *held);
        for (int r = 0; r < 3; r++) {
            size_t a, b;
            tt_tensor_owned(&p[r], &p[r].t[i], &a, &b);
            for (size_t e = a; e < b; e++)
                held[e]++;
        }
        for (size_t e = 0; e < p[0].t[i].numel; e++)
            ck_assert_msg(held[e] == 1, "%s element %zu owned %d times", p[0].t[i].name, e,
                          held[e]);
        free(held);
    }
    for (int r = 0; r < 3; r++) {
        size_t sum = 0, a, b;
        for (int i = 0; i < p[r].n; i++)
            sum += tt_tensor_owned(&p[r], &p[r].t[i], &a, &b);
        /* 36 per rank less the padding it holds: 2, 1, 1 padding elements
         * (42-40, 21-20, 45-44) all in the last piece of each unit. */
        ck_assert_uint_eq(sum, r < 2 ? 36 : 36 - 4);
        tt_params_free(&p[r]);
    }
}
END_TEST

/* Gradient g[e] = a value per flat element, the same on every replica (as
 * after the reduction): the ZeRO ranks' sums of squares add up to the
 * unsharded one, and AdamW on the owned pieces, put together, is the
 * unsharded AdamW bit for bit. */
START_TEST(norm_and_adamw_on_owned_pieces)
{
    tt_params whole, p[3];
    small_table(&whole, 0, 1, 0);
    tt_params_alloc(&whole);
    for (int r = 0; r < 3; r++) {
        small_table(&p[r], 1, 3, r);
        tt_params_alloc(&p[r]);
    }
    for (int i = 0; i < whole.n; i++)
        for (size_t e = 0; e < whole.t[i].numel; e++) {
            float w = 0.5f + 0.01f * (float)(i * 17 + (int)e), gr = 0.1f * sinf((float)(i + e));
            whole.t[i].w[e] = w;
            whole.t[i].g[e] = gr;
            for (int r = 0; r < 3; r++) {
                p[r].t[i].w[e] = w;
                p[r].t[i].g[e] = gr;
            }
        }
    double ss = 0.0;
    for (int r = 0; r < 3; r++)
        ss += tt_grad_sumsq(&p[r], r, 0);
    double want = tt_grad_sumsq(&whole, 0, 0);
    ck_assert_msg(fabs(ss - want) <= 1e-12 * want, "sharded %.17g, whole %.17g", ss, want);

    tt_optim_config o = {.lr = 1e-2, .weight_decay = 0.1, .beta1 = 0.9, .beta2 = 0.95,
                         .eps = 1e-8};
    for (int step = 1; step <= 2; step++) {
        tt_adamw_step(&whole, &o, o.lr, step, 0.7);
        for (int r = 0; r < 3; r++)
            tt_adamw_step(&p[r], &o, o.lr, step, 0.7);
        /* the all-gather, by hand: each rank's pieces into every replica */
        for (int i = 0; i < whole.n; i++)
            for (int r = 0; r < 3; r++) {
                size_t a, b;
                tt_tensor_owned(&p[r], &p[r].t[i], &a, &b);
                for (int q = 0; q < 3; q++)
                    memcpy(p[q].t[i].w + a, p[r].t[i].w + a, (b - a) * sizeof(float));
            }
    }
    for (int i = 0; i < whole.n; i++)
        ck_assert(memcmp(whole.t[i].w, p[2].t[i].w, whole.t[i].numel * sizeof(float)) == 0);
    tt_params_free(&whole);
    for (int r = 0; r < 3; r++)
        tt_params_free(&p[r]);
}
END_TEST

/* Stage 3 keeps only the owned pieces of the weights: each rank's pieces
 * after tt_params_init are the unsharded initial values at those places
 * (the init builds each unit whole and keeps its piece), and the gather
 * buffer is left holding no unit. */
START_TEST(stage3_init_keeps_the_owned_pieces)
{
    tt_params whole, p;
    small_table(&whole, 0, 1, 0);
    tt_params_alloc(&whole);
    tt_params_init(&whole, 7, 1);
    for (int r = 0; r < 3; r++) {
        small_table(&p, 3, 3, r);
        tt_params_alloc(&p);
        tt_params_init(&p, 7, 1);
        ck_assert_int_eq(p.wunit, -1);
        size_t held = 0;
        for (int i = 0; i < p.n; i++) {
            size_t a, b;
            const size_t n = tt_tensor_owned(&p, &p.t[i], &a, &b);
            ck_assert(tt_owned_data(&p, &p.t[i], TT_W, a) >= p.buf[TT_W]);
            ck_assert(tt_owned_data(&p, &p.t[i], TT_W, a) + n <= p.buf[TT_W] + p.z.shard);
            ck_assert_msg(memcmp(tt_owned_data(&p, &p.t[i], TT_W, a), whole.t[i].w + a,
                                 n * sizeof(float)) == 0, "rank %d %s", r, p.t[i].name);
            held += n;
        }
        ck_assert_uint_eq(held, r < 2 ? 36 : 36 - 4);
        tt_params_free(&p);
    }
    tt_params_free(&whole);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("zero");
    TCase *tc = tcase_create("partition");
    tcase_add_test(tc, memory_account_per_stage);
    tcase_add_test(tc, memory_closed_form);
    tcase_add_test(tc, owned_pieces_tile_the_table);
    tcase_add_test(tc, norm_and_adamw_on_owned_pieces);
    tcase_add_test(tc, stage3_init_keeps_the_owned_pieces);
    suite_add_tcase(s, tc);
    return tt_check_run(s);
}
