/* tt/train/resume.h - a run's checkpoints: resuming completes the run's
 * configuration from the file, saving writes the run's state. */
#ifndef TT_TRAIN_RESUME_H
#define TT_TRAIN_RESUME_H

#include "tt/comm/grid.h"
#include "tt/core/common.h"
#include "tt/core/config.h"
#include "tt/model/model.h"
#include "tt/train/checkpoint.h"

/* For --resume: reads the checkpoint's metadata (into *info) and completes
 * rc with its model shape and hyper-parameters (for every flag not given; a
 * given model shape that contradicts it is an error), its step and its
 * fingerprint. Every rank reads the same file, so all reach the same verdict
 * (and the fingerprints tell when they did not read the same file). */
int tt_resume_prepare(tt_run_config *rc, tt_ckpt_info *info, tt_err *e);

/* The word --resume takes for "continue if there is something to continue". */
#define TT_RESUME_AUTO "auto"

/* For --resume auto (with --save F): F itself, never a temporary of it, is
 * the checkpoint to continue from. If F does not exist, rc->resume is cleared
 * (a fresh start) and 0 returned; if it exists, rc->resume = F and 1 is
 * returned, and the caller's tt_resume_prepare and load must then succeed: a
 * damaged F is refused, not silently replaced by a new run's checkpoint.
 * -1 with e: no --save, or F cannot be examined. */
int tt_resume_auto(tt_run_config *rc, tt_err *e);

/* After loading a checkpoint into p (this rank's shards): -1 with a message
 * naming the file and tensor when a weight or Adam moment is not finite or a
 * second moment is negative. The checksums prove the bytes are the ones
 * written, not that they are a training state. Not collective: the caller
 * agrees on the verdict. */
int tt_resume_check_state(const tt_params *p, const char *path, tt_err *e);

/* Collective: saves the model's weights and Adam moments at `step` as the
 * global checkpoint `path`; on failure every rank returns -1 with the same
 * message and `path` is left as it was. */
int tt_run_save(const tt_run_config *rc, const tt_model *m, const tt_grid *g, long step,
                const char *path, tt_err *e);

#endif
