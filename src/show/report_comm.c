/* report_comm.c - the communication report: every GPU's TP, PP and DP
 * traffic as the comm counters measured it, next to the closed-form
 * expectation (doc/communication.md). Each parallelism's formula lives with
 * its communication (tensor_parallel.c, pipeline_rules.c, data_parallel.c);
 * this file only adds them up, compares and prints. */
#include "tt/show/report_comm.h"
#include "tt/comm/tensor_parallel.h"
#include "tt/core/vclock.h"
#include "tt/parallel/data_parallel.h"
#include "tt/parallel/pipeline_run.h"

#include <stdlib.h>
#include <string.h>


void tt_comm_expected(tt_comm_stats *exp, const tt_run_config *rc, const tt_grid *g,
                      const tt_model *m, long steps)
{
    memset(exp, 0, sizeof *exp);
    /* A group of one GPU communicates nothing, so only the parallelisms
     * actually in use are asked. */
    if (g->tp > 1 && m->sh.sp) {
        const long long tokens = (long long)(rc->batch / g->dp) * rc->model.T;
        tp_sp_expected_traffic(exp, tokens, rc->model.C, m->nl, m->sh.first_stage,
                               m->sh.last_stage, rc->recompute == TT_RECOMPUTE_FULL,
                               rc->micro_batches, steps);
    } else if (g->tp > 1) {
        const long long tokens = (long long)(rc->batch / g->dp) * rc->model.T;
        tp_expected_traffic(exp, tokens, rc->model.C, m->nl, m->sh.first_stage,
                            m->sh.last_stage, rc->tp_mlp_gather,
                            rc->recompute == TT_RECOMPUTE_FULL, rc->micro_batches, steps);
    }
    if (g->pp > 1)
        tt_pipe_expected_traffic(exp, rc, g, steps);
    if (g->dp > 1 && m->P.z.stage)
        tt_zero_expected_traffic(exp, &m->P, rc->micro_batches, steps);
    else if (g->dp > 1)
        tt_dp_expected_traffic(exp, &m->P, rc->dp_bucket, steps);
}

/* Calls and bytes of TP, PP and DP; time and the OTHER group are not predicted. */
static int matches(const tt_comm_stats *a, const tt_comm_stats *b)
{
    for (int gr = 0; gr < TT_GROUP_OTHER; gr++)
        for (int op = 0; op < TT_NOPS; op++)
            if (a->c[gr][op].calls != b->c[gr][op].calls ||
                a->c[gr][op].bytes != b->c[gr][op].bytes)
                return 0;
    return 1;
}

/* Bytes this GPU sends for `bytes` booked in group gr by operation op under
 * the ring algorithms (design.md section 10): an all-reduce 2(n-1)/n of its
 * buffer, an all-gather or reduce-scatter (n-1)/n of the full buffer, a send
 * its message, a receive nothing. */
static double ring_bytes(const tt_grid *g, int gr, int op, long long bytes)
{
    const int n = gr == TT_GROUP_TP ? g->tp : gr == TT_GROUP_DP ? g->dp : g->pp;
    switch (op) {
    case TT_OP_ALLREDUCE: return tt_ring_bytes(TT_COLL_ALLREDUCE, n, (double)bytes);
    case TT_OP_ALLGATHER: return tt_ring_bytes(TT_COLL_ALLGATHER, n, (double)bytes);
    case TT_OP_REDUCE_SCATTER: return tt_ring_bytes(TT_COLL_REDUCE_SCATTER, n, (double)bytes);
    case TT_OP_SEND: return (double)bytes;
    case TT_OP_RECV: return 0.0;
    default: return tt_ring_bytes(TT_COLL_BCAST, n, (double)bytes);
    }
}

static void print_one(FILE *out, const tt_grid *g, int rank, const tt_comm_stats *ms,
                      const tt_comm_stats *ex)
{
    char name[48];
    fprintf(out, "  %s\n", tt_gpu_name(g, rank, name, sizeof name));
    fprintf(out, "    %-5s %-15s %9s %9s %14s %14s %9s %14s\n", "group", "operation", "calls",
            "expected", "bytes", "expected", "seconds", "ring bytes");
    for (int gr = 0; gr < TT_GROUP_OTHER; gr++)
        for (int op = 0; op < TT_NOPS; op++) {
            const tt_comm_count *c = &ms->c[gr][op], *e = &ex->c[gr][op];
            if (!c->calls && !e->calls)
                continue;
            fprintf(out, "    %-5s %-15s %9ld %9ld %14lld %14lld %9.3f %14.0f%s\n",
                    tt_group_names[gr], tt_op_names[op], c->calls, e->calls, c->bytes, e->bytes,
                    c->seconds, ring_bytes(g, gr, op, c->bytes),
                    c->calls == e->calls && c->bytes == e->bytes ? "" : "  <- differs");
        }
    /* Bookkeeping has no formula: one line of totals, for scale. */
    long calls = 0;
    long long bytes = 0;
    for (int op = 0; op < TT_NOPS; op++) {
        calls += ms->c[TT_GROUP_OTHER][op].calls;
        bytes += ms->c[TT_GROUP_OTHER][op].bytes;
    }
    fprintf(out, "    other (loss, clipping norm): %ld calls, %lld bytes\n", calls, bytes);
    calls = 0, bytes = 0;
    for (int op = 0; op < TT_NOPS; op++) {
        calls += ms->c[TT_GROUP_ORACLE][op].calls;
        bytes += ms->c[TT_GROUP_ORACLE][op].bytes;
    }
    if (calls)
        fprintf(out, "    oracle (--validate or the spot check; not training): %ld calls, %lld "
                     "bytes\n", calls, bytes);
}

/* What one GPU sends to rank 0 for the table. */
typedef struct {
    tt_comm_stats measured, expected;
} comm_record;

int tt_report_comm(FILE *out, const tt_run_config *rc, const tt_grid *g, const tt_model *m,
                   const tt_comm_stats *measured, long steps, int all_gpus)
{
    comm_record mine = {.measured = *measured};
    tt_comm_expected(&mine.expected, rc, g, m, steps);
    /* Every GPU's record goes to rank 0, which prints the tables; the
     * gathering is booked as other, so it cannot change what it reports. */
    comm_record *all = tt_gather_to_root(g, &mine, (int)sizeof mine);
    const int ok = !tt_agree_status(g, !matches(&mine.measured, &mine.expected));
    if (g->world_rank == 0 && out) {
        fprintf(out, "\ncommunication over %ld training step%s, measured and expected "
                     "(doc/communication.md)%s\n", steps, steps == 1 ? "" : "s",
                all_gpus ? "" : "; --report comm shows every GPU");
        for (int r = 0; r < (all_gpus ? g->world_size : 1); r++)
            print_one(out, g, r, &all[r].measured, &all[r].expected);
        fprintf(out, "every GPU's TP/PP/DP traffic equals its formula: %s\n", ok ? "yes" : "NO");
        fprintf(out, "seconds: %s inside the calls, waiting for the other members included "
                     "(the DP all-reduce: its rings' spans, partly beside compute); "
                     "ring bytes: what this GPU sends under ring algorithms (all-reduce "
                     "2(n-1)/n of the buffer, all-gather and reduce-scatter (n-1)/n)\n",
                tt_clock_label());
    }
    free(all);
    return ok;
}
