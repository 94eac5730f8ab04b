/* tt/core/faults.h - the planted-fault switch (--inject-bug): which classic
 * parallelism bug, if any, this process plays. Only the state lives here, in
 * the lowest layer, so that a hook in any layer (comm, model, parallel, train)
 * can ask whether its fault is on; the names, descriptions and the parsing
 * are the table of tt/train/inject.h. With no fault set (the default) every
 * hook is a no-op and the run is unchanged. No MPI here: every rank sets the
 * same fault, so a skipped collective is skipped by the whole group. */
#ifndef TT_CORE_FAULTS_H
#define TT_CORE_FAULTS_H

typedef enum {
    TT_FAULT_NONE = 0,
    TT_FAULT_GRAD_SHARD,        /* train: one GPU's gradient slice scaled */
    TT_FAULT_DROP_TP_ALLREDUCE, /* model: the copy operator of q, k, v skips its backward */
    TT_FAULT_NO_VOCAB_MASK,     /* comm: the vocabulary-parallel loss keeps the padding */
    TT_FAULT_DP_NO_SYNC,        /* parallel: the DP gradient all-reduce is skipped */
    TT_FAULT_STALL,             /* comm: one rank stops for a while (for --watchdog) */
    TT_FAULT_STALE_RECOMPUTE,   /* model: --recompute skips rebuilding a block */
    TT_FAULT_SP_NO_LN_ALLREDUCE, /* model: sequence parallelism's LayerNorm gradients unsummed */
    TT_FAULT_GRAD_ACCUM,        /* parallel: micro-batch gradients not divided by their number */
    TT_FAULT_NORM_REPLICATED,   /* train: the clipping norm counts TP-replicated tensors per rank */
    TT_FAULT_STALE_ACTIVATION,  /* parallel: a stage sends the previous micro-batch's activation */
    TT_FAULT_EARLY_BUCKET,      /* parallel: DP overlap starts buckets after the first micro-batch */
    TT_FAULT_STALE_GATHER, /* model: ZeRO-3's backward reuses the gather buffer as it is */
    TT_FAULT_NAN_GRAD,          /* train: one GPU's gradient holds a NaN (for the run's guard) */
    TT_FAULT_LOST_UPDATE,       /* train: one GPU's updated weight slice is not written back */
    TT_FAULT_NO_ZERO_GRAD,      /* train: the gradients are not zeroed between steps */
    TT_NFAULTS
} tt_fault;

/* Makes f the one active fault (TT_FAULT_NONE: none). */
void tt_fault_set(tt_fault f);
/* Is f the active fault? (TT_FAULT_NONE is never "active".) */
int tt_fault_active(tt_fault f);

/* A test hook, not a fault: when the environment variable TT_TEST_PAUSE_IN_SAVE
 * holds `step`, the checkpoint writer calls this inside the save of that step
 * (its temporary file written, not yet renamed), and every rank stops there
 * for a minute after rank 0 says so on stderr, so that a test can kill a rank
 * inside a save deterministically (tests/test_crash_rerun.sh). Unset (any
 * real run), it does nothing. */
void tt_fault_pause_in_save(long step, int world_rank);
/* The same for a resumed run, between the header's read at start-up and the
 * weights' load: when TT_TEST_PAUSE_BEFORE_LOAD holds a number of seconds
 * (1 to 60), every rank waits that long there after rank 0 says so, so that
 * a test can replace the checkpoint in between. Unset, it does nothing. */
void tt_fault_pause_before_load(int world_rank);

#endif
