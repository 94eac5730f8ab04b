/* train.c - one optimizer step of design.md section 5: each DP replica runs its
 * share of the sampler's global batch through the pipeline in micro-batches,
 * the gradients are summed over the DP group, then global-norm clipping and
 * AdamW on the warm-up + cosine schedule (the --validate oracle, when given,
 * checks the gradients and follows the update). */
#include "tt/train/train.h"
#include "tt/comm/comm.h"
#include "tt/comm/cores.h"
#include "tt/comm/watchdog.h"
#include "tt/core/events.h"
#include "tt/core/vclock.h"
#include "tt/parallel/data_parallel.h"
#include "tt/train/inject.h"
#include "tt/train/optim.h"

#include <math.h>

/* What a value computed on the last stage (identical on its TP ranks)
 * adds to its sum over the world: v on TP rank 0 of the last stage, so each
 * DP replica's share is counted once, 0 elsewhere. */
static double last_stage_share(const tt_grid *g, const tt_model *m, double v)
{
    return g->tp_rank == 0 && m->sh.last_stage ? v : 0.0;
}

/* The step's loss and its global gradient norm, in one all-reduce of two
 * numbers: every rank meets the others once at a step's end instead of
 * twice (on shared cores each meeting costs every rank a turn on its core).
 * Element by element the sum is the one two all-reduces would make, in
 * rank order: the same bits.
 *
 * The loss: this rank's share of the global mean, which the last stage's TP
 * rank 0 of each DP replica holds (identical on its TP ranks, counted once).
 *
 * The norm: after the DP sum every replica holds the whole gradient of its
 * shards, so one replica (dp 0) counts; across it the TP ranks' slices and
 * the pipeline stages' tensors add up, and the replicated tensors (identical
 * on every TP rank) are counted once, by TP rank 0: the norm
 * torch.nn.utils.clip_grad_norm_ sees on the unsharded model. Under ZeRO
 * each replica holds the sum of its own shard only, and counts that. */
static void loss_and_norm(const tt_model *m, const tt_grid *g, double loss, double *sum_loss,
                          double *norm)
{
    const int one = !g || g->world_size == 1;
    const double t0 = tt_clock_now();
    double v[2] = {loss, tt_grad_sumsq(&m->P, one ? 0 : g->dp_rank, one ? 0 : g->tp_rank)};
    /* The sum of squares is the optimizer's compute; the all-reduce after it
     * is communication (its own event, through comm's observer), where a
     * GPU may wait long for the others (for the last stage, at the loss):
     * not drawn as optimizer work. */
    tt_events_add(TT_EV_OPTIMIZER, "gradient norm", NULL, t0, tt_clock_now(), -1, -1, -1, 0);
    if (!one) {
        v[0] = last_stage_share(g, m, v[0]);
        tt_allreduce_named(g, TT_GROUP_OTHER, "loss and norm all-reduce", v, 2,
                           MPI_DOUBLE, MPI_SUM);
    }
    *sum_loss = v[0];
    *norm = sqrt(v[1]);
}

/* A value computed on the ranks of the last stage (identical on its TP
 * ranks), summed over the DP replicas: each replica's share counted once.
 * The eval's loss (a training step's travels with its gradient norm):
 * every rank waits here for the last stage, so the trace names it. */
double tt_sum_from_last_stage(const tt_grid *g, const tt_model *m, double v)
{
    if (!g)
        return v;
    v = last_stage_share(g, m, v);
    tt_allreduce_named(g, TT_GROUP_OTHER, "loss all-reduce", &v, 1, MPI_DOUBLE, MPI_SUM);
    return v;
}

/* The oracle's work inside a step (--validate, or a spot-checked step) runs
 * with the clock paused: no time for the modelled GPUs, and no events. On
 * the wall clock (--clock wall) it still takes time, so one event covers it
 * and a wall trace shows what fills the gap (under the virtual clock it
 * lasts 0 s and is not recorded). oracle_end returns that time, which the
 * step leaves out of its own: checking a step must not make it look slower
 * than it trained (the other ranks wait for rank 0's reference inside the
 * oracle too, in tt_validate_grads' broadcast, so each leaves its wait out). */
