/* grid.c - choosing and checking a layout, and building the TP/PP/DP
 * communicators of design.md section 3. */
#include "tt/comm/grid.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int tt_grid_rank_of(const tt_grid *g, int dp_rank, int pp_rank, int tp_rank)
{
    return tp_rank + g->tp * (dp_rank + g->dp * pp_rank);
}

int tt_grid_tp_of(const tt_grid *g, int r) { return r % g->tp; }
int tt_grid_dp_of(const tt_grid *g, int r) { return (r / g->tp) % g->dp; }
int tt_grid_pp_of(const tt_grid *g, int r) { return r / (g->tp * g->dp); }

/* The rules one size breaks on its own, whatever the others are (-1: not
 * given, nothing to check). Each broken rule is appended, "; "-separated. */
static void size_rules(int tp, int pp, int dp, const tt_layout_rules *r, char *buf, size_t n)
{
    int v = r->virtual_stages > 1 ? r->virtual_stages : 1;
    if (tp >= 1 && r->heads % tp != 0)
        tt_appendf(buf, n, "%stp %d must divide --heads %d (each TP rank owns whole heads)",
            *buf ? "; " : "", tp, r->heads);
    if (pp >= 1 && pp * v > r->layers && v == 1)
        tt_appendf(buf, n, "%spp %d exceeds --layers %d (every pipeline stage needs a block)",
            *buf ? "; " : "", pp, r->layers);
    else if (pp >= 1 && pp * v > r->layers)
        /* The chunk count comes from --virtual-stages or from the schedule
         * (interleaved and zb-v run two by default); the numbers show why a
         * pp that looks small is refused. */
        tt_appendf(buf, n, "%spp %d x %d chunks per stage (virtual stages) = %d exceeds --layers %d "
                           "(every chunk needs a block; --layers %d would allow pp %d)",
            *buf ? "; " : "", pp, v, pp * v, r->layers, pp * v, pp);
    if (dp >= 1 && r->batch % dp != 0)
        tt_appendf(buf, n, "%sdp %d must divide --batch %d (each DP rank takes batch/dp sequences)",
            *buf ? "; " : "", dp, r->batch);
}

int tt_layout_check(int world, int tp, int pp, int dp, const tt_layout_rules *r, tt_err *e)
{
    if (tp < 1 || pp < 1 || dp < 1)
        return tt_fail(e, "every size must be at least 1 (got tp %d pp %d dp %d)", tp, pp, dp);
    /* Every rule the layout breaks, not only the first: a student who fixes
     * one should not meet the next only on the following try. */
    char why[sizeof e->msg] = "";
    if ((long)tp * pp * dp != world)
        tt_appendf(why, sizeof why, "tp %d x pp %d x dp %d = %ld GPUs, but %s%d rank%s started", tp, pp,
            dp, (long)tp * pp * dp, world < (long)tp * pp * dp ? "only " : "", world,
            world == 1 ? " was" : "s were");
    size_rules(tp, pp, dp, r, why, sizeof why);
    if (r->batch % dp == 0 && (r->batch / dp) % r->micro_batches != 0) {
        /* Name the micro-batch counts that would work with this dp. */
        char ok[128] = "";
        int per = r->batch / dp, k = 0;
        for (int m = 1; m <= per && k < (int)sizeof ok - 12; m++)
            if (per % m == 0)
                k += snprintf(ok + k, sizeof ok - (size_t)k, "%s%d", k ? ", " : "", m);
        tt_appendf(why, sizeof why, "%s--micro-batches %d must divide batch/dp = %d/%d = %d (with dp %d: "
                             "--micro-batches %s)", *why ? "; " : "", r->micro_batches, r->batch,
            dp, per, dp, ok);
    }
    if (*why)
        return tt_fail(e, "%s", why);
    return 0;
}

/* Layouts that pass the rules, best first by the preference of tt_grid_choose;
 * fixed sizes (non-zero) are kept. Returns how many there are; the first
 * cap of them (in the order found) are in out, sorted. */
