/* train.c - the training loop of DESIGN section 5 on one virtual GPU: the
 * sampler's global batch in micro-batches, forward/backward, global-norm
 * clipping, AdamW on the warm-up + cosine schedule; eval, the per-step log,
 * checkpoints and a generated sample. */
#include "tt/train.h"
#include "tt/checkpoint.h"
#include "tt/common.h"
#include "tt/optim.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tt_step_stats tt_train_step(tt_model *m, const tt_run_config *rc, const tt_corpus *c, long step)
{
    tt_step_stats st = {0};
    double t0 = tt_now();
    const int T = rc->model.T, B = rc->batch, mb = B / rc->micro_batches;
    const float dloss = 1.0f / (float)((double)B * T); /* mean over the global batch */
    int *in = tt_malloc((size_t)mb * T * sizeof(int));
    int *tg = tt_malloc((size_t)mb * T * sizeof(int));

    tt_params_zero_grads(&m->P);
    double loss = 0.0;
    for (int k = 0; k < rc->micro_batches; k++) {
        tt_sample_batch(c, step, B, k * mb, mb, T, in, tg);
        loss += tt_model_forward(m, in, tg, mb) * mb;
        tt_model_backward(m, dloss);
    }
    st.loss = loss / B;
    st.grad_norm = sqrt(tt_grad_sumsq(&m->P, 1));
    st.lr = tt_lr_at(&rc->optim, step, rc->steps);
    tt_adamw_step(&m->P, &rc->optim, st.lr, step + 1, tt_clip_coef(rc->optim.clip, st.grad_norm));
    free(in);
    free(tg);
    st.seconds = tt_now() - t0;
    return st;
}

double tt_eval_loss(tt_model *m, const tt_run_config *rc, const tt_corpus *c)
{
    const int T = rc->model.T, mb = m->Bmax;
    int nw = tt_eval_windows(c, T, rc->eval_windows);
    if (nw == 0)
        return NAN;
    int *in = tt_malloc((size_t)mb * T * sizeof(int));
    int *tg = tt_malloc((size_t)mb * T * sizeof(int));
    double sum = 0.0;
    for (int k = 0; k < nw; k += mb) {
        int n = nw - k < mb ? nw - k : mb;
        tt_eval_batch(c, k, n, T, in, tg);
        sum += tt_model_forward(m, in, tg, n) * n;
    }
    free(in);
    free(tg);
    return sum / nw;
}

void tt_generate(tt_model *m, const char *prompt, int len, char *out)
{
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
        tt_model_forward(m, window, NULL, 1);
        const float *lg = m->logits + (size_t)(n - 1) * m->Vl;
        int best = 0;
        for (int v = 1; v < V; v++)
            if (lg[v] > lg[best])
                best = v;
        ctx[pos] = best;
    }
    for (int i = 0; i < total; i++)
        out[i] = (char)ctx[i];
    out[total] = '\0';
    free(ctx);
    free(window);
}

/* Print a generated sample with control bytes made visible, so a model that
 * has not learned yet cannot garble the terminal. */
static void print_sample(const char *s)
{
    printf("sample: \"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\n')
            printf("\\n");
        else if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 32 || *p >= 127)
            printf("\\x%02x", *p);
        else
            putchar(*p);
    }
    printf("\"\n");
}

