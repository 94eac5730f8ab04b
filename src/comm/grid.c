/* grid.c - choosing and checking a layout, and building the TP/PP/DP
 * communicators of DESIGN section 3. */
#include "tt/comm/grid.h"

#include <string.h>

int tt_grid_rank_of(const tt_grid *g, int dp_rank, int pp_rank, int tp_rank)
{
    return tp_rank + g->tp * (dp_rank + g->dp * pp_rank);
}

int tt_grid_tp_of(const tt_grid *g, int r) { return r % g->tp; }
int tt_grid_dp_of(const tt_grid *g, int r) { return (r / g->tp) % g->dp; }
int tt_grid_pp_of(const tt_grid *g, int r) { return r / (g->tp * g->dp); }

int tt_layout_check(int world, int tp, int pp, int dp, const tt_layout_rules *r, tt_err *e)
{
    if (tp < 1 || pp < 1 || dp < 1)
        return tt_fail(e, "every size must be at least 1 (got tp %d pp %d dp %d)", tp, pp, dp);
    if ((long)tp * pp * dp != world)
        return tt_fail(e, "tp %d x pp %d x dp %d = %ld, but %d rank(s) were started", tp, pp, dp,
                       (long)tp * pp * dp, world);
    if (r->heads % tp != 0)
        return tt_fail(e, "tp %d must divide --heads %d (each TP rank owns whole heads)", tp,
                       r->heads);
    int v = r->virtual_stages > 1 ? r->virtual_stages : 1;
    if (pp * v > r->layers)
        return tt_fail(e, "pp %d%s exceeds --layers %d (every pipeline stage%s needs a block)",
                       pp, v > 1 ? " x virtual stages" : "", r->layers, v > 1 ? " chunk" : "");
    if (r->batch % dp != 0)
        return tt_fail(e, "dp %d must divide --batch %d (each DP rank takes batch/dp sequences)",
                       dp, r->batch);
    if ((r->batch / dp) % r->micro_batches != 0) {
        /* Name the micro-batch counts that would work with this dp. */
        char ok[128] = "";
        int per = r->batch / dp, k = 0;
        for (int m = 1; m <= per && k < (int)sizeof ok - 12; m++)
            if (per % m == 0)
                k += snprintf(ok + k, sizeof ok - (size_t)k, "%s%d", k ? ", " : "", m);
        return tt_fail(e, "--micro-batches %d must divide batch/dp = %d/%d = %d (with dp %d: "
                          "--micro-batches %s)", r->micro_batches, r->batch, dp, per, dp, ok);
    }
    return 0;
}

/* Layouts that pass the rules, best first by the preference of tt_grid_choose;
 * fixed sizes (non-zero) are kept. Returns how many were found. */
static int candidates(int world, int tp0, int pp0, int dp0, const tt_layout_rules *r,
                      int (*out)[3], int cap)
{
    int n = 0;
    for (int tp = 1; tp <= world; tp++) {
        if (world % tp || (tp0 >= 0 && tp != tp0))
            continue;
        for (int pp = 1; pp <= world / tp; pp++) {
            if ((world / tp) % pp || (pp0 >= 0 && pp != pp0))
                continue;
            int dp = world / tp / pp;
            if (dp0 >= 0 && dp != dp0)
                continue;
            if (tt_layout_check(world, tp, pp, dp, r, NULL))
                continue;
            if (n < cap) {
                out[n][0] = tp;
                out[n][1] = pp;
                out[n][2] = dp;
            }
            n++;
        }
    }
    if (n > cap)
        n = cap;
    /* Order: more sizes > 1 first, then smaller tp, then larger pp. */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0; j--) {
            int *a = out[j - 1], *b = out[j];
            int ka = (a[0] > 1) + (a[1] > 1) + (a[2] > 1), kb = (b[0] > 1) + (b[1] > 1) + (b[2] > 1);
            int better = kb > ka || (kb == ka && (b[0] < a[0] || (b[0] == a[0] && b[1] > a[1])));
            if (!better)
                break;
            int t[3] = {a[0], a[1], a[2]};
            memcpy(a, b, sizeof t);
            memcpy(b, t, sizeof t);
        }
    return n;
}

