/* slots.c - the activations of one (micro-batch, chunk) kept between its
 * forward and its backward (with a zero-bubble schedule: its W). A pipeline stage holds as many as its schedule
 * has micro-batches in flight, so they come from a pool that grows to the
 * schedule's peak before the first step (tt_slot_reserve) and are booked in
 * the virtual GPU's memory account as they are allocated. */
#include "tt/model/model.h"
#include "model/model_internal.h"
#include "tt/core/common.h"
#include "tt/core/memory.h"

#include <stdlib.h>
#include <string.h>

/* Allocates one slot for local chunk j, sized for Bmax sequences. */
static tt_slot *slot_new(tt_model *m, int j)
{
    const size_t N = (size_t)m->Bmax * m->cfg.T;
    const size_t Ns = (size_t)tt_model_rows(m, m->Bmax); /* the split region's rows */
    const int C = m->cfg.C, T = m->cfg.T, Cl = m->Cl, Hl = m->Hl, nb = m->chunk_len[j];
    const size_t full = (size_t)m->sh.tp_size * N * Hl;
    const int gather = m->sh.mlp_gather && m->sh.tp_size > 1;
    tt_slot *s = tt_calloc(1, sizeof *s);
    s->chunk = j;
    s->acts = tt_calloc((size_t)(nb > 0 ? nb : 1), sizeof *s->acts);
    size_t floats = 0;
    /* What recomputation rebuilds comes from the model's shared work set. */
    const tt_block_acts *w = &m->work;
#define SLOT_BUF(ptr, n) (floats += (n), (ptr) = tt_fbuf(n))
#define SHARED_BUF(ptr, shared, n) ((shared) ? (void)((ptr) = (shared)) : (void)SLOT_BUF(ptr, n))
    for (int l = 0; l < nb; l++) {
        tt_block_acts *a = &s->acts[l];
        SLOT_BUF(a->x_in, Ns * C);
        SHARED_BUF(a->ln1, w->ln1, Ns * C);
        SHARED_BUF(a->ln1_mean, w->ln1_mean, Ns);
        SHARED_BUF(a->ln1_rstd, w->ln1_rstd, Ns);
        SHARED_BUF(a->q, w->q, N * Cl);
        SHARED_BUF(a->k, w->k, N * Cl);
        SHARED_BUF(a->v, w->v, N * Cl);
        SHARED_BUF(a->att, w->att, (size_t)m->Bmax * m->NHl * T * T);
        SHARED_BUF(a->atty, w->atty, N * Cl);
        SHARED_BUF(a->x_mid, w->x_mid, Ns * C);
        SHARED_BUF(a->ln2, w->ln2, Ns * C);
        SHARED_BUF(a->ln2_mean, w->ln2_mean, Ns);
        SHARED_BUF(a->ln2_rstd, w->ln2_rstd, Ns);
        SHARED_BUF(a->fc1, w->fc1, N * Hl);
        SHARED_BUF(a->gelu, w->gelu, N * Hl);
        if (gather) {
            SHARED_BUF(a->fc1_full, w->fc1_full, full);
            SHARED_BUF(a->gelu_full, w->gelu_full, full);
        }
        /* Zero-bubble schedules: B's output gradients wait here for W, so
         * they live as long as the slot and count as its activations. */
        if (m->sh.split_w) {
            SLOT_BUF(a->dq, N * Cl);
            SLOT_BUF(a->dk, N * Cl);
            SLOT_BUF(a->dv, N * Cl);
            SLOT_BUF(a->dproj, N * C);
            SLOT_BUF(a->dfc2, N * C);
            SLOT_BUF(a->dln1, N * C);
            SLOT_BUF(a->dln2, N * C);
            SLOT_BUF(a->dfc1, N * Hl);
        }
    }
    SLOT_BUF(s->x_out, Ns * C);
    if (tt_has_head(m, j)) {
        SLOT_BUF(s->lnf, Ns * C);
        SLOT_BUF(s->lnf_mean, Ns);
        SLOT_BUF(s->lnf_rstd, Ns);
        SLOT_BUF(s->logits, N * m->Vl);
        SLOT_BUF(s->probs, N * m->Vl);
        SLOT_BUF(s->losses, N);
    }
#undef SHARED_BUF
#undef SLOT_BUF
    s->idx = tt_calloc(N, sizeof(int));
    s->targets = tt_calloc(N, sizeof(int));
    s->bytes = floats * sizeof(float) + 2 * N * sizeof(int);
    if (m->tracked)
        tt_mem_account(TT_MEM_ACTIVATIONS, s->bytes, "the activations of one more micro-batch");
    return s;
}

