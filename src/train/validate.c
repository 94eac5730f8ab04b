/* validate.c - the --validate oracle: an unsharded reference trained beside
 * the sharded run, compared tensor by tensor, slice by slice (the table and
 * verdict it leads to are printed by validate_report.c). */
#include "tt/train/validate.h"
#include "tt/comm/comm.h"
#include "tt/train/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The elements [*a, *b) of shard t (local, row-major; real rows only) whose
 * array of kind k the GPU at (dp_rank, tp_rank) with table p sends and
 * compares: the canonical copy's whole slice, except for what ZeRO shards
 * (gradients after the reduction, Adam moments), where each DP rank holds
 * and counts the part it owns. Returns *b - *a. */
static size_t counted_range(const tt_params *p, const tt_tensor *t, tt_kind k, int dp_rank,
                            int tp_rank, size_t *a, size_t *b)
{
    const size_t real = tt_tensor_real_numel(t);
    *a = *b = 0;
    if (!tt_kind_sharded(p, k)) {
        if (tt_tensor_canonical(t, dp_rank, tp_rank))
            *b = real;
        return *b;
    }
    if (!tt_tensor_canonical(t, 0, tp_rank))
        return 0;
    tt_tensor_owned(p, t, a, b);
    if (*b > real)
        *b = real;
    if (*a > *b)
        *a = *b;
    return *b - *a;
}

/* Elements [a, a + n) of shard t, from src, to their places in the whole
 * tensor `whole` (gshape, row-major). */
static void place(const tt_tensor *t, const float *src, size_t a, size_t n, float *whole)
{
    const size_t lc = (size_t)t->lshape[1], gc = (size_t)t->gshape[1];
    int r0, c0;
    tt_tensor_origin(t, &r0, &c0);
    for (size_t e = a; e < a + n; e++)
        whole[((size_t)r0 + e / lc) * gc + (size_t)c0 + e % lc] = src[e - a];
}

void tt_validate_init(tt_validator *v, const tt_grid *g, const tt_run_config *rc,
                      const tt_model *sharded, const tt_shard_spec *specs, int every_step)
{
    memset(v, 0, sizeof *v);
    v->g = g;
    v->rc = rc;
    v->first_bad_step = -1;
    tt_shard_spec whole = tt_shard_whole(&rc->model);
    tt_model_init(&v->ref, &rc->model, &whole, g->world_rank == 0 ? rc->batch : 0, rc->seed);
    v->n = v->ref.P.n;
    v->local_of = tt_malloc((size_t)v->n * sizeof(int));
    for (int i = 0; i < v->n; i++)
        v->local_of[i] = tt_params_find(&sharded->P, v->ref.P.t[i].name);
    double **arrs[] = {&v->grad_rel, &v->grad_abs, &v->w_rel, &v->m_rel, &v->v_rel, &v->w_abs};
    for (size_t k = 0; k < sizeof arrs / sizeof arrs[0]; k++)
        *arrs[k] = tt_calloc((size_t)v->n, sizeof(double));
    v->rounding = tt_calloc(v->ref.P.total ? v->ref.P.total : 1, 1);

    /* Every step: the weights; a spot check also takes the Adam moments. */
    v->kinds = every_step ? 1 : 3;
    v->every_step = every_step;
    /* What each rank sends when the weights are gathered: its counted slices. */
    static const tt_kind kinds[3] = {TT_W, TT_M, TT_V};
    size_t np = 0, a, b;
    for (int k = 0; k < v->kinds; k++)
        for (int i = 0; i < sharded->P.n; i++)
            np += counted_range(&sharded->P, &sharded->P.t[i], kinds[k], g->dp_rank, g->tp_rank,
                                &a, &b);
    v->npack = (int)np;
    v->pack = tt_malloc((np ? np : 1) * sizeof(float));
    if (g->world_rank == 0) {
        v->tables = tt_calloc((size_t)g->world_size, sizeof(tt_params));
        v->counts = tt_calloc((size_t)g->world_size, sizeof(int));
        v->displs = tt_calloc((size_t)g->world_size, sizeof(int));
        size_t total = 0;
        for (int r = 0; r < g->world_size; r++) {
            tt_model_shard_table(&v->tables[r], &rc->model, &specs[r]);
            size_t c = 0;
            for (int k = 0; k < v->kinds; k++)
                for (int i = 0; i < v->tables[r].n; i++)
                    c += counted_range(&v->tables[r], &v->tables[r].t[i], kinds[k],
                                       tt_grid_dp_of(g, r), tt_grid_tp_of(g, r), &a, &b);
            v->counts[r] = (int)c;
            v->displs[r] = (int)total;
            total += c;
        }
        v->gathered = tt_malloc((total ? total : 1) * sizeof(float));
    }
}

