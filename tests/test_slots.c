/* test_slots.c - the activation slots a pipeline stage reserves against what
 * its schedule holds. For every schedule of the registry on p 2 m 4 and
 * p 4 m 8: the slots, blocks and head buffers tt_schedule_buffers reserves
 * equal the peaks of an independent count over the stage's action list
 * (each (micro-batch, chunk) pair held over an interval, from the action
 * that lands its input to the one that gives it back) and the numbers worked
 * by hand below, and the bytes reserved equal the most bytes held at once,
 * with chunks of one block and with chunks of 1 and 2 blocks (the default
 * split of 8 blocks over 3 x 2 chunks is uneven); with chunks of 2 and 1
 * blocks the reserve may exceed it by one head buffer (below), and the transfer buffers
 * equal the count worked by hand below. Then a real model's pools,
 * reserved so, serve a whole stage's list without allocating (blocks and
 * the head's buffers lent to whichever slot holds them, never two at once).
 * Single process, no MPI.
 *
 * K is the number of chunks (p v); the model's last chunk K-1 has the head. */
#include <check.h>
#include <stdlib.h>

#include "tt/model/model.h"
#include "tt/parallel/pipeline.h"

#include "check_run.h"

/* The most a list holds at once: (mb, chunk) pairs, blocks (nb[j] per pair
 * of local chunk j), pairs of chunk K-1, and bytes when a pair weighs 1, a
 * block block_w and the head head_w more. The executor (pipeline_run.c)
 * takes a slot when the pair's input lands (its receive, or chunk 0's
 * forward reading the tokens) and gives it back after the backward, or after
 * W when the list splits it off. */
typedef struct {
    int pairs, blocks, heads;
    double bytes;
} held;

