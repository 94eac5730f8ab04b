/* optim.c - learning-rate schedule, global-norm clipping and AdamW, following
 * PyTorch's torch.optim.AdamW and torch.nn.utils.clip_grad_norm_. */
#include "tt/train/optim.h"
#include "core/vec.h"
#include "tt/core/faults.h"
#include "tt/core/kcost.h"
#include "tt/core/vclock.h"

#include <math.h>

double tt_lr_at(const tt_optim_config *o, long s, long S)
{
    if (s < o->warmup)
        return o->lr * (double)(s + 1) / (double)o->warmup;
    long span = S - o->warmup;
    if (span < 1)
        span = 1;
    double progress = (double)(s - o->warmup) / (double)span;
    return o->lr_min + (o->lr - o->lr_min) * (1.0 + cos(M_PI * progress)) / 2.0;
}

/* The sum of g^2 in double (a float's square is exact in double): VL
 * partial sums combined by vec.h's fixed tree, so the order does not depend
 * on the data or the ISA clone, and the sum is no single chain of dependent
 * additions (one every 4 cycles, 2% of a step on the bench model). */
TT_SIMD static double sumsq(const float *g, size_t n)
{
    double acc[VL] = {0};
    size_t e = 0;
    for (; e + VL <= n; e += VL)
        for (int l = 0; l < VL; l++)
            acc[l] += (double)g[e + l] * (double)g[e + l];
    double sum = lanes_total_d(acc);
    for (; e < n; e++)
        sum += (double)g[e] * (double)g[e];
    return sum;
}

double tt_grad_sumsq(const tt_params *p, int dp_rank, int tp_rank)
{
    double sum = 0.0;
    /* planted (--inject-bug norm-replicated): every TP rank counts its own
     * copy of a replicated tensor (a LayerNorm weight, a row-split bias) */
    if (tt_fault_active(TT_FAULT_NORM_REPLICATED))
        tp_rank = 0;
    for (int i = 0; i < p->n; i++) {
        const tt_tensor *t = &p->t[i];
        /* Under ZeRO every DP rank holds the summed gradient of its own
         * shard only, so each counts its shard (the DP ranks' shards tile
         * the buffer); across TP the rule is the usual one. */
        if (p->z.stage ? !(tt_tensor_canonical(t, 0, tp_rank))
                       : !tt_tensor_canonical(t, dp_rank, tp_rank))
            continue;
        size_t a, b;
        const size_t n = tt_tensor_owned(p, t, &a, &b);
        const float *g = tt_owned_data(p, t, TT_G, a);
        sum += sumsq(g, n);
        const tt_kcost k = tt_kcost_sumsq((double)n);
        tt_vclock_compute(k.flops, 4.0 * k.floats);
    }
    return sum;
}

double tt_clip_coef(double clip, double norm)
{
    if (clip <= 0.0)
        return 1.0;
    double coef = clip / (norm + 1e-6);
    return coef < 1.0 ? coef : 1.0;
}

/* One tensor's update, element by element as torch.optim.AdamW does it. The
 * loop runs in blocks of 16 so that gcc's cheapest vectorizer (-O2) maps each
 * block onto whole registers; every element sees the same operations either
 * way, so the blocks and the tail give the same bits. */
#define ADAMW_ELEMENT(e)                                   \
    do {                                                   \
        float ge = g[e] * gs;                              \
        w[e] *= decay;                                     \
        m[e] = b1 * m[e] + one_b1 * ge;                    \
        v[e] = b2 * v[e] + one_b2 * ge * ge;               \
        float denom = sqrtf(v[e]) / bc2_sqrt + eps;        \
        w[e] -= step_size * m[e] / denom;                  \
    } while (0)

TT_SIMD static void adamw_update(float *restrict w, float *restrict m, float *restrict v,
                                 const float *restrict g, size_t n, float decay, float b1,
                                 float one_b1, float b2, float one_b2, float step_size,
                                 float bc2_sqrt, float eps, float gs)
{
    size_t e = 0;
    for (; e + 16 <= n; e += 16)
        for (size_t k = e; k < e + 16; k++)
            ADAMW_ELEMENT(k);
    for (; e < n; e++)
        ADAMW_ELEMENT(e);
    /* Memory-bound on a GPU: w, m, v read and written, g read. */
    const tt_kcost k = tt_kcost_adamw((double)n);
    tt_vclock_compute(k.flops, 4.0 * k.floats);
}

void tt_adamw_step(tt_params *p, const tt_optim_config *o, double lr, long step_number,
                   double grad_scale)
{
    /* 1 - beta is formed in double, as PyTorch does with its Python floats:
     * in float, 1 - 0.999f loses five digits to cancellation. */
    const float b1 = (float)o->beta1, b2 = (float)o->beta2;
    const float one_b1 = (float)(1.0 - o->beta1), one_b2 = (float)(1.0 - o->beta2);
    const double bc1 = 1.0 - pow(o->beta1, (double)step_number);
    const double bc2 = 1.0 - pow(o->beta2, (double)step_number);
    const float step_size = (float)(lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
    for (int i = 0; i < p->n; i++) {
        tt_tensor *t = &p->t[i];
        const float decay = t->decay ? (float)(1.0 - lr * o->weight_decay) : 1.0f;
        /* Without ZeRO the whole shard; with it only the part this GPU owns
         * (its moments exist for that part only; the rest comes back with
         * the all-gather of the updated weights). */
        size_t a, b;
        const size_t n = tt_tensor_owned(p, t, &a, &b);
        adamw_update(tt_owned_data(p, t, TT_W, a), tt_owned_data(p, t, TT_M, a),
                     tt_owned_data(p, t, TT_V, a), tt_owned_data(p, t, TT_G, a), n, decay, b1,
                     one_b1, b2, one_b2, step_size, bc2_sqrt, (float)o->eps, (float)grad_scale);
    }
}
