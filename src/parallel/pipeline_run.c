/* pipeline_run.c - the executor: runs this stage's checked action list
 * (tt/parallel/pipeline.h) for a training step with the model's chunk forward and
 * backward and MPI point-to-point transfers, and pushes a batch forward
 * through every chunk for eval and generation. The split of the blocks into
 * chunks and each rank's shard are in stage_split.c.
 *
 * Transfers follow the semantics the schedule checker proved deadlock-free:
 * sends are non-blocking (MPI_Isend from the send's own buffer, completed at
 * the end of the step) and receives block until the matching send arrives,
 * both on the pipeline communicator, whose ranks are the stage numbers. Each
 * message's tag names (direction, chunk, micro-batch), so a receive can only
 * match the transfer it is waiting for. Between two chunks of one stage (the
 * turn of zb-v's V) nothing travels and no send buffer is held: the receive
 * copies the activation from the producer's slot, and the backward writes
 * the gradient straight into the buffer the consumer reads.
 *
 * `pipe` is the executor; p is the number of stages (the grid's pp), K = p*v
 * the number of chunks, M the micro-batches per step. */
#include "tt/parallel/pipeline_run.h"
#include "tt/comm/comm.h"
#include "tt/comm/watchdog.h"
#include "tt/core/faults.h"
#include "tt/core/memory.h"
#include "tt/core/events.h"
#include "tt/core/vclock.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Everything the schedule needs, allocated before the first step: the
 * activation slots, blocks' activations and head's buffers for the most it
 * holds at once (tt_schedule_buffers; at least one of each per chunk, for
 * eval), and a buffer per transfer that is not received into a slot (sends
 * to another stage, and the gradients that arrive for a backward). */
static void allocate_for_list(tt_pipe *pipe)
{
    const tt_run_config *rc = pipe->rc;
    const size_t n = (size_t)tt_model_rows(pipe->m, pipe->mbs) * rc->model.C;
    tt_stage_buffers need;
    tt_schedule_buffers(&pipe->list, pipe->p, pipe->v, pipe->m->chunk_len, &need);
    for (int i = 0; i < pipe->list.n; i++) {
        const tt_action *a = &pipe->list.a[i];
        const int j = a->chunk / pipe->p, key = a->mb * pipe->v + j;
        if (tt_action_needs_buffer(a, pipe->stage)) {
            pipe->buf[i] = tt_mem_alloc(TT_MEM_COMM, n * sizeof(float),
                                        a->kind == TT_ACT_RECV_GRAD ? "a gradient to receive"
                                        : a->kind == TT_ACT_SEND_ACT ? "an activation to send"
                                                                     : "a gradient to send");
            pipe->buf_size = n * sizeof(float);
            if (a->kind == TT_ACT_RECV_GRAD)
                pipe->grad_in[key] = pipe->buf[i];
            if (a->kind == TT_ACT_SEND_GRAD)
                pipe->grad_out[key] = pipe->buf[i];
        }
    }
    /* A gradient sent to this stage itself (the V's turn, chunk k to k-1):
     * chunk k's backward writes it into chunk k-1's receive buffer. */
    for (int i = 0; i < pipe->list.n; i++) {
        const tt_action *a = &pipe->list.a[i];
        if (a->kind == TT_ACT_SEND_GRAD && a->peer == pipe->stage)
            pipe->grad_out[a->mb * pipe->v + a->chunk / pipe->p] =
                pipe->grad_in[a->mb * pipe->v + (a->chunk - 1) / pipe->p];
    }
    if (pipe->m->Bmax > 0)
        tt_slot_reserve(pipe->m, need.slots, need.blocks, need.heads);
}

