/* config.c - flags, defaults, --help, and the checks every rank runs on the
 * configuration before any work, so a bad value is reported once (by rank 0)
 * with the constraint it breaks instead of surfacing as a crash or a hang. */
#include "tt/app/flags.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config.h" /* PACKAGE_VERSION */
#include "tt/model/model.h" /* TT_MAX_CHUNKS */
#include "tt/parallel/pipeline.h"

static void defaults(tt_run_config *c)
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
    c->schedule = TT_SCHED_1F1B;
    c->virtual_stages = 1;
    c->spot_check = 1;
}

void tt_config_usage(FILE *out)
{
    tt_run_config d;
    defaults(&d);
    fprintf(out,
"Usage: mpirun -np N tiny_transformer [OPTION]...\n"
"Train a tiny GPT on N virtual GPUs (one MPI rank each) on CPU.\n"
"\n"
"Layout:\n"
"  --tp N, --pp N, --dp N   tensor / pipeline / data parallel sizes; tp x pp x dp\n"
"                           must equal N. Sizes not given are chosen from N.\n"
"                           tp must divide --heads; pp x virtual stages <= --layers.\n"
"  --show-grid              print every virtual GPU and its TP, PP and DP groups\n"
"                           for this layout, then exit (no training)\n"
"  --dp-bucket SIZE         bytes per gradient all-reduce bucket, e.g. 256K, 4M\n"
"                           (default 1M)\n"
"  --tp-mlp megatron|gather  MLP under tensor parallelism: megatron (default):\n"
"                           fc1 column-parallel, fc2 row-parallel, one all-reduce;\n"
"                           gather: fc1's output is also all-gathered, so every\n"
"                           GPU holds the whole activation (compare --report comm)\n"
"  --schedule naive|gpipe|1f1b|interleaved\n"
"                           pipeline schedule (default 1f1b); naive: one micro-batch\n"
"                           at a time through the whole pipe\n"
"  --virtual-stages V       chunks of blocks per stage for interleaved (default 2)\n"
"  --stage-layers a,b,...   blocks per stage (per chunk, in model order, when\n"
"                           interleaved); default: balanced by compute\n"
"  --explain                narrate one training step, time step by time step\n"
"  --trace FILE.json        Chrome trace of the last two steps (open it in\n"
"                           ui.perfetto.dev): one track per virtual GPU\n"
"  --timeline FILE.svg      the last step as a picture: one row per virtual GPU\n"
"  --validate               also train the unsharded reference on rank 0 and\n"
"                           compare loss, gradients, weights and Adam moments;\n"
"                           exit 1 beyond tolerance. Without it, a run on more\n"
"                           than one GPU checks its first and last steps that way\n"
"  --no-spot-check          ... unless this is given\n"
"Model (vocabulary: 256 bytes):\n"
"  --layers L               transformer blocks (default %d)\n"
"  --dim C                  width (default %d)\n"
"  --heads NH               attention heads, must divide C (default %d)\n"
"  --seq T                  context length in bytes (default %d)\n"
"Training:\n"
"  --batch B                global batch in sequences per step (default %d)\n"
"  --micro-batches M        micro-batches per step, must divide B (default %d)\n"
"  --steps S                total optimizer steps of the run (default %ld)\n"
"  --stop-at K              stop this process after step K (saving if --save),\n"
"                           keeping the schedule of --steps; --resume continues\n"
"  --lr X                   peak learning rate (default %g)\n"
"  --lr-min X               learning-rate floor of the cosine decay (default %g)\n"
"  --warmup W               linear warm-up steps (default %d)\n"
"  --weight-decay X         AdamW decoupled weight decay on 2-D tensors (default %g)\n"
"  --clip X                 clip the global gradient L2 norm to X; 0 = off (default %g)\n"
"  --beta1 X, --beta2 X     AdamW betas (default %g, %g)\n"
"  --seed N                 initialisation and generated-corpus seed (default %llu)\n"
"  --data FILE              train on the bytes of FILE (last 10%% held out for eval)\n"
"                           instead of the generated corpus\n"
"  --eval-every K           eval loss on the held-out split every K steps;\n"
"                           0 = only at the end (default %ld)\n"
"  --eval-windows N         at most N held-out sequences per eval (default %d)\n"
"Files:\n"
"  --save FILE              write a safetensors checkpoint at the end\n"
"  --save-every K           ... and every K steps\n"
"  --resume FILE            continue from a checkpoint up to --steps\n"
"  --log FILE               CSV, one row per step: step,loss,lr,grad_norm,ms,tokens_per_s,eval_loss\n"
"Output:\n"
"  --prompt TEXT            start of the sample generated at the end (default \"%s\")\n"
"  --sample-len N           bytes to generate at the end; 0 = none (default %d)\n"
"  --quiet                  no per-step lines\n"
"  --report comm,memory     the communication table of every GPU (with more than\n"
"                           one GPU, rank 0's table is printed anyway) and the\n"
"                           memory of every GPU by category\n"
"  --gpu-mem SIZE           memory of each virtual GPU, e.g. 16M; more is an\n"
"                           out-of-memory error before training (default unlimited)\n"
"  --help, --version\n"
"\n"
"Open MPI needs --oversubscribe for more ranks than cores and\n"
"--allow-run-as-root when run as root.\n",
            d.model.L, d.model.C, d.model.NH, d.model.T, d.batch, d.micro_batches, d.steps,
            d.optim.lr, d.optim.lr_min, d.optim.warmup, d.optim.weight_decay, d.optim.clip,
            d.optim.beta1, d.optim.beta2, (unsigned long long)d.seed, d.eval_every,
            d.eval_windows, d.prompt, d.sample_len);
}

