/* ex_pipeline_walkthrough.c - the textbook pipeline, run for real on 4
 * virtual GPUs: a small MLP (8 -> 16 -> 16 -> 16 -> 4, tanh hidden layers,
 * softmax cross-entropy) with one layer per GPU, named A1, A2, B1, B2 as in
 * the seed chapter, trains on 4 micro-batches with the GPipe schedule.
 *
 * The order of work comes from the library: tt_schedule_build gives each GPU
 * its list of actions and tt_schedule_check simulates all four lists with
 * unit-time forwards and backwards, which assigns every action a time step.
 * The GPUs then execute their lists in lock-step, one time step at a time,
 * and record what they did; rank 0 prints those records ("Computing /
 * Communication / Active GPUs"), so the story is the one that ran.
 *
 * Check: the gradients of every layer equal those of the same MLP computed
 * unsharded on rank 0 over all 4 micro-batches at once (exit 1 otherwise).
 *
 *   mpirun -np 4 ./ex_pipeline_walkthrough */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt/comm/comm.h"
#include "tt/comm/grid.h"
#include "tt/core/kernels.h"
#include "tt/core/params.h"
#include "tt/parallel/pipeline.h"

#include "ex_common.h"

enum { P = 4, M = 4, NB = 4, NBATCH = M * NB };       /* stages, micro-batches, rows each */
static const int width[P + 1] = {8, 16, 16, 16, 4};    /* layer s maps width[s] -> width[s+1] */
static const char *const gpu[P] = {"A1", "A2", "B1", "B2"};
static const double TOL = 1e-5;
typedef struct { int step, gpu, kind, mb, peer, bytes; } record; /* one executed action */
#define RECORD_INTS 6

/* Deterministic data and weights: every rank can build any of them. */
static void init_layer(int s, float *w, float *b)
{
    char name[32];
    snprintf(name, sizeof name, "layer%d.weight", s);
    for (int i = 0; i < width[s + 1] * width[s]; i++)
        w[i] = tt_hash_normal(42, name, i) / sqrtf((float)width[s]);
    for (int o = 0; o < width[s + 1]; o++)
        b[o] = 0.1f * tt_hash_normal(42, "bias", 100 * s + o);
}
static void init_data(float *x, int *target)
{
    for (int i = 0; i < NBATCH * width[0]; i++)
        x[i] = tt_hash_normal(7, "x", i);
    for (int n = 0; n < NBATCH; n++)
        target[n] = (int)(tt_hash_uniform(7, 1, n) * width[P]);
}

/* Layer s on n rows: out = tanh(in W^T + b), or the logits on the last layer. */
static void layer_forward(int s, float *out, const float *in, const float *w, const float *b, int n)
{
    linear_forward(out, in, w, b, n, width[s], width[s + 1]);
    if (s < P - 1)
        for (int i = 0; i < n * width[s + 1]; i++)
            out[i] = tanhf(out[i]);
}
/* Backward of layer s: dout is d loss / d out (overwritten by d pre-activation);
 * gradients accumulate into dw, db; din (zeroed here) gets the error E to send back. */
static void layer_backward(int s, float *din, float *dw, float *db, float *dout, const float *in,
                           const float *out, const float *w, int n)
{
    if (s < P - 1) /* tanh' = 1 - tanh^2 */
        for (int i = 0; i < n * width[s + 1]; i++)
            dout[i] *= 1.0f - out[i] * out[i];
    if (din)
        memset(din, 0, sizeof(float) * n * width[s]);
    linear_backward(din, dw, db, dout, in, w, n, width[s], width[s + 1]);
}
/* The last layer turns logits into d loss / d logits of the mean loss over the batch. */
static double loss_backward(float *dlogits, const float *logits, const int *target, int n)
{
    float losses[NBATCH], probs[NBATCH * 4];
    crossentropy_forward(losses, probs, logits, target, n, width[P], width[P]);
    memset(dlogits, 0, sizeof(float) * n * width[P]);
    crossentropy_backward(dlogits, probs, target, 1.0f / NBATCH, n, width[P], width[P]);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += losses[i];
    return sum;
}
/* Prints time step t from the records of all GPUs; returns how many GPUs computed. */
static int print_step(const record *all, int n, int t)
{
    int busy[P] = {0}, nbusy = 0, sent = 0;
    printf("Time step %d\n  Computing:\n", t);
    for (const record *a = all; a < all + n; a++)
        if (a->step == t && (a->kind == TT_ACT_FWD || a->kind == TT_ACT_BWD)) {
            nbusy += !busy[a->gpu];
            busy[a->gpu] = 1;
            if (a->kind == TT_ACT_BWD)
                printf("    %s computes local error E%d and gradient G%d\n", gpu[a->gpu], a->mb + 1, a->mb + 1);
            else
                printf("    %s processes %c%d -> %s%d\n", gpu[a->gpu], a->gpu ? 'y' : 'x', a->mb + 1,
                       a->gpu == P - 1 ? "model output " : "y", a->mb + 1);
        }
    printf("  Communication:\n");
    for (const record *a = all; a < all + n; a++)
        if (a->step == t && (a->kind == TT_ACT_SEND_ACT || a->kind == TT_ACT_SEND_GRAD)) {
            printf("    %s -> %s %s%d (%d bytes)\n", gpu[a->gpu], gpu[a->peer],
                   a->kind == TT_ACT_SEND_ACT ? "y" : "error E", a->mb + 1, a->bytes);
            sent = 1;
        }
    if (!sent)
        printf("    none\n");
    printf("  Active GPUs (%d%%):", 100 * nbusy / P);
    for (int k = 0, first = 1; k < P; k++)
        if (busy[k]) {
            printf("%s %s", first ? "" : ",", gpu[k]);
            first = 0;
        }
    printf("\n\n");
    return nbusy;
}

