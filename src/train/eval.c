/* eval.c - forward-only uses of the pipeline: the eval loss on the held-out
 * split, shared out over the DP replicas, and greedy generation. */
#include "tt/train/train.h"
#include "tt/comm/comm.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

double tt_eval_loss(tt_pipe *pipe, const tt_corpus *c)
{
    const tt_run_config *rc = pipe->rc;
    const tt_grid *g = pipe->g;
    const int T = rc->model.T, mb = pipe->m->Bmax;
    const int dp = g ? g->dp : 1, dp_rank = g ? g->dp_rank : 0;
    int nw = tt_eval_windows(c, T, rc->eval_windows);
    if (nw == 0)
        return NAN;
    /* The windows are shared out over the DP replicas. */
    int k0 = (int)((long)nw * dp_rank / dp), k1 = (int)((long)nw * (dp_rank + 1) / dp);
    int *in = tt_malloc((size_t)mb * T * sizeof(int));
    int *tg = tt_malloc((size_t)mb * T * sizeof(int));
    double sum = 0.0;
    for (int k = k0; k < k1; k += mb) {
        int n = k1 - k < mb ? k1 - k : mb;
        tt_eval_batch(c, k, n, T, in, tg);
        sum += tt_pipe_forward(pipe, in, tg, n) * n;
    }
    /* ZeRO-3 gathers each unit's weights over the DP group in every
     * forward, so every DP rank runs as many forwards as the one with the
     * most windows: the others repeat a window and drop its loss. */
    if (pipe->m->P.z.stage >= 3) {
        const int most = (nw + dp - 1) / dp, mine = (k1 - k0 + mb - 1) / mb;
        tt_eval_batch(c, 0, 1, T, in, tg);
        for (int b = mine; b < (most + mb - 1) / mb; b++)
            tt_pipe_forward(pipe, in, tg, 1);
    }
    free(in);
    free(tg);
    return tt_sum_from_last_stage(g, pipe->m, sum) / nw;
}

size_t tt_generate(tt_pipe *pipe, const char *prompt, int len, char *out)
{
    tt_model *m = pipe->m;
    const tt_grid *g = pipe->g;
    const int T = m->cfg.T, V = m->cfg.V;
    int plen = (int)strlen(prompt);
    int total = plen + len;
    int *ctx = tt_calloc((size_t)total + 1, sizeof(int));
    for (int i = 0; i < plen; i++)
        ctx[i] = (unsigned char)prompt[i];
    if (plen == 0)
        ctx[plen++] = ' ', total++;
    int *window = tt_calloc((size_t)T, sizeof(int));
    for (int pos = plen; pos < total; pos++) {
        /* The last T bytes (or fewer, left-aligned: attention is causal, so
         * the zeros after them cannot change the logits we read). */
        int start = pos > T ? pos - T : 0, n = pos - start;
        memset(window, 0, (size_t)T * sizeof(int));
        memcpy(window, ctx + start, (size_t)n * sizeof(int));
        tt_pipe_forward(pipe, window, NULL, 1);
        int next = 0;
        if (m->sh.last_stage) {
            /* Greedy: the largest logit of this rank's vocabulary slice, then
             * the largest over the TP group (ties go to the lowest byte, as on
             * one GPU). */
            const float *lg = m->logits + (size_t)(n - 1) * m->Vl;
            int real = V - m->v0 < m->Vl ? V - m->v0 : m->Vl;
            struct { float value; int index; } best = {-FLT_MAX, V};
            for (int v = 0; v < real; v++)
                if (lg[v] > best.value) {
                    best.value = lg[v];
                    best.index = m->v0 + v;
                }
            if (g && g->tp > 1)
                tt_allreduce(g, TT_GROUP_TP | TT_BOOKKEEPING, &best, 1, MPI_FLOAT_INT, MPI_MAXLOC);
            next = best.index;
        }
        /* The stage with the loss (the last, or stage 0 under zb-v's V)
         * tells the rest of its pipeline. */
        if (g && g->pp > 1)
            tt_bcast(g, TT_GROUP_PP | TT_BOOKKEEPING, &next, 1, MPI_INT,
                     tt_chunk_stage(pipe->list.place, pipe->p, pipe->K - 1));
        ctx[pos] = next;
    }
    for (int i = 0; i < total; i++)
        out[i] = (char)ctx[i];
    out[total] = '\0';
    free(ctx);
    free(window);
    return (size_t)total;
}

