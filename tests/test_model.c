/* test_model.c - the whole model's gradient against finite differences, on a
 * tiny config: for every tensor, the directional derivative of the loss along
 * the gradient and along a random direction, by central differences, against
 * the backward pass, and six elements of every tensor one by one. Plus: the initial loss is ln(256) (independent reason:
 * small random weights give nearly uniform predictions), micro-batching does
 * not change the gradient, and the logits at a position do not depend on
 * later bytes. (That training lowers the loss is test_train.sh's.) */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt/core/data.h"
#include "tt/model/model.h"
#include "tt/core/params.h"

#include "check_run.h"

static const tt_config cfg = {.V = 256, .C = 16, .L = 2, .NH = 2, .T = 6};
enum { B = 3 };

static void batch(int *in, int *tg)
{
    for (int i = 0; i < B * cfg.T; i++) {
        in[i] = (37 * i + 11) % 256;
        tg[i] = (53 * i + 5) % 256;
    }
}

START_TEST(initial_loss_is_uniform)
{
    tt_model m;
    tt_shard_spec sh = tt_shard_whole(&cfg);
    tt_model_init(&m, &cfg, &sh, B, 1);
    int in[B * 6], tg[B * 6];
    batch(in, tg);
    double loss = tt_model_forward(&m, in, tg, B);
    ck_assert_msg(fabs(loss - log(256.0)) < 0.05, "initial loss %.4f, ln(256) = %.4f", loss,
                  log(256.0));
    tt_model_free(&m);
}
END_TEST

/* The model both gradient checks use, its gradients made by the backward:
 * moved off the symmetric initial point (LayerNorm weights all 1, biases 0)
 * so that every parameter has a generic gradient. */
static void model_with_gradients(tt_model *m, int *in, int *tg)
{
    tt_shard_spec sh = tt_shard_whole(&cfg);
    tt_model_init(m, &cfg, &sh, B, 3);
    for (size_t e = 0; e < m->P.total; e++)
        tt_params_buffer(&m->P, TT_W)[e] += 0.05f * (float)(tt_hash_uniform(9, 1, e) - 0.5);
    batch(in, tg);
    tt_params_zero_grads(&m->P);
    tt_model_forward(m, in, tg, B);
    tt_model_backward(m, 1.0f / (B * cfg.T));
}

/* Directional derivative check of every tensor. The loss is float32, so h is
 * kept large (1e-2 along a unit vector) to beat round-off: the loss (~5.5) is
 * good to ~2e-7, which puts ~1e-5 of noise in (L+ - L-)/2h; the truncation
 * error is O(h^2). Tolerance: 2% of the tensor's gradient norm plus 1e-5. */
