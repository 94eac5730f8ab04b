/* tt/comm/tensor_parallel.h - Megatron-style tensor parallelism: the layers'
 * math is the kernels' (on local slices); what TP adds is communication,
 * written as four operators, each a dual pair (Megatron-LM's mappings: the
 * backward of each is the other's forward):
 *
 *   copy     forward identity          backward all-reduce   (in front of column-parallel)
 *   reduce   forward all-reduce        backward identity     (after row-parallel)
 *   gather   forward all-gather        backward reduce-scatter (sum, keep my block)
 *   scatter  forward keep my block     backward all-gather
 *
 * Every all-reduce, all-gather and reduce-scatter of the TP group in training
 * happens in this file: in these operators, or in the vocabulary-parallel
 * cross-entropy (three all-reduces of N floats). (Generation's max-loc in
 * train/eval.c and the end-of-run check that TP copies agree are booked as
 * "other".)
 * A column-parallel linear holds rows [r*OC/tp, (r+1)*OC/tp) of W [OC, C]: its
 * input is replicated, its output is this rank's slice of the columns of y.
 * A row-parallel linear holds columns [r*C/tp, ...) of W [OC, C]: its input is
 * a slice, its output a partial sum that `reduce` completes; its bias is
 * replicated and added once, after the reduce.
 *
 * Every function that communicates takes the grid; with g == NULL or tp == 1
 * it reduces to the single-GPU computation (no communication). All traffic
 * is booked as TP. */
#ifndef TT_COMM_TENSOR_PARALLEL_H
#define TT_COMM_TENSOR_PARALLEL_H

#include "tt/comm/comm.h"
#include "tt/comm/grid.h"

/* copy: x goes unchanged into a column-parallel layer (every rank holds all
 * of it); backward, each rank's partial input gradient dx is summed in place
 * over the TP group. Several column-parallel layers reading the same input
 * (q, k and v) share one copy, so one all-reduce of their summed dx. */
void tp_copy_forward(const tt_grid *g, const float *x /* n */, int n);
void tp_copy_backward(const tt_grid *g, float *dx /* n */, int n); /* the pair's in-place
                                                                    form; the model uses _to */
/* The same out of place: dx = the sum of every rank's part. A rank that
 * makes its part where tp_sum_space says spares the sum a copy into the
 * memory the TP pair shares (the TP sums are what many virtual GPUs on few
 * cores pay most for: doc/communication.md). */
void tp_copy_backward_to(const tt_grid *g, float *dx /* n */, const float *part /* n */, int n);
float *tp_sum_space(const tt_grid *g, float *own /* n */, int n);

/* reduce: the partial sums of a row-parallel layer are summed in place;
 * backward, the gradient reaches every rank's partial sum unchanged. */
void tp_reduce_forward(const tt_grid *g, float *x /* n */, int n);
void tp_reduce_backward(const tt_grid *g, const float *dx /* n */, int n);

/* gather: full = [part of rank 0 | part of rank 1 | ...] (rank-major blocks
 * of n floats); backward: dpart = sum over ranks of their dfull's block r. */
void tp_gather_forward(const tt_grid *g, float *full /* tp*n */, const float *part /* n */, int n);
void tp_gather_backward(const tt_grid *g, float *dpart /* n */, const float *dfull /* tp*n */,
                        int n);

/* scatter: part = this rank's block r of full (rank-major blocks of n floats,
 * no communication); backward: dfull = every rank's dpart, gathered. */
void tp_scatter_forward(const tt_grid *g, float *part /* n */, const float *full /* tp*n */,
                        int n);
void tp_scatter_backward(const tt_grid *g, float *dfull /* tp*n */, const float *dpart /* n */,
                         int n);

/* Sequence parallelism (Korthikanti et al. 2022): between the TP regions
 * each rank keeps only its N/tp rows (tokens) of the residual stream, so the
 * copy in front of a column-parallel layer becomes sp_gather and the reduce
 * after a row-parallel layer becomes sp_scatter:
 *
 *   sp_gather   forward all-gather of the rows   backward reduce-scatter
 *   sp_scatter  forward reduce-scatter (sum,     backward all-gather
 *               keep my rows)
 *
 * In ring bytes an all-gather plus a reduce-scatter move what one all-reduce
 * of the full buffer moves. n is this rank's part, the full buffer tp*n. */
void tp_sp_gather_forward(const tt_grid *g, float *full /* tp*n */, const float *part /* n */,
                          int n);
void tp_sp_gather_backward(const tt_grid *g, float *dpart /* n */, const float *dfull /* tp*n */,
                           int n);
void tp_sp_scatter_forward(const tt_grid *g, float *part /* n */, const float *full /* tp*n */,
                           int n);
void tp_sp_scatter_backward(const tt_grid *g, float *dfull /* tp*n */, const float *dpart /* n */,
                            int n);
/* The gradients of parameters that saw only this rank's rows (the
 * LayerNorms' weights and biases), summed in place over the TP group. */
void tp_sp_param_grads(const tt_grid *g, float *grads, int n);

/* Column-parallel linear: out = inp W_l^T + b_l, with the copy operator in
 * front (the backward all-reduces dinp, which is overwritten, not added to). */
void column_linear_forward(const tt_grid *g, float *out /* N,OCl */, const float *inp /* N,C */,
                           const float *w /* OCl,C */, const float *b /* OCl or NULL */,
                           int N, int C, int OCl);
void column_linear_backward(const tt_grid *g, float *dinp /* N,C */, float *dw /* OCl,C */,
                            float *db /* OCl or NULL */, const float *dout /* N,OCl */,
                            const float *inp /* N,C */, const float *w /* OCl,C */, int N, int C,
                            int OCl);

