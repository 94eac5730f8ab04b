/* ckpt_read.c - reading a checkpoint (tt_checkpoint_load): opening the file,
 * validating its header, and copying each shard's slice out of the global
 * tensors, so one file resumes on any layout.
 *
 * Everything read from a file is treated as hostile: sizes are checked
 * against the file before anything is allocated or read, every entry of the
 * header is validated before any weight is touched, and every failure is a
 * one-line message naming the file (and the tensor, where there is one). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "core/json.h"
#include "ckpt_internal.h"

/* One parsed, validated tensor entry of the header. */
typedef struct {
    int ndim;
    uint64_t dims[CKPT_MAX_DIMS];
    uint64_t begin, end; /* bytes of the data section */
} ckpt_entry;

void ckpt_close(ckpt_file *cf)
{
    if (cf->fd >= 0)
        close(cf->fd);
    cJSON_Delete(cf->root);
    cf->fd = -1;
    cf->root = cf->meta = NULL;
}

/* Reads exactly n bytes at offset; -1 on error or end of file. */
static int read_at(int fd, void *buf, size_t n, uint64_t offset)
{
    unsigned char *q = buf;
    while (n > 0) {
        if (offset > (uint64_t)INT64_MAX)
            return -1;
        ssize_t got = pread(fd, q, n, (off_t)offset);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        q += got;
        n -= (size_t)got;
        offset += (uint64_t)got;
    }
    return 0;
}

/* ---- the header ---------------------------------------------------------------- */

/* Reads the header length and checks it against the size of the file (a
 * regular file: tt_open_regular opened it): sets cf->data_start and
 * cf->data_size. */
static int read_frame(ckpt_file *cf, tt_err *e)
{
    struct stat st;
    if (fstat(cf->fd, &st) != 0)
        return tt_fail(e, "cannot read checkpoint '%s': %s", cf->path, strerror(errno));
    uint64_t size = (uint64_t)st.st_size;
    unsigned char len_le[8];
    if (size < 8 || read_at(cf->fd, len_le, 8, 0) != 0)
        return tt_fail(e, "checkpoint '%s' is truncated: %" PRIu64 " bytes, too short for "
                          "the 8-byte header length", cf->path, size);
    uint64_t hlen = 0;
    for (int b = 7; b >= 0; b--)
        hlen = (hlen << 8) | len_le[b];
    if (hlen > CKPT_HEADER_MAX)
        return tt_fail(e, "checkpoint '%s' is not a safetensors file: header length %" PRIu64
                          " is absurd (over 100 MB)", cf->path, hlen);
    if (hlen > size - 8)
        return tt_fail(e, "checkpoint '%s' is truncated: its header needs %" PRIu64
                          " bytes but only %" PRIu64 " follow the length", cf->path, hlen,
                       size - 8);
    cf->data_start = 8 + hlen;
    cf->data_size = size - cf->data_start;
    return 0;
}

/* Parses the header into cf->root: one JSON object, followed by nothing but
 * padding. */
static int parse_header(ckpt_file *cf, tt_err *e)
{
    const uint64_t hlen = cf->data_start - 8;
    char *text = tt_malloc((size_t)hlen + 1);
    if (read_at(cf->fd, text, (size_t)hlen, 8) != 0) {
        free(text);
        return tt_fail(e, "checkpoint '%s' is truncated: cannot read its header", cf->path);
    }
    text[hlen] = '\0';
    cf->header_crc = tt_crc32(0, text, (size_t)hlen);
    size_t pos;
    cf->root = tt_json_parse_whole(text, (size_t)hlen, &pos);
    free(text);
    if (!cf->root)
        return tt_fail(e, "checkpoint '%s' has a corrupt header: not valid JSON (at byte %zu "
                          "of %" PRIu64 ")", cf->path, pos, hlen);
    if (!cJSON_IsObject(cf->root))
        return tt_fail(e, "checkpoint '%s' has a corrupt header: the JSON is not an object",
                       cf->path);
    const char *twice = tt_json_repeated_key(cf->root);
    if (twice)
        return tt_fail(e, "checkpoint '%s' has a corrupt header: the key \"%.80s\" appears twice "
                          "in one object", cf->path, twice);
    return 0;
}

