/* params.c - the parameter table, its layout-independent initialisation,
 * and ZeRO's partition of it into padded units and each rank's owned pieces. */
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
    /* a bounded copy (the planner builds thousands of tables: no printf) */
    const size_t len = strnlen(name, sizeof t->name - 1);
    memcpy(t->name, name, len);
    t->name[len] = '\0';
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

/* Which unit of the backward a tensor belongs to (tt_zero_part): its block,
 * or the embeddings (-1), or the head (-2). */
static int unit_key(const char *name)
{
    if (strncmp(name, "blocks.", 7) == 0 && name[7] >= '0' && name[7] <= '9')
        return (int)strtol(name + 7, NULL, 10);
    return strncmp(name, "tok_emb.", 8) == 0 || strncmp(name, "pos_emb.", 8) == 0 ? -1 : -2;
}

int tt_tensor_unit_key(const tt_tensor *t) { return unit_key(t->name); }

void tt_params_plan(tt_params *p)
{
    size_t total = 0, flat = 0;
    tt_zero_part *z = &p->z;
    const size_t parts = z->stage > 0 ? (size_t)z->parts : 1;
    free(z->ubegin);
    z->ubegin = NULL;
    z->nunits = 0;
    if (z->stage > 0)
        z->ubegin = tt_malloc(((size_t)p->n + 1) * sizeof *z->ubegin);
    for (int i = 0; i < p->n; i++) {
        tt_tensor *t = &p->t[i];
        if (z->stage > 0 && (i == 0 || unit_key(t->name) != unit_key(p->t[i - 1].name))) {
            flat = (flat + parts - 1) / parts * parts; /* the previous unit's padding */
            z->ubegin[z->nunits++] = flat;
        }
        t->unit = z->nunits - 1;
        t->off = flat;
        flat += t->numel;
        total += t->numel;
    }
    p->total = total;
    if (z->stage > 0) {
        flat = (flat + parts - 1) / parts * parts;
        z->ubegin[z->nunits] = flat;
        z->padded = flat;
        z->shard = flat / parts;
        z->max_unit = 0;
        for (int u = 0; u < z->nunits; u++)
            if (z->ubegin[u + 1] - z->ubegin[u] > z->max_unit)
                z->max_unit = z->ubegin[u + 1] - z->ubegin[u];
    }
}

void tt_params_set_zero(tt_params *p, int stage, int parts, int rank)
{
    free(p->z.ubegin);
    memset(&p->z, 0, sizeof p->z);
    if (stage > 0 && parts > 1) {
        p->z.stage = stage;
        p->z.parts = parts;
        p->z.rank = rank;
    }
    tt_params_plan(p);
}

void tt_zero_unit(const tt_params *p, int u, size_t *begin, size_t *n, size_t *lo)
{
    *begin = p->z.ubegin[u];
    *n = p->z.ubegin[u + 1] - p->z.ubegin[u];
    *lo = *begin + (size_t)p->z.rank * (*n / (size_t)p->z.parts);
}

/* Floats of each kind's buffer: the table's total without ZeRO; under it the
 * weights and stage 1's gradients padded, stage 2's gradient scratch one
 * (padded) unit, the moments (and stage 3's weights) the owned pieces. */
static size_t kind_floats(const tt_zero_part *z, size_t total, tt_kind k)
{
    if (z->stage == 0)
        return total;
    if (k == TT_G)
        return z->stage >= 2 ? z->max_unit : z->padded;
    return k == TT_W && z->stage < 3 ? z->padded : z->shard;
}

int tt_kind_sharded(const tt_params *p, tt_kind k)
{
    return p->z.stage > 0 && (k != TT_W || p->z.stage >= 3);
}

void tt_params_zero_bytes(const tt_params *p, size_t *weights, size_t *grads,
                          size_t *optimizer)
{
    const tt_zero_part *z = &p->z;
    *weights = 4 * (kind_floats(z, p->total, TT_W) + (z->stage >= 3 ? z->max_unit : 0));
    *grads = 4 * (kind_floats(z, p->total, TT_G) + (z->stage >= 2 ? z->shard : 0));
    *optimizer = 4 * (kind_floats(z, p->total, TT_M) + kind_floats(z, p->total, TT_V));
}

void tt_params_alloc(tt_params *p)
{
    tt_params_plan(p);
    /* One buffer per kind, each its own entry in the memory account, so a
     * technique that shards or drops one kind (ZeRO) changes only that one. */
    p->tracked = tt_mem_is_tracking();
    for (int k = 0; k < TT_NKINDS; k++) {
        size_t n = kind_floats(&p->z, p->total, (tt_kind)k);
        const char *what = p->z.stage >= 2 && k == TT_G ? "gradient scratch (one unit)"
                           : p->z.stage >= 3 && k == TT_W ? "weights (ZeRO pieces)"
                           : p->z.stage > 0 && k == TT_M ? "Adam m (ZeRO pieces)"
                           : p->z.stage > 0 && k == TT_V ? "Adam v (ZeRO pieces)"
                                                         : kind_what[k];
        p->buf[k] = tt_calloc(n ? n : 1, sizeof(float));
        tt_mem_account(kind_cat[k], n * sizeof(float), what);
    }
    if (p->z.stage >= 2) {
        p->gown = tt_calloc(p->z.shard ? p->z.shard : 1, sizeof(float));
        tt_mem_account(TT_MEM_GRADS, p->z.shard * sizeof(float), "owned gradient pieces (ZeRO)");
    }
    p->wunit = -1;
    if (p->z.stage >= 3) {
        p->wgather = tt_calloc(p->z.max_unit ? p->z.max_unit : 1, sizeof(float));
        tt_mem_account(TT_MEM_WEIGHTS, p->z.max_unit * sizeof(float),
                       "gathered weights (one unit)");
    }
    for (int i = 0; i < p->n; i++) {
        tt_tensor *t = &p->t[i];
        /* Stage 3: every unit is read from the one gather buffer, at its
         * place within the unit, while it is the unit gathered there. */
        t->w = p->z.stage >= 3 ? p->wgather + (t->off - p->z.ubegin[t->unit])
                               : p->buf[TT_W] + t->off;
        /* Stage 2: every unit accumulates in the one scratch, at its place
         * within the unit (one unit's backward at a time). */
        t->g = p->buf[TT_G] + (p->z.stage >= 2 ? t->off - p->z.ubegin[t->unit] : t->off);
        /* The moments exist only for the owned pieces: no per-tensor view. */
        t->m = p->z.stage ? NULL : p->buf[TT_M] + t->off;
        t->v = p->z.stage ? NULL : p->buf[TT_V] + t->off;
    }
}

