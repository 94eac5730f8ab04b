/* schedule_check.c - proving a set of per-stage action lists correct before
 * anything runs, without running them: every field sane, every (micro-batch,
 * chunk) forwarded and backwarded exactly once in dependency order, every
 * send paired with one receive. schedule_sim.c then runs the lists together
 * (no deadlock, the times); tt_schedule_check below is that run at unit
 * costs. The slots and buffers a list makes a stage hold are counted here too.
 *
 * Throughout, K = p*v is the number of chunks and k a chunk index; chunk k
 * lives on stage tt_chunk_stage(place, p, k), the lists' placement. */
#include "schedule_internal.h"
#include "tt/parallel/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An action as the messages name it: "send activations of mb3 chunk 1 to stage 2". */
void tt_sched_describe(char *buf, size_t n, const tt_action *a)
{
    int act = a->kind == TT_ACT_SEND_ACT || a->kind == TT_ACT_RECV_ACT;
    switch (a->kind) {
    case TT_ACT_FWD:
    case TT_ACT_BWD:
        snprintf(buf, n, "%s mb%d chunk %d", a->kind == TT_ACT_FWD ? "forward" : "backward",
                 a->mb, a->chunk);
        return;
    case TT_ACT_W:
        snprintf(buf, n, "W (weight gradients) mb%d chunk %d", a->mb, a->chunk);
        return;
    case TT_ACT_SEND_ACT:
    case TT_ACT_SEND_GRAD:
        snprintf(buf, n, "send %s of mb%d chunk %d to stage %d",
                 act ? "activations" : "gradients", a->mb, a->chunk, a->peer);
        return;
    case TT_ACT_RECV_ACT:
    case TT_ACT_RECV_GRAD:
        snprintf(buf, n, "receive %s of mb%d chunk %d from stage %d",
                 act ? "activations" : "gradients", a->mb, a->chunk, a->peer);
        return;
    }
    snprintf(buf, n, "action of unknown kind %d", (int)a->kind);
}

/* An action's name for a failure's message, made only when one is written:
 * the planner checks thousands of lists, and naming every action of each
 * cost it more than the checks themselves. */
typedef struct {
    const tt_action *a;
    char text[160];
} act_name;

static const char *named(act_name *n)
{
    if (!n->text[0])
        tt_sched_describe(n->text, sizeof n->text, n->a);
    return n->text;
}

static int is_compute(tt_action_kind k)
{
    return k == TT_ACT_FWD || k == TT_ACT_BWD || k == TT_ACT_W;
}

static int table_of(tt_action_kind k) { return (unsigned)k < T_N ? (int)k : -1; }

/* ---- pass 1: fields ----------------------------------------------------- */

/* The peer a transfer of action a (stage s, index i) must name: the stage of
 * the neighbouring chunk it talks to; -1 for a compute. Fails for a transfer
 * that has no neighbour (before chunk 0 or after the last). */
static int expected_peer(const tt_action *a, const tt_sched_table *t, int s, int i, act_name *d,
                         int *want, tt_err *e)
{
    static const char *const no_neighbour[] = {
        [TT_ACT_RECV_ACT] = "chunk 0 reads the tokens, it receives no activations",
        [TT_ACT_SEND_GRAD] = "chunk 0 has no previous chunk to send gradients to",
        [TT_ACT_SEND_ACT] = "the last chunk computes the loss, it sends no activations",
        [TT_ACT_RECV_GRAD] = "the last chunk gets its gradient from the loss, it receives none",
    };
    *want = -1;
    if (is_compute(a->kind))
        return 0;
    /* Activations come from chunk k-1 and gradients go back to it; the other
     * two transfers talk to chunk k+1. */
    int prev = a->kind == TT_ACT_RECV_ACT || a->kind == TT_ACT_SEND_GRAD, k = a->chunk;
    if (prev ? k == 0 : k == t->K - 1)
        return tt_fail(e, "stage %d action %d (%s): %s", s, i, named(d), no_neighbour[a->kind]);
    *want = tt_chunk_stage(t->place, t->p, prev ? k - 1 : k + 1);
    return 0;
}