/* Row-parallel linear: out = reduce(inp_l W_l^T) + b, b replicated (NULL: none).
 * Backward: identity for the reduce; dinp (a slice, accumulated), dw, and db
 * (replicated: every TP rank computes the same sum). */
void row_linear_forward(const tt_grid *g, float *out /* N,OC */, const float *inp /* N,Cl */,
                        const float *w /* OC,Cl */, const float *b /* OC or NULL */, int N,
                        int Cl, int OC);
void row_linear_backward(const tt_grid *g, float *dinp /* N,Cl */, float *dw /* OC,Cl */, float *db /* OC */,
                         const float *dout /* N,OC */, const float *inp /* N,Cl */,
                         const float *w /* OC,Cl */, int N, int Cl, int OC);

/* A row-parallel linear and the residual add after it in a block:
 * x_out = x_in + (reduce(inp_l W_l^T) + b), the sum going straight into the
 * add (no pass over it alone; the same bits as row_linear_forward then
 * residual_forward). tmp (N,OC) is scratch where the TP group has no
 * shared slot. x_out may be x_in. */
void row_linear_residual_forward(const tt_grid *g, float *x_out /* N,OC */,
                                 const float *x_in /* N,OC */, float *tmp /* N,OC */,
                                 const float *inp /* N,Cl */, const float *w /* OC,Cl */,
                                 const float *b /* OC or NULL */, int N, int Cl, int OC);

/* The same layers with sequence parallelism, N the micro-batch's rows and
 * N/tp this rank's: row-parallel, out (N/tp rows) = sp_scatter of the partial
 * sums (in `partial`, N,OC scratch) plus b; backward, dout (N/tp rows) is
 * gathered into dfull (N,OC scratch) and db taken from all N rows.
 * Column-parallel backward: dinp (N/tp rows, overwritten) = sp_gather's
 * backward of the full input gradient, built in dfull (N,C scratch); the
 * forward is the plain linear on the gathered input. */
void row_linear_sp_forward(const tt_grid *g, float *out /* N/tp,OC */, float *partial /* N,OC */,
                           const float *inp /* N,Cl */, const float *w, const float *b, int N,
                           int Cl, int OC);
void row_linear_sp_backward(const tt_grid *g, float *dinp /* N,Cl */, float *dw, float *db,
                            float *dfull /* N,OC */, const float *dout /* N/tp,OC */,
                            const float *inp /* N,Cl */, const float *w, int N, int Cl, int OC);
void column_linear_sp_backward(const tt_grid *g, float *dinp /* N/tp,C */,
                               float *dfull /* N,C */, float *dw, float *db,
                               const float *dout /* N,OCl */, const float *inp /* N,C */,
                               const float *w, int N, int C, int OCl);
/* The embedding with sequence parallelism: partial lookups (N,C scratch)
 * reduce-scattered, so each rank gets its N/tp rows complete. */
void vocab_embedding_sp_forward(const tt_grid *g, float *out /* N/tp,C */,
                                float *partial /* N,C */, const int *idx /* N */,
                                const float *w /* Vl,C */, int N, int C, int v0, int Vl);

/* Vocabulary-parallel embedding: this rank owns rows [v0, v0+Vl); lookups
 * outside give zero and one all-reduce completes every row. The backward is
 * local (embedding_backward): the all-reduce's dual is the identity. */
void vocab_embedding_forward(const tt_grid *g, float *out /* N,C */, const int *idx /* N */,
                             const float *w /* Vl,C */, int N, int C, int v0, int Vl);

/* Vocabulary-parallel cross-entropy on this rank's logit columns [v0, v0+Vl)
 * of a vocabulary of V real entries (columns >= V are padding). The full
 * logits are never gathered: three all-reduces of N floats (the row max, the
 * target logit, the sum of exponentials). probs keeps this slice's softmax. */
void vocab_crossentropy_forward(const tt_grid *g, float *losses /* N */, float *probs /* N,Vl */,
                                const float *logits /* N,Vl */, const int *targets /* N */,
                                int N, int Vl, int v0, int V);
/* dlogits += dloss * (probs - onehot) on the slice; no communication. */
void vocab_crossentropy_backward(float *dlogits /* N,Vl */, const float *probs /* N,Vl */,
                                 const int *targets /* N */, float dloss, int N, int Vl, int v0,
                                 int V);

/* The TP traffic the functions above cause on one GPU of a TP group of more
 * than one, for `steps` training steps, added to *add (doc/communication.md):
 * tokens_per_step are the tokens of this DP replica's share of the batch,
 * local_blocks the transformer blocks this GPU holds, first_stage/last_stage
 * whether it holds the embeddings / lm_head and the loss, mlp_gather whether
 * fc1's output is gathered (--tp-mlp gather), recompute_full whether every
 * block's forward runs again in its backward (--recompute full: its two
 * all-reduces, and its gather, again). Plain numbers: this layer does not see
 * the model. */
void tp_expected_traffic(tt_comm_stats *add, long long tokens_per_step, long long C,
                         long long local_blocks, int first_stage, int last_stage, int mlp_gather,
                         int recompute_full, long long micro_batches, long steps);

/* The same with sequence parallelism (--tp-mlp gather is refused with it):
 * all-gathers and reduce-scatters instead of the all-reduces, and small
 * all-reduces of the LayerNorm gradients. */
void tp_sp_expected_traffic(tt_comm_stats *add, long long tokens_per_step, long long C,
                            long long local_blocks, int first_stage, int last_stage,
                            int recompute_full, long long micro_batches, long steps);

#endif
