/* plan.c - the planner's search (tt/app/plan.h): every layout of N GPUs the
 * flags leave open (tp x pp x dp, schedule, micro-batches, recomputation,
 * sequence parallelism, ZeRO) within the enumeration's bounds, each priced by
 * plan_cost.c, then ranked and each loser told why it loses; plus the
 * checkpoint figures of the whole job. doc/planner.md writes every formula
 * out. */
#include "tt/app/plan.h"
#include "app/plan_internal.h"
#include "tt/app/flags.h"
#include "tt/app/run.h"
#include "tt/comm/grid.h"
#include "tt/model/cost.h"
#include "tt/model/model.h"
#include "tt/parallel/pipeline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int divides(long a, long b) { return a > 0 && b % a == 0; }

/* A step time to the nanosecond: layouts whose times differ only in the
 * last bits of their sums are a tie, which the smaller memory breaks. */
static double step_key(double s) { return nearbyint(s * 1e9); }

/* Best first: those that fit by step time (then less memory), then those
 * that do not by memory. */
static int by_rank(const void *pa, const void *pb)
{
    const tt_plan_candidate *a = pa, *b = pb;
    if (a->fits != b->fits)
        return b->fits - a->fits;
    double ka = a->fits ? step_key(a->step_seconds) : a->memory[TT_PMEM_TOTAL];
    double kb = b->fits ? step_key(b->step_seconds) : b->memory[TT_PMEM_TOTAL];
    if (ka != kb)
        return ka < kb ? -1 : 1;
    return a->memory[TT_PMEM_TOTAL] < b->memory[TT_PMEM_TOTAL] ? -1
           : a->memory[TT_PMEM_TOTAL] > b->memory[TT_PMEM_TOTAL];
}

/* A candidate's pipeline busy time in two parts: what recomputation adds
 * (its share of the hardware FLOPs) and the rest, the kernels themselves
 * (more of them without sequence parallelism, slower when smaller), TP
 * collectives apart. */
static void busy_parts(const tt_plan_candidate *c, double *recompute, double *compute)
{
    const double busy = c->pipeline_seconds * (1 - c->bubble);
    *recompute = (c->hardware_flops - c->flops) / c->hardware_flops * busy;
    *compute = busy - c->tp_seconds - *recompute;
}

/* Why a candidate loses to the best: of the parts of the step the two are
 * priced by, the one it spends the most more time in, as a share of its own
 * step; when no part differs by half a percent, small parts spread thin
 * (latencies of messages, kernels whose cost does not shrink with the
 * micro-batch). */
static void explain(tt_plan_candidate *c, const tt_plan_candidate *best, const tt_plan *pl)
{
    if (!c->fits) {
        const double U = tt_plan_mem_unit(pl);
        snprintf(c->why, sizeof c->why, "does not fit (%.2f %s > %.2f %s)",
                 c->memory[TT_PMEM_TOTAL] / U, tt_plan_mem_name(pl),
                 pl->cluster.gpu_memory_bytes / U, tt_plan_mem_name(pl));
        return;
    }
    if (c == best) {
        snprintf(c->why, sizeof c->why, "best");
        return;
    }
    const double s = c->step_seconds;
    if (step_key(s) == step_key(best->step_seconds)) {
        snprintf(c->why, sizeof c->why, "%s",
                 c->memory[TT_PMEM_TOTAL] > best->memory[TT_PMEM_TOTAL] ? "ties with #1, holds more"
                                                                       : "ties with #1");
        return;
    }
    double rec_c, comp_c, rec_b, comp_b;
    busy_parts(c, &rec_c, &comp_c);
    busy_parts(best, &rec_b, &comp_b);
    struct { double more; const char *what; } f[] = {
        {comp_c - comp_b, "compute"},
        {c->bubble * c->pipeline_seconds - best->bubble * best->pipeline_seconds, "bubble"},
        {c->tp_seconds - best->tp_seconds, c->tp_across_servers ? "TP across servers"
                                                                : "TP collectives"},
        {c->dp_seconds - best->dp_seconds, c->zero >= 2 ? "ZeRO collectives" : "DP all-reduce"},
        {rec_c - rec_b, "recompute"},
        {c->optimizer_seconds - best->optimizer_seconds, "optimizer"},
    };
    const int n = (int)(sizeof f / sizeof f[0]);
    int k = 0;
    for (int i = 1; i < n; i++)
        if (f[i].more > f[k].more)
            k = i;
    if (f[k].more > 0.005 * s)
        snprintf(c->why, sizeof c->why, "%s (+%.0f%% of its step)", f[k].what,
                 100 * f[k].more / s);
    else
        snprintf(c->why, sizeof c->why, "small parts, spread thin (+%.2g%%)",
                 100 * (s - best->step_seconds) / s);
}