/* Every field in range, every action on the stage that owns its chunk, peers
 * right, no event twice. Fills the table. */
int tt_sched_check_fields(const tt_action_list *lists, tt_sched_table *t, tt_err *e)
{
    int p = t->p, m = t->m, K = t->K;
    for (int s = 0; s < p; s++) {
        for (int i = 0; i < lists[s].n; i++) {
            const tt_action *a = &lists[s].a[i];
            int tab = table_of(a->kind);
            if (tab < 0)
                return tt_fail(e, "stage %d action %d: unknown action kind %d", s, i,
                               (int)a->kind);
            act_name name = {.a = a}, *d = &name;
            if (a->mb < 0 || a->mb >= m)
                return tt_fail(e, "stage %d action %d (%s): micro-batch outside 0..%d", s, i,
                               named(d), m - 1);
            if (a->chunk < 0 || a->chunk >= K)
                return tt_fail(e, "stage %d action %d (%s): chunk outside 0..%d", s, i, named(d),
                               K - 1);
            const int owner = tt_chunk_stage(t->place, p, a->chunk);
            if (owner != s)
                return tt_fail(e, "stage %d action %d (%s): chunk %d lives on stage %d", s, i,
                               named(d), a->chunk, owner);
            int want = -1;
            if (expected_peer(a, t, s, i, d, &want, e))
                return -1;
            if (a->peer != want)
                return tt_fail(e, "stage %d action %d (%s): peer should be %s%d", s, i, named(d),
                               want < 0 ? "" : "stage ", want);
            int *slot = &t->at[tab][a->mb * K + a->chunk];
            if (*slot >= 0)
                return tt_fail(e, "stage %d action %d (%s) appears twice (also action %d)", s,
                               i, named(d), *slot);
            *slot = i;
            t->split |= a->kind == TT_ACT_W;
        }
    }
    return 0;
}

/* ---- pass 2: order and pairing ------------------------------------------ */

/* What action i of stage s (described as d) needs first happens at index at
 * of the same list (-1: never): it must happen, and before i. `never` says
 * what is missing, `what` names it; the same two messages for every need. */
static int after(int at, int s, int i, act_name *d, const char *never, const char *what,
                 tt_err *e)
{
    if (at < 0)
        return tt_fail(e, "stage %d action %d (%s): %s", s, i, named(d), never);
    if (at > i)
        return tt_fail(e, "stage %d action %d (%s) comes before %s (action %d)", s, i, named(d),
                       what, at);
    return 0;
}

/* A forward or backward (stage s, index i): its input arrived before it, and
 * what it starts is finished (a forward is backwarded). */
static int check_compute(const tt_action *a, int s, int i, const tt_sched_table *t, act_name *d,
                         tt_err *e)
{
    int k = a->chunk, id = a->mb * t->K + k, last = k == t->K - 1;
    if (a->kind == TT_ACT_FWD) {
        if (k > 0 && after(t->at[T_RACT][id], s, i, d, "its input activations are never received",
                           "the receive of its input activations", e))
            return -1;
        if (t->at[T_BWD][id] < 0)
            return tt_fail(e, "stage %d action %d (%s) is never backwarded (no "
                              "backward of mb%d chunk %d in the list)", s, i, named(d), a->mb, k);
        return 0;
    }
    if (a->kind == TT_ACT_W)
        return after(t->at[T_BWD][id], s, i, d,
                     "the micro-batch is never backwarded (B) through this chunk",
                     "its B, which leaves it the output gradients", e);
    if (t->split && t->at[T_W][id] < 0)
        return tt_fail(e, "stage %d action %d (%s) is never followed by its W (no W of "
                          "mb%d chunk %d in the list, so its weight gradients are lost)",
                       s, i, named(d), a->mb, k);
    if (after(t->at[T_FWD][id], s, i, d, "the micro-batch is never forwarded through this chunk",
              "its forward", e))
        return -1;
    if (!last)
        return after(t->at[T_RGRAD][id], s, i, d, "its output gradient is never received",
                     "the receive of its output gradient", e);
    return 0;
}

