/* inject.c - the table of planted faults behind --inject-bug (see
 * tt/train/inject.h) and the hooks that live in this layer, after the
 * backward and around the optimizer step (optim.c has the norm's own). Each row is
 * modelled on a bug users of Megatron-LM, DeepSpeed or torchtitan keep
 * reporting, and carries the command that exposes it: tests/test_bugs.sh
 * runs every command `--inject-bug list` prints, so the table is tested as
 * printed. */
#include "tt/train/inject.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Who catches a fault, and so the line its exposing command prints first. */
typedef enum {
    BY_ORACLE,   /* --validate: "validation FAILED: <first> diverges first, ..." */
    BY_WATCHDOG, /* a hang: "tiny_transformer: watchdog: ..." */
    BY_GUARD     /* the run's own check of each step: "tiny_transformer: <first> ..." */
} caught_by;

typedef struct {
    tt_fault id;
    const char *name;
    const char *what;    /* the bug, in one line */
    const char *symptom; /* what a user sees */
    int np;              /* the exposing command: ranks and flags */
    const char *args;
    caught_by by;
    const char *first;   /* what the oracle names first; the watchdog; the guard's words */
    const char *hook;    /* where it acts */
    int step;            /* the step the oracle names (its command trains 0 and 1) */
} fault_row;

/* The faults that cannot act everywhere: a run with fewer GPUs, one that does
 * not train step acts_at (-1: any step will do), or one that trains fewer
 * than min_steps steps is refused rather than run in vain. */
static const struct {
    tt_fault id;
    int min_gpus;
    long acts_at;
    long min_steps;
    const char *why;
} needs[] = {
    {TT_FAULT_STALL, 2, 1, 1, "it holds the last GPU there for its peers' --watchdog to report"},
    {TT_FAULT_NO_ZERO_GRAD, 1, -1, 2, "a run's first step starts from zeroed gradients"},
};

/* Small and short: every command runs in a second or two of CPU. */
#define SMALL "--layers 2 --dim 24 --heads 6 --seq 16 --batch 8 --steps 2 --quiet --sample-len 0 " \
              "--eval-every 0 --eval-windows 4"

