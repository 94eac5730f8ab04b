/* tt/train/validate.h - the oracle behind --validate: "the sharded run is the
 * unsharded run".
 *
 * With --validate, rank 0 also trains the unsharded reference (one virtual GPU, the whole
 * model, the whole global batch in one micro-batch, the same hyper-parameters).
 * Each step starts the reference from the sharded run's weights (gathered to
 * rank 0), so what is compared is one step of each from the same point and
 * the errors cannot grow with the length of the run; the reference keeps its
 * own Adam moments. Each step rank 0 broadcasts the reference gradients; every
 * rank compares its own slices, and the errors are summed (as squares) over the
 * distinct slices to give each global tensor's relative L2 error. After the last
 * step the weights and Adam moments are compared the same way. Without
 * --validate, a run on several GPUs spot-checks its first and last steps the
 * same way, each from the sharded run's weights and moments: every tensor is
 * compared, at the cost of two reference steps.
 *
 * Tolerances (relative L2 error of a whole tensor; the reason for each is in
 * doc/validation.md): the sharded run adds the same float32 numbers in a
 * different order (per replica, per micro-batch, per shard), so it differs from
 * the reference only by rounding. */
#ifndef TT_VALIDATE_H
#define TT_VALIDATE_H

#include <stdio.h>
#include "tt/core/config.h"
#include "tt/core/data.h"
#include "tt/comm/grid.h"
#include "tt/model/model.h"

#define TT_TOL_LOSS 1e-5   /* relative, per step */
#define TT_TOL_GRAD 1e-4   /* relative L2 per tensor, per step */
#define TT_TOL_PARAM 1e-4  /* relative L2 per tensor, after the last step */
#define TT_TOL_MOMENT 1e-3 /* Adam m and v, relative L2, after the last step */
/* A weight whose Adam denominator sqrt(v-hat) is below this many eps at the
 * last checked step is compared through its gradient and moments, not its value
 * (validate.c, mark_rounding, says why). */
#define TT_ROUNDING_EPS 10.0

typedef struct {
    const tt_grid *g;
    const tt_run_config *rc;
    tt_params *tables;   /* rank 0: every rank's shard table (not allocated) */
    int *counts, *displs;/* rank 0: floats each rank sends when weights are gathered */
    float *gathered;     /* rank 0: receive buffer */
    float *pack;         /* this rank's counted slices, packed */
    int npack;
    int kinds;           /* arrays gathered: 1 (weights) or 3 (with Adam m, v) */
    int every_step;      /* 1: --validate; 0: a spot check of chosen steps */
    tt_model ref;        /* the unsharded model: rank 0 trains it; the other
                            ranks hold only its parameters, to receive the
                            broadcasts */
    int n;               /* global tensors */
    int *local_of;       /* global tensor -> index in the sharded model, or -1 */
    double *grad_rel, *grad_abs;      /* worst over steps, per global tensor */
    double *w_rel, *m_rel, *v_rel, *w_abs; /* after the last step */
    unsigned char *rounding; /* [ref total] 1: a weight whose last checked Adam
                                step rounding decided (TT_ROUNDING_EPS), left
                                out of the weights' errors; marked by rank 0
                                in tt_validate_final, broadcast */
    long rounding_n;     /* rank 0: how many */
    double loss_rel;     /* worst over steps */
    double norm_rel;     /* the clipping norm's relative error, worst over steps */
    long steps;          /* steps checked */
    long first_checked, last_checked;
    long first_bad_step;
    char first_bad[96];  /* first tensor (or "loss") beyond tolerance */
    double first_bad_err, first_bad_tol; /* its relative error and tolerance */
    double first_bad_mine; /* this rank's own copy of it: its error relative to
                              the whole tensor's size (for the loss: the worst
                              of this rank's gradient slices at that step) */
} tt_validator;

/* Collective. Builds the reference with the run's seed (rank 0). specs holds
 * the shard spec of every world rank (rank 0 uses them to place the slices).
 * every_step: the reference follows the whole run (its own Adam moments);
 * else it is a spot check: only the steps passed to tt_validate_grads are
 * checked, each from the sharded run's weights and moments. */
void tt_validate_init(tt_validator *v, const tt_grid *g, const tt_run_config *rc,
                      const tt_model *sharded, const tt_shard_spec *specs, int every_step);
void tt_validate_free(tt_validator *v);
/* Collective, after the sharded gradients are complete (and DP-summed), before
 * the update: runs the reference forward/backward on the global batch of
 * `step` and compares losses and gradients. */
void tt_validate_grads(tt_validator *v, const tt_model *sharded, const tt_corpus *c, long step,
                       double sharded_loss);
/* Collective in effect (every rank the same verdict, no communication),
 * after tt_validate_grads of `step`: the global gradient norm the sharded run
 * clips with (the same on every rank) against the norm of the reference's
 * gradients, which every rank holds. A wrong norm changes the run only when
 * clipping acts, but it is wrong in every step's log either way. */
void tt_validate_norm(tt_validator *v, const tt_model *sharded, long step, double norm);
/* Rank 0: the reference's own clipping and AdamW update for `step`. */
void tt_validate_update(tt_validator *v, long step);
/* Collective, after the last step: weights and moments. */
void tt_validate_final(tt_validator *v, const tt_model *sharded);
/* Collective. Rank 0 prints the table and verdict; returns 1 if everything
 * is inside its tolerance. The verdict is broadcast so every rank returns the
 * same; a failure names the first quantity beyond tolerance and the GPU
 * whose copy of it is furthest off. */
int tt_validate_report(tt_validator *v, FILE *out);

#endif
