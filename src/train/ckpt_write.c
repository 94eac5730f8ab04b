/* ckpt_write.c - the serial checkpoint writer (tt_checkpoint_save): one
 * process holding the whole model writes the file by itself. Also home of
 * the protocol both writers follow: the file is written under the private
 * name NAME.tmp.<pid>, synced, and only then renamed onto NAME, so a failure
 * or a crash at any point leaves whatever NAME held before intact.
 *
 * The collective writer (ckpt_mpiio.c) produces the same bytes for the same
 * values; tests/test_checkpoint_mpi_np4.c holds the two to that. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_internal.h"
#include "tt/core/outpath.h"

/* Failure only weakens crash safety (the rename may be lost, the old file
 * comes back), so it is not reported. */
void ckpt_sync_parent_dir(const char *path)
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

/* The file holds global tensors, so the table must hold them whole
 * (vocabulary padding rows past the real ones are allowed and dropped). */
static int check_whole(const char *path, const tt_params *p, tt_err *e)
{
    for (int i = 0; i < p->n; i++) {
        const tt_tensor *t = &p->t[i];
        if ((t->ndim != 1 && t->ndim != 2) || t->offset != 0 ||
            tt_tensor_real_rows(t) != t->gshape[0] || t->lshape[1] != t->gshape[1])
            return tt_fail(e, "cannot write checkpoint '%s': tensor '%s' is a slice "
                              "(%dx%d at offset %d of %dx%d), not the whole tensor",
                           path, t->name, t->lshape[0], t->lshape[1], t->offset,
                           t->gshape[0], t->gshape[1]);
    }
    return 0;
}

/* CRC-32 of the bytes t's array `kind` occupies in the file. */
static uint32_t stored_crc(const tt_tensor *t, int kind, unsigned char *scratch)
{
    const float *src = ckpt_kind_data(t, kind);
    size_t n = ckpt_stored_numel(t);
    uint32_t crc = 0;
    for (size_t i = 0; i < n; i += CKPT_CHUNK) {
        size_t k = n - i < CKPT_CHUNK ? n - i : CKPT_CHUNK;
        ckpt_floats_to_le(scratch, src + i, k);
        crc = tt_crc32(crc, scratch, 4 * k);
    }
    return crc;
}

/* One process holds everything, so the checksums come straight from memory
 * and the header is final before the first byte is written. NULL when cJSON
 * runs out of memory. */
static unsigned char *final_header(const tt_params *p, const tt_ckpt_info *info,
                                   unsigned char *scratch, size_t *hsize)
{
    const size_t nst = (size_t)CKPT_KINDS * (size_t)p->n;
    uint64_t *off = tt_malloc((nst ? nst : 1) * sizeof *off);
    uint32_t *crc = tt_malloc((nst ? nst : 1) * sizeof *crc);
    ckpt_stored_offsets(p, off);
    for (int kind = 0; kind < CKPT_KINDS; kind++)
        for (int i = 0; i < p->n; i++)
            crc[kind * p->n + i] = stored_crc(&p->t[i], kind, scratch);
    unsigned char *header = ckpt_framed_header(p, info, crc, off, hsize);
    free(off);
    free(crc);
    return header;
}

/* Creates (or truncates) the temporary; NULL with *err = errno on failure. */
static FILE *create_temp(const char *tmp, int *err)
{
    FILE *f = NULL;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || !(f = fdopen(fd, "wb"))) {
        *err = errno;
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    return f;
}

static int write_all(FILE *f, const void *data, size_t n)
{
    return fwrite(data, 1, n, f) == n ? 0 : -1;
}

/* Writes the header and every stored array in file order, makes it durable
 * and closes f. Nonzero on failure, with *err = errno (0 if none was left). */
static int write_contents(FILE *f, const unsigned char *header, size_t hsize,
                          const tt_params *p, unsigned char *scratch, int *err)
{
    int failed = write_all(f, header, hsize);
    for (int kind = 0; kind < CKPT_KINDS && !failed; kind++)
        for (int i = 0; i < p->n && !failed; i++) {
            const float *src = ckpt_kind_data(&p->t[i], kind);
            size_t cnt = ckpt_stored_numel(&p->t[i]);
            for (size_t j = 0; j < cnt && !failed; j += CKPT_CHUNK) {
                size_t k = cnt - j < CKPT_CHUNK ? cnt - j : CKPT_CHUNK;
                ckpt_floats_to_le(scratch, src + j, k);
                failed = write_all(f, scratch, 4 * k);
            }
        }
    if (!failed)
        failed = fflush(f) != 0 || fsync(fileno(f)) != 0;
    if (failed)
        *err = errno;
    /* Some file systems (NFS) report a failed write only when it is closed. */
    if (fclose(f) != 0 && !failed) {
        failed = 1;
        *err = errno;
    }
    return failed;
}

int tt_checkpoint_save(const char *path, const tt_params *p, const tt_ckpt_info *info,
                       tt_err *e)
{
    if (check_whole(path, p, e) != 0)
        return -1;
    unsigned char *scratch = tt_malloc(4 * CKPT_CHUNK);
    size_t hsize = 0;
    unsigned char *header = final_header(p, info, scratch, &hsize);
    if (!header) {
        free(scratch);
        return tt_fail(e, "cannot write checkpoint '%s': out of memory building the header",
                       path);
    }

    char *tmp = tt_temp_name(path, (long)getpid());
    int err = 0;
    FILE *f = create_temp(tmp, &err);
    if (!f) {
        free(tmp);
        free(header);
        free(scratch);
        return tt_fail(e, "cannot write checkpoint '%s': %s", path, strerror(err));
    }
    int failed = write_contents(f, header, hsize, p, scratch, &err);
    if (failed)
        tt_fail(e, "cannot write checkpoint '%s': %s", path, err ? strerror(err) : "write error");
    else /* re-checks that path is still a regular file or absent */
        failed = tt_replace_file(tmp, path, "checkpoint", e) != 0;
    if (failed)
        unlink(tmp);
    else
        ckpt_sync_parent_dir(path);
    free(tmp);
    free(header);
    free(scratch);
    return failed ? -1 : 0;
}