static long count_params(const tt_model *m)
{
    long n = 0;
    for (int i = 0; i < m->P.n; i++)
        n += (long)m->P.t[i].gshape[0] * m->P.t[i].gshape[1];
    return n;
}

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
    const tt_run_config *r = &info->run;
    if (!(rc->given & TT_GIVEN_BATCH)) rc->batch = r->batch;
    if (!(rc->given & TT_GIVEN_MICRO)) rc->micro_batches = r->micro_batches;
    if (!(rc->given & TT_GIVEN_STEPS)) rc->steps = r->steps;
    if (!(rc->given & TT_GIVEN_LR)) rc->optim.lr = r->optim.lr;
    if (!(rc->given & TT_GIVEN_LR_MIN)) rc->optim.lr_min = r->optim.lr_min;
    if (!(rc->given & TT_GIVEN_WARMUP)) rc->optim.warmup = r->optim.warmup;
    if (!(rc->given & TT_GIVEN_WD)) rc->optim.weight_decay = r->optim.weight_decay;
    if (!(rc->given & TT_GIVEN_CLIP)) rc->optim.clip = r->optim.clip;
    if (!(rc->given & TT_GIVEN_BETA1)) rc->optim.beta1 = r->optim.beta1;
    if (!(rc->given & TT_GIVEN_BETA2)) rc->optim.beta2 = r->optim.beta2;
    if (!(rc->given & TT_GIVEN_SEED)) rc->seed = r->seed;
    rc->optim.eps = r->optim.eps;
    if (rc->steps < info->step)
        return tt_fail(e, "--steps %ld is below the checkpoint's step %ld ('%s'): --steps is "
                       "the total length of the run", rc->steps, info->step, rc->resume);
    return 0;
}

static int save(const tt_run_config *rc, const tt_model *m, long step, const char *path,
                tt_err *e)
{
    tt_ckpt_info info;
    memset(&info, 0, sizeof info);
    info.step = step;
    info.run = *rc;
    info.tp = info.pp = info.dp = 1;
    return tt_checkpoint_save(path, &m->P, &info, e);
}

#define SAY(...) do { if (rank == 0) printf(__VA_ARGS__); } while (0)

