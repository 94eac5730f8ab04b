/* tt/core/kernels.h - forward/backward kernel pairs on plain float arrays.
 *
 * Conventions (as in llm.c): outputs first; N = number of token rows (B*T),
 * C = input channels, OC = output channels, B,T,NH,hs,V as usual; every
 * pointer carries its shape in a comment. Linear weights are [OC, C] (PyTorch)
 * so y = x W^T + b. The linear layers' products go through cblas_sgemm;
 * attention's per-head products go through tt_small_gemm (small_gemm.h).
 *
 * Backward kernels ACCUMULATE (+=) into every gradient they write, input
 * gradients included: callers zero gradients once per step, micro-batches add
 * up, and a residual branch simply adds into the same buffer.
 *
 * The kernels know nothing of MPI; the slicing arguments (a vocabulary range,
 * a number of local heads) are what lets tensor parallelism reuse them. */
#ifndef TT_KERNELS_H
#define TT_KERNELS_H

/* Token embedding over a vocabulary slice: rows [v0, v0+Vl) of the table live
 * here. out[n] = w[idx[n]-v0] when idx[n] is in the slice, else 0 (another
 * shard owns that row). */
void embedding_forward(float *out /* N,C */, const int *idx /* N */,
                       const float *w /* Vl,C */, int N, int C, int v0, int Vl);
void embedding_backward(float *dw /* Vl,C */, const float *dout /* N,C */,
                        const int *idx /* N */, int N, int C, int v0, int Vl);

/* Learned positions: out[b,t] += wpe[t]. */
void posemb_forward(float *out /* B,T,C */, const float *wpe /* T,C */, int B, int T, int C);
void posemb_backward(float *dwpe /* T,C */, const float *dout /* B,T,C */, int B, int T, int C);

/* LayerNorm over C with eps 1e-5; mean and rstd are saved for the backward. */
void layernorm_forward(float *out /* N,C */, float *mean /* N */, float *rstd /* N */,
                       const float *inp /* N,C */, const float *w /* C */,
                       const float *b /* C */, int N, int C);
void layernorm_backward(float *dinp /* N,C */, float *dw /* C */, float *db /* C */,
                        const float *dout /* N,C */, const float *inp /* N,C */,
                        const float *w /* C */, const float *mean /* N */,
                        const float *rstd /* N */, int N, int C);

/* y = x W^T + b (b may be NULL). */
void linear_forward(float *out /* N,OC */, const float *inp /* N,C */,
                    const float *w /* OC,C */, const float *b /* OC or NULL */,
                    int N, int C, int OC);
/* dinp, dw, db may each be NULL when that gradient is not wanted. */
void linear_backward(float *dinp /* N,C */, float *dw /* OC,C */, float *db /* OC */,
                     const float *dout /* N,OC */, const float *inp /* N,C */,
                     const float *w /* OC,C */, int N, int C, int OC);

/* Causal self-attention of NH heads of size hs on separate q, k, v whose rows
 * hold the heads side by side ([B,T,NH*hs]). att keeps the softmax
 * probabilities (zero above the diagonal) for the backward; scale 1/sqrt(hs). */
void attention_forward(float *out /* B,T,NH*hs */, float *att /* B,NH,T,T */,
                       const float *q /* B,T,NH*hs */, const float *k /* B,T,NH*hs */,
                       const float *v /* B,T,NH*hs */, int B, int T, int NH, int hs);
/* scratch is work space of B*NH*T*T floats (or T*T: it is reused per head). */
void attention_backward(float *dq /* B,T,NH*hs */, float *dk /* B,T,NH*hs */,
                        float *dv /* B,T,NH*hs */, float *scratch /* T,T */,
                        const float *dout /* B,T,NH*hs */, const float *q,
                        const float *k, const float *v, const float *att /* B,NH,T,T */,
                        int B, int T, int NH, int hs);

/* GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void gelu_forward(float *out /* N */, const float *inp /* N */, int N);
void gelu_backward(float *dinp /* N */, const float *inp /* N */, const float *dout /* N */, int N);

/* out = a + b (the residual stream). Its backward adds dout into both inputs'
 * gradients, which callers do with residual_backward. */
void residual_forward(float *out /* N */, const float *a /* N */, const float *b /* N */, int N);
void residual_backward(float *da /* N */, float *db /* N */, const float *dout /* N */, int N);

/* Softmax cross-entropy over the first V of Vp logits per row (columns V..Vp
 * are vocabulary padding and take no part). losses[n] = -log p[n, targets[n]];
 * probs keeps the softmax for the backward (0 in padded columns). */
void crossentropy_forward(float *losses /* N */, float *probs /* N,Vp */,
                          const float *logits /* N,Vp */, const int *targets /* N */,
                          int N, int Vp, int V);
/* The same over one rank's slice of the vocabulary (the vocabulary-parallel
 * cross-entropy of comm/tensor_parallel.c, which sums mx's maximum, tl and se
 * over the TP group between the passes): Vr of the Vl columns are real, v0 is
 * the slice's first token id. max: each row's maximum over the slice
 * (-FLT_MAX when it has no real column) and its target logit (0 when another
 * rank owns the target); exp: probs = e^(logits - mx), se the row sums;
 * finish: probs /= se, losses = log se + mx - tl. */
void crossentropy_slice_max(float *mx /* N */, float *tl /* N */, const float *logits /* N,Vl */,
                            const int *targets /* N */, int N, int Vl, int Vr, int v0);
void crossentropy_slice_exp(float *probs /* N,Vl */, float *se /* N */,
                            const float *logits /* N,Vl */, const float *mx /* N */, int N,
                            int Vl, int Vr);
void crossentropy_slice_finish(float *losses /* N */, float *probs /* N,Vl */,
                               const float *se /* N */, const float *mx /* N */,
                               const float *tl /* N */, int N, int Vl, int Vr);
/* The backward over the slice: as crossentropy_backward, where a target
 * outside the slice adds no one-hot term. */
void crossentropy_slice_backward(float *dlogits /* N,Vl */, const float *probs /* N,Vl */,
                                 const int *targets /* N */, float dloss, int N, int Vl, int Vr,
                                 int v0);
/* dlogits += dloss * (probs - onehot(target)); dloss is d(total loss)/d(each
 * row's loss), e.g. 1/(global tokens) for a mean. */
void crossentropy_backward(float *dlogits /* N,Vp */, const float *probs /* N,Vp */,
                           const int *targets /* N */, float dloss, int N, int Vp, int V);

#endif
