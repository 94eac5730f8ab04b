/* train.c - the training loop of DESIGN section 5: each DP replica runs its
 * share of the sampler's global batch in micro-batches, the gradients are
 * summed over the DP group, then global-norm clipping and AdamW on the
 * warm-up + cosine schedule; eval, the per-step log, checkpoints, the
 * --validate oracle and a generated sample. */
#include "tt/train/train.h"
#include "tt/app/flags.h"
#include "tt/train/checkpoint.h"
#include "tt/train/inject.h"
#include "tt/comm/comm.h"
#include "tt/core/common.h"
#include "tt/parallel/data_parallel.h"
#include "tt/core/memory.h"
#include "tt/train/optim.h"
#include "tt/parallel/pipeline.h"
#include "tt/show/report.h"
#include "tt/core/events.h"
#include "tt/show/trace.h"
#include "tt/train/validate.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The global gradient norm: after the DP sum every replica holds the whole
 * gradient of its shards, so one replica (dp 0) counts; across it the TP
 * ranks' slices and the pipeline stages' tensors add up, and the replicated
 * tensors (identical on every TP rank) are counted once, by TP rank 0: the
 * norm torch.nn.utils.clip_grad_norm_ sees on the unsharded model. */
static double grad_norm(const tt_model *m, const tt_grid *g)
{
    if (!g || g->world_size == 1)
        return sqrt(tt_grad_sumsq(&m->P, 0, 0));
    double ss = tt_grad_sumsq(&m->P, g->dp_rank, g->tp_rank);
    tt_allreduce(g, TT_GROUP_OTHER, &ss, 1, MPI_DOUBLE, MPI_SUM);
    return sqrt(ss);
}

/* A value computed on the ranks of the last stage (identical on its TP
 * ranks), summed over the DP replicas: each replica's share counted once. */
static double sum_from_last_stage(const tt_grid *g, const tt_model *m, double v)
{
    if (!g)
        return v;
    if (g->tp_rank != 0 || !m->sh.last_stage)
        v = 0.0;
    tt_allreduce(g, TT_GROUP_OTHER, &v, 1, MPI_DOUBLE, MPI_SUM);
    return v;
}

tt_step_stats tt_train_step(tt_pipe *pp, const tt_corpus *c, long step, tt_validator *val)
{
    tt_model *m = pp->m;
    const tt_run_config *rc = pp->rc;
    const tt_grid *g = pp->g;
    tt_step_stats st = {0};
    double t0 = tt_now();
    const float dloss = 1.0f / (float)((double)rc->batch * rc->model.T); /* global mean */

    tt_params_zero_grads(&m->P);
    tt_events_set_step((int)step);
    /* This replica's micro-batches, in the order the schedule says. */
    double loss = tt_pipe_train(pp, c, step, dloss);
    st.loss = sum_from_last_stage(g, m, loss / rc->batch);
    if (g)
        tt_dp_sync_grads(g, &m->P, rc->dp_bucket);
    tt_inject_after_backward(m, g); /* a planted fault (--inject-bug), or nothing */
    if (val)
        tt_validate_grads(val, m, c, step, st.loss);
    double t_opt = tt_now();
    st.grad_norm = grad_norm(m, g);
    st.lr = tt_lr_at(&rc->optim, step, rc->steps);
    tt_adamw_step(&m->P, &rc->optim, st.lr, step + 1, tt_clip_coef(rc->optim.clip, st.grad_norm));
    tt_events_add(TT_EV_OPTIMIZER, "optimizer step", NULL, t_opt, tt_now(), -1, -1, -1, 0);
    if (val)
        tt_validate_update(val, step);
    st.seconds = tt_now() - t0;
    return st;
}

