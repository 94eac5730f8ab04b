/* flags_table.c - what the flags are: the defaults of tt_run_config and the
 * table of every flag (its value, range, field, help line), which both the
 * parser and --help read (flags.c, flags_usage.c), so that the two cannot disagree. A flag
 * is added by adding a row here (and a paragraph to doc/tiny_transformer.1;
 * tests/test_flags.c checks the three against each other). */
#include "tt/app/flags.h"

#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "config.h" /* PACKAGE_VERSION */
#include "tt/model/model.h" /* TT_MAX_CHUNKS, TT_MAX_LAYERS */
#include "tt/parallel/pipeline.h"

void tt_config_defaults(tt_run_config *c)
{
    memset(c, 0, sizeof *c);
    c->tp = c->pp = c->dp = -1;
    c->model.V = 256;
    c->model.C = 96;
    c->model.L = 6;
    c->model.NH = 12;
    c->model.T = 64;
    c->batch = 24;
    c->micro_batches = 4;
    c->steps = 200;
    c->optim.lr = 3e-3;
    c->optim.lr_min = 3e-4;
    c->optim.warmup = 20;
    c->optim.weight_decay = 0.1;
    c->optim.clip = 1.0;
    c->optim.beta1 = 0.9;
    c->optim.beta2 = 0.95;
    c->optim.eps = 1e-8;
    c->seed = 1337;
    c->eval_every = 50;
    c->eval_windows = 32;
    c->prompt = "The cat ";
    c->sample_len = 120;
    c->dp_bucket = (size_t)1 << 20;
    c->overlap = 1;
    c->schedule = TT_SCHED_1F1B;
    c->virtual_stages = 1;
    c->spot_check = 1;
    c->watchdog = 300;
    c->cluster = "classroom";
}

void tt_config_finish(tt_run_config *c)
{
    /* Interleaving needs at least two chunks per stage; zb-v's V has
     * exactly two (the registry says which schedules interleave). */
    if (!(c->given & TT_GIVEN_VIRTUAL))
        c->virtual_stages = tt_schedule_default_v(c->schedule);
}

/* ---- the rows that need more than a kind --------------------------------- */

/* The schedules are named by the pipeline module, not listed here, so that a
 * schedule added there is accepted without touching this function (the
 * row's metavar below is text: test_flags compares it with the registry). */
static int set_schedule(tt_run_config *c, const char *flag, const char *val, tt_err *e)
{
    int k = tt_schedule_parse(val);
    if (k < 0) {
        char names[128];
        return tt_fail(e, "%s expects %s, got '%s'", flag, tt_schedule_names(names, sizeof names),
                       val);
    }
    c->schedule = k;
    return 0;
}

static void show_schedule(const tt_run_config *d, char *buf, size_t n)
{
    snprintf(buf, n, "%s", tt_schedule_name((tt_schedule_kind)d->schedule));
}

/* --help gives the number of chunks interleaving gets when the flag is not
 * given (with another schedule there is one); it asks tt_config_finish so the
 * two never drift apart. */
static void show_virtual_stages(const tt_run_config *d, char *buf, size_t n)
{
    tt_run_config t = *d;
    t.schedule = TT_SCHED_INTERLEAVED;
    tt_config_finish(&t);
    snprintf(buf, n, "%d", t.virtual_stages);
}

static void print_version(FILE *out)
{
    fprintf(out, "tiny_transformer %s\n", PACKAGE_VERSION);
}

#define AT(f) offsetof(tt_run_config, f)

static const tt_flag_word tp_mlp_words[] = {
    {"megatron", AT(tp_mlp_gather), 0}, {"gather", AT(tp_mlp_gather), 1}, {NULL, 0, 0}};
static const tt_flag_word recompute_words[] = {
    {"none", AT(recompute), TT_RECOMPUTE_NONE}, {"selective", AT(recompute), TT_RECOMPUTE_SELECTIVE},
    {"full", AT(recompute), TT_RECOMPUTE_FULL}, {NULL, 0, 0}};
