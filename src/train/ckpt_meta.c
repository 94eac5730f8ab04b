/* ckpt_meta.c - the __metadata__ map of a checkpoint (doc/design.md,
 * "Checkpoint metadata keys"): writing its keys, reading them back into a
 * tt_ckpt_info (tt_checkpoint_read_info) and the CRC-32 recorded per stored
 * array.
 *
 * safetensors allows only strings as metadata values, so every number is
 * written as text and parsed back with its range checked: a file is hostile
 * until proven otherwise, and a message names the key and the bad value. */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_internal.h"

/* ---- writing ------------------------------------------------------------------ */

/* Adds one metadata string. */
static int add_meta(cJSON *meta, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int add_meta(cJSON *meta, const char *key, const char *fmt, ...)
{
    char value[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
    return cJSON_AddStringToObject(meta, key, value) ? 0 : -1;
}

/* A double in the fewest significant digits that read back to the same bits
 * (at most 17 are needed): "0.003", where %.17g writes 0.0030000000000000001,
 * which reads as if the learning rate were off. */
static int add_double(cJSON *meta, const char *key, double v)
{
    char buf[40];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return cJSON_AddStringToObject(meta, key, buf) ? 0 : -1;
}

int ckpt_meta_put(cJSON *meta, const tt_ckpt_info *info)
{
    const tt_run_config *r = &info->run;
    const tt_optim_config *o = &r->optim;
    int bad = 0;
    /* Doubles read back to the same bits, so a resumed run continues on
     * exactly the schedule it left. */
    bad |= add_meta(meta, "format", "%s", TT_CKPT_FORMAT);
    bad |= add_meta(meta, "step", "%ld", info->step);
    bad |= add_meta(meta, "vocab", "%d", r->model.V);
    bad |= add_meta(meta, "layers", "%d", r->model.L);
    bad |= add_meta(meta, "dim", "%d", r->model.C);
    bad |= add_meta(meta, "heads", "%d", r->model.NH);
    bad |= add_meta(meta, "seq", "%d", r->model.T);
    bad |= add_meta(meta, "batch", "%d", r->batch);
    bad |= add_meta(meta, "micro_batches", "%d", r->micro_batches);
    bad |= add_meta(meta, "steps", "%ld", r->steps);
    bad |= add_double(meta, "lr", o->lr);
    bad |= add_double(meta, "lr_min", o->lr_min);
    bad |= add_meta(meta, "warmup", "%d", o->warmup);
    bad |= add_double(meta, "weight_decay", o->weight_decay);
    bad |= add_double(meta, "clip", o->clip);
    bad |= add_double(meta, "beta1", o->beta1);
    bad |= add_double(meta, "beta2", o->beta2);
    bad |= add_double(meta, "eps", o->eps);
    bad |= add_meta(meta, "seed", "%" PRIu64, r->seed);
    bad |= add_meta(meta, "eval_every", "%ld", r->eval_every);
    /* Not through add_meta's 64-byte value: a path may be long. */
    bad |= cJSON_AddStringToObject(meta, "data", r->data ? r->data : "") ? 0 : -1;
    /* The file's bytes as read, so a resumed run can tell a changed file. */
    if (r->data && r->data_bytes) {
        bad |= add_meta(meta, "data_bytes", "%" PRIu64, r->data_bytes);
        bad |= add_meta(meta, "data_crc32", "%08" PRIx32, r->data_crc);
    }
    bad |= add_meta(meta, "tp", "%d", info->tp);
    bad |= add_meta(meta, "pp", "%d", info->pp);
    bad |= add_meta(meta, "dp", "%d", info->dp);
    return bad ? -1 : 0;
}

/* A checksum always prints as 8 hex digits, so the header's length does not
 * depend on the checksums: the collective writer relies on that to write the
 * header before it knows them and to overwrite it in place afterwards. */
int ckpt_meta_put_checksums(cJSON *meta, const tt_params *p, const uint32_t *crc)
{
    int bad = 0;
    for (int kind = 0; kind < CKPT_KINDS && !bad; kind++)
        for (int i = 0; i < p->n && !bad; i++) {
            char name[CKPT_KEY_MAX], key[CKPT_KEY_MAX + 8];
            ckpt_stored_name(name, sizeof name, &p->t[i], kind);
            snprintf(key, sizeof key, "crc32.%s", name);
            bad |= add_meta(meta, key, "%08" PRIx32, crc[kind * p->n + i]);
        }
    return bad ? -1 : 0;
}

/* ---- checking and reading ------------------------------------------------------ */

int ckpt_meta_check(ckpt_file *cf, tt_err *e)
{
    cf->meta = cJSON_GetObjectItemCaseSensitive(cf->root, "__metadata__");
    if (!cJSON_IsObject(cf->meta))
        return tt_fail(e, "checkpoint '%s' has no __metadata__ map: not a tiny_transformer "
                          "checkpoint", cf->path);
    /* Checked once here, so every later lookup may take valuestring as is. */
    const cJSON *it;
    cJSON_ArrayForEach(it, cf->meta) {
        if (!cJSON_IsString(it)) {
            char nm[72];
            return tt_fail(e, "checkpoint '%s': __metadata__ value '%s' is not a string",
                           cf->path,
                           ckpt_printable(it->string ? it->string : "", nm, sizeof nm));
        }
    }
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(cf->meta, "format");
    if (!format)
        return tt_fail(e, "checkpoint '%s' has no format in its __metadata__: not a "
                          "tiny_transformer checkpoint", cf->path);
    if (strcmp(format->valuestring, TT_CKPT_FORMAT) != 0) {
        char fm[72];
        return tt_fail(e, "checkpoint '%s' has format '%s', expected '%s'", cf->path,
                       ckpt_printable(format->valuestring, fm, sizeof fm), TT_CKPT_FORMAT);
    }
    return 0;
}

static const char *meta_get(const ckpt_file *cf, const char *key)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(cf->meta, key);
    return j ? j->valuestring : NULL; /* every value was checked to be a string */
}

/* A CRC-32 as 8 hex digits (a tensor's checksum, the --data file's). */
static int meta_hex32(const ckpt_file *cf, const char *key, uint32_t *out, tt_err *e)
{
    const char *s = meta_get(cf, key);
    char *end = NULL;
    unsigned long v = 0;
    /* Exactly 8 characters starting with a digit, so the value fits 32 bits
     * and strtoul can neither wrap a negative number into a match nor skip
     * leading blanks. */
    if (s && strlen(s) == 8 && isxdigit((unsigned char)s[0]))
        v = strtoul(s, &end, 16);
    if (!end || *end)
        return tt_fail(e, "checkpoint '%s': __metadata__ has no valid '%s' (8 hex digits)",
                       cf->path, key);
    *out = (uint32_t)v;
    return 0;
}

int ckpt_meta_checksum(const ckpt_file *cf, const char *name, uint32_t *crc, tt_err *e)
{
    char key[CKPT_KEY_MAX + 8];
    snprintf(key, sizeof key, "crc32.%s", name);
    return meta_hex32(cf, key, crc, e);
}

/* Integer metadata in [lo, hi]. */
static int meta_long(const ckpt_file *cf, const char *key, long lo, long hi, long *out,
                     tt_err *e)
{
    const char *s = meta_get(cf, key);
    if (!s)
        return tt_fail(e, "checkpoint '%s': __metadata__ has no '%s'", cf->path, key);
    char *end, buf[72];
    errno = 0;
    long v = strtol(s, &end, 10);
    /* strtol skips leading blanks; our writer never puts any there. */
    if (end == s || *end || errno || isspace((unsigned char)s[0]) || v < lo || v > hi)
        return tt_fail(e, "checkpoint '%s': __metadata__ '%s' = '%s' is not an integer in "
                          "[%ld, %ld]", cf->path, key, ckpt_printable(s, buf, sizeof buf), lo,
                       hi);
    *out = v;
    return 0;
}

static int meta_int(const ckpt_file *cf, const char *key, int lo, int *out, tt_err *e)
{
    long v;
    if (meta_long(cf, key, lo, INT_MAX, &v, e) != 0)
        return -1;
    *out = (int)v;
    return 0;
}

static int meta_double(const ckpt_file *cf, const char *key, double *out, tt_err *e)
{
    const char *s = meta_get(cf, key);
    if (!s)
        return tt_fail(e, "checkpoint '%s': __metadata__ has no '%s'", cf->path, key);
    char *end, buf[72];
    double v = strtod(s, &end);
    if (end == s || *end || isspace((unsigned char)s[0]) || !isfinite(v))
        return tt_fail(e, "checkpoint '%s': __metadata__ '%s' = '%s' is not a finite number",
                       cf->path, key, ckpt_printable(s, buf, sizeof buf));
    *out = v;
    return 0;
}

static int meta_u64(const ckpt_file *cf, const char *key, uint64_t *out, tt_err *e)
{
    const char *s = meta_get(cf, key);
    if (!s)
        return tt_fail(e, "checkpoint '%s': __metadata__ has no '%s'", cf->path, key);
    char *end, buf[72];
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    /* strtoull accepts a sign and wraps "-1"; a seed is written unsigned. */
    if (end == s || *end || errno || s[0] < '0' || s[0] > '9')
        return tt_fail(e, "checkpoint '%s': __metadata__ '%s' = '%s' is not an unsigned "
                          "integer", cf->path, key, ckpt_printable(s, buf, sizeof buf));
    *out = (uint64_t)v;
    return 0;
}

/* Every key ckpt_meta_put writes except format (checked on opening) and the
 * checksums (checked per tensor while loading), in the order written, so
 * the first missing or bad one is the one reported. */
static int read_meta(const ckpt_file *cf, tt_ckpt_info *info, tt_err *e)
{
    tt_run_config *r = &info->run;
    tt_optim_config *o = &r->optim;
    long warmup;
    memset(info, 0, sizeof *info);
    if (meta_long(cf, "step", 0, LONG_MAX, &info->step, e) ||
        meta_int(cf, "vocab", 1, &r->model.V, e) || meta_int(cf, "layers", 1, &r->model.L, e) ||
        meta_int(cf, "dim", 1, &r->model.C, e) || meta_int(cf, "heads", 1, &r->model.NH, e) ||
        meta_int(cf, "seq", 1, &r->model.T, e) || meta_int(cf, "batch", 1, &r->batch, e) ||
        meta_int(cf, "micro_batches", 1, &r->micro_batches, e) ||
        meta_long(cf, "steps", 0, LONG_MAX, &r->steps, e) || meta_double(cf, "lr", &o->lr, e) ||
        meta_double(cf, "lr_min", &o->lr_min, e) ||
        meta_long(cf, "warmup", 0, INT_MAX, &warmup, e) ||
        meta_double(cf, "weight_decay", &o->weight_decay, e) ||
        meta_double(cf, "clip", &o->clip, e) || meta_double(cf, "beta1", &o->beta1, e) ||
        meta_double(cf, "beta2", &o->beta2, e) || meta_double(cf, "eps", &o->eps, e) ||
        meta_u64(cf, "seed", &r->seed, e) ||
        meta_long(cf, "eval_every", 0, LONG_MAX, &r->eval_every, e) ||
        meta_int(cf, "tp", 1, &info->tp, e) || meta_int(cf, "pp", 1, &info->pp, e) ||
        meta_int(cf, "dp", 1, &info->dp, e))
        return -1;
    o->warmup = (int)warmup;
    /* Optional: checkpoints written before it was kept have no "data". */
    const char *data = meta_get(cf, "data");
    if (data) {
        if (strlen(data) >= sizeof info->data)
            return tt_fail(e, "checkpoint '%s': __metadata__ 'data' is longer than %zu bytes",
                           cf->path, sizeof info->data - 1);
        strcpy(info->data, data);
        info->has_data = 1;
    }
    /* Optional too (none for the generated corpus); both or neither. */
    if (meta_get(cf, "data_bytes") || meta_get(cf, "data_crc32")) {
        if (meta_u64(cf, "data_bytes", &info->data_bytes, e) ||
            meta_hex32(cf, "data_crc32", &info->data_crc, e))
            return -1;
        if (info->data_bytes == 0)
            return tt_fail(e, "checkpoint '%s': __metadata__ 'data_bytes' is 0 (a --data file "
                              "has at least one window of bytes)", cf->path);
    }
    return 0;
}

/* The tensor of a model's last block that the header of a checkpoint of
 * that depth must list (printf pattern of the block index). */
#define LAST_BLOCK_TENSOR "blocks.%d.mlp.fc2.weight"

int tt_checkpoint_read_info(const char *path, tt_ckpt_info *info, tt_err *e)
{
    ckpt_file cf;
    if (ckpt_open(&cf, path, e) != 0)
        return -1;
    /* *info changes only when the whole metadata is good. */
    tt_ckpt_info got;
    int rc = read_meta(&cf, &got, e);
    if (rc == 0) {
        char last[64];
        snprintf(last, sizeof last, LAST_BLOCK_TENSOR, got.run.model.L - 1);
        got.lists_depth = cJSON_GetObjectItemCaseSensitive(cf.root, last) != NULL;
        got.fingerprint = ckpt_fingerprint(&cf);
        *info = got;
    }
    ckpt_close(&cf);
    return rc;
}

int tt_checkpoint_check_depth(const char *path, const tt_ckpt_info *info, tt_err *e)
{
    if (info->lists_depth)
        return 0;
    return tt_fail(e, "checkpoint '%s': its metadata says layers %d, but tensor '" LAST_BLOCK_TENSOR
                      "' is missing", path, info->run.model.L,
                   info->run.model.L - 1);
}
