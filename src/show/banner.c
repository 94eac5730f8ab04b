/* banner.c - what a run says before its first step (the layout, the model,
 * the parameters one GPU holds, the data, the batch and how it is shared
 * out, the steps) and the sample it prints at the end. Rank 0 prints. */
#include "tt/show/banner.h"
#include "tt/comm/cores.h"
#include "tt/core/memory.h"
#include "tt/parallel/data_parallel.h"
#include "tt/train/optim.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* A corpus as a note names it: 'FILE', or the generated one (no --data, "" in
 * a checkpoint). */
static const char *corpus_name(const char *data, char *buf, size_t n)
{
    if (!data || !data[0])
        return "the generated corpus";
    snprintf(buf, n, "'%s'", data);
    return buf;
}

/* Parameters of the whole model (global shapes of every tensor). */
static long count_params(const tt_config *cfg)
{
    tt_params whole;
    tt_shard_spec spec = tt_shard_whole(cfg);
    tt_model_shard_table(&whole, cfg, &spec);
    long n = 0;
    for (int i = 0; i < whole.n; i++)
        n += (long)whole.t[i].gshape[0] * whole.t[i].gshape[1];
    tt_params_free(&whole);
    return n;
}

/* The learning rate's schedule is drawn over --steps, so resuming with
 * another --steps changes the rates of the steps to come, which nothing
 * else would say: the first step whose rate differs from the saved run's
 * schedule (its own --steps, --lr, --lr-min and --warmup), or, past that
 * run's end, from the rate it ended at. */
static void resume_lr_note(const tt_run_config *rc, long step0, long end)
{
    const long was = rc->resume_steps;
    if (!rc->resume || was <= 0 || was == rc->steps)
        return;
    const tt_optim_config *o = &rc->optim, *then = &rc->resume_optim;
    const char *also = o->lr != then->lr || o->lr_min != then->lr_min ||
                               o->warmup != then->warmup
                           ? " and the learning-rate flags given"
                           : "";
    for (long s = step0; s < end; s++) {
        const double now = tt_lr_at(o, s, rc->steps);
        if (s < was && now != tt_lr_at(then, s, was)) {
            printf("note: the checkpoint's run had --steps %ld; --steps %ld%s redraw%s the "
                   "learning-rate schedule, so step %ld trains at lr %.4g where that run's has "
                   "%.4g (to follow it, resume with --steps %ld%s; --stop-at N ends a run "
                   "early)\n", was, rc->steps, also, *also ? "" : "s", s, now,
                   tt_lr_at(then, s, was), was, *also ? " and without those flags" : "");
            return;
        }
        if (s >= was) {
            const double last = tt_lr_at(then, was - 1, was);
            /* A run that ended inside its warm-up goes on up the same ramp:
             * nothing is redrawn there. */
            if (now != last && s < then->warmup && !*also)
                printf("note: the checkpoint's run had --steps %ld and ended in its warm-up at "
                       "lr %.4g; --steps %ld continues the warm-up to step %ld, so step %ld "
                       "trains at lr %.4g\n", was, last, rc->steps,
                       (then->warmup < rc->steps ? (long)then->warmup : rc->steps) - 1, s, now);
            else if (now != last)
                printf("note: the checkpoint's run had --steps %ld and ended at lr %.4g; "
                       "--steps %ld%s draw%s the learning-rate schedule anew, so step %ld "
                       "trains at lr %.4g\n", was, last, rc->steps, also, *also ? "" : "s", s,
                       now);
            return;
        }
    }
}

/* What one virtual GPU holds: its slices of the split tensors (with any
 * vocabulary padding) and the whole replicated ones. */
static void print_param_memory(const tt_model *m, const tt_grid *g)
{
    long split_global = 0, split_local = 0, repl = 0;
    for (int i = 0; i < m->P.n; i++) {
        const tt_tensor *t = &m->P.t[i];
        if (tt_tensor_replicated(t)) {
            repl += (long)t->numel;
        } else {
            split_global += (long)t->gshape[0] * t->gshape[1];
            split_local += (long)t->numel;
        }
    }
    long per = split_global / g->tp, pad = split_local - per;
    long total = split_local + repl;
    char name[48];
    printf("parameters on %s: %ld split (%ld / tp %d", tt_gpu_name(g, g->world_rank, name, sizeof name),
           split_local, split_global, g->tp);
    if (pad)
        printf(", %+ld for the padded vocabulary", pad);
    char h[32];
    printf(") + %ld replicated = %ld floats, %s of weights (%s)\n", repl, total,
           tt_mem_human((size_t)total * 4, h, sizeof h),
           m->P.z.stage >= 3 ? "all four kinds sharded by ZeRO, see below"
           : m->P.z.stage    ? "gradients and Adam moments sharded by ZeRO, see below"
                        : "x4 with gradients and Adam moments");
}

#define SAY(...) do { if (rank == 0) printf(__VA_ARGS__); } while (0)