static const fault_row rows[] = {
    {TT_FAULT_GRAD_SHARD, "grad-shard",
     "one GPU's slice of one gradient is scaled by 1.01 after the DP sync (a kernel that is "
     "wrong on one rank only)",
     "the loss and the other GPUs look right; the slice of blocks.0.attn.q.weight on DP "
     "replica 0, last TP rank, is 1% off; any layout",
     2, "--tp 2 " SMALL " --validate", BY_ORACLE, "gradient of blocks.0.attn.q.weight",
     "train/inject.c, tt_inject_after_backward (after the DP sync)", 0},
    {TT_FAULT_DROP_TP_ALLREDUCE, "drop-tp-allreduce",
     "the copy operator in front of q, k, v skips its backward all-reduce (Megatron's f: "
     "identity forward, all-reduce backward)",
     "the loss matches, but from the last block's ln1 down every gradient is one TP rank's "
     "partial sum; the TP copies of replicated tensors drift apart; no effect with tp 1",
     2, "--tp 2 " SMALL " --validate", BY_ORACLE, "gradient of blocks.1.ln1.bias",
     "model/forward.c, block_backward", 0},
    {TT_FAULT_NO_VOCAB_MASK, "no-vocab-mask",
     "the vocabulary-parallel cross-entropy keeps the padding columns in its softmax",
     "the loss is a little too high from step 0; only when tp does not divide the vocabulary "
     "256 (V padded to a multiple of tp, e.g. tp 3), no effect with tp 2 or 4",
     3, "--tp 3 " SMALL " --validate", BY_ORACLE, "loss",
     "comm/tensor_parallel.c, vocab_crossentropy_forward and _backward", 0},
    {TT_FAULT_DP_NO_SYNC, "dp-no-sync",
     "a DP replica skips the gradient all-reduce (a no_sync() context left on)",
     "each replica steps on the gradient of its own share of the batch: every gradient is "
     "off and the replicas drift apart; no effect with dp 1",
     2, "--dp 2 --micro-batches 2 " SMALL " --validate", BY_ORACLE, "gradient of lm_head.weight",
     "parallel/data_parallel.c, tt_dp_sync_grads", 0},
    {TT_FAULT_STALL, "stall",
     "not a numerical bug, a hang: the last GPU stops for 30 s before its first communication "
     "of step 1",
     "its peers wait for it; --watchdog reports the wait (operation, peer, tag) and ends the "
     "job with exit 1; needs 2 GPUs and 2 steps",
     2, "--pp 2 " SMALL " --watchdog 3", BY_WATCHDOG, "watchdog",
     "comm/watchdog.c, tt_watch_begin", 0},
    {TT_FAULT_STALE_RECOMPUTE, "stale-recompute",
     "activation recomputation skips rebuilding block 0 and reads what the last recomputed "
     "block left in the shared buffers",
     "the loss matches; the gradients of block 0 and the embeddings are wrong; only with "
     "--recompute selective or full and 2 or more blocks on a GPU",
     1, "--recompute full " SMALL " --validate", BY_ORACLE, "gradient of blocks.0.mlp.fc2.weight",
     "model/forward.c, recompute_block", 0},
    {TT_FAULT_GRAD_ACCUM, "grad-accum",
     "gradient accumulation scaled per micro-batch, not per token: each micro-batch "
     "backpropagates its own mean loss and the sum is never divided by their number",
     "the loss is right, every gradient and the logged grad norm are M times too large "
     "(M micro-batches per replica); Adam hides most of it until clipping acts; no effect "
     "with --micro-batches 1",
     2, "--dp 2 --micro-batches 2 " SMALL " --validate", BY_ORACLE, "gradient of lm_head.weight",
     "parallel/pipeline_run.c, tt_pipe_train", 0},
    {TT_FAULT_NORM_REPLICATED, "norm-replicated",
     "the clipping norm counts replicated tensors (LayerNorm weights and biases, row-split "
     "layers' biases) once per TP rank",
     "the gradients are right, the logged grad norm is too high and, when clipping acts "
     "(--clip below the norm), every update is too small; no effect with tp 1",
     2, "--tp 2 --clip 0.05 " SMALL " --validate", BY_ORACLE, "gradient norm",
     "train/optim.c, tt_grad_sumsq", 0},
    {TT_FAULT_STALE_ACTIVATION, "stale-activation",
     "a pipeline stage sends the previous micro-batch's activation (a send buffer index off "
     "by one: the buffer reused before it was refilled)",
     "the loss is off from step 0 and so is every gradient; only with pp 2 or more and 2 or "
     "more micro-batches",
     2, "--pp 2 --micro-batches 2 " SMALL " --validate", BY_ORACLE, "loss",
     "parallel/pipeline_run.c, run_action (TT_ACT_SEND_ACT)", 0},
    {TT_FAULT_SP_NO_LN_ALLREDUCE, "sp-no-ln-allreduce",
     "with --sequence-parallel, the LayerNorms' weight and bias gradients (each TP rank's "
     "own tokens) are not summed over the TP group",
     "the loss matches at first; the LayerNorm gradients are each rank's partial sums, so the "
     "TP copies of the LayerNorms drift apart; only with --sequence-parallel",
     2, "--tp 2 --sequence-parallel " SMALL " --validate", BY_ORACLE, "gradient of ln_f.bias",
     "model/block_sp.c, tt_sp_ln_grads_done", 0},
    {TT_FAULT_EARLY_BUCKET, "early-bucket",
     "the DP all-reduce overlapped with the backward starts a bucket after the first "
     "micro-batch's backward of its layers instead of the last",
     "the later micro-batches' gradients are added while the sum is in flight, so the summed "
     "gradient misses them; needs dp 2 or more, 2 or more micro-batches and the overlap (not "
     "--no-overlap, no --zero)",
     2, "--dp 2 --micro-batches 2 " SMALL " --validate", BY_ORACLE, "gradient of lm_head.weight",
     "parallel/data_parallel.c, dp_unit_ready (the DP overlap's hook)", 0},
    {TT_FAULT_STALE_GATHER, "stale-gather",
     "ZeRO-3 does not gather a block's weights again before its backward, assuming the "
     "forward's gather is still there; the one gather buffer holds another unit by then",
     "the loss matches (the forward gathers right); the blocks' gradients are computed with "
     "another unit's numbers in place of their weights; only with --zero 3",
     2, "--dp 2 --zero 3 " SMALL " --validate", BY_ORACLE, "gradient of blocks.1.mlp.fc1.bias",
     "model/forward.c, tt_chunk_backward (the weights_needed hook)", 0},
    {TT_FAULT_NAN_GRAD, "nan-grad",
     "not a parallelism bug: a kernel writes NaN into one gradient element on one GPU (an "
     "uninitialised buffer, a division by zero)",
     "the loss of step 0 is right; the clipping norm, summed over all GPUs, is NaN on every "
     "GPU and its update spreads NaN into every weight; every rank stops after that step, "
     "before --save-every can keep the weights (exit 1); any layout",
     2, "--tp 2 " SMALL " --save-every 1 --save nan-grad.ckpt", BY_GUARD,
     "the gradient norm became nan at step 0",
     "train/inject.c, tt_inject_after_backward (after the DP sync)", 0},
    {TT_FAULT_LOST_UPDATE, "lost-update",
     "one GPU's optimizer step of one weight slice is lost: the updated copy is never written "
     "back (a master-weights copy or a ZeRO shard boundary off)",
     "the loss and every gradient match; the slice of blocks.0.mlp.fc1.weight on the last TP "
     "rank (every DP replica alike, under ZeRO 3 each one's owned part) keeps its value while "
     "its moments move; only the weights after the last step show it; any layout",
     2, "--tp 2 " SMALL " --validate", BY_ORACLE, "weights of blocks.0.mlp.fc1.weight",
     "train/inject.c, tt_inject_around_optimizer (around the optimizer step)", 1},
    {TT_FAULT_NO_ZERO_GRAD, "no-zero-grad",
     "the gradients are not zeroed between steps (optimizer.zero_grad() forgotten): each "
     "step's backward adds to the last step's summed gradient",
     "step 0 is right; from step 1 every gradient carries the step before's (under DP "
     "summed once more by the all-reduce), the grad norm jumps and the loss drifts from "
     "step 2; any layout, needs 2 or more steps",
     2, "--dp 2 " SMALL " --validate", BY_ORACLE, "gradient of lm_head.weight",
     "train/train.c, tt_train_step (before the pipeline)", 1},
};
enum { NROWS = sizeof rows / sizeof rows[0] };