static held count_held(const tt_action_list *l, int p, int K, int m, const int *nb,
                       double block_w, double head_w)
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
    held peak = {0, 0, 0, 0};
    for (int i = 0; i < l->n; i++) { /* after action i */
        held now = {0, 0, 0, 0};
        for (int x = 0; x < m * K; x++)
            if (take[x] >= 0 && take[x] <= i && give[x] > i) {
                const int head = x % K == K - 1, blocks = nb[x % K / p];
                now.pairs++, now.blocks += blocks, now.heads += head;
                now.bytes += 1 + blocks * block_w + head * head_w;
            }
        peak.pairs = now.pairs > peak.pairs ? now.pairs : peak.pairs;
        peak.blocks = now.blocks > peak.blocks ? now.blocks : peak.blocks;
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
 * head's (on stage 0, the V's end) one at a time.
 * Transfer buffers, m of each kind per local chunk: a chunk with a next one
 * sends its activation and receives its output gradient, a chunk with a
 * previous one sends its input gradient back; a send to the chunk's own
 * stage (zb-v's turn, chunks p-1 and p on stage p-1) holds none, its
 * gradient landing in the receive's buffer. One chunk per stage: stage 0 2m,
 * the last m, the others 3m. Interleaved (chunks s and s+p): chunk 0 2m,
 * chunk 2p-1 m, the others 3m. zb-v (chunks s and 2p-1-s): stage 0 2m + m,
 * a middle stage 3m + 3m, stage p-1 (m + m) + (m + m), not the 6m it would
 * keep if its two sends to itself held buffers (2m more). */
static const struct {
    const char *name;
    int p, m, pairs[4], heads[4], buffers[4];
} by_hand[] = {
    {"naive", 2, 4, {1, 1}, {0, 1}, {8, 4}},
    {"naive", 4, 8, {1, 1, 1, 1}, {0, 0, 0, 1}, {16, 24, 24, 8}},
    {"gpipe", 2, 4, {4, 4}, {0, 4}, {8, 4}},
    {"gpipe", 4, 8, {8, 8, 8, 8}, {0, 0, 0, 8}, {16, 24, 24, 8}},
    {"1f1b", 2, 4, {2, 1}, {0, 1}, {8, 4}},
    {"1f1b", 4, 8, {4, 3, 2, 1}, {0, 0, 0, 1}, {16, 24, 24, 8}},
    {"interleaved", 2, 4, {5, 3}, {0, 1}, {20, 16}},
    {"interleaved", 4, 8, {11, 9, 7, 5}, {0, 0, 0, 1}, {40, 48, 48, 32}},
    {"zb-h1", 2, 4, {2, 2}, {0, 2}, {8, 4}},
    {"zb-h1", 4, 8, {4, 4, 4, 4}, {0, 0, 0, 4}, {16, 24, 24, 8}},
    {"zb-v", 2, 4, {4, 4}, {1, 0}, {12, 16}},
    {"zb-v", 4, 8, {8, 8, 8, 8}, {1, 0, 0, 0}, {24, 48, 48, 32}},
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
            const char *what = by_hand[c].name;
            /* weights of a block and of the head beside a slot's own: any */
            const double block_w = 5, head_w = 3;
            /* uneven both ways: {2, 1} so that v = 1 (nb[0] only) sees it */
            static const int one[2] = {1, 1}, uneven[2][2] = {{1, 2}, {2, 1}};
            held h = count_held(&l, p, K, m, one, block_w, head_w);
            ck_assert_msg(h.pairs == by_hand[c].pairs[s] && h.heads == by_hand[c].heads[s],
                          "%s p %d m %d stage %d: holds %d pairs, %d heads; by hand %d, %d",
                          what, p, m, s, h.pairs, h.heads, by_hand[c].pairs[s],
                          by_hand[c].heads[s]);
            for (int u = 0; u < 3; u++) {
                const int *nb = u ? uneven[u - 1] : one;
                tt_stage_buffers r;
                tt_schedule_buffers(&l, p, v, nb, &r);
                h = count_held(&l, p, K, m, nb, block_w, head_w);
                ck_assert_msg(r.buffers == by_hand[c].buffers[s],
                              "%s p %d m %d stage %d: %d transfer buffers, by hand %d", what, p,
                              m, s, r.buffers, by_hand[c].buffers[s]);
                ck_assert_msg(r.slots == h.pairs && r.blocks == h.blocks && r.heads == h.heads,
                              "%s p %d m %d stage %d, blocks %d,%d: reserves %d slots, %d "
                              "blocks, %d heads; holds %d, %d, %d",
                              what, p, m, s, nb[0], nb[1], r.slots, r.blocks, r.heads, h.pairs,
                              h.blocks, h.heads);
                /* The three pools are each as large as their own peak. With
                 * one chunk per stage, or equal chunks, or the second chunk
                 * the larger, the peaks fall at one moment and the bytes
                 * reserved are the most held at once. With two chunks a
                 * stage and the first the larger (interleaved, zb-v), the
                 * stage holding the head's chunk holds its most blocks and
                 * its most head pairs at different moments: the pools,
                 * one per kind, reserve one head buffer more than is ever
                 * held (3 units here, on all four cases; printed). */
                const double bytes = r.slots + r.blocks * block_w + r.heads * head_w;
                const int pools_apart = u == 2 && v > 1;
                if (pools_apart && bytes != h.bytes)
                    printf("# %s p %d m %d stage %d, blocks 2,1: %g units reserved, %g held\n",
                           what, p, m, s, bytes, h.bytes);
                ck_assert_msg(pools_apart ? bytes >= h.bytes : bytes == h.bytes,
                              "%s p %d m %d stage %d, blocks %d,%d: reserves %g bytes, holds "
                              "at most %g",
                              what, p, m, s, nb[0], nb[1], bytes, h.bytes);
            }
            tt_action_list_free(&l);
        }
    }
    for (int k = 0; k < tt_schedule_count(); k++)
        ck_assert_msg(seen[k], "schedule %s has no case", tt_schedule_name(k));
}
END_TEST

/* A stage of a real model: its pools reserved as the executor does
 * (allocate_for_list), then the list's takings and givings replayed; no pool
 * may grow, each held pair of chunk j must have nb[j] blocks and the head's
 * buffers (chunk K-1 only) of its own. Local chunk j is blocks
 * [begin[j], begin[j] + len[j]) of a 4-block model. */
