/* pipeline_run.c - pipeline parallelism at run time: the stage split, each
 * rank's shard, and the executor of a stage's action list.
 *
 * Transfers follow the semantics the schedule checker proved deadlock-free:
 * sends are non-blocking (MPI_Isend from the send's own buffer, completed at
 * the end of the step) and receives block until the matching send arrives,
 * both on the pipeline communicator, whose ranks are the stage numbers. Each
 * message's tag names (direction, chunk, micro-batch), so a receive can only
 * match the transfer it is waiting for. */
#include "tt/parallel/pipeline_run.h"
#include "tt/comm/comm.h"
#include "tt/core/memory.h"
#include "tt/core/events.h"

#include <stdlib.h>
#include <string.h>

/* ---- the split ---------------------------------------------------------- */

int tt_stage_split(int *chunk_layers, const tt_config *cfg, int K, const char *override,
                   tt_err *e)
{
    const int L = cfg->L;
    if (K > L)
        return tt_fail(e, "%d pipeline chunks need at least %d blocks, but --layers is %d "
                          "(every stage needs a block)", K, K, L);
    if (override) {
        const char *s = override;
        int n = 0, sum = 0;
        while (*s) {
            char *end;
            long v = strtol(s, &end, 10);
            if (end == s || (*end && *end != ','))
                return tt_fail(e, "--stage-layers expects numbers separated by commas, got '%s'",
                               override);
            if (n == K)
                return tt_fail(e, "--stage-layers '%s' lists more than the %d chunks of this "
                                  "layout (pp x virtual stages)", override, K);
            if (v < 1)
                return tt_fail(e, "--stage-layers '%s': chunk %d would have %ld blocks; every "
                                  "stage needs at least one", override, n, v);
            chunk_layers[n++] = (int)v;
            sum += (int)v;
            s = *end ? end + 1 : end;
        }
        if (n != K)
            return tt_fail(e, "--stage-layers '%s' lists %d chunk(s), the layout has %d "
                              "(pp x virtual stages)", override, n, K);
        if (sum != L)
            return tt_fail(e, "--stage-layers '%s' adds up to %d blocks, --layers is %d",
                           override, sum, L);
        return 0;
    }
    /* Balanced: minimise the costliest chunk. cost[i][k] = best max cost of
     * the first i blocks in k chunks; the last chunk also carries the head. */
    const double C = cfg->C, T = cfg->T, V = cfg->V;
    const double head = 2.0 * C * V / (24.0 * C * C + 4.0 * T * C);
    double *best = tt_malloc((size_t)(L + 1) * (K + 1) * sizeof(double));
    int *cut = tt_malloc((size_t)(L + 1) * (K + 1) * sizeof(int));
#define AT(a, i, k) a[(size_t)(i) * (K + 1) + (k)]
    for (int i = 0; i <= L; i++)
        for (int k = 0; k <= K; k++)
            AT(best, i, k) = 1e300;
    AT(best, 0, 0) = 0;
    for (int k = 1; k <= K; k++)
        for (int i = k; i <= L; i++)
            for (int j = k - 1; j < i; j++) { /* chunk k holds blocks [j, i) */
                double c = (double)(i - j) + (k == K ? head : 0.0);
                double v = AT(best, j, k - 1) > c ? AT(best, j, k - 1) : c;
                /* Ties go to the split that puts more blocks early, so the
                 * last stage (with lm_head) is the one that stays lighter. */
                if (v < AT(best, i, k) - 1e-12) {
                    AT(best, i, k) = v;
                    AT(cut, i, k) = j;
                }
            }
    for (int k = K, i = L; k >= 1; k--) {
        int j = AT(cut, i, k);
        chunk_layers[k - 1] = i - j;
        i = j;
    }
#undef AT
    free(best);
    free(cut);
    return 0;
}

