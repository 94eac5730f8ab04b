/* tt/show/banner.h - the lines a run prints before its first step, and the
 * generated sample at its end. */
#ifndef TT_SHOW_BANNER_H
#define TT_SHOW_BANNER_H

#include "tt/comm/grid.h"
#include "tt/core/config.h"
#include "tt/model/model.h"
#include "tt/core/data.h"

/* Rank 0 prints the layout, the model and its parameters, the parameters on
 * this GPU, the data, how the global batch is shared out, the DP buckets and
 * the steps this process trains from step0. */
void tt_banner_print(const tt_run_config *rc, const tt_grid *g, const tt_model *m,
                     const tt_corpus *corpus, long step0);

/* Prints the n bytes of a generated sample with control bytes made visible
 * (\x00 for a NUL: an untrained model can generate one, and the sample goes
 * on after it), so a model that has not learned yet cannot garble the
 * terminal. */
void tt_sample_print(FILE *out, const char *s, size_t n);

#endif