void tt_params_free(tt_params *p)
{
    for (int k = 0; k < TT_NKINDS; k++) {
        if (p->buf[k] && p->tracked)
            tt_mem_release(kind_cat[k], kind_floats(&p->z, p->total, (tt_kind)k) * sizeof(float));
        free(p->buf[k]);
    }
    if (p->z.stage >= 2 && p->gown) {
        if (p->tracked)
            tt_mem_release(TT_MEM_GRADS, p->z.shard * sizeof(float));
        free(p->gown);
    }
    if (p->z.stage >= 3 && p->wgather) {
        if (p->tracked)
            tt_mem_release(TT_MEM_WEIGHTS, p->z.max_unit * sizeof(float));
        free(p->wgather);
    }
    free(p->z.ubegin);
    free(p->t);
    memset(p, 0, sizeof *p);
}

size_t tt_tensor_owned(const tt_params *p, const tt_tensor *t, size_t *a, size_t *b)
{
    if (p->z.stage == 0) {
        *a = 0;
        *b = t->numel;
        return t->numel;
    }
    size_t begin, n, lo;
    tt_zero_unit(p, t->unit, &begin, &n, &lo);
    const size_t hi = lo + n / (size_t)p->z.parts;
    size_t s = t->off > lo ? t->off : lo, e = t->off + t->numel < hi ? t->off + t->numel : hi;
    if (e <= s)
        s = e = t->off; /* nothing owned: an empty range */
    *a = s - t->off;
    *b = e - t->off;
    return *b - *a;
}

float *tt_owned_data(const tt_params *p, const tt_tensor *t, tt_kind k, size_t a)
{
    /* Weights below stage 3, and stage 1's reduced gradients, stay at their
     * flat place. */
    if (p->z.stage == 0 || (k == TT_W && p->z.stage < 3) || (k == TT_G && p->z.stage == 1))
        return p->buf[k] + t->off + a;
    /* The owned buffers hold unit u's piece at ubegin[u] / parts. */
    size_t begin, n, lo;
    tt_zero_unit(p, t->unit, &begin, &n, &lo);
    size_t at = begin / (size_t)p->z.parts + (t->off + a >= lo ? t->off + a - lo : 0);
    return (k == TT_G ? p->gown : p->buf[k]) + at;
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

/* One tensor's initial values into t->w (see tt_params_init). */
static void init_tensor(tt_tensor *t, uint64_t seed, double std, double std_resid)
{
    memset(t->w, 0, t->numel * sizeof(float));
    int is_ln = strstr(t->name, ".ln1.") || strstr(t->name, ".ln2.") ||
                strncmp(t->name, "ln_f.", 5) == 0;
    if (ends_with(t->name, ".bias"))
        return; /* biases start at 0 */
    if (is_ln) {
        for (size_t e = 0; e < t->numel; e++)
            t->w[e] = 1.0f;
        return;
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

void tt_params_init(tt_params *p, uint64_t seed, int n_layers)
{
    const double std = 0.02;
    const double std_resid = 0.02 / sqrt(2.0 * (n_layers > 0 ? n_layers : 1));
    if (p->z.stage < 3) {
        for (int i = 0; i < p->n; i++)
            init_tensor(&p->t[i], seed, std, std_resid);
        return;
    }
    /* Stage 3: each unit built whole in the gather buffer (the values are
     * a function of the element, so no rank needs another's), and only the
     * owned piece kept. */
    for (int u = 0, i = 0; u < p->z.nunits; u++) {
        size_t begin, n, lo;
        tt_zero_unit(p, u, &begin, &n, &lo);
        memset(p->wgather, 0, n * sizeof(float));
        for (; i < p->n && p->t[i].unit == u; i++)
            init_tensor(&p->t[i], seed, std, std_resid);
        memcpy(p->buf[TT_W] + begin / (size_t)p->z.parts, p->wgather + (lo - begin),
               n / (size_t)p->z.parts * sizeof(float));
    }
    memset(p->wgather, 0, p->z.max_unit * sizeof(float));
    p->wunit = -1;
}

void tt_params_zero_grads(tt_params *p)
{
    if (p->buf[TT_G])
        memset(p->buf[TT_G], 0, kind_floats(&p->z, p->total, TT_G) * sizeof(float));
    if (p->z.stage >= 2 && p->gown)
        memset(p->gown, 0, p->z.shard * sizeof(float));
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