static void replay(const char *name, int p, int m, int s, const int *begin, const int *len,
                   int first, int split_w)
{
    static const tt_config cfg = {.V = 256, .C = 16, .L = 4, .NH = 2, .T = 4};
    const int kind = tt_schedule_parse(name), v = 2, K = p * v;
    tt_shard_spec sh = tt_shard_whole(&cfg);
    sh.nchunks = 2, sh.first_stage = first, sh.last_stage = 1, sh.split_w = split_w;
    for (int j = 0; j < 2; j++)
        sh.chunk_begin[j] = begin[j], sh.chunk_end[j] = begin[j] + len[j];
    tt_model mo;
    tt_model_init(&mo, &cfg, &sh, 1, 5);
    tt_action_list l;
    tt_schedule_build(&l, kind, p, m, v, s);
    tt_stage_buffers need;
    tt_schedule_buffers(&l, p, v, len, &need);
    tt_slot_reserve(&mo, need.slots, need.blocks, need.heads);
    ck_assert_int_eq(mo.nslots, need.slots);
    ck_assert_int_eq(mo.nblocks, need.blocks);
    ck_assert_int_eq(mo.nheads, need.heads);
    tt_slot **hold = calloc((size_t)(m * K), sizeof *hold);
    for (int i = 0; i < l.n; i++) {
        const tt_action *a = &l.a[i];
        const int x = a->mb * K + a->chunk, j = a->chunk / p;
        if (a->kind == TT_ACT_RECV_ACT || (a->kind == TT_ACT_FWD && a->chunk == 0)) {
            tt_slot *t = hold[x] = tt_slot_acquire(&mo, j, 1);
            ck_assert_msg((t->logits != NULL) == (a->chunk == K - 1),
                          "%s: chunk %d's slot %s the head's buffers", name, a->chunk,
                          t->logits ? "has" : "lacks");
            for (int y = 0; y < m * K; y++) {
                const tt_slot *u = hold[y];
                if (y == x || !u)
                    continue;
                ck_assert_msg(u != t && (!t->logits || u->logits != t->logits),
                              "%s: two held pairs share a slot or a head", name);
                for (int b = 0; b < len[j]; b++)
                    for (int c = 0; c < len[u->chunk]; c++)
                        ck_assert_msg(t->acts[b].x_in && t->acts[b].x_in != u->acts[c].x_in,
                                      "%s: two held pairs share a block's activations", name);
            }
        }
        if (a->kind == (split_w ? TT_ACT_W : TT_ACT_BWD)) {
            tt_slot_release(&mo, hold[x]);
            hold[x] = NULL;
        }
    }
    ck_assert_msg(mo.nslots == need.slots && mo.nblocks == need.blocks && mo.nheads == need.heads,
                  "%s p %d m %d stage %d: the pools grew from %d slots, %d blocks, %d heads to "
                  "%d, %d, %d",
                  name, p, m, s, need.slots, need.blocks, need.heads, mo.nslots, mo.nblocks,
                  mo.nheads);
    free(hold);
    tt_action_list_free(&l);
    tt_model_free(&mo);
}

START_TEST(pools_serve_the_schedule)
{
    /* interleaved p 2: the last stage holds chunks 1 and 3 (the head's) */
    replay("interleaved", 2, 4, 1, (const int[]){1, 3}, (const int[]){1, 1}, 0, 0);
    replay("interleaved", 2, 4, 1, (const int[]){0, 2}, (const int[]){2, 2}, 0, 0);
    /* uneven: chunk 1 of one block, chunk 3 of two (the loss's stage) */
    replay("interleaved", 2, 4, 1, (const int[]){1, 2}, (const int[]){1, 2}, 0, 0);
    /* zb-v p 2: stage 0 holds chunks 0 (the embeddings) and 3 (the head's) */
    replay("zb-v", 2, 4, 0, (const int[]){0, 3}, (const int[]){1, 1}, 1, 1);
    replay("zb-v", 2, 4, 0, (const int[]){0, 2}, (const int[]){2, 1}, 1, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("slots");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, reserve_equals_peak);
    tcase_add_test(tc, pools_serve_the_schedule);
    suite_add_tcase(s, tc);
    return tt_check_run(s);
}
