/* test_optim_data.c - the sampler against its formula, the learning-rate
 * schedule, clipping and one AdamW step against values worked out by hand, and
 * the layout independence of initialisation. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tt/core/data.h"
#include "tt/train/optim.h"
#include "tt/core/params.h"

#include "check_run.h"

/* A corpus of N = 1000 bytes, byte i = i mod 251: Ntr = 900, eval = 100. */
static tt_corpus counting_corpus(void)
{
    tt_corpus c;
    memset(&c, 0, sizeof c);
    c.n = 1000;
    c.ntrain = 900;
    c.bytes = malloc(c.n);
    for (size_t i = 0; i < c.n; i++)
        c.bytes[i] = (unsigned char)(i % 251);
    return c;
}

START_TEST(sampler_formula)
{
    tt_corpus c = counting_corpus();
    const int T = 8, B = 4;
    /* ((s*B + j) * T) mod (Ntr - T) = ((3*4+2)*8) mod 892 = 112 */
    ck_assert_uint_eq(tt_sample_offset(&c, 3, B, 2, T), 112);
    /* ((30*4+1)*8) = 968 -> 968 - 892 = 76 (wraps around) */
    ck_assert_uint_eq(tt_sample_offset(&c, 30, B, 1, T), 76);
    ck_assert_uint_eq(tt_sample_offset(&c, 0, B, 0, T), 0);
    int in[2 * 8], tg[2 * 8];
    tt_sample_batch(&c, 30, B, 1, 2, T, in, tg);
    for (int t = 0; t < T; t++) {
        ck_assert_int_eq(in[t], (76 + t) % 251);
        ck_assert_int_eq(tg[t], (77 + t) % 251);
        /* sample j = 2 of step 30: (122*8) mod 892 = 976 - 892 = 84 */
        ck_assert_int_eq(in[T + t], (84 + t) % 251);
        ck_assert_int_eq(tg[T + t], (85 + t) % 251);
    }
    /* No window may reach into the eval split: offset + T + 1 <= Ntr. */
    for (long s = 0; s < 500; s++)
        for (int j = 0; j < B; j++)
            ck_assert_uint_le(tt_sample_offset(&c, s, B, j, T) + T + 1, c.ntrain);
    free(c.bytes);
}
END_TEST

START_TEST(eval_windows)
{
    tt_corpus c = counting_corpus();
    /* eval split = bytes 900..999: windows of 9 bytes at 900 + 8k, k <= 11 */
    ck_assert_int_eq(tt_eval_windows(&c, 8, 100), 12);
    ck_assert_int_eq(tt_eval_windows(&c, 8, 5), 5);
    ck_assert_int_eq(tt_eval_windows(&c, 100, 10), 0); /* needs 101 bytes */
    int in[8], tg[8];
    tt_eval_batch(&c, 11, 1, 8, in, tg);
    ck_assert_int_eq(in[0], 988 % 251);
    ck_assert_int_eq(tg[7], 996 % 251);
    free(c.bytes);
}
END_TEST

START_TEST(generated_corpus)
{
    tt_corpus a, b, d;
    tt_corpus_generate(&a, 5000, 1);
    tt_corpus_generate(&b, 5000, 1);
    tt_corpus_generate(&d, 5000, 2);
    ck_assert_uint_eq(a.n, 5000);
    ck_assert_uint_eq(a.ntrain, 4500);
    ck_assert(memcmp(a.bytes, b.bytes, a.n) == 0);
    ck_assert(memcmp(a.bytes, d.bytes, a.n) != 0);
    for (size_t i = 0; i < a.n; i++)
        ck_assert(a.bytes[i] == '\n' || (a.bytes[i] >= 32 && a.bytes[i] < 127));
    tt_corpus_free(&a);
    tt_corpus_free(&b);
    tt_corpus_free(&d);
}
END_TEST