static const tt_flag_word pin_words[] = {
    {"auto", AT(pin_off), 0}, {"off", AT(pin_off), 1}, {NULL, 0, 0}};
static const tt_flag_word clock_words[] = {
    {"virtual", AT(clock_wall), 0}, {"wall", AT(clock_wall), 1}, {NULL, 0, 0}};
static const tt_flag_word precision_words[] = {
    {"fp32", AT(precision_mixed), 0}, {"mixed", AT(precision_mixed), 1}, {NULL, 0, 0}};
static const tt_flag_word report_words[] = {
    {"comm", AT(report_comm), 1}, {"memory", AT(report_memory), 1},
    {"shards", AT(report_shards), 1}, {NULL, 0, 0}};

/* ---- the table ------------------------------------------------------------ */

/* One macro per kind, so that a row states only what matters for it. */
#define SWITCH(n, f, v) .name = n, .kind = TT_FLAG_SWITCH, .field = AT(f), .lo = v
#define INT(n, f, l, h) .name = n, .kind = TT_FLAG_INT, .field = AT(f), .lo = l, .hi = h
#define LONG(n, f, l, h) .name = n, .kind = TT_FLAG_LONG, .field = AT(f), .lo = l, .hi = h
#define U64(n, f, l, h) .name = n, .kind = TT_FLAG_U64, .field = AT(f), .lo = l, .hi = h
#define DOUBLE(n, f, l, h) .name = n, .kind = TT_FLAG_DOUBLE, .field = AT(f), .dlo = l, .dhi = h
#define SIZE(n, f) .name = n, .kind = TT_FLAG_SIZE, .field = AT(f)
#define STRING(n, f) .name = n, .kind = TT_FLAG_STRING, .field = AT(f)
#define IN(s) .section = TT_SEC_##s
/* A flag --plan has no use for (it trains nothing, and plans for the
 * cluster's own memory): given with --plan, it is refused, not ignored. */
#define TRAIN_ONLY .train_only = 1
#define BIG 1000000000L /* a count of steps beyond any run on a CPU */

const char *const tt_flag_sections[TT_SEC_COUNT] = {
    "Layout", "Model (vocabulary: 256 bytes)", "Training", "Files", "Output",
    "Planner (--plan: one process, trains nothing; doc/planner.md)"};

