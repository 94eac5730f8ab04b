/* stage_split.c - which blocks each pipeline chunk holds, and from that the
 * shard of every rank: its chunks' blocks, its TP slice of them, whether it
 * holds the embeddings (chunk 0) or the head and the loss (chunk K-1).
 *
 * K = pp x v chunks; the schedule's placement says which stage holds chunk k
 * (tt/parallel/pipeline.h: k % pp, Megatron's interleaving, or zb-v's V). */
#include "tt/parallel/pipeline_run.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

/* --stage-layers "a,b,...": K positive block counts summing to L. */
static int parse_override(int *chunk_layers, int L, int K, const char *override, tt_err *e)
{
    const char *s = override;
    int n = 0, sum = 0;
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        /* (a comma must be followed by a number: "1,1," is refused) */
        if (end == s || (*end && (*end != ',' || end[1] == '\0')))
            return tt_fail(e, "--stage-layers expects numbers separated by commas, got '%s'",
                           override);
        /* Checked as a long, before the narrowing to int could wrap it
         * (4294967296 would become 0). */
        if ((errno == ERANGE && v > 0) || v > L)
            return tt_fail(e, "--stage-layers '%s': chunk %d would have more blocks than "
                              "--layers %d", override, n, L);
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

/* Balanced: minimise the costliest chunk by dynamic programming.
 * best[i][k] = the best max cost of the first i blocks in k chunks; the last
 * chunk also carries the head (lm_head and the loss, `head` blocks' worth). */
static void balanced_split(int *chunk_layers, int L, int K, double head)
{
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
                /* Ties keep the first cut found, that is the longest
                 * chunk k: among equal splits the later chunks get the
                 * extra blocks. */
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
}

/* The V (zb-v): stage s runs chunks s and 2p-1-s for every micro-batch, so
 * what limits a step is a stage's total, not one chunk's. Any block counts
 * are contiguous chunks in order, so the stages' totals are chosen first -
 * each block to the stage with the least so far (stage 0 starts with the
 * head: the loss is at the bottom of the V), two blocks at least each -
 * and each stage's blocks are then cut so that its two chunks cost alike,
 * the head's chunk (2p-1) taking fewer. */
static void v_split(int *chunk_layers, int L, int p, double head)
{
    int *n = tt_malloc((size_t)p * sizeof *n);
    for (int s = 0; s < p; s++)
        n[s] = 2;
    for (int left = L - 2 * p; left > 0; left--) {
        int best = 0; /* ties to the later stage: stage 0 carries the head */
        for (int s = 1; s < p; s++)
            if (n[s] <= n[best] + (best == 0 ? head : 0.0) + 1e-12)
                best = s;
        n[best]++;
    }
    for (int s = 0; s < p; s++) {
        const double h = s == 0 ? head : 0.0;
        /* down chunk a, up chunk b = n - a: the smallest max(a, b + h) */
        int a = 1;
        for (int c = 1; c < n[s]; c++) {
            double cur = fmax((double)a, n[s] - a + h), alt = fmax((double)c, n[s] - c + h);
            if (alt < cur - 1e-12)
                a = c;
        }
        chunk_layers[s] = a;
        chunk_layers[2 * p - 1 - s] = n[s] - a;
    }
    free(n);
}

int tt_stage_split(int *chunk_layers, const tt_config *cfg, int K, tt_placement place,
                   const char *override, tt_err *e)
{
    const int L = cfg->L;
    /* The balanced search is O(K L^2) in time and O(K L) in memory, so it
     * is bounded here, whoever built the config (flags, a checkpoint's
     * metadata, a test): 1024 blocks take milliseconds, 10^6 would spin. */
    if (L < 1 || L > TT_MAX_LAYERS || K < 1 || K > TT_MAX_LAYERS)
        return tt_fail(e, "a pipeline of %d chunks over %d blocks: both must be between 1 and "
                          "%d", K, L, TT_MAX_LAYERS);
    if (K > L)
        return tt_fail(e, "%d pipeline chunks need at least %d blocks, but --layers is %d "
                          "(every stage needs a block)", K, K, L);
    if (override)
        return parse_override(chunk_layers, L, K, override, e);
    /* A block costs about 24C^2 + 4TC flops per token, lm_head 2CV. */
    const double C = cfg->C, T = cfg->T, V = cfg->V;
    const double head = 2.0 * C * V / (24.0 * C * C + 4.0 * T * C);
    if (place == TT_PLACE_V && K % 2 == 0 && L >= K)
        v_split(chunk_layers, L, K / 2, head);
    else
        balanced_split(chunk_layers, L, K, head);
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
    sh.recompute = rc->recompute;
    sh.sp = rc->sequence_parallel && sh.tp_size > 1;
    sh.split_w = tt_schedule_splits_w(tt_pipe_kind(rc, g ? g->pp : 1));
    if (g && g->dp > 1 && rc->zero > 0) {
        sh.zero_stage = rc->zero;
        sh.dp_size = g->dp;
        sh.dp_rank = tt_grid_dp_of(g, r);
    }
    /* Local chunk j of stage s is the placement's global chunk k, which
     * starts after the blocks of chunks 0..k-1. */
    const tt_placement place = tt_schedule_placement(tt_pipe_kind(rc, p));
    sh.nchunks = v;
    for (int j = 0; j < v; j++) {
        int k = tt_stage_chunk(place, p, stage, j), first = 0;
        for (int i = 0; i < k; i++)
            first += chunk_layers[i];
        sh.chunk_begin[j] = first;
        sh.chunk_end[j] = first + chunk_layers[k];
    }
    sh.layer_begin = sh.chunk_begin[0];
    sh.layer_end = sh.chunk_end[v - 1];
    sh.first_stage = stage == 0;             /* global chunk 0 */
    sh.last_stage = tt_chunk_stage(place, p, K - 1) == stage; /* global chunk K-1 */
    return sh;
}