int tt_train_main(const tt_run_config *rc_in, int rank)
{
    tt_run_config rcv = *rc_in, *rc = &rcv;
    tt_err err;
    long step0 = 0;
    tt_ckpt_info info;

    if (rc->resume) {
        if (tt_checkpoint_read_info(rc->resume, &info, &err) || merge_resume(rc, &info, &err)) {
            if (rank == 0)
                fprintf(stderr, "tiny_transformer: %s\n", err.msg);
            return TT_EXIT_RUNTIME;
        }
        step0 = info.step;
    }
    if (tt_config_check(rc, &err)) {
        if (rank == 0)
            fprintf(stderr, "tiny_transformer: %s\n", err.msg);
        return TT_EXIT_USAGE;
    }

    tt_corpus corpus;
    if (rc->data) {
        if (tt_corpus_load(&corpus, rc->data, rc->model.T, &err)) {
            if (rank == 0)
                fprintf(stderr, "tiny_transformer: %s\n", err.msg);
            return TT_EXIT_RUNTIME;
        }
    } else {
        tt_corpus_generate(&corpus, 1 << 20, rc->seed);
    }

    tt_model model;
    tt_shard_spec whole = tt_shard_whole(&rc->model);
    /* Activations for one micro-batch; eval runs in chunks of the same size. */
    tt_model_init(&model, &rc->model, &whole, rc->batch / rc->micro_batches, rc->seed);
    int status = 0;
    FILE *log = NULL;
    if (rc->resume && tt_checkpoint_load(rc->resume, &model.P, &err)) {
        if (rank == 0)
            fprintf(stderr, "tiny_transformer: %s\n", err.msg);
        status = TT_EXIT_RUNTIME;
        goto done;
    }
    if (rc->log) {
        log = fopen(rc->log, "w");
        if (!log) {
            if (rank == 0)
                fprintf(stderr, "tiny_transformer: cannot write log '%s': %s\n", rc->log,
                        strerror(errno));
            status = TT_EXIT_RUNTIME;
            goto done;
        }
        fprintf(log, "step,loss,lr,grad_norm,ms,tokens_per_s,eval_loss\n");
    }

    SAY("tiny_transformer: 1 virtual GPU gpu0(dp0,pp0,tp0); model L=%d C=%d NH=%d T=%d V=%d, "
        "%ld parameters\n", rc->model.L, rc->model.C, rc->model.NH, rc->model.T, rc->model.V,
        count_params(&model));
    SAY("data: %s; train %zu bytes, eval %zu bytes\n", corpus.source, corpus.ntrain,
        corpus.n - corpus.ntrain);
    SAY("batch %d x %d tokens in %d micro-batch(es); steps %ld..%ld; lr %g -> %g, warm-up %d\n",
        rc->batch, rc->model.T, rc->micro_batches, step0, rc->steps, rc->optim.lr,
        rc->optim.lr_min, rc->optim.warmup);
    if (rc->resume)
        SAY("resumed from '%s' at step %ld\n", rc->resume, step0);
    fflush(stdout);

    /* This process trains steps [step0, end); the schedule spans --steps. */
    long end = rc->stop_at && rc->stop_at < rc->steps ? rc->stop_at : rc->steps;
    if (end < step0)
        end = step0;
    double first_loss = NAN, last_loss = NAN, t_start = tt_now();
    for (long s = step0; s < end; s++) {
        tt_step_stats st = tt_train_step(&model, rc, &corpus, s);
        if (!isfinite(st.loss)) {
            if (rank == 0)
                fprintf(stderr, "tiny_transformer: loss became %g at step %ld (try a lower --lr)\n",
                        st.loss, s);
            status = TT_EXIT_RUNTIME;
            goto done;
        }
        if (isnan(first_loss))
            first_loss = st.loss;
        last_loss = st.loss;
        double tok_s = (double)rc->batch * rc->model.T / st.seconds;
        double ev = NAN;
        if (rc->eval_every > 0 && (s + 1) % rc->eval_every == 0)
            ev = tt_eval_loss(&model, rc, &corpus);
        if (!rc->quiet) {
            SAY("step %5ld/%ld | loss %.4f | lr %.3e | grad norm %.4f | %7.1f ms | %8.0f tok/s",
                s, rc->steps, st.loss, st.lr, st.grad_norm, st.seconds * 1e3, tok_s);
            if (!isnan(ev))
                SAY(" | eval %.4f", ev);
            SAY("\n");
            fflush(stdout);
        }
        if (log) {
            fprintf(log, "%ld,%.9g,%.9g,%.9g,%.3f,%.1f,", s, st.loss, st.lr, st.grad_norm,
                    st.seconds * 1e3, tok_s);
            if (!isnan(ev))
                fprintf(log, "%.9g", ev);
            fprintf(log, "\n");
        }
        if (rc->save_every && (s + 1) % rc->save_every == 0 && s + 1 < end) {
            if (save(rc, &model, s + 1, rc->save, &err)) {
                if (rank == 0)
                    fprintf(stderr, "tiny_transformer: %s\n", err.msg);
                status = TT_EXIT_RUNTIME;
                goto done;
            }
        }
    }
    double secs = tt_now() - t_start;

    double ev = tt_eval_loss(&model, rc, &corpus);
    if (end > step0)
        SAY("trained steps %ld..%ld in %.1f s: loss %.4f -> %.4f", step0, end - 1, secs,
            first_loss, last_loss);
    else
        SAY("no steps to train (already at step %ld)", step0);
    if (!isnan(ev))
        SAY("; eval loss %.4f on %d held-out sequences", ev,
            tt_eval_windows(&corpus, rc->model.T, rc->eval_windows));
    SAY("\n");
    if (rc->save) {
        if (save(rc, &model, end, rc->save, &err)) {
            if (rank == 0)
                fprintf(stderr, "tiny_transformer: %s\n", err.msg);
            status = TT_EXIT_RUNTIME;
            goto done;
        }
        SAY("saved checkpoint '%s'\n", rc->save);
    }
    if (rc->sample_len > 0 && rank == 0) {
        char *out = tt_malloc(strlen(rc->prompt) + (size_t)rc->sample_len + 2);
        tt_generate(&model, rc->prompt, rc->sample_len, out);
        print_sample(out);
        free(out);
    }
done:
    if (log && fclose(log) && status == 0) {
        if (rank == 0)
            fprintf(stderr, "tiny_transformer: cannot write log '%s'\n", rc->log);
        status = TT_EXIT_RUNTIME;
    }
    fflush(stdout);
    tt_model_free(&model);
    tt_corpus_free(&corpus);
    return status;
}
