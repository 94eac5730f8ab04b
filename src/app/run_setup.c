/* run_setup.c - everything a run does before its first step: the planted
 * fault, the checks (values, layout, output paths), the corpus, this GPU's
 * shard and pipeline, the memory budget, resume, the log, the banner and the
 * oracle. Every failure one rank can meet alone is agreed by all ranks. */
#include "app/run_internal.h"
#include "show/outfile.h"

#include <sys/stat.h>

/* --inject-bug: a name turns one planted fault on (announced); "list" is
 * answered before run_check (tt_run_main). */
static int run_plant_fault(tt_run *r)
{
    tt_err e;
    int fault = TT_FAULT_NONE;
    if (r->rc.inject_bug && (fault = tt_inject_parse(r->rc.inject_bug, &e)) < 0)
        return fail_with(r, &e, TT_EXIT_USAGE);
    /* A fault that cannot act in this run (the stall alone, or in a run
     * that does not train its step) is refused rather than run in vain. */
    if (tt_inject_check(fault, r->g->world_size, r->step0, r->end, &e))
        return fail_with(r, &e, TT_EXIT_USAGE);
    tt_inject_set(fault);
    if (fault)
        /* As given: a mystery's name stays hidden. */
        SAY("planted fault: %s (--inject-bug; %s)\n", r->rc.inject_bug,
            strncmp(r->rc.inject_bug, "mystery-", 8) == 0
                ? "which bug it is, the bug lab's answer key says"
                : "--inject-bug list describes it");
    return 0;
}

/* tt_run_layout_check, with the blocks of every chunk left in chunk_layers
 * (room for TT_MAX_CHUNKS x RUN_MAX_STAGES) when the split succeeds. */
static int layout_check(const tt_run_config *rc, int tp, int pp, int dp, int *chunk_layers,
                        tt_err *e)
{
    if (rc->batch % dp || (rc->batch / dp) % rc->micro_batches)
        return tt_fail(e, "--batch %d must split into dp %d replicas of --micro-batches %d",
                       rc->batch, dp, rc->micro_batches);
    if (rc->zero > 0 && dp == 1)
        return tt_fail(e, "--zero %d needs a data-parallel group: ZeRO shards %s over the dp "
                          "GPUs, and this layout has dp 1 (use --dp 2 or more, or --zero 0)",
                       rc->zero, rc->zero == 1   ? "the optimizer state"
                                 : rc->zero == 2 ? "the optimizer state and the gradients"
                                                 : "the optimizer state, the gradients and the "
                                                   "weights");
    if (rc->sequence_parallel) {
        /* Sequence parallelism splits the tokens of each micro-batch over
         * the TP group: it needs one, and a whole number of tokens each. */
        const long tokens = (long)tt_micro_batch_size(rc, dp) * rc->model.T;
        if (tp == 1)
            return tt_fail(e, "--sequence-parallel needs tensor parallelism: it splits the "
                              "LayerNorm and residual regions over the TP group, and this "
                              "layout has tp 1 (use --tp 2 or more)");
        if (tokens % tp)
            return tt_fail(e, "--sequence-parallel needs the tokens of a micro-batch (batch/dp/"
                              "micro-batches x seq = %d/%d/%d x %d = %ld) divisible by tp %d",
                           rc->batch, dp, rc->micro_batches, rc->model.T, tokens, tp);
        if (rc->tp_mlp_gather)
            return tt_fail(e, "--sequence-parallel does not combine with --tp-mlp gather (the "
                              "gathered MLP is the unsplit Megatron layout's variant); use "
                              "--tp-mlp megatron");
    }
    const int K = pp * rc->virtual_stages;
    if (K > TT_MAX_CHUNKS * RUN_MAX_STAGES)
        return tt_fail(e, "pp %d x virtual stages %d is more chunks than this build supports",
                       pp, rc->virtual_stages);
    const tt_schedule_kind kind = tt_pipe_kind(rc, pp);
    if (tt_stage_split(chunk_layers, &rc->model, K, tt_schedule_placement(kind),
                       rc->stage_layers, e))
        return -1;
    /* The pipeline's own rules (tt_pipe_init checks them again) */
    if (tt_pipe_check_flags(rc, pp, e) ||
        tt_schedule_validate_args(kind, pp, rc->micro_batches, rc->virtual_stages, e))
        return -1;
    return 0;
}

int tt_run_layout_check(const tt_run_config *rc, int tp, int pp, int dp, tt_err *e)
{
    int chunk_layers[TT_MAX_CHUNKS * RUN_MAX_STAGES];
    return layout_check(rc, tp, pp, dp, chunk_layers, e);
}

/* The values against each other and the layout: the same verdict on every
 * rank (no communication needed). */
