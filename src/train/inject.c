/* inject.c - the table of planted faults behind --inject-bug (see
 * tt/train/inject.h) and the one hook that lives in this layer. */
#include "tt/train/inject.h"

#include <string.h>

typedef struct {
    tt_fault id;
    const char *name;
    const char *hook; /* where it acts */
    const char *what; /* what a student sees */
} fault_row;

static const fault_row rows[] = {
    {TT_FAULT_GRAD_SHARD, "grad-shard",
     "train/inject.c, after the DP sync of each step (tt_train_step)",
     "the gradient slice of blocks.0.attn.q.weight on one GPU (DP replica 0, the last TP "
     "rank) is scaled by 1.01; the oracle names that gradient and that GPU; any layout"},
    {TT_FAULT_DROP_TP_ALLREDUCE, "drop-tp-allreduce",
     "model/forward.c, block_backward: the copy operator in front of q, k, v",
     "the backward all-reduce of the copy operator of q, k and v is skipped: the loss still "
     "matches, but the gradient of the last block's ln1 and of everything before it is one TP "
     "rank's partial sum; no effect with tp 1"},
    {TT_FAULT_NO_VOCAB_MASK, "no-vocab-mask",
     "comm/tensor_parallel.c, vocab_crossentropy_forward and _backward",
     "the vocabulary-parallel cross-entropy keeps the padding columns (V = 256 padded to a "
     "multiple of tp) in its softmax: the loss is too high; only when tp does not divide 256 "
     "(e.g. --tp 3), no effect otherwise"},
    {TT_FAULT_DP_NO_SYNC, "dp-no-sync",
     "parallel/data_parallel.c, tt_dp_sync_grads",
     "the DP gradient all-reduce is skipped: each replica steps on the gradient of its own "
     "share of the batch, every gradient diverges and the replicas drift apart; no effect "
     "with dp 1"},
    {TT_FAULT_STALL, "stall",
     "comm/watchdog.c, tt_watch_begin: before the last GPU's first communication of step 1",
     "not a numerical bug, a hang: the last GPU (highest world rank) stops for 30 s, its "
     "peers wait for it, and --watchdog (e.g. --watchdog 3) reports the wait and ends the "
     "job; needs at least 2 GPUs and 2 steps"},
    {TT_FAULT_STALE_RECOMPUTE, "stale-recompute",
     "model/forward.c, recompute_block",
     "with --recompute selective or full, block 0's backward skips its recomputation and "
     "uses what the last recomputed (or forwarded) block left in the shared activations: "
     "the gradients of block 0 and everything before it are wrong; needs 2 or more blocks "
     "on a GPU, no effect with --recompute none"},
    {TT_FAULT_EARLY_BUCKET, "early-bucket",
     "parallel/data_parallel.c, dp_unit_ready (the DP overlap's hook)",
     "the overlapped DP all-reduce starts each bucket after the first micro-batch's backward "
     "of its layers instead of the last: the later micro-batches' gradients are added while "
     "the sum is in flight, so the summed gradient misses them; needs dp > 1, 2 or more "
     "micro-batches and the overlap (not --no-overlap, no --zero)"},
};
enum { NROWS = sizeof rows / sizeof rows[0] };

int tt_inject_parse(const char *name, tt_err *e)
{
    for (int i = 0; i < NROWS; i++)
        if (name && strcmp(name, rows[i].name) == 0)
            return (int)rows[i].id;
    char valid[256] = "";
    for (int i = 0; i < NROWS; i++) {
        strncat(valid, rows[i].name, sizeof valid - strlen(valid) - 1);
        strncat(valid, ", ", sizeof valid - strlen(valid) - 1);
    }
    return tt_fail(e, "unknown --inject-bug '%s' (one of: %slist)", name ? name : "", valid);
}

void tt_inject_list(FILE *out)
{
    fprintf(out, "planted faults (--inject-bug NAME; with --validate the oracle must then "
                 "FAIL):\n");
    for (int i = 0; i < NROWS; i++)
        fprintf(out, "  %-18s %s\n  %-18s acts in %s\n", rows[i].name, rows[i].what, "",
                rows[i].hook);
}

const char *tt_inject_name(int id)
{
    for (int i = 0; i < NROWS; i++)
        if ((int)rows[i].id == id)
            return rows[i].name;
    return "none";
}

void tt_inject_set(int id) { tt_fault_set((tt_fault)id); }

void tt_inject_after_backward(tt_model *m, const tt_grid *g)
{
    if (!tt_fault_active(TT_FAULT_GRAD_SHARD))
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
    for (size_t e = a; e < b && e < real; e++)
        grad[e - a] *= 1.01f;
}