START_TEST(lr_schedule)
{
    tt_optim_config o = {.lr = 1e-3, .lr_min = 1e-4, .warmup = 10};
    const long S = 110;
    ck_assert_double_eq_tol(tt_lr_at(&o, 0, S), 1e-4, 1e-15);   /* 1e-3 * 1/10 */
    ck_assert_double_eq_tol(tt_lr_at(&o, 4, S), 5e-4, 1e-15);   /* 1e-3 * 5/10 */
    ck_assert_double_eq_tol(tt_lr_at(&o, 9, S), 1e-3, 1e-15);
    ck_assert_double_eq_tol(tt_lr_at(&o, 10, S), 1e-3, 1e-15);  /* cos(0) = 1 */
    ck_assert_double_eq_tol(tt_lr_at(&o, 60, S), 5.5e-4, 1e-15); /* half-way: mid-point */
    ck_assert_double_eq_tol(tt_lr_at(&o, 110, S), 1e-4, 1e-15); /* cos(pi) = -1 */
    /* a quarter of the way: lr_min + 0.9e-3 * (1 + cos(pi/4)) / 2 */
    ck_assert_double_eq_tol(tt_lr_at(&o, 35, S), 1e-4 + 0.9e-3 * (1 + sqrt(0.5)) / 2, 1e-15);
    tt_optim_config nowarm = {.lr = 2.0, .lr_min = 0.0, .warmup = 0};
    ck_assert_double_eq_tol(tt_lr_at(&nowarm, 0, 4), 2.0, 1e-15);
    ck_assert_double_eq_tol(tt_lr_at(&nowarm, 2, 4), 1.0, 1e-15);
    /* S <= W: max(1, S - W) keeps the cosine defined. By hand, with span 1:
     * step W is progress 0, the peak lr (cos 0 = 1); one step later progress
     * is 1, lr_min (cos pi = -1); with S < W the same. Without the guard
     * the span would be 0 (0/0 and 1/0: NaN) or negative (the cosine run
     * backwards: 0.625 at step 6 of S = 3). */
    tt_optim_config w = {.lr = 1.0, .lr_min = 0.25, .warmup = 5};
    ck_assert_double_eq_tol(tt_lr_at(&w, 4, 5), 1.0, 1e-15);  /* end of warm-up: 5/5 */
    ck_assert_double_eq_tol(tt_lr_at(&w, 5, 5), 1.0, 1e-15);  /* progress 0/1 */
    ck_assert_double_eq_tol(tt_lr_at(&w, 6, 5), 0.25, 1e-15); /* progress 1/1 */
    ck_assert_double_eq_tol(tt_lr_at(&w, 6, 3), 0.25, 1e-15); /* S < W: span 1 too */
}
END_TEST

START_TEST(clip_coefficient)
{
    ck_assert_double_eq_tol(tt_clip_coef(1.0, 4.0), 1.0 / (4.0 + 1e-6), 1e-15);
    ck_assert_double_eq(tt_clip_coef(1.0, 0.5), 1.0);
    ck_assert_double_eq(tt_clip_coef(0.0, 100.0), 1.0); /* disabled */
}
END_TEST

START_TEST(adamw_by_hand)
{
    tt_params p = {0};
    int wi = tt_params_add(&p, "w", 2, 1, 2, TT_SPLIT_NONE, 0, 0);
    int bi = tt_params_add(&p, "b.bias", 1, 1, 1, TT_SPLIT_NONE, 0, 0);
    tt_params_alloc(&p);
    tt_tensor *w = &p.t[wi], *b = &p.t[bi];
    ck_assert(w->decay && !b->decay);
    w->w[0] = 1.0f; w->w[1] = -2.0f; b->w[0] = 1.0f;
    w->g[0] = 0.5f; w->g[1] = 0.1f; b->g[0] = 0.5f;
    tt_optim_config o = {.lr = 0.1, .weight_decay = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    tt_adamw_step(&p, &o, 0.1, 1, 1.0);
    /* Step 1, by hand: w <- w (1 - lr wd) = 0.99 w; m = 0.1 g; v = 0.001 g^2;
     * m_hat = g, sqrt(v_hat) = |g|, so the update is lr * sign(g) = 0.1. */
    ck_assert_float_eq_tol(w->w[0], 0.89f, 1e-6f);
    ck_assert_float_eq_tol(w->w[1], -2.08f, 1e-6f);
    ck_assert_float_eq_tol(b->w[0], 0.9f, 1e-6f); /* no decay on a bias */
    ck_assert_float_eq_tol(w->m[0], 0.05f, 1e-7f); /* (1 - 0.9f) rounds in float */
    ck_assert_float_eq_tol(w->v[0], 0.00025f, 1e-9f);
    /* Step 2 with g = 0.5 again: m = 0.9*0.05 + 0.1*0.5 = 0.095, m_hat =
     * 0.095/0.19 = 0.5; v = 0.999*0.00025 + 0.001*0.25 = 0.00049975, v_hat =
     * 0.00049975/0.001999 = 0.25: the update is again 0.1, after the decay. */
    tt_adamw_step(&p, &o, 0.1, 2, 1.0);
    ck_assert_float_eq_tol(w->w[0], 0.89f * 0.99f - 0.1f, 2e-6f);
    tt_params_free(&p);
}
END_TEST

START_TEST(adamw_grad_scale)
{
    /* With eps large, Adam is no longer scale-invariant, so the scale shows:
     * g = 1 scaled by 0.5 -> m_hat = 0.5, sqrt(v_hat) = 0.5, update = lr*0.5/(0.5+1). */
    tt_params p = {0};
    int i = tt_params_add(&p, "x.bias", 1, 1, 1, TT_SPLIT_NONE, 0, 0);
    tt_params_alloc(&p);
    p.t[i].g[0] = 1.0f;
    tt_optim_config o = {.lr = 1.0, .beta1 = 0.9, .beta2 = 0.999, .eps = 1.0};
    tt_adamw_step(&p, &o, 1.0, 1, 0.5);
    ck_assert_float_eq_tol(p.t[i].w[0], -0.5f / 1.5f, 1e-6f);
    tt_params_free(&p);
}
END_TEST

START_TEST(init_is_layout_independent)
{
    tt_params whole = {0}, rows = {0}, cols = {0};
    tt_params_add(&whole, "blocks.0.attn.q.weight", 2, 10, 6, TT_SPLIT_NONE, 0, 0);
    tt_params_add(&rows, "blocks.0.attn.q.weight", 2, 10, 6, TT_SPLIT_ROWS, 4, 3);
    tt_params_add(&cols, "blocks.0.attn.q.weight", 2, 10, 6, TT_SPLIT_COLS, 2, 3);
    tt_params_alloc(&whole);
    tt_params_alloc(&rows);
    tt_params_alloc(&cols);
    tt_params_init(&whole, 42, 4);
    tt_params_init(&rows, 42, 4);
    tt_params_init(&cols, 42, 4);
    const float *W = whole.t[0].w;
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 6; c++)
            ck_assert(rows.t[0].w[r * 6 + c] == W[(4 + r) * 6 + c]);
    for (int r = 0; r < 10; r++)
        for (int c = 0; c < 3; c++)
            ck_assert(cols.t[0].w[r * 3 + c] == W[r * 6 + 2 + c]);
    tt_params_init(&rows, 43, 4); /* another seed, other values */
    ck_assert(rows.t[0].w[0] != W[4 * 6]);
    tt_params_free(&whole);
    tt_params_free(&rows);
    tt_params_free(&cols);
}
END_TEST