/* A JSON number that is a non-negative integer JSON can carry exactly. */
static int json_uint(const cJSON *j, uint64_t *out)
{
    if (!cJSON_IsNumber(j))
        return -1;
    double d = j->valuedouble;
    if (!(d >= 0.0 && d <= CKPT_INT_MAX) || floor(d) != d)
        return -1;
    *out = (uint64_t)d;
    return 0;
}

/* Validates one header entry (which is not __metadata__) into *en: F32, a
 * shape of non-negative sizes, offsets that hold exactly that shape and lie
 * inside the file. */
static int parse_entry(const ckpt_file *cf, const cJSON *item, ckpt_entry *en, tt_err *e)
{
    char nm[72];
    const char *name = ckpt_printable(item->string ? item->string : "", nm, sizeof nm);
    if (!cJSON_IsObject(item))
        return tt_fail(e, "checkpoint '%s': header entry '%s' is not a tensor description",
                       cf->path, name);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsString(dtype))
        return tt_fail(e, "checkpoint '%s': tensor '%s' has no dtype", cf->path, name);
    if (strcmp(dtype->valuestring, "F32") != 0) {
        char dt[72];
        return tt_fail(e, "checkpoint '%s': tensor '%s' has dtype '%s'; only F32 is supported",
                       cf->path, name, ckpt_printable(dtype->valuestring, dt, sizeof dt));
    }
    int ndim = cJSON_IsArray(shape) ? cJSON_GetArraySize(shape) : -1;
    if (ndim < 0 || ndim > CKPT_MAX_DIMS)
        return tt_fail(e, "checkpoint '%s': tensor '%s' has a bad shape (not a list of "
                          "at most %d sizes)", cf->path, name, CKPT_MAX_DIMS);
    /* Element counts above 2^51 could not match any offsets anyway; stopping
     * there keeps the byte count from overflowing. */
    uint64_t numel = 1;
    en->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        uint64_t v;
        if (json_uint(cJSON_GetArrayItem(shape, d), &v) != 0 || v > INT_MAX)
            return tt_fail(e, "checkpoint '%s': tensor '%s' has a bad shape (size %d is not "
                              "a non-negative integer)", cf->path, name, d);
        en->dims[d] = v;
        if (v != 0 && numel > ((uint64_t)1 << 51) / v)
            return tt_fail(e, "checkpoint '%s': tensor '%s' has a bad shape (absurdly large)",
                           cf->path, name);
        numel *= v;
    }
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        json_uint(cJSON_GetArrayItem(offs, 0), &en->begin) != 0 ||
        json_uint(cJSON_GetArrayItem(offs, 1), &en->end) != 0 || en->begin > en->end)
        return tt_fail(e, "checkpoint '%s': tensor '%s' has bad data_offsets (need "
                          "[begin, end] with 0 <= begin <= end)", cf->path, name);
    if (en->end - en->begin != 4 * numel)
        return tt_fail(e, "checkpoint '%s': tensor '%s' has bad data_offsets: [%" PRIu64
                          ", %" PRIu64 ") holds %" PRIu64 " bytes, its shape needs %" PRIu64,
                       cf->path, name, en->begin, en->end, en->end - en->begin, 4 * numel);
    if (en->end > cf->data_size)
        return tt_fail(e, "checkpoint '%s' is truncated: tensor '%s' needs data bytes up to %"
                          PRIu64 " but the file holds only %" PRIu64,
                       cf->path, name, en->end, cf->data_size);
    return 0;
}

/* Every entry, including those of tensors the model does not ask for: a
 * damaged file is refused as a whole, not only where it is read. The data
 * section ends where the last tensor's data ends, as safetensors requires
 * (its readers refuse anything after it): bytes beyond are an appended or
 * overwritten file, not a checkpoint any writer made. */
static int check_entries(const ckpt_file *cf, tt_err *e)
{
    const cJSON *it;
    uint64_t last = 0;
    cJSON_ArrayForEach(it, cf->root) {
        ckpt_entry en;
        if (it == cf->meta)
            continue;
        if (parse_entry(cf, it, &en, e) != 0)
            return -1;
        if (en.end > last)
            last = en.end;
    }
    if (last != cf->data_size)
        return tt_fail(e, "checkpoint '%s' has %" PRIu64 " bytes after the data of its "
                          "tensors (which ends at byte %" PRIu64 " of %" PRIu64 "): a damaged "
                          "or appended file", cf->path, cf->data_size - last, last,
                       cf->data_size);
    return 0;
}