static int candidates(int world, int tp0, int pp0, int dp0, const tt_layout_rules *r,
                      int (*out)[3], int cap, int use_fits)
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
            if (tt_layout_check(world, tp, pp, dp, r, NULL) ||
                (use_fits && r->fits && r->fits(r->ctx, tp, pp, dp)))
                continue;
            if (n < cap) {
                out[n][0] = tp;
                out[n][1] = pp;
                out[n][2] = dp;
            }
            n++;
        }
    }
    /* Order: more sizes > 1 first, then smaller tp, then larger pp. */
    for (int i = 1; i < (n < cap ? n : cap); i++)
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

/* "--tp 2 --pp 3": the sizes the user gave, for messages. */
static void given_flags(int tp, int pp, int dp, char *buf, size_t n)
{
    *buf = 0;
    if (tp >= 0)
        tt_appendf(buf, n, "--tp %d", tp);
    if (pp >= 0)
        tt_appendf(buf, n, "%s--pp %d", *buf ? " " : "", pp);
    if (dp >= 0)
        tt_appendf(buf, n, "%s--dp %d", *buf ? " " : "", dp);
}

/* The mpirun line that starts w ranks with the user's own options. */
static void add_mpirun_line(char *buf, size_t n, int w, int tp, int pp, int dp,
                            const tt_layout_rules *r)
{
    char flags[48];
    given_flags(tp, pp, dp, flags, sizeof flags);
    tt_appendf(buf, n, "\n  mpirun --oversubscribe -np %d %s", w,
        r->command ? r->command : "./tiny_transformer");
    if (!r->command)
        tt_appendf(buf, n, " %s", flags);
}

/* The counts that work nearest the one started: lo below (0: none), hi
 * above; one line each. */
static void add_mpirun(char *buf, size_t n, int lo, int hi, int tp, int pp, int dp,
                       const tt_layout_rules *r)
{
    if (lo)
        tt_appendf(buf, n, "\nStart %d or %d ranks, one per virtual GPU:", lo, hi);
    else
        tt_appendf(buf, n, "\nStart %d ranks, one per virtual GPU:", hi);
    if (lo)
        add_mpirun_line(buf, n, lo, tp, pp, dp, r);
    add_mpirun_line(buf, n, hi, tp, pp, dp, r);
}

/* The layouts that work on world ranks as a table, four to a line, sorted by
 * tp then pp; as many as fit in buf, then how many more there are. When none
 * does and other counts were already suggested, nothing: the message has
 * said what is wrong. */
static void add_table(char *buf, size_t n, int world, const tt_layout_rules *r, int suggested)
{
    int list[128][3];
    int total = candidates(world, -1, -1, -1, r, list, 128, 1);
    int count = total < 128 ? total : 128;
    if (total == 0 && suggested)
        return;
    if (total == 0) {
        tt_appendf(buf, n, "\nNo layout works on %d rank%s for this model and batch.", world,
                   world == 1 ? "" : "s");
        return;
    }
    if (world == 1) {
        tt_appendf(buf, n, "\nOn 1 rank the only layout is tp 1 pp 1 dp 1.");
        return;
    }
    for (int i = 1; i < count; i++)
        for (int j = i; j > 0 && (list[j][0] < list[j - 1][0] ||
                                  (list[j][0] == list[j - 1][0] && list[j][1] < list[j - 1][1]));
             j--) {
            int t[3];
            memcpy(t, list[j], sizeof t);
            memcpy(list[j], list[j - 1], sizeof t);
            memcpy(list[j - 1], t, sizeof t);
        }
    int cols = count < 4 ? count : 4;
    tt_appendf(buf, n, "\nLayouts that work on %d ranks:\n", world);
    for (int c = 0; c < cols; c++)
        tt_appendf(buf, n, "%s  tp pp dp", c ? "  " : "");
    int shown = 0;
    /* Each line of the table takes 12 bytes a layout plus the newline; keep
     * room for the closing "(and N more)". */
    while (shown < count && strlen(buf) + 13 * cols + 20 < n) {
        tt_appendf(buf, n, "\n");
        for (int c = 0; c < cols && shown < count; c++, shown++)
            tt_appendf(buf, n, "%s  %2d %2d %2d", c ? "  " : "", list[shown][0], list[shown][1],
                list[shown][2]);
    }
    if (shown < total)
        tt_appendf(buf, n, "\n  (and %d more)", total - shown);
}

