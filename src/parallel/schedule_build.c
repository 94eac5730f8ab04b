/* schedule_build.c - the pipeline schedules' builders: stage s's order of
 * compute actions for each schedule of the registry (schedule.c), with the
 * transfers each compute needs placed next to it, and where the chunks live
 * (tt_chunk_stage). A schedule is only an order of compute actions per
 * stage; the sends and receives follow from it (schedule.c says why that
 * placement adds no waiting). */
#include "schedule_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- building blocks shared by every builder ---------------------------- */


int tt_chunk_stage(tt_placement place, int p, int k)
{
    /* V: the odd rounds of p chunks run back up the stages. */
    if (place == TT_PLACE_V && (k / p) % 2 == 1)
        return p - 1 - k % p;
    return k % p;
}

int tt_stage_chunk(tt_placement place, int p, int s, int j)
{
    return j * p + (place == TT_PLACE_V && j % 2 == 1 ? p - 1 - s : s);
}

static void push(tt_action_list *l, tt_action_kind kind, int mb, int chunk, int peer)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        tt_action *a = tt_malloc((size_t)l->cap * sizeof *a); /* aborts on OOM */
        if (l->n)
            memcpy(a, l->a, (size_t)l->n * sizeof *a);
        free(l->a);
        l->a = a;
    }
    l->a[l->n++] = (tt_action){kind, mb, chunk, peer};
}

/* Forward of (mb, chunk k): the input activation comes from the previous
 * chunk (none for chunk 0, which reads the tokens); the output goes to the
 * next chunk (none for the last, which computes the loss and so starts the
 * backward itself). */
static void fwd(tt_builder *b, int mb, int k)
{
    if (k > 0)
        push(b->out, TT_ACT_RECV_ACT, mb, k, tt_chunk_stage(b->place, b->p, k - 1));
    push(b->out, TT_ACT_FWD, mb, k, -1);
    if (k < b->K - 1)
        push(b->out, TT_ACT_SEND_ACT, mb, k, tt_chunk_stage(b->place, b->p, k + 1));
}

/* Backward of (mb, chunk k): the output gradient comes from the next chunk
 * (the last chunk has it from its own loss); the input gradient goes to the
 * previous chunk (chunk 0 ends in the embeddings, nothing to send). */
static void bwd(tt_builder *b, int mb, int k)
{
    if (k < b->K - 1)
        push(b->out, TT_ACT_RECV_GRAD, mb, k, tt_chunk_stage(b->place, b->p, k + 1));
    push(b->out, TT_ACT_BWD, mb, k, -1);
    if (k > 0)
        push(b->out, TT_ACT_SEND_GRAD, mb, k, tt_chunk_stage(b->place, b->p, k - 1));
}

/* W of (mb, chunk k): the weight gradients, from what B kept on this stage;
 * nothing travels. */
static void wgt(tt_builder *b, int mb, int k) { push(b->out, TT_ACT_W, mb, k, -1); }

/* ---- the builders: stage s's compute order ------------------------------ */

/* Naive: one micro-batch at a time. The stage does F then B of each
 * micro-batch; it cannot backward mb until the gradient came back through
 * every later stage, and the next forward waits behind that backward, so only
 * one stage is ever busy: idle fraction (p-1)/p. */
void tt_build_naive(tt_builder *b, int s)
{
    for (int mb = 0; mb < b->m; mb++) {
        fwd(b, mb, s);
        bwd(b, mb, s);
    }
}

/* GPipe: all forwards, then all backwards in reverse order, the last
 * micro-batch forwarded first (PyTorch's ScheduleGPipe takes them in forward
 * order; with every stage in the same order the times and memory are the
 * same). Every stage holds the activations of all m micro-batches. */
void tt_build_gpipe(tt_builder *b, int s)
{
    for (int mb = 0; mb < b->m; mb++)
        fwd(b, mb, s);
    for (int mb = b->m - 1; mb >= 0; mb--)
        bwd(b, mb, s);
}

/* 1F1B (PipeDream-flush, Megatron's non-interleaved schedule). Same bubble as
 * GPipe, but a micro-batch's backward starts as soon as its gradient can
 * arrive, so stage s never holds more than p - s micro-batches. */