START_TEST(whole_model_gradient)
{
    tt_model m;
    int in[B * 6], tg[B * 6];
    model_with_gradients(&m, in, tg);

    const double h = 1e-2;
    double worst = 0.0;
    char worst_name[TT_NAME_MAX] = "";
    for (int i = 0; i < m.P.n; i++) {
        tt_tensor *t = &m.P.t[i];
        size_t n = t->numel;
        double *dir = malloc(n * sizeof *dir);
        float *w0 = malloc(n * sizeof *w0);
        memcpy(w0, t->w, n * sizeof *w0);
        double gnorm = 0;
        for (size_t e = 0; e < n; e++)
            gnorm += (double)t->g[e] * t->g[e];
        gnorm = sqrt(gnorm);
        if (strstr(t->name, "attn.k.bias")) {
            /* The model leaves this gradient at exactly zero (see model/forward.c);
             * finite differences confirm the loss does not depend on it. */
            ck_assert_msg(gnorm == 0, "%s: gradient %g, expected exactly 0", t->name, gnorm);
            for (size_t e = 0; e < n; e++)
                t->w[e] = w0[e] + 0.5f;
            double shifted = tt_model_forward(&m, in, tg, B);
            memcpy(t->w, w0, n * sizeof *w0);
            double base = tt_model_forward(&m, in, tg, B);
            ck_assert_msg(fabs(shifted - base) < 1e-5, "%s moves the loss by %g", t->name,
                          shifted - base);
            free(dir);
            free(w0);
            continue;
        }
        ck_assert_msg(gnorm > 0, "%s has a zero gradient", t->name);
        for (int kind = 0; kind < 2; kind++) {
            double dn = 0;
            for (size_t e = 0; e < n; e++) {
                dir[e] = kind == 0 ? t->g[e] : tt_hash_uniform(5, (uint64_t)i, e) - 0.5;
                dn += dir[e] * dir[e];
            }
            dn = sqrt(dn);
            double analytic = 0;
            for (size_t e = 0; e < n; e++) {
                dir[e] /= dn;
                analytic += dir[e] * t->g[e];
            }
            double lp, lm;
            for (size_t e = 0; e < n; e++)
                t->w[e] = (float)(w0[e] + h * dir[e]);
            lp = tt_model_forward(&m, in, tg, B);
            for (size_t e = 0; e < n; e++)
                t->w[e] = (float)(w0[e] - h * dir[e]);
            lm = tt_model_forward(&m, in, tg, B);
            memcpy(t->w, w0, n * sizeof *w0);
            double numeric = (lp - lm) / (2 * h);
            double err = fabs(numeric - analytic) / (gnorm + 5e-4);
            if (err > worst) {
                worst = err;
                snprintf(worst_name, sizeof worst_name, "%s", t->name);
            }
            ck_assert_msg(fabs(numeric - analytic) < 0.02 * gnorm + 1e-5, "%s (%s direction): analytic %.6g numeric %.6g, "
                          "error %.3g of |g|+5e-4, |g| = %.3g", t->name, kind ? "random" : "gradient",
                          analytic, numeric, err, gnorm);
        }
        free(dir);
        free(w0);
    }
    printf("whole-model gradient check: %d tensors, worst |numeric - analytic| = %.2e of "
           "(|g| + 5e-4) (%s); tolerance 2e-2 |g| + 1e-5\n", m.P.n, worst, worst_name);
    tt_model_free(&m);
}
END_TEST

/* The same, element by element: a directional check cannot see a gradient
 * that is right on the whole but missing in a few places (a row of tok_emb
 * left at zero, a column lost), since along a random direction over
 * thousands of elements the missing part is a few per cent of |g|. Six
 * elements of every tensor, picked by index (for tok_emb in the rows of
 * bytes that occur, the only rows with a gradient), each moved alone by
 * +-h, h = 3e-3 (one element moved by 1e-2 bends the loss enough to put 4%
 * of truncation error in the largest derivatives): numeric and analytic
 * agree within 2% plus 3e-5 (the float32 loss's noise at this h; measured
 * 7e-5 at worst, on derivatives of 0.2). And the check is shown able to fail: the largest
 * numeric derivative found in tok_emb is itself beyond the tolerance, so a
 * backward that left that element at zero would fail. */
START_TEST(element_gradients)
{
    tt_model m;
    int in[B * 6], tg[B * 6];
    model_with_gradients(&m, in, tg);
    const double h = 3e-3;
    double worst = 0, tok_largest = 0;
    int checked = 0;
    for (int i = 0; i < m.P.n; i++) {
        tt_tensor *t = &m.P.t[i];
        if (strstr(t->name, "attn.k.bias"))
            continue; /* exactly zero, checked above */
        const int cols = t->ndim == 2 ? t->lshape[1] : 1;
        for (int j = 0; j < 6; j++) {
            size_t e = (size_t)(tt_hash_uniform(17, (uint64_t)i, (uint64_t)j) * (double)t->numel);
            if (strcmp(t->name, "tok_emb.weight") == 0)
                e = (size_t)in[(7 * j + 3) % (B * cfg.T)] * cols + (size_t)(j * 5 % cols);
            const float w0 = t->w[e];
            t->w[e] = (float)(w0 + h);
            const double lp = tt_model_forward(&m, in, tg, B);
            t->w[e] = (float)(w0 - h);
            const double lm = tt_model_forward(&m, in, tg, B);
            t->w[e] = w0;
            const double numeric = (lp - lm) / (2 * h), analytic = t->g[e];
            const double tol = 0.02 * fabs(numeric) + 3e-5;
            ck_assert_msg(fabs(numeric - analytic) <= tol,
                          "%s element %zu: analytic %.6g numeric %.6g (tolerance %.2g)", t->name,
                          e, analytic, numeric, tol);
            worst = fmax(worst, fabs(numeric - analytic));
            if (strcmp(t->name, "tok_emb.weight") == 0)
                tok_largest = fmax(tok_largest, fabs(numeric));
            checked++;
        }
    }
    ck_assert_msg(tok_largest > 0.02 * tok_largest + 3e-5,
                  "tok_emb's largest derivative %.3g is within the tolerance of 0: a zeroed "
                  "gradient would pass", tok_largest);
    printf("element gradient check: %d elements, worst |numeric - analytic| = %.2e; tok_emb's "
           "largest derivative %.2e, which a zeroed gradient would miss by more than the "
           "tolerance\n", checked, worst, tok_largest);
    tt_model_free(&m);
}
END_TEST