static int run_check(tt_run *r)
{
    const tt_run_config *rc = &r->rc;
    tt_err e;
    if (run_plant_fault(r))
        return TT_EXIT_USAGE;
    if (tt_config_check(rc, &e)) {
        /* A resumed run's values partly come from its checkpoint: say so. */
        if (rc->resume) {
            size_t n = strlen(e.msg);
            snprintf(e.msg + n, sizeof e.msg - n,
                     " (values not given on the command line come from checkpoint '%s')",
                     rc->resume);
        }
        return fail_with(r, &e, TT_EXIT_USAGE);
    }
    if (layout_check(rc, r->g->tp, r->g->pp, r->g->dp, r->chunk_layers, &e))
        return fail_with(r, &e, TT_EXIT_USAGE);
    return 0;
}

/* The machine the virtual clocks model (--cluster, --clock): a built-in, or
 * a file every rank reads, so its verdict is agreed. */
static int run_clock(tt_run *r)
{
    tt_cluster c;
    tt_err e;
    int failed = tt_cluster_load(&c, r->rc.cluster, &e) != 0;
    if (agreed(r, failed, &e, TT_EXIT_USAGE))
        return TT_EXIT_USAGE;
    tt_vclock_setup(&c, r->rc.clock_wall ? TT_CLOCK_WALL : TT_CLOCK_VIRTUAL, r->g->world_rank);
    return 0;
}

/* The corpus, this GPU's shard of the model and its pipeline. */
static int run_build(tt_run *r)
{
    tt_run_config *rc = &r->rc;
    const tt_grid *g = r->g;
    tt_err e;
    int failed = 0;
    /* Collective (every rank asks, data or not): this host's memory per rank
     * bounds the file every rank reads whole. */
    const int ranks = tt_ranks_on_host(g);
    if (rc->data)
        failed = tt_corpus_load(&r->corpus, rc->data, rc->model.T, tt_mem_host_bytes() / ranks,
                                &e) != 0;
    else
        tt_corpus_generate(&r->corpus, 1 << 20, rc->seed);
    /* A file named by the checkpoint, not by the command line: say so, since
     * it is stored as given and may be relative to another directory. */
    if (failed && rc->data_adopted)
        tt_appendf(e.msg, sizeof e.msg, " (the --data of checkpoint '%s'%s; give --data FILE)",
                   rc->resume,
                   rc->data[0] != '/' ? ", relative to the directory its run was started in"
                                      : "");
    r->have_corpus = !failed;
    if (!failed && rc->data) { /* compared between ranks, and recorded in checkpoints */
        r->rc.data_bytes = r->corpus.n;
        r->rc.data_crc = tt_crc32(0, r->corpus.bytes, r->corpus.n);
    }
    if (agreed(r, failed, &e, TT_EXIT_RUNTIME))
        return TT_EXIT_RUNTIME;
    if (rc->data && tt_preflight_corpus(g, &r->corpus, rc->data_crc, rc->data, &e)) /* agreed */
        return fail_with(r, &e, TT_EXIT_RUNTIME);
    tt_mem_set_budget(rc->gpu_mem);
    tt_shard_spec spec = tt_stage_spec(g, rc, r->chunk_layers, g->world_rank);
    /* Sizes in 64 bits before anything is allocated (src/app/preflight.c). */
    if (agreed(r, tt_preflight_memory(rc, g, &spec, &e) != 0, &e, TT_EXIT_RUNTIME))
        return TT_EXIT_RUNTIME;
    /* Activations for one micro-batch; eval runs in chunks of the same size. */
    tt_model_init(&r->model, &rc->model, &spec, tt_micro_batch_size(rc, g->dp), rc->seed);
    r->model.grid = g;
    /* ZeRO 2 and 3: reduce each unit as its backward ends; 3: gather its
     * weights before each use */
    tt_zero_attach(&r->model, g);
    /* no ZeRO: each DP bucket all-reduced as soon as its units are final */
    tt_dp_attach(&r->model, g, rc->dp_bucket, rc->micro_batches, rc->overlap);
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
    int failed = rc->validate && rc->resume &&
                 tt_checkpoint_load_same(rc->resume, rc->resume_print, &r->val.ref.P, &e);
    return agreed(r, failed, &e, TT_EXIT_RUNTIME);
}

/* Every file the run will write, checked by every rank before any work
 * (the directory may be another node's): a wrong path costs a message, not
 * the corpus, a checkpoint or a device, nor a whole run's training. */
static int run_check_outputs(tt_run *r)
{
    tt_err e;
    if (agreed(r, tt_config_outputs_check(&r->rc, &e) != 0, &e, TT_EXIT_RUNTIME))
        return TT_EXIT_RUNTIME;
    /* What is under --save now is what the run's saves may replace; if
     * another run replaces it meanwhile, a save refuses (rank 0 renames). */
    if (r->rc.save && r->g->world_rank == 0)
        tt_replace_guard(r->rc.save);
    /* The ranks write one checkpoint file together: they must all see it
     * (checked again at every save). Collective, agreed. */
    if (r->rc.save && r->g->world_size > 1 && tt_checkpoint_shared_check(r->rc.save, r->g, &e))
        return fail_with(r, &e, TT_EXIT_RUNTIME);
    return 0;
}

