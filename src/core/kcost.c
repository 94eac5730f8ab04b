/* kcost.c - each kernel's FLOPs and memory traffic (tt/core/kcost.h): the
 * figures the virtual clocks charge and the planner sums. */
#include "tt/core/kcost.h"

static tt_kcost kc(double flops, double floats) { return (tt_kcost){flops, floats}; }

/* A gather of rows: no arithmetic, the rows read and written. */
tt_kcost tt_kcost_embedding_fwd(double N, double C) { return kc(0, 2 * N * C); }
tt_kcost tt_kcost_embedding_bwd(double N, double C) { return kc(N * C, 3 * N * C); }
tt_kcost tt_kcost_posemb_fwd(double B, double T, double C) { return kc(B * T * C, 3 * B * T * C); }
tt_kcost tt_kcost_posemb_bwd(double B, double T, double C)
{
    return kc(B * T * C, 2 * B * T * C + T * C);
}
tt_kcost tt_kcost_layernorm_fwd(double N, double C) { return kc(8 * N * C, 2 * N * C); }
tt_kcost tt_kcost_layernorm_bwd(double N, double C) { return kc(12 * N * C, 4 * N * C); }
tt_kcost tt_kcost_linear_fwd(double N, double C, double OC)
{
    return kc(2 * N * C * OC, N * C + OC * C + N * OC);
}
tt_kcost tt_kcost_linear_bwd(double N, double C, double OC, int products)
{
    return kc(2 * N * C * OC * products, products * (N * C + OC * C + N * OC));
}
/* Q K^T and P V: 2 x 2 T ld per row; the scores are written and read once. */
tt_kcost tt_kcost_attention_fwd(double B, double T, double NH, double ld)
{
    const double rows = B * T, sq = B * NH * T * T;
    return kc(4 * rows * T * ld, 4 * rows * ld + sq);
}
tt_kcost tt_kcost_attention_bwd(double B, double T, double NH, double ld)
{
    const double rows = B * T, sq = B * NH * T * T;
    return kc(8 * rows * T * ld, 10 * rows * ld + 3 * sq);
}
tt_kcost tt_kcost_gelu_fwd(double N) { return kc(20 * N, 2 * N); }
tt_kcost tt_kcost_gelu_bwd(double N) { return kc(25 * N, 3 * N); }
tt_kcost tt_kcost_residual_fwd(double N) { return kc(N, 3 * N); }
tt_kcost tt_kcost_residual_bwd(double N) { return kc(2 * N, 5 * N); }
tt_kcost tt_kcost_crossentropy_fwd(double N, double V, double Vp) { return kc(5 * N * V, 2 * N * Vp); }
tt_kcost tt_kcost_crossentropy_bwd(double N, double V, double Vp) { return kc(2 * N * V, 3 * N * Vp); }
/* The one-GPU forward over the slice, split between the passes in the
 * ratio of their FLOPs per real column: 1 comparison (the maximum); a
 * subtraction, an exponential and an addition (e^(x - max) and its sum); 1
 * multiplication (the scaling by 1/sum): 1 : 3 : 1 of the 5. The 2 floats a
 * column moves (its logit read, its probability written) are split in the
 * same ratio: every pass then has the whole kernel's FLOPs per byte, so on
 * any cluster the three roofline times add up to the one-GPU formula's time
 * over the slice, and a TP rank pays for a column what one GPU pays. (Run
 * over all N rows between all-reduces, a real GPU's passes would move 5
 * floats a column: the logits read twice, the probabilities written twice
 * and read once. The one-GPU kernel's passes, row by row with the row in
 * cache, are charged the 2 of a fused kernel, and so are these.) */
tt_kcost tt_kcost_crossentropy_slice_fwd(double N, double Vr, double Vl, int pass)
{
    static const double share[3] = {1, 3, 1};
    const tt_kcost all = tt_kcost_crossentropy_fwd(N, Vr, Vl);
    const double w = share[pass] / 5;
    return kc(w * all.flops, w * all.floats);
}
tt_kcost tt_kcost_sumsq(double n) { return kc(2 * n, n); }
tt_kcost tt_kcost_adamw(double n) { return kc(12 * n, 7 * n); }
