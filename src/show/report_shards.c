/* report_shards.c - --report shards: the tensors each virtual GPU holds, told
 * as the global tensor's shape and the slice of it the GPU keeps, so that a
 * student sees tensor parallelism cut a matrix by rows or by columns and the
 * pipeline hand each stage its blocks. Each GPU writes its own table as text
 * (the parameter table's shards, core/params.h) and rank 0 prints them all;
 * a DP replica's table is compared as text with dp 0's, so "holds the same"
 * is what the GPUs said, not what the layout implies. */
#include "tt/show/report_shards.h"
#include "tt/comm/comm.h"
#include "tt/core/params.h"

#include <stdlib.h>
#include <string.h>

/* One tensor: "name [rows,cols] rows a:b" (cols a:b, a:b of a 1-D tensor,
 * whole), with the vocabulary's padding rows said apart, and under ZeRO the
 * elements of it whose optimizer state (and gradients, weights) it owns. */
static int shard_line(char *buf, size_t n, const tt_params *P, const tt_tensor *t, int namew)
{
    char shape[32], slice[64];
    if (t->ndim == 2)
        snprintf(shape, sizeof shape, "[%d,%d]", t->gshape[0], t->gshape[1]);
    else
        snprintf(shape, sizeof shape, "[%d]", t->gshape[0]);
    const int dim = t->split == TT_SPLIT_COLS ? 1 : 0;
    if (t->split == TT_SPLIT_NONE ||
        (t->offset == 0 && t->lshape[dim] == t->gshape[dim])) { /* tp 1: all of it */
        snprintf(slice, sizeof slice, "whole");
    } else if (t->split == TT_SPLIT_COLS) {
        snprintf(slice, sizeof slice, "cols %d:%d", t->offset, t->offset + t->lshape[1]);
    } else {
        int real = tt_tensor_real_rows(t), pad = t->lshape[0] - real;
        int k = snprintf(slice, sizeof slice, "%s%d:%d", t->ndim == 2 ? "rows " : "", t->offset,
                         t->offset + real);
        if (pad > 0 && k > 0 && (size_t)k < sizeof slice)
            snprintf(slice + k, sizeof slice - (size_t)k, " + %d padding row%s", pad,
                     pad > 1 ? "s" : "");
    }
    /* Under ZeRO, the elements of this slice (row-major) in the piece of
     * t's unit this DP rank owns; none when the piece lies in other tensors. */
    char piece[64] = "";
    size_t a, b;
    if (P->z.stage > 0 && tt_tensor_owned(P, t, &a, &b) > 0)
        snprintf(piece, sizeof piece, "; ZeRO piece %zu:%zu of %zu", a, b, t->numel);
    else if (P->z.stage > 0)
        snprintf(piece, sizeof piece, "; ZeRO piece none of %zu", t->numel);
    return snprintf(buf, n, "  %-*s %-10s %s%s\n", namew, t->name, shape, slice, piece);
}

/* What a GPU keeps of its ZeRO piece, by stage: said once, in the header
 * and in each GPU's summary line. */
static const char *const zero_kept[] = {NULL, "the Adam moments",
                                        "the Adam moments and summed gradients",
                                        "the weights, Adam moments and summed gradients"};

/* This GPU's table as text: a summary line, then one line per tensor. */
static char *shard_text(const tt_model *m)
{
    const tt_params *P = &m->P;
    int namew = 0;
    for (int i = 0; i < P->n; i++)
        if ((int)strlen(P->t[i].name) > namew)
            namew = (int)strlen(P->t[i].name);
    size_t cap = 256 + (size_t)P->n * (size_t)(namew + 160), len = 0;
    char *s = tt_malloc(cap);
    /* Under ZeRO the count is the layout's shard, which ZeRO then cuts:
     * said, since the whole count alone reads as what the GPU keeps. */
    len += (size_t)snprintf(s + len, cap - len, "%d tensor%s, %zu floats%s", P->n,
                            P->n == 1 ? "" : "s", P->total,
                            P->z.stage > 0 ? " in its TP/PP shard" : "");
    if (P->z.stage > 0)
        len += (size_t)snprintf(s + len, cap - len,
                                "; ZeRO %d: %s of piece %d (of %d) of each unit only (%zu floats)%s",
                                P->z.stage, zero_kept[P->z.stage], P->z.rank, P->z.parts, P->z.shard,
                                P->z.stage == 3 ? "; a unit's weights are whole only while "
                                                  "gathered for its forward and backward"
                                                : "");
    len += (size_t)snprintf(s + len, cap - len, "\n");
    for (int i = 0; i < P->n && len < cap; i++)
        len += (size_t)shard_line(s + len, cap - len, P, &P->t[i], namew);
    return s;
}

void tt_report_shards(FILE *out, const tt_grid *g, const tt_model *m)
{
    char *mine = shard_text(m);
    int *sizes = NULL;
    char *all = tt_gather_var_to_root(g, mine, (int)strlen(mine) + 1, &sizes);
    free(mine);
    if (g->world_rank != 0 || !all) {
        free(all);
        free(sizes);
        return;
    }
    const char **text = tt_malloc((size_t)g->world_size * sizeof *text);
    for (int r = 0, off = 0; r < g->world_size; off += sizes[r], r++)
        text[r] = all + off;
    if (out) {
        fprintf(out, "\ntensors per virtual GPU: global shape and the slice this GPU holds "
                     "(rows a:b or\ncols a:b of the global tensor; whole = a full copy)\n");
        if (m->P.z.stage > 0)
            fprintf(out, "ZeRO piece a:b of N: the elements of that slice (row-major) of which "
                         "this GPU\nkeeps %s (ZeRO %d)\n",
                    zero_kept[m->P.z.stage], m->P.z.stage);
        for (int r = 0; r < g->world_size; r++) {
            char name[48], first[48];
            tt_gpu_name(g, r, name, sizeof name);
            int r0 = tt_grid_rank_of(g, 0, tt_grid_pp_of(g, r), tt_grid_tp_of(g, r));
            if (r0 != r && strcmp(text[r], text[r0]) == 0)
                fprintf(out, "%s holds the same as %s\n", name,
                        tt_gpu_name(g, r0, first, sizeof first));
            else
                fprintf(out, "%s: %s", name, text[r]);
        }
    }
    free(text);
    free(all);
    free(sizes);
}
