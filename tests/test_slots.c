/* test_slots.c - the activation slots a pipeline stage reserves against what
 * its schedule holds. For every schedule of the registry on p 2 m 4 and
 * p 4 m 8: the slots and head buffers tt_schedule_buffers reserves equal the
 * peaks of an independent count over the stage's action list (each
 * (micro-batch, chunk) pair held over an interval, from the action that
 * lands its input to the one that gives it back), and the numbers worked by
 * hand below; the bytes reserved equal the most bytes held at once. Then a
 * real model's pool, reserved so, serves a whole stage's list without
 * allocating (the head's buffers lent to whichever slot holds the head
 * chunk). Single process, no MPI.
 *
 * K is the number of chunks (p v); the model's last chunk K-1 has the head. */
#include <check.h>
#include <stdlib.h>

#include "tt/model/model.h"
#include "tt/parallel/pipeline.h"

#include "check_run.h"

/* The most a list holds at once: (mb, chunk) pairs, pairs of chunk K-1, and
 * bytes when a pair weighs 1 and the head head_w more. The executor
 * (pipeline_run.c) takes a slot when the pair's input lands (its receive,
 * or chunk 0's forward reading the tokens) and gives it back after the
 * backward, or after W when the list splits it off. */
typedef struct {
    int pairs, heads;
    double bytes;
} held;

static held count_held(const tt_action_list *l, int K, int m, double head_w)
{
    int split = 0;
    for (int i = 0; i < l->n; i++)
        split |= l->a[i].kind == TT_ACT_W;
    int *take = malloc((size_t)(m * K) * sizeof *take), *give = malloc((size_t)(m * K) * sizeof *give);
    for (int x = 0; x < m * K; x++)
        take[x] = give[x] = -1;
    for (int i = 0; i < l->n; i++) {
        const tt_action *a = &l->a[i];
        const int x = a->mb * K + a->chunk;
        if (a->kind == TT_ACT_RECV_ACT || (a->kind == TT_ACT_FWD && a->chunk == 0))
            take[x] = i;
        if (a->kind == (split ? TT_ACT_W : TT_ACT_BWD))
            give[x] = i;
        /* the pair is computed while held */
        if (a->kind == TT_ACT_FWD || a->kind == TT_ACT_BWD || a->kind == TT_ACT_W)
            ck_assert_msg(take[x] >= 0 && take[x] <= i && (give[x] < 0 || give[x] >= i),
                          "mb %d chunk %d computed outside its slot", a->mb, a->chunk);
    }
    held peak = {0, 0, 0};
    for (int i = 0; i < l->n; i++) { /* after action i */
        held now = {0, 0, 0};
        for (int x = 0; x < m * K; x++)
            if (take[x] >= 0 && take[x] <= i && give[x] > i) {
                const int head = x % K == K - 1;
                now.pairs++, now.heads += head, now.bytes += 1 + head * head_w;
            }
        peak.pairs = now.pairs > peak.pairs ? now.pairs : peak.pairs;
        peak.heads = now.heads > peak.heads ? now.heads : peak.heads;
        peak.bytes = now.bytes > peak.bytes ? now.bytes : peak.bytes;
    }
    free(take);
    free(give);
    return peak;
}

/* By hand, per stage, the pairs and head pairs held at once (v = 2 where the
 * schedule interleaves): naive one micro-batch at a time; gpipe all m (the
 * head's too: every forward before any backward); 1f1b p - s (Megatron's
 * warm-up plus one), the head's backward right after its forward;
 * interleaved 2 (p-1-s) + (v-1) p + 1 chunk micro-batches (Narayanan et al.
 * 2021), one of them the head's on the last stage; zb-h1 1F1B's first-stage
 * peak p on every stage (Qi et al. 2023: W fills the cool-down), all head
 * pairs on the last stage; zb-v 2p half-stage chunks on every stage, the
 * head's (on stage 0, the V's end) one at a time. */
static const struct {
    const char *name;
    int p, m, pairs[4], heads[4];
} by_hand[] = {
    {"naive", 2, 4, {1, 1}, {0, 1}},
    {"naive", 4, 8, {1, 1, 1, 1}, {0, 0, 0, 1}},
    {"gpipe", 2, 4, {4, 4}, {0, 4}},
    {"gpipe", 4, 8, {8, 8, 8, 8}, {0, 0, 0, 8}},
    {"1f1b", 2, 4, {2, 1}, {0, 1}},
    {"1f1b", 4, 8, {4, 3, 2, 1}, {0, 0, 0, 1}},
    {"interleaved", 2, 4, {5, 3}, {0, 1}},
    {"interleaved", 4, 8, {11, 9, 7, 5}, {0, 0, 0, 1}},
    {"zb-h1", 2, 4, {2, 2}, {0, 2}},
    {"zb-h1", 4, 8, {4, 4, 4, 4}, {0, 0, 0, 4}},
    {"zb-v", 2, 4, {4, 4}, {1, 0}},
    {"zb-v", 4, 8, {8, 8, 8, 8}, {1, 0, 0, 0}},
};

