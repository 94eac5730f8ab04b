/* tt/train/train.h - one training step: sampler -> micro-batches ->
 * forward/backward through the pipeline -> DP sync -> clip -> AdamW; and the
 * forward-only uses of the pipeline (eval loss, greedy generation). The whole
 * run around them (setup, the loop, reports) is tt/app/run.h. */
#ifndef TT_TRAIN_H
#define TT_TRAIN_H

#include "tt/core/config.h"
#include "tt/core/data.h"
#include "tt/comm/grid.h"
#include "tt/model/model.h"
#include "tt/parallel/pipeline_run.h"
#include "tt/train/validate.h"

typedef struct {
    double loss;       /* mean training loss of the global batch */
    double lr;
    double grad_norm;  /* before clipping */
    double seconds;    /* tt_clock_now() time: virtual unless --clock wall,
                        * and without the oracle's (--validate, spot check) */
    double wall_seconds; /* the whole step on the wall clock, oracle included */
} tt_step_stats;

/* One optimizer step `step` (from 0) on the global batch of the sampler,
 * through the pipeline `pipe` (pipe->g may be NULL for a single virtual GPU outside
 * MPI: benchmarks, examples); val is the --validate oracle or NULL.
 * Collective when pipe->g is given. */
tt_step_stats tt_train_step(tt_pipe *pipe, const tt_corpus *c, long step, tt_validator *val);
/* Mean loss on up to rc->eval_windows windows of the eval split, shared out
 * over the DP replicas. Collective. */
double tt_eval_loss(tt_pipe *pipe, const tt_corpus *c);
/* Greedy continuation of prompt, len bytes, into out (at least
 * strlen(prompt)+len+2 bytes); the context is the last T bytes. Returns the
 * number of bytes written: the model may generate any byte, NUL included, so
 * the text is that long whatever strlen says (a NUL follows it as well).
 * Collective over the replica's pipeline and TP groups, and over DP too
 * under ZeRO-3 (each unit's weights are gathered before use); every rank
 * gets the text. */
size_t tt_generate(tt_pipe *pipe, const char *prompt, int len, char *out);

/* A value computed on the ranks of the last stage (identical on its TP
 * ranks), summed over the DP replicas: each replica's share counted once.
 * Collective (booked as other); g NULL: v. */
double tt_sum_from_last_stage(const tt_grid *g, const tt_model *m, double v);

#endif