int tt_pipe_init(tt_pipe *pipe, tt_model *m, const tt_run_config *rc, const tt_grid *g, tt_err *e)
{
    memset(pipe, 0, sizeof *pipe);
    pipe->m = m;
    pipe->rc = rc;
    pipe->g = g;
    pipe->p = g ? g->pp : 1;
    pipe->v = rc->virtual_stages;
    pipe->K = pipe->p * pipe->v;
    pipe->M = rc->micro_batches;
    pipe->stage = g ? g->pp_rank : 0;
    pipe->mbs = tt_micro_batch_size(rc, g ? g->dp : 1);
    pipe->kind = tt_pipe_kind(rc, pipe->p);
    if (tt_pipe_check_flags(rc, pipe->p, e) ||
        tt_schedule_validate_args(pipe->kind, pipe->p, pipe->M, pipe->v, e))
        return -1;
    /* Every transfer has its own tag (tag_of), 2 K M of them. MPI promises
     * only 32767; implementations give from 2^19 - 1 to 2^31 - 1 (MPICH
     * here 2^28 - 1), read at run time, less the four comm/collectives.c
     * keeps for its pair exchanges. */
    const long long tags = 2LL * pipe->K * pipe->M;
    const long long tag_ub = g ? tt_free_tags() : tags;
    if (tags > tag_ub)
        return tt_fail(e, "%d chunks x %d micro-batches need %lld pipeline message tags, more "
                          "than the %lld this MPI provides: use fewer micro-batches or chunks",
                       pipe->K, pipe->M, tags, tag_ub);
    /* Every rank builds every stage's list and checks them together, so a
     * wrong schedule stops all ranks with the same message before any work.
     * (tt_pipe_free releases what a failure leaves.) */
    pipe->all = tt_calloc((size_t)pipe->p, sizeof *pipe->all);
    for (int s = 0; s < pipe->p; s++)
        tt_schedule_build(&pipe->all[s], pipe->kind, pipe->p, pipe->M, pipe->v, s);
    /* A backward costs about twice a forward: the simulation with those
     * costs is the bubble the schedule implies for this model. */
    if (tt_schedule_check(pipe->all, pipe->p, pipe->M, pipe->v, 1.0, 2.0, &pipe->sim, e) ||
        tt_schedule_check_bound(pipe->kind, &pipe->sim, e))
        return -1;
    /* B and W apart need slots that keep B's output gradients. */
    pipe->split_w = tt_schedule_splits_w(pipe->kind);
    if (pipe->split_w != m->sh.split_w)
        return tt_fail(e, "internal: schedule %s %s the backward but the model's slots were "
                          "built %s the room for it", tt_schedule_name(pipe->kind),
                       pipe->split_w ? "splits" : "does not split",
                       m->sh.split_w ? "with" : "without");
    pipe->list = pipe->all[pipe->stage];
    const size_t nkeys = (size_t)pipe->M * pipe->v;
    pipe->held = tt_calloc(nkeys, sizeof *pipe->held);
    pipe->grad_in = tt_calloc(nkeys, sizeof *pipe->grad_in);
    pipe->grad_out = tt_calloc(nkeys, sizeof *pipe->grad_out);
    const int nl = pipe->list.n > 0 ? pipe->list.n : 1;
    pipe->local = tt_calloc((size_t)2 * pipe->K * pipe->M, sizeof *pipe->local);
    pipe->reqs = tt_calloc((size_t)nl, sizeof *pipe->reqs);
    pipe->buf = tt_calloc((size_t)nl, sizeof *pipe->buf);
    allocate_for_list(pipe);
    return 0;
}

void tt_pipe_free(tt_pipe *pipe)
{
    for (int s = 0; pipe->all && s < pipe->p; s++)
        tt_action_list_free(&pipe->all[s]);
    free(pipe->all);
    tt_sim_result_free(&pipe->sim);
    for (int i = 0; pipe->buf && i < pipe->list.n; i++)
        if (pipe->buf[i])
            tt_mem_free(TT_MEM_COMM, pipe->buf[i], pipe->buf_size);
    free(pipe->buf);
    free(pipe->held);
    free(pipe->grad_in);
    free(pipe->grad_out);
    free(pipe->local);
    free(pipe->reqs);
    memset(pipe, 0, sizeof *pipe);
}

enum { DIR_ACT = 0, DIR_GRAD = 1 };

/* A transfer's purpose for --watchdog (the chunk is its tag's, the receiver's). */
#define WHY_ACT "activation of micro-batch %d into chunk %d"
#define WHY_GRAD "gradient of micro-batch %d back into chunk %d"
#define WHY_FORWARD_ONLY "activation of a forward-only batch (eval, generation) into chunk %d"
#define WHY_WINDOW "clocks' maximum for the bubble window"

/* What a transfer of micro-batch mb into chunk `into` is for: the
 * watchdog's words if it hangs, and the trace's micro-batch, chunk and
 * cargo (the chunk is its tag's, the receiver's, on both ends). */
static void transfer_is(const char *why, const char *carries, int mb, int into)
{
    tt_watch_purpose(why, mb, into);
    tt_events_tag(mb, into, carries);
}

/* The tag of the transfer into (or out of) global chunk k for micro-batch mb. */
static int tag_of(const tt_pipe *pipe, int dir, int k, int mb)
{
    return (dir * pipe->K + k) * pipe->M + mb;
}

