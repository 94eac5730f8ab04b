/* ckpt_format.c - the safetensors layout of a checkpoint (design.md section 6):
 * byte order, where every stored array lies, the JSON header and its framing.
 *
 * Both writers (ckpt_write.c, ckpt_mpiio.c) take their offsets and header
 * from here and nowhere else, so they cannot disagree about a single byte;
 * the reader (ckpt_read.c) checks a file against the same conventions. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_internal.h"

/* Prefix of each stored kind's name, and the parameter buffer it comes from. */
static const char *const kind_prefix[CKPT_KINDS] = {"", "optim.m.", "optim.v."};
static const tt_kind kind_of_stored[CKPT_KINDS] = {TT_W, TT_M, TT_V};

tt_kind ckpt_kind_of(int kind) { return kind_of_stored[kind]; }

float *ckpt_kind_data(const tt_tensor *t, int kind)
{
    return tt_tensor_data(t, kind_of_stored[kind]);
}

void ckpt_stored_name(char *out, size_t cap, const tt_tensor *t, int kind)
{
    snprintf(out, cap, "%s%s", kind_prefix[kind], t->name);
}

/* ---- byte order -------------------------------------------------------------
 * The file is little-endian whatever the host is. On little-endian hosts these
 * are plain copies; the swap keeps the format honest on the others. */

static int host_is_little_endian(void)
{
    const uint32_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

void ckpt_floats_to_le(unsigned char *dst, const float *src, size_t n)
{
    memcpy(dst, src, n * sizeof(float));
    if (!host_is_little_endian())
        for (size_t i = 0; i < n; i++) {
            unsigned char *q = dst + 4 * i, a = q[0], b = q[1];
            q[0] = q[3];
            q[1] = q[2];
            q[2] = b;
            q[3] = a;
        }
}

void ckpt_floats_from_le(float *dst, const unsigned char *src, size_t n)
{
    if (host_is_little_endian()) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char q[4] = {src[4 * i + 3], src[4 * i + 2], src[4 * i + 1], src[4 * i]};
        memcpy(&dst[i], q, 4);
    }
}

/* ---- where the arrays lie ---------------------------------------------------- */

size_t ckpt_stored_numel(const tt_tensor *t)
{
    /* gshape counts real rows only, so vocabulary padding never reaches the file. */
    return (size_t)t->gshape[0] * (size_t)t->gshape[1];
}

/* The weights in table order, then every m, then every v. Both writers and
 * the header take their offsets from here, so they cannot disagree. */
uint64_t ckpt_stored_offsets(const tt_params *p, uint64_t *off)
{
    uint64_t at = 0;
    for (int kind = 0; kind < CKPT_KINDS; kind++)
        for (int i = 0; i < p->n; i++) {
            off[kind * p->n + i] = at;
            at += 4 * (uint64_t)ckpt_stored_numel(&p->t[i]);
        }
    return at;
}

int ckpt_shard_is_consistent(const tt_tensor *t)
{
    int ok = (t->ndim == 1 || t->ndim == 2) && t->gshape[0] >= 0 && t->gshape[1] >= 0 &&
             t->lshape[0] >= 0 && t->lshape[1] >= 0 && t->offset >= 0;
    if (ok && t->split == TT_SPLIT_ROWS)
        ok = t->lshape[1] == t->gshape[1];
    else if (ok && t->split == TT_SPLIT_COLS)
        ok = t->lshape[0] == t->gshape[0] && t->offset <= t->gshape[1] - t->lshape[1];
    else if (ok)
        ok = t->lshape[0] == t->gshape[0] && t->lshape[1] == t->gshape[1] && t->offset == 0;
    return ok;
}

/* ---- the header -------------------------------------------------------------- */

/* Adds the entry {"shape":[...],"data_offsets":[begin,end],"dtype":"F32"} of
 * stored array `name` (tensor t, at byte `at` of the data section). */
static int add_entry(cJSON *root, const char *name, const tt_tensor *t, uint64_t at)
{
    cJSON *ent = cJSON_AddObjectToObject(root, name);
    cJSON *shape = ent ? cJSON_AddArrayToObject(ent, "shape") : NULL;
    cJSON *offs = ent ? cJSON_AddArrayToObject(ent, "data_offsets") : NULL;
    if (!ent || !shape || !offs || !cJSON_AddStringToObject(ent, "dtype", "F32"))
        return -1;
    /* Integers below 2^53 (any real file) print exactly as integers. */
    int bad = 0;
    for (int d = 0; d < t->ndim; d++)
        bad |= !cJSON_AddItemToArray(shape, cJSON_CreateNumber(t->gshape[d]));
    uint64_t end = at + 4 * (uint64_t)ckpt_stored_numel(t);
    bad |= !cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)at));
    bad |= !cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)end));
    return bad ? -1 : 0;
}

/* The JSON header (unpadded): __metadata__ first, then one entry per stored
 * array in file order. NULL when cJSON runs out of memory. */
static char *build_header(const tt_params *p, const tt_ckpt_info *info, const uint32_t *crc,
                          const uint64_t *off)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
    int bad = !root || !meta;
    if (!bad)
        bad = ckpt_meta_put(meta, info) != 0 || ckpt_meta_put_checksums(meta, p, crc) != 0;
    for (int kind = 0; kind < CKPT_KINDS && !bad; kind++)
        for (int i = 0; i < p->n && !bad; i++) {
            char name[CKPT_KEY_MAX];
            ckpt_stored_name(name, sizeof name, &p->t[i], kind);
            bad = add_entry(root, name, &p->t[i], off[kind * p->n + i]) != 0;
        }
    char *text = bad ? NULL : cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

/* The header is padded with spaces so the data starts 8-byte aligned
 * (safetensors' convention: lets readers map the floats in place). */
unsigned char *ckpt_framed_header(const tt_params *p, const tt_ckpt_info *info,
                                  const uint32_t *crc, const uint64_t *off, size_t *size)
{
    char *json = build_header(p, info, crc, off);
    if (!json)
        return NULL;
    size_t hlen = strlen(json), pad = (8 - hlen % 8) % 8;
    uint64_t n = (uint64_t)(hlen + pad);
    unsigned char *buf = tt_malloc(8 + hlen + pad);
    for (int b = 0; b < 8; b++)
        buf[b] = (unsigned char)(n >> (8 * b));
    memcpy(buf + 8, json, hlen);
    memset(buf + 8 + hlen, ' ', pad);
    free(json);
    *size = 8 + hlen + pad;
    return buf;
}

/* ---- messages ------------------------------------------------------------------ */

const char *ckpt_printable(const char *s, char *out, size_t cap)
{
    size_t i = 0, limit = cap > 64 ? 60 : cap - 4;
    for (; s[i] && i < limit; i++)
        out[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
    if (s[i]) {
        memcpy(out + i, "...", 3);
        i += 3;
    }
    out[i] = '\0';
    return out;
}