static void slot_free(tt_model *m, tt_slot *s)
{
    if (m->tracked)
        tt_mem_release(TT_MEM_ACTIVATIONS, s->bytes);
    for (int l = 0; l < m->chunk_len[s->chunk]; l++) {
        tt_block_acts *a = &s->acts[l];
        const tt_block_acts *w = &m->work;
        float *bufs[] = {a->x_in, a->ln1, a->ln1_mean, a->ln1_rstd, a->q, a->k, a->v, a->att,
                         a->atty, a->x_mid, a->ln2, a->ln2_mean, a->ln2_rstd, a->fc1, a->gelu,
                         a->fc1_full, a->gelu_full};
        const float *shared[] = {NULL, w->ln1, w->ln1_mean, w->ln1_rstd, w->q, w->k, w->v,
                                 w->att, w->atty, w->x_mid, w->ln2, w->ln2_mean, w->ln2_rstd,
                                 w->fc1, w->gelu, w->fc1_full, w->gelu_full};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (!shared[i] || bufs[i] != shared[i])
                free(bufs[i]);
        float *kept_for_w[] = {a->dq, a->dk, a->dv, a->dproj, a->dfc2, a->dln1, a->dln2, a->dfc1};
        for (size_t i = 0; i < sizeof kept_for_w / sizeof kept_for_w[0]; i++)
            free(kept_for_w[i]);
    }
    float *bufs[] = {s->x_out, s->lnf, s->lnf_mean, s->lnf_rstd, s->logits, s->probs, s->losses};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(s->acts);
    free(s->idx);
    free(s->targets);
    free(s);
}

tt_slot *tt_slot_acquire(tt_model *m, int j, int B)
{
    tt_slot *s = NULL;
    for (int i = 0; i < m->nslots && !s; i++)
        if (!m->slots[i]->in_use && m->slots[i]->chunk == j)
            s = m->slots[i];
    if (!s) {
        if (m->nslots == m->slots_cap) {
            m->slots_cap = m->slots_cap ? 2 * m->slots_cap : 8;
            tt_slot **n = tt_malloc((size_t)m->slots_cap * sizeof *n);
            if (m->nslots)
                memcpy(n, m->slots, (size_t)m->nslots * sizeof *n);
            free(m->slots);
            m->slots = n;
        }
        s = m->slots[m->nslots++] = slot_new(m, j);
    }
    s->in_use = 1;
    s->B = B;
    if (++m->slots_in_use > m->slots_peak)
        m->slots_peak = m->slots_in_use;
    return s;
}

void tt_slot_reserve(tt_model *m, int j, int n)
{
    /* Hold n slots of the chunk at once (allocating what is missing), then
     * give them all back. */
    tt_slot **tmp = tt_malloc((size_t)(n > 0 ? n : 1) * sizeof *tmp);
    for (int i = 0; i < n; i++)
        tmp[i] = tt_slot_acquire(m, j, m->Bmax);
    for (int i = 0; i < n; i++)
        tt_slot_release(m, tmp[i]);
    free(tmp);
}

void tt_slot_release(tt_model *m, tt_slot *s)
{
    if (s && s->in_use) {
        s->in_use = 0;
        m->slots_in_use--;
    }
}


void tt_slots_free(tt_model *m)
{
    for (int i = 0; i < m->nslots; i++)
        slot_free(m, m->slots[i]);
    free(m->slots);
    m->slots = NULL;
    m->nslots = m->slots_cap = 0;
}