/* Posts a non-blocking send of n floats from the action's own buffer (the
 * buffer is not touched again until the step's sends are complete). To this
 * stage itself (the V's turn) the send has no buffer: src is left for the
 * receive under the tag. It lives until then: the producer's slot is held
 * until its backward, which waits for the receiver's gradient; the
 * gradient's src is the receive's own buffer. */
static void post_send(tt_pipe *pipe, int i, const float *src, size_t n, int dest, int tag)
{
    if (dest == pipe->stage) {
        pipe->local[tag] = src;
        return;
    }
    if (src != pipe->buf[i])
        memcpy(pipe->buf[i], src, n * sizeof(float));
    tt_isend(pipe->g, pipe->buf[i], (int)n, MPI_FLOAT, dest, tag, &pipe->reqs[pipe->nreq++]);
}

/* The matching receive: from another stage a blocking MPI receive, from this
 * one a copy of what post_send left (the checked list puts the send first),
 * none when it is already in place (the V's gradient). */
static void take(tt_pipe *pipe, float *dst, size_t n, int src, int tag)
{
    if (src != pipe->stage)
        tt_recv(pipe->g, dst, (int)n, MPI_FLOAT, src, tag);
    else if (dst != pipe->local[tag])
        memcpy(dst, pipe->local[tag], n * sizeof(float));
}

static void complete_sends(tt_pipe *pipe)
{
    tt_wait_all(pipe->nreq, pipe->reqs);
    pipe->nreq = 0;
}

/* Where a chunk's input lives in its slot (a chunk has at least one block). */
static float *slot_input(tt_slot *s) { return s->acts[0].x_in; }

/* What the actions of one training step share. */
typedef struct {
    const tt_corpus *c;
    long step;
    float dloss;
    int *in, *tg;  /* tokens and targets of the micro-batch at hand */
    size_t n;      /* floats in one micro-batch's activation (or its gradient) */
    double loss;   /* sum of (mean loss x sequences) over the micro-batches */
    int held;      /* (mb, chunk) pairs forwarded and not yet backwarded */
    const float *last_act_sent; /* the buffer of this step's previous activation send
                                   (to this stage itself: what it handed over) */
} step_state;

/* Runs action i of this stage's list. Chunk 0 reads the tokens and the last
 * chunk the targets, so those forwards sample the micro-batch: this DP
 * replica's share of the global batch, micro-batch a->mb of it. */
static void run_action(tt_pipe *pipe, int i, step_state *st)
{
    tt_model *m = pipe->m;
    const int T = pipe->rc->model.T, B = pipe->rc->batch, mbs = pipe->mbs;
    const tt_action *a = &pipe->list.a[i];
    const int j = a->chunk / pipe->p, key = a->mb * pipe->v + j;
    const int first = a->chunk == 0, last = a->chunk == pipe->K - 1;
    switch (a->kind) {
    case TT_ACT_RECV_ACT:
        pipe->held[key] = tt_slot_acquire(m, j, mbs);
        transfer_is(WHY_ACT, "activation", a->mb, a->chunk);
        take(pipe, slot_input(pipe->held[key]), st->n, a->peer,
             tag_of(pipe, DIR_ACT, a->chunk, a->mb));
        break;
    case TT_ACT_FWD:
        if (first)
            pipe->held[key] = tt_slot_acquire(m, j, mbs);
        if (first || last) {
            const int dp_rank = pipe->g ? pipe->g->dp_rank : 0, dp = pipe->g ? pipe->g->dp : 1;
            tt_sample_batch(st->c, st->step, B, dp_rank * (B / dp) + a->mb * mbs, mbs, T,
                            st->in, st->tg);
        }
        st->loss += tt_chunk_forward(m, pipe->held[key], st->in, last ? st->tg : NULL) * mbs;
        if (++st->held > pipe->peak_held)
            pipe->peak_held = st->held;
        break;
    case TT_ACT_SEND_ACT: {
        const float *x = pipe->held[key]->x_out;
        /* planted (--inject-bug stale-activation): a send buffer index off by
         * one, so the next stage gets the previous micro-batch's activation */
        if (st->last_act_sent && tt_fault_active(TT_FAULT_STALE_ACTIVATION))
            x = st->last_act_sent;
        transfer_is(WHY_ACT, "activation", a->mb, a->chunk + 1);
        post_send(pipe, i, x, st->n, a->peer, tag_of(pipe, DIR_ACT, a->chunk + 1, a->mb));
        st->last_act_sent = pipe->buf[i] ? pipe->buf[i] : x; /* to itself: no buffer */
        break;
    }
    case TT_ACT_RECV_GRAD:
        transfer_is(WHY_GRAD, "gradient", a->mb, a->chunk);
        take(pipe, pipe->grad_in[key], st->n, a->peer, tag_of(pipe, DIR_GRAD, a->chunk, a->mb));
        break;
    case TT_ACT_BWD:
        if (pipe->split_w) {
            /* B: the slot now also holds the output gradients W needs */
            tt_chunk_backward_input(m, pipe->held[key], last ? NULL : pipe->grad_in[key],
                                    st->dloss);
        } else {
            tt_chunk_backward(m, pipe->held[key], last ? NULL : pipe->grad_in[key], st->dloss);
            tt_slot_release(m, pipe->held[key]);
            pipe->held[key] = NULL;
            st->held--;
        }
        /* m->dres is overwritten by the next backward: into the send buffer */
        if (!first)
            memcpy(pipe->grad_out[key], m->dres, st->n * sizeof(float));
        break;
    case TT_ACT_W:
        tt_chunk_backward_weights(m, pipe->held[key]);
        tt_slot_release(m, pipe->held[key]);
        pipe->held[key] = NULL;
        st->held--;
        break;
    case TT_ACT_SEND_GRAD:
        transfer_is(WHY_GRAD, "gradient", a->mb, a->chunk - 1);
        post_send(pipe, i, pipe->grad_out[key], st->n, a->peer,
                  tag_of(pipe, DIR_GRAD, a->chunk - 1, a->mb));
        break;
    }
}