/* Whole-string integer in [lo, hi]. */
static int parse_long(const char *flag, const char *s, long lo, long hi, long *out, tt_err *e)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0')
        return tt_fail(e, "%s expects an integer, got '%s'", flag, s);
    if (v < lo || v > hi)
        return tt_fail(e, "%s must be between %ld and %ld, got %ld", flag, lo, hi, v);
    *out = v;
    return 0;
}

static int parse_int(const char *flag, const char *s, long lo, long hi, int *out, tt_err *e)
{
    long v;
    if (parse_long(flag, s, lo, hi, &v, e))
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_double(const char *flag, const char *s, double lo, double hi, double *out,
                        tt_err *e)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v))
        return tt_fail(e, "%s expects a number, got '%s'", flag, s);
    if (v < lo || v > hi)
        return tt_fail(e, "%s must be between %g and %g, got %g", flag, lo, hi, v);
    *out = v;
    return 0;
}

/* A byte count with an optional K, M or G suffix (powers of 1024). */
static int parse_size(const char *flag, const char *s, size_t *out, tt_err *e)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double mult = 1;
    if (*end == 'K' || *end == 'k') mult = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mult = 1024.0 * 1024.0, end++;
    else if (*end == 'G' || *end == 'g') mult = 1024.0 * 1024.0 * 1024.0, end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (errno || end == s || *end != '\0' || !isfinite(v))
        return tt_fail(e, "%s expects a size such as 4096, 256K or 4M, got '%s'", flag, s);
    v *= mult;
    if (v < 4 || v > 1e15)
        return tt_fail(e, "%s must be between 4 bytes and 1000T, got '%s'", flag, s);
    *out = (size_t)v;
    return 0;
}

int tt_config_parse(tt_run_config *c, int argc, char **argv, FILE *out, tt_err *e)
{
    defaults(c);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            if (out)
                tt_config_usage(out);
            return 1;
        }
        if (strcmp(arg, "--version") == 0) {
            if (out)
                fprintf(out, "tiny_transformer %s\n", PACKAGE_VERSION);
            return 1;
        }
        if (strcmp(arg, "--quiet") == 0) {
            c->quiet = 1;
            continue;
        }
        if (strcmp(arg, "--validate") == 0) {
            c->validate = 1;
            continue;
        }
        if (strcmp(arg, "--show-grid") == 0) {
            c->show_grid = 1;
            continue;
        }
        if (strcmp(arg, "--explain") == 0) {
            c->explain = 1;
            continue;
        }
        if (strcmp(arg, "--no-spot-check") == 0) {
            c->spot_check = 0;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0)
            return tt_fail(e, "unexpected argument '%s' (options start with --; see --help)", arg);

        /* Every other option takes a value: --flag VALUE or --flag=VALUE. */
        char flag[64];
        const char *val;
        const char *eq = strchr(arg, '=');
        if (eq) {
            size_t n = (size_t)(eq - arg);
            if (n >= sizeof flag)
                n = sizeof flag - 1;
            memcpy(flag, arg, n);
            flag[n] = '\0';
            val = eq + 1;
        } else {
            snprintf(flag, sizeof flag, "%s", arg);
            val = i + 1 < argc ? argv[i + 1] : NULL;
        }
