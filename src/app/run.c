/* run.c - the whole program on one virtual GPU, around one run state
 * (run_internal.h):
 *
 *   run_setup    (run_setup.c) checks (output paths too), corpus, stage
 *                split, model shard, pipeline, memory budget, resume, log,
 *                banner, oracle
 *   run_steps    the training steps [step0, end): step, checks, log (its
 *                lines and rows: run_progress.c), saves
 *   run_end      the final checkpoint first, then the trace and timeline,
 *                then (run_reports) what the run did: bubbles, --explain,
 *                losses, replica and TP copy checks, memory and
 *                communication, the oracle's table; then the sample
 *
 * Every failure one rank can meet alone (a file, a budget) is agreed by all
 * ranks before anyone acts on it, and every rank returns the same status. */
#include "app/run_internal.h"
#include "tt/app/interrupt.h"
#include "tt/comm/cores.h"

/* One training step with everything around it; 0 or an exit status. */
static int run_one_step(tt_run *r, long s)
{
    const tt_run_config *rc = &r->rc;
    const tt_grid *g = r->g;
    /* The traffic of training steps only (not eval or the sample), which is
     * what the formulas of the communication report describe. */
    tt_comm_stats before = *tt_comm_stats_get();
    const int checked = run_step_checked(r, s);
    double u0[TT_CPU_N], u1[TT_CPU_N];
    tt_cpu_usage(u0);
    tt_step_stats st = tt_train_step(&r->pipe, &r->corpus, s, checked ? &r->val : NULL);
    tt_cpu_usage(u1);
    if (s > r->step0) { /* the first step warms the caches and MPI's connections */
        for (int i = 0; i < TT_CPU_N; i++)
            r->cpu[i] += u1[i] - u0[i];
        r->cpu_steps++;
    }
    r->clock_seconds += st.seconds;
    tt_comm_accumulate(&r->traffic, &before, tt_comm_stats_get());
    /* A spot check compares weights and moments right after its step; its
     * broadcasts are the oracle's, not training's (outside the traffic
     * counted above, as --validate's comparison at the end of the run). */
    if (r->spot && r->have_val && s == r->spot_last)
        tt_validate_final(&r->val, &r->model);
    tt_bubble_add(&r->bubbles, &r->pipe);
    /* Both are all-reduced, so every rank stops here together. The norm's
     * sum of squares is a double, so it is non-finite only where a gradient
     * is (inf or NaN, with a finite loss), and this step's update has
     * already spread that into the weights: stop before a save keeps them. */
    if (!isfinite(st.loss) || !isfinite(st.grad_norm)) {
        run_progress_end(r);
        /* The first step of a resumed run trains the checkpoint's weights
         * unchanged by this run: they, not the rate, may be the cause. */
        char cause[400] = "try a lower --lr";
        if (s == r->step0 && r->rc.resume)
            snprintf(cause, sizeof cause, "the first step from checkpoint '%s', whose weights "
                     "may be the cause; or try a lower --lr", r->rc.resume);
        if (g->world_rank == 0)
            fprintf(stderr, "tiny_transformer: %s became %g at step %ld (%s%s)\n",
                    isfinite(st.loss) ? "the gradient norm" : "loss",
                    isfinite(st.loss) ? st.grad_norm : st.loss, s,
                    isfinite(st.loss) ? "some gradient is inf or NaN; " : "", cause);
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
        run_progress_end(r);
        tt_interrupt_saving(s + 1);
        if (tt_run_save(rc, &r->model, g, s + 1, rc->save, &e)) /* agreed by every rank */
            return fail_with(r, &e, TT_EXIT_RUNTIME);
        tt_interrupt_saved(s + 1);
        SAY("saved checkpoint '%s' at step %ld\n", rc->save, s + 1);
    }
    return 0;
}