/* The splits of N GPUs into tp x pp x dp that the pins allow and the model
 * and batch take (tt_layout_check), tp then pp ascending: the search's
 * outer loop, listed first so that the progress line can say how far it has
 * got. *out: [n][2] (tp, pp), freed by the caller. With a size pinned, the
 * last refused split's reason goes to why (the one the search reports when
 * none is left). */
static int splits_of(int N, const tt_run_config *rc, int (**out)[2], tt_err *why)
{
    const tt_layout_rules rules = {.heads = rc->model.NH, .layers = rc->model.L,
                                   .batch = rc->batch, .micro_batches = 1, .virtual_stages = 1};
    int n = 0, cap = 0;
    *out = NULL;
    for (int tp = 1; tp <= N; tp++) {
        if (!divides(tp, N) || (rc->tp > 0 && tp != rc->tp))
            continue;
        for (int pp = 1; pp <= N / tp; pp++) {
            const int dp = N / tp / pp;
            if (!divides(pp, N / tp) || (rc->pp > 0 && pp != rc->pp) ||
                (rc->dp > 0 && dp != rc->dp))
                continue;
            tt_err le;
            if (tt_layout_check(N, tp, pp, dp, &rules, &le)) {
                if (rc->tp > 0 || rc->pp > 0 || rc->dp > 0)
                    *why = le;
                continue;
            }
            *out = tt_grow(*out, n, &cap, sizeof **out);
            (*out)[n][0] = tp, (*out)[n][1] = pp;
            n++;
        }
    }
    return n;
}

/* When no split of N GPUs takes the model and batch: the nearest GPU counts
 * below and above that do, appended to why. A count is tp x pp x dp with tp
 * dividing the heads, pp at most the layers and dp dividing the batch
 * (tt_layout_check's rules), so for each (tp, dp) the multiples of tp x dp
 * nearest N are the candidates: divisors x divisors steps, whatever N. */
static void nearest_gpus(int N, const tt_run_config *rc, char *why, size_t n)
{
    const long H = rc->model.NH, L = rc->model.L, B = rc->batch;
    long lo = 0, hi = 0;
    for (long tp = 1; tp <= H; tp++)
        for (long dp = 1; dp <= B && !(H % tp); dp++) {
            if (B % dp)
                continue;
            const long td = tp * dp, below = (N - 1) / td, above = N / td + 1;
            if (below >= 1 && td * (below < L ? below : L) > lo)
                lo = td * (below < L ? below : L);
            if (above <= L && (!hi || td * above < hi))
                hi = td * above;
        }
    tt_appendf(why, n, " (tp must divide the %d heads, pp be at most the %d layers, dp divide "
                       "the batch of %d", rc->model.NH, rc->model.L, rc->batch);
    if (lo && hi)
        tt_appendf(why, n, "; the nearest GPU counts that can: %ld and %ld)", lo, hi);
    else if (lo || hi)
        tt_appendf(why, n, "; the nearest GPU count that can: %ld)", lo ? lo : hi);
    else
        tt_appendf(why, n, ")");
}

/* When the search priced nothing: does training refuse the pinned flags
 * on every split the search tried? Its checks in its order (tt_config_check,
 * the layout rules tt_grid_choose applies, then tt_run_layout_check), so a
 * refusal is in training's words; the flags left open take the values it
 * refuses least (no ZeRO, recomputation or SP, 1F1B, and every micro-batch
 * count in turn). The first refusal goes to e; 0 when some split passes, and
 * the planner's own reason stands. */