#define IS(name) (strcmp(flag, name) == 0)
        int known = IS("--tp") || IS("--pp") || IS("--dp") || IS("--layers") || IS("--dim") ||
                    IS("--heads") || IS("--seq") || IS("--batch") || IS("--micro-batches") ||
                    IS("--steps") || IS("--stop-at") || IS("--lr") || IS("--lr-min") || IS("--warmup") ||
                    IS("--weight-decay") || IS("--clip") || IS("--beta1") || IS("--beta2") ||
                    IS("--seed") || IS("--data") || IS("--save") || IS("--save-every") ||
                    IS("--resume") || IS("--log") || IS("--eval-every") ||
                    IS("--eval-windows") || IS("--prompt") || IS("--sample-len") ||
                    IS("--dp-bucket") || IS("--tp-mlp") || IS("--report") ||
                    IS("--schedule") || IS("--virtual-stages") || IS("--stage-layers") ||
                    IS("--trace") || IS("--timeline") || IS("--gpu-mem");
        if (!known)
            return tt_fail(e, "unknown option '%s' (see --help)", flag);
        if (!val)
            return tt_fail(e, "option %s needs a value (see --help)", flag);
        if (!eq)
            i++;

        const long big = 1000000000L;
        int rc = 0;
        /* A size of 0 passes here, to be refused with the layouts that work. */
        if (IS("--tp")) rc = parse_int(flag, val, 0, 4096, &c->tp, e);
        else if (IS("--pp")) rc = parse_int(flag, val, 0, 4096, &c->pp, e);
        else if (IS("--dp")) rc = parse_int(flag, val, 0, 4096, &c->dp, e);
        else if (IS("--layers")) { rc = parse_int(flag, val, 1, 1024, &c->model.L, e); c->given |= TT_GIVEN_LAYERS; }
        else if (IS("--dim")) { rc = parse_int(flag, val, 1, 65536, &c->model.C, e); c->given |= TT_GIVEN_DIM; }
        else if (IS("--heads")) { rc = parse_int(flag, val, 1, 4096, &c->model.NH, e); c->given |= TT_GIVEN_HEADS; }
        else if (IS("--seq")) { rc = parse_int(flag, val, 1, 65536, &c->model.T, e); c->given |= TT_GIVEN_SEQ; }
        else if (IS("--batch")) { rc = parse_int(flag, val, 1, 1 << 20, &c->batch, e); c->given |= TT_GIVEN_BATCH; }
        else if (IS("--micro-batches")) { rc = parse_int(flag, val, 1, 1 << 20, &c->micro_batches, e); c->given |= TT_GIVEN_MICRO; }
        else if (IS("--steps")) { rc = parse_long(flag, val, 0, big, &c->steps, e); c->given |= TT_GIVEN_STEPS; }
        else if (IS("--stop-at")) rc = parse_long(flag, val, 1, big, &c->stop_at, e);
        else if (IS("--lr")) { rc = parse_double(flag, val, 0.0, 10.0, &c->optim.lr, e); c->given |= TT_GIVEN_LR; }
        else if (IS("--lr-min")) { rc = parse_double(flag, val, 0.0, 10.0, &c->optim.lr_min, e); c->given |= TT_GIVEN_LR_MIN; }
        else if (IS("--warmup")) { rc = parse_int(flag, val, 0, big, &c->optim.warmup, e); c->given |= TT_GIVEN_WARMUP; }
        else if (IS("--weight-decay")) { rc = parse_double(flag, val, 0.0, 10.0, &c->optim.weight_decay, e); c->given |= TT_GIVEN_WD; }
        else if (IS("--clip")) { rc = parse_double(flag, val, 0.0, 1e9, &c->optim.clip, e); c->given |= TT_GIVEN_CLIP; }
        else if (IS("--beta1")) { rc = parse_double(flag, val, 0.0, 0.999999, &c->optim.beta1, e); c->given |= TT_GIVEN_BETA1; }
        else if (IS("--beta2")) { rc = parse_double(flag, val, 0.0, 0.999999, &c->optim.beta2, e); c->given |= TT_GIVEN_BETA2; }
        else if (IS("--seed")) {
            long v;
            rc = parse_long(flag, val, 0, LONG_MAX, &v, e);
            c->seed = (uint64_t)v;
            c->given |= TT_GIVEN_SEED;
        }
        else if (IS("--eval-every")) rc = parse_long(flag, val, 0, big, &c->eval_every, e);
        else if (IS("--eval-windows")) rc = parse_int(flag, val, 1, 1 << 20, &c->eval_windows, e);
        else if (IS("--save-every")) rc = parse_long(flag, val, 1, big, &c->save_every, e);
        else if (IS("--sample-len")) rc = parse_int(flag, val, 0, 1 << 20, &c->sample_len, e);
        else if (IS("--dp-bucket")) rc = parse_size(flag, val, &c->dp_bucket, e);
        else if (IS("--tp-mlp")) {
            if (strcmp(val, "megatron") == 0)
                c->tp_mlp_gather = 0;
            else if (strcmp(val, "gather") == 0)
                c->tp_mlp_gather = 1;
            else
                rc = tt_fail(e, "--tp-mlp expects megatron or gather, got '%s'", val);
        }
        else if (IS("--report")) {
            /* A comma-separated list of reports. */
            char list[64];
            snprintf(list, sizeof list, "%s", val);
            for (char *tok = strtok(list, ","); tok && !rc; tok = strtok(NULL, ",")) {
                if (strcmp(tok, "comm") == 0)
                    c->report_comm = 1;
                else if (strcmp(tok, "memory") == 0)
                    c->report_memory = 1;
                else
                    rc = tt_fail(e, "--report expects comm, memory or comm,memory, got '%s'", val);
            }
        }
        else if (IS("--gpu-mem")) rc = parse_size(flag, val, &c->gpu_mem, e);
        else if (IS("--schedule")) {
            int k = tt_schedule_parse(val);
            if (k < 0)
                rc = tt_fail(e, "--schedule expects naive, gpipe, 1f1b or interleaved, got '%s'",
                             val);
            else
                c->schedule = k;
        }
        else if (IS("--virtual-stages")) {
            rc = parse_int(flag, val, 1, TT_MAX_CHUNKS, &c->virtual_stages, e);
            c->given |= TT_GIVEN_VIRTUAL;
        }
        else if (IS("--stage-layers")) c->stage_layers = val;
        else if (IS("--trace")) c->trace = val;
        else if (IS("--timeline")) c->timeline = val;
        else if (IS("--data")) c->data = val;
        else if (IS("--save")) c->save = val;
        else if (IS("--resume")) c->resume = val;
        else if (IS("--log")) c->log = val;
        else if (IS("--prompt")) c->prompt = val;
#undef IS
        if (rc)
            return -1;
        if (val[0] == '\0')
            return tt_fail(e, "option %s needs a non-empty value", flag);
    }
    /* Interleaving needs at least two chunks per stage. */
    if (c->schedule == TT_SCHED_INTERLEAVED && !(c->given & TT_GIVEN_VIRTUAL))
        c->virtual_stages = 2;
    return 0;
}

int tt_config_check(const tt_run_config *c, tt_err *e)
{
    const tt_config *m = &c->model;
    if (m->C % m->NH != 0)
        return tt_fail(e, "--heads %d must divide --dim %d (head size = dim / heads)", m->NH, m->C);
    if (c->batch % c->micro_batches != 0)
        return tt_fail(e, "--micro-batches %d must divide --batch %d", c->micro_batches, c->batch);
    if (c->optim.lr_min > c->optim.lr)
        return tt_fail(e, "--lr-min %g is above --lr %g", c->optim.lr_min, c->optim.lr);
    if (c->save_every && !c->save)
        return tt_fail(e, "--save-every needs --save FILE");
    return 0;
}