void tt_build_1f1b(tt_builder *b, int s)
{
    int p = b->p, m = b->m;
    /* Warm-up: stage s forwards p - s - 1 micro-batches before the first
     * gradient can possibly reach it (the last stage needs none: it turns its
     * own forward into a backward at once). */
    int warmup = p - s - 1 < m ? p - s - 1 : m;
    int steady = m - warmup;
    for (int i = 0; i < warmup; i++)
        fwd(b, i, s);
    /* Steady state: one forward of a new micro-batch, then one backward of
     * the oldest one still held. */
    for (int i = 0; i < steady; i++) {
        fwd(b, warmup + i, s);
        bwd(b, i, s);
    }
    /* Cool-down: drain the warm-up's micro-batches. */
    for (int i = steady; i < m; i++)
        bwd(b, i, s);
}

/* Interleaved 1F1B (Megatron-LM): stage s holds v chunks s, s+p, s+2p, ...
 * The stage walks "virtual micro-batches" k = 0..m*v-1 in groups of p: p
 * micro-batches through local chunk 0, the same p through local chunk 1, ...,
 * then the next p micro-batches. A micro-batch crosses a stage v times, each
 * time on a chunk 1/v as long, so the fill and drain (the bubble) cost
 * (p-1) chunk-times instead of (p-1) stage-times. */
static void interleaved_step(int k, int p, int v, int *local, int *mb)
{
    *local = (k / p) % v;
    *mb = (k / (p * v)) * p + k % p;
}

void tt_build_interleaved(tt_builder *b, int s)
{
    int p = b->p, v = b->v, total = b->m * v;
    /* Warm-up (Megatron's count): the (v-1)*p forwards of the other chunks
     * before the first chunk's work comes back around, plus two per stage
     * still ahead of s in the pipe. */
    int warmup = (p - s - 1) * 2 + (v - 1) * p;
    if (warmup > total)
        warmup = total;
    int steady = total - warmup;
    int j, mb;
    for (int k = 0; k < warmup; k++) {
        interleaved_step(k, p, v, &j, &mb);
        fwd(b, mb, j * p + s);
    }
    /* Steady state: forward of virtual micro-batch warmup + i, then the
     * backward of virtual micro-batch i, whose chunks run in reverse (the
     * gradient enters through the last chunk). */
    for (int i = 0; i < steady; i++) {
        interleaved_step(warmup + i, p, v, &j, &mb);
        fwd(b, mb, j * p + s);
        interleaved_step(i, p, v, &j, &mb);
        bwd(b, mb, (v - 1 - j) * p + s);
    }
    /* Cool-down: the backwards still owed for the warm-up's forwards. */
    for (int i = steady; i < total; i++) {
        interleaved_step(i, p, v, &j, &mb);
        bwd(b, mb, (v - 1 - j) * p + s);
    }
}

/* ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", the schedule
 * with 1F1B's memory): 1F1B's order of forwards and B's, with each W placed
 * after a B. Stage s runs W(i) after B(i + s), s B's late (the order of
 * PyTorch's ScheduleInterleavedZeroBubble on one chunk; the authors'
 * quick-start variant defers W(0..s-1) to the end instead, with the same
 * times): the later a stage, the sooner its B's must reach the stages before
 * it, and a B without its W travels back T_B per stage instead of T_B + T_W.
 * The s W's it owes then fill the cool-down, where 1F1B idles for
 * gradients, and it runs them in micro-batch order. Stage s holds its p - s -
 * 1 warm-up micro-batches, the one just forwarded and the s whose W waits: p
 * at most, as 1F1B's stage 0. */
void tt_build_zb_h1(tt_builder *b, int s)
{
    int p = b->p, m = b->m;
    int warmup = p - s - 1 < m ? p - s - 1 : m;
    int steady = m - warmup, next_w = 0;
    for (int i = 0; i < warmup; i++)
        fwd(b, i, s);
    for (int i = 0; i < steady; i++) {
        fwd(b, warmup + i, s);
        bwd(b, i, s);
        if (i >= s)
            wgt(b, next_w++, s);
    }
    for (int i = steady; i < m; i++) {
        bwd(b, i, s);
        wgt(b, next_w++, s);
    }
    while (next_w < m)
        wgt(b, next_w++, s);
}

