/* tt/train/inject.h - planted faults for --inject-bug NAME: a table of classic
 * parallelism bugs that the --validate oracle must catch. Each row is a name,
 * what a student sees when it is on, and the hook where it acts; the switch
 * itself (which fault is on) is tt/core/faults.h, so that the hooks in lower
 * layers can ask it. `--inject-bug list` prints the table.
 *
 *   grad-shard         train: tt_inject_after_backward, called by
 *                      tt_train_step after the DP sync, before the oracle
 *   drop-tp-allreduce  model: block_backward, the copy operator of q, k, v
 *   no-vocab-mask      comm: vocab_crossentropy_forward and _backward
 *   dp-no-sync         parallel: tt_dp_sync_grads
 *   stall              comm: tt_watch_begin (a hang, for --watchdog)
 *   stale-recompute    model: recompute_block
 *   grad-accum         parallel: tt_pipe_train, the loss weight of a micro-batch
 *   norm-replicated    train: tt_grad_sumsq, which copies count
 *   stale-activation   parallel: run_action, an activation send
 *   sp-no-ln-allreduce model: tt_sp_ln_grads_done (block_sp.c)
 *   early-bucket       parallel: dp_unit_ready, the DP overlap's hook
 *   stale-gather       model: tt_chunk_backward, ZeRO-3's weights_needed hook
 *   nan-grad           train: tt_inject_after_backward (not a parallelism
 *                      bug: a NaN for the run's check of each step)
 *   lost-update        train: tt_inject_around_optimizer, called by
 *                      tt_train_step before and after the optimizer step
 *   no-zero-grad       train: tt_train_step, the zeroing of the gradients
 *                      before the pipeline (skipped)
 *
 * Each row also holds the command that exposes its bug; tests/test_bugs.sh
 * runs every command the list prints and checks that the oracle fails,
 * naming the quantity, the step and a GPU, and that the same run without the
 * fault passes (tests/test_oracle_faults.sh checks the GPU named, too). */
#ifndef TT_TRAIN_INJECT_H
#define TT_TRAIN_INJECT_H

#include <stdio.h>
#include "tt/comm/grid.h"
#include "tt/core/common.h"
#include "tt/core/faults.h"
#include "tt/model/model.h"

/* The fault id (a tt_fault > TT_FAULT_NONE) of a name; an unknown name is -1
 * with an error naming the valid ones. "list" is not a fault: the caller
 * handles it (tt_inject_list). */
int tt_inject_parse(const char *name, tt_err *e);
/* The table: for each fault its name, the bug, its symptom, what the oracle
 * names first, the command (mpirun line) that exposes it and its hook. */
void tt_inject_list(FILE *out);
/* The name of fault id ("none" for TT_FAULT_NONE). */
const char *tt_inject_name(int id);
/* 0 when fault id can act in a run of `gpus` GPUs training steps
 * first_step..end-1; else -1 with an error saying what it needs (the stall,
 * say, holds the last of 2 or more GPUs at step 1). TT_FAULT_NONE: 0. */
int tt_inject_check(int id, int gpus, long first_step, long end, tt_err *e);
/* Turns fault id on (TT_FAULT_NONE: off); every rank must set the same. */
void tt_inject_set(int id);

/* The hook of grad-shard and nan-grad, after the DP sync of a step: on the
 * GPU of DP replica 0 and the last TP rank that holds blocks.0.attn.q.weight,
 * its gradient slice is scaled by 1.01 (grad-shard), or its first element
 * becomes NaN (nan-grad). No communication; no-op otherwise. */
void tt_inject_after_backward(tt_model *m, const tt_grid *g);

/* The hook of lost-update, around the optimizer step (after 0: before it;
 * 1: after it and after ZeRO's gather of the weights): the GPUs of the last
 * TP rank (every DP replica) keep their slice of blocks.0.mlp.fc1.weight (the
 * owned part under ZeRO 3) as it was before the step, as if the updated copy
 * was never written back. The
 * gradients stay right, so only the oracle's comparison of the weights after
 * the last step can see it. No communication; no-op otherwise. */
void tt_inject_around_optimizer(tt_model *m, const tt_grid *g, int after);

#endif