double tt_eval_loss(tt_pipe *pp, const tt_corpus *c)
{
    const tt_run_config *rc = pp->rc;
    const tt_grid *g = pp->g;
    const int T = rc->model.T, mb = pp->m->Bmax;
    const int dp = g ? g->dp : 1, dp_rank = g ? g->dp_rank : 0;
    int nw = tt_eval_windows(c, T, rc->eval_windows);
    if (nw == 0)
        return NAN;
    /* The windows are shared out over the DP replicas. */
    int k0 = (int)((long)nw * dp_rank / dp), k1 = (int)((long)nw * (dp_rank + 1) / dp);
    int *in = tt_malloc((size_t)mb * T * sizeof(int));
    int *tg = tt_malloc((size_t)mb * T * sizeof(int));
    double sum = 0.0;
    for (int k = k0; k < k1; k += mb) {
        int n = k1 - k < mb ? k1 - k : mb;
        tt_eval_batch(c, k, n, T, in, tg);
        sum += tt_pipe_forward(pp, in, tg, n) * n;
    }
    free(in);
    free(tg);
    return sum_from_last_stage(g, pp->m, sum) / nw;
}

void tt_generate(tt_pipe *pp, const char *prompt, int len, char *out)
{
    tt_model *m = pp->m;
    const tt_grid *g = pp->g;
    const int T = m->cfg.T, V = m->cfg.V;
    int plen = (int)strlen(prompt);
    int total = plen + len;
    int *ctx = tt_calloc((size_t)total + 1, sizeof(int));
    for (int i = 0; i < plen; i++)
        ctx[i] = (unsigned char)prompt[i];
    if (plen == 0)
        ctx[plen++] = ' ', total++;
    int *window = tt_calloc((size_t)T, sizeof(int));
    for (int pos = plen; pos < total; pos++) {
        /* The last T bytes (or fewer, left-aligned: attention is causal, so
         * the zeros after them cannot change the logits we read). */
        int start = pos > T ? pos - T : 0, n = pos - start;
        memset(window, 0, (size_t)T * sizeof(int));
        memcpy(window, ctx + start, (size_t)n * sizeof(int));
        tt_pipe_forward(pp, window, NULL, 1);
        int next = 0;
        if (m->sh.last_stage) {
            /* Greedy: the largest logit of this rank's vocabulary slice, then
             * the largest over the TP group (ties go to the lowest byte, as on
             * one GPU). */
            const float *lg = m->logits + (size_t)(n - 1) * m->Vl;
            int real = V - m->v0 < m->Vl ? V - m->v0 : m->Vl;
            struct { float value; int index; } best = {-FLT_MAX, V};
            for (int v = 0; v < real; v++)
                if (lg[v] > best.value) {
                    best.value = lg[v];
                    best.index = m->v0 + v;
                }
            if (g && g->tp > 1)
                tt_allreduce(g, TT_GROUP_TP | TT_BOOKKEEPING, &best, 1, MPI_FLOAT_INT, MPI_MAXLOC);
            next = best.index;
        }
        /* The last stage tells the rest of its pipeline. */
        if (g && g->pp > 1)
            tt_bcast(g, TT_GROUP_PP | TT_BOOKKEEPING, &next, 1, MPI_INT, g->pp - 1);
        ctx[pos] = next;
    }
    for (int i = 0; i < total; i++)
        out[i] = (char)ctx[i];
    out[total] = '\0';
    free(ctx);
    free(window);
}

/* Print a generated sample with control bytes made visible, so a model that
 * has not learned yet cannot garble the terminal. */
static void print_sample(const char *s)
{
    printf("sample: \"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\n')
            printf("\\n");
        else if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 32 || *p >= 127)
            printf("\\x%02x", *p);
        else
            putchar(*p);
    }
    printf("\"\n");
}

/* Parameters of the whole model (global shapes of every tensor). */
static long count_params(const tt_config *cfg)
{
    tt_params whole;
    tt_shard_spec spec = tt_shard_whole(cfg);
    tt_model_shard_table(&whole, cfg, &spec);
    long n = 0;
    for (int i = 0; i < whole.n; i++)
        n += (long)whole.t[i].gshape[0] * whole.t[i].gshape[1];
    tt_params_free(&whole);
    return n;
}

/* What one virtual GPU holds: its slices of the split tensors (with any
 * vocabulary padding) and the whole replicated ones. */
