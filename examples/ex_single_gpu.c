/* ex_single_gpu.c - the smallest use of the library: one virtual GPU trains
 * a 2-block GPT for a few steps on the generated corpus and checks that the
 * loss went down. */
#include <stdio.h>
#include <stdlib.h>

#include "tt/core/data.h"
#include "tt/model/model.h"
#include "tt/train/optim.h"
#include "tt/train/train.h"

int main(void)
{
    tt_run_config rc = {0};
    rc.model = (tt_config){.V = 256, .C = 32, .L = 2, .NH = 4, .T = 32};
    rc.batch = 8;
    rc.micro_batches = 2;
    rc.steps = 30;
    rc.optim = (tt_optim_config){.lr = 1e-2, .lr_min = 1e-3, .warmup = 5, .weight_decay = 0.0,
                                 .clip = 1.0, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
    tt_corpus corpus;
    tt_corpus_generate(&corpus, 1 << 16, 7);
    tt_model m;
    tt_shard_spec whole = tt_shard_whole(&rc.model);
    tt_model_init(&m, &rc.model, &whole, rc.batch / rc.micro_batches, 7);
    rc.virtual_stages = 1;
    tt_pipe pipe; /* one stage: micro-batches one after the other */
    tt_err err;
    if (tt_pipe_init(&pipe, &m, &rc, NULL, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return EXIT_FAILURE;
    }
    double first = 0, last = 0;
    for (long s = 0; s < rc.steps; s++) {
        tt_step_stats st = tt_train_step(&pipe, &corpus, s, NULL);
        if (s == 0)
            first = st.loss;
        last = st.loss;
    }
    printf("one virtual GPU: loss %.3f -> %.3f over %ld steps\n", first, last, rc.steps);
    tt_pipe_free(&pipe);
    tt_model_free(&m);
    tt_corpus_free(&corpus);
    if (!(last < first - 1.0)) {
        printf("FAIL: the loss should fall by more than 1 nat\n");
        return EXIT_FAILURE;
    }
    printf("OK\n");
    return EXIT_SUCCESS;
}