/* Rank 0's reference takes the sharded run's current weights (and, for a
 * spot check, its Adam moments: the reference has not followed the run). */
static void sync_state(tt_validator *v, const tt_model *sharded)
{
    const tt_grid *g = v->g;
    static const tt_kind kinds[3] = {TT_W, TT_M, TT_V}; /* weights, then m, then v */
    float *p = v->pack;
    size_t a, b, n;
    for (int k = 0; k < v->kinds; k++) {
        for (int i = 0; i < sharded->P.n; i++) {
            const tt_tensor *t = &sharded->P.t[i];
            if ((n = counted_range(&sharded->P, t, kinds[k], g->dp_rank, g->tp_rank, &a, &b))) {
                memcpy(p, tt_owned_data(&sharded->P, t, kinds[k], a), n * sizeof(float));
                p += n;
            }
        }
    }
    tt_gatherv(g, TT_GROUP_OTHER, v->pack, v->npack, v->gathered, v->counts, v->displs,
               MPI_FLOAT, 0);
    if (g->world_rank != 0)
        return;
    for (int r = 0; r < g->world_size; r++) {
        float *src = v->gathered + v->displs[r];
        const tt_params *tab = &v->tables[r];
        for (int k = 0; k < v->kinds; k++) {
            for (int i = 0; i < tab->n; i++) {
                const tt_tensor *t = &tab->t[i];
                n = counted_range(tab, t, kinds[k], tt_grid_dp_of(g, r), tt_grid_tp_of(g, r), &a,
                                  &b);
                if (!n)
                    continue;
                const tt_tensor *rt = &v->ref.P.t[tt_params_find(&v->ref.P, t->name)];
                place(t, src, a, n, tt_tensor_data(rt, kinds[k]));
                src += n;
            }
        }
    }
}

void tt_validate_free(tt_validator *v)
{
    if (v->tables)
        for (int r = 0; r < v->g->world_size; r++)
            tt_params_free(&v->tables[r]);
    free(v->tables);
    free(v->counts);
    free(v->displs);
    free(v->gathered);
    free(v->pack);
    tt_model_free(&v->ref);
    free(v->local_of);
    free(v->grad_rel);
    free(v->grad_abs);
    free(v->w_rel);
    free(v->m_rel);
    free(v->v_rel);
    free(v->w_abs);
    free(v->rounding);
    memset(v, 0, sizeof *v);
}

/* Compares, for every global tensor, the sharded buffer `which` (0 weights,
 * 1 grads, 2 m, 3 v) against the reference's (already broadcast into
 * v->ref.P), giving relative L2 errors and max abs errors over all slices.
 * mine[i] is this rank's own copy of tensor i (every copy it holds, counted
 * or not: a DP replica or a TP copy of a replicated tensor too) measured the
 * same way, against the whole tensor's size: no communication, only read
 * when a failure names the GPU furthest off. */
