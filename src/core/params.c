/* params.c - the parameter table and its layout-independent initialisation. */
#include "tt/core/params.h"
#include "tt/core/common.h"
#include "tt/core/memory.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tt_params_add(tt_params *p, const char *name, int ndim, int rows, int cols,
                  tt_split split, int offset, int local)
{
    p->t = tt_grow(p->t, p->n, &p->cap, sizeof *p->t);
    tt_tensor *t = &p->t[p->n];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->gshape[0] = rows;
    t->gshape[1] = ndim == 2 ? cols : 1;
    t->lshape[0] = t->gshape[0];
    t->lshape[1] = t->gshape[1];
    t->split = split;
    t->offset = split == TT_SPLIT_NONE ? 0 : offset;
    if (split == TT_SPLIT_ROWS)
        t->lshape[0] = local;
    else if (split == TT_SPLIT_COLS)
        t->lshape[1] = local;
    t->decay = ndim == 2;
    t->numel = (size_t)t->lshape[0] * (size_t)t->lshape[1];
    return p->n++;
}

/* Where each kind is booked in the virtual GPU's memory account. */
static const tt_mem_cat kind_cat[TT_NKINDS] = {TT_MEM_WEIGHTS, TT_MEM_GRADS, TT_MEM_OPTIMIZER,
                                               TT_MEM_OPTIMIZER};
static const char *const kind_what[TT_NKINDS] = {"weights", "weight gradients", "Adam m",
                                                 "Adam v"};

void tt_params_alloc(tt_params *p)
{
    size_t total = 0;
    for (int i = 0; i < p->n; i++) {
        p->t[i].off = total;
        total += p->t[i].numel;
    }
    p->total = total;
    /* One buffer per kind, each its own entry in the memory account, so a
     * technique that shards or drops one kind (ZeRO) changes only that one. */
    p->tracked = tt_mem_is_tracking();
    for (int k = 0; k < TT_NKINDS; k++) {
        p->buf[k] = tt_calloc(total ? total : 1, sizeof(float));
        tt_mem_account(kind_cat[k], total * sizeof(float), kind_what[k]);
    }
    for (int i = 0; i < p->n; i++) {
        tt_tensor *t = &p->t[i];
        t->w = p->buf[TT_W] + t->off;
        t->g = p->buf[TT_G] + t->off;
        t->m = p->buf[TT_M] + t->off;
        t->v = p->buf[TT_V] + t->off;
    }
}

void tt_params_free(tt_params *p)
{
    for (int k = 0; k < TT_NKINDS; k++) {
        if (p->buf[k] && p->tracked)
            tt_mem_release(kind_cat[k], p->total * sizeof(float));
        free(p->buf[k]);
    }
    free(p->t);
    memset(p, 0, sizeof *p);
}

float *tt_params_buffer(const tt_params *p, tt_kind k) { return p->buf[k]; }

float *tt_tensor_data(const tt_tensor *t, tt_kind k)
{
    return k == TT_W ? t->w : k == TT_G ? t->g : k == TT_M ? t->m : t->v;
}

int tt_tensor_replicated(const tt_tensor *t) { return t->split == TT_SPLIT_NONE; }

void tt_tensor_origin(const tt_tensor *t, int *r0, int *c0)
{
    *r0 = t->split == TT_SPLIT_ROWS ? t->offset : 0;
    *c0 = t->split == TT_SPLIT_COLS ? t->offset : 0;
}

int tt_tensor_canonical(const tt_tensor *t, int dp_rank, int tp_rank)
{
    return dp_rank == 0 && (t->split != TT_SPLIT_NONE || tp_rank == 0);
}

int tt_params_find(const tt_params *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->t[i].name, name) == 0)
            return i;
    return -1;
}

int tt_tensor_real_rows(const tt_tensor *t)
{
    if (t->split != TT_SPLIT_ROWS)
        return t->lshape[0];
    int real = t->gshape[0] - t->offset;
    if (real < 0)
        real = 0;
    return real < t->lshape[0] ? real : t->lshape[0];
}

/* SplitMix64's finaliser: a bijective mix of 64 bits, good enough to turn a
 * counter into independent-looking random bits. */
static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* FNV-1a of the tensor name: the stream identifier. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    return h;
}

double tt_hash_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint64_t z = mix64(mix64(seed ^ mix64(stream)) + index);
    return (double)(z >> 11) * (1.0 / 9007199254740992.0); /* 53 bits */
}

float tt_hash_normal(uint64_t seed, const char *name, uint64_t index)
{
    /* Box-Muller on two uniforms drawn from the element's own counters, so the
     * value depends on nothing but (seed, name, index). */
    uint64_t s = name_hash(name);
    double u1 = tt_hash_uniform(seed, s, 2 * index);
    double u2 = tt_hash_uniform(seed, s, 2 * index + 1);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

void tt_params_init(tt_params *p, uint64_t seed, int n_layers)
{
    const double std = 0.02;
    const double std_resid = 0.02 / sqrt(2.0 * (n_layers > 0 ? n_layers : 1));
    for (int i = 0; i < p->n; i++) {
        tt_tensor *t = &p->t[i];
        memset(t->w, 0, t->numel * sizeof(float));
        int is_ln = strstr(t->name, ".ln1.") || strstr(t->name, ".ln2.") ||
                    strncmp(t->name, "ln_f.", 5) == 0;
        if (ends_with(t->name, ".bias"))
            continue; /* biases start at 0 */
        if (is_ln) {
            for (size_t e = 0; e < t->numel; e++)
                t->w[e] = 1.0f;
            continue;
        }
        double sd = (strstr(t->name, "attn.proj") || strstr(t->name, "mlp.fc2")) ? std_resid : std;
        int rows = tt_tensor_real_rows(t), lcols = t->lshape[1], gcols = t->gshape[1];
        int r0, c0;
        tt_tensor_origin(t, &r0, &c0);
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < lcols; c++) {
                uint64_t gi = (uint64_t)(r0 + r) * (uint64_t)gcols + (uint64_t)(c0 + c);
                t->w[(size_t)r * lcols + c] = (float)(sd * tt_hash_normal(seed, t->name, gi));
            }
    }
}

void tt_params_zero_grads(tt_params *p)
{
    if (p->buf[TT_G])
        memset(p->buf[TT_G], 0, p->total * sizeof(float));
}

size_t tt_tensor_real_numel(const tt_tensor *t)
{
    return (size_t)tt_tensor_real_rows(t) * (size_t)t->lshape[1];
}

void tt_slice_copy(const tt_tensor *t, float *shard, float *whole, int to_whole)
{
    const size_t rows = (size_t)tt_tensor_real_rows(t), lc = (size_t)t->lshape[1];
    const size_t gc = (size_t)t->gshape[1];
    int r0, c0;
    tt_tensor_origin(t, &r0, &c0);
    for (size_t r = 0; r < rows; r++) {
        float *w = whole + ((size_t)r0 + r) * gc + (size_t)c0, *s = shard + r * lc;
        memcpy(to_whole ? w : s, to_whole ? s : w, lc * sizeof(float));
    }
}
