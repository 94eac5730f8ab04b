/* run.c - the whole program on one virtual GPU, around one run state:
 *
 *   run_setup    checks (output paths too), corpus, stage split, model
 *                shard, pipeline, memory budget, resume, log, banner, oracle
 *   run_steps    the training steps [step0, end): step, checks, log, saves
 *   run_end      the final checkpoint first, then the trace and timeline,
 *                then (run_reports) what the run did: bubbles, --explain,
 *                losses, replica and TP copy checks, memory and
 *                communication, the oracle's table; then the sample
 *
 * Every failure one rank can meet alone (a file, a budget) is agreed by all
 * ranks before anyone acts on it, and every rank returns the same status. */
#include "tt/app/run.h"
#include "tt/app/flags.h"
#include "tt/app/preflight.h"
#include "tt/comm/comm.h"
#include "tt/core/memory.h"
#include "tt/core/outpath.h"
#include "tt/parallel/data_parallel.h"
#include "tt/show/banner.h"
#include "tt/show/report.h"
#include "tt/show/trace.h"
#include "tt/train/checkpoint.h"
#include "tt/train/inject.h"
#include "tt/train/resume.h"
#include "tt/train/train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pipeline stages a run may have (the chunks are stages x virtual stages). */
#define RUN_MAX_STAGES 64

typedef struct {
    tt_run_config rc;          /* completed by tt_resume_prepare when resuming */
    const tt_grid *g;
    long step0, end;           /* this process trains steps [step0, end) */
    int chunk_layers[TT_MAX_CHUNKS * RUN_MAX_STAGES]; /* blocks per global chunk */
    tt_corpus corpus;
    tt_model model;
    tt_pipe pipe;
    tt_bubble_stats bubbles;
    tt_validator val;
    int have_corpus, have_model, have_pipe, have_val;
    int spot;                  /* spot-check steps step0 and spot_last */
    long spot_last;
    FILE *log;                 /* --log, rank 0 */
    tt_event *ev;              /* the traced steps' events (rank 0), gathered */
    int *ev_counts;
    int gathered;              /* ev is ours to free */
    tt_comm_stats traffic;     /* of the training steps only */
    double first_loss, last_loss, final_eval, seconds;
} tt_run;

#define SAY(...) do { if (r->g->world_rank == 0) printf(__VA_ARGS__); } while (0)

/* Rank 0 prints the one line; the caller returns the same status everywhere. */
static int fail_with(const tt_run *r, const tt_err *e, int status)
{
    if (r->g->world_rank == 0)
        fprintf(stderr, "tiny_transformer: %s\n", e->msg);
    return status;
}

/* A failure that may be this rank's alone: agreed first, then reported once. */
static int agreed(const tt_run *r, int failed, tt_err *e, int status)
{
    return tt_agree_error(r->g, failed, e) ? fail_with(r, e, status) : 0;
}

/* --inject-bug: a name turns one planted fault on (announced); "list" is
 * answered before run_check (tt_run_main). */
static int run_plant_fault(tt_run *r)
{
    tt_err e;
    int fault = TT_FAULT_NONE;
    if (r->rc.inject_bug && (fault = tt_inject_parse(r->rc.inject_bug, &e)) < 0)
        return fail_with(r, &e, TT_EXIT_USAGE);
    tt_inject_set(fault);
    if (fault)
        SAY("planted fault: %s (--inject-bug; --inject-bug list describes it)\n",
            tt_inject_name(fault));
    return 0;
}

/* The values against each other and the layout: the same verdict on every
 * rank (no communication needed). */
static int run_check(tt_run *r)
{
    const tt_run_config *rc = &r->rc;
    tt_err e;
    if (run_plant_fault(r))
        return TT_EXIT_USAGE;
    if (tt_config_check(rc, &e))
        return fail_with(r, &e, TT_EXIT_USAGE);
    if (rc->batch % r->g->dp || (rc->batch / r->g->dp) % rc->micro_batches) {
        tt_fail(&e, "--batch %d must split into dp %d replicas of --micro-batches %d", rc->batch,
                r->g->dp, rc->micro_batches);
        return fail_with(r, &e, TT_EXIT_USAGE);
    }
    const int K = r->g->pp * rc->virtual_stages;
    if (K > (int)(sizeof r->chunk_layers / sizeof r->chunk_layers[0])) {
        tt_fail(&e, "pp %d x virtual stages %d is more chunks than this build supports",
                r->g->pp, rc->virtual_stages);
        return fail_with(r, &e, TT_EXIT_USAGE);
    }
    if (tt_stage_split(r->chunk_layers, &rc->model, K, rc->stage_layers, &e))
        return fail_with(r, &e, TT_EXIT_USAGE);
    return 0;
}

