/* model_internal.h - what the model's files share and nobody else needs. */
#ifndef TT_MODEL_INTERNAL_H
#define TT_MODEL_INTERNAL_H

#include "tt/core/common.h"
#include "tt/model/model.h"

/* Does local chunk j start with the embeddings / end with ln_f, lm_head and
 * the loss? */
static inline int tt_has_embedding(const tt_model *m, int j)
{
    return m->sh.first_stage && j == 0;
}
static inline int tt_has_head(const tt_model *m, int j)
{
    return m->sh.last_stage && j == m->nchunks - 1;
}

/* Zeroed floats. */
static inline float *tt_fbuf(size_t n) { return tt_calloc(n, sizeof(float)); }

/* Frees every activation slot of the pool (slots.c). */
void tt_slots_free(tt_model *m);

#endif