int main(int argc, char **argv)
{
    int world, rank = ex_start(&argc, &argv, "ex_pipeline_walkthrough", P, P, &world);
    tt_grid g;
    tt_grid_init(&g, 1, P, 1, MPI_COMM_WORLD); /* pp = 4: one stage (one layer) per GPU */
    const int s = g.pp_rank, in = width[s], out = width[s + 1];

    /* Every rank builds all four lists and runs the same simulation, so all
     * agree on the time step of every action without talking. */
    tt_action_list lists[P];
    for (int k = 0; k < P; k++)
        tt_schedule_build(&lists[k], TT_SCHED_GPIPE, P, M, 1, k);
    tt_sim_result sim;
    tt_err err;
    if (tt_schedule_check(lists, P, M, 1, 1.0, 1.0, &sim, &err)) {
        fprintf(stderr, "schedule rejected: %s\n", err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const tt_action_list *mine = &lists[s];
    int step[64];
    /* A compute that starts at simulated time t fills time step t+1; the send
     * after it leaves in the same step, the receive before it is done first. */
    for (int i = 0; i < mine->n; i++)
        if (mine->a[i].kind == TT_ACT_FWD || mine->a[i].kind == TT_ACT_BWD)
            step[i] = (int)(sim.start[s][i] + 0.5) + 1;
    for (int i = 0; i < mine->n; i++)
        if (mine->a[i].kind == TT_ACT_SEND_ACT || mine->a[i].kind == TT_ACT_SEND_GRAD)
            step[i] = step[i - 1];
        else if (mine->a[i].kind == TT_ACT_RECV_ACT || mine->a[i].kind == TT_ACT_RECV_GRAD)
            step[i] = step[i + 1];
    const int nsteps = (int)(sim.span + 0.5);

    /* This GPU's layer and gradient (weights then bias), and every micro-batch's
     * activations and errors: GPipe keeps all of them until the backward. */
    static float w[16 * 16], b[16], grad[16 * 17], x[NBATCH * 8];
    static float act_in[NBATCH * 16], act_out[NBATCH * 16], err_in[NBATCH * 16], err_out[NBATCH * 16];
    int target[NBATCH];
    init_layer(s, w, b);
    init_data(x, target);
    if (s == 0)
        memcpy(act_in, x, sizeof x);
    record rec[64];
    int nrec = 0, idx = 0, nreq = 0;
    MPI_Request req[2 * M];
    double loss = 0;

    for (int t = 1; t <= nsteps; t++) {
        for (; idx < mine->n && step[idx] == t; idx++) {
            const tt_action *a = &mine->a[idx];
            const int mb = a->mb, peer = tt_grid_rank_of(&g, 0, a->peer < 0 ? 0 : a->peer, 0);
            float *xi = act_in + mb * NB * in, *yo = act_out + mb * NB * out;
            float *ei = err_in + mb * NB * in, *eo = err_out + mb * NB * out;
            long long before = tt_comm_stats_get()->c[TT_GROUP_PP][TT_OP_SEND].bytes;
            switch (a->kind) {
            case TT_ACT_RECV_ACT: tt_recv(&g, xi, NB * in, MPI_FLOAT, peer, mb); break;
            case TT_ACT_RECV_GRAD: tt_recv(&g, eo, NB * out, MPI_FLOAT, peer, 100 + mb); break;
            case TT_ACT_FWD: layer_forward(s, yo, xi, w, b, NB); break;
            case TT_ACT_BWD:
                if (s == P - 1) /* the output layer starts the backward from its own loss */
                    loss += loss_backward(eo, yo, target + mb * NB, NB);
                layer_backward(s, s > 0 ? ei : NULL, grad, grad + out * in, eo, xi, yo, w, NB);
                break;
            /* Non-blocking sends: a GPU never waits for its neighbour to be ready. */
            case TT_ACT_SEND_ACT: tt_isend(&g, yo, NB * out, MPI_FLOAT, peer, mb, &req[nreq++]); break;
            case TT_ACT_SEND_GRAD: tt_isend(&g, ei, NB * in, MPI_FLOAT, peer, 100 + mb, &req[nreq++]); break;
            case TT_ACT_W: break; /* the schedules this example runs keep B and W together */
            }
            if (a->kind != TT_ACT_RECV_ACT && a->kind != TT_ACT_RECV_GRAD)
                rec[nrec++] = (record){t, s, a->kind, mb, a->peer,
                    (int)(tt_comm_stats_get()->c[TT_GROUP_PP][TT_OP_SEND].bytes - before)};
        }
        /* Lock-step: nobody starts time step t+1 before all have finished t,
         * so "time step" is what really happened, not just a plan. */
        MPI_Barrier(MPI_COMM_WORLD);
    }
    tt_wait_all(nreq, req);

    /* Rank 0 collects every GPU's records and gradients (bookkeeping, booked as
     * other). It knows how many each sends: one record per non-receive action. */
    int rcount[P], roff[P], gcount[P], goff[P], nall = 0, total = 0;
    for (int k = 0; k < P; k++) {
        rcount[k] = 0;
        for (int i = 0; i < lists[k].n; i++)
            rcount[k] += lists[k].a[i].kind != TT_ACT_RECV_ACT && lists[k].a[i].kind != TT_ACT_RECV_GRAD;
        rcount[k] *= RECORD_INTS;
        roff[k] = nall;
        nall += rcount[k];
        gcount[k] = width[k + 1] * (width[k] + 1);
        goff[k] = total;
        total += gcount[k];
    }
    static record all[4 * 64];
    static float grads[4 * 16 * 17];
    tt_gatherv(&g, TT_GROUP_OTHER, rec, nrec * RECORD_INTS, all, rcount, roff, MPI_INT, 0);
    tt_gatherv(&g, TT_GROUP_OTHER, grad, gcount[s], grads, gcount, goff, MPI_FLOAT, 0);
    tt_allreduce(&g, TT_GROUP_OTHER, &loss, 1, MPI_DOUBLE, MPI_SUM);

    int fail = 0;
    if (rank == 0) {
        printf("GPipe on 4 GPUs: A1 = hidden layer 1, A2 = hidden 2, B1 = hidden 3, B2 = output\n"
               "%d micro-batches x1..x%d of %d samples; y = activations, E = errors, G = gradients\n\n",
               M, M, NB);
        int busy = 0;
        for (int t = 1; t <= nsteps; t++)
            busy += print_step(all, nall / RECORD_INTS, t);
        /* The bubble: with unit forward and backward, GPUs idle (p-1)/(m+p-1) of the time. */
        double idle = 1.0 - (double)busy / (P * nsteps), theory = tt_bubble_theory(TT_SCHED_GPIPE, P, M, 1);
        printf("idle GPU time steps: %d of %d = %.1f%% (theory (p-1)/(m+p-1) = 3/7 = %.1f%%)\n",
               P * nsteps - busy, P * nsteps, 100 * idle, 100 * theory);
        if (fabs(idle - theory) > 1e-9) {
            printf("FAIL: the executed time steps do not show the GPipe bubble\n");
            fail = 1;
        }

        /* The same MLP on one process, all 16 samples at once. */
        static float h[P + 1][NBATCH * 16], d[NBATCH * 16], dnext[NBATCH * 16], rg[16 * 17];
        double worst = 0;
        memcpy(h[0], x, sizeof x);
        for (int k = 0; k < P; k++) {
            init_layer(k, w, b);
            layer_forward(k, h[k + 1], h[k], w, b, NBATCH);
        }
        double ref_loss = loss_backward(d, h[P], target, NBATCH);
        for (int k = P - 1; k >= 0; k--) {
            init_layer(k, w, b);
            memset(rg, 0, sizeof rg);
            layer_backward(k, dnext, rg, rg + width[k + 1] * width[k], d, h[k], h[k + 1], w, NBATCH);
            memcpy(d, dnext, sizeof(float) * NBATCH * width[k]);
            double e = ex_rel_err(grads + goff[k], rg, gcount[k]);
            printf("%s gradients (%3d floats) vs single process: max relative error %.2e\n", gpu[k], gcount[k], e);
            worst = fmax(worst, e);
        }
        double le = fabs(loss - ref_loss) / ref_loss;
        printf("loss %.6f (pipelined) vs %.6f (single process): relative error %.2e\n", loss / NBATCH,
               ref_loss / NBATCH, le);
        if (!(fmax(worst, le) <= TOL)) {
            printf("FAIL: pipelined gradients differ from the single-process ones (tolerance %.0e)\n", TOL);
            fail = 1;
        } else if (!fail) {
            printf("OK: pipelined gradients match within %.0e\n", TOL);
        }
    }
    MPI_Bcast(&fail, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int k = 0; k < P; k++)
        tt_action_list_free(&lists[k]);
    tt_sim_result_free(&sim);
    tt_grid_free(&g);
    MPI_Finalize();
    return fail ? 1 : 0;
}