int tt_grid_choose(int world, int *tp, int *pp, int *dp, const tt_layout_rules *r, tt_err *e)
{
    int all_given = *tp >= 0 && *pp >= 0 && *dp >= 0;
    if (all_given && *tp >= 1 && *pp >= 1 && *dp >= 1 && tt_layout_check(world, *tp, *pp, *dp, r, NULL) == 0)
        return 0;
    int list[64][3];
    if (!all_given && *tp != 0 && *pp != 0 && *dp != 0) {
        /* A layout the run would refuse only when no other works: then it
         * is the run that says why. */
        int n = candidates(world, *tp, *pp, *dp, r, list, 64, 1);
        if (n == 0)
            n = candidates(world, *tp, *pp, *dp, r, list, 64, 0);
        if (n > 0) {
            *tp = list[0][0];
            *pp = list[0][1];
            *dp = list[0][2];
            return 0;
        }
    }
    /* No layout: say every reason, how many ranks would work if the count is
     * the trouble, then the layouts that work on the ranks started. */
    char msg[sizeof e->msg] = "bad layout: ", flags[48];
    given_flags(*tp, *pp, *dp, flags, sizeof flags);
    if (*tp == 0 || *pp == 0 || *dp == 0) {
        tt_appendf(msg, sizeof msg, "%s: every size must be at least 1.", flags);
        add_table(msg, sizeof msg, world, r, 0);
        return tt_fail(e, "%s", msg);
    }
    int g = (*tp >= 1 ? *tp : 1) * (*pp >= 1 ? *pp : 1) * (*dp >= 1 ? *dp : 1);
    char why[sizeof e->msg] = "";
    if (all_given) {
        tt_err whole;
        tt_layout_check(world, *tp, *pp, *dp, r, &whole);
        tt_appendf(why, sizeof why, "%s", whole.msg);
    } else {
        if (world % g)
            tt_appendf(why, sizeof why, "%s needs a multiple of %d ranks, but %s%d rank%s started", flags,
                g, world < g ? "only " : "", world, world == 1 ? " was" : "s were");
        size_rules(*tp, *pp, *dp, r, why, sizeof why);
        if (!*why) {
            /* Each size is fine alone and the count divides: the sizes the
             * rest of the ranks would take break a rule together. */
            int t = *tp >= 1 ? *tp : 1, p = *pp >= 1 ? *pp : 1, d = *dp >= 1 ? *dp : 1;
            if (*dp < 0)
                d = world / (t * p);
            else if (*pp < 0)
                p = world / (t * d);
            else
                t = world / (p * d);
            tt_err whole;
            tt_layout_check(world, t, p, d, r, &whole);
            tt_appendf(why, sizeof why, "no layout%s%s works on %d rank%s for this model and batch; "
                                 "e.g. tp %d pp %d dp %d: %s", *flags ? " with " : "", flags,
                world, world == 1 ? "" : "s", t, p, d, whole.msg);
        }
    }
    tt_appendf(msg, sizeof msg, "%s.", why);
    /* When the rank count is the only trouble, the counts that work nearest
     * the one started: all sizes given allow one count; otherwise the
     * nearest below (if any) and above. */
    char alone[sizeof e->msg] = "";
    int suggested = 0;
    size_rules(*tp, *pp, *dp, r, alone, sizeof alone);
    if (!*alone && (all_given ? g != world : world % g != 0)) {
        int lo = 0, hi = 0;
        if (all_given) {
            hi = tt_layout_check(g, *tp, *pp, *dp, r, NULL) == 0 ? g : 0;
        } else {
            for (int w = world - world % g; w >= g && !lo; w -= g)
                if (candidates(w, *tp, *pp, *dp, r, list, 64, 0) > 0)
                    lo = w;
            for (int w = (world / g + 1) * g; w <= 4096 && !hi; w += g)
                if (candidates(w, *tp, *pp, *dp, r, list, 64, 0) > 0)
                    hi = w;
        }
        if (hi || lo) {
            add_mpirun(msg, sizeof msg, hi ? lo : 0, hi ? hi : lo, *tp, *pp, *dp, r);
            suggested = 1;
        }
    }
    if (*flags || all_given)
        add_table(msg, sizeof msg, world, r, suggested);
    return tt_fail(e, "%s", msg);
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