START_TEST(micro_batches_sum)
{
    /* One micro-batch of B sequences vs B micro-batches of one: the summed
     * gradients agree to float rounding (1e-5 of the norm). */
    tt_model a, b;
    tt_shard_spec sh = tt_shard_whole(&cfg);
    tt_model_init(&a, &cfg, &sh, B, 4);
    tt_model_init(&b, &cfg, &sh, 1, 4);
    int in[B * 6], tg[B * 6];
    batch(in, tg);
    const float dloss = 1.0f / (B * cfg.T);
    tt_params_zero_grads(&a.P);
    tt_params_zero_grads(&b.P);
    tt_model_forward(&a, in, tg, B);
    tt_model_backward(&a, dloss);
    for (int k = 0; k < B; k++) {
        tt_model_forward(&b, in + k * cfg.T, tg + k * cfg.T, 1);
        tt_model_backward(&b, dloss);
    }
    double diff = 0, norm = 0;
    const float *ga = tt_params_buffer(&a.P, TT_G), *gb = tt_params_buffer(&b.P, TT_G);
    for (size_t e = 0; e < a.P.total; e++) {
        diff += (double)(ga[e] - gb[e]) * (ga[e] - gb[e]);
        norm += (double)ga[e] * ga[e];
    }
    ck_assert_msg(sqrt(diff) < 1e-5 * sqrt(norm), "relative difference %g", sqrt(diff / norm));
    tt_model_free(&a);
    tt_model_free(&b);
}
END_TEST

START_TEST(causal_logits)
{
    /* Logits at position t do not depend on bytes after t (generation relies
     * on it): changing bytes 3 and 5 leaves positions 0..2 bit for bit, and
     * does change position 3 (which reads byte 3), so the first check is not
     * passing because the forward ignores its input. */
    tt_model m;
    tt_shard_spec sh = tt_shard_whole(&cfg);
    tt_model_init(&m, &cfg, &sh, 1, 2);
    int in[6] = {1, 2, 3, 4, 5, 6};
    tt_model_forward(&m, in, NULL, 1);
    float before[6 * 256];
    memcpy(before, m.logits, sizeof before);
    in[3] = 200;
    in[5] = 100;
    tt_model_forward(&m, in, NULL, 1);
    ck_assert(memcmp(before, m.logits, 3 * 256 * sizeof(float)) == 0);
    for (int t = 3; t < 6; t++)
        ck_assert_msg(memcmp(before + t * 256, m.logits + t * 256, 256 * sizeof(float)) != 0,
                      "logits at position %d ignore the changed byte 3", t);
    tt_model_free(&m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, initial_loss_is_uniform);
    tcase_add_test(tc, whole_model_gradient);
    tcase_add_test(tc, element_gradients);
    tcase_add_test(tc, micro_batches_sum);
    tcase_add_test(tc, causal_logits);
    suite_add_tcase(s, tc);
    return tt_check_run(s);
}