/* ZB-V (Qi et al., the V-shaped zero-bubble schedule): two chunks per stage,
 * placed in a V (stage s holds chunk d = s on the way down and u = 2p-1-s on
 * the way up, so stage 0 holds the embeddings and the loss and every stage
 * holds the same blocks' worth), B and W apart. Each stage counts how many
 * forwards, B's and W's of each of its chunks it has issued; the phases only
 * say which to issue next:
 *  1. the down leg: 2(p-s)-1 forwards of d - the time micro-batch 0 takes
 *     to cross the p-1-s stages below twice and come back to s on chunk u;
 *  2. s rounds of (forward of u, forward of d): while micro-batch 0 climbs
 *     the s stages above and its backward comes back down to s;
 *  3. p-s rounds of (forward of u, B and W of u): the backwards have begun;
 *  4. the steady state, one micro-batch of each chunk a round: F, B, W of d,
 *     then F, B, W of u, until every forward is issued;
 *  5. the drain (the authors' handcrafted ZB-V, and PyTorch's
 *     ScheduleZBVZeroBubble): s rounds of both chunks' B's, then p-s rounds
 *     of d's B with a W of d behind it, then u's W's left, then d's. The
 *     W's fill the time the stage would otherwise wait for gradients.
 * Stage s holds at most 2p (micro-batch, chunk) pairs, p micro-batches of
 * its two half-size chunks: 1F1B's memory. */
enum { V_F, V_B, V_W }; /* a forward, a B, a W */
typedef struct {
    tt_builder *b;
    int chunk[2];   /* d and u */
    int done[3][2]; /* issued so far, per kind (V_F, V_B, V_W) and chunk */
} vstage;

/* The next action of `kind` on chunk c, if its turn has come: the m forwards
 * in order, a B behind each forward issued, a W behind each B. */
static void v_issue(vstage *v, int kind, int c)
{
    static void (*const emit[3])(tt_builder *, int, int) = {fwd, bwd, wgt};
    const int limit = kind == V_F ? v->b->m : v->done[kind - 1][c];
    if (v->done[kind][c] < limit)
        emit[kind](v->b, v->done[kind][c]++, v->chunk[c]);
}

/* One micro-batch's F, B and W of chunk c, each if its turn has come. */
static void v_fbw(vstage *v, int c)
{
    for (int kind = V_F; kind <= V_W; kind++)
        v_issue(v, kind, c);
}

void tt_build_zb_v(tt_builder *b, int s)
{
    const int p = b->p, m = b->m, D = 0, U = 1;
    vstage v = {b, {tt_stage_chunk(TT_PLACE_V, p, s, 0), tt_stage_chunk(TT_PLACE_V, p, s, 1)},
                {{0, 0}, {0, 0}, {0, 0}}};
    for (int i = 0; i < 2 * (p - s) - 1; i++)
        v_issue(&v, V_F, D);
    for (int i = 0; i < s; i++) {
        v_issue(&v, V_F, U);
        v_issue(&v, V_F, D);
    }
    for (int i = 0; i < p - s; i++)
        v_fbw(&v, U);
    while (v.done[V_F][U] < m) {
        v_fbw(&v, D);
        v_fbw(&v, U);
    }
    /* The drain, as the authors' ZB-V has it: s rounds of both chunks'
     * B's, p-s rounds of d's B with a W of d behind it, then u's W's left,
     * then d's. */
    for (int i = 0; i < s; i++) {
        v_issue(&v, V_B, D);
        v_issue(&v, V_B, U);
    }
    for (int i = 0; i < p - s; i++) {
        v_issue(&v, V_B, D);
        v_issue(&v, V_W, D);
    }
    /* Each issues while a B is ahead of its W; what was never issued, the
     * checker names. */
    while (v.done[V_W][U] < v.done[V_B][U])
        v_issue(&v, V_W, U);
    while (v.done[V_W][D] < v.done[V_B][D])
        v_issue(&v, V_W, D);
}