START_TEST(reserve_equals_peak)
{
    const int ncases = (int)(sizeof by_hand / sizeof by_hand[0]);
    int seen[16] = {0};
    for (int c = 0; c < ncases; c++) {
        const int kind = tt_schedule_parse(by_hand[c].name), p = by_hand[c].p, m = by_hand[c].m;
        ck_assert_msg(kind >= 0 && kind < 16, "%s", by_hand[c].name);
        seen[kind] = 1;
        const int v = tt_schedule_chunks_per_stage(kind, 2), K = p * v;
        tt_err e;
        ck_assert_msg(tt_schedule_validate_args(kind, p, m, v, &e) == 0, "%s", e.msg);
        for (int s = 0; s < p; s++) {
            tt_action_list l;
            tt_schedule_build(&l, kind, p, m, v, s);
            /* every chunk as many blocks: one class */
            int cls[TT_MAX_CHUNKS] = {0}, slots[TT_MAX_CHUNKS], heads, nbuf;
            tt_schedule_buffers(&l, p, v, cls, slots, &heads, &nbuf);
            const double head_w = 3; /* any weight: the head's buffers beside a slot */
            held h = count_held(&l, K, m, head_w);
            const char *what = by_hand[c].name;
            ck_assert_msg(h.pairs == by_hand[c].pairs[s] && h.heads == by_hand[c].heads[s],
                          "%s p %d m %d stage %d: holds %d pairs, %d heads; by hand %d, %d",
                          what, p, m, s, h.pairs, h.heads, by_hand[c].pairs[s],
                          by_hand[c].heads[s]);
            ck_assert_msg(slots[0] == h.pairs && heads == h.heads,
                          "%s p %d m %d stage %d: reserves %d slots, %d heads; holds %d, %d",
                          what, p, m, s, slots[0], heads, h.pairs, h.heads);
            ck_assert_msg(slots[0] + heads * head_w == h.bytes,
                          "%s p %d m %d stage %d: reserves %g bytes, holds at most %g", what, p,
                          m, s, slots[0] + heads * head_w, h.bytes);
            tt_action_list_free(&l);
        }
    }
    for (int k = 0; k < tt_schedule_count(); k++)
        ck_assert_msg(seen[k], "schedule %s has no case", tt_schedule_name(k));
}
END_TEST

/* A stage of a real model: its pool reserved as the executor does
 * (allocate_for_list), then the list's takings and givings replayed; the pool
 * must not grow, and each held head pair must have head buffers of its own. */
static void replay(const char *name, int p, int m, int s, int chunk0, int chunk1, int first,
                   int split_w)
{
    static const tt_config cfg = {.V = 256, .C = 16, .L = 4, .NH = 2, .T = 4};
    const int kind = tt_schedule_parse(name), v = 2, K = p * v;
    tt_shard_spec sh = tt_shard_whole(&cfg);
    sh.nchunks = 2, sh.first_stage = first, sh.last_stage = 1, sh.split_w = split_w;
    sh.chunk_begin[0] = chunk0, sh.chunk_end[0] = chunk0 + 1;
    sh.chunk_begin[1] = chunk1, sh.chunk_end[1] = chunk1 + 1;
    tt_model mo;
    tt_model_init(&mo, &cfg, &sh, 1, 5);
    tt_action_list l;
    tt_schedule_build(&l, kind, p, m, v, s);
    int slots[TT_MAX_CHUNKS], heads, nbuf;
    tt_schedule_buffers(&l, p, v, mo.cls, slots, &heads, &nbuf);
    ck_assert_int_eq(mo.cls[1], 0); /* the head chunk's slot is any other's */
    tt_slot_reserve(&mo, 0, slots[0]);
    tt_slot_reserve_heads(&mo, heads);
    const int nslots = mo.nslots, nheads = mo.nheads;
    ck_assert_int_eq(nslots, slots[0]);
    ck_assert_int_eq(nheads, heads);
    tt_slot **hold = calloc((size_t)(m * K), sizeof *hold);
    for (int i = 0; i < l.n; i++) {
        const tt_action *a = &l.a[i];
        const int x = a->mb * K + a->chunk, j = a->chunk / p;
        if (a->kind == TT_ACT_RECV_ACT || (a->kind == TT_ACT_FWD && a->chunk == 0)) {
            hold[x] = tt_slot_acquire(&mo, j, 1);
            ck_assert_msg((hold[x]->logits != NULL) == (a->chunk == K - 1),
                          "%s: chunk %d's slot %s the head's buffers", name, a->chunk,
                          hold[x]->logits ? "has" : "lacks");
            for (int y = 0; y < m * K; y++)
                ck_assert_msg(y == x || !hold[y] || !hold[x]->logits ||
                                  hold[y]->logits != hold[x]->logits,
                              "%s: two held head pairs share the head's buffers", name);
        }
        if (a->kind == (split_w ? TT_ACT_W : TT_ACT_BWD)) {
            tt_slot_release(&mo, hold[x]);
            hold[x] = NULL;
        }
    }
    ck_assert_msg(mo.nslots == nslots && mo.nheads == nheads,
                  "%s p %d m %d stage %d: the pool grew from %d slots, %d heads to %d, %d", name,
                  p, m, s, nslots, nheads, mo.nslots, mo.nheads);
    free(hold);
    tt_action_list_free(&l);
    tt_model_free(&mo);
}

START_TEST(pool_serves_the_schedule)
{
    /* interleaved p 2: the last stage holds blocks 1 and 3 (the head's) */
    replay("interleaved", 2, 4, 1, 1, 3, 0, 0);
    /* zb-v p 2: stage 0 holds blocks 0 (the embeddings) and 3 (the head's) */
    replay("zb-v", 2, 4, 0, 0, 3, 1, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("slots");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, reserve_equals_peak);
    tcase_add_test(tc, pool_serves_the_schedule);
    suite_add_tcase(s, tc);
    return tt_check_run(s);
}