static int run_steps(tt_run *r)
{
    const tt_run_config *rc = &r->rc;
    /* A resumed run whose checkpoint is at its end already trains nothing,
     * and has nothing to draw (tt_config_check refuses --steps 0 with them). */
    const int trains = r->end > r->step0;
    char which[64];
    const int pictures = tt_pictures_named(rc, which, sizeof which);
    if (!trains && pictures > 0)
        SAY("checkpoint '%s' is at step %ld, where this run ends: no step to show, so %s "
            "write%s nothing\n", rc->resume, r->step0, which, pictures > 1 ? "" : "s");
    const int traced = trains && (rc->trace || rc->timeline);
    /* The spot check's second step: the last, or, when the last two steps
     * are traced, the one before them, so the picture shows the training. */
    r->spot_last = r->end - 1;
    if (traced && r->end - 3 > r->step0)
        r->spot_last = r->end - 3;
    double t_start = tt_now();
    run_progress_begin(r);
    for (long s = r->step0; s < r->end; s++) {
        tt_interrupt_step(s);
        if (traced && s == (r->end - 2 > r->step0 ? r->end - 2 : r->step0))
            tt_trace_begin(r->g);
        int status = run_one_step(r, s);
        if (status) {
            run_progress_end(r);
            return status;
        }
    }
    run_progress_end(r);
    tt_interrupt_finished();
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
    if (g->pp > 1 && r->bubbles.n > 0)
        tt_bubble_report(&r->bubbles, &r->pipe, g);
    if (rc->explain)
        tt_explain_step(&r->pipe, g);
    const int trained = r->end > r->step0;
    double ev = trained ? r->final_eval : tt_eval_loss(&r->pipe, &r->corpus);
    if (trained)
        SAY("trained steps %ld..%ld in %.1f s (wall clock): loss %.4f -> %.4f", r->step0,
            r->end - 1, r->seconds, r->first_loss, r->last_loss);
    else if (!rc->resume) /* nothing before it to be at: --steps 0 */
        SAY("no steps to train (--steps %ld)", rc->steps);
    else
        SAY("no steps to train (already at step %ld%s)", r->step0,
            r->step0 >= rc->steps ? ", the run's end; --steps N trains on to step N" : "");
    if (!isnan(ev))
        SAY("; eval loss %.4f on %d held-out sequences", ev,
            tt_eval_windows(&r->corpus, rc->model.T, rc->eval_windows));
    SAY("\n");
    if (r->cpu_steps > 0) {
        /* summed over all ranks: what the machine's cores did for a step */
        tt_allreduce(g, TT_GROUP_OTHER, r->cpu, TT_CPU_N, MPI_DOUBLE, MPI_SUM);
        const double per = 1.0 / (double)r->cpu_steps;
        SAY("cores (wall clock), a training step on %s%d rank%s (steps %ld..%ld): CPU %.1f ms "
            "user + %.1f ms kernel; %.0f context switches (%.0f waiting, %.0f preempted)\n",
            g->world_size > 2 ? "all " : "", g->world_size, g->world_size > 1 ? "s" : "",
            r->step0 + 1, r->end - 1, r->cpu[TT_CPU_USER] * per * 1e3,
            r->cpu[TT_CPU_KERNEL] * per * 1e3,
            (r->cpu[TT_CPU_WAITS] + r->cpu[TT_CPU_PREEMPTED]) * per, r->cpu[TT_CPU_WAITS] * per,
            r->cpu[TT_CPU_PREEMPTED] * per);
        /* the cores that lent themselves at a step's end (src/comm/cores.c) */
        int lend[2] = {tt_cores_lending(), (int)tt_cores_lent()};
        tt_allreduce(g, TT_GROUP_OTHER, lend, 2, MPI_INT, MPI_SUM);
        if (lend[0] > 0)
            SAY("cores: a core whose ranks were done with their step lent itself to the ranks "
                "still at work %d time%s in %ld steps (TT_LEND_CORES=0: never)\n",
                lend[1], lend[1] == 1 ? "" : "s", r->end - r->step0);
        /* rank 0 watches its host's cores (a job on one host) */
        double gave = 0.0, watched = 0.0;
        if (tt_cores_slice_watch(&gave, &watched) && gave > 0.0)
            SAY("cores: other programs kept these cores busy for %.1f of the run's %.1f s so "
                "far, and the ranks ran on the system's time slice then, not the longer one "
                "(waking ranks wait less behind those programs)\n", gave, watched);
    }
    if (trained && tt_vclock_mode() == TT_CLOCK_VIRTUAL) {
        const double per = r->clock_seconds / (double)(r->end - r->step0);
        const tt_cluster *c = tt_vclock_cluster();
        const double mfu = run_mfu(r, per);
        if (per > 0)
            SAY("virtual time on %s: %.2f ms per step, %.0f tokens/s", c->name, per * 1e3,
                rc->batch * (double)rc->model.T / per);
        else
            SAY("virtual time on %s: 0 ms per step (every cost in it is 0)", c->name);
        if (!isnan(mfu))
            SAY(", MFU %.1f%% of its FP32 peak", 100 * mfu);
        SAY("\n");
    }
    /* A failed check's verdict is on stdout with its figures; stderr has one
     * of them in one line too (the oracle's, else the first), for whatever
     * reads the run's errors alone. */
    const char *failed = NULL;
    if (g->tp > 1) {
        int same = tt_tp_replicated_identical(g, &r->model.P);
        SAY("TP copies of the replicated tensors bit-identical: %s\n", same ? "yes" : "NO");
        if (!same)
            failed = "the TP copies of the replicated tensors are not bit-identical";
    }
    if (g->dp > 1) {
        int same = tt_dp_replicas_identical(g, &r->model.P);
        if (r->model.P.z.stage >= 3)
            SAY("DP replicas: none to compare (ZeRO-3 shards the weights too; the oracle checks "
                "the pieces)\n");
        else
            SAY("DP replicas bit-identical (%s): %s\n",
                r->model.P.z.stage ? "weights; ZeRO shards the Adam moments"
                                   : "weights and Adam moments",
                same ? "yes" : "NO");
        if (!same && !failed)
            failed = "the DP replicas are not bit-identical";
    }
    if (rc->report_memory)
        tt_report_memory(stdout, g);
    if (rc->report_shards)
        tt_report_shards(stdout, g, &r->model);
    if ((g->world_size > 1 || rc->report_comm) &&
        !tt_report_comm(g->world_rank == 0 ? stdout : NULL, rc, g, &r->model, &r->traffic,
                        r->end - r->step0, rc->report_comm) &&
        !failed)
        failed = "a GPU's traffic differs from its formula (the communication table says which)";
    if (r->have_val && r->val.steps > 0) {
        if (rc->validate)
            tt_validate_final(&r->val, &r->model);
        if (!tt_validate_report(&r->val, stdout)) /* the oracle's verdict comes first */
            failed = "validation FAILED: the sharded run does not match the unsharded one (the "
                     "validation table says where)";
    }
    if (failed && g->world_rank == 0) {
        fflush(stdout);
        fprintf(stderr, "tiny_transformer: %s\n", failed);
    }
    return failed ? TT_EXIT_RUNTIME : 0;
}