double tt_pipe_train(tt_pipe *pipe, const tt_corpus *c, long step, float dloss)
{
    const int T = pipe->rc->model.T, C = pipe->rc->model.C, mbs = pipe->mbs;
    /* With sequence parallelism a stage sends its rows of the residual
     * stream only: the next stage's TP rank of equal index holds the same. */
    step_state st = {.c = c, .step = step, .dloss = dloss, .n = (size_t)tt_model_rows(pipe->m, mbs) * C};
    /* planted (--inject-bug grad-accum): each micro-batch backpropagates its
     * own mean loss and the M results are summed, never divided by M */
    if (tt_fault_active(TT_FAULT_GRAD_ACCUM))
        st.dloss = dloss * (float)pipe->M;
    st.in = tt_malloc((size_t)mbs * T * sizeof(int));
    st.tg = tt_malloc((size_t)mbs * T * sizeof(int));
    /* Times on the clock figures use (tt/core/vclock.h): virtual unless
     * --clock wall. A cluster with fixed chunk costs (tests) charges them
     * here instead of the kernels' FLOPs. */
    const tt_cluster *cl = tt_vclock_cluster();
    const double fixed[3] = {cl->fixed_forward, cl->fixed_backward, cl->fixed_w};
    const int use_fixed = tt_cluster_fixed(cl);
    double t_start = tt_clock_now();
    double first = INFINITY, last = -INFINITY;
    pipe->busy_seconds = 0.0;
    pipe->peak_held = 0;
    for (int i = 0; i < pipe->list.n; i++) {
        const tt_action *a = &pipe->list.a[i];
        double t0 = tt_clock_now();
        tt_watch_context(step, a->mb);
        /* A TP collective in the trace names its compute's micro-batch and
         * chunk (a transfer its own: transfer_is) */
        tt_events_tag(a->mb, a->chunk, NULL);
        run_action(pipe, i, &st);
        tt_events_tag(-1, -1, NULL);
        tt_watch_purpose(NULL, 0, 0); /* left unused by a copy within this stage */
        const int compute = a->kind == TT_ACT_FWD || a->kind == TT_ACT_BWD || a->kind == TT_ACT_W;
        if (use_fixed && compute)
            tt_vclock_advance(fixed[a->kind == TT_ACT_FWD ? 0 : a->kind == TT_ACT_BWD ? 1 : 2]);
        double t1 = tt_clock_now();
        if (compute) {
            pipe->busy_seconds += t1 - t0;
            first = t0 < first ? t0 : first;
            last = t1 > last ? t1 : last;
            /* The trace and the timeline tell B and W apart by name. */
            const char *name = a->kind == TT_ACT_FWD ? "forward"
                               : a->kind == TT_ACT_W ? "W"
                               : pipe->split_w      ? "B"
                                                    : "backward";
            tt_events_add(a->kind == TT_ACT_FWD ? TT_EV_FORWARD : TT_EV_BACKWARD, name, NULL, t0,
                          t1, a->mb, a->chunk, -1, 0);
        }
    }
    tt_watch_context(step, -1);
    complete_sends(pipe);
    pipe->step_seconds = tt_clock_now() - t_start;
    /* The bubble's window (design.md section 12): from the pipeline's first
     * forward to its last backward or W, over all its stages (the PP group:
     * the TP ranks of a stage keep their own windows, which their TP sums
     * hold together). */
    pipe->window_seconds = pipe->step_seconds;
    if (pipe->g && tt_vclock_ticking() && pipe->list.n > 0) {
        /* the earliest first forward and the latest last unit, together */
        double ends[2] = {-first, last};
        tt_watch_purpose(WHY_WINDOW, 0, 0);
        tt_clock_max_n(pipe->g, TT_GROUP_PP, ends, 2);
        pipe->window_seconds = ends[1] + ends[0];
    }
    free(st.in);
    free(st.tg);
    return st.loss;
}