START_TEST(init_statistics)
{
    tt_params p = {0};
    int w = tt_params_add(&p, "blocks.1.mlp.fc1.weight", 2, 256, 256, TT_SPLIT_NONE, 0, 0);
    int r = tt_params_add(&p, "blocks.1.mlp.fc2.weight", 2, 256, 256, TT_SPLIT_NONE, 0, 0);
    int ln = tt_params_add(&p, "blocks.1.ln1.weight", 1, 8, 1, TT_SPLIT_NONE, 0, 0);
    int b = tt_params_add(&p, "blocks.1.mlp.fc1.bias", 1, 8, 1, TT_SPLIT_NONE, 0, 0);
    tt_params_alloc(&p);
    tt_params_init(&p, 7, 8);
    double sd[2];
    int which[2] = {w, r};
    for (int k = 0; k < 2; k++) {
        double s1 = 0, s2 = 0;
        const tt_tensor *t = &p.t[which[k]];
        for (size_t e = 0; e < t->numel; e++) {
            s1 += t->w[e];
            s2 += (double)t->w[e] * t->w[e];
        }
        double mean = s1 / t->numel;
        sd[k] = sqrt(s2 / t->numel - mean * mean);
        ck_assert_msg(fabs(mean) < 3e-4, "mean %g", mean);
    }
    /* 65536 samples: the standard deviation is within 1% of its target. */
    ck_assert_msg(fabs(sd[0] - 0.02) < 0.0002, "std %g, want 0.02", sd[0]);
    ck_assert_msg(fabs(sd[1] - 0.005) < 0.00005, "std %g, want 0.02/sqrt(16)", sd[1]);
    for (int e = 0; e < 8; e++) {
        ck_assert(p.t[ln].w[e] == 1.0f);
        ck_assert(p.t[b].w[e] == 0.0f);
    }
    tt_params_free(&p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim_data");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, sampler_formula);
    tcase_add_test(tc, eval_windows);
    tcase_add_test(tc, generated_corpus);
    tcase_add_test(tc, lr_schedule);
    tcase_add_test(tc, clip_coefficient);
    tcase_add_test(tc, adamw_by_hand);
    tcase_add_test(tc, adamw_grad_scale);
    tcase_add_test(tc, init_is_layout_independent);
    tcase_add_test(tc, init_statistics);
    suite_add_tcase(s, tc);
    return tt_check_run(s);
}
