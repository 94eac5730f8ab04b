/* ckpt_shards.c - what the collective writer (ckpt_mpiio.c) checks before it
 * opens its file: every rank's shards are consistent slices of the model's
 * tensors, and the writing shards of all ranks (tt_tensor_canonical) hold
 * every element of every global tensor exactly once. A hole would leave
 * bytes of the file unwritten, an overlap would have two ranks race to
 * write them; both would make a file that looks fine and is not. And every
 * rank sees the one file they write (tt_checkpoint_shared_check). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tt/comm/comm.h"
#include "tt/core/outpath.h"

#include "ckpt_internal.h"

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
            t->gshape[1] != w->gshape[1] || t->split != w->split ||
            !ckpt_shard_is_consistent(t))
            return tt_fail(e, "cannot write checkpoint '%s': %s holds tensor '%s' as an "
                              "inconsistent shard (%dx%d at offset %d of %dx%d)", path, gpu,
                           t->name, t->lshape[0], t->lshape[1], t->offset, t->gshape[0],
                           t->gshape[1]);
        if (!t->w || (!local->z.stage && (!t->m || !t->v))) /* ZeRO: moments owned */
            return tt_fail(e, "cannot write checkpoint '%s': %s holds tensor '%s' without "
                              "its buffers", path, gpu, t->name);
    }
    return 0;
}

/* Where the coverage units of each tensor of `whole` start in one array of
 * counts: a unit is a row of a row-split tensor, a column of a column-split
 * one, the whole of a replicated one. Returns the total, or -1 past INT_MAX
 * (MPI counts are ints). */
static long long coverage_units(const tt_params *whole, int *base)
{
    long long total = 0;
    for (int j = 0; j < whole->n; j++) {
        const tt_tensor *w = &whole->t[j];
        base[j] = (int)total;
        total += w->split == TT_SPLIT_ROWS ? w->gshape[0]
               : w->split == TT_SPLIT_COLS ? w->gshape[1] : 1;
        if (total > INT_MAX)
            return -1;
    }
    base[whole->n] = (int)total;
    return total;
}

/* Checks, before anything is written, that the writing shards of all ranks
 * hold every element of every global tensor exactly once. Shards of a tensor
 * all share its split (checked above), so it is enough to count per unit how
 * many writers hold it; the counts are summed over the world. The sums are
 * the same on every rank, and so are the verdict and its message. */
static int check_coverage(const char *path, const tt_grid *g, const tt_params *whole,
                          const tt_params *local, tt_err *e)
{
    int *base = tt_malloc(((size_t)whole->n + 1) * sizeof *base);
    long long total = coverage_units(whole, base);
    if (total < 0) {
        free(base);
        return tt_fail(e, "cannot write checkpoint '%s': the model is too large to "
                          "check its shards", path);
    }
    int *marks = tt_calloc(total ? (size_t)total : 1, sizeof *marks);
    for (int i = 0; i < local->n; i++) {
        const tt_tensor *t = &local->t[i];
        if (!tt_tensor_canonical(t, g->dp_rank, g->tp_rank))
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
        for (int u = 0; u < base[j + 1] - base[j] && rc == 0; u++) {
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

int ckpt_check_shards(const char *path, const tt_grid *g, const tt_params *whole,
                      const tt_params *local, tt_err *e)
{
    int bad = check_local_shards(path, g, whole, local, e) != 0;
    if (tt_agree_error(g, bad, e))
        return -1;
    return check_coverage(path, g, whole, local, e);
}

/* Rank 0 makes the temporary's name with a token in it and every other rank
 * reads it back. Ranks that see different filesystems (hosts without a
 * shared one, or mpirun -wdir giving each a directory of its own) would each
 * make a file of their own, and Open MPI 4.1's MPI_File_open then waits for
 * ever inside itself (its shared-file-pointer barrier against the failing
 * rank's close); a message and status 1 on every rank instead. */
int tt_checkpoint_shared_check(const char *path, const tt_grid *g, tt_err *e)
{
    if (g->world_size == 1)
        return 0;
    long pid = (long)getpid();
    tt_bcast(g, TT_GROUP_OTHER, &pid, 1, MPI_LONG, 0);
    char *tmp = tt_temp_name(path, pid);
    char token[64] = {0}, seen[64] = {0};
    const size_t len = sizeof token - 1;
    int failed = 0;
    if (g->world_rank == 0) {
        snprintf(token, sizeof token, "tiny_transformer %ld %.9f", pid, tt_now());
        unlink(tmp); /* a stale temporary of a reused pid */
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
        const ssize_t put = fd < 0 ? -1 : write(fd, token, len);
        failed = put != (ssize_t)len || fsync(fd) != 0;
        if (failed)
            tt_fail(e, "cannot write checkpoint '%s': cannot make its temporary '%s': %s", path,
                    tmp, put >= 0 && put < (ssize_t)len ? "a short write" : strerror(errno));
        if (fd >= 0)
            close(fd);
    }
    failed = tt_agree_error(g, failed, e) != 0; /* every rank's verdict, not its own */
    if (!failed) {
        tt_bcast(g, TT_GROUP_OTHER, token, (int)sizeof token, MPI_CHAR, 0);
        if (g->world_rank != 0) {
            /* Whatever is under that name here (on a filesystem of its own)
             * is read without waiting: a FIFO would block a plain open. */
            const char *why = "it holds another file's bytes";
            int fd = tt_open_regular(tmp, &why);
            const int got = fd < 0 ? -1 : (int)read(fd, seen, len);
            if (fd >= 0 && got < 0)
                why = strerror(errno);
            failed = got != (int)len || memcmp(seen, token, len) != 0;
            if (failed)
                tt_fail(e, "cannot write checkpoint '%s': rank %d does not see the temporary "
                        "'%s' that rank 0 made (%s); every rank writes its part of one "
                        "checkpoint file, so the ranks need one filesystem",
                        path, g->world_rank, tmp, why);
            if (fd >= 0)
                close(fd);
        }
        failed = tt_agree_error(g, failed, e) != 0;
    }
    if (g->world_rank == 0)
        unlink(tmp);
    free(tmp);
    return failed ? -1 : 0;
}