static int pins_refused(const tt_run_config *rc, int N, int (*splits)[2], int n, int pinned_sp,
                        tt_err *e)
{
    tt_run_config as_run = *rc;
    const unsigned g = rc->given;
    if (!(g & TT_GIVEN_ZERO))
        as_run.zero = 0;
    if (!(g & TT_GIVEN_RECOMPUTE))
        as_run.recompute = TT_RECOMPUTE_NONE;
    if (!pinned_sp)
        as_run.sequence_parallel = 0;
    if (!(g & TT_GIVEN_SCHEDULE))
        as_run.schedule = TT_SCHED_1F1B, as_run.virtual_stages = 1;
    tt_err first = {{0}};
    const int pinned_m = !!(g & TT_GIVEN_MICRO);
    for (int i = 0; i < n; i++) {
        const int tp = splits[i][0], pp = splits[i][1], dp = N / tp / pp;
        const int per_dp = rc->batch / dp;
        const int lo = pinned_m ? rc->micro_batches : 1, hi = pinned_m ? lo : per_dp;
        for (int m = lo; m <= hi; m++) {
            if (!pinned_m && per_dp % m)
                continue;
            as_run.micro_batches = m;
            const tt_layout_rules rules = {.heads = rc->model.NH, .layers = rc->model.L,
                                           .batch = rc->batch, .micro_batches = m,
                                           .virtual_stages = as_run.virtual_stages};
            tt_err le;
            if (!tt_config_check(&as_run, &le) && !tt_layout_check(N, tp, pp, dp, &rules, &le) &&
                !tt_run_layout_check(&as_run, tp, pp, dp, &le))
                return 0;
            if (!first.msg[0])
                first = le;
        }
    }
    if (!first.msg[0])
        return 0;
    *e = first;
    return -1;
}

/* The pinned sizes' product: it must divide the GPUs, and be them when all
 * three are pinned (tt_layout_check says so of the ranks a run starts). */
static int pinned_product_refused(const tt_run_config *rc, int N, tt_err *e)
{
    const int sizes[3] = {rc->tp, rc->pp, rc->dp};
    const char *names[3] = {"--tp", "--pp", "--dp"};
    char what[96] = "";
    long prod = 1;
    int k = 0;
    for (int i = 0; i < 3; i++)
        if (sizes[i] > 0) {
            tt_appendf(what, sizeof what, "%s%s %d", k++ ? " x " : "", names[i], sizes[i]);
            prod *= sizes[i];
        }
    if (k < 2 || (k == 3 ? prod == N : N % prod == 0))
        return 0;
    if (k == 3)
        return tt_fail(e, "--plan: %s = %ld GPUs, but --gpus is %d (give --gpus %ld, or leave "
                          "one size open)", what, prod, N, prod);
    return tt_fail(e, "--plan: %s = %ld GPUs does not divide --gpus %d", what, prod, N);
}

/* A plan for many GPUs takes seconds (thousands of layouts, each of their
 * schedules simulated), a huge one minutes: on a terminal, stderr says how
 * far it has got, once a second after the first, on a line wiped before the
 * table prints. Redirected or under mpirun, where a \r would litter the
 * file, a plain line every 10 s after the first 10 (a realistic plan is done
 * before, and says nothing). */
typedef struct {
    int tty, shown;
    double start, next;
    int split, splits; /* the tp x pp x dp split under way (from 1), of how many */
} plan_progress;

static void progress_tick(plan_progress *pg, const tt_plan *pl, int tp, int pp)
{
    const double now = tt_now();
    if (now < pg->next)
        return;
    pg->next = now + (pg->tty ? 1.0 : 10.0);
    pg->shown = pg->tty;
    /* Splits, not layouts: a deeper pipeline has more micro-batch counts
     * and longer schedules to simulate, so the last splits take longest. */
    fprintf(stderr, "%splanning: split %d of %d (tp %d pp %d), %d layouts evaluated, %.0f s%s",
            pg->tty ? "\r" : "", pg->split, pg->splits, tp, pp, pl->n, now - pg->start,
            pg->tty ? " " : "\n");
    fflush(stderr);
}

static void progress_end(const plan_progress *pg)
{
    if (pg->shown)
        fprintf(stderr, "\r%72s\r", "");
}

