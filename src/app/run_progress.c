/* run_progress.c - what a run says while it trains: the step lines (about
 * ten, or one updating line on a terminal), the --log CSV's rows, and the
 * MFU both carry (run_internal.h). */
#include "app/run_internal.h"

#include <unistd.h> /* isatty, ftruncate */

/* Model FLOPs utilisation of the modelled cluster: the model's FLOPs of a
 * step (tt_model_flops: Narayanan et al.'s count) over what the step's GPUs
 * could do at FP32 peak in that (virtual) time. NAN under --clock wall. */
double run_mfu(const tt_run *r, double seconds)
{
    const tt_cluster *c = tt_vclock_cluster();
    /* Fixed chunk costs (tests, labs) are not FLOPs at a rate: no MFU. */
    if (tt_vclock_mode() == TT_CLOCK_WALL || !(seconds > 0) || tt_cluster_fixed(c))
        return NAN;
    const double flops = tt_model_flops(&r->rc.model, r->rc.batch);
    return flops / (seconds * r->g->world_size * c->peak_flops_fp32);
}

/* Ends the terminal's updating step line, if one is on the screen, so that
 * what follows starts on a line of its own. */
void run_progress_end(tt_run *r)
{
    if (r->pending) {
        SAY("\n");
        fflush(stdout);
        r->pending = 0;
    }
}

/* How many step lines a run prints: every one under --verbose; otherwise
 * about ten (the first, the last, every tenth of the run, each eval), so the
 * tables after training are not pushed off the screen by 200 lines; on a
 * terminal the other steps still show, one over the other, on one updating
 * line. --log keeps every step in its CSV either way. */
void run_progress_begin(tt_run *r)
{
    const long n = r->end - r->step0;
    r->show_every = r->rc.verbose || n <= 10 ? 1 : (n + 9) / 10;
    r->tty = !r->rc.verbose && !r->rc.quiet && r->g->world_rank == 0 && isatty(STDOUT_FILENO) &&
             !tt_launched();
    r->pending = 0;
    if (r->show_every > 1 && !r->rc.quiet)
        SAY("a step line every %ld steps (--verbose: every step; --log FILE: every step in a "
            "CSV)\n", r->show_every);
}

/* Whether the oracle checks step s: every step under --validate, else the
 * spot check's first and last steps. */
int run_step_checked(const tt_run *r, long s)
{
    return r->have_val && (r->rc.validate || s == r->step0 || s == r->spot_last);
}

/* The per-step line and the CSV row: time, tokens/s and MFU on the clock
 * figures use (virtual by default), and the wall clock beside them. */
void run_log_step(tt_run *r, long s, const tt_step_stats *st, double ev)
{
    const tt_run_config *rc = &r->rc;
    double tok_s = (double)rc->batch * rc->model.T / st->seconds;
    double mfu = run_mfu(r, st->seconds);
    const int shown = s == r->step0 || s == r->end - 1 || !isnan(ev) ||
                      (s - r->step0 + 1) % r->show_every == 0;
    if (!rc->quiet && r->g->world_rank == 0 && (shown || r->tty)) {
        char line[256];
        size_t n = 0;
        n += (size_t)snprintf(line + n, sizeof line - n,
                              "step %5ld/%ld | loss %.4f | lr %.3e | grad norm %.4f | ", s,
                              rc->steps, st->loss, st->lr, st->grad_norm);
        char tok[24] = "       -"; /* no rate for a step of no time (fixed costs of 0) */
        if (st->seconds > 0)
            snprintf(tok, sizeof tok, "%8.0f", tok_s);
        if (tt_vclock_mode() == TT_CLOCK_WALL) {
            n += (size_t)snprintf(line + n, sizeof line - n, "%7.1f ms wall | %s tok/s wall",
                                  st->seconds * 1e3, tok);
            /* A checked step's oracle is left out of its time (the log's
             * ms); the whole step (the log's wall_ms) is said beside it. */
            if (run_step_checked(r, s) && st->wall_seconds - st->seconds > 5e-5 && n < sizeof line)
                n += (size_t)snprintf(line + n, sizeof line - n, " | %.1f ms with the oracle",
                                      st->wall_seconds * 1e3);
        }
        else if (isnan(mfu))
            n += (size_t)snprintf(line + n, sizeof line - n, "%7.2f ms | %s tok/s | wall %6.1f ms",
                                  st->seconds * 1e3, tok, st->wall_seconds * 1e3);
        else
            n += (size_t)snprintf(line + n, sizeof line - n,
                                  "%7.2f ms | %s tok/s | MFU %4.1f%% | wall %6.1f ms",
                                  st->seconds * 1e3, tok, 100 * mfu, st->wall_seconds * 1e3);
        if (!isnan(ev) && n < sizeof line)
            snprintf(line + n, sizeof line - n, " | eval %.4f", ev);
        if (r->tty) /* over the previous line; \033[K clears what it leaves */
            printf("\r%s\033[K%s", line, shown ? "\n" : "");
        else
            printf("%s\n", line);
        r->pending = r->tty && !shown;
        fflush(stdout);
    }
    if (rc->plot && r->g->world_rank == 0)
        tt_plot_add(&r->curve, s, st->loss, ev);
    if (r->log && !r->log_failed) {
        fprintf(r->log, "%ld,%.9g,%.9g,%.9g,%.6f,", s, st->loss, st->lr, st->grad_norm,
                st->seconds * 1e3);
        if (st->seconds > 0) /* (empty, as the MFU is where there is none) */
            fprintf(r->log, "%.1f", tok_s);
        fprintf(r->log, ",");
        if (!isnan(ev))
            fprintf(r->log, "%.9g", ev);
        fprintf(r->log, ",");
        if (!isnan(mfu))
            fprintf(r->log, "%.6f", mfu);
        fprintf(r->log, ",%.3f,%s\n", st->wall_seconds * 1e3,
                tt_vclock_mode() == TT_CLOCK_WALL ? "wall" : "virtual");
        /* A run killed later leaves whole rows. A full disk is told when
         * it happens (rank 0 alone writes the log, so the other ranks learn
         * of it from the status agreed at the end); the checkpoint matters
         * more than the rows, so the training goes on. */
        if (fflush(r->log) == 0) {
            r->log_whole = ftello(r->log);
        } else {
            /* cut the part of a row that fitted: the log stays a CSV */
            int why = errno;
            if (ftruncate(fileno(r->log), (off_t)r->log_whole) != 0) {
                /* the row's start stays; the message says where it stopped */
            }
            errno = why;
            r->log_failed = 1;
            run_progress_end(r); /* not glued to the terminal's updating line */
            fprintf(stderr, "tiny_transformer: cannot write log '%s' at step %ld: %s (the run "
                            "trains on without it, and ends with status 1)\n",
                    r->rc.log, s, strerror(errno));
        }
    }
}
