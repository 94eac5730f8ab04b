/* checkpoint.c - checkpoints as safetensors files (DESIGN section 6).
 *
 * Layout of a file:
 *
 *   u64 little-endian N | N bytes of JSON header (space-padded) | data
 *
 * The header maps every tensor name to {"dtype":"F32","shape":[...],
 * "data_offsets":[begin,end]} (offsets into the data section) and holds a
 * "__metadata__" map of strings: format, step, model config, hyper-parameters,
 * the layout that wrote the file and "crc32.<name>" for every tensor. The data
 * section stores the weights in parameter-table order, then optim.m.<name> for
 * every tensor, then optim.v.<name>, contiguously.
 *
 * The file always holds global tensors; loading copies out the slice that a
 * shard owns, so one file resumes on any layout. Two writers produce the same
 * bytes: tt_checkpoint_save, one process holding the whole model, and
 * tt_checkpoint_save_sharded, every rank writing its own slices into the one
 * file with MPI-IO. Both write under NAME.tmp.<pid> and rename onto NAME only
 * a complete, synced file. Everything read from a file
 * is treated as hostile: sizes are checked against the file before anything
 * is allocated or read, and every failure is a one-line message naming the
 * file. */
#define _POSIX_C_SOURCE 200809L

#include "tt/train/checkpoint.h"

#include <cjson/cJSON.h>
#include <mpi.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "tt/comm/comm.h"
#include "tt/model/model.h"

/* A header bigger than this is not one we wrote: refuse it before allocating. */
#define CKPT_HEADER_MAX (100ull * 1024 * 1024)
/* JSON numbers are doubles: integers above 2^53 would not be exact. */
#define CKPT_INT_MAX 9007199254740992.0
/* safetensors allows any rank; we bound it only to keep the parser simple. */
#define CKPT_MAX_DIMS 8
/* Floats converted per chunk when writing (bounds the scratch buffer). */
#define CKPT_CHUNK 16384
/* "crc32." + "optim.m." + a tensor name fits easily. */
#define CKPT_KEY_MAX (TT_NAME_MAX + 32)

/* The three arrays stored per tensor and the prefix of their stored names. */
enum { KIND_W, KIND_M, KIND_V, KIND_COUNT };
static const char *const kind_prefix[KIND_COUNT] = {"", "optim.m.", "optim.v."};
static const tt_kind kind_of_stored[KIND_COUNT] = {TT_W, TT_M, TT_V};

static float *kind_data(const tt_tensor *t, int kind)
{
    return tt_tensor_data(t, kind_of_stored[kind]);
}

static void stored_name(char *out, size_t cap, const tt_tensor *t, int kind)
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

static void floats_to_le(unsigned char *dst, const float *src, size_t n)
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

static void floats_from_le(float *dst, const unsigned char *src, size_t n)
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

/* Copies a string taken from a file into out for use in a message: at most
 * about 60 characters, control bytes replaced, so the message stays one line. */
static const char *printable(const char *s, char *out, size_t cap)
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

static void format_shape(char *out, size_t cap, int ndim, const uint64_t *dims)
{
    size_t used = (size_t)snprintf(out, cap, "[");
    for (int d = 0; d < ndim && used < cap; d++)
        used += (size_t)snprintf(out + used, cap - used, "%s%" PRIu64, d ? "," : "", dims[d]);
    if (used < cap)
        snprintf(out + used, cap - used, "]");
}

/* ---- saving ------------------------------------------------------------------ */

/* Elements stored for t: its global tensor (real rows only). */
static size_t stored_numel(const tt_tensor *t)
{
    return (size_t)t->gshape[0] * (size_t)t->gshape[1];
}

/* Where every stored array of the global table p lies in the data section:
 * off[kind * p->n + i] is the byte offset of array `kind` of tensor i (the
 * weights in table order, then every m, then every v). Returns the size of
 * the data section. Both writers and the header take their offsets from here,
 * so they cannot disagree. */
static uint64_t stored_offsets(const tt_params *p, uint64_t *off)
{
    uint64_t at = 0;
    for (int kind = 0; kind < KIND_COUNT; kind++)
        for (int i = 0; i < p->n; i++) {
            off[kind * p->n + i] = at;
            at += 4 * (uint64_t)stored_numel(&p->t[i]);
        }
    return at;
}

/* CRC-32 of the bytes t's array `kind` occupies in the file. */
static uint32_t stored_crc(const tt_tensor *t, int kind, unsigned char *scratch)
{
    const float *src = kind_data(t, kind);
    size_t n = stored_numel(t);
    uint32_t crc = 0;
    for (size_t i = 0; i < n; i += CKPT_CHUNK) {
        size_t k = n - i < CKPT_CHUNK ? n - i : CKPT_CHUNK;
        floats_to_le(scratch, src + i, k);
        crc = tt_crc32(crc, scratch, 4 * k);
    }
    return crc;
}

/* Adds one metadata string (safetensors metadata values must be strings). */
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

/* Builds the JSON header (unpadded) of global table p, with crc[kind * p->n
 * + i] as the checksum of each stored array and off[] from stored_offsets;
 * NULL when cJSON runs out of memory. A checksum always prints as 8 hex
 * digits, so the header's length does not depend on the checksums: the
 * collective writer relies on that to write it before it knows them. */