/* Collective over the world: the pipeline's forward with its transfers, the
 * TP max-loc and the PP broadcast of each byte, ZeRO-3's gathers (every
 * replica runs it; rank 0 prints). */
static void run_sample(tt_run *r)
{
    const tt_run_config *rc = &r->rc;
    char *out = tt_malloc(strlen(rc->prompt) + (size_t)rc->sample_len + 2);
    size_t n = tt_generate(&r->pipe, rc->prompt, rc->sample_len, out);
    if (r->g->world_rank == 0)
        tt_sample_print(stdout, out, n);
    free(out);
}

/* The checkpoint first, before anything that can fail (a trace path, a
 * report), so none of them can lose the run's training; it is announced
 * where it always was, after the reports. */
static int run_end(tt_run *r)
{
    const tt_run_config *rc = &r->rc;
    tt_err e;
    if (rc->save) {
        tt_interrupt_saving(r->end);
        if (tt_run_save(rc, &r->model, r->g, r->end, rc->save, &e)) /* agreed */
            return fail_with(r, &e, TT_EXIT_RUNTIME);
        tt_interrupt_saved(r->end);
    }
    int traced_ok = 1;
    if (r->gathered) {
        r->gathered = 0; /* the writer frees the events */
        traced_ok = !tt_trace_write_gathered(r->g, r->ev, r->ev_counts, rc->trace,
                                             rc->timeline, r->end - 1);
    }
    int status = traced_ok ? run_reports(r) : TT_EXIT_RUNTIME;
    if (rc->save)
        SAY("saved checkpoint '%s'\n", rc->save);
    if (traced_ok && rc->plot && r->end > r->step0) {
        snprintf(r->curve.name, sizeof r->curve.name, "this run (tp %d pp %d dp %d)", r->g->tp,
                 r->g->pp, r->g->dp);
        int failed = r->g->world_rank == 0 && tt_plot_write_svg(rc->plot, &r->curve, 1, &e);
        if (tt_agree_error(r->g, failed, &e))
            return fail_with(r, &e, TT_EXIT_RUNTIME);
        SAY("wrote plot '%s'\n", rc->plot);
    }
    if (traced_ok && rc->sample_len > 0)
        run_sample(r);
    return status;
}