/* The numerical bugs again under names that do not give them away, for the
 * bug lab (doc/labs/lab6-find-the-bug.md, whose answer key has this table):
 * not in the order of the list, so the number says nothing either. */
static const tt_fault mystery[] = {
    TT_FAULT_NORM_REPLICATED, TT_FAULT_STALE_ACTIVATION, TT_FAULT_GRAD_ACCUM,
    TT_FAULT_NO_VOCAB_MASK,   TT_FAULT_DROP_TP_ALLREDUCE, TT_FAULT_DP_NO_SYNC,
    TT_FAULT_STALE_RECOMPUTE, TT_FAULT_GRAD_SHARD,
};
enum { NMYSTERY = sizeof mystery / sizeof mystery[0] };

int tt_inject_parse(const char *name, tt_err *e)
{
    for (int i = 0; i < NROWS; i++)
        if (name && strcmp(name, rows[i].name) == 0)
            return (int)rows[i].id;
    for (int k = 0; k < NMYSTERY; k++) {
        char m[16];
        snprintf(m, sizeof m, "mystery-%d", k + 1);
        if (name && strcmp(name, m) == 0)
            return (int)mystery[k];
    }
    char valid[512] = "";
    for (int i = 0; i < NROWS; i++) {
        strncat(valid, rows[i].name, sizeof valid - strlen(valid) - 1);
        strncat(valid, ", ", sizeof valid - strlen(valid) - 1);
    }
    return tt_fail(e, "unknown --inject-bug '%s' (one of: %smystery-1 .. mystery-%d, list)",
                   name ? name : "", valid, NMYSTERY);
}

void tt_inject_list(FILE *out)
{
    fprintf(out, "planted faults: --inject-bug NAME plants one. Under each, the command that "
                 "exposes it\n(--validate: the oracle must FAIL and name what diverges first; "
                 "stall: --watchdog;\nnan-grad: the run's own check of each step).\n"
                 "mystery-1 .. mystery-%d are the oracle's bugs under "
                 "hidden names, for the bug lab (doc/labs/lab6-find-the-bug.md)\n", NMYSTERY);
    for (int i = 0; i < NROWS; i++) {
        const fault_row *r = &rows[i];
        fprintf(out, "\n  %-20s %s\n", r->name, r->what);
        fprintf(out, "    symptom: %s\n", r->symptom);
        if (r->by == BY_ORACLE)
            fprintf(out, "    shows:   validation FAILED: %s diverges first, at step %d, ...\n",
                    r->first, r->step);
        else
            fprintf(out, "    shows:   tiny_transformer: %s%s ...\n", r->first,
                    r->by == BY_WATCHDOG ? ":" : "");
        fprintf(out, "    run:     mpirun --oversubscribe -np %d ./tiny_transformer %s "
                     "--inject-bug %s\n", r->np, r->args, r->name);
        fprintf(out, "    acts in: src/%s\n", r->hook);
    }
}