static void compare(tt_validator *v, const tt_model *sh, tt_kind which, double *rel,
                    double *absmax, double *mine, const unsigned char *skip)
{
    const int n = v->n;
    double *acc = tt_calloc((size_t)3 * n, sizeof(double)); /* diff^2, ref^2, max|diff| */
    double *own = tt_calloc((size_t)n, sizeof(double));     /* diff^2 of this rank's copy */
    for (int i = 0; i < n; i++) {
        int li = v->local_of[i];
        if (li < 0)
            continue;
        const tt_tensor *t = &sh->P.t[li], *r = &v->ref.P.t[i];
        /* What this GPU holds of the array: the whole shard, or under ZeRO
         * the owned part of the gradients and moments (stage 3: and
         * weights); and the part of it that counts for the tensor's error. */
        size_t a = 0, e_end = t->numel, ca, cb;
        if (tt_kind_sharded(&sh->P, which))
            tt_tensor_owned(&sh->P, t, &a, &e_end);
        counted_range(&sh->P, t, which, v->g->dp_rank, v->g->tp_rank, &ca, &cb);
        const float *src = tt_owned_data(&sh->P, t, which, a), *ref = tt_tensor_data(r, which);
        const unsigned char *left =
            skip ? skip + (ref - tt_params_buffer(&v->ref.P, which)) : NULL;
        const size_t real = tt_tensor_real_numel(t), lc = (size_t)t->lshape[1];
        const size_t gc = (size_t)r->lshape[1];
        int r0, c0;
        tt_tensor_origin(t, &r0, &c0);
        double d2 = 0.0, c2 = 0.0, cb2 = 0.0, cmax = 0.0; /* held; counted */
        /* The padding rows of a vocabulary slice must stay exactly zero: they
         * count for this GPU's own error (not for the tensor's, whose
         * reference has no padding). */
        double pad2 = 0.0;
        for (size_t e = a; e < e_end; e++) {
            double va = src[e - a];
            if (e >= real) {
                pad2 += va * va;
                continue;
            }
            const size_t at = ((size_t)r0 + e / lc) * gc + (size_t)c0 + e % lc;
            double vb = ref[at];
            double d = left && left[at] ? 0.0 : va - vb;
            d2 += d * d;
            if (e >= ca && e < cb) {
                c2 += d * d;
                cb2 += vb * vb;
                if (fabs(d) > cmax)
                    cmax = fabs(d);
            }
        }
        own[i] = d2 + pad2;
        acc[3 * i] = c2;
        acc[3 * i + 1] = cb2;
        acc[3 * i + 2] = cmax;

    }
    /* Sums of squares add over slices; the max is a max. One all-reduce of
     * the sums and the maxima packed as (sum, sum, max) would need two ops,
     * so the maxima go in a second call. */
    double *mx = tt_malloc((size_t)n * sizeof(double));
    double *ss = tt_malloc((size_t)2 * n * sizeof(double));
    for (int i = 0; i < n; i++) {
        ss[2 * i] = acc[3 * i];
        ss[2 * i + 1] = acc[3 * i + 1];
        mx[i] = acc[3 * i + 2];
    }
    tt_allreduce(v->g, TT_GROUP_OTHER, ss, 2 * n, MPI_DOUBLE, MPI_SUM);
    tt_allreduce(v->g, TT_GROUP_OTHER, mx, n, MPI_DOUBLE, MPI_MAX);
    /* A tensor far smaller than the model's typical size is measured against
     * that size instead (a thousandth of the RMS over all elements): its own
     * value is rounding noise. blocks.*.attn.k.bias is the case in point: its
     * gradient is zero in exact arithmetic, since a bias added to every key
     * shifts a whole softmax row by the same amount. */
    double ref_ss = 0.0, elems = 0.0;
    for (int i = 0; i < n; i++) {
        const tt_tensor *r = &v->ref.P.t[i];
        ref_ss += ss[2 * i + 1];
        elems += (double)r->gshape[0] * r->gshape[1];
    }
    const double floor_rms = 1e-3 * sqrt(ref_ss / elems);
    for (int i = 0; i < n; i++) {
        const tt_tensor *r = &v->ref.P.t[i];
        double scale = sqrt(ss[2 * i + 1]);
        double floor_norm = floor_rms * sqrt((double)r->gshape[0] * r->gshape[1]);
        if (scale < floor_norm)
            scale = floor_norm;
        rel[i] = ss[2 * i] == 0.0 ? 0.0 : sqrt(ss[2 * i]) / scale;
        if (absmax)
            absmax[i] = mx[i];
        mine[i] = own[i] == 0.0 ? 0.0 : sqrt(own[i]) / scale;
    }
    free(acc);
    free(own);
    free(mx);
    free(ss);
}