const tt_flag tt_flags[] = {
    /* A size of 0 passes here, to be refused with the layouts that work. */
    {INT("--tp", tp, 0, 4096), .metavar = "N", IN(LAYOUT),
     .help = "tensor / pipeline / data parallel sizes; tp x pp x dp\n"
             "must equal N. Sizes not given are chosen from N: as\n"
             "many above 1 as N allows, then the smallest tp and the\n"
             "largest pp (12: tp 2 pp 3 dp 2; 2: pp 2, so data\n"
             "parallelism on 2 takes --dp 2). tp must divide\n"
             "--heads; pp x virtual stages <= --layers."},
    {INT("--pp", pp, 0, 4096), .metavar = "N", IN(LAYOUT)},
    /* dp reaches tens of thousands in a plan (the seed book's 50,000 GPUs). */
    {INT("--dp", dp, 0, 1 << 20), .metavar = "N", IN(LAYOUT)},
    {SWITCH("--show-grid", show_grid, 1), IN(LAYOUT),
     .help = "print every virtual GPU and its TP, PP and DP groups\n"
             "for this layout, then exit (no training)"},
    {SIZE("--dp-bucket", dp_bucket), .given = TT_GIVEN_DP_BUCKET, .metavar = "SIZE", IN(LAYOUT),
     .help = "bytes per gradient all-reduce bucket of --zero 0,\n"
             "e.g. 256K, 4M (default %D)"},
    {SWITCH("--no-overlap", overlap, 0), IN(LAYOUT), TRAIN_ONLY,
     .help = "start every DP all-reduce bucket after the backward\n"
             "(default: each starts as the backward finishes its\n"
             "layers, and runs beside the rest of it); --zero 0 only"},
    {.name = "--pin-ranks", .kind = TT_FLAG_CHOICE, .words = pin_words,
     .metavar = "auto|off", IN(LAYOUT), TRAIN_ONLY,
     .help = "more ranks than cores on a host: auto (default) binds\n"
             "each DP replica's ranks to one core when the replicas\n"
             "divide evenly among the cores (their hand-overs stay\n"
             "on one core); off: the operating system places them"},
    {INT("--zero", zero, 0, 3), .given = TT_GIVEN_ZERO, .metavar = "N", IN(LAYOUT),
     .help = "ZeRO over each DP group (needs dp > 1; default %D):\n"
             "1 shards the Adam moments and the update, 2 also the\n"
             "gradients (reduce-scattered per micro-batch), 3 also\n"
             "the weights (all-gathered before use); 0 = off"},
    {.name = "--recompute", .kind = TT_FLAG_CHOICE, .words = recompute_words,
     .given = TT_GIVEN_RECOMPUTE, .metavar = "none|selective|full", IN(LAYOUT),
     .help = "activation recomputation: none (default); selective:\n"
             "the attention probabilities (T x T) are dropped and\n"
             "recomputed in the backward; full: each block keeps\n"
             "only its input and is recomputed in the backward"},
    {SWITCH("--sequence-parallel", sequence_parallel, 1), .given = TT_GIVEN_SP, IN(LAYOUT),
     .help = "with tp > 1: split the LayerNorm and residual\n"
             "regions over the TP group along the tokens (the\n"
             "all-reduces become reduce-scatters and all-gathers)"},
    /* The default is spelt out: each word has its own description. */
    {.name = "--tp-mlp", .kind = TT_FLAG_CHOICE, .words = tp_mlp_words,
     .metavar = "megatron|gather", IN(LAYOUT), TRAIN_ONLY,
     .help = "MLP under tensor parallelism: megatron (default):\n"
             "fc1 column-parallel, fc2 row-parallel, one all-reduce;\n"
             "gather: fc1's output is also all-gathered, so every\n"
             "GPU holds the whole activation (compare --report comm)"},
    {.name = "--schedule", .kind = TT_FLAG_CUSTOM, .set = set_schedule, .show = show_schedule,
     .given = TT_GIVEN_SCHEDULE, .metavar = "naive|gpipe|1f1b|interleaved|zb-h1|zb-v",
     IN(LAYOUT),
     .help = "pipeline schedule (default %D); naive: one micro-batch\n"
             "at a time through the whole pipe; zb-h1: 1f1b with each\n"
             "backward split into B and W, W filling the bubbles;\n"
             "zb-v: two chunks per stage in a V (stage 0 holds the\n"
             "first and the last), B and W apart; zb-h1 needs >= pp\n"
             "micro-batches, zb-v >= 2(pp-1); both (zb-h1 with pp > 1)\n"
             "refuse --recompute, --sequence-parallel and --zero 3"},
    {INT("--virtual-stages", virtual_stages, 1, TT_MAX_CHUNKS), .given = TT_GIVEN_VIRTUAL,
     .show = show_virtual_stages, .metavar = "V", IN(LAYOUT),
     .help = "chunks of blocks per stage for interleaved (default %D);\n"
             "zb-v always runs 2"},
    {STRING("--stage-layers", stage_layers), .metavar = "a,b,...", IN(LAYOUT), TRAIN_ONLY,
     .help = "blocks per stage (per chunk, in model order, with\n"
             "interleaved or zb-v); default: balanced by compute"},
    {SWITCH("--explain", explain, 1), IN(LAYOUT), TRAIN_ONLY,
     .help = "one training step as an ASCII Gantt chart (F3, B3:\n"
             "micro-batch 3's forward, backward), then narrated\n"
             "time step by time step"},
    {STRING("--trace", trace), .metavar = "FILE.json", IN(LAYOUT),
     .help = "Chrome trace of the last two steps (open it in\n"
             "ui.perfetto.dev): one track per virtual GPU"},
    {STRING("--timeline", timeline), .metavar = "FILE.svg", IN(LAYOUT),
     .help = "the last step as a picture: one row per virtual GPU"},
    /* The name or file is checked by core/cluster.c when the run starts. */
    {STRING("--cluster", cluster), .metavar = "NAME|FILE", IN(LAYOUT),
     .help = "the machine the virtual GPU clocks model: classroom,\n"
             "dgx-a100, dgx-h100 or a JSON file (doc/clocks.md)\n"
             "(default %D)"},
    {.name = "--clock", .kind = TT_FLAG_CHOICE, .words = clock_words,
     .metavar = "virtual|wall", IN(LAYOUT), TRAIN_ONLY,
     .help = "what step times, bubbles, --trace and --timeline\n"
             "measure: virtual (default): the modelled GPUs' clocks,\n"
             "the same on any machine; wall: this machine's clock"},
    {SWITCH("--validate", validate, 1), IN(LAYOUT), TRAIN_ONLY,
     .help = "also train the unsharded reference on rank 0 and\n"
             "compare loss, gradients, weights and Adam moments;\n"
             "exit 1 beyond tolerance. Without it, a run on more\n"
             "than one GPU checks its first and last steps that way"},
    {SWITCH("--no-spot-check", spot_check, 0), IN(LAYOUT), TRAIN_ONLY, 
     .help = "skip the unsharded check of the first and last\n"
             "steps that a run on more than one GPU makes"},
    /* The name is checked by the inject module (train/inject.c); 'list' is
     * answered in app/run.c. */
    {STRING("--inject-bug", inject_bug), .metavar = "NAME|list", IN(LAYOUT), TRAIN_ONLY,
     .help = "plant a classic parallelism bug that --validate must\n"
             "catch (tests, labs; stall: --watchdog, nan-grad: the\n"
             "run's own check); 'list' shows each with its symptom\n"
             "and a command that exposes it"},

    {INT("--layers", model.L, 1, TT_MAX_LAYERS), .given = TT_GIVEN_LAYERS, .metavar = "L", IN(MODEL),
     .help = "transformer blocks (default %D)"},
    {INT("--dim", model.C, 1, 65536), .given = TT_GIVEN_DIM, .metavar = "C", IN(MODEL),
     .help = "width (default %D)"},
    {INT("--heads", model.NH, 1, 4096), .given = TT_GIVEN_HEADS, .metavar = "NH", IN(MODEL),
     .help = "attention heads, must divide C (default %D)"},
    {INT("--seq", model.T, 1, 65536), .given = TT_GIVEN_SEQ, .metavar = "T", IN(MODEL),
     .help = "context length in bytes (default %D)"},

    {INT("--batch", batch, 1, 1 << 20), .given = TT_GIVEN_BATCH, .metavar = "B", IN(TRAINING),
     .help = "global batch in sequences per step (default %D)"},
    {INT("--micro-batches", micro_batches, 1, 1 << 20), .given = TT_GIVEN_MICRO, .metavar = "M",
     IN(TRAINING), .help = "micro-batches per step, must divide B/dp (default %D)"},
    {LONG("--steps", steps, 0, BIG), .given = TT_GIVEN_STEPS, .metavar = "S", IN(TRAINING), TRAIN_ONLY,
     .help = "total optimizer steps of the run (default %D)"},
    {LONG("--stop-at", stop_at, 1, BIG), .metavar = "K", IN(TRAINING), TRAIN_ONLY,
     .help = "stop before step K, once step K-1 is done (saving if\n"
             "--save; the checkpoint resumes at step K), keeping the\n"
             "lr schedule of --steps; --resume continues"},
    {DOUBLE("--lr", optim.lr, 0.0, 10.0), .given = TT_GIVEN_LR, .metavar = "X", IN(TRAINING), TRAIN_ONLY,
     .help = "peak learning rate (default %D)"},
    {DOUBLE("--lr-min", optim.lr_min, 0.0, 10.0), .given = TT_GIVEN_LR_MIN, .metavar = "X",
     IN(TRAINING), TRAIN_ONLY, .help = "learning-rate floor of the cosine decay (default %D)"},
    {INT("--warmup", optim.warmup, 0, BIG), .given = TT_GIVEN_WARMUP, .metavar = "W",
     IN(TRAINING), TRAIN_ONLY, .help = "linear warm-up steps (default %D)"},
    {DOUBLE("--weight-decay", optim.weight_decay, 0.0, 10.0), .given = TT_GIVEN_WD,
     .metavar = "X", IN(TRAINING), TRAIN_ONLY,
     .help = "AdamW decoupled weight decay on 2-D tensors (default %D)"},
    {DOUBLE("--clip", optim.clip, 0.0, 1e9), .given = TT_GIVEN_CLIP, .metavar = "X",
     IN(TRAINING), TRAIN_ONLY, .help = "clip the global gradient L2 norm to X; 0 = off (default %D)"},
    {DOUBLE("--beta1", optim.beta1, 0.0, 0.999999), .given = TT_GIVEN_BETA1, .metavar = "X",
     IN(TRAINING), TRAIN_ONLY, .help = "AdamW betas (default %D)"},
    {DOUBLE("--beta2", optim.beta2, 0.0, 0.999999), .given = TT_GIVEN_BETA2, .metavar = "X",
     IN(TRAINING), TRAIN_ONLY},
    /* Read as a long: a seed is typed in decimal and 0..LONG_MAX is plenty. */
    {U64("--seed", seed, 0, LONG_MAX), .given = TT_GIVEN_SEED, .metavar = "N", IN(TRAINING), TRAIN_ONLY,
     .help = "initialisation and generated-corpus seed (default %D)"},
    {STRING("--data", data), .metavar = "FILE", IN(TRAINING), TRAIN_ONLY,
     .help = "train on the bytes of FILE (last 10% held out for eval)\n"
             "instead of the generated corpus"},
    {LONG("--eval-every", eval_every, 0, BIG), .metavar = "K", IN(TRAINING), TRAIN_ONLY,
     .help = "eval loss on the held-out split every K steps;\n0 = only at the end (default %D)"},
    {INT("--eval-windows", eval_windows, 1, 1 << 20), .metavar = "N", IN(TRAINING), TRAIN_ONLY,
     .help = "at most N held-out sequences per eval (default %D)"},

    {STRING("--save", save), .metavar = "FILE", IN(FILES),
     .help = "write a safetensors checkpoint at the end"},
    {LONG("--save-every", save_every, 1, BIG), .metavar = "K", IN(FILES), TRAIN_ONLY,
     .help = "... and every K steps"},
    {STRING("--resume", resume), .metavar = "FILE|auto", IN(FILES),
     .help = "continue from a checkpoint up to --steps; auto: from\n"
             "the --save file if it exists (a damaged one is refused\n"
             "and kept), else from step 0"},
    {STRING("--plot", plot), .metavar = "FILE.svg", IN(FILES),
     .help = "loss and eval loss against step as an SVG chart:\n"
             "this run's; or, given --log CSVs after it\n"
             "(--plot OUT.svg a.csv b.csv), theirs overlaid, no training"},
    {STRING("--log", log), .metavar = "FILE", IN(FILES),
     .help = "CSV, one row per step: step,loss,lr,grad_norm,ms,\n"
             "tokens_per_s,eval_loss,mfu,wall_ms,clock (ms, tokens_per_s\n"
             "and mfu on the clock the row names, virtual or wall;\n"
             "wall_ms always wall clock)"},

    {STRING("--prompt", prompt), .metavar = "TEXT", IN(OUTPUT), TRAIN_ONLY,
     .help = "start of the sample generated at the end (default %D)"},
    /* Each byte is one forward of the whole model: 65536 (the longest --seq)
     * already takes long on a CPU, more would look like a hang. */
    {INT("--sample-len", sample_len, 0, 65536), .metavar = "N", IN(OUTPUT), TRAIN_ONLY,
     .help = "bytes to generate at the end; 0 = none (default %D)"},
    {SWITCH("--quiet", quiet, 1), IN(OUTPUT), .help = "no step lines"},
    {SWITCH("--verbose", verbose, 1), IN(OUTPUT),
     .help = "a line for every step; without it about ten lines a\n"
             "run (the first, the last, every tenth of the run and\n"
             "each eval; without mpirun, on a terminal, the others\n"
             "on one updating line)"},
    {.name = "--report", .kind = TT_FLAG_LIST, .words = report_words,
     .metavar = "comm,memory,shards", IN(OUTPUT), TRAIN_ONLY,
     .help = "the communication table of every GPU (with more than\n"
             "one GPU, rank 0's table is printed anyway), the\n"
             "memory of every GPU by category, and the tensors\n"
             "every GPU holds (global shape and its slice)"},
    /* Waits of well under a second are ordinary (a pipeline stage waits
     * through the other stages' compute, every rank through rank 0's
     * --validate reference), so a smaller limit would end healthy runs. */
    {DOUBLE("--watchdog", watchdog, 1.0, 1e9), .zero_off = 1, .metavar = "SECONDS", IN(OUTPUT), TRAIN_ONLY,
     .help = "a GPU blocked in one communication this long prints\n"
             "what it waits for (operation, group, peer, tag, step,\n"
             "micro-batch, what the call is for) and what it last\n"
             "saw of its peers, then\n"
             "ends the job with exit 1; at least 1; 0 = off\n"
             "(default %D)"},
    {SIZE("--gpu-mem", gpu_mem), .metavar = "SIZE", IN(OUTPUT), TRAIN_ONLY,
     .help = "memory of each virtual GPU, e.g. 16M; more is an\n"
             "out-of-memory error before training (default %D)"},

    {SWITCH("--plan", plan, 1), IN(PLAN),
     .help = "plan instead of training: memory per GPU, step time,\n"
             "MFU and cost of every layout of --gpus GPUs of the\n"
             "--cluster, best first (--tp, --pp, --dp, --zero,\n"
             "--recompute, --sequence-parallel, --schedule,\n"
             "--virtual-stages and --micro-batches pin a value).\n"
             "Rank 0 plans, the other ranks wait and leave with its\n"
             "exit status"},
    {STRING("--plan-json", plan_json), .metavar = "FILE", IN(PLAN),
     .help = "also write the plan as JSON (doc/design.md\nsection 11)"},
    {INT("--gpus", gpus, 1, TT_MAX_GPUS), .metavar = "N", IN(PLAN),
     .help = "GPUs to plan for (default: tp x pp x dp when all\nthree are given)"},
    {.name = "--precision", .kind = TT_FLAG_CHOICE, .words = precision_words,
     .metavar = "fp32|mixed", IN(PLAN),
     .help = "fp32 (default): the emulator's own 4+4+8 bytes per\n"
             "parameter at FP32 peak; mixed: 2+2+12 bytes and 16-bit\n"
             "activations at the 16-bit peak"},
    {DOUBLE("--train-tokens", train_tokens, 1.0, 1e18),
     .metavar = "N", IN(PLAN),
     .help = "tokens to train on: adds days, energy, cost and the\n"
             "checkpoint interval to the plan"},
    {INT("--vocab", model.V, 2, 1 << 24), .given = TT_GIVEN_VOCAB, .metavar = "V", IN(PLAN),
     .help = "vocabulary of the planned model (default %D);\ntraining stays byte-level"},
    {.name = "--help", .kind = TT_FLAG_ANSWER, .answer = tt_config_usage, IN(OUTPUT), .help = ""},
    {.name = "--version", .kind = TT_FLAG_ANSWER, .answer = print_version, IN(OUTPUT)},
};
const size_t tt_flag_count = sizeof tt_flags / sizeof tt_flags[0];
