/* tt/train/optim.h - AdamW with PyTorch's semantics, global-norm clipping and the
 * warm-up + cosine learning-rate schedule of design.md section 5. */
#ifndef TT_OPTIM_H
#define TT_OPTIM_H

#include "tt/core/config.h"
#include "tt/core/params.h"

/* Learning rate at step s (from 0) of a run of S steps. */
double tt_lr_at(const tt_optim_config *o, long s, long S);

/* Sum of squares (double) of the local gradient shards whose copy counts on
 * the GPU at (dp_rank, tp_rank) (tt_tensor_canonical), so that summed over
 * all GPUs every element of the model is counted once; (0, 0) counts all.
 * Under ZeRO each DP rank counts the summed gradient of the shard it owns. */
double tt_grad_sumsq(const tt_params *p, int dp_rank, int tp_rank);
/* Clipping coefficient for a global norm: min(1, clip/(norm+1e-6)); 1 when
 * clip <= 0 (disabled). */
double tt_clip_coef(double clip, double norm);

/* One AdamW update of every shard (under ZeRO: of the owned part of it): the gradients are first scaled by
 * grad_scale (the clip coefficient); step_number counts from 1 (bias
 * correction). Decoupled weight decay w -= lr*wd*w only on shards with decay. */
void tt_adamw_step(tt_params *p, const tt_optim_config *o, double lr, long step_number,
                   double grad_scale);

#endif
