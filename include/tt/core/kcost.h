/* tt/core/kcost.h - what each kernel costs: its floating-point operations and
 * the floats it reads and writes. The kernels charge these to the virtual GPU
 * clock (src/core/kernels.c, attention.c, src/train/optim.c, and the folded
 * residual in src/comm/tensor_parallel.c; a cluster's fixed chunk costs are
 * charged in src/parallel/pipeline_run.c instead) and the planner
 * (src/model/cost.c) sums the same figures for a model it never builds, so a
 * kernel's price is written once (doc/design.md section 11: one implementation
 * serves both). Matrix products count 2 per multiply-add, as the model-FLOPs
 * formula does; attention is counted over the whole T x T square.
 * Arguments are doubles: the planner prices GPT-3-sized shapes. */
#ifndef TT_CORE_KCOST_H
#define TT_CORE_KCOST_H

typedef struct {
    double flops;  /* floating-point operations */
    double floats; /* 4-byte elements read and written */
} tt_kcost;

tt_kcost tt_kcost_embedding_fwd(double N, double C);
tt_kcost tt_kcost_embedding_bwd(double N, double C);
tt_kcost tt_kcost_posemb_fwd(double B, double T, double C);
tt_kcost tt_kcost_posemb_bwd(double B, double T, double C);
tt_kcost tt_kcost_layernorm_fwd(double N, double C);
tt_kcost tt_kcost_layernorm_bwd(double N, double C);
tt_kcost tt_kcost_linear_fwd(double N, double C, double OC);
/* products: 1 or 2 (the input gradient, the weight gradient, or both) */
tt_kcost tt_kcost_linear_bwd(double N, double C, double OC, int products);
/* B sequences of T tokens, ld = local heads x head size */
tt_kcost tt_kcost_attention_fwd(double B, double T, double NH, double ld);
tt_kcost tt_kcost_attention_bwd(double B, double T, double NH, double ld);
tt_kcost tt_kcost_gelu_fwd(double N);
tt_kcost tt_kcost_gelu_bwd(double N);
tt_kcost tt_kcost_residual_fwd(double N);
tt_kcost tt_kcost_residual_bwd(double N);
/* V real vocabulary columns of Vp (padded) */
tt_kcost tt_kcost_crossentropy_fwd(double N, double V, double Vp);
tt_kcost tt_kcost_crossentropy_bwd(double N, double V, double Vp);
/* The vocabulary-parallel cross-entropy's forward passes over a slice of Vl
 * columns, Vr real (pass 0: row maxima, 1: exponentials and their sums, 2:
 * scaling): shares of tt_kcost_crossentropy_fwd(N, Vr, Vl) that add up to it.
 * Its backward is tt_kcost_crossentropy_bwd(N, Vr, Vl). */
tt_kcost tt_kcost_crossentropy_slice_fwd(double N, double Vr, double Vl, int pass);
/* The optimizer's passes over n parameters: the clipping norm's sum of
 * squares and AdamW (memory-bound: w, m, v read and written, g read). */
tt_kcost tt_kcost_sumsq(double n);
tt_kcost tt_kcost_adamw(double n);

#endif