static int run_free(tt_run *r, int status)
{
    tt_plot_free(&r->curve);
    /* Every row was flushed and a failed one said so at once; fclose
     * reports only its own flush. */
    if (r->log) {
        int quiet = r->log_failed, failed = quiet || ferror(r->log) != 0, why = 0;
        if (fclose(r->log) != 0 && !failed) {
            failed = 1;
            why = errno;
        }
        if (failed && !quiet)
            fprintf(stderr, "tiny_transformer: cannot write log '%s': %s\n", r->rc.log,
                    why ? strerror(why) : "a write failed");
        if (failed && status == 0)
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

/* --plot OUT.svg a.csv b.csv: the logs' curves overlaid, no training. Rank 0
 * reads and writes; every rank leaves with its verdict. */
static int run_plot_logs(const tt_run_config *rc, const tt_grid *g)
{
    tt_err e;
    int failed = 0;
    if (g->world_rank == 0) {
        tt_plot_series s[TT_MAX_PLOT_LOGS];
        int n = 0;
        failed = tt_config_outputs_check(rc, &e) != 0;
        for (; n < rc->plot_nlogs && !failed; n++)
            if (tt_plot_read_csv(rc->plot_logs[n], &s[n], &e)) {
                failed = 1;
                break;
            }
        if (!failed)
            failed = tt_plot_write_svg(rc->plot, s, n, &e) != 0;
        for (int i = 0; i < n; i++)
            tt_plot_free(&s[i]);
    }
    if (tt_agree_error(g, failed, &e)) {
        if (g->world_rank == 0)
            fprintf(stderr, "tiny_transformer: %s\n", e.msg);
        return TT_EXIT_RUNTIME;
    }
    if (g->world_rank == 0)
        printf("wrote plot '%s' of %d log%s\n", rc->plot, rc->plot_nlogs,
               rc->plot_nlogs == 1 ? "" : "s");
    return 0;
}

int tt_run_main(const tt_run_config *rc, const tt_grid *g)
{
    if (rc->plot_nlogs > 0)
        return run_plot_logs(rc, g);
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
    tt_interrupt_install(g->world_rank == 0, rc->save, rc->save_every, rc->steps, rc->resume,
                         r->step0);
    int status = tt_run_setup(r);
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