tt_shard_spec tt_stage_spec(const tt_grid *g, const tt_run_config *rc, const int *chunk_layers,
                            int r)
{
    const int p = g ? g->pp : 1, v = rc->virtual_stages, K = p * v;
    const int stage = g ? tt_grid_pp_of(g, r) : 0;
    tt_shard_spec sh = tt_shard_whole(&rc->model);
    sh.tp_rank = g ? tt_grid_tp_of(g, r) : 0;
    sh.tp_size = g ? g->tp : 1;
    sh.mlp_gather = rc->tp_mlp_gather;
    /* Stage s holds global chunks s, s+p, ...; chunk k starts after the
     * blocks of chunks 0..k-1. */
    sh.nchunks = v;
    for (int j = 0; j < v; j++) {
        int k = j * p + stage, first = 0;
        for (int i = 0; i < k; i++)
            first += chunk_layers[i];
        sh.chunk_begin[j] = first;
        sh.chunk_end[j] = first + chunk_layers[k];
    }
    sh.layer_begin = sh.chunk_begin[0];
    sh.layer_end = sh.chunk_end[v - 1];
    sh.first_stage = stage == 0;             /* global chunk 0 */
    sh.last_stage = (K - 1) % p == stage;    /* global chunk K-1 */
    return sh;
}

/* ---- the executor ---------------------------------------------------------- */

int tt_pipe_init(tt_pipe *pp, tt_model *m, const tt_run_config *rc, const tt_grid *g, tt_err *e)
{
    memset(pp, 0, sizeof *pp);
    pp->m = m;
    pp->rc = rc;
    pp->g = g;
    pp->p = g ? g->pp : 1;
    pp->v = rc->virtual_stages;
    pp->K = pp->p * pp->v;
    pp->M = rc->micro_batches;
    pp->stage = g ? g->pp_rank : 0;
    pp->mbs = rc->batch / (g ? g->dp : 1) / rc->micro_batches;
    /* One stage: each micro-batch forward then backward (1F1B with no
     * warm-up), holding one micro-batch's activations at a time. */
    pp->kind = pp->p == 1 && pp->v == 1 ? TT_SCHED_1F1B : (tt_schedule_kind)rc->schedule;
    if (tt_schedule_validate_args(pp->kind, pp->p, pp->M, pp->v, e))
        return -1;
    /* Every rank builds every stage's list and checks them together, so a
     * wrong schedule stops all ranks with the same message before any work.
     * (tt_pipe_free releases what a failure leaves.) */
    pp->all = tt_calloc((size_t)pp->p, sizeof *pp->all);
    for (int s = 0; s < pp->p; s++)
        tt_schedule_build(&pp->all[s], pp->kind, pp->p, pp->M, pp->v, s);
    /* A backward costs about twice a forward: the simulation with those
     * costs is the bubble the schedule implies for this model. */
    if (tt_schedule_check(pp->all, pp->p, pp->M, pp->v, 1.0, 2.0, &pp->sim, e))
        return -1;
    pp->list = pp->all[pp->stage];
    const size_t nkeys = (size_t)pp->M * pp->v;
    pp->held = tt_calloc(nkeys, sizeof *pp->held);
    pp->grad_in = tt_calloc(nkeys, sizeof *pp->grad_in);
    pp->grad_out = tt_calloc(nkeys, sizeof *pp->grad_out);
    const int nl = pp->list.n > 0 ? pp->list.n : 1;
    pp->rec = tt_calloc((size_t)nl, sizeof *pp->rec);
    pp->reqs = tt_calloc((size_t)nl, sizeof *pp->reqs);
    pp->buf = tt_calloc((size_t)nl, sizeof *pp->buf);

    /* Everything the schedule needs, allocated now: the activation slots for
     * the most micro-batches it holds per chunk (at least one, for eval), and
     * a buffer per transfer that is not received into a slot. */
    const size_t n = (size_t)pp->mbs * rc->model.T * rc->model.C;
    int held[TT_MAX_CHUNKS] = {0}, peak[TT_MAX_CHUNKS] = {0};
    for (int i = 0; i < pp->list.n; i++) {
        const tt_action *a = &pp->list.a[i];
        const int j = a->chunk / pp->p, key = a->mb * pp->v + j;
        if (a->kind == TT_ACT_RECV_ACT || (a->kind == TT_ACT_FWD && a->chunk == 0))
            peak[j] = ++held[j] > peak[j] ? held[j] : peak[j];
        else if (a->kind == TT_ACT_BWD)
            held[j]--;
        if (a->kind == TT_ACT_SEND_ACT || a->kind == TT_ACT_SEND_GRAD ||
            a->kind == TT_ACT_RECV_GRAD) {
            pp->buf[i] = tt_mem_alloc(TT_MEM_COMM, n * sizeof(float),
                                      a->kind == TT_ACT_RECV_GRAD ? "a gradient to receive"
                                      : a->kind == TT_ACT_SEND_ACT ? "an activation to send"
                                                                  : "a gradient to send");
            pp->buf_size = n * sizeof(float);
            if (a->kind == TT_ACT_RECV_GRAD)
                pp->grad_in[key] = pp->buf[i];
            if (a->kind == TT_ACT_SEND_GRAD)
                pp->grad_out[key] = pp->buf[i];
        }
    }
    for (int j = 0; j < pp->v && m->Bmax > 0; j++)
        tt_slot_reserve(m, j, peak[j] > 0 ? peak[j] : 1);
    return 0;
}

