/* validate_report.c - the --validate oracle's table and verdict: the worst
 * error per kind of tensor, and which quantity, step and GPU a failure names.
 * validate.c gathers the errors this prints. */
#include "tt/train/validate.h"
#include "tt/comm/comm.h"

#include <stdlib.h>
#include <string.h>

/* The table groups the blocks: "blocks.*.attn.q.weight" is the worst over
 * every block, so the table stays short for any depth. */
static void kind_of(const char *name, char *out, size_t n)
{
    int layer;
    char rest[TT_NAME_MAX];  /* the scan stops at 63 bytes: "blocks.*." + 63 < 96 */
    if (sscanf(name, "blocks.%d.%63s", &layer, rest) == 2)
        snprintf(out, n, "blocks.*.%s", rest);
    else
        snprintf(out, n, "%s", name);
}

int tt_validate_report(tt_validator *v, FILE *out)
{
    int pass = v->first_bad_step < 0;
    tt_bcast(v->g, TT_GROUP_OTHER, &pass, 1, MPI_INT, 0);
    /* On a failure, the GPU whose copy of the named quantity is furthest off:
     * each rank knows its own; the largest wins (the lowest rank on a tie). */
    struct {
        double err;
        int rank;
    } worst = {v->first_bad_mine, v->g->world_rank};
    if (!pass)
        tt_allreduce(v->g, TT_GROUP_OTHER, &worst, 1, MPI_DOUBLE_INT, MPI_MAXLOC);
    if (v->g->world_rank == 0 && out) {
        if (v->every_step)
            fprintf(out, "\nvalidation against the unsharded reference, every step (%ld); ",
                    v->steps);
        else if (v->steps > 1)
            fprintf(out, "\nvalidation against the unsharded reference, spot check of steps %ld "
                         "and %ld (--validate checks every step); ", v->first_checked,
                    v->last_checked);
        else
            fprintf(out, "\nvalidation against the unsharded reference, spot check of step %ld "
                         "(--validate checks every step); ", v->first_checked);
        fprintf(out, "relative L2 error per tensor, worst over steps and blocks\n");
        fprintf(out, "  %-28s %11s %11s %11s %11s %11s\n", "tensor", "grad max|e|", "grad rel",
                "weight rel", "Adam m rel", "Adam v rel");
        int *done = tt_calloc((size_t)v->n, sizeof(int));
        for (int i = 0; i < v->n; i++) {
            if (done[i])
                continue;
            char kind[96], other[96];
            kind_of(v->ref.P.t[i].name, kind, sizeof kind);
            double e[5] = {0};
            for (int j = i; j < v->n; j++) {
                kind_of(v->ref.P.t[j].name, other, sizeof other);
                if (strcmp(kind, other) != 0)
                    continue;
                done[j] = 1;
                double f[5] = {v->grad_abs[j], v->grad_rel[j], v->w_rel[j], v->m_rel[j], v->v_rel[j]};
                for (int k = 0; k < 5; k++)
                    if (f[k] > e[k])
                        e[k] = f[k];
            }
            fprintf(out, "  %-28s %11.2e %11.2e %11.2e %11.2e %11.2e\n", kind, e[0], e[1], e[2],
                    e[3], e[4]);
        }
        free(done);
        fprintf(out, "  %-28s %11s %11.2e\n", "loss (worst step)", "", v->loss_rel);
        fprintf(out, "  %-28s %11s %11.2e\n", "gradient norm (worst step)", "", v->norm_rel);
        fprintf(out, "  tolerances: loss %.0e, gradients %.0e, weights %.0e, Adam moments %.0e "
                     "(float32 sums in another order; see doc/validation.md)\n",
                TT_TOL_LOSS, TT_TOL_GRAD, TT_TOL_PARAM, TT_TOL_MOMENT);
        if (v->rounding_n > 0)
            fprintf(out, "  weights: %ld of %zu elements (%.2g%%) left out, whose last Adam step "
                         "the rounding of a near-zero gradient decides (sqrt(v-hat) under %.0f "
                         "eps); their gradients and moments are compared\n",
                    v->rounding_n, v->ref.P.total, 100.0 * (double)v->rounding_n /
                    (double)v->ref.P.total, TT_ROUNDING_EPS);
        if (pass)
            fprintf(out, "validation PASSED: the sharded run matches the unsharded one\n");
        else {
            char gpu[48];
            fprintf(out, "validation FAILED: %s diverges first, at step %ld, worst on %s "
                         "(relative error %.2e there, tolerance %.0e; the table gives each "
                         "tensor's worst step)\n",
                    v->first_bad, v->first_bad_step, tt_gpu_name(v->g, worst.rank, gpu, sizeof gpu),
                    v->first_bad_err, v->first_bad_tol);
        }
    }
    return pass;
}