/* The first quantity beyond its tolerance: the first step, and within a step
 * the loss, then the tensors nearest the loss first (the reverse of the
 * table's order, which is the order backpropagation reaches them): a gradient
 * computed wrong spoils every gradient computed after it, so the first one
 * off is where to look. */
static void note_bad(tt_validator *v, long step, const char *what, double err, double tol,
                     double mine)
{
    if (err <= tol || v->first_bad_step >= 0)
        return;
    v->first_bad_step = step;
    snprintf(v->first_bad, sizeof v->first_bad, "%s", what);
    v->first_bad_err = err;
    v->first_bad_tol = tol;
    v->first_bad_mine = mine;
}

void tt_validate_grads(tt_validator *v, const tt_model *sharded, const tt_corpus *c, long step,
                       double sharded_loss)
{
    const tt_run_config *rc = v->rc;
    const int B = rc->batch, T = rc->model.T;
    double ref_loss = 0.0;
    sync_state(v, sharded);
    if (v->g->world_rank == 0) {
        int *in = tt_malloc((size_t)B * T * sizeof(int)), *tg = tt_malloc((size_t)B * T * sizeof(int));
        tt_sample_batch(c, step, B, 0, B, T, in, tg);
        tt_params_zero_grads(&v->ref.P);
        ref_loss = tt_model_forward(&v->ref, in, tg, B);
        tt_model_backward(&v->ref, 1.0f / (float)((double)B * T));
        free(in);
        free(tg);
    }
    /* The reference gradients go to every rank; each compares its slices. */
    float *grads = tt_params_buffer(&v->ref.P, TT_G);
    tt_bcast(v->g, TT_GROUP_OTHER, grads, (int)v->ref.P.total, MPI_FLOAT, 0);
    tt_bcast(v->g, TT_GROUP_OTHER, &ref_loss, 1, MPI_DOUBLE, 0);
    double lrel = fabs(sharded_loss - ref_loss) / fabs(ref_loss);
    if (lrel > v->loss_rel)
        v->loss_rel = lrel;

    double *rel = tt_malloc((size_t)v->n * sizeof(double)), *ab = tt_malloc((size_t)v->n * sizeof(double));
    double *mine = tt_malloc((size_t)v->n * sizeof(double));
    compare(v, sharded, TT_G, rel, ab, mine, NULL);
    /* The loss is one number for all GPUs: the GPU named with it is the one
     * whose gradient slices are furthest off in the same step. */
    double mine_worst = 0.0;
    for (int i = 0; i < v->n; i++)
        if (mine[i] > mine_worst)
            mine_worst = mine[i];
    note_bad(v, step, "loss", lrel, TT_TOL_LOSS, mine_worst);
    for (int i = v->n - 1; i >= 0; i--) {
        if (rel[i] > v->grad_rel[i])
            v->grad_rel[i] = rel[i];
        if (ab[i] > v->grad_abs[i])
            v->grad_abs[i] = ab[i];
        char what[96];
        snprintf(what, sizeof what, "gradient of %s", v->ref.P.t[i].name);
        note_bad(v, step, what, rel[i], TT_TOL_GRAD, mine[i]);
    }
    if (v->steps++ == 0)
        v->first_checked = step;
    v->last_checked = step;
    free(rel);
    free(ab);
    free(mine);
}

void tt_validate_norm(tt_validator *v, const tt_model *sharded, long step, double norm)
{
    const tt_grid *g = v->g;
    const double ref_ss = tt_grad_sumsq(&v->ref.P, 0, 0), ref = sqrt(ref_ss);
    const double rel = ref > 0.0 ? fabs(norm - ref) / ref : (norm != 0.0);
    if (rel > v->norm_rel)
        v->norm_rel = rel;
    /* The GPU to name is the one whose own term of the sum is off: what the
     * run's norm counts here (tt_grad_sumsq, the training's own code) against
     * the squares of the slices this GPU is the one to count. */
    double counted = 0.0;
    for (int i = 0; i < sharded->P.n; i++) {
        const tt_tensor *t = &sharded->P.t[i];
        size_t a, b, n = counted_range(&sharded->P, t, TT_G, g->dp_rank, g->tp_rank, &a, &b);
        const float *x = n ? tt_owned_data(&sharded->P, t, TT_G, a) : NULL;
        for (size_t e = 0; e < n; e++)
            counted += (double)x[e] * x[e];
    }
    const double own = tt_grad_sumsq(&sharded->P, g->dp_rank, g->tp_rank);
    note_bad(v, step, "gradient norm", rel, TT_TOL_GRAD,
             ref_ss > 0.0 ? fabs(own - counted) / ref_ss : 0.0);
}

