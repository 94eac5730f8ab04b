/* slots.c - the activations of one (micro-batch, chunk) kept between its
 * forward and its backward (with a zero-bubble schedule: its W). A pipeline
 * stage holds as many as its schedule has micro-batches in flight, so they
 * come from a pool that grows to the schedule's peak before the first step
 * (tt_slot_reserve) and are booked in the virtual GPU's memory account as
 * they are allocated. Three pools: slots (a chunk's output and tokens, the
 * same for every chunk), blocks' activations and the head's buffers (ln_f,
 * the logits, their softmax, the losses), the last two lent to a slot while
 * it is held. Chunks of a stage peak at different times and may differ in
 * blocks (interleaved, zb-v), so a stage keeps the most slots, blocks and
 * heads its schedule holds at once, not each chunk's own most: under the
 * interleaved schedule the last stage holds one head beside its other
 * chunks' micro-batches, not a whole slot more. */
#include "tt/model/model.h"
#include "model/model_internal.h"
#include "tt/core/common.h"
#include "tt/core/memory.h"

#include <stdlib.h>
#include <string.h>

/* Allocates one slot's own buffers (buffers.c's table), sized for Bmax
 * sequences, with room for the most blocks of a local chunk. */
static tt_slot *slot_new(tt_model *m)
{
    tt_slot *s = tt_calloc(1, sizeof *s);
    s->acts = tt_calloc((size_t)m->nb_max, sizeof *s->acts);
    s->lent = tt_calloc((size_t)m->nb_max, sizeof *s->lent);
    s->bytes = tt_bufs_alloc(m, s, TT_BUFS_SLOT, 0, NULL);
    return s;
}

/* One block's activations (those recomputation rebuilds come from the
 * model's shared work set). */
static tt_block_slot *block_new(tt_model *m)
{
    tt_block_slot *b = tt_calloc(1, sizeof *b);
    b->bytes = tt_bufs_alloc(m, &b->a, TT_BUFS_BLOCK, 0, &m->work);
    return b;
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

static void book(tt_model *m, size_t bytes)
{
    if (m->tracked)
        tt_mem_account(TT_MEM_ACTIVATIONS, bytes, "the activations of one more micro-batch");
}

static void unbook(tt_model *m, size_t bytes)
{
    if (m->tracked)
        tt_mem_release(TT_MEM_ACTIVATIONS, bytes);
}

static tt_slot *add_slot(tt_model *m, tt_slot *s)
{
    m->slots = tt_grow(m->slots, m->nslots, &m->slots_cap, sizeof *m->slots);
    return m->slots[m->nslots++] = s;
}

static tt_block_slot *add_block(tt_model *m, tt_block_slot *b)
{
    m->blocks = tt_grow(m->blocks, m->nblocks, &m->blocks_cap, sizeof *m->blocks);
    return m->blocks[m->nblocks++] = b;
}

static tt_slot *add_head(tt_model *m, tt_slot *h)
{
    m->heads = tt_grow(m->heads, m->nheads, &m->heads_cap, sizeof *m->heads);
    return m->heads[m->nheads++] = h;
}

/* A free entry of each pool, allocating one when it runs dry (its bytes
 * added to *fresh, booked by the caller with the rest of the micro-batch). */
static tt_slot *free_slot(tt_model *m, size_t *fresh)
{
    for (int i = 0; i < m->nslots; i++)
        if (!m->slots[i]->in_use)
            return m->slots[i];
    tt_slot *s = add_slot(m, slot_new(m));
    *fresh += s->bytes;
    return s;
}

static tt_block_slot *free_block(tt_model *m, size_t *fresh)
{
    for (int i = 0; i < m->nblocks; i++)
        if (!m->blocks[i]->in_use)
            return m->blocks[i];
    tt_block_slot *b = add_block(m, block_new(m));
    *fresh += b->bytes;
    return b;
}

static tt_slot *free_head(tt_model *m)
{
    for (int i = 0; i < m->nheads; i++)
        if (!m->heads[i]->in_use)
            return m->heads[i];
    return add_head(m, head_new(m));
}

tt_slot *tt_slot_acquire(tt_model *m, int j, int B)
{
    size_t fresh = 0;
    tt_slot *s = free_slot(m, &fresh);
    s->in_use = 1;
    s->chunk = j;
    s->B = B;
    for (int l = 0; l < m->chunk_len[j]; l++) {
        tt_block_slot *b = free_block(m, &fresh);
        b->in_use = 1;
        s->lent[l] = b;
        s->acts[l] = b->a; /* the buffers' pointers */
    }
    if (fresh)
        book(m, fresh);
    if (tt_has_head(m, j)) {
        s->head = free_head(m);
        s->head->in_use = 1;
        tt_bufs_lend(m, s, s->head, TT_BUFS_HEAD);
    }
    return s;
}

void tt_slot_release(tt_model *m, tt_slot *s)
{
    if (!s || !s->in_use)
        return;
    s->in_use = 0;
    for (int l = 0; l < m->chunk_len[s->chunk]; l++) {
        s->lent[l]->in_use = 0;
        s->lent[l] = NULL;
        memset(&s->acts[l], 0, sizeof s->acts[l]);
    }
    if (s->head) {
        s->head->in_use = 0;
        s->head = NULL;
        tt_bufs_lend(m, s, NULL, TT_BUFS_HEAD);
    }
}

void tt_slot_reserve(tt_model *m, int slots, int blocks, int heads)
{
    while (m->nheads < heads)
        add_head(m, head_new(m));
    /* A slot with the blocks of a micro-batch of the longest chunk, booked
     * together: an out-of-memory message then names what one more
     * micro-batch needs (tt_slot_acquire books the same way), not one
     * block's share of it. */
    while (m->nslots < slots || m->nblocks < blocks) {
        size_t bytes = 0;
        if (m->nslots < slots)
            bytes += add_slot(m, slot_new(m))->bytes;
        for (int l = 0; l < m->nb_max && m->nblocks < blocks; l++)
            bytes += add_block(m, block_new(m))->bytes;
        book(m, bytes);
    }
}

void tt_slots_free(tt_model *m)
{
    for (int i = 0; i < m->nslots; i++) {
        tt_slot *s = m->slots[i];
        unbook(m, s->bytes);
        tt_bufs_free(m, s, TT_BUFS_SLOT);
        free(s->acts);
        free(s->lent);
        free(s);
    }
    for (int i = 0; i < m->nblocks; i++) {
        unbook(m, m->blocks[i]->bytes);
        tt_bufs_free(m, &m->blocks[i]->a, TT_BUFS_BLOCK);
        free(m->blocks[i]);
    }
    for (int i = 0; i < m->nheads; i++) {
        unbook(m, m->heads[i]->bytes);
        tt_bufs_free(m, m->heads[i], TT_BUFS_HEAD);
        free(m->heads[i]);
    }
    free(m->slots);
    free(m->blocks);
    free(m->heads);
    m->slots = m->heads = NULL;
    m->blocks = NULL;
    m->nslots = m->slots_cap = m->nblocks = m->blocks_cap = m->nheads = m->heads_cap = 0;
}