int tt_grid_choose(int world, int *tp, int *pp, int *dp, const tt_layout_rules *r, tt_err *e)
{
    int list[64][3];
    if (*tp >= 0 && *pp >= 0 && *dp >= 0) {
        tt_err why;
        if (tt_layout_check(world, *tp, *pp, *dp, r, &why) == 0)
            return 0;
        int n = candidates(world, -1, -1, -1, r, list, 64);
        char ok[400] = "";
        for (int i = 0; i < n && strlen(ok) < sizeof ok - 40; i++) {
            char one[40];
            snprintf(one, sizeof one, "%s--tp %d --pp %d --dp %d", i ? "; " : "", list[i][0],
                     list[i][1], list[i][2]);
            strcat(ok, one);
        }
        return tt_fail(e, "bad layout: %s. Layouts that work on %d rank(s): %s", why.msg, world,
                       n ? ok : "none for this model and batch");
    }
    int n = candidates(world, *tp, *pp, *dp, r, list, 64);
    if (n == 0) {
        /* Report why with the most natural completion, then the full list. */
        int t = *tp >= 0 ? *tp : 1, p = *pp >= 0 ? *pp : 1;
        int d = *dp >= 0 ? *dp : (t * p > 0 ? world / (t * p) : 1);
        *tp = t;
        *pp = p;
        *dp = d;
        return tt_grid_choose(world, tp, pp, dp, r, e);
    }
    *tp = list[0][0];
    *pp = list[0][1];
    *dp = list[0][2];
    return 0;
}

void tt_grid_init(tt_grid *g, int tp, int pp, int dp, MPI_Comm world)
{
    memset(g, 0, sizeof *g);
    g->tp = tp;
    g->pp = pp;
    g->dp = dp;
    g->world = world;
    MPI_Comm_rank(world, &g->world_rank);
    MPI_Comm_size(world, &g->world_size);
    g->tp_rank = tt_grid_tp_of(g, g->world_rank);
    g->dp_rank = tt_grid_dp_of(g, g->world_rank);
    g->pp_rank = tt_grid_pp_of(g, g->world_rank);
    /* Colour = the coordinates the group shares; key = the rank's place in it. */
    MPI_Comm_split(world, g->dp_rank + dp * g->pp_rank, g->tp_rank, &g->tp_comm);
    MPI_Comm_split(world, g->tp_rank + tp * g->pp_rank, g->dp_rank, &g->dp_comm);
    MPI_Comm_split(world, g->tp_rank + tp * g->dp_rank, g->pp_rank, &g->pp_comm);
    MPI_Comm_dup(g->pp_comm, &g->pp_clock_comm);
    /* In pp_comm a GPU's rank is its stage, so the neighbours are stage +-1. */
    g->prev_stage = g->pp_rank > 0 ? g->pp_rank - 1 : MPI_PROC_NULL;
    g->next_stage = g->pp_rank < pp - 1 ? g->pp_rank + 1 : MPI_PROC_NULL;
}

void tt_grid_free(tt_grid *g)
{
    MPI_Comm_free(&g->tp_comm);
    MPI_Comm_free(&g->dp_comm);
    MPI_Comm_free(&g->pp_comm);
    MPI_Comm_free(&g->pp_clock_comm);
}

const char *tt_gpu_name(const tt_grid *g, int r, char *buf, size_t n)
{
    snprintf(buf, n, "gpu%d(dp%d,pp%d,tp%d)", r, tt_grid_dp_of(g, r), tt_grid_pp_of(g, r),
             tt_grid_tp_of(g, r));
    return buf;
}

/* Prints the groups along one axis (0 = tp, 1 = dp, 2 = pp): one group per
 * rank whose coordinate on that axis is 0, in the order of those ranks. */
static void print_groups(const tt_grid *g, FILE *out, const char *label, int axis)
{
    int size = axis == 0 ? g->tp : axis == 1 ? g->dp : g->pp;
    fprintf(out, "  %s groups (%d group%s of %d GPU%s):", label, g->world_size / size,
            g->world_size / size == 1 ? "" : "s", size, size == 1 ? "" : "s");
    for (int r = 0; r < g->world_size; r++) {
        int c[3] = {tt_grid_tp_of(g, r), tt_grid_dp_of(g, r), tt_grid_pp_of(g, r)};
        if (c[axis] != 0)
            continue;
        fprintf(out, " {");
        for (int i = 0; i < size; i++) {
            c[axis] = i;
            fprintf(out, "%s%d", i ? "," : "", tt_grid_rank_of(g, c[1], c[2], c[0]));
        }
        fprintf(out, "}");
    }
    fprintf(out, "\n");
}

void tt_grid_print(const tt_grid *g, FILE *out)
{
    char name[48];
    fprintf(out, "virtual GPU grid: tp %d x pp %d x dp %d = %d GPUs "
                 "(world_rank = tp_rank + tp*(dp_rank + dp*pp_rank))\n",
            g->tp, g->pp, g->dp, g->world_size);
    for (int p = 0; p < g->pp; p++) {
        fprintf(out, "  stage %d:", p);
        for (int d = 0; d < g->dp; d++)
            for (int t = 0; t < g->tp; t++)
                fprintf(out, " %s", tt_gpu_name(g, tt_grid_rank_of(g, d, p, t), name, sizeof name));
        fprintf(out, "\n");
    }
    print_groups(g, out, "TP", 0);
    print_groups(g, out, "DP", 1);
    print_groups(g, out, "PP", 2);
}
