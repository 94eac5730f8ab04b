/* slots.c - the activations of one (micro-batch, chunk) kept between its
 * forward and its backward (with a zero-bubble schedule: its W). A pipeline
 * stage holds as many as its schedule has micro-batches in flight, so they
 * come from a pool that grows to the schedule's peak before the first step
 * (tt_slot_reserve) and are booked in the virtual GPU's memory account as
 * they are allocated. The head's buffers (ln_f, the logits, their softmax,
 * the losses) are a pool of their own, lent to the head chunk's slot while
 * it is held: a slot is then the same for every chunk of as many blocks, and
 * a stage keeps as many heads as its schedule holds head micro-batches at
 * once (under the interleaved schedule one, beside its other chunks' peak). */
#include "tt/model/model.h"
#include "model/model_internal.h"
#include "tt/core/common.h"
#include "tt/core/memory.h"

#include <stdlib.h>
#include <string.h>

/* Allocates one slot for local chunk j, sized for Bmax sequences: the
 * buffers of buffers.c's table, each block's (those recomputation rebuilds
 * come from the model's shared work set) and the slot's own. */
static tt_slot *slot_new(tt_model *m, int j)
{
    const int nb = m->chunk_len[j];
    tt_slot *s = tt_calloc(1, sizeof *s);
    s->chunk = j;
    s->acts = tt_calloc((size_t)(nb > 0 ? nb : 1), sizeof *s->acts);
    size_t bytes = 0;
    for (int l = 0; l < nb; l++)
        bytes += tt_bufs_alloc(m, &s->acts[l], TT_BUFS_BLOCK, 0, &m->work);
    bytes += tt_bufs_alloc(m, s, TT_BUFS_SLOT, 0, NULL);
    s->bytes = bytes;
    if (m->tracked)
        tt_mem_account(TT_MEM_ACTIVATIONS, s->bytes, "the activations of one more micro-batch");
    return s;
}

/* One entry of the head pool: a tt_slot holding the head's buffers only. */
static tt_slot *head_new(tt_model *m)
{
    tt_slot *h = tt_calloc(1, sizeof *h);
    h->bytes = tt_bufs_alloc(m, h, TT_BUFS_HEAD, 1, NULL);
    if (m->tracked)
        tt_mem_account(TT_MEM_ACTIVATIONS, h->bytes,
                       "the loss's activations of one more micro-batch");
    return h;
}

static void slot_free(tt_model *m, tt_slot *s)
{
    if (m->tracked)
        tt_mem_release(TT_MEM_ACTIVATIONS, s->bytes);
    for (int l = 0; l < m->chunk_len[s->chunk]; l++)
        tt_bufs_free(m, &s->acts[l], TT_BUFS_BLOCK);
    tt_bufs_free(m, s, TT_BUFS_SLOT);
    free(s->acts);
    free(s);
}

static void head_free(tt_model *m, tt_slot *h)
{
    if (m->tracked)
        tt_mem_release(TT_MEM_ACTIVATIONS, h->bytes);
    tt_bufs_free(m, h, TT_BUFS_HEAD);
    free(h);
}

/* Appends s to a pool of *n entries (capacity *cap), growing it. */
static tt_slot *pool_add(tt_slot ***pool, int *n, int *cap, tt_slot *s)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 8;
        tt_slot **grown = tt_malloc((size_t)*cap * sizeof *grown);
        if (*n)
            memcpy(grown, *pool, (size_t)*n * sizeof *grown);
        free(*pool);
        *pool = grown;
    }
    return (*pool)[(*n)++] = s;
}

/* A free slot for local chunk j, without the head's buffers. */
static tt_slot *slot_take(tt_model *m, int j, int B)
{
    tt_slot *s = NULL;
    for (int i = 0; i < m->nslots && !s; i++)
        if (!m->slots[i]->in_use && m->slots[i]->chunk == j)
            s = m->slots[i];
    /* A free slot of another chunk with the same buffers serves as well: a
     * stage holds what its chunks hold at once, not each chunk's own most
     * (under the interleaved schedule they peak at different times). */
    for (int i = 0; i < m->nslots && !s; i++)
        if (!m->slots[i]->in_use && m->cls[m->slots[i]->chunk] == m->cls[j])
            s = m->slots[i];
    if (!s)
        s = pool_add(&m->slots, &m->nslots, &m->slots_cap, slot_new(m, j));
    s->in_use = 1;
    s->chunk = j;
    s->B = B;
    if (++m->slots_in_use > m->slots_peak)
        m->slots_peak = m->slots_in_use;
    return s;
}

static tt_slot *head_take(tt_model *m)
{
    for (int i = 0; i < m->nheads; i++)
        if (!m->heads[i]->in_use) {
            m->heads[i]->in_use = 1;
            return m->heads[i];
        }
    tt_slot *h = pool_add(&m->heads, &m->nheads, &m->heads_cap, head_new(m));
    h->in_use = 1;
    return h;
}

tt_slot *tt_slot_acquire(tt_model *m, int j, int B)
{
    tt_slot *s = slot_take(m, j, B);
    if (tt_has_head(m, j)) {
        s->head = head_take(m);
        tt_bufs_lend(m, s, s->head, TT_BUFS_HEAD);
    }
    return s;
}

void tt_slot_release(tt_model *m, tt_slot *s)
{
    if (s && s->in_use) {
        s->in_use = 0;
        m->slots_in_use--;
        if (s->head) {
            s->head->in_use = 0;
            s->head = NULL;
            tt_bufs_lend(m, s, NULL, TT_BUFS_HEAD);
        }
    }
}

void tt_slot_reserve(tt_model *m, int j, int n)
{
    /* Hold n slots of the chunk at once (allocating what is missing), then
     * give them all back. */
    tt_slot **tmp = tt_malloc((size_t)(n > 0 ? n : 1) * sizeof *tmp);
    for (int i = 0; i < n; i++)
        tmp[i] = slot_take(m, j, m->Bmax);
    for (int i = 0; i < n; i++)
        tt_slot_release(m, tmp[i]);
    free(tmp);
}

void tt_slot_reserve_heads(tt_model *m, int n)
{
    while (m->nheads < n)
        pool_add(&m->heads, &m->nheads, &m->heads_cap, head_new(m));
}

void tt_slots_free(tt_model *m)
{
    for (int i = 0; i < m->nslots; i++)
        slot_free(m, m->slots[i]);
    for (int i = 0; i < m->nheads; i++)
        head_free(m, m->heads[i]);
    free(m->slots);
    free(m->heads);
    m->slots = m->heads = NULL;
    m->nslots = m->slots_cap = m->nheads = m->heads_cap = 0;
}