static void print_param_memory(const tt_model *m, const tt_grid *g)
{
    long split_global = 0, split_local = 0, repl = 0;
    for (int i = 0; i < m->P.n; i++) {
        const tt_tensor *t = &m->P.t[i];
        if (t->replicated) {
            repl += (long)t->numel;
        } else {
            split_global += (long)t->gshape[0] * t->gshape[1];
            split_local += (long)t->numel;
        }
    }
    long per = split_global / g->tp, pad = split_local - per;
    long total = split_local + repl;
    char name[48];
    printf("parameters on %s: %ld split (%ld / tp %d", tt_gpu_name(g, g->world_rank, name, sizeof name),
           split_local, split_global, g->tp);
    if (pad)
        printf(", %+ld for the padded vocabulary", pad);
    char h[32];
    printf(") + %ld replicated = %ld floats, %s of weights (x4 with gradients and "
           "Adam moments)\n", repl, total, tt_mem_human((size_t)total * 4, h, sizeof h));
}

/* Adopts the checkpoint's model config and hyper-parameters for every flag the
 * user did not give, and refuses a model shape that contradicts it. */
static int merge_resume(tt_run_config *rc, const tt_ckpt_info *info, tt_err *e)
{
    const tt_config *ck = &info->run.model;
    struct { unsigned bit; const char *flag; int *mine; int theirs; } shape[] = {
        {TT_GIVEN_LAYERS, "--layers", &rc->model.L, ck->L},
        {TT_GIVEN_DIM, "--dim", &rc->model.C, ck->C},
        {TT_GIVEN_HEADS, "--heads", &rc->model.NH, ck->NH},
        {TT_GIVEN_SEQ, "--seq", &rc->model.T, ck->T},
    };
    for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++) {
        if ((rc->given & shape[i].bit) && *shape[i].mine != shape[i].theirs)
            return tt_fail(e, "checkpoint '%s' holds a model with %s %d, but %s %d was given",
                           rc->resume, shape[i].flag, shape[i].theirs, shape[i].flag,
                           *shape[i].mine);
        *shape[i].mine = shape[i].theirs;
    }
    if (ck->V != rc->model.V)
        return tt_fail(e, "checkpoint '%s' has a vocabulary of %d, this program uses %d",
                       rc->resume, ck->V, rc->model.V);
    const tt_run_config *r = &info->run;
    if (!(rc->given & TT_GIVEN_BATCH)) rc->batch = r->batch;
    if (!(rc->given & TT_GIVEN_MICRO)) rc->micro_batches = r->micro_batches;
    if (!(rc->given & TT_GIVEN_STEPS)) rc->steps = r->steps;
    if (!(rc->given & TT_GIVEN_LR)) rc->optim.lr = r->optim.lr;
    if (!(rc->given & TT_GIVEN_LR_MIN)) rc->optim.lr_min = r->optim.lr_min;
    if (!(rc->given & TT_GIVEN_WARMUP)) rc->optim.warmup = r->optim.warmup;
    if (!(rc->given & TT_GIVEN_WD)) rc->optim.weight_decay = r->optim.weight_decay;
    if (!(rc->given & TT_GIVEN_CLIP)) rc->optim.clip = r->optim.clip;
    if (!(rc->given & TT_GIVEN_BETA1)) rc->optim.beta1 = r->optim.beta1;
    if (!(rc->given & TT_GIVEN_BETA2)) rc->optim.beta2 = r->optim.beta2;
    if (!(rc->given & TT_GIVEN_SEED)) rc->seed = r->seed;
    rc->optim.eps = r->optim.eps;
    if (rc->steps < info->step)
        return tt_fail(e, "--steps %ld is below the checkpoint's step %ld ('%s'): --steps is "
                       "the total length of the run", rc->steps, info->step, rc->resume);
    return 0;
}

int tt_resume_prepare(tt_run_config *rc, tt_err *e)
{
    tt_ckpt_info info;
    if (tt_checkpoint_read_info(rc->resume, &info, e) || merge_resume(rc, &info, e))
        return -1;
    rc->resume_step = info.step;
    return 0;
}

static int save(const tt_run_config *rc, const tt_model *m, const tt_grid *g, long step,
                const char *path, tt_err *e)
{
    tt_ckpt_info info;
    memset(&info, 0, sizeof info);
    info.step = step;
    info.run = *rc;
    info.tp = g->tp;
    info.pp = g->pp;
    info.dp = g->dp;
    /* Collective: every rank of DP replica 0 writes its own slices of the
     * global tensors with MPI-IO, so the file is the unsharded model's. */
    return tt_checkpoint_save_sharded(path, g, &m->P, &info, e);
}

