/* tests/ckpt_values.h - values for checkpoint tests that are a pure
 * function of (global tensor, element, array), so that shards of any layout
 * hold the slices of one and the same global model. */
#ifndef TT_CKPT_VALUES_H
#define TT_CKPT_VALUES_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "tt/core/params.h"

/* The bit pattern of element gidx of the global tensor `name`, array `kind`
 * (0 = w, 1 = m, 2 = v): any 32 bits, NaN payloads included, since a
 * checkpoint must carry bytes, not just values. */
static inline uint32_t bits_at(const char *name, int kind, size_t gidx)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (const char *s = name; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    uint64_t z = h + 0x9E3779B97F4A7C15ull * (uint64_t)(3 * gidx + (size_t)kind + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)(z ^ (z >> 31));
}

static inline float *array_of(tt_tensor *t, int kind)
{
    return kind == 0 ? t->w : kind == 1 ? t->m : t->v;
}

/* Global index of local element (r, c) of t. */
static inline size_t global_index(const tt_tensor *t, int r, int c)
{
    int r0 = t->split == TT_SPLIT_ROWS ? t->offset : 0;
    int c0 = t->split == TT_SPLIT_COLS ? t->offset : 0;
    return (size_t)(r0 + r) * (size_t)t->gshape[1] + (size_t)(c0 + c);
}

/* Fills every real element of every shard with its global pattern and every
 * padding element with `pad_bits`. */
static inline void fill(tt_params *p, uint32_t pad_bits)
{
    for (int i = 0; i < p->n; i++) {
        tt_tensor *t = &p->t[i];
        int real = tt_tensor_real_rows(t);
        for (int kind = 0; kind < 3; kind++) {
            float *a = array_of(t, kind);
            for (int r = 0; r < t->lshape[0]; r++)
                for (int c = 0; c < t->lshape[1]; c++) {
                    uint32_t b = r < real ? bits_at(t->name, kind, global_index(t, r, c))
                                          : pad_bits;
                    memcpy(&a[(size_t)r * t->lshape[1] + c], &b, 4);
                }
        }
    }
}

/* 0 when every shard holds exactly its slice of the global patterns and
 * zeros in its padding rows; else 1, with the first difference in msg. */
static inline int filled_mismatch(tt_params *p, char *msg, size_t n)
{
    for (int i = 0; i < p->n; i++) {
        tt_tensor *t = &p->t[i];
        int real = tt_tensor_real_rows(t);
        for (int kind = 0; kind < 3; kind++) {
            float *a = array_of(t, kind);
            for (int r = 0; r < t->lshape[0]; r++)
                for (int c = 0; c < t->lshape[1]; c++) {
                    uint32_t want = r < real ? bits_at(t->name, kind, global_index(t, r, c)) : 0;
                    uint32_t got;
                    memcpy(&got, &a[(size_t)r * t->lshape[1] + c], 4);
                    if (got != want) {
                        snprintf(msg, n, "%s kind %d (%d,%d): %08x, expected %08x", t->name,
                                 kind, r, c, (unsigned)got, (unsigned)want);
                        return 1;
                    }
                }
        }
    }
    return 0;
}

#endif