double tt_pipe_forward(tt_pipe *pipe, const int *idx, const int *targets, int B)
{
    tt_model *m = pipe->m;
    const int T = pipe->rc->model.T, Breal = B;
    int *pad = NULL;
    if (m->sh.sp) {
        /* Sequence parallelism splits the tokens over the TP group: an eval
         * or generation batch whose tokens do not divide is padded with
         * sequences of byte 0 (a micro-batch's size always divides, so Bmax
         * bounds the padding). Attention stays within each sequence, so the
         * padding changes nothing the real sequences compute; the loss is
         * taken over the real tokens below. */
        while ((B * T) % m->sh.tp_size)
            B++;
        if (B != Breal) {
            pad = tt_calloc((size_t)2 * B * T, sizeof(int));
            memcpy(pad, idx, (size_t)Breal * T * sizeof(int));
            if (targets)
                memcpy(pad + (size_t)B * T, targets, (size_t)Breal * T * sizeof(int));
            idx = pad;
            targets = targets ? pad + (size_t)B * T : NULL;
        }
    }
    const size_t n = (size_t)tt_model_rows(m, B) * pipe->rc->model.C;
    double loss = 0.0;
    tt_slot *slots[TT_MAX_CHUNKS] = {0};
    /* Every chunk in order; a rank takes part in the chunks it holds. The
     * transfers are blocking: each goes to the next chunk's stage, which is
     * waiting for exactly this message (or, on the same stage, is a copy
     * from the previous chunk's slot). */
    const tt_placement place = pipe->list.place;
    for (int k = 0; k < pipe->K; k++) {
        if (tt_chunk_stage(place, pipe->p, k) != pipe->stage)
            continue;
        const int j = k / pipe->p;
        const int from = k > 0 ? tt_chunk_stage(place, pipe->p, k - 1) : -1;
        const int to = k < pipe->K - 1 ? tt_chunk_stage(place, pipe->p, k + 1) : -1;
        tt_slot *s = slots[j] = tt_slot_acquire(m, j, B);
        if (from == pipe->stage)
            memcpy(slot_input(s), slots[(k - 1) / pipe->p]->x_out, n * sizeof(float));
        else if (k > 0) {
            tt_watch_purpose(WHY_FORWARD_ONLY, k, 0);
            tt_recv(pipe->g, slot_input(s), (int)n, MPI_FLOAT, from, tag_of(pipe, DIR_ACT, k, 0));
        }
        double l = tt_chunk_forward(m, s, idx, targets);
        /* Three ends: another stage's chunk (a send), the same stage's
         * (zb-v's turn: the next chunk copies x_out above), the model's. */
        if (k < pipe->K - 1 && to != pipe->stage) {
            tt_watch_purpose(WHY_FORWARD_ONLY, k + 1, 0);
            tt_send(pipe->g, s->x_out, (int)n, MPI_FLOAT, to, tag_of(pipe, DIR_ACT, k + 1, 0));
        } else if (k == pipe->K - 1) {
            loss = l, m->logits = s->logits;
            if (targets && B != Breal) {
                double sum = 0.0; /* the real sequences' mean, as tt_chunk_forward's */
                for (int t = 0; t < Breal * T; t++)
                    sum += s->losses[t];
                loss = sum / (Breal * T);
            }
        }
    }
    free(pad);
    for (int j = 0; j < pipe->v; j++)
        tt_slot_release(m, slots[j]);
    return loss;
}
