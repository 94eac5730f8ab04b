/* flags_check.c - the checks every rank runs on the configuration before any
 * work: the values against each other, and values that came from a
 * checkpoint against the flags' own ranges, so a bad value is reported once
 * (by rank 0) with the constraint it breaks instead of surfacing as a crash
 * or a hang. */
#include "tt/app/flags.h"
#include "tt/parallel/pipeline.h" /* tt_schedule_validate_chunks */

#include <stdio.h>
#include <string.h>

/* ---- checks across flags ------------------------------------------------ */

int tt_pictures_named(const tt_run_config *c, char *buf, size_t n)
{
    const char *names[] = {c->trace ? "--trace" : NULL, c->timeline ? "--timeline" : NULL,
                           c->plot && c->plot_nlogs == 0 ? "--plot" : NULL};
    const int given = (names[0] != NULL) + (names[1] != NULL) + (names[2] != NULL);
    buf[0] = '\0';
    for (int i = 0, k = 0; i < 3; i++)
        if (names[i]) {
            k++;
            tt_appendf(buf, n, "%s%s", k == 1 ? "" : k == given ? " and " : ", ", names[i]);
        }
    return given;
}

int tt_config_check(const tt_run_config *c, tt_err *e)
{
    const tt_config *m = &c->model;
    if (!c->plan) {
        /* The planner's own flags, and what only the planner can do yet. */
        if (c->given & TT_GIVEN_VOCAB)
            return tt_fail(e, "--vocab is for --plan only: training is byte-level (vocabulary "
                              "256)");
        const char *own = c->plan_json         ? "--plan-json"
                          : c->gpus              ? "--gpus"
                          : c->precision_mixed   ? "--precision mixed"
                          : c->train_tokens > 0 ? "--train-tokens"
                                                 : NULL;
        if (own)
            return tt_fail(e, "%s is for --plan only: the planner's flags (--plan-json, --gpus, "
                              "--precision, --train-tokens) do not apply to a training run", own);
    }
    if (m->C % m->NH != 0)
        return tt_fail(e, "--heads %d must divide --dim %d (head size = dim / heads)", m->NH, m->C);
    /* Before the layout, whose rule on chunks would count v chunks even for
     * a schedule that runs one (and propose a --layers that cannot help). */
    if (!c->plan &&
        tt_schedule_validate_chunks((tt_schedule_kind)c->schedule, c->virtual_stages, e))
        return -1;
    if (c->batch % c->micro_batches != 0)
        return tt_fail(e, "--micro-batches %d must divide --batch %d", c->micro_batches, c->batch);
    if (c->optim.lr_min > c->optim.lr)
        return tt_fail(e, "--lr-min %g is above --lr %g", c->optim.lr_min, c->optim.lr);
    if (c->quiet && c->verbose)
        return tt_fail(e, "--quiet (no step lines) and --verbose (every step line) contradict "
                          "each other: give one");
    /* Both shape ZeRO 0's bucketed all-reduce; ZeRO's collectives go one
     * unit (a block, the embeddings, the head) at a time, so given with
     * --zero 1-3 they would change nothing, unsaid. (The planner, which
     * searches ZeRO 0 too, takes --dp-bucket for its ZeRO 0 layouts.) */
    if (!c->plan && c->zero > 0 && !c->overlap)
        return tt_fail(e, "--no-overlap applies to --zero 0's all-reduce buckets; --zero %d's "
                          "collectives are blocking, a unit (a block, the embeddings, the head) "
                          "at a time, so it would change nothing", c->zero);
    if (!c->plan && c->zero > 0 && (c->given & TT_GIVEN_DP_BUCKET))
        return tt_fail(e, "--dp-bucket sizes --zero 0's all-reduce buckets; --zero %d's "
                          "collectives go a unit (a block, the embeddings, the head) at a time, "
                          "so it would change nothing", c->zero);
    if (c->save_every && !c->save)
        return tt_fail(e, "--save-every needs --save FILE");
    /* A stop past the end would be ignored: the run ends at --steps
     * anyway. A resumed run gets here with --steps from its checkpoint. */
    if (c->stop_at > 0 && c->steps == 0 && !c->resume)
        return tt_fail(e, "--stop-at %ld with --steps 0: a run of no steps has nothing to stop; "
                          "drop --stop-at", c->stop_at);
    if (c->stop_at > c->steps)
        return tt_fail(e, "--stop-at %ld is past --steps %ld%s (the run ends once its %ld step%s "
                          "%s done; --stop-at K stops before step K, so K can be at most %ld)",
                       c->stop_at, c->steps,
                       c->resume && !(c->given & TT_GIVEN_STEPS) ? " of the checkpoint" : "",
                       c->steps, c->steps == 1 ? "" : "s", c->steps == 1 ? "is" : "are",
                       c->steps);
    /* The pictures of the steps a run trains: --steps 0 trains none, and
     * would write a trace of no events titled with steps that never ran. (A
     * resumed run whose checkpoint is already at its end trains none too:
     * it says so and writes none, exit 0, since rerunning the command of a
     * finished job must succeed; see run.c.) */
    char which[64];
    const int given = tt_pictures_named(c, which, sizeof which);
    if (given > 0 && !c->resume && c->steps == 0)
        return tt_fail(e, "%s show%s the steps a run trains, and --steps 0 trains none: drop %s "
                          "or give --steps", which, given > 1 ? "" : "s", given > 1 ? "them" : "it");
    return 0;
}

