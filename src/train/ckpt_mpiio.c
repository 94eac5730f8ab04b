/* ckpt_mpiio.c - the collective checkpoint writer (tt_checkpoint_save_sharded):
 * every rank writes its own slices straight into one shared file with MPI-IO,
 * so no rank ever holds more than its shards. Beside app/main.c, which starts
 * and ends MPI, the only file outside src/comm/ that calls MPI itself: MPI-IO
 * has no counterpart in comm's collectives.
 *
 * The bytes are exactly those tt_checkpoint_save would write for the whole
 * model holding the same values: same header (built by every rank from the
 * whole-model table), same offsets, same checksums. The checksums are not
 * known until the data is in the file, so the header first goes out with
 * zero checksums (the same width), the ranks then read the stored arrays back
 * round-robin to checksum them, and rank 0 rewrites the header in place.
 *
 * Every failure is agreed on by all ranks (tt_agree_error) before anyone acts
 * on it, so no rank waits forever in a collective another has skipped, and
 * every rank returns the same message. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tt/comm/comm.h"
#include "tt/core/faults.h"
#include "tt/core/outpath.h"
#include "tt/model/model.h"

#include "ckpt_internal.h"

/* ---- MPI-IO errors ---------------------------------------------------------------- */

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
    int cls = MPI_ERR_OTHER;
    if (code >= 0)
        MPI_Error_class(code, &cls);
    /* A CKPT_NO_PROGRESS code carries its errno (perhaps 0) in itself. */
    const int posix = code < 0                    ? -1 - code
                    : cls == MPI_ERR_NO_SUCH_FILE ? ENOENT
                    : cls == MPI_ERR_ACCESS       ? EACCES
                    : cls == MPI_ERR_NO_SPACE     ? ENOSPC
                    : cls == MPI_ERR_QUOTA        ? EDQUOT
                    : cls == MPI_ERR_READ_ONLY    ? EROFS
                    : cls == MPI_ERR_FILE_EXISTS  ? EEXIST
                                                  : 0;
    if (posix || code < 0) {
        snprintf(out, cap, "%s", posix ? strerror(posix) : "a read or write made no progress");
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

/* ---- reading and writing the shared file ------------------------------------------ */

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
        ckpt_floats_to_le(scratch, src + i, k);
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
    const float *src = ckpt_kind_data(t, kind);
    const size_t gcols = (size_t)t->gshape[1], lcols = (size_t)t->lshape[1];
    const size_t rows = (size_t)tt_tensor_real_rows(t);
    if (t->split != TT_SPLIT_COLS) {
        int r0, c0;
        tt_tensor_origin(t, &r0, &c0);
        return write_floats(fh, base + (MPI_Offset)(4 * (size_t)r0 * gcols), src, rows * lcols,
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

/* Writes elements [a, a + n) (local, row-major, real rows) of array src of
 * shard t into the stored global tensor at byte `base`: what a GPU owns of
 * the Adam moments under ZeRO. A row or whole slice keeps its rows whole, so
 * the run is contiguous in the file; a column slice is one piece per row. */
static int write_range(MPI_File fh, MPI_Offset base, const tt_tensor *t, const float *src,
                       size_t a, size_t n, unsigned char *scratch)
{
    const size_t gcols = (size_t)t->gshape[1], lcols = (size_t)t->lshape[1];
    int r0, c0;
    tt_tensor_origin(t, &r0, &c0);
    if (t->split != TT_SPLIT_COLS)
        return write_floats(fh, base + (MPI_Offset)(4 * ((size_t)r0 * gcols + a)), src, n,
                            scratch);
    for (size_t e = a; e < a + n;) {
        size_t r = e / lcols, c = e % lcols, k = lcols - c < a + n - e ? lcols - c : a + n - e;
        MPI_Offset at = base + (MPI_Offset)(4 * (r * gcols + (size_t)c0 + c));
        int rc = write_floats(fh, at, src + (e - a), k, scratch);
        if (rc != MPI_SUCCESS)
            return rc;
        e += k;
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

/* ---- the save, step by step ----------------------------------------------------------
 * Each step ends in an agreement and returns its verdict, 0 or -1, the same
 * on every rank: so every rank runs the same steps and leaves at the same one,
 * with the message of the lowest failing rank in job->msg. */

typedef struct {
    const char *path;
    const tt_grid *g;
    const tt_params *local;   /* this rank's shards */
    const tt_ckpt_info *info;
    tt_params whole;          /* the file's tensors, in its order: the whole model */
    uint64_t *off;            /* ckpt_stored_offsets of whole */
    uint64_t data;            /* the size of the data section */
    uint32_t *crc;            /* checksums of the stored arrays, 0 until known */
    unsigned char *scratch;   /* CKPT_CHUNK floats as bytes */
    unsigned char *header;    /* the framed header with placeholder checksums */
    size_t hsize;
    char *tmp;                /* the temporary's name, once rank 0 has chosen it */
    MPI_File fh;
    int opened;               /* fh is open and must be closed (collectively) */
    tt_err msg;
} save_job;

static void job_begin(save_job *s, const char *path, const tt_grid *g,
                      const tt_params *local, const tt_ckpt_info *info)
{
    memset(s, 0, sizeof *s);
    s->path = path;
    s->g = g;
    s->local = local;
    s->info = info;
    tt_shard_spec spec = tt_shard_whole(&info->run.model);
    tt_model_shard_table(&s->whole, &info->run.model, &spec);
    const size_t nst = (size_t)CKPT_KINDS * (size_t)s->whole.n;
    s->off = tt_malloc((nst ? nst : 1) * sizeof *s->off);
    s->crc = tt_calloc(nst ? nst : 1, sizeof *s->crc);
    s->scratch = tt_malloc(4 * CKPT_CHUNK);
    s->data = ckpt_stored_offsets(&s->whole, s->off);
    s->fh = MPI_FILE_NULL;
}

/* 1. Nothing is created before the shards are known to tile the model. */
static int check_shards(save_job *s)
{
    return ckpt_check_shards(s->path, s->g, &s->whole, s->local, &s->msg);
}

/* 2. The header with zero checksums, which print as "00000000": a
 *    placeholder of the final width. */
static int placeholder_header(save_job *s)
{
    s->header = ckpt_framed_header(&s->whole, s->info, s->crc, s->off, &s->hsize);
    if (!s->header)
        tt_fail(&s->msg, "cannot write checkpoint '%s': out of memory building the header",
                s->path);
    return tt_agree_error(s->g, !s->header, &s->msg);
}

/* 2b. Room for the whole temporary: on a full disk OMPIO's writer prints a
 *     line of its own on every rank whose write fails, before our message. */
static int check_room(save_job *s)
{
    /* Every rank: each writes its part, under its own file size limit
     * (ulimit -f, which may differ between ranks) and on its host's view of
     * the filesystem. */
    int failed = tt_check_room(s->path, s->hsize + s->data, "checkpoint", &s->msg) != 0;
    return tt_agree_error(s->g, failed, &s->msg);
}

/* 2c. One file for all ranks (tt_checkpoint_shared_check, ckpt_shards.c). */
static int check_shared(save_job *s) { return tt_checkpoint_shared_check(s->path, s->g, &s->msg); }

/* 3. Rank 0's pid names the temporary, as the serial writer's would. MPI-IO
 *    has no O_TRUNC, so rank 0 first deletes any stale temporary of that
 *    name (a reused pid; errors ignored, normally there is none) and the file
 *    ends exactly where the data ends. It does so before broadcasting the
 *    name, so no rank can open the file before it is gone. */
static int open_temporary(save_job *s)
{
    long pid = (long)getpid();
    if (s->g->world_rank == 0) {
        char *stale = tt_temp_name(s->path, pid);
        MPI_File_delete(stale, MPI_INFO_NULL);
        free(stale);
    }
    tt_bcast(s->g, TT_GROUP_OTHER, &pid, 1, MPI_LONG, 0);
    s->tmp = tt_temp_name(s->path, pid);
    /* Files report errors by return code (MPI_ERRORS_RETURN, the default for
     * files) instead of aborting, so a bad path is a message, not a crash.
     * The file is shared by the ranks the agreements run on: the world. */
    int err = MPI_File_open(tt_group_comm(s->g, TT_GROUP_OTHER), s->tmp,
                            MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &s->fh);
    if (err != MPI_SUCCESS)
        io_fail(&s->msg, s->path, err);
    /* Closing is collective: if the open failed on some ranks only, the
     * others keep their handle (opened stays 0) rather than wait forever in
     * the close. */
    if (tt_agree_error(s->g, err != MPI_SUCCESS, &s->msg))
        return -1;
    s->opened = 1;
    MPI_File_set_errhandler(s->fh, MPI_ERRORS_RETURN);
    return 0;
}

/* 4. The header (rank 0) and the writing shards' slices together cover every
 *    byte of the file once. */
static int write_slices(save_job *s)
{
    const tt_grid *g = s->g;
    int err = g->world_rank == 0 ? write_bytes(s->fh, 0, s->header, (int)s->hsize)
                                 : MPI_SUCCESS;
    const tt_params *p = s->local;
    for (int i = 0; i < p->n && err == MPI_SUCCESS; i++) {
        const tt_tensor *t = &p->t[i];
        int j = tt_params_find(&s->whole, t->name);
        for (int kind = 0; kind < CKPT_KINDS && err == MPI_SUCCESS; kind++) {
            MPI_Offset at = (MPI_Offset)(s->hsize + s->off[kind * s->whole.n + j]);
            const tt_kind k = ckpt_kind_of(kind);
            if (!tt_kind_sharded(p, k)) {
                if (tt_tensor_canonical(t, g->dp_rank, g->tp_rank))
                    err = write_slice(s->fh, at, t, kind, s->scratch);
                continue;
            }
            /* ZeRO: the moments (stage 3: the weights too) are written by
             * the DP rank that owns them (the ranks' shards tile the
             * buffer, so each element once). */
            size_t a, b, real = tt_tensor_real_numel(t);
            tt_tensor_owned(p, t, &a, &b);
            if (!tt_tensor_canonical(t, 0, g->tp_rank) || a >= real)
                continue;
            err = write_range(s->fh, at, t, tt_owned_data(p, t, k, a), a,
                              (b < real ? b : real) - a, s->scratch);
        }
    }
    /* MPI-IO shows a rank the bytes another rank wrote only after
     * sync - barrier - sync; the agreement is the barrier, the second sync
     * opens the next step. */
    int serr = MPI_File_sync(s->fh);
    if (err == MPI_SUCCESS)
        err = serr;
    if (err != MPI_SUCCESS)
        io_fail(&s->msg, s->path, err);
    return tt_agree_error(g, err != MPI_SUCCESS, &s->msg);
}

/* 4b. The window a crash test aims at: data in the temporary, the
 *     checkpoint's name untouched (tt_fault_pause_in_save, a no-op unless a
 *     test asks for it). */
static int test_pause(save_job *s)
{
    tt_fault_pause_in_save(s->info->step, s->g->world_rank);
    return 0;
}

/* 5. Each stored array's checksum, read back from the file by one rank
 *    (round-robin), then shared: every other rank contributes zeros. */
static int checksum_file(save_job *s)
{
    const tt_grid *g = s->g;
    const int n = s->whole.n, nst = CKPT_KINDS * n;
    int err = MPI_File_sync(s->fh);
    for (int k = g->world_rank; k < nst && err == MPI_SUCCESS; k += g->world_size)
        err = read_crc(s->fh, (MPI_Offset)(s->hsize + s->off[k]),
                       4 * (uint64_t)ckpt_stored_numel(&s->whole.t[k % n]), s->scratch,
                       &s->crc[k]);
    if (err != MPI_SUCCESS)
        io_fail(&s->msg, s->path, err);
    if (tt_agree_error(g, err != MPI_SUCCESS, &s->msg))
        return -1;
    tt_allreduce(g, TT_GROUP_OTHER, s->crc, nst, MPI_UINT32_T, MPI_BOR);
    return 0;
}

/* 6. The real header replaces the placeholder byte for byte. */
static int finalise_header(save_job *s)
{
    int failed = 0;
    if (s->g->world_rank == 0) {
        size_t size = 0;
        int err;
        unsigned char *final = ckpt_framed_header(&s->whole, s->info, s->crc, s->off, &size);
        if (!final)
            failed = tt_fail(&s->msg, "cannot write checkpoint '%s': out of memory building "
                                      "the header", s->path);
        else if (size != s->hsize)
            failed = tt_fail(&s->msg, "cannot write checkpoint '%s': internal error: the "
                                      "header changed length (%zu, then %zu bytes)", s->path,
                             s->hsize, size);
        else if ((err = write_bytes(s->fh, 0, final, (int)size)) != MPI_SUCCESS)
            failed = io_fail(&s->msg, s->path, err);
        free(final);
    }
    int serr = MPI_File_sync(s->fh);
    if (!failed && serr != MPI_SUCCESS)
        failed = io_fail(&s->msg, s->path, serr);
    return tt_agree_error(s->g, failed != 0, &s->msg);
}

/* 7. Closing flushes whatever MPI-IO still buffers, so it can fail too. */
static int close_file(save_job *s)
{
    s->opened = 0;
    int err = MPI_File_close(&s->fh);
    if (err != MPI_SUCCESS)
        io_fail(&s->msg, s->path, err);
    return tt_agree_error(s->g, err != MPI_SUCCESS, &s->msg);
}

/* 8. Complete and durable: only now does `path` change. */
static int rename_into_place(save_job *s)
{
    int failed = 0;
    if (s->g->world_rank == 0) {
        /* Re-checks that path is still a regular file or absent. */
        if (tt_replace_file(s->tmp, s->path, "checkpoint", &s->msg) != 0)
            failed = 1;
        else
            ckpt_sync_parent_dir(s->path);
    }
    return tt_agree_error(s->g, failed != 0, &s->msg);
}

/* A failed save leaves no temporary behind (errors ignored: it may never
 * have been created). */
static void job_end(save_job *s, int rc)
{
    if (rc != 0 && s->opened)
        MPI_File_close(&s->fh);
    if (rc != 0 && s->tmp && s->g->world_rank == 0)
        MPI_File_delete(s->tmp, MPI_INFO_NULL);
    free(s->tmp);
    free(s->header);
    free(s->scratch);
    free(s->crc);
    free(s->off);
    tt_params_free(&s->whole);
}

int tt_checkpoint_save_sharded(const char *path, const tt_grid *g, const tt_params *local,
                               const tt_ckpt_info *info, tt_err *e)
{
    save_job s;
    job_begin(&s, path, g, local, info);
    /* Every step's verdict is agreed, so all ranks stop at the same one. */
    int rc = check_shards(&s) || placeholder_header(&s) || check_room(&s) ||
                     check_shared(&s) || open_temporary(&s) || write_slices(&s) || test_pause(&s) ||
                     checksum_file(&s) || finalise_header(&s) || close_file(&s) ||
                     rename_into_place(&s)
                 ? -1
                 : 0;
    job_end(&s, rc);
    if (rc != 0)
        return tt_fail(e, "%s", s.msg.msg);
    return 0;
}