int tt_plan_make(tt_plan *pl, const tt_run_config *rc, tt_err *e)
{
    memset(pl, 0, sizeof *pl);
    if (tt_cluster_load(&pl->cluster, rc->cluster, e))
        return -1;
    const tt_config *cfg = &rc->model;
    if (cfg->C % cfg->NH)
        return tt_fail(e, "--heads %d must divide --dim %d (head size = dim / heads)", cfg->NH,
                       cfg->C);
    pl->model = *cfg;
    pl->batch = rc->batch;
    pl->mixed = rc->precision_mixed;
    pl->train_tokens = rc->train_tokens;
    pl->gpus = rc->gpus;
    if (!pl->gpus) {
        if (rc->tp > 0 && rc->pp > 0 && rc->dp > 0) {
            /* In 64 bits, within --gpus's own range (an int product wraps). */
            const long long n = (long long)rc->tp * rc->pp * rc->dp;
            if (n > TT_MAX_GPUS)
                return tt_fail(e, "--plan: --tp %d x --pp %d x --dp %d = %lld GPUs, more than "
                                  "the %d --gpus allows", rc->tp, rc->pp, rc->dp, n, TT_MAX_GPUS);
            pl->gpus = (int)n;
        } else
            return tt_fail(e, "--plan needs --gpus N (or all of --tp, --pp and --dp)");
    }
    tt_shard_spec whole = tt_shard_whole(cfg);
    tt_shard_memory sm;
    tt_shard_memory_of(cfg, &whole, 0, &sm);
    pl->parameters = (double)sm.param_floats;
    /* Checkpoints hold the fp32 weights and both Adam moments (section 6):
     * 12 bytes per parameter, written at the storage's bandwidth. Young
     * (1974) / Daly (2006): interval = sqrt(2 x write time x MTBF of the job). */
    const tt_cluster *cl = &pl->cluster;
    pl->checkpoint_bytes = 12.0 * pl->parameters;
    pl->checkpoint_write_seconds = pl->checkpoint_bytes / cl->storage_bandwidth;
    pl->job_mtbf_seconds = cl->gpu_mtbf_hours * 3600.0 / pl->gpus;
    pl->checkpoint_interval = sqrt(2.0 * pl->checkpoint_write_seconds * pl->job_mtbf_seconds);

    tt_plan_cache cache = {0};
    tt_plan_ctx x = {rc, cl, pl, &cache};
    const int N = pl->gpus;
    const struct { const char *flag; int v; } pins[] = {{"--tp", rc->tp}, {"--pp", rc->pp},
                                                        {"--dp", rc->dp}};
    for (int i = 0; i < 3; i++)
        if (pins[i].v > 0 && N % pins[i].v)
            return tt_fail(e, "--plan: %s %d does not divide --gpus %d", pins[i].flag, pins[i].v,
                           N);
    if (pinned_product_refused(rc, N, e))
        return -1;
    const int pinned_sched = !!(rc->given & TT_GIVEN_SCHEDULE);
    const int pinned_m = !!(rc->given & TT_GIVEN_MICRO);
    /* With the whole layout given (--tp, --pp, --dp, --zero, --recompute),
     * sequence parallelism is what the flags say too: off unless given. */
    const int pinned_sp = (rc->given & TT_GIVEN_SP) ||
                          (rc->tp > 0 && rc->pp > 0 && rc->dp > 0 &&
                           (rc->given & TT_GIVEN_ZERO) && (rc->given & TT_GIVEN_RECOMPUTE));
    tt_err why_none = {{0}};
    int why_pp = 0, zero_without_dp = 0;
    snprintf(why_none.msg, sizeof why_none.msg, "no layout of %d GPUs divides the model and batch",
             N);
    const int tty = isatty(STDERR_FILENO) && !tt_launched();
    int(*splits)[2];
    plan_progress pg = {.tty = tty, .start = tt_now(), .next = tt_now() + (tty ? 1.0 : 10.0),
                        .splits = splits_of(N, rc, &splits, &why_none)};
    if (pg.splits == 0 && rc->tp <= 0 && rc->pp <= 0 && rc->dp <= 0)
        nearest_gpus(N, rc, why_none.msg, sizeof why_none.msg);
    for (pg.split = 1; pg.split <= pg.splits; pg.split++) {
        const int tp = splits[pg.split - 1][0], pp = splits[pg.split - 1][1];
        const int dp = N / tp / pp;
        const int per_dp = rc->batch / dp;
        for (int sched = 0; sched < tt_schedule_count(); sched++) {
            /* The schedules the registry plans (naive and the zero-bubble
             * ones only when asked for); one stage runs 1F1B whatever. */
            if (pinned_sched ? sched != rc->schedule
                             : (pp == 1 ? sched != TT_SCHED_1F1B : !tt_schedule_planned(sched)))
                continue;
            for (int m = 1; m <= per_dp; m++) {
                if (!divides(m, per_dp) || (pinned_m && m != rc->micro_batches))
                    continue;
                /* Enough micro-batches to fill a pipe, or on one stage
                 * to hold fewer activations at once (gradient
                 * accumulation), few enough to simulate quickly: the
                 * enumeration's bounds. */
                if (!pinned_m && m > 8 * pp + 8)
                    continue;
                for (int rec = 0; rec < 3; rec++) {
                    if ((rc->given & TT_GIVEN_RECOMPUTE) && rec != rc->recompute)
                        continue;
                    for (int sp = 0; sp < 2; sp++) {
                        if (pinned_sp ? sp != rc->sequence_parallel
                                                     : sp && tp == 1)
                            continue;
                        if (sp && (tp == 1 || (per_dp / m * cfg->T) % tp))
                            continue;
                        /* ZeRO shards over the DP group: none without one,
                         * pinned or not (training refuses it too). */
                        int zeros[4], nz = 0;
                        for (int z = 0; z < 4; z++)
                            if ((!z || dp > 1) &&
                                (!(rc->given & TT_GIVEN_ZERO) || z == rc->zero))
                                zeros[nz++] = z;
                        if (nz == 0) { /* the reason only when none other is */
                            zero_without_dp = 1;
                            continue;
                        }
                        tt_plan_candidate c = {.tp = tp, .pp = pp, .dp = dp,
                                               .recompute = rec, .sequence_parallel = sp,
                                               .schedule = sched,
                                               .virtual_stages = rc->virtual_stages,
                                               .micro_batches = m};
                        if (!(rc->given & TT_GIVEN_VIRTUAL))
                            c.virtual_stages = tt_schedule_default_v(sched);
                        /* here: one layout of a deep model can take seconds */
                        progress_tick(&pg, pl, tp, pp);
                        /* When none runs, the reason is the deepest
                         * pipeline's: a shallower one may fail only for
                         * its depth (zb-v on pp 1) and hide the conflict
                         * the flags have (zb-v with --recompute). */
                        tt_err ce;
                        if (tt_plan_evaluate(&x, &c, zeros, nz, &ce) && pp > why_pp) {
                            why_none = ce;
                            why_pp = pp;
                        }
                    }
                }
            }
        }
    }
    progress_end(&pg);
    tt_plan_cache_free(&cache);
    /* No schedule was tried: the pins may be what training refuses
     * together (--sequence-parallel on tp 1, a micro-batch count that does
     * not divide), which the search only skips. */
    tt_err pinned;
    const int refused = pl->n == 0 && why_pp == 0 && !zero_without_dp &&
                        pins_refused(rc, N, splits, pg.splits, pinned_sp, &pinned);
    free(splits);
    if (pl->n == 0) {
        tt_plan_free(pl);
        if (why_pp == 0 && zero_without_dp)
            return tt_fail(e, "--plan: --zero %d needs a data-parallel group: ZeRO shards over "
                              "the dp GPUs, and every layout the other flags allow has dp 1 "
                              "(leave --dp open or give 2 or more, or --zero 0)", rc->zero);
        return tt_fail(e, "--plan: %s", (refused ? pinned : why_none).msg);
    }
    qsort(pl->c, (size_t)pl->n, sizeof *pl->c, by_rank);
    for (int i = 0; i < pl->n; i++)
        explain(&pl->c[i], &pl->c[0], pl);
    return 0;
}

void tt_plan_free(tt_plan *pl)
{
    free(pl->c);
    pl->c = NULL;
    pl->n = pl->cap = 0;
}