void tt_banner_print(const tt_run_config *rc, const tt_grid *g, const tt_model *m,
                   const tt_corpus *corpus, long step0)
{
    const int rank = g->world_rank;
    char name[48];
    SAY("tiny_transformer: %d virtual GPU%s as tp %d x pp %d x dp %d; model L=%d C=%d NH=%d "
        "T=%d V=%d, %ld parameters\n", g->world_size, g->world_size > 1 ? "s" : "", g->tp, g->pp,
        g->dp, rc->model.L, rc->model.C, rc->model.NH, rc->model.T, rc->model.V,
        count_params(&rc->model));
    if (rank == 0) {
        tt_cores_print(g, stdout, 0);
        print_param_memory(m, g);
    }
    SAY("data: %s%s; train %zu bytes, eval %zu bytes\n", corpus->source,
        rc->data_adopted ? " (the checkpoint's --data)" : "", corpus->ntrain,
        corpus->n - corpus->ntrain);
    /* A resumed run on other data than the checkpoint's, or on data it
     * cannot tell: the second half of the run would differ unseen. */
    if (rc->resume && !rc->resume_data)
        SAY("note: checkpoint '%s' does not say which data it trained on (it is older than "
            "that record); this run trains on %s\n", rc->resume,
            rc->data ? "its --data" : "the generated corpus (give --data FILE if it trained on a file)");
    else if (rc->resume && rc->data && rc->resume_data_bytes &&
             strcmp(rc->resume_data, rc->data) == 0 &&
             (rc->resume_data_bytes != rc->data_bytes || rc->resume_data_crc != rc->data_crc))
        SAY("note: '%s' is not the file checkpoint '%s' trained on: %" PRIu64 " bytes of "
            "CRC-32 %08" PRIx32 " then, %" PRIu64 " of %08" PRIx32 " now\n", rc->data, rc->resume,
            rc->resume_data_bytes, rc->resume_data_crc, rc->data_bytes, rc->data_crc);
    else if (rc->resume && strcmp(rc->resume_data, rc->data ? rc->data : "") != 0) {
        char then[PATH_MAX + 3], now[PATH_MAX + 3];
        SAY("note: checkpoint '%s' trained on %s; this run trains on %s\n", rc->resume,
            corpus_name(rc->resume_data, then, sizeof then), corpus_name(rc->data, now, sizeof now));
    }
    const int local = rc->batch / g->dp, mb = tt_micro_batch_size(rc, g->dp);
    SAY("global batch %d sequences x %d tokens; each DP replica takes %d in %d micro-batch%s "
        "of %d\n", rc->batch, rc->model.T, local, rc->micro_batches,
        rc->micro_batches > 1 ? "es" : "", mb);
    if (g->dp > 1)
        for (int d = 0; d < g->dp; d++)
            SAY("  %s: samples %d..%d of every step\n",
                tt_gpu_name(g, tt_grid_rank_of(g, d, 0, 0), name, sizeof name), d * local,
                (d + 1) * local - 1);
    if (g->dp > 1 && m->P.z.stage) {
        const tt_zero_part *z = &m->P.z;
        char h[32];
        SAY("ZeRO-%d over each DP group: %zu floats in %d units (embeddings, blocks, head), "
            "padded to %zu (%s); each DP rank owns 1/%d of every unit (%zu floats); per step "
            "%s, AdamW on the owned pieces, %s\n",
            z->stage, m->P.total, z->nunits, z->padded, tt_mem_human(z->padded * 4, h, sizeof h),
            z->parts, z->shard,
            z->stage >= 2 ? "each unit's gradients reduce-scattered as its backward ends, "
                            "every micro-batch"
                          : "one gradient reduce-scatter per unit",
            z->stage >= 3 ? "each unit's weights all-gathered before its forward and again "
                            "before its backward, every micro-batch"
                          : "one all-gather of the weights per unit");
    } else if (g->dp > 1) {
        const size_t n = m->P.total;
        const long buckets = tt_dp_buckets(n, rc->dp_bucket);
        char h[32];
        SAY("DP gradient sync: %zu floats (%s) summed per step in %ld all-reduce bucket%s "
            "of up to %zu bytes\n", n, tt_mem_human(n * 4, h, sizeof h), buckets,
            buckets > 1 ? "s" : "", rc->dp_bucket);
        /* --dp-bucket 25 is 25 bytes, not 25 MB: thousands of all-reduces,
         * each a meeting of the group, make the steps crawl. */
        if (buckets > 1000)
            SAY("note: a --dp-bucket of %zu bytes makes %ld all-reduces a step, each a meeting "
                "of the DP group: every step is slow (sizes take K and M: 256K, 4M)\n",
                rc->dp_bucket, buckets);
    }
    long end = rc->stop_at && rc->stop_at < rc->steps ? rc->stop_at : rc->steps;
    if (end > step0)
        SAY("steps %ld..%ld of %ld; lr %g -> %g, warm-up %d%s\n", step0, end - 1, rc->steps,
            rc->optim.lr, rc->optim.lr_min, rc->optim.warmup,
            rc->validate ? "; --validate: rank 0 also trains the unsharded reference" : "");
    else if (rc->stop_at && rc->stop_at <= step0 && step0 < rc->steps)
        SAY("no training steps in this run (at step %ld of %ld; --stop-at %ld is not past "
            "it)\n", step0, rc->steps, rc->stop_at);
    /* Otherwise the run's closing line says there were no steps, and why. */
    if (rc->resume)
        SAY("resumed from '%s' at step %ld\n", rc->resume, step0);
    /* A stop before the end is meant to be continued, which takes a file. */
    if (end > step0 && end < rc->steps && !rc->save)
        SAY("note: --stop-at %ld without --save: the run stops before step %ld and keeps no "
            "checkpoint to continue from\n", end, end);
    if (rank == 0)
        resume_lr_note(rc, step0, end);
    fflush(stdout);
}

/* Print a generated sample with control bytes made visible, so a model that
 * has not learned yet cannot garble the terminal. */
void tt_sample_print(FILE *out, const char *s, size_t n)
{
    fprintf(out, "sample: \"");
    for (const unsigned char *p = (const unsigned char *)s; p < (const unsigned char *)s + n; p++) {
        if (*p == '\n')
            fprintf(out, "\\n");
        else if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 32 || *p >= 127)
            fprintf(out, "\\x%02x", *p);
        else
            putc(*p, out);
    }
    fprintf(out, "\"\n");
}