void tt_pipe_free(tt_pipe *pp)
{
    for (int s = 0; pp->all && s < pp->p; s++)
        tt_action_list_free(&pp->all[s]);
    free(pp->all);
    tt_sim_result_free(&pp->sim);
    for (int i = 0; pp->buf && i < pp->list.n; i++)
        if (pp->buf[i])
            tt_mem_free(TT_MEM_COMM, pp->buf[i], pp->buf_size);
    free(pp->buf);
    free(pp->held);
    free(pp->grad_in);
    free(pp->grad_out);
    free(pp->reqs);
    free(pp->rec);
    memset(pp, 0, sizeof *pp);
}

enum { DIR_ACT = 0, DIR_GRAD = 1 };

/* The tag of the transfer into (or out of) global chunk k for micro-batch mb. */
static int tag_of(const tt_pipe *pp, int dir, int k, int mb)
{
    return (dir * pp->K + k) * pp->M + mb;
}

/* Posts a non-blocking send of n floats from the action's own buffer (the
 * buffer is not touched again until the step's sends are complete). */
static void post_send(tt_pipe *pp, int i, const float *src, size_t n, int dest, int tag)
{
    if (src != pp->buf[i])
        memcpy(pp->buf[i], src, n * sizeof(float));
    tt_isend(pp->g, pp->buf[i], (int)n, MPI_FLOAT, dest, tag, &pp->reqs[pp->nreq++]);
}

static void complete_sends(tt_pipe *pp)
{
    tt_wait_all(pp->nreq, pp->reqs);
    pp->nreq = 0;
}

/* Where a chunk's input lives in its slot (a chunk has at least one block). */
static float *slot_input(tt_slot *s) { return s->acts[0].x_in; }

