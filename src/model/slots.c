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

/* Allocates one slot for local chunk j, sized for Bmax sequences: the
 * buffers of buffers.c's table, each block's (those recomputation rebuilds
 * come from the model's shared work set) and the slot's own. */
static tt_slot *slot_new(tt_model *m, int j)
{
    const int nb = m->chunk_len[j], head = tt_has_head(m, j);
    tt_slot *s = tt_calloc(1, sizeof *s);
    s->chunk = j;
    s->acts = tt_calloc((size_t)(nb > 0 ? nb : 1), sizeof *s->acts);
    size_t bytes = 0;
    for (int l = 0; l < nb; l++)
        bytes += tt_bufs_alloc(m, &s->acts[l], TT_BUFS_BLOCK, head, &m->work);
    bytes += tt_bufs_alloc(m, s, TT_BUFS_SLOT, head, NULL);
    s->bytes = bytes;
    if (m->tracked)
        tt_mem_account(TT_MEM_ACTIVATIONS, s->bytes, "the activations of one more micro-batch");
    return s;
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

tt_slot *tt_slot_acquire(tt_model *m, int j, int B)
{
    tt_slot *s = NULL;
    for (int i = 0; i < m->nslots && !s; i++)
        if (!m->slots[i]->in_use && m->slots[i]->chunk == j)
            s = m->slots[i];
    /* A free slot of another chunk with the same buffers serves as well: a
     * stage holds what its chunks hold at once, not each chunk's own most
     * (under the interleaved schedule they peak at different times). */
    int cls[TT_MAX_CHUNKS];
    tt_chunk_classes(&m->sh, cls);
    for (int i = 0; i < m->nslots && !s; i++)
        if (!m->slots[i]->in_use && cls[m->slots[i]->chunk] == cls[j])
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
    s->chunk = j;
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
