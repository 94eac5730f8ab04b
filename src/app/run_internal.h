/* run_internal.h - (private) the run state shared by run.c, run_setup.c
 * and run_progress.c, and the two ways they report a failure. */
#ifndef TT_APP_RUN_INTERNAL_H
#define TT_APP_RUN_INTERNAL_H

#include "tt/app/run.h"
#include "tt/app/flags.h"
#include "tt/app/preflight.h"
#include "tt/comm/comm.h"
#include "tt/core/memory.h"
#include "tt/core/outpath.h"
#include "tt/core/vclock.h"
#include "tt/parallel/data_parallel.h"
#include "tt/show/banner.h"
#include "tt/show/plot.h"
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
    long show_every;           /* a step line every this many steps (1: all) */
    int tty;                   /* stdout is a terminal: one updating line */
    int pending;               /* that line is on the screen, not yet ended */
    FILE *log;                 /* --log, rank 0 */
    int log_failed;            /* a row could not be written: said at once, no more rows */
    long long log_whole;       /* the log's length up to its last whole row */
    tt_plot_series curve;      /* --plot: this run's losses, rank 0 */
    tt_event *ev;              /* the traced steps' events (rank 0), gathered */
    int *ev_counts;
    int gathered;              /* ev is ours to free */
    tt_comm_stats traffic;     /* of the training steps only */
    double first_loss, last_loss, final_eval, seconds; /* seconds: wall clock */
    double clock_seconds;     /* the steps' time on the clock figures use */
    double cpu[TT_CPU_N];      /* this rank's cores used by the training steps
                                  after the first (wall-clock resources) */
    long cpu_steps;
} tt_run;

#define SAY(...) do { if (r->g->world_rank == 0) printf(__VA_ARGS__); } while (0)


/* Rank 0 prints the one line; the caller returns the same status everywhere. */
static inline int fail_with(const tt_run *r, const tt_err *e, int status)
{
    if (r->g->world_rank == 0)
        fprintf(stderr, "tiny_transformer: %s\n", e->msg);
    return status;
}

/* A failure that may be this rank's alone: agreed first, then reported once. */
static inline int agreed(const tt_run *r, int failed, tt_err *e, int status)
{
    return tt_agree_error(r->g, failed, e) ? fail_with(r, e, status) : 0;
}


/* Everything before the first step (run_setup.c); 0 or an exit status. */
int tt_run_setup(tt_run *r);

/* run_progress.c: the MFU of a step of that many (virtual) seconds (NAN
 * where there is none); the step lines begun, ended (a terminal's updating
 * line finished) and one step's line and --log row. */
double run_mfu(const tt_run *r, double seconds);
void run_progress_begin(tt_run *r);
void run_progress_end(tt_run *r);
void run_log_step(tt_run *r, long s, const tt_step_stats *st, double ev);
/* Whether the oracle checks step s (--validate: every one; the spot check:
 * the first and the chosen last). */
int run_step_checked(const tt_run *r, long s);

#endif