double tt_pipe_train(tt_pipe *pp, const tt_corpus *c, long step, float dloss)
{
    tt_model *m = pp->m;
    const tt_run_config *rc = pp->rc;
    const int T = rc->model.T, C = rc->model.C, B = rc->batch, mbs = pp->mbs;
    const int dp_rank = pp->g ? pp->g->dp_rank : 0;
    const size_t n = (size_t)mbs * T * C;
    int *in = tt_malloc((size_t)mbs * T * sizeof(int)), *tg = tt_malloc((size_t)mbs * T * sizeof(int));
    double loss = 0.0, t_start = tt_now();
    int held = 0;
    pp->busy_seconds = 0.0;
    pp->peak_held = 0;
    for (int i = 0; i < pp->list.n; i++) {
        const tt_action *a = &pp->list.a[i];
        const int j = a->chunk / pp->p, key = a->mb * pp->v + j;
        const int first = a->chunk == 0, last = a->chunk == pp->K - 1;
        double t0 = tt_now();
        switch (a->kind) {
        case TT_ACT_RECV_ACT:
            pp->held[key] = tt_slot_acquire(m, j, mbs);
            tt_recv(pp->g, slot_input(pp->held[key]), (int)n, MPI_FLOAT,
                    a->peer, tag_of(pp, DIR_ACT, a->chunk, a->mb));
            break;
        case TT_ACT_FWD:
            if (first)
                pp->held[key] = tt_slot_acquire(m, j, mbs);
            if (first || last)
                tt_sample_batch(c, step, B, dp_rank * (B / (pp->g ? pp->g->dp : 1)) + a->mb * mbs,
                                mbs, T, in, tg);
            loss += tt_chunk_forward(m, pp->held[key], in, last ? tg : NULL) * mbs;
            if (++held > pp->peak_held)
                pp->peak_held = held;
            break;
        case TT_ACT_SEND_ACT:
            post_send(pp, i, pp->held[key]->x_out, n, a->peer,
                      tag_of(pp, DIR_ACT, a->chunk + 1, a->mb));
            break;
        case TT_ACT_RECV_GRAD:
            tt_recv(pp->g, pp->grad_in[key], (int)n, MPI_FLOAT, a->peer,
                    tag_of(pp, DIR_GRAD, a->chunk, a->mb));
            break;
        case TT_ACT_BWD:
            tt_chunk_backward(m, pp->held[key], last ? NULL : pp->grad_in[key], dloss);
            tt_slot_release(m, pp->held[key]);
            pp->held[key] = NULL;
            held--;
            /* m->dres is overwritten by the next backward: into the send buffer */
            if (!first)
                memcpy(pp->grad_out[key], m->dres, n * sizeof(float));
            break;
        case TT_ACT_SEND_GRAD:
            post_send(pp, i, pp->grad_out[key], n, a->peer,
                      tag_of(pp, DIR_GRAD, a->chunk - 1, a->mb));
            break;
        }
        double t1 = tt_now();
        if (a->kind == TT_ACT_FWD || a->kind == TT_ACT_BWD) {
            pp->busy_seconds += t1 - t0;
            int fwd = a->kind == TT_ACT_FWD;
            tt_events_add(fwd ? TT_EV_FORWARD : TT_EV_BACKWARD, fwd ? "forward" : "backward", NULL,
                         t0, t1, a->mb, a->chunk, -1, 0);
        }
        pp->rec[i].act = *a;
        pp->rec[i].t0 = t0 - t_start;
        pp->rec[i].t1 = t1 - t_start;
    }
    complete_sends(pp);
    pp->step_seconds = tt_now() - t_start;
    free(in);
    free(tg);
    return loss;
}

double tt_pipe_forward(tt_pipe *pp, const int *idx, const int *targets, int B)
{
    tt_model *m = pp->m;
    const size_t n = (size_t)B * pp->rc->model.T * pp->rc->model.C;
    double loss = 0.0;
    tt_slot *slots[TT_MAX_CHUNKS] = {0};
    /* Every chunk in order; a rank takes part in the chunks it holds. The
     * transfers are blocking: each goes to the next chunk's stage, which is
     * waiting for exactly this message. */
    for (int k = 0; k < pp->K; k++) {
        if (k % pp->p != pp->stage)
            continue;
        const int j = k / pp->p;
        tt_slot *s = slots[j] = tt_slot_acquire(m, j, B);
        if (k > 0)
            tt_recv(pp->g, slot_input(s), (int)n, MPI_FLOAT,
                    (k - 1) % pp->p, tag_of(pp, DIR_ACT, k, 0));
        double l = tt_chunk_forward(m, s, idx, targets);
        if (k < pp->K - 1)
            tt_send(pp->g, s->x_out, (int)n, MPI_FLOAT, (k + 1) % pp->p,
                    tag_of(pp, DIR_ACT, k + 1, 0));
        else
            loss = l, m->logits = s->logits;
    }
    for (int j = 0; j < pp->v; j++)
        tt_slot_release(m, slots[j]);
    return loss;
}
