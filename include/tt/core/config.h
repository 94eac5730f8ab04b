/* tt/core/config.h - the run configuration as plain data: the model's shape
 * (doc/design.md section 4), the optimizer's hyper-parameters (section 5) and every
 * flag of section 9. Every layer reads it; only the flag parser (tt/app/flags.h)
 * and a resumed checkpoint's metadata write it. */
#ifndef TT_CORE_CONFIG_H
#define TT_CORE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

/* The model's shape. */
typedef struct {
    int V;  /* vocabulary: 256 bytes */
    int C;  /* width */
    int L;  /* blocks */
    int NH; /* heads; head size C/NH */
    int T;  /* context length */
} tt_config;

/* AdamW, clipping and the learning-rate schedule. */
typedef struct {
    double lr, lr_min;
    int warmup;
    double weight_decay, clip, beta1, beta2, eps;
} tt_optim_config;

/* Bits of tt_run_config.given: which flags the user typed (a resumed run takes
 * the checkpoint's value for every flag not given). */
enum {
    TT_GIVEN_LAYERS = 1 << 0, TT_GIVEN_DIM = 1 << 1, TT_GIVEN_HEADS = 1 << 2,
    TT_GIVEN_SEQ = 1 << 3, TT_GIVEN_BATCH = 1 << 4, TT_GIVEN_MICRO = 1 << 5,
    TT_GIVEN_STEPS = 1 << 6, TT_GIVEN_LR = 1 << 7, TT_GIVEN_LR_MIN = 1 << 8,
    TT_GIVEN_WARMUP = 1 << 9, TT_GIVEN_WD = 1 << 10, TT_GIVEN_CLIP = 1 << 11,
    TT_GIVEN_BETA1 = 1 << 12, TT_GIVEN_BETA2 = 1 << 13, TT_GIVEN_SEED = 1 << 14,
    TT_GIVEN_VIRTUAL = 1 << 15, TT_GIVEN_ZERO = 1 << 16, TT_GIVEN_RECOMPUTE = 1 << 17,
    TT_GIVEN_SP = 1 << 18, TT_GIVEN_SCHEDULE = 1 << 19, TT_GIVEN_VOCAB = 1 << 20,
    TT_GIVEN_DP_BUCKET = 1 << 21
};

/* --recompute (doc/design.md section 10): what a block keeps for its backward. */
enum { TT_RECOMPUTE_NONE, TT_RECOMPUTE_SELECTIVE, TT_RECOMPUTE_FULL };

typedef struct {
    tt_config model;
    tt_optim_config optim;
    int tp, pp, dp;           /* layout; -1 = choose from the world size */
    int batch;                /* global batch in sequences per step */
    int micro_batches;        /* per DP rank */
    long steps;               /* total length of the run (sets the lr schedule) */
    long stop_at;             /* end this process before this step; 0 = at --steps */
    uint64_t seed;
    long eval_every;          /* 0 = only at the end */
    int eval_windows;         /* cap on eval sequences */
    long save_every;          /* 0 = only at the end */
    const char *data, *save, *resume, *log;
    long resume_step;         /* the checkpoint's step (set by tt_resume_prepare) */
    long resume_steps;        /* the length of the run that saved it (its --steps) */
    tt_optim_config resume_optim; /* and that run's optimizer settings */
    const char *train_only;   /* the first flag given that only training uses (--plan refuses it) */
    uint32_t resume_print;    /* its fingerprint (tt_ckpt_info), compared between ranks */
    const char *resume_data;  /* its --data ("" the generated corpus), NULL when it does not say */
    int data_adopted;         /* rc->data is resume_data: --data was not given */
    /* The --data file's size and CRC-32 once read (checkpoints record them),
     * and the checkpoint's record of them (resume_data_bytes 0: none). */
    uint64_t data_bytes, resume_data_bytes;
    uint32_t data_crc, resume_data_crc;
    const char *prompt;       /* start of the generated sample */
    int sample_len;           /* bytes to generate at the end (0 = none) */
    int quiet;
    int verbose;              /* --verbose: every step's line (default: about ten) */
    int validate;             /* --validate: compare with the unsharded reference */
    int show_grid;            /* --show-grid: print every GPU and group */
    size_t dp_bucket;         /* bytes per DP gradient all-reduce bucket */
    int overlap;              /* DP all-reduce beside the backward (off: --no-overlap) */
    int pin_off;              /* --pin-ranks off (1) or auto (0): tt/comm/cores.h */
    int tp_mlp_gather;        /* --tp-mlp gather (1) or megatron (0) */
    int recompute;            /* --recompute: TT_RECOMPUTE_NONE, _SELECTIVE, _FULL */
    int zero;                 /* --zero 0..3: ZeRO stage over each DP group (not a
                                 hyper-parameter: checkpoints do not depend on it) */
    int sequence_parallel;    /* --sequence-parallel */
    int report_comm;          /* --report comm: every GPU's traffic table */
    int report_memory;        /* --report memory: every GPU's memory table */
    int report_shards;        /* --report shards: every GPU's tensors and slices */
    size_t gpu_mem;           /* --gpu-mem: bytes per virtual GPU, 0 = unlimited */
    int schedule;             /* tt_schedule_kind: --schedule */
    int virtual_stages;       /* --virtual-stages: chunks per stage (interleaved) */
    const char *stage_layers; /* --stage-layers a,b,...: blocks per chunk */
    int explain;              /* --explain: narrate one step */
    const char *trace, *timeline; /* --trace FILE.json, --timeline FILE.svg */
    const char *plot;         /* --plot FILE.svg: loss curves */
#define TT_MAX_PLOT_LOGS 16
    const char *plot_logs[TT_MAX_PLOT_LOGS]; /* the CSVs after --plot: plot those, no run */
    int plot_nlogs;
    const char *cluster;      /* --cluster NAME|FILE: the virtual clocks' machine */
    int clock_wall;           /* --clock wall (1) or virtual (0) */
    int spot_check;           /* check the first and last steps (off: --no-spot-check) */
    const char *inject_bug;   /* --inject-bug NAME: a planted fault for the oracle (tests, labs) */
    /* The planner (doc/design.md section 11, src/app/plan.c): trains nothing. */
    int plan;                 /* --plan */
    const char *plan_json;    /* --plan-json FILE */
    int gpus;                 /* --gpus N: GPUs to plan for (0: tp x pp x dp if all given) */
    int precision_mixed;      /* --precision mixed (1) or fp32 (0) */
    double train_tokens;      /* --train-tokens N (0: no time, energy or cost) */
    double watchdog;          /* --watchdog SECONDS: report and end a stuck communication; 0 = off */
    unsigned given;           /* TT_GIVEN_* bits */
} tt_run_config;

/* Sequences in one micro-batch of one DP replica: the global batch split over
 * dp replicas, then into the micro-batches (doc/design.md section 5). */
static inline int tt_micro_batch_size(const tt_run_config *rc, int dp)
{
    return rc->batch / dp / rc->micro_batches;
}

#endif