/* ---- values that did not come from the command line ------------------------ */

/* A checkpoint's metadata key for row f: "--micro-batches" is
 * "micro_batches" (doc/design.md, "Checkpoint metadata keys"). */
static void meta_key(const tt_flag *f, char *buf, size_t n)
{
    snprintf(buf, n, "%s", f->name + 2);
    for (char *p = buf; *p; p++)
        if (*p == '-')
            *p = '_';
}

int tt_config_check_ranges(const tt_run_config *c, const char *source, tt_err *e)
{
    char key[64];
    for (size_t i = 0; i < tt_flag_count; i++) {
        const tt_flag *f = &tt_flags[i];
        /* The rows a resumed run may take from its checkpoint carry a given
         * bit; every other value is the flag's own or its default. */
        if (!f->given)
            continue;
        meta_key(f, key, sizeof key);
        long v;
        switch (f->kind) {
        case TT_FLAG_INT: v = *TT_FLAG_CFIELD(c, f, int); break;
        case TT_FLAG_LONG: v = *TT_FLAG_CFIELD(c, f, long); break;
        case TT_FLAG_U64:
            if (*TT_FLAG_CFIELD(c, f, uint64_t) > (uint64_t)f->hi)
                return tt_fail(e, "%s: '%s' = %llu is above %ld, the most %s takes", source, key,
                               (unsigned long long)*TT_FLAG_CFIELD(c, f, uint64_t), f->hi, f->name);
            continue;
        case TT_FLAG_DOUBLE: {
            double d = *TT_FLAG_CFIELD(c, f, double);
            if (!(d >= f->dlo && d <= f->dhi) && !(d == 0 && f->zero_off))
                return tt_fail(e, "%s: '%s' = %g is outside [%g, %g], the range of %s", source,
                               key, d, f->dlo, f->dhi, f->name);
            continue;
        }
        default: continue;
        }
        if (v < f->lo || v > f->hi)
            return tt_fail(e, "%s: '%s' = %ld is outside [%ld, %ld], the range of %s", source,
                           key, v, f->lo, f->hi, f->name);
    }
    /* eps has no flag: AdamW divides by sqrt(v) + eps, so it must be positive
     * (and a value above 1 is no epsilon). */
    if (!(c->optim.eps > 0 && c->optim.eps <= 1))
        return tt_fail(e, "%s: 'eps' = %g is outside (0, 1]", source, c->optim.eps);
    /* tt_config_check's rules between values, where the file brought both
     * (the model's shape always comes from it): values that contradict each
     * other are a damaged file, not flags the user gave (who would be told
     * "--heads 3 must divide --dim 16" with exit 2). One given, one not: a
     * usage error, which tt_config_check reports. */
    const unsigned g = c->given;
    if (c->model.C % c->model.NH != 0)
        return tt_fail(e, "%s: 'heads' = %d does not divide 'dim' = %d", source, c->model.NH,
                       c->model.C);
    if (!(g & (TT_GIVEN_BATCH | TT_GIVEN_MICRO)) && c->batch % c->micro_batches != 0)
        return tt_fail(e, "%s: 'micro_batches' = %d does not divide 'batch' = %d", source,
                       c->micro_batches, c->batch);
    if (!(g & (TT_GIVEN_LR | TT_GIVEN_LR_MIN)) && c->optim.lr_min > c->optim.lr)
        return tt_fail(e, "%s: 'lr_min' = %g is above 'lr' = %g", source, c->optim.lr_min,
                       c->optim.lr);
    return 0;
}