/* All ranks adopt the worst status: an error seen on one rank (typically rank
 * 0, the only one writing files) stops every rank at the same point. */
static int agree(const tt_grid *g, int status)
{
    tt_allreduce(g, TT_GROUP_OTHER, &status, 1, MPI_INT, MPI_MAX);
    return status;
}

static void say_error(const tt_grid *g, const tt_err *e)
{
    if (g->world_rank == 0)
        fprintf(stderr, "tiny_transformer: %s\n", e->msg);
}

#define SAY(...) do { if (rank == 0) printf(__VA_ARGS__); } while (0)

static void banner(const tt_run_config *rc, const tt_grid *g, const tt_model *m,
                   const tt_corpus *corpus, long step0)
{
    const int rank = g->world_rank;
    char name[48];
    SAY("tiny_transformer: %d virtual GPU%s as tp %d x pp %d x dp %d; model L=%d C=%d NH=%d "
        "T=%d V=%d, %ld parameters\n", g->world_size, g->world_size > 1 ? "s" : "", g->tp, g->pp,
        g->dp, rc->model.L, rc->model.C, rc->model.NH, rc->model.T, rc->model.V,
        count_params(&rc->model));
    if (rank == 0)
        print_param_memory(m, g);
    SAY("data: %s; train %zu bytes, eval %zu bytes\n", corpus->source, corpus->ntrain,
        corpus->n - corpus->ntrain);
    const int local = rc->batch / g->dp, mb = local / rc->micro_batches;
    SAY("global batch %d sequences x %d tokens; each DP replica takes %d in %d micro-batch%s "
        "of %d\n", rc->batch, rc->model.T, local, rc->micro_batches,
        rc->micro_batches > 1 ? "es" : "", mb);
    if (g->dp > 1)
        for (int d = 0; d < g->dp; d++)
            SAY("  %s: samples %d..%d of every step\n",
                tt_gpu_name(g, tt_grid_rank_of(g, d, 0, 0), name, sizeof name), d * local,
                (d + 1) * local - 1);
    if (g->dp > 1) {
        size_t n = m->P.total;
        char h[32];
        SAY("DP gradient sync: %zu floats (%s) summed per step in %ld all-reduce bucket%s "
            "of up to %zu bytes\n", n, tt_mem_human(n * 4, h, sizeof h),
            tt_dp_buckets(n, rc->dp_bucket), tt_dp_buckets(n, rc->dp_bucket) > 1 ? "s" : "",
            rc->dp_bucket);
    }
    long end = rc->stop_at && rc->stop_at < rc->steps ? rc->stop_at : rc->steps;
    if (end > step0)
        SAY("steps %ld..%ld of %ld; lr %g -> %g, warm-up %d%s\n", step0, end - 1, rc->steps,
            rc->optim.lr, rc->optim.lr_min, rc->optim.warmup,
            rc->validate ? "; --validate: rank 0 also trains the unsharded reference" : "");
    else
        SAY("no training steps in this run (at step %ld of %ld)\n", step0, rc->steps);
    if (rc->resume)
        SAY("resumed from '%s' at step %ld\n", rc->resume, step0);
    fflush(stdout);
}

/* Gathers the events and writes the trace and the timeline (rank 0); the
 * outcome is agreed by all ranks. */
static int trace_end(const tt_run_config *rc, const tt_grid *g, long last_step)
{
    int *counts = NULL;
    tt_event *ev = tt_trace_gather(g, &counts);
    tt_err e;
    int bad = 0;
    if (g->world_rank == 0) {
        if (rc->trace && tt_trace_write_json(rc->trace, g, ev, counts, &e) == 0)
            printf("trace of steps %ld..%ld written to '%s' (open it in ui.perfetto.dev)\n",
                   last_step > 0 ? last_step - 1 : 0, last_step, rc->trace);
        else if (rc->trace)
            bad = 1;
        if (!bad && rc->timeline && tt_trace_write_svg(rc->timeline, g, ev, counts, (int)last_step, &e) == 0)
            printf("timeline of step %ld written to '%s'\n", last_step, rc->timeline);
        else if (!bad && rc->timeline)
            bad = 1;
        if (bad)
            fprintf(stderr, "tiny_transformer: %s\n", e.msg);
    }
    free(ev);
    free(counts);
    tt_allreduce(g, TT_GROUP_OTHER, &bad, 1, MPI_INT, MPI_MAX);
    return bad;
}

