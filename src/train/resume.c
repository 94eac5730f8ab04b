/* resume.c - checkpoints as seen by a run: completing a resumed run's
 * configuration from the file (every flag the user did not give), and saving
 * the run's state collectively. The file format itself is the checkpoint
 * module's. */
#include "tt/train/resume.h"
#include "tt/train/checkpoint.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

/* Adopts the checkpoint's model config and hyper-parameters for every flag the
 * user did not give, and refuses a model shape that contradicts it. */
static int merge_resume(tt_run_config *rc, const tt_ckpt_info *info, tt_err *e)
{
    const tt_config *ck = &info->run.model;
    struct { unsigned bit; const char *flag; int *mine; int theirs; } shape[] = {
        {TT_GIVEN_LAYERS, "--layers", &rc->model.L, ck->L},
        {TT_GIVEN_DIM, "--dim", &rc->model.C, ck->C},
        {TT_GIVEN_HEADS, "--heads", &rc->model.NH, ck->NH},
        {TT_GIVEN_SEQ, "--seq", &rc->model.T, ck->T},
    };
    for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++) {
        if ((rc->given & shape[i].bit) && *shape[i].mine != shape[i].theirs)
            return tt_fail(e, "checkpoint '%s' holds a model with %s %d, but %s %d was given",
                           rc->resume, shape[i].flag, shape[i].theirs, shape[i].flag,
                           *shape[i].mine);
        *shape[i].mine = shape[i].theirs;
    }
    if (ck->V != rc->model.V)
        return tt_fail(e, "checkpoint '%s' has a vocabulary of %d, this program uses %d",
                       rc->resume, ck->V, rc->model.V);
    /* Hyper-parameters: the flag when given, else the checkpoint's. */
    const tt_run_config *r = &info->run;
    struct { unsigned bit; void *mine; const void *theirs; size_t size; } hyper[] = {
        {TT_GIVEN_BATCH, &rc->batch, &r->batch, sizeof rc->batch},
        {TT_GIVEN_MICRO, &rc->micro_batches, &r->micro_batches, sizeof rc->micro_batches},
        {TT_GIVEN_STEPS, &rc->steps, &r->steps, sizeof rc->steps},
        {TT_GIVEN_LR, &rc->optim.lr, &r->optim.lr, sizeof rc->optim.lr},
        {TT_GIVEN_LR_MIN, &rc->optim.lr_min, &r->optim.lr_min, sizeof rc->optim.lr_min},
        {TT_GIVEN_WARMUP, &rc->optim.warmup, &r->optim.warmup, sizeof rc->optim.warmup},
        {TT_GIVEN_WD, &rc->optim.weight_decay, &r->optim.weight_decay,
         sizeof rc->optim.weight_decay},
        {TT_GIVEN_CLIP, &rc->optim.clip, &r->optim.clip, sizeof rc->optim.clip},
        {TT_GIVEN_BETA1, &rc->optim.beta1, &r->optim.beta1, sizeof rc->optim.beta1},
        {TT_GIVEN_BETA2, &rc->optim.beta2, &r->optim.beta2, sizeof rc->optim.beta2},
        {TT_GIVEN_SEED, &rc->seed, &r->seed, sizeof rc->seed},
    };
    for (size_t i = 0; i < sizeof hyper / sizeof hyper[0]; i++)
        if (!(rc->given & hyper[i].bit))
            memcpy(hyper[i].mine, hyper[i].theirs, hyper[i].size);
    rc->optim.eps = r->optim.eps;
    /* The corpus too: resuming on other data unseen would make the run's
     * second half differ from the first's for no visible reason. A --data
     * given now wins (continuing on a new corpus is a choice); run.c's
     * banner names the file either way. */
    static char data[sizeof info->data]; /* the run's config points at it */
    memcpy(data, info->data, sizeof data);
    rc->resume_data = info->has_data ? data : NULL;
    rc->resume_data_bytes = info->data_bytes;
    rc->resume_data_crc = info->data_crc;
    if (!rc->data && info->has_data && info->data[0]) {
        rc->data = data;
        rc->data_adopted = 1;
    }
    if (rc->steps < info->step)
        return tt_fail(e, "--steps %ld is below the checkpoint's step %ld ('%s'): --steps is "
                       "the total length of the run", rc->steps, info->step, rc->resume);
    return 0;
}