/* The corpus, this GPU's shard of the model and its pipeline. */
static int run_build(tt_run *r)
{
    tt_run_config *rc = &r->rc;
    const tt_grid *g = r->g;
    tt_err e;
    int failed = 0;
    if (rc->data)
        failed = tt_corpus_load(&r->corpus, rc->data, rc->model.T, &e) != 0;
    else
        tt_corpus_generate(&r->corpus, 1 << 20, rc->seed);
    r->have_corpus = !failed;
    if (agreed(r, failed, &e, TT_EXIT_RUNTIME))
        return TT_EXIT_RUNTIME;
    if (rc->data && tt_preflight_corpus(g, &r->corpus, rc->data, &e)) /* agreed */
        return fail_with(r, &e, TT_EXIT_RUNTIME);
    tt_mem_set_budget(rc->gpu_mem);
    tt_shard_spec spec = tt_stage_spec(g, rc, r->chunk_layers, g->world_rank);
    /* Sizes in 64 bits before anything is allocated (src/app/preflight.c). */
    if (agreed(r, tt_preflight_memory(rc, g, &spec, &e) != 0, &e, TT_EXIT_RUNTIME))
        return TT_EXIT_RUNTIME;
    /* Activations for one micro-batch; eval runs in chunks of the same size. */
    tt_model_init(&r->model, &rc->model, &spec, tt_micro_batch_size(rc, g->dp), rc->seed);
    r->model.grid = g;
    r->have_model = 1;
    r->have_pipe = 1; /* tt_pipe_free releases what a failed init leaves */
    if (tt_pipe_init(&r->pipe, &r->model, rc, g, &e))
        return fail_with(r, &e, TT_EXIT_USAGE);
    tt_bubble_init(&r->bubbles, r->end);
    return 0;
}

/* --validate checks every step; otherwise a run on several GPUs spot-checks
 * its first and last steps against the unsharded model. */
static int run_oracle(tt_run *r)
{
    const tt_run_config *rc = &r->rc;
    const tt_grid *g = r->g;
    r->spot = !rc->validate && rc->spot_check && g->world_size > 1;
    if (!rc->validate && !r->spot)
        return 0;
    tt_shard_spec *specs = tt_malloc((size_t)g->world_size * sizeof *specs);
    for (int k = 0; k < g->world_size; k++)
        specs[k] = tt_stage_spec(g, rc, r->chunk_layers, k);
    int was = tt_mem_tracking(0); /* the reference is the host's, not a GPU's */
    tt_validate_init(&r->val, g, rc, &r->model, specs, rc->validate);
    tt_mem_tracking(was);
    free(specs);
    r->have_val = 1;
    /* A resumed reference starts from the same checkpoint (its moments). */
    tt_err e;
    int failed = rc->validate && rc->resume && tt_checkpoint_load(rc->resume, &r->val.ref.P, &e);
    return agreed(r, failed, &e, TT_EXIT_RUNTIME);
}

/* Every file the run will write, checked by every rank before any work
 * (the directory may be another node's): a wrong path costs a message, not
 * the corpus, a checkpoint or a device, nor a whole run's training. */
static int run_check_outputs(tt_run *r)
{
    tt_err e;
    return agreed(r, tt_config_outputs_check(&r->rc, &e) != 0, &e, TT_EXIT_RUNTIME);
}

static int run_setup(tt_run *r)
{
    tt_run_config *rc = &r->rc;
    const tt_grid *g = r->g;
    tt_err e;
    int status = run_check(r);
    if (!status)
        status = run_check_outputs(r);
    if (!status)
        status = run_build(r);
    if (status)
        return status;
    /* Everything a GPU needs is allocated by now: a GPU over its budget stops
     * the run here, before any work. */
    if (tt_check_oom(g))
        return TT_EXIT_RUNTIME;
    int failed = rc->resume && tt_checkpoint_load(rc->resume, &r->model.P, &e);
    if (agreed(r, failed, &e, TT_EXIT_RUNTIME))
        return TT_EXIT_RUNTIME;
    if (rc->log && g->world_rank == 0) {
        r->log = fopen(rc->log, "w");
        if (!r->log)
            fprintf(stderr, "tiny_transformer: cannot write log '%s': %s\n", rc->log,
                    strerror(errno));
        else
            fprintf(r->log, "step,loss,lr,grad_norm,ms,tokens_per_s,eval_loss\n");
    }
    if (tt_agree_status(g, rc->log && g->world_rank == 0 && !r->log ? TT_EXIT_RUNTIME : 0))
        return TT_EXIT_RUNTIME;
    tt_banner_print(rc, g, &r->model, &r->corpus, r->step0);
    if (g->world_rank == 0 && g->pp * rc->virtual_stages > 1)
        tt_print_pipeline(rc, g, r->chunk_layers);
    return run_oracle(r);
}