int ckpt_open(ckpt_file *cf, const char *path, tt_err *e)
{
    memset(cf, 0, sizeof *cf);
    cf->path = path;
    const char *why;
    cf->fd = tt_open_regular(path, &why);
    if (cf->fd < 0)
        return tt_fail(e, "cannot open checkpoint '%s': %s", path, why);
    if (read_frame(cf, e) != 0 || parse_header(cf, e) != 0 || ckpt_meta_check(cf, e) != 0 ||
        check_entries(cf, e) != 0) {
        /* After the message: it may quote strings that live in cf->root. */
        ckpt_close(cf);
        return -1;
    }
    return 0;
}

/* ---- the tensors --------------------------------------------------------------- */

/* Refuses a shard whose slice is not inside its global tensor, so the copy
 * below cannot run out of bounds whatever the table says. */
static int check_shard(const char *path, const tt_tensor *t, tt_err *e)
{
    if (!ckpt_shard_is_consistent(t))
        return tt_fail(e, "cannot load checkpoint '%s': the model's tensor '%s' is an "
                          "inconsistent shard (%dx%d at offset %d of %dx%d)", path, t->name,
                       t->lshape[0], t->lshape[1], t->offset, t->gshape[0], t->gshape[1]);
    return 0;
}

static void format_shape(char *out, size_t cap, int ndim, const uint64_t *dims)
{
    size_t used = (size_t)snprintf(out, cap, "[");
    for (int d = 0; d < ndim && used < cap; d++)
        used += (size_t)snprintf(out + used, cap - used, "%s%" PRIu64, d ? "," : "", dims[d]);
    if (used < cap)
        snprintf(out + used, cap - used, "]");
}

/* Finds tensor `name` in the header and checks it has t's global shape. */
static int find_entry(const ckpt_file *cf, const tt_tensor *t, const char *name,
                      ckpt_entry *en, tt_err *e)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(cf->root, name);
    if (!item || item == cf->meta)
        return tt_fail(e, "checkpoint '%s': tensor '%s' is missing", cf->path, name);
    if (parse_entry(cf, item, en, e) != 0)
        return -1;
    uint64_t want[2] = {(uint64_t)t->gshape[0], (uint64_t)t->gshape[1]};
    int same = en->ndim == t->ndim;
    for (int d = 0; same && d < t->ndim; d++)
        same = en->dims[d] == want[d];
    if (!same) {
        char have_s[160], want_s[64];
        format_shape(have_s, sizeof have_s, en->ndim, en->dims);
        format_shape(want_s, sizeof want_s, t->ndim, want);
        return tt_fail(e, "checkpoint '%s': tensor '%s' has shape %s but the model needs %s",
                       cf->path, name, have_s, want_s);
    }
    return 0;
}

/* Reads one stored tensor, verifies its checksum and copies t's slice of it
 * into dst (laid out lshape[0] x lshape[1]; padding rows zeroed). */
static int load_one(const ckpt_file *cf, const tt_tensor *t, const char *name,
                    const ckpt_entry *en, float *dst, tt_err *e)
{
    size_t bytes = (size_t)(en->end - en->begin);
    unsigned char *buf = tt_malloc(bytes);
    uint32_t want = 0;
    if (read_at(cf->fd, buf, bytes, cf->data_start + en->begin) != 0) {
        free(buf);
        return tt_fail(e, "checkpoint '%s' is truncated: cannot read tensor '%s'", cf->path,
                       name);
    }
    if (ckpt_meta_checksum(cf, name, &want, e) != 0) {
        free(buf);
        return -1;
    }
    uint32_t got = tt_crc32(0, buf, bytes);
    if (got != want) {
        free(buf);
        return tt_fail(e, "checkpoint '%s': checksum mismatch in tensor '%s' (stored %08"
                          PRIx32 ", data gives %08" PRIx32 ")", cf->path, name, want, got);
    }

    /* The slice: rows [offset, offset+real) for ROWS, columns
     * [offset, offset+lcols) of every row for COLS, everything for NONE. */
    size_t gcols = (size_t)t->gshape[1], lcols = (size_t)t->lshape[1];
    size_t rows = (size_t)tt_tensor_real_rows(t);
    int r0, c0;
    tt_tensor_origin(t, &r0, &c0);
    for (size_t r = 0; r < rows; r++)
        ckpt_floats_from_le(dst + r * lcols, buf + 4 * (((size_t)r0 + r) * gcols + (size_t)c0),
                            lcols);
    /* Vocabulary padding rows must stay zero whatever the table held before. */
    memset(dst + rows * lcols, 0, ((size_t)t->lshape[0] - rows) * lcols * sizeof(float));
    free(buf);
    return 0;
}

