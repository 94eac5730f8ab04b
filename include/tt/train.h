/* tt/train.h - the training loop: sampler -> micro-batches -> forward/backward
 * -> clip -> AdamW, with eval, logging, checkpoints and a generated sample. */
#ifndef TT_TRAIN_H
#define TT_TRAIN_H

#include "tt/config.h"
#include "tt/data.h"
#include "tt/grid.h"
#include "tt/model.h"
#include "tt/validate.h"

typedef struct {
    double loss;       /* mean training loss of the global batch */
    double lr;
    double grad_norm;  /* before clipping */
    double seconds;
} tt_step_stats;

/* One optimizer step `step` (from 0) on the global batch of the sampler. g
 * may be NULL for a single virtual GPU outside MPI (benchmarks, examples);
 * val is the --validate oracle or NULL. Collective when g is given. */
tt_step_stats tt_train_step(tt_model *m, const tt_run_config *rc, const tt_corpus *c,
                            const tt_grid *g, long step, tt_validator *val);
/* Mean loss on up to rc->eval_windows windows of the eval split, shared out
 * over the DP replicas (g may be NULL). */
double tt_eval_loss(tt_model *m, const tt_run_config *rc, const tt_corpus *c, const tt_grid *g);
/* Greedy continuation of prompt, len bytes, into out (NUL-terminated, at least
 * strlen(prompt)+len+2 bytes); the context is the last T bytes. Collective
 * over the model's TP group. */
void tt_generate(tt_model *m, const char *prompt, int len, char *out);

/* The whole program on this rank's virtual GPU of grid g: returns the exit
 * status, the same on every rank. */
int tt_train_main(const tt_run_config *rc, const tt_grid *g);

#endif