void tt_validate_update(tt_validator *v, long step)
{
    if (v->g->world_rank != 0)
        return;
    const tt_run_config *rc = v->rc;
    double norm = sqrt(tt_grad_sumsq(&v->ref.P, 0, 0));
    double lr = tt_lr_at(&rc->optim, step, rc->steps);
    tt_adamw_step(&v->ref.P, &rc->optim, lr, step + 1, tt_clip_coef(rc->optim.clip, norm));
}

/* Adam divides by sqrt(v-hat) + eps. Where that root is near eps (a
 * gradient that nearly cancels, 1e-8 where its terms are 1e-3), the step is
 * lr g / (|g| + eps), which turns the gradient's rounding (the part of
 * float32 sums that depends on their order, 0.4% of such a g) into a change
 * of the step itself: on a bias after its first step, whose value is that
 * step, 3e-4 of the tensor, against weights 1e-4 (a one-step run on a
 * correct layout failed so). Such an element's gradient and moments are
 * still compared; its value is left out of the weights' error when its root
 * is under TT_ROUNDING_EPS eps after the last checked step, the only update
 * that reaches the comparison (each checked step starts the reference from
 * the run's weights, sync_state). Rank 0 marks them from the reference's
 * moments (in a spot check, the run's moments before the step, which the
 * reference took over), never from the run's update. A v of exactly 0 (a
 * gradient that was always exactly 0, the key bias's) makes no step at all
 * and is not marked. */
static void mark_rounding(tt_validator *v)
{
    const tt_optim_config *o = &v->rc->optim;
    const float *vv = tt_params_buffer(&v->ref.P, TT_V);
    const double fix = 1.0 - pow(o->beta2, (double)(v->last_checked + 1));
    const double below = TT_ROUNDING_EPS * o->eps;
    v->rounding_n = 0;
    for (size_t e = 0; e < v->ref.P.total; e++) {
        v->rounding[e] = vv[e] > 0.0f && sqrt((double)vv[e] / fix) < below;
        v->rounding_n += v->rounding[e];
    }
}

void tt_validate_final(tt_validator *v, const tt_model *sharded)
{
    /* weights, m, v: broadcast the reference's, then compare slices. */
    const size_t total = v->ref.P.total;
    const tt_kind kinds[3] = {TT_W, TT_M, TT_V};
    double *outs[3] = {v->w_rel, v->m_rel, v->v_rel};
    const char *label[3] = {"weights", "Adam m", "Adam v"};
    const double tol[3] = {TT_TOL_PARAM, TT_TOL_MOMENT, TT_TOL_MOMENT};
    double *mine = tt_malloc((size_t)v->n * sizeof(double));
    if (v->g->world_rank == 0)
        mark_rounding(v);
    tt_bcast(v->g, TT_GROUP_OTHER, v->rounding, (int)total, MPI_UNSIGNED_CHAR, 0);
    for (int k = 0; k < 3; k++) {
        tt_bcast(v->g, TT_GROUP_OTHER, tt_params_buffer(&v->ref.P, kinds[k]), (int)total,
                 MPI_FLOAT, 0);
        compare(v, sharded, kinds[k], outs[k], k == 0 ? v->w_abs : NULL, mine,
                k == 0 ? v->rounding : NULL);
        for (int i = v->n - 1; i >= 0; i--) {
            char what[96];
            snprintf(what, sizeof what, "%s of %s", label[k], v->ref.P.t[i].name);
            note_bad(v, v->last_checked, what, outs[k][i], tol[k], mine[i]);
        }
    }
    free(mine);
}