/* A send or receive (stage s, index i): a send follows the compute that
 * produced its data, and each transfer has its partner on the peer stage
 * (the partner of chunk k's activation send is chunk k+1's receive; of its
 * gradient send, chunk k-1's receive). */
static int check_transfer(const tt_action *a, int s, int i, const tt_sched_table *t,
                          act_name *d, tt_err *e)
{
    int k = a->chunk, id = a->mb * t->K + k;
    switch (a->kind) {
    case TT_ACT_SEND_ACT: {
        int f = t->at[T_FWD][id];
        if (f < 0 || f > i)
            return tt_fail(e, "stage %d action %d (%s): sends activations %s", s, i, named(d),
                           f < 0 ? "that are never computed" : "before computing them");
        if (t->at[T_RACT][id + 1] < 0)
            return tt_fail(e, "stage %d action %d (%s) has no matching receive on "
                              "stage %d", s, i, named(d), a->peer);
        return 0;
    }
    case TT_ACT_RECV_ACT:
        if (t->at[T_SACT][id - 1] < 0)
            return tt_fail(e, "stage %d action %d (%s) has no matching send (of chunk "
                              "%d on stage %d)", s, i, named(d), k - 1, a->peer);
        return 0;
    case TT_ACT_SEND_GRAD: {
        int b = t->at[T_BWD][id];
        if (b < 0 || b > i)
            return tt_fail(e, "stage %d action %d (%s): sends gradients %s", s, i, named(d),
                           b < 0 ? "that are never computed" : "before computing them");
        if (t->at[T_RGRAD][id - 1] < 0)
            return tt_fail(e, "stage %d action %d (%s) has no matching receive on "
                              "stage %d", s, i, named(d), a->peer);
        return 0;
    }
    default: /* TT_ACT_RECV_GRAD */
        if (t->at[T_SGRAD][id + 1] < 0)
            return tt_fail(e, "stage %d action %d (%s) has no matching send (of chunk "
                              "%d on stage %d)", s, i, named(d), k + 1, a->peer);
        return 0;
    }
}

/* The order within a stage respects the data dependencies, every send meets
 * a receive on the peer (and vice versa), and nothing is forgotten. */
int tt_sched_check_order(const tt_action_list *lists, const tt_sched_table *t, tt_err *e)
{
    int p = t->p, m = t->m, K = t->K;
    for (int s = 0; s < p; s++) {
        for (int i = 0; i < lists[s].n; i++) {
            const tt_action *a = &lists[s].a[i];
            act_name name = {.a = a}, *d = &name;
            int compute = is_compute(a->kind);
            if (compute ? check_compute(a, s, i, t, d, e) : check_transfer(a, s, i, t, d, e))
                return -1;
        }
    }
    /* Every (mb, chunk) is forwarded (and, by check_compute, then
     * backwarded) on its stage. */
    for (int mb = 0; mb < m; mb++)
        for (int k = 0; k < K; k++)
            if (t->at[T_FWD][mb * K + k] < 0)
                return tt_fail(e, "stage %d (%d actions): mb%d is never forwarded or "
                                  "backwarded through chunk %d", tt_chunk_stage(t->place, p, k),
                               lists[tt_chunk_stage(t->place, p, k)].n, mb, k);
    return 0;
}

/* ---- the entry point and the buffer count ------------------------------ */