const char *tt_inject_name(int id)
{
    for (int i = 0; i < NROWS; i++)
        if ((int)rows[i].id == id)
            return rows[i].name;
    return "none";
}

void tt_inject_set(int id) { tt_fault_set((tt_fault)id); }

int tt_inject_check(int id, int gpus, long first_step, long end, tt_err *e)
{
    for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++) {
        if ((int)needs[i].id != id)
            continue;
        const long at = needs[i].acts_at;
        if (gpus >= needs[i].min_gpus && (at < 0 || (first_step <= at && at < end)) &&
            end - first_step >= needs[i].min_steps)
            return 0;
        const long n = end > first_step ? end - first_step : 0;
        if (at < 0)
            return tt_fail(e, "--inject-bug %s needs a run that trains %ld steps or more (%s); "
                              "this run trains %ld",
                           tt_inject_name(id), needs[i].min_steps, needs[i].why, n);
        return tt_fail(e, "--inject-bug %s needs %d GPUs and a run that trains step %ld (%s); "
                          "this run has %d GPU%s and trains steps %ld..%ld",
                       tt_inject_name(id), needs[i].min_gpus, at, needs[i].why, gpus,
                       gpus == 1 ? "" : "s", first_step, end - 1);
    }
    return 0;
}

void tt_inject_around_optimizer(tt_model *m, const tt_grid *g, int after)
{
    static float *kept; /* the slice before the step (one process, one GPU) */
    static size_t cap, n;
    if (!tt_fault_active(TT_FAULT_LOST_UPDATE))
        return;
    const int tp_rank = g ? g->tp_rank : 0, tp = g ? g->tp : 1;
    int i = tt_params_find(&m->P, "blocks.0.mlp.fc1.weight");
    /* every DP replica alike, so the replicas stay equal and only the
     * weights' comparison can tell */
    if (i < 0 || tp_rank != tp - 1)
        return;
    /* The weights this GPU keeps: its whole slice, or under ZeRO 3 the part
     * it owns (the others are gathered from their owners). */
    const tt_tensor *t = &m->P.t[i];
    size_t a = 0, b = tt_tensor_real_numel(t);
    if (tt_kind_sharded(&m->P, TT_W)) {
        size_t real = b;
        tt_tensor_owned(&m->P, t, &a, &b);
        b = b < real ? b : real;
        a = a < b ? a : b;
    }
    float *w = b > a ? tt_owned_data(&m->P, t, TT_W, a) : NULL;
    if (!w)
        return;
    if (!after) {
        n = b - a;
        if (n > cap) {
            free(kept);
            kept = tt_malloc(n * sizeof *kept);
            cap = n;
        }
        memcpy(kept, w, n * sizeof *kept);
    } else if (kept && n == b - a) {
        memcpy(w, kept, n * sizeof *kept);
    }
}

void tt_inject_after_backward(tt_model *m, const tt_grid *g)
{
    const int nan = tt_fault_active(TT_FAULT_NAN_GRAD);
    if (!nan && !tt_fault_active(TT_FAULT_GRAD_SHARD))
        return;
    const int dp_rank = g ? g->dp_rank : 0, tp_rank = g ? g->tp_rank : 0, tp = g ? g->tp : 1;
    int i = tt_params_find(&m->P, "blocks.0.attn.q.weight");
    if (i < 0 || dp_rank != 0 || tp_rank != tp - 1)
        return;
    const tt_tensor *t = &m->P.t[i];
    /* Under ZeRO, the part of the summed gradient this GPU owns. */
    size_t a, b, real = tt_tensor_real_numel(t);
    tt_tensor_owned(&m->P, t, &a, &b);
    float *grad = tt_owned_data(&m->P, t, TT_G, a);
    if (nan) {
        if (a < b && a < real)
            grad[0] = NAN; /* one element is enough: the norm sums them all */
        return;
    }
    for (size_t e = a; e < b && e < real; e++)
        grad[e - a] *= 1.01f;
}