static char *build_header(const tt_params *p, const tt_ckpt_info *info, const uint32_t *crc,
                          const uint64_t *off)
{
    const tt_run_config *r = &info->run;
    const tt_optim_config *o = &r->optim;
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
    int bad = !root || !meta;
    /* Doubles with 17 significant digits read back to the same bits, so a
     * resumed run continues on exactly the schedule it left. */
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
    bad |= add_meta(meta, "lr", "%.17g", o->lr);
    bad |= add_meta(meta, "lr_min", "%.17g", o->lr_min);
    bad |= add_meta(meta, "warmup", "%d", o->warmup);
    bad |= add_meta(meta, "weight_decay", "%.17g", o->weight_decay);
    bad |= add_meta(meta, "clip", "%.17g", o->clip);
    bad |= add_meta(meta, "beta1", "%.17g", o->beta1);
    bad |= add_meta(meta, "beta2", "%.17g", o->beta2);
    bad |= add_meta(meta, "eps", "%.17g", o->eps);
    bad |= add_meta(meta, "seed", "%" PRIu64, r->seed);
    bad |= add_meta(meta, "eval_every", "%ld", r->eval_every);
    bad |= add_meta(meta, "tp", "%d", info->tp);
    bad |= add_meta(meta, "pp", "%d", info->pp);
    bad |= add_meta(meta, "dp", "%d", info->dp);

    for (int kind = 0; kind < KIND_COUNT && !bad; kind++)
        for (int i = 0; i < p->n && !bad; i++) {
            const tt_tensor *t = &p->t[i];
            const int s = kind * p->n + i;
            char name[CKPT_KEY_MAX], key[CKPT_KEY_MAX + 8];
            stored_name(name, sizeof name, t, kind);
            snprintf(key, sizeof key, "crc32.%s", name);
            bad |= add_meta(meta, key, "%08" PRIx32, crc[s]);

            cJSON *ent = cJSON_AddObjectToObject(root, name);
            cJSON *shape = ent ? cJSON_AddArrayToObject(ent, "shape") : NULL;
            cJSON *offs = ent ? cJSON_AddArrayToObject(ent, "data_offsets") : NULL;
            if (!ent || !shape || !offs || !cJSON_AddStringToObject(ent, "dtype", "F32")) {
                bad = 1;
                break;
            }
            /* Integers below 2^53 (any real file) print exactly as integers. */
            for (int d = 0; d < t->ndim; d++)
                bad |= !cJSON_AddItemToArray(shape, cJSON_CreateNumber(t->gshape[d]));
            uint64_t end = off[s] + 4 * (uint64_t)stored_numel(t);
            bad |= !cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off[s]));
            bad |= !cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)end));
        }
    char *text = bad ? NULL : cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

/* Everything before the data section: the u64 little-endian header length
 * and the header, padded with spaces so the data starts 8-byte aligned
 * (safetensors' convention, lets readers map the floats in place). Sets
 * *size; NULL when cJSON runs out of memory. */
static unsigned char *framed_header(const tt_params *p, const tt_ckpt_info *info,
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

/* The shard's slice lies inside its global tensor and its local shape fits
 * its split, so copies between the shard and the global layout stay in
 * bounds whatever the table says. */
static int shard_is_consistent(const tt_tensor *t)
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

static int write_all(FILE *f, const void *data, size_t n)
{
    return fwrite(data, 1, n, f) == n ? 0 : -1;
}

/* Makes the rename itself durable; failure only weakens crash safety, so it
 * is not reported. */
static void sync_parent_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir;
    if (!slash)
        dir = strdup(".");
    else if (slash == path)
        dir = strdup("/");
    else {
        dir = tt_malloc((size_t)(slash - path) + 1);
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = '\0';
    }
    if (!dir)
        return;
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

/* "<path>.tmp.<pid>": the private name a file is written under. */
static char *temp_name(const char *path, long pid)
{
    size_t cap = strlen(path) + 32;
    char *tmp = tt_malloc(cap);
    snprintf(tmp, cap, "%s.tmp.%ld", path, pid);
    return tmp;
}

int tt_checkpoint_save(const char *path, const tt_params *p, const tt_ckpt_info *info,
                       tt_err *e)
{
    /* The file holds global tensors, so the table must hold them whole
     * (vocabulary padding rows past the real ones are allowed and dropped). */
    for (int i = 0; i < p->n; i++) {
        const tt_tensor *t = &p->t[i];
        if ((t->ndim != 1 && t->ndim != 2) || t->offset != 0 ||
            tt_tensor_real_rows(t) != t->gshape[0] || t->lshape[1] != t->gshape[1])
            return tt_fail(e, "cannot write checkpoint '%s': tensor '%s' is a slice "
                              "(%dx%d at offset %d of %dx%d), not the whole tensor",
                           path, t->name, t->lshape[0], t->lshape[1], t->offset,
                           t->gshape[0], t->gshape[1]);
    }

    /* One process holds everything, so the checksums come straight from
     * memory and the header is final before the first byte is written. */
    const size_t nst = (size_t)KIND_COUNT * (size_t)p->n;
    uint64_t *off = tt_malloc((nst ? nst : 1) * sizeof *off);
    uint32_t *crc = tt_malloc((nst ? nst : 1) * sizeof *crc);
    unsigned char *scratch = tt_malloc(4 * CKPT_CHUNK);
    stored_offsets(p, off);
    for (int kind = 0; kind < KIND_COUNT; kind++)
        for (int i = 0; i < p->n; i++)
            crc[kind * p->n + i] = stored_crc(&p->t[i], kind, scratch);
    size_t hsize = 0;
    unsigned char *header = framed_header(p, info, crc, off, &hsize);
    free(off);
    free(crc);
    if (!header) {
        free(scratch);
        return tt_fail(e, "cannot write checkpoint '%s': out of memory building the header",
                       path);
    }

    /* Everything goes to a private temporary name; only a complete, synced
     * file is renamed over `path`, so a failure (or a crash) at any point
     * leaves whatever was there before intact. */
    char *tmp = temp_name(path, (long)getpid());
    int err = 0;
    FILE *f = NULL;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || !(f = fdopen(fd, "wb"))) {
        err = errno;
        if (fd >= 0)
            close(fd);
        free(tmp);
        free(header);
        free(scratch);
        return tt_fail(e, "cannot write checkpoint '%s': %s", path, strerror(err));
    }
    int failed = write_all(f, header, hsize);
    for (int kind = 0; kind < KIND_COUNT && !failed; kind++)
        for (int i = 0; i < p->n && !failed; i++) {
            const float *src = kind_data(&p->t[i], kind);
            size_t cnt = stored_numel(&p->t[i]);
            for (size_t j = 0; j < cnt && !failed; j += CKPT_CHUNK) {
                size_t k = cnt - j < CKPT_CHUNK ? cnt - j : CKPT_CHUNK;
                floats_to_le(scratch, src + j, k);
                failed = write_all(f, scratch, 4 * k);
            }
        }
    if (!failed)
        failed = fflush(f) != 0 || fsync(fileno(f)) != 0;
    if (failed)
        err = errno;
    if (fclose(f) != 0 && !failed) {
        failed = 1;
        err = errno;
    }
    if (!failed && rename(tmp, path) != 0) {
        failed = 1;
        err = errno;
    }
    if (failed)
        unlink(tmp);
    else
        sync_parent_dir(path);
    free(tmp);
    free(header);
    free(scratch);
    if (failed)
        return tt_fail(e, "cannot write checkpoint '%s': %s", path,
                       err ? strerror(err) : "write error");
    return 0;
}