int tt_resume_prepare(tt_run_config *rc, tt_ckpt_info *info, tt_err *e)
{
    if (tt_checkpoint_read_info(rc->resume, info, e) || merge_resume(rc, info, e))
        return -1;
    rc->resume_step = info->step;
    rc->resume_steps = info->run.steps;
    rc->resume_optim = info->run.optim;
    rc->resume_print = info->fingerprint;
    return 0;
}

int tt_resume_auto(tt_run_config *rc, tt_err *e)
{
    if (!rc->save)
        return tt_fail(e, "--resume auto needs --save FILE: the checkpoint it continues from "
                          "when it exists, and where the run saves");
    struct stat st;
    if (lstat(rc->save, &st) != 0) {
        if (errno != ENOENT)
            return tt_fail(e, "--resume auto: cannot check checkpoint '%s': %s", rc->save,
                           strerror(errno));
        rc->resume = NULL;
        return 0;
    }
    /* A link is refused as --save refuses it, before any word of continuing
     * from it (it once said it continued, then refused the save; a dangling
     * one 'exists but cannot be continued from'). */
    if (S_ISLNK(st.st_mode))
        return tt_fail(e, "--save: cannot write checkpoint '%s': is a symbolic link (name the "
                          "file itself)", rc->save);
    /* Whatever else is there is examined by the reader: a damaged file or a
     * directory is refused there, and kept. */
    rc->resume = rc->save;
    return 1;
}

/* The loader carries bytes (its tests store NaN payloads); a run needs
 * values it can train from: a NaN or infinite weight or moment, or a
 * negative second moment (a running mean of squared gradients; Adam divides
 * by its root, so the weights would turn NaN one step later, far from the
 * cause), is a damaged file even when its checksums hold. */
int tt_resume_check_state(const tt_params *p, const char *path, tt_err *e)
{
    static const struct { tt_kind kind; const char *prefix; } arrays[] = {
        {TT_W, ""}, {TT_M, "optim.m."}, {TT_V, "optim.v."}};
    for (int i = 0; i < p->n; i++)
        for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++) {
            /* Weights whole; under ZeRO only the owned part of the moments
             * (stage 3: and weights) is held here (the other DP ranks check
             * theirs). */
            const tt_tensor *t = &p->t[i];
            size_t lo = 0, hi = t->numel;
            const float *a = tt_tensor_data(t, arrays[k].kind);
            if (tt_kind_sharded(p, arrays[k].kind)) {
                tt_tensor_owned(p, t, &lo, &hi);
                a = hi > lo ? tt_owned_data(p, t, arrays[k].kind, lo) : NULL;
            }
            for (size_t j = 0; j < hi - lo; j++) {
                if (!isfinite(a[j]))
                    return tt_fail(e, "checkpoint '%s': tensor '%s%s' holds a non-finite "
                                      "value (%g)", path, arrays[k].prefix, t->name,
                                   (double)a[j]);
                if (arrays[k].kind == TT_V && a[j] < 0.0f)
                    return tt_fail(e, "checkpoint '%s': tensor '%s%s' holds a negative second "
                                      "moment (%g; Adam's v is a mean of squares)", path,
                                   arrays[k].prefix, t->name, (double)a[j]);
            }
        }
    return 0;
}

int tt_run_save(const tt_run_config *rc, const tt_model *m, const tt_grid *g, long step,
                const char *path, tt_err *e)
{
    tt_ckpt_info info;
    memset(&info, 0, sizeof info);
    info.step = step;
    info.run = *rc;
    info.tp = g->tp;
    info.pp = g->pp;
    info.dp = g->dp;
    /* Collective: every GPU writes its canonical slices of the global
     * tensors with MPI-IO, so the file is the unsharded model's. */
    return tt_checkpoint_save_sharded(path, g, &m->P, &info, e);
}