static double oracle_begin(void)
{
    const double t0 = tt_clock_now();
    tt_vclock_pause();
    return t0;
}

static double oracle_end(double t0)
{
    tt_vclock_resume(); /* first: the log records nothing while paused */
    const double t1 = tt_clock_now();
    if (t1 <= t0)
        return 0.0;
    tt_events_add(TT_EV_PAUSED, "oracle (paused clock)", NULL, t0, t1, -1, -1, -1, 0);
    return t1 - t0;
}

tt_step_stats tt_train_step(tt_pipe *pipe, const tt_corpus *c, long step, tt_validator *val)
{
    tt_model *m = pipe->m;
    const tt_run_config *rc = pipe->rc;
    const tt_grid *g = pipe->g;
    tt_step_stats st = {0};
    /* The virtual clocks tick from here to the end of the step on every rank
     * (tt/core/vclock.h); the oracle's work in between is paused. */
    const double w0 = tt_now();
    tt_vclock_run(1);
    const double t0 = tt_clock_now();
    const float dloss = 1.0f / (float)((double)rc->batch * rc->model.T); /* global mean */
    double oracle = 0.0; /* the oracle's time in this step (wall clock only) */

    tt_cores_step_begin(); /* its own core back, if another core's ranks lent it theirs */
    if (!tt_fault_active(TT_FAULT_NO_ZERO_GRAD)) /* a planted fault (--inject-bug) */
        tt_params_zero_grads(&m->P);
    tt_events_set_step((int)step);
    /* This replica's micro-batches, in the order the schedule says. */
    double loss = tt_pipe_train(pipe, c, step, dloss);
    tt_cores_step_done(); /* the last rank of a core lends it to the late (tt/comm/cores.h) */
    if (g) /* waits for the buckets the backward started (the DP overlap) */
        tt_dp_sync_grads(g, &m->P, rc->dp_bucket);
    tt_inject_after_backward(m, g); /* a planted fault (--inject-bug), or nothing */
    loss_and_norm(m, g, loss / rc->batch, &st.loss, &st.grad_norm);
    if (val) {
        const double o = oracle_begin();
        tt_validate_grads(val, m, c, step, st.loss);
        tt_validate_norm(val, m, step, st.grad_norm);
        oracle += oracle_end(o);
    }
    const double t_opt = tt_clock_now();
    st.lr = tt_lr_at(&rc->optim, step, rc->steps);
    tt_inject_around_optimizer(m, g, 0); /* a planted fault (--inject-bug), or nothing */
    tt_adamw_step(&m->P, &rc->optim, st.lr, step + 1, tt_clip_coef(rc->optim.clip, st.grad_norm));
    tt_events_add(TT_EV_OPTIMIZER, "optimizer step", NULL, t_opt, tt_clock_now(), -1, -1, -1, 0);
    if (g) /* ZeRO: each replica updated its own shard; all of them take all */
        tt_zero_gather_weights(g, &m->P);
    tt_inject_around_optimizer(m, g, 1);
    if (val) {
        const double o = oracle_begin();
        tt_validate_update(val, step);
        oracle += oracle_end(o);
    }
    /* The step ends when its slowest GPU is done: every clock moves there, so
     * the next step starts together (uncounted: clocks only). */
    if (g && tt_vclock_ticking()) {
        tt_watch_purpose("clocks' maximum that ends the step", 0, 0);
        tt_vclock_set(tt_clock_max(g, TT_GROUP_OTHER, tt_vclock_now()));
    }
    st.seconds = tt_clock_now() - t0 - oracle;
    st.wall_seconds = tt_now() - w0;
    tt_vclock_run(0);
    return st;
}

