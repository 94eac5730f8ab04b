/* tt/train.h - the training loop: sampler -> micro-batches -> forward/backward
 * -> clip -> AdamW, with eval, logging, checkpoints and a generated sample. */
#ifndef TT_TRAIN_H
#define TT_TRAIN_H

#include "tt/config.h"
#include "tt/data.h"
#include "tt/model.h"

typedef struct {
    double loss;       /* mean training loss of the global batch */
    double lr;
    double grad_norm;  /* before clipping */
    double seconds;
} tt_step_stats;

/* One optimizer step `step` (from 0) on the global batch of the sampler. */
tt_step_stats tt_train_step(tt_model *m, const tt_run_config *rc, const tt_corpus *c,
                            long step);
/* Mean loss on up to rc->eval_windows windows of the eval split. */
double tt_eval_loss(tt_model *m, const tt_run_config *rc, const tt_corpus *c);
/* Greedy continuation of prompt, len bytes, into out (NUL-terminated, at least
 * len+1 bytes); the context is the last T bytes. */
void tt_generate(tt_model *m, const char *prompt, int len, char *out);

/* The whole program on one virtual GPU: returns the process exit status. */
int tt_train_main(const tt_run_config *rc, int rank);

#endif