/* ---- collective saving (MPI-IO) ------------------------------------------------
 *
 * Every rank writes its own slices straight into one shared file, so no rank
 * ever holds more than its shards. The bytes are exactly those
 * tt_checkpoint_save would write for the whole model holding the same values:
 * same header (built by every rank from the whole-model table), same offsets,
 * same checksums. The checksums are not known until the data is in the file,
 * so the header first goes out with zero checksums (the same width), the
 * ranks then read the stored arrays back round-robin to checksum them, and
 * rank 0 rewrites the header in place.
 *
 * Every failure is agreed on by all ranks before anyone acts on it, so no rank
 * waits forever in a collective another has skipped, and every rank returns
 * the same message. */

/* A code beyond MPI's (which are >= 0): a transfer that made no progress
 * although MPI reported success, with the errno left behind (0 if none). Open
 * MPI 4.1's OMPIO does this when pwrite() fails, e.g. with EFBIG or ENOSPC:
 * it prints the reason, returns MPI_SUCCESS and a count of 0 bytes. */
#define CKPT_NO_PROGRESS(err) (-1 - (err))

/* Why an MPI-IO call failed, as one line. Error classes with a POSIX
 * counterpart are worded with its strerror() text, as the serial writer words
 * them ("No such file or directory"); the others by MPI_Error_string, with
 * line breaks and trailing noise removed. */
