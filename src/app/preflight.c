/* preflight.c - checks a run makes before it allocates the model, each one a
 * way a bad size or a bad file used to end in an abort or a hang:
 *
 *   memory   this GPU's share, bounded in 64 bits before anything is
 *            allocated (src/model/estimate.c), against the host's physical
 *            memory per rank and, for the parameter buffers, --gpu-mem
 *   corpus   every rank read the same bytes (size and CRC-32 agreed)
 *
 * The exact --gpu-mem account stays where it was, after the allocation
 * (tt_check_oom): what it reports is the figure of record; these checks
 * only stop what could not even be allocated. */
#include "tt/app/preflight.h"
#include "tt/comm/comm.h"
#include "tt/core/memory.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MIB(b) ((double)(b) / 1048576.0)

/* need and cap as two figures that differ where need > cap: whole MiB as a
 * rule, KiB below 1 MiB, bytes below 1 KiB, and decimals added until the
 * texts differ (else a --gpu-mem of 100K read "needs 0 MiB ..., --gpu-mem is
 * 0 MiB"). */
static void two_figures(uint64_t need, uint64_t cap, char *a, char *b, size_t n)
{
    const int kib = cap < (1u << 20);
    const double unit = kib ? 1024.0 : 1048576.0;
    for (int d = 0; d <= 3 && cap >= 1024; d++) {
        snprintf(a, n, "%.*f %s", d, (double)need / unit, kib ? "KiB" : "MiB");
        snprintf(b, n, "%.*f %s", d, (double)cap / unit, kib ? "KiB" : "MiB");
        if (strcmp(a, b) != 0)
            return;
    }
    snprintf(a, n, "%llu bytes", (unsigned long long)need);
    snprintf(b, n, "%llu bytes", (unsigned long long)cap);
}

/* The pipeline's transfer buffers (pipeline_run.c, allocate_for_list): per
 * micro-batch and local chunk at most an activation sent, a gradient sent
 * and one received, each one micro-batch wide. */
static double comm_bytes(const tt_run_config *rc, const tt_grid *g, int mbs)
{
    if (g->pp == 1)
        return 0;
    const double sp = rc->sequence_parallel && g->tp > 1 ? g->tp : 1; /* a TP rank's rows */
    return 3.0 * rc->micro_batches * rc->virtual_stages * 4.0 * mbs * rc->model.T *
           rc->model.C / sp;
}

int tt_preflight_memory(const tt_run_config *rc, const tt_grid *g, const tt_shard_spec *spec,
                        tt_err *e)
{
    const int mbs = tt_micro_batch_size(rc, g->dp);
    char name[64];
    tt_gpu_name(g, g->world_rank, name, sizeof name);
    const int ranks = tt_ranks_on_host(g); /* collective: before any return */
    /* The parameter buffers are exact (four kinds: weights, gradients, Adam
     * m and v); over --gpu-mem on their own, nothing else needs building. */
    uint64_t params = tt_model_bytes_bound(&rc->model, spec, 0, 0);
    if (spec->zero_stage) { /* sharded kinds: the allocation's own figures */
        tt_params table;
        size_t w, gr, opt;
        tt_model_shard_table(&table, &rc->model, spec);
        tt_params_zero_bytes(&table, &w, &gr, &opt);
        tt_params_free(&table);
        params = (uint64_t)w + gr + opt;
    }
    if (rc->gpu_mem && params > rc->gpu_mem) {
        char a[48], b[48];
        two_figures(params, rc->gpu_mem, a, b, sizeof a);
        return tt_fail(e, "%s needs %s for its weights, gradients and Adam state alone "
                          "(before activations), --gpu-mem is %s", name, a, b);
    }
    /* An upper bound of the rest: every local chunk holding all M
     * micro-batches of a step (a schedule holds at most that many), and on
     * rank 0 the unsharded reference of the oracle (--validate or the spot
     * check), which trains on the whole global batch. Doubles: the sum of
     * saturated 64-bit figures must not wrap. */
    double need = (double)tt_model_bytes_bound(&rc->model, spec, mbs, rc->micro_batches) +
                  comm_bytes(rc, g, mbs);
    if (g->world_rank == 0 && (rc->validate || (rc->spot_check && g->world_size > 1))) {
        tt_shard_spec whole = tt_shard_whole(&rc->model);
        need += (double)tt_model_bytes_bound(&rc->model, &whole, rc->batch, 1);
    }
    const uint64_t host = tt_mem_host_bytes();
    const double per_rank = (double)host / ranks;
    if (host == 0 || need <= per_rank)
        return 0;
    char also[64] = "";
    if (rc->gpu_mem && need > (double)rc->gpu_mem)
        snprintf(also, sizeof also, "; --gpu-mem is %.0f MiB", MIB(rc->gpu_mem));
    return tt_fail(e, "%s needs up to %.0f MiB for this model (an upper bound, computed before "
                      "allocating), but this host has %.0f MiB of memory per rank (%.0f MiB "
                      "physical / %d rank%s on this host)%s", name, MIB(need), MIB(per_rank),
                   MIB(host), ranks, ranks > 1 ? "s" : "", also);
}

int tt_preflight_corpus(const tt_grid *g, const tt_corpus *c, uint32_t crc, const char *path,
                        tt_err *e)
{
    /* Each rank read the file itself: a file being rewritten, or one whose
     * bytes depend on the reader (/proc/self/...), would train every
     * replica on different data without a word. Both values are compared on
     * every rank (no short cut: both are collectives). */
    const uint64_t n = c->n;
    int same = tt_group_all_equal(g, TT_GROUP_OTHER, crc);
    same &= tt_group_all_equal(g, TT_GROUP_OTHER, (uint32_t)(n ^ (n >> 32)));
    if (same)
        return 0;
    return tt_fail(e, "data file '%s' is not the same on every rank (its size or CRC-32 "
                      "differs): the ranks must read the same bytes", path);
}