int tt_schedule_check(const tt_action_list *lists, int p, int m, int v, double fwd_cost,
                      double bwd_cost, tt_sim_result *res, tt_err *e)
{
    /* Every chunk costs the same and transfers are free; lists with W
     * actions spend half the backward in B and half in W. */
    const int K = p > 0 && v > 0 && p <= TT_MAX_SIM_CHUNKS / v ? p * v : 1;
    int split = 0;
    for (int s = 0; s < p && !split; s++)
        for (int i = 0; i < lists[s].n && !split; i++)
            split = lists[s].a[i].kind == TT_ACT_W;
    double *f = tt_malloc(3 * (size_t)K * sizeof *f), *b = f + K, *w = b + K;
    for (int k = 0; k < K; k++) {
        f[k] = fwd_cost;
        b[k] = split ? bwd_cost / 2 : bwd_cost;
        w[k] = split ? bwd_cost / 2 : 0.0;
    }
    const tt_sim_costs c = {f, b, NULL, w};
    int rc = tt_schedule_simulate(lists, p, m, v, &c, res, e);
    free(f);
    return rc;
}

int tt_action_needs_buffer(const tt_action *a, int stage)
{
    /* A send to its own stage (the turn of zb-v's V) holds nothing: the
     * receive reads the activation from the producer's slot and the
     * backward writes the gradient into the receive's buffer. */
    if (a->kind == TT_ACT_SEND_ACT || a->kind == TT_ACT_SEND_GRAD)
        return a->peer != stage;
    return a->kind == TT_ACT_RECV_GRAD;
}

/* +1 if the action takes a slot of its local chunk (the input of (mb, chunk)
 * arrives, or chunk 0's forward reads the tokens), -1 if it gives one back
 * (the backward; with W actions, W: it keeps B's output gradients until
 * then), else 0. */
static int slot_change(const tt_action *a, int split)
{
    if (a->kind == TT_ACT_RECV_ACT || (a->kind == TT_ACT_FWD && a->chunk == 0))
        return 1;
    return a->kind == (split ? TT_ACT_W : TT_ACT_BWD) ? -1 : 0;
}

static int list_splits_w(const tt_action_list *l)
{
    for (int i = 0; i < l->n; i++)
        if (l->a[i].kind == TT_ACT_W)
            return 1;
    return 0;
}

void tt_schedule_buffers(const tt_action_list *l, int p, int v, const int *nb,
                         tt_stage_buffers *out)
{
    const int split = list_splits_w(l);
    int slots = 0, blocks = 0, heads = 0, has_head = 0, all_blocks = 0;
    memset(out, 0, sizeof *out);
    for (int j = 0; j < v; j++)
        all_blocks += nb ? nb[j] : 1;
    for (int i = 0; i < l->n; i++) {
        const tt_action *a = &l->a[i];
        const int j = a->chunk / p, d = slot_change(a, split);
        const int head = a->chunk == p * v - 1; /* the model's last chunk */
        slots += d;
        blocks += d * (nb && j < v ? nb[j] : 1);
        heads += head ? d : 0;
        has_head |= head;
        out->slots = slots > out->slots ? slots : out->slots;
        out->blocks = blocks > out->blocks ? blocks : out->blocks;
        out->heads = heads > out->heads ? heads : out->heads;
        out->buffers += tt_action_needs_buffer(a, tt_chunk_stage(l->place, p, a->chunk));
    }
    /* Eval runs a batch through every chunk at once: a slot each, and the
     * head's buffers on the stage with the loss. */
    out->slots = v > out->slots ? v : out->slots;
    out->blocks = all_blocks > out->blocks ? all_blocks : out->blocks;
    out->heads = has_head && out->heads < 1 ? 1 : out->heads;
}

double tt_schedule_peak_held(const tt_action_list *l, int p, int v, const double *bytes)
{
    const int split = list_splits_w(l);
    double now = 0, peak = 0;
    for (int i = 0; i < l->n; i++) {
        const int j = l->a[i].chunk / p;
        if (j < v)
            now += slot_change(&l->a[i], split) * bytes[j];
        peak = now > peak ? now : peak;
    }
    return peak;
}