/* The per-step line and the CSV row. */
static void run_log_step(tt_run *r, long s, const tt_step_stats *st, double ev)
{
    const tt_run_config *rc = &r->rc;
    double tok_s = (double)rc->batch * rc->model.T / st->seconds;
    if (!rc->quiet) {
        SAY("step %5ld/%ld | loss %.4f | lr %.3e | grad norm %.4f | %7.1f ms | %8.0f tok/s", s,
            rc->steps, st->loss, st->lr, st->grad_norm, st->seconds * 1e3, tok_s);
        if (!isnan(ev))
            SAY(" | eval %.4f", ev);
        SAY("\n");
        fflush(stdout);
    }
    if (r->log) {
        fprintf(r->log, "%ld,%.9g,%.9g,%.9g,%.3f,%.1f,", s, st->loss, st->lr, st->grad_norm,
                st->seconds * 1e3, tok_s);
        if (!isnan(ev))
            fprintf(r->log, "%.9g", ev);
        fprintf(r->log, "\n");
        fflush(r->log); /* a run killed later leaves whole rows */
    }
}

/* One training step with everything around it; 0 or an exit status. */
static int run_one_step(tt_run *r, long s)
{
    const tt_run_config *rc = &r->rc;
    const tt_grid *g = r->g;
    /* The traffic of training steps only (not eval or the sample), which is
     * what the formulas of the communication report describe. */
    tt_comm_stats before = *tt_comm_stats_get();
    int checked = r->have_val && (rc->validate || s == r->step0 || s == r->spot_last);
    tt_step_stats st = tt_train_step(&r->pipe, &r->corpus, s, checked ? &r->val : NULL);
    /* A spot check compares weights and moments right after its step. */
    if (r->spot && r->have_val && s == r->spot_last)
        tt_validate_final(&r->val, &r->model);
    tt_comm_accumulate(&r->traffic, &before, tt_comm_stats_get());
    tt_bubble_add(&r->bubbles, &r->pipe);
    if (!isfinite(st.loss)) {
        if (g->world_rank == 0)
            fprintf(stderr, "tiny_transformer: loss became %g at step %ld (try a lower --lr)\n",
                    st.loss, s);
        return TT_EXIT_RUNTIME;
    }
    if (isnan(r->first_loss))
        r->first_loss = st.loss;
    r->last_loss = st.loss;
    double ev = NAN;
    /* Eval every K steps and after the last one (the run's final figure). */
    if ((rc->eval_every > 0 && (s + 1) % rc->eval_every == 0) || s == r->end - 1)
        ev = r->final_eval = tt_eval_loss(&r->pipe, &r->corpus);
    run_log_step(r, s, &st, ev);
    if (rc->save_every && (s + 1) % rc->save_every == 0 && s + 1 < r->end) {
        tt_err e;
        if (tt_run_save(rc, &r->model, g, s + 1, rc->save, &e)) /* agreed by every rank */
            return fail_with(r, &e, TT_EXIT_RUNTIME);
        SAY("saved checkpoint '%s' at step %ld\n", rc->save, s + 1);
    }
    return 0;
}

static int run_steps(tt_run *r)
{
    const tt_run_config *rc = &r->rc;
    const int traced = rc->trace || rc->timeline;
    /* The spot check's second step: the last, or, when the last two steps
     * are traced, the one before them, so the picture shows the training. */
    r->spot_last = r->end - 1;
    if (traced && r->end - 3 > r->step0)
        r->spot_last = r->end - 3;
    double t_start = tt_now();
    for (long s = r->step0; s < r->end; s++) {
        if (traced && s == (r->end - 2 > r->step0 ? r->end - 2 : r->step0))
            tt_trace_begin(r->g);
        int status = run_one_step(r, s);
        if (status)
            return status;
    }
    r->seconds = tt_now() - t_start;
    /* Written after the checkpoint (run_end); gathered now, so the save's
     * communication is not in the picture. */
    if (traced) {
        r->ev = tt_trace_gather(r->g, &r->ev_counts);
        r->gathered = 1;
    }
    return 0;
}