/* ZeRO: the shard's slice of a stored moment (stage 3: or weight), of which only the part this
 * GPU owns is kept (through a host scratch of the slice's size, as load_one
 * reads through one of the whole tensor). */
static int load_owned(const ckpt_file *cf, const tt_params *p, const tt_tensor *t,
                      const char *name, const ckpt_entry *en, int kind, tt_err *e)
{
    float *slice = tt_malloc((t->numel ? t->numel : 1) * sizeof(float));
    int rc = load_one(cf, t, name, en, slice, e);
    size_t a, b;
    size_t n = tt_tensor_owned(p, t, &a, &b);
    if (rc == 0 && n)
        memcpy(tt_owned_data(p, t, ckpt_kind_of(kind), a), slice + a,
               n * sizeof(float));
    free(slice);
    return rc;
}

/* Checks every tensor the model needs, in all three kinds, is in the file
 * with the right shape, and that every shard of p is consistent. */
static int check_all(const ckpt_file *cf, const tt_params *p, tt_err *e)
{
    int rc = 0;
    for (int i = 0; i < p->n && rc == 0; i++) {
        rc = check_shard(cf->path, &p->t[i], e);
        for (int kind = 0; kind < CKPT_KINDS && rc == 0; kind++) {
            char name[CKPT_KEY_MAX];
            ckpt_entry en;
            ckpt_stored_name(name, sizeof name, &p->t[i], kind);
            rc = find_entry(cf, &p->t[i], name, &en, e);
        }
    }
    return rc;
}

uint32_t ckpt_fingerprint(const ckpt_file *cf)
{
    /* The header names the step, the config and every tensor's CRC-32; the
     * size covers what follows it. */
    const uint64_t size = cf->data_start + cf->data_size;
    return cf->header_crc ^ (uint32_t)(size ^ (size >> 32));
}

/* expect: the fingerprint the caller read earlier, or NULL. */
static int load(const char *path, const uint32_t *expect, tt_params *p, tt_err *e)
{
    ckpt_file cf;
    if (ckpt_open(&cf, path, e) != 0)
        return -1;
    /* A run adopted the step and hyper-parameters of the header it read at
     * start-up; weights from a file put there since (a requeued job saving
     * beside this one) would continue another run under those. */
    if (expect && ckpt_fingerprint(&cf) != *expect) {
        ckpt_close(&cf);
        return tt_fail(e, "checkpoint '%s' changed after this run read its header (another "
                          "program replaced it): nothing was loaded; start the run again",
                       path);
    }
    /* Everything the header can tell (presence, shapes) is checked before any
     * weight is overwritten, so the common mistakes leave the model as it was.
     * Only a checksum failure found while copying leaves it partly loaded. */
    int rc = check_all(&cf, p, e);
    for (int kind = 0; kind < CKPT_KINDS && rc == 0; kind++)
        for (int i = 0; i < p->n && rc == 0; i++) {
            char name[CKPT_KEY_MAX];
            ckpt_entry en;
            ckpt_stored_name(name, sizeof name, &p->t[i], kind);
            rc = find_entry(&cf, &p->t[i], name, &en, e);
            if (rc == 0 && !tt_kind_sharded(p, ckpt_kind_of(kind)))
                rc = load_one(&cf, &p->t[i], name, &en, ckpt_kind_data(&p->t[i], kind), e);
            else if (rc == 0)
                rc = load_owned(&cf, p, &p->t[i], name, &en, kind, e);
        }
    ckpt_close(&cf);
    return rc;
}

int tt_checkpoint_load(const char *path, tt_params *p, tt_err *e) { return load(path, NULL, p, e); }

int tt_checkpoint_load_same(const char *path, uint32_t fingerprint, tt_params *p, tt_err *e)
{
    return load(path, &fingerprint, p, e);
}