int tt_train_main(const tt_run_config *rc_in, const tt_grid *g)
{
    tt_run_config rcv = *rc_in, *rc = &rcv;
    const int rank = g->world_rank;
    tt_err err;
    /* A resumed run's config was completed by tt_resume_prepare. */
    const long step0 = rc->resume ? rc->resume_step : 0;
    /* --inject-bug: "list" prints the planted faults; a name turns one on. */
    int fault = TT_FAULT_NONE;
    if (rc->inject_bug && strcmp(rc->inject_bug, "list") == 0) {
        if (rank == 0)
            tt_inject_list(stdout);
        return 0;
    }
    if (rc->inject_bug && (fault = tt_inject_parse(rc->inject_bug, &err)) < 0) {
        say_error(g, &err);
        return TT_EXIT_USAGE;
    }
    tt_inject_set(fault);
    if (fault && rank == 0)
        printf("planted fault: %s (--inject-bug; --inject-bug list describes it)\n",
               tt_inject_name(fault));
    if (tt_config_check(rc, &err)) {
        say_error(g, &err);
        return TT_EXIT_USAGE;
    }
    if (rc->batch % g->dp || (rc->batch / g->dp) % rc->micro_batches) {
        tt_fail(&err, "--batch %d must split into dp %d replicas of --micro-batches %d", rc->batch,
                g->dp, rc->micro_batches);
        say_error(g, &err);
        return TT_EXIT_USAGE;
    }

    tt_corpus corpus;
    if (rc->data) {
        if (tt_corpus_load(&corpus, rc->data, rc->model.T, &err)) {
            say_error(g, &err);
            return TT_EXIT_RUNTIME;
        }
    } else {
        tt_corpus_generate(&corpus, 1 << 20, rc->seed);
    }

    /* The pipeline: blocks per chunk, then this rank's shard and schedule. */
    const int K = g->pp * rc->virtual_stages;
    int chunk_layers[TT_MAX_CHUNKS * 64];
    if (K > (int)(sizeof chunk_layers / sizeof chunk_layers[0]) ||
        tt_stage_split(chunk_layers, &rc->model, K, rc->stage_layers, &err)) {
        if (K > (int)(sizeof chunk_layers / sizeof chunk_layers[0]))
            tt_fail(&err, "pp %d x virtual stages %d is more chunks than this build supports",
                    g->pp, rc->virtual_stages);
        say_error(g, &err);
        tt_corpus_free(&corpus);
        return TT_EXIT_USAGE;
    }
    tt_model model;
    tt_mem_set_budget(rc->gpu_mem);
    tt_shard_spec spec = tt_stage_spec(g, rc, chunk_layers, g->world_rank);
    /* Activations for one micro-batch; eval runs in chunks of the same size. */
    tt_model_init(&model, &rc->model, &spec, rc->batch / g->dp / rc->micro_batches, rc->seed);
    model.grid = g;
    int status = 0;
    FILE *log = NULL;
    tt_validator val;
    int have_val = 0;
    tt_pipe pipe;
    if (tt_pipe_init(&pipe, &model, rc, g, &err)) {
        say_error(g, &err);
        tt_pipe_free(&pipe);
        tt_model_free(&model);
        tt_corpus_free(&corpus);
        return TT_EXIT_USAGE;
    }
    tt_bubble_stats bubbles;
    tt_bubble_init(&bubbles, rc->stop_at && rc->stop_at < rc->steps ? rc->stop_at : rc->steps);
    /* Everything a GPU needs is allocated by now: a GPU over its budget stops
     * the run here, before any work. */
    if (tt_check_oom(g)) {
        status = TT_EXIT_RUNTIME;
        goto done;
    }
    if (rc->resume && tt_checkpoint_load(rc->resume, &model.P, &err)) {
        say_error(g, &err);
        status = TT_EXIT_RUNTIME;
        goto done;
    }
    if (rc->log && rank == 0) {
        log = fopen(rc->log, "w");
        if (!log)
            fprintf(stderr, "tiny_transformer: cannot write log '%s': %s\n", rc->log,
                    strerror(errno));
        else
            fprintf(log, "step,loss,lr,grad_norm,ms,tokens_per_s,eval_loss\n");
    }
    if (agree(g, rc->log && rank == 0 && !log ? TT_EXIT_RUNTIME : 0)) {
        status = TT_EXIT_RUNTIME;
        goto done;
    }
    banner(rc, g, &model, &corpus, step0);
    if (rank == 0 && K > 1)
        tt_print_pipeline(rc, g, chunk_layers);
    /* --validate checks every step; otherwise a run on several GPUs
     * spot-checks its first and last steps against the unsharded model. */
    const int spot = !rc->validate && rc->spot_check && g->world_size > 1;
    if (rc->validate || spot) {
        tt_shard_spec *specs = tt_malloc((size_t)g->world_size * sizeof *specs);
        for (int r = 0; r < g->world_size; r++)
            specs[r] = tt_stage_spec(g, rc, chunk_layers, r);
        int was = tt_mem_tracking(0); /* the reference is the host's, not a GPU's */
        tt_validate_init(&val, g, rc, &model, specs, rc->validate);
        tt_mem_tracking(was);
        free(specs);
        have_val = 1;
        /* A resumed reference starts from the same checkpoint (its moments). */
        if (rc->validate && rc->resume && tt_checkpoint_load(rc->resume, &val.ref.P, &err)) {
            say_error(g, &err);
            status = TT_EXIT_RUNTIME;
            goto done;
        }
    }

    /* This process trains steps [step0, end); the schedule spans --steps. */
    long end = rc->stop_at && rc->stop_at < rc->steps ? rc->stop_at : rc->steps;
    if (end < step0)
        end = step0;
    /* The spot check's second step: the last, or, when the last two steps
     * are traced, the one before them, so the picture shows the training. */
    long spot_last = end - 1;
    if ((rc->trace || rc->timeline) && end - 3 > step0)
        spot_last = end - 3;
    double first_loss = NAN, last_loss = NAN, final_eval = NAN, t_start = tt_now();
    tt_comm_stats train_traffic;
    memset(&train_traffic, 0, sizeof train_traffic);
    for (long s = step0; s < end; s++) {
        if ((rc->trace || rc->timeline) && s == (end - 2 > step0 ? end - 2 : step0))
            tt_trace_begin(g);
        /* The traffic of training steps only (not eval or the sample), which
         * is what the formulas of the communication report describe. */
        tt_comm_stats before = *tt_comm_stats_get();
        int checked = have_val && (rc->validate || s == step0 || s == spot_last);
        tt_step_stats st = tt_train_step(&pipe, &corpus, s, checked ? &val : NULL);
        /* A spot check compares weights and moments right after its step. */
        if (spot && have_val && s == spot_last)
            tt_validate_final(&val, &model);
        tt_comm_accumulate(&train_traffic, &before, tt_comm_stats_get());
        tt_bubble_add(&bubbles, &pipe);
        if (!isfinite(st.loss)) {
            if (rank == 0)
                fprintf(stderr, "tiny_transformer: loss became %g at step %ld (try a lower --lr)\n",
                        st.loss, s);
            status = TT_EXIT_RUNTIME;
            goto done;
        }
        if (isnan(first_loss))
            first_loss = st.loss;
        last_loss = st.loss;
        double tok_s = (double)rc->batch * rc->model.T / st.seconds;
        double ev = NAN;
        /* Eval every K steps and after the last one (the run's final figure). */
        if ((rc->eval_every > 0 && (s + 1) % rc->eval_every == 0) || s == end - 1)
            ev = final_eval = tt_eval_loss(&pipe, &corpus);
        if (!rc->quiet) {
            SAY("step %5ld/%ld | loss %.4f | lr %.3e | grad norm %.4f | %7.1f ms | %8.0f tok/s",
                s, rc->steps, st.loss, st.lr, st.grad_norm, st.seconds * 1e3, tok_s);
            if (!isnan(ev))
                SAY(" | eval %.4f", ev);
            SAY("\n");
            fflush(stdout);
        }
        if (log) {
            fprintf(log, "%ld,%.9g,%.9g,%.9g,%.3f,%.1f,", s, st.loss, st.lr, st.grad_norm,
                    st.seconds * 1e3, tok_s);
            if (!isnan(ev))
                fprintf(log, "%.9g", ev);
            fprintf(log, "\n");
        }
        if (rc->save_every && (s + 1) % rc->save_every == 0 && s + 1 < end) {
            if (save(rc, &model, g, s + 1, rc->save, &err)) { /* agreed by every rank */
                say_error(g, &err);
                status = TT_EXIT_RUNTIME;
                goto done;
            }
            SAY("saved checkpoint '%s' at step %ld\n", rc->save, s + 1);
        }
    }
    double secs = tt_now() - t_start;
    if ((rc->trace || rc->timeline) && trace_end(rc, g, end - 1)) {
        status = TT_EXIT_RUNTIME;
        goto done;
    }

    if (g->pp > 1 && bubbles.n > 0)
        tt_bubble_report(&bubbles, &pipe, g);
    if (rc->explain)
        tt_explain_step(&pipe, g);
    double ev = end > step0 ? final_eval : tt_eval_loss(&pipe, &corpus);
    if (end > step0)
        SAY("trained steps %ld..%ld in %.1f s: loss %.4f -> %.4f", step0, end - 1, secs,
            first_loss, last_loss);
    else
        SAY("no steps to train (already at step %ld)", step0);
    if (!isnan(ev))
        SAY("; eval loss %.4f on %d held-out sequences", ev,
            tt_eval_windows(&corpus, rc->model.T, rc->eval_windows));
    SAY("\n");
    if (g->tp > 1) {
        int same = tt_tp_replicated_identical(g, &model.P);
        SAY("TP copies of the replicated tensors bit-identical: %s\n", same ? "yes" : "NO");
        if (!same)
            status = TT_EXIT_RUNTIME;
    }
    if (g->dp > 1) {
        int same = tt_dp_replicas_identical(g, &model.P);
        SAY("DP replicas bit-identical (weights and Adam moments): %s\n", same ? "yes" : "NO");
        if (!same)
            status = TT_EXIT_RUNTIME;
    }
    if (rc->report_memory)
        tt_report_memory(stdout, g);
    if (g->world_size > 1 || rc->report_comm) {
        if (!tt_report_comm(rank == 0 ? stdout : NULL, rc, g, &model, &train_traffic, end - step0,
                            rc->report_comm))
            status = TT_EXIT_RUNTIME;
    }
    if (have_val && val.steps > 0) {
        if (rc->validate)
            tt_validate_final(&val, &model);
        if (!tt_validate_report(&val, stdout))
            status = TT_EXIT_RUNTIME;
    }
    if (rc->save) {
        if (save(rc, &model, g, end, rc->save, &err)) { /* agreed by every rank */
            say_error(g, &err);
            status = TT_EXIT_RUNTIME;
            goto done;
        }
        SAY("saved checkpoint '%s'\n", rc->save);
    }
    if (rc->sample_len > 0) {
        /* Collective over the TP group (every replica runs it; rank 0 prints). */
        char *out = tt_malloc(strlen(rc->prompt) + (size_t)rc->sample_len + 2);
        tt_generate(&pipe, rc->prompt, rc->sample_len, out);
        if (rank == 0)
            print_sample(out);
        free(out);
    }
done:
    if (log && fclose(log) && status == 0) {
        fprintf(stderr, "tiny_transformer: cannot write log '%s'\n", rc->log);
        status = TT_EXIT_RUNTIME;
    }
    fflush(stdout);
    if (have_val)
        tt_validate_free(&val);
    tt_pipe_free(&pipe);
    tt_bubble_free(&bubbles);
    tt_model_free(&model);
    tt_corpus_free(&corpus);
    return agree(g, status);
}