static int run_reports(tt_run *r)
{
    const tt_run_config *rc = &r->rc;
    const tt_grid *g = r->g;
    int status = 0;
    if (g->pp > 1 && r->bubbles.n > 0)
        tt_bubble_report(&r->bubbles, &r->pipe, g);
    if (rc->explain)
        tt_explain_step(&r->pipe, g);
    const int trained = r->end > r->step0;
    double ev = trained ? r->final_eval : tt_eval_loss(&r->pipe, &r->corpus);
    if (trained)
        SAY("trained steps %ld..%ld in %.1f s: loss %.4f -> %.4f", r->step0, r->end - 1,
            r->seconds, r->first_loss, r->last_loss);
    else
        SAY("no steps to train (already at step %ld)", r->step0);
    if (!isnan(ev))
        SAY("; eval loss %.4f on %d held-out sequences", ev,
            tt_eval_windows(&r->corpus, rc->model.T, rc->eval_windows));
    SAY("\n");
    if (g->tp > 1) {
        int same = tt_tp_replicated_identical(g, &r->model.P);
        SAY("TP copies of the replicated tensors bit-identical: %s\n", same ? "yes" : "NO");
        status = same ? status : TT_EXIT_RUNTIME;
    }
    if (g->dp > 1) {
        int same = tt_dp_replicas_identical(g, &r->model.P);
        SAY("DP replicas bit-identical (weights and Adam moments): %s\n", same ? "yes" : "NO");
        status = same ? status : TT_EXIT_RUNTIME;
    }
    if (rc->report_memory)
        tt_report_memory(stdout, g);
    if ((g->world_size > 1 || rc->report_comm) &&
        !tt_report_comm(g->world_rank == 0 ? stdout : NULL, rc, g, &r->model, &r->traffic,
                        r->end - r->step0, rc->report_comm))
        status = TT_EXIT_RUNTIME;
    if (r->have_val && r->val.steps > 0) {
        if (rc->validate)
            tt_validate_final(&r->val, &r->model);
        if (!tt_validate_report(&r->val, stdout))
            status = TT_EXIT_RUNTIME;
    }
    return status;
}

/* Collective over the TP group (every replica runs it; rank 0 prints). */
static void run_sample(tt_run *r)
{
    const tt_run_config *rc = &r->rc;
    char *out = tt_malloc(strlen(rc->prompt) + (size_t)rc->sample_len + 2);
    tt_generate(&r->pipe, rc->prompt, rc->sample_len, out);
    if (r->g->world_rank == 0)
        tt_sample_print(out);
    free(out);
}

/* The checkpoint first, before anything that can fail (a trace path, a
 * report), so none of them can lose the run's training; it is announced
 * where it always was, after the reports. */
static int run_end(tt_run *r)
{
    const tt_run_config *rc = &r->rc;
    tt_err e;
    if (rc->save && tt_run_save(rc, &r->model, r->g, r->end, rc->save, &e)) /* agreed */
        return fail_with(r, &e, TT_EXIT_RUNTIME);
    int traced_ok = 1;
    if (r->gathered) {
        r->gathered = 0; /* the writer frees the events */
        traced_ok = !tt_trace_write_gathered(r->g, r->ev, r->ev_counts, rc->trace,
                                             rc->timeline, r->end - 1);
    }
    int status = traced_ok ? run_reports(r) : TT_EXIT_RUNTIME;
    if (rc->save)
        SAY("saved checkpoint '%s'\n", rc->save);
    if (traced_ok && rc->sample_len > 0)
        run_sample(r);
    return status;
}

static int run_free(tt_run *r, int status)
{
    if (r->log && fclose(r->log) && status == 0) {
        fprintf(stderr, "tiny_transformer: cannot write log '%s'\n", r->rc.log);
        status = TT_EXIT_RUNTIME;
    }
    fflush(stdout);
    if (r->gathered) {
        free(r->ev);
        free(r->ev_counts);
    }
    if (r->have_val)
        tt_validate_free(&r->val);
    if (r->have_pipe) {
        tt_pipe_free(&r->pipe);
        tt_bubble_free(&r->bubbles);
    }
    if (r->have_model)
        tt_model_free(&r->model);
    if (r->have_corpus)
        tt_corpus_free(&r->corpus);
    return status;
}

int tt_run_main(const tt_run_config *rc, const tt_grid *g)
{
    if (rc->inject_bug && strcmp(rc->inject_bug, "list") == 0) {
        if (g->world_rank == 0)
            tt_inject_list(stdout);
        return 0;
    }
    tt_run *r = tt_calloc(1, sizeof *r);
    r->rc = *rc;
    r->g = g;
    r->first_loss = r->last_loss = r->final_eval = NAN;
    /* A resumed run's config was completed by tt_resume_prepare. */
    r->step0 = rc->resume ? rc->resume_step : 0;
    r->end = rc->stop_at && rc->stop_at < rc->steps ? rc->stop_at : rc->steps;
    if (r->end < r->step0)
        r->end = r->step0;
    int status = run_setup(r);
    /* Usage errors are found identically by every rank before any
     * collective; everything later is agreed at the end. */
    int agree_at_end = status != TT_EXIT_USAGE;
    if (!status)
        status = run_steps(r);
    if (!status)
        status = run_end(r);
    status = run_free(r, status);
    free(r);
    return agree_at_end ? tt_agree_status(g, status) : status;
}