static void mpi_reason(int code, char *out, size_t cap)
{
    if (code < 0) {
        int sys = -1 - code;
        snprintf(out, cap, "%s", sys ? strerror(sys) : "a read or write made no progress");
        return;
    }
    int cls = MPI_ERR_OTHER;
    MPI_Error_class(code, &cls);
    int posix = cls == MPI_ERR_NO_SUCH_FILE ? ENOENT
              : cls == MPI_ERR_ACCESS       ? EACCES
              : cls == MPI_ERR_NO_SPACE     ? ENOSPC
              : cls == MPI_ERR_QUOTA        ? EDQUOT
              : cls == MPI_ERR_READ_ONLY    ? EROFS
              : cls == MPI_ERR_FILE_EXISTS  ? EEXIST
                                            : 0;
    if (posix) {
        snprintf(out, cap, "%s", strerror(posix));
        return;
    }
    char s[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    if (MPI_Error_string(code, s, &len) != MPI_SUCCESS || len <= 0) {
        snprintf(out, cap, "MPI-IO error %d", code);
        return;
    }
    s[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING] = '\0';
    for (char *q = s; *q; q++)
        if ((unsigned char)*q < 0x20)
            *q = ' ';
    size_t n = strlen(s);
    while (n > 0 && strchr(" .", s[n - 1]))
        s[--n] = '\0';
    snprintf(out, cap, "%s", s);
}

static int io_fail(tt_err *e, const char *path, int code)
{
    char why[MPI_MAX_ERROR_STRING + 32];
    mpi_reason(code, why, sizeof why);
    return tt_fail(e, "cannot write checkpoint '%s': %s", path, why);
}

/* Makes a verdict collective (and is a barrier): -1 on every rank if
 * `failed` on any, with the message of the lowest failing rank copied into
 * *msg everywhere, so all ranks report the same line; 0 otherwise. */
static int agree(const tt_grid *g, int me, int nranks, int failed, tt_err *msg)
{
    int who = failed ? me : nranks;
    tt_allreduce(g, TT_GROUP_OTHER, &who, 1, MPI_INT, MPI_MIN);
    if (who == nranks)
        return 0;
    tt_bcast(g, TT_GROUP_OTHER, msg->msg, (int)sizeof msg->msg, MPI_CHAR, who);
    return -1;
}

/* Whether this rank's shard t is the one copy of its elements that goes to
 * the file: replicas beyond the first DP rank hold the same values, and so do
 * the TP ranks beyond the first for a replicated tensor. */
static int writes_shard(const tt_grid *g, const tt_tensor *t)
{
    return tt_tensor_canonical(t, g->dp_rank, g->tp_rank);
}

/* Checks this rank's shards against the whole-model table: each must be a
 * consistent slice of a model tensor, of the same shape and split, with its
 * buffers allocated. Local verdict; the caller agrees on it. */
static int check_local_shards(const char *path, const tt_grid *g, const tt_params *whole,
                              const tt_params *local, tt_err *e)
{
    char gpu[64];
    for (int i = 0; i < local->n; i++) {
        const tt_tensor *t = &local->t[i];
        int j = tt_params_find(whole, t->name);
        tt_gpu_name(g, g->world_rank, gpu, sizeof gpu); /* for the messages */
        if (j < 0)
            return tt_fail(e, "cannot write checkpoint '%s': %s holds tensor '%s', which is "
                              "not part of the model", path, gpu, t->name);
        const tt_tensor *w = &whole->t[j];
        if (t->ndim != w->ndim || t->gshape[0] != w->gshape[0] ||
            t->gshape[1] != w->gshape[1] || t->split != w->split || !shard_is_consistent(t))
            return tt_fail(e, "cannot write checkpoint '%s': %s holds tensor '%s' as an "
                              "inconsistent shard (%dx%d at offset %d of %dx%d)", path, gpu,
                           t->name, t->lshape[0], t->lshape[1], t->offset, t->gshape[0],
                           t->gshape[1]);
        if (!t->w || !t->m || !t->v)
            return tt_fail(e, "cannot write checkpoint '%s': %s holds tensor '%s' without "
                              "its buffers", path, gpu, t->name);
    }
    return 0;
}

/* Checks, before anything is written, that the writing shards of all ranks
 * hold every element of every global tensor exactly once. Shards of a tensor
 * all share its split (checked above), so it is enough to count, per row of a
 * row-split tensor, per column of a column-split one, or once for a whole
 * one, how many writers hold it; the counts are summed over the world. The
 * sums are the same on every rank, and so are the verdict and its message. */
static int check_coverage(const char *path, const tt_grid *g, const tt_params *whole,
                          const tt_params *local, tt_err *e)
{
    int *base = tt_malloc(((size_t)whole->n + 1) * sizeof *base);
    long long total = 0;
    for (int j = 0; j < whole->n; j++) {
        const tt_tensor *w = &whole->t[j];
        base[j] = (int)total;
        total += w->split == TT_SPLIT_ROWS ? w->gshape[0]
               : w->split == TT_SPLIT_COLS ? w->gshape[1] : 1;
        if (total > INT_MAX) {
            free(base);
            return tt_fail(e, "cannot write checkpoint '%s': the model is too large to "
                              "check its shards", path);
        }
    }
    int *marks = tt_calloc(total ? (size_t)total : 1, sizeof *marks);
    for (int i = 0; i < local->n; i++) {
        const tt_tensor *t = &local->t[i];
        if (!writes_shard(g, t))
            continue;
        int *m = marks + base[tt_params_find(whole, t->name)];
        int lo = t->split == TT_SPLIT_NONE ? 0 : t->offset;
        int len = t->split == TT_SPLIT_ROWS ? tt_tensor_real_rows(t)
                : t->split == TT_SPLIT_COLS ? t->lshape[1] : 1;
        for (int u = lo; u < lo + len; u++)
            m[u]++;
    }
    tt_allreduce(g, TT_GROUP_OTHER, marks, (int)total, MPI_INT, MPI_SUM);
    int rc = 0;
    for (int j = 0; j < whole->n && rc == 0; j++) {
        const tt_tensor *w = &whole->t[j];
        int units = (j + 1 < whole->n ? base[j + 1] : (int)total) - base[j];
        for (int u = 0; u < units && rc == 0; u++) {
            int held = marks[base[j] + u];
            if (held == 1)
                continue;
            char where[48] = "";
            if (w->split != TT_SPLIT_NONE)
                snprintf(where, sizeof where, " %s %d",
                         w->split == TT_SPLIT_ROWS ? "row" : "column", u);
            rc = tt_fail(e, "cannot write checkpoint '%s': tensor '%s'%s is held by %d "
                            "writing shard(s), need exactly 1 (the writers are DP rank 0, "
                            "and TP rank 0 for a replicated tensor)", path, w->name, where,
                         held);
        }
    }
    free(marks);
    free(base);
    return rc;
}

/* Writes n bytes at byte `at` of the file; MPI_SUCCESS or why not. A short
 * write (as at a full disk) is continued, so that the call that cannot make
 * progress tells why. errno is only a hint for that case (see
 * CKPT_NO_PROGRESS), hence cleared first. */
static int write_bytes(MPI_File fh, MPI_Offset at, const void *buf, int n)
{
    const unsigned char *p = buf;
    while (n > 0) {
        MPI_Status st;
        errno = 0;
        int got = 0, rc = MPI_File_write_at(fh, at, p, n, MPI_BYTE, &st);
        if (rc != MPI_SUCCESS)
            return rc;
        MPI_Get_count(&st, MPI_BYTE, &got);
        if (got <= 0 || got > n)
            return CKPT_NO_PROGRESS(got <= 0 ? errno : 0);
        p += got;
        at += got;
        n -= got;
    }
    return MPI_SUCCESS;
}

/* Writes n floats as little-endian at byte `at`, converted chunk by chunk. */
static int write_floats(MPI_File fh, MPI_Offset at, const float *src, size_t n,
                        unsigned char *scratch)
{
    for (size_t i = 0; i < n; i += CKPT_CHUNK) {
        size_t k = n - i < CKPT_CHUNK ? n - i : CKPT_CHUNK;
        floats_to_le(scratch, src + i, k);
        int rc = write_bytes(fh, at + (MPI_Offset)(4 * i), scratch, (int)(4 * k));
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

/* Writes array `kind` of shard t (real rows only) into its place in the
 * stored global tensor, which starts at byte `base`: a row slice or a whole
 * tensor is one contiguous run, a column slice one piece per row. */
static int write_slice(MPI_File fh, MPI_Offset base, const tt_tensor *t, int kind,
                       unsigned char *scratch)
{
    const float *src = kind_data(t, kind);
    const size_t gcols = (size_t)t->gshape[1], lcols = (size_t)t->lshape[1];
    const size_t rows = (size_t)tt_tensor_real_rows(t);
    if (t->split != TT_SPLIT_COLS) {
        size_t r0 = t->split == TT_SPLIT_ROWS ? (size_t)t->offset : 0;
        return write_floats(fh, base + (MPI_Offset)(4 * r0 * gcols), src, rows * lcols,
                            scratch);
    }
    for (size_t r = 0; r < rows; r++) {
        MPI_Offset at = base + (MPI_Offset)(4 * (r * gcols + (size_t)t->offset));
        int rc = write_floats(fh, at, src + r * lcols, lcols, scratch);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

/* CRC-32 of the n bytes at byte `at` of the file, as it now holds them. */
static int read_crc(MPI_File fh, MPI_Offset at, uint64_t n, unsigned char *scratch,
                    uint32_t *crc)
{
    uint32_t c = 0;
    for (uint64_t i = 0; i < n; i += 4 * CKPT_CHUNK) {
        int k = (int)(n - i < 4 * CKPT_CHUNK ? n - i : 4 * CKPT_CHUNK), got = 0;
        MPI_Status st;
        errno = 0;
        int rc = MPI_File_read_at(fh, at + (MPI_Offset)i, scratch, k, MPI_BYTE, &st);
        if (rc != MPI_SUCCESS)
            return rc;
        MPI_Get_count(&st, MPI_BYTE, &got);
        /* The bytes were just written, so anything short is an error. */
        if (got != k)
            return CKPT_NO_PROGRESS(errno);
        c = tt_crc32(c, scratch, (size_t)k);
    }
    *crc = c;
    return MPI_SUCCESS;
}

int tt_checkpoint_save_sharded(const char *path, const tt_grid *g, const tt_params *local,
                               const tt_ckpt_info *info, tt_err *e)
{
    int me, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    /* The file's tensor list and order: the whole model's table. */
    tt_params whole;
    tt_shard_spec spec = tt_shard_whole(&info->run.model);
    tt_model_shard_table(&whole, &info->run.model, &spec);
    const int n = whole.n, nst = KIND_COUNT * whole.n;
    uint64_t *off = tt_malloc((size_t)(nst ? nst : 1) * sizeof *off);
    uint32_t *crc = tt_calloc((size_t)(nst ? nst : 1), sizeof *crc);
    unsigned char *scratch = tt_malloc(4 * CKPT_CHUNK);
    stored_offsets(&whole, off);
    unsigned char *header = NULL;
    size_t hsize = 0;
    char *tmp = NULL;
    MPI_File fh = MPI_FILE_NULL;
    int opened = 0, attempted = 0, rc = -1, err, serr, failed;
    long pid = (long)getpid();
    tt_err msg = {{0}};

    /* Nothing is created before the shards are known to tile the model. */
    if (agree(g, me, nranks, check_local_shards(path, g, &whole, local, &msg) != 0, &msg) ||
        check_coverage(path, g, &whole, local, &msg) != 0)
        goto done;

    /* Zero checksums print as "00000000": a placeholder of the final width. */
    header = framed_header(&whole, info, crc, off, &hsize);
    err = !header ? tt_fail(&msg, "cannot write checkpoint '%s': out of memory building the "
                                  "header", path) : 0;
    if (agree(g, me, nranks, err != 0, &msg))
        goto done;

    /* Rank 0's pid names the temporary, as the serial writer's would. MPI-IO
     * has no O_TRUNC, so rank 0 first deletes any stale temporary of that
     * name (a reused pid; errors ignored, normally there is none) and the
     * file ends exactly where the data ends. It does so before broadcasting
     * the name, so no rank can open the file before it is gone. */
    if (me == 0) {
        tmp = temp_name(path, pid);
        MPI_File_delete(tmp, MPI_INFO_NULL);
        free(tmp);
    }
    tt_bcast(g, TT_GROUP_OTHER, &pid, 1, MPI_LONG, 0);
    tmp = temp_name(path, pid);
    attempted = 1;
    /* Files report errors by return code (MPI_ERRORS_RETURN, the default for
     * files) instead of aborting, so a bad path is a message, not a crash. */
    err = MPI_File_open(MPI_COMM_WORLD, tmp, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                        &fh);
    opened = err == MPI_SUCCESS;
    if (!opened)
        io_fail(&msg, path, err);
    if (agree(g, me, nranks, !opened, &msg)) {
        /* Closing is collective: if the open failed on some ranks only, the
         * others keep their handle rather than wait forever in the close. */
        opened = 0;
        goto done;
    }
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);

    /* The header (rank 0) and the slices together cover every byte once. */
    err = me == 0 ? write_bytes(fh, 0, header, (int)hsize) : MPI_SUCCESS;
    for (int i = 0; i < local->n && err == MPI_SUCCESS; i++) {
        const tt_tensor *t = &local->t[i];
        if (!writes_shard(g, t))
            continue;
        int j = tt_params_find(&whole, t->name);
        for (int kind = 0; kind < KIND_COUNT && err == MPI_SUCCESS; kind++)
            err = write_slice(fh, (MPI_Offset)(hsize + off[kind * n + j]), t, kind, scratch);
    }
    /* MPI-IO shows a rank the bytes another rank wrote only after
     * sync - barrier - sync; the agreement is the barrier. */
    serr = MPI_File_sync(fh);
    if (err == MPI_SUCCESS)
        err = serr;
    if (err != MPI_SUCCESS)
        io_fail(&msg, path, err);
    if (agree(g, me, nranks, err != MPI_SUCCESS, &msg))
        goto done;
    err = MPI_File_sync(fh);

    /* Each stored array's checksum, read back from the file by one rank. */
    for (int s = me; s < nst && err == MPI_SUCCESS; s += nranks)
        err = read_crc(fh, (MPI_Offset)(hsize + off[s]),
                       4 * (uint64_t)stored_numel(&whole.t[s % n]), scratch, &crc[s]);
    if (err != MPI_SUCCESS)
        io_fail(&msg, path, err);
    if (agree(g, me, nranks, err != MPI_SUCCESS, &msg))
        goto done;
    tt_allreduce(g, TT_GROUP_OTHER, crc, nst, MPI_UINT32_T, MPI_BOR);

    /* The real header replaces the placeholder byte for byte. */
    failed = 0;
    if (me == 0) {
        size_t size = 0;
        unsigned char *final = framed_header(&whole, info, crc, off, &size);
        if (!final)
            failed = tt_fail(&msg, "cannot write checkpoint '%s': out of memory building "
                                   "the header", path);
        else if (size != hsize)
            failed = tt_fail(&msg, "cannot write checkpoint '%s': internal error: the header "
                                   "changed length (%zu, then %zu bytes)", path, hsize, size);
        else if ((err = write_bytes(fh, 0, final, (int)size)) != MPI_SUCCESS)
            failed = io_fail(&msg, path, err);
        free(final);
    }
    serr = MPI_File_sync(fh);
    if (!failed && serr != MPI_SUCCESS)
        failed = io_fail(&msg, path, serr);
    if (agree(g, me, nranks, failed != 0, &msg))
        goto done;

    opened = 0;
    err = MPI_File_close(&fh);
    if (err != MPI_SUCCESS)
        io_fail(&msg, path, err);
    if (agree(g, me, nranks, err != MPI_SUCCESS, &msg))
        goto done;

    /* Complete and durable: only now does `path` change. */
    failed = 0;
    if (me == 0) {
        if (rename(tmp, path) != 0)
            failed = tt_fail(&msg, "cannot write checkpoint '%s': %s", path, strerror(errno));
        else
            sync_parent_dir(path);
    }
    if (agree(g, me, nranks, failed != 0, &msg))
        goto done;
    rc = 0;

done:
    if (rc != 0 && opened)
        MPI_File_close(&fh);
    /* A failed save leaves no temporary behind (errors ignored: it may never
     * have been created). */
    if (rc != 0 && attempted && me == 0)
        MPI_File_delete(tmp, MPI_INFO_NULL);
    free(tmp);
    free(header);
    free(scratch);
    free(crc);
    free(off);
    tt_params_free(&whole);
    if (rc != 0)
        return tt_fail(e, "%s", msg.msg);
    return 0;
}

/* ---- reading ----------------------------------------------------------------- */

typedef struct {
    const char *path;
    int fd;
    uint64_t data_start; /* 8 + header length */
    uint64_t data_size;  /* bytes after the header */
    cJSON *root;
    cJSON *meta;
} ckpt_file;

/* One parsed, validated tensor entry of the header. */
typedef struct {
    int ndim;
    uint64_t dims[CKPT_MAX_DIMS];
    uint64_t begin, end; /* bytes of the data section */
} ckpt_entry;

static void ckpt_close(ckpt_file *cf)
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

/* Validates one header entry (which is not __metadata__) into *en. */
static int parse_entry(const ckpt_file *cf, const cJSON *item, ckpt_entry *en, tt_err *e)
{
    char nm[72];
    const char *name = printable(item->string ? item->string : "", nm, sizeof nm);
    if (!cJSON_IsObject(item))
        return tt_fail(e, "checkpoint '%s': header entry '%s' is not a tensor description",
                       cf->path, name);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsString(dtype)) {
        return tt_fail(e, "checkpoint '%s': tensor '%s' has no dtype", cf->path, name);
    }
    if (strcmp(dtype->valuestring, "F32") != 0) {
        char dt[72];
        return tt_fail(e, "checkpoint '%s': tensor '%s' has dtype '%s'; only F32 is supported",
                       cf->path, name, printable(dtype->valuestring, dt, sizeof dt));
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

/* Opens path and validates the whole header: length, JSON, metadata, format,
 * and every tensor entry against the size of the file. */
static int ckpt_open(ckpt_file *cf, const char *path, tt_err *e)
{
    memset(cf, 0, sizeof *cf);
    cf->path = path;
    cf->fd = open(path, O_RDONLY);
    if (cf->fd < 0)
        return tt_fail(e, "cannot open checkpoint '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(cf->fd, &st) != 0) {
        int err = errno;
        ckpt_close(cf);
        return tt_fail(e, "cannot read checkpoint '%s': %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ckpt_close(cf);
        return tt_fail(e, "cannot read checkpoint '%s': %s", path,
                       S_ISDIR(st.st_mode) ? "it is a directory" : "not a regular file");
    }
    uint64_t size = (uint64_t)st.st_size;
    unsigned char len_le[8];
    if (size < 8 || read_at(cf->fd, len_le, 8, 0) != 0) {
        ckpt_close(cf);
        return tt_fail(e, "checkpoint '%s' is truncated: %" PRIu64 " bytes, too short for "
                          "the 8-byte header length", path, size);
    }
    uint64_t hlen = 0;
    for (int b = 7; b >= 0; b--)
        hlen = (hlen << 8) | len_le[b];
    if (hlen > CKPT_HEADER_MAX) {
        ckpt_close(cf);
        return tt_fail(e, "checkpoint '%s' is not a safetensors file: header length %" PRIu64
                          " is absurd (over 100 MB)", path, hlen);
    }
    if (hlen > size - 8) {
        ckpt_close(cf);
        return tt_fail(e, "checkpoint '%s' is truncated: its header needs %" PRIu64
                          " bytes but only %" PRIu64 " follow the length", path, hlen,
                       size - 8);
    }
    cf->data_start = 8 + hlen;
    cf->data_size = size - cf->data_start;

    char *text = tt_malloc((size_t)hlen + 1);
    if (read_at(cf->fd, text, (size_t)hlen, 8) != 0) {
        free(text);
        ckpt_close(cf);
        return tt_fail(e, "checkpoint '%s' is truncated: cannot read its header", path);
    }
    text[hlen] = '\0';
    const char *end = NULL;
    cf->root = cJSON_ParseWithLengthOpts(text, (size_t)hlen, &end, 0);
    /* Only padding may follow the JSON value. */
    size_t pos = end && end >= text && end <= text + hlen ? (size_t)(end - text) : 0;
    if (cf->root)
        while (pos < hlen && text[pos] != '\0' && strchr(" \t\r\n", text[pos]))
            pos++;
    int bad_json = !cf->root || pos != hlen;
    free(text);
    if (bad_json) {
        ckpt_close(cf);
        return tt_fail(e, "checkpoint '%s' has a corrupt header: not valid JSON (at byte %zu "
                          "of %" PRIu64 ")", path, pos, hlen);
    }
    if (!cJSON_IsObject(cf->root)) {
        ckpt_close(cf);
        return tt_fail(e, "checkpoint '%s' has a corrupt header: the JSON is not an object",
                       path);
    }
    cf->meta = cJSON_GetObjectItemCaseSensitive(cf->root, "__metadata__");
    if (!cJSON_IsObject(cf->meta)) {
        ckpt_close(cf);
        return tt_fail(e, "checkpoint '%s' has no __metadata__ map: not a tiny_transformer "
                          "checkpoint", path);
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, cf->meta) {
        if (!cJSON_IsString(it)) {
            char nm[72];
            int rc = tt_fail(e, "checkpoint '%s': __metadata__ value '%s' is not a string",
                             path, printable(it->string ? it->string : "", nm, sizeof nm));
            ckpt_close(cf);
            return rc;
        }
    }
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(cf->meta, "format");
    if (!format || strcmp(format->valuestring, TT_CKPT_FORMAT) != 0) {
        char fm[72];
        int rc = format
            ? tt_fail(e, "checkpoint '%s' has format '%s', expected '%s'", path,
                      printable(format->valuestring, fm, sizeof fm), TT_CKPT_FORMAT)
            : tt_fail(e, "checkpoint '%s' has no format in its __metadata__: not a "
                         "tiny_transformer checkpoint", path);
        ckpt_close(cf);
        return rc;
    }
    cJSON_ArrayForEach(it, cf->root) {
        ckpt_entry en;
        if (it == cf->meta)
            continue;
        if (parse_entry(cf, it, &en, e) != 0) {
            ckpt_close(cf);
            return -1;
        }
    }
    return 0;
}

static const char *meta_get(const ckpt_file *cf, const char *key)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(cf->meta, key);
    return j ? j->valuestring : NULL; /* every value was checked to be a string */
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
    if (end == s || *end || errno || v < lo || v > hi)
        return tt_fail(e, "checkpoint '%s': __metadata__ '%s' = '%s' is not an integer in "
                          "[%ld, %ld]", cf->path, key, printable(s, buf, sizeof buf), lo, hi);
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
    if (end == s || *end || !isfinite(v))
        return tt_fail(e, "checkpoint '%s': __metadata__ '%s' = '%s' is not a finite number",
                       cf->path, key, printable(s, buf, sizeof buf));
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
                          "integer", cf->path, key, printable(s, buf, sizeof buf));
    *out = (uint64_t)v;
    return 0;
}

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
    return 0;
}

int tt_checkpoint_read_info(const char *path, tt_ckpt_info *info, tt_err *e)
{
    ckpt_file cf;
    if (ckpt_open(&cf, path, e) != 0)
        return -1;
    tt_ckpt_info got;
    int rc = read_meta(&cf, &got, e);
    ckpt_close(&cf);
    if (rc == 0)
        *info = got;
    return rc;
}

/* Refuses a shard whose slice is not inside its global tensor, so the copy
 * below cannot run out of bounds whatever the table says. */
static int check_shard(const char *path, const tt_tensor *t, tt_err *e)
{
    if (!shard_is_consistent(t))
        return tt_fail(e, "cannot load checkpoint '%s': the model's tensor '%s' is an "
                          "inconsistent shard (%dx%d at offset %d of %dx%d)", path, t->name,
                       t->lshape[0], t->lshape[1], t->offset, t->gshape[0], t->gshape[1]);
    return 0;
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
    if (read_at(cf->fd, buf, bytes, cf->data_start + en->begin) != 0) {
        free(buf);
        return tt_fail(e, "checkpoint '%s' is truncated: cannot read tensor '%s'", cf->path,
                       name);
    }
    char key[CKPT_KEY_MAX + 8];
    snprintf(key, sizeof key, "crc32.%s", name);
    const char *want_s = meta_get(cf, key);
    char *end = NULL;
    unsigned long want = 0;
    if (want_s && strlen(want_s) == 8 && want_s[0] != '-' && want_s[0] != '+')
        want = strtoul(want_s, &end, 16);
    if (!end || *end) {
        free(buf);
        return tt_fail(e, "checkpoint '%s': __metadata__ has no valid '%s' (8 hex digits)",
                       cf->path, key);
    }
    uint32_t got = tt_crc32(0, buf, bytes);
    if (got != (uint32_t)want) {
        free(buf);
        return tt_fail(e, "checkpoint '%s': checksum mismatch in tensor '%s' (stored %08lx, "
                          "data gives %08" PRIx32 ")", cf->path, name, want, got);
    }

    /* The slice: rows [offset, offset+real) for ROWS, columns
     * [offset, offset+lcols) of every row for COLS, everything for NONE. */
    size_t gcols = (size_t)t->gshape[1], lcols = (size_t)t->lshape[1];
    size_t rows = (size_t)tt_tensor_real_rows(t);
    size_t r0 = t->split == TT_SPLIT_ROWS ? (size_t)t->offset : 0;
    size_t c0 = t->split == TT_SPLIT_COLS ? (size_t)t->offset : 0;
    for (size_t r = 0; r < rows; r++)
        floats_from_le(dst + r * lcols, buf + 4 * ((r0 + r) * gcols + c0), lcols);
    /* Vocabulary padding rows must stay zero whatever the table held before. */
    memset(dst + rows * lcols, 0, ((size_t)t->lshape[0] - rows) * lcols * sizeof(float));
    free(buf);
    return 0;
}

int tt_checkpoint_load(const char *path, tt_params *p, tt_err *e)
{
    ckpt_file cf;
    if (ckpt_open(&cf, path, e) != 0)
        return -1;
    int rc = 0;
    /* Everything the header can tell (presence, shapes) is checked before any
     * weight is overwritten, so the common mistakes leave the model as it was.
     * Only a checksum failure found while copying leaves it partly loaded. */
    for (int i = 0; i < p->n && rc == 0; i++) {
        rc = check_shard(path, &p->t[i], e);
        for (int kind = 0; kind < KIND_COUNT && rc == 0; kind++) {
            char name[CKPT_KEY_MAX];
            ckpt_entry en;
            stored_name(name, sizeof name, &p->t[i], kind);
            rc = find_entry(&cf, &p->t[i], name, &en, e);
        }
    }
    for (int kind = 0; kind < KIND_COUNT && rc == 0; kind++)
        for (int i = 0; i < p->n && rc == 0; i++) {
            char name[CKPT_KEY_MAX];
            ckpt_entry en;
            stored_name(name, sizeof name, &p->t[i], kind);
            rc = find_entry(&cf, &p->t[i], name, &en, e);
            if (rc == 0)
                rc = load_one(&cf, &p->t[i], name, &en, kind_data(&p->t[i], kind), e);
        }
    ckpt_close(&cf);
    return rc;
}