/* What a killed run left of this run's outputs: their temporaries, removed
 * by rank 0 (whose pid names them) before the first step; a live run's are
 * left alone (tt_remove_stale_temps). */
static void run_clean_temps(const tt_run *r)
{
    const tt_run_config *rc = &r->rc;
    const char *outs[] = {rc->save, rc->log, rc->trace, rc->timeline};
    for (size_t i = 0; r->g->world_rank == 0 && i < sizeof outs / sizeof outs[0]; i++)
        if (outs[i])
            tt_remove_stale_temps(outs[i], stdout);
}

/* The last column names the clock of ms, tokens_per_s and mfu on each row:
 * logs of both clocks look alike, and a resumed run may change --clock. */
#define LOG_HEADER "step,loss,lr,grad_norm,ms,tokens_per_s,eval_loss,mfu,wall_ms,clock\n"

/* The header before the clock column: a resumed run keeps such a log's rows
 * too, their clock left empty (unknown). */
#define LOG_HEADER_NO_CLOCK "step,loss,lr,grad_norm,ms,tokens_per_s,eval_loss,mfu,wall_ms\n"

/* The CSV log, open for appending. A resumed run continues the log it finds
 * (same header, or the one before the clock column): the rows of steps
 * before the checkpoint's are kept, the rows a killed run wrote past it are
 * dropped, because those steps run again. The kept rows go through a
 * temporary file renamed into place, so the old log is whole until the new
 * one is. Any other file starts afresh. */
static FILE *open_log(const char *path, long step0)
{
    FILE *old = step0 > 0 ? fopen(path, "r") : NULL;
    char line[512];
    int no_clock = 0;
    if (old && fgets(line, sizeof line, old))
        no_clock = strcmp(line, LOG_HEADER_NO_CLOCK) == 0;
    else
        line[0] = '\0';
    if (!old || (strcmp(line, LOG_HEADER) != 0 && !no_clock)) {
        if (old)
            fclose(old);
        FILE *f = fopen(path, "w");
        if (f)
            fputs(LOG_HEADER, f);
        return f;
    }
    tt_outfile o;
    tt_err e;
    int ok = tt_outfile_open(&o, path, "log", &e) == 0;
    if (ok)
        fputs(LOG_HEADER, o.f);
    while (ok && fgets(line, sizeof line, old)) {
        char *end;
        long step = strtol(line, &end, 10);
        char *nl = strchr(line, '\n');
        if (end != line && *end == ',' && step < step0 && nl) {
            if (no_clock) /* the row's clock was not written: empty */
                *nl = '\0';
            fputs(line, o.f); /* a failed write shows in tt_outfile_finish */
            if (no_clock)
                fputs(",\n", o.f);
        }
    }
    fclose(old);
    return ok && tt_outfile_finish(&o, &e) == 0 ? fopen(path, "a") : NULL;
}

int tt_run_setup(tt_run *r)
{
    tt_run_config *rc = &r->rc;
    const tt_grid *g = r->g;
    tt_err e;
    int status = run_check(r);
    if (!status)
        status = run_clock(r);
    if (!status)
        status = run_check_outputs(r);
    if (!status)
        run_clean_temps(r);
    if (!status)
        status = run_build(r);
    if (status)
        return status;
    /* Everything a GPU needs is allocated by now: a GPU over its budget stops
     * the run here, before any work. */
    if (tt_check_oom(g))
        return TT_EXIT_RUNTIME;
    if (rc->resume)
        tt_fault_pause_before_load(g->world_rank); /* a test's window, or nothing */
    int failed = rc->resume &&
                 (tt_checkpoint_load_same(rc->resume, rc->resume_print, &r->model.P, &e) ||
                  tt_resume_check_state(&r->model.P, rc->resume, &e));
    if (agreed(r, failed, &e, TT_EXIT_RUNTIME))
        return TT_EXIT_RUNTIME;
    if (rc->log && g->world_rank == 0) {
        r->log = open_log(rc->log, r->step0);
        /* the header written, so a full disk shows here and not at step 1 */
        struct stat st;
        if (r->log && (fflush(r->log) != 0 || fstat(fileno(r->log), &st) != 0)) {
            int why = errno;
            fclose(r->log);
            r->log = NULL;
            errno = why;
        }
        if (r->log)
            r->log_whole = st.st_size;
        else
            fprintf(stderr, "tiny_transformer: cannot write log '%s': %s\n", rc->log,
                    strerror(errno));
    }
    if (tt_agree_status(g, rc->log && g->world_rank == 0 && !r->log ? TT_EXIT_RUNTIME : 0))
        return TT_EXIT_RUNTIME;
    tt_banner_print(rc, g, &r->model, &r->corpus, r->step0);
    if (g->world_rank == 0)
        tt_print_pipeline(rc, g, r->chunk_layers);
    return run_oracle(r);
}

