/* ckpt_shards.c - what the collective writer (ckpt_mpiio.c) checks before it
 * creates anything: every rank's shards are consistent slices of the model's
 * tensors, and the writing shards of all ranks (tt_tensor_canonical) hold
 * every element of every global tensor exactly once. A hole would leave
 * bytes of the file unwritten, an overlap would have two ranks race to
 * write them; both would make a file that looks fine and is not. */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "tt/comm/comm.h"

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
