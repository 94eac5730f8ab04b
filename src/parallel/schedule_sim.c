/* schedule_sim.c - the checker's third pass: all stages' action lists run
 * together with the executor's semantics, which finds a deadlock that no
 * single list shows. tt_schedule_simulate, the checker's entry point, runs
 * schedule_check.c's two passes first, then this one (tt_schedule_checked
 * and tt_schedule_simulate_checked are the two halves, for lists priced many
 * times). The run's times are
 * also the "simulated" bubble of the report, the clock of the --explain
 * narration and the planner's pipeline time (with each chunk's own cost).
 *
 * K = p*v chunks, chunk k on stage tt_chunk_stage(place, p, k), as in
 * schedule_check.c. */
#include "schedule_internal.h"
#include "tt/parallel/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- pass 3: running the lists together --------------------------------- */

/* Stage s is at item pc[s] at time clock[s]. Sends take no time and record
 * when they were issued (sent_act / sent_grad, -1 until then); a receive
 * moves the stage's clock to the issue time of its send, or blocks until that
 * send has been issued; a compute starts at the stage's clock and advances
 * it. The run is a dataflow network with fixed pairings, so the times do not
 * depend on the order in which the stages are visited. */
typedef struct {
    const tt_sim_costs *cost;      /* per chunk compute, per boundary transfer */
    double *sent_act, *sent_grad;  /* [mb * K + chunk] issue time of the send */
    int *pc, *held;                /* [stage] */
    double *clock;                 /* [stage] */
    double **start, *busy;         /* the result: as tt_sim_result */
    int *peak;
    int split;                     /* W actions: activations held until W */
} sim_state;

/* Runs stage s until it blocks in a receive or finishes; returns whether it
 * moved. The start time recorded for a receive is when it completes (the
 * later of the stage reaching it and its send being issued); for a send,
 * when it is issued. */
static int run_stage(const tt_action_list *l, int s, int K, sim_state *st)
{
    int moved = 0;
    while (st->pc[s] < l->n) {
        const tt_action *a = &l->a[st->pc[s]];
        int id = a->mb * K + a->chunk;
        double ready = st->clock[s];
        if (a->kind == TT_ACT_RECV_ACT || a->kind == TT_ACT_RECV_GRAD) {
            const int act = a->kind == TT_ACT_RECV_ACT;
            double when = act ? st->sent_act[id - 1] : st->sent_grad[id + 1];
            if (when < 0)
                break; /* blocked: the send has not been issued yet */
            /* The message arrives one link cost after its send (comm.c's
             * clock_recv): between chunks k-1 and k, or k and k+1. */
            if (st->cost->link)
                when += st->cost->link[act ? a->chunk - 1 : a->chunk];
            if (when > ready)
                ready = when;
        }
        st->start[s][st->pc[s]] = ready;
        st->clock[s] = ready;
        switch (a->kind) {
        case TT_ACT_FWD:
            st->clock[s] += st->cost->fwd[a->chunk];
            st->busy[s] += st->cost->fwd[a->chunk];
            if (++st->held[s] > st->peak[s])
                st->peak[s] = st->held[s];
            break;
        case TT_ACT_BWD:
            st->clock[s] += st->cost->bwd[a->chunk];
            st->busy[s] += st->cost->bwd[a->chunk];
            st->held[s] -= !st->split; /* with W, the slot stays until W */
            break;
        case TT_ACT_W: {
            double w = st->cost->wgt ? st->cost->wgt[a->chunk] : 0.0;
            st->clock[s] += w;
            st->busy[s] += w;
            st->held[s]--;
            break;
        }
        case TT_ACT_SEND_ACT: st->sent_act[id] = ready; break;
        case TT_ACT_SEND_GRAD: st->sent_grad[id] = ready; break;
        default: break;
        }
        st->pc[s]++;
        moved = 1;
    }
    return moved;
}

/* Every unfinished stage waits in a receive whose send sits further down
 * some other stage's list: name them all. */
static int fail_deadlock(const tt_action_list *lists, const tt_sched_table *t, const int *pc,
                         tt_err *e)
{
    char buf[512], d[160];
    size_t len = (size_t)snprintf(buf, sizeof buf, "deadlock:");
    for (int s = 0; s < t->p && len < sizeof buf; s++) {
        if (pc[s] >= lists[s].n)
            continue;
        const tt_action *a = &lists[s].a[pc[s]];
        int id = a->mb * t->K + a->chunk;
        int sidx = a->kind == TT_ACT_RECV_ACT ? t->at[T_SACT][id - 1] : t->at[T_SGRAD][id + 1];
        tt_sched_describe(d, sizeof d, a);
        len += (size_t)snprintf(buf + len, sizeof buf - len,
                                "%s stage %d waits at action %d (%s) for stage %d's "
                                "action %d, never reached",
                                len > 9 ? ";" : "", s, pc[s], d, a->peer, sidx);
    }
    return tt_fail(e, "%s", buf);
}

/* Sweeps the stages until all are done; a full sweep in which no stage
 * advances while some still have items is a deadlock. */
static int simulate(const tt_action_list *lists, const tt_sched_table *t, sim_state *st,
                    double *span, double *end, tt_err *e)
{
    int p = t->p, n_ev = t->m * t->K;
    st->sent_act = tt_malloc((size_t)n_ev * sizeof *st->sent_act);
    st->sent_grad = tt_malloc((size_t)n_ev * sizeof *st->sent_grad);
    st->pc = tt_calloc((size_t)p, sizeof *st->pc);
    st->held = tt_calloc((size_t)p, sizeof *st->held);
    st->clock = tt_calloc((size_t)p, sizeof *st->clock);
    for (int i = 0; i < n_ev; i++)
        st->sent_act[i] = st->sent_grad[i] = -1.0;
    int rc = 0;
    st->split = t->split;
    for (;;) {
        int progressed = 0, left = 0;
        for (int s = 0; s < p; s++) {
            progressed |= run_stage(&lists[s], s, t->K, st);
            left += st->pc[s] < lists[s].n;
        }
        if (!left)
            break;
        if (!progressed) {
            rc = fail_deadlock(lists, t, st->pc, e);
            break;
        }
    }
    *span = 0.0;
    for (int s = 0; s < p; s++) {
        end[s] = st->clock[s];
        if (st->clock[s] > *span)
            *span = st->clock[s];
    }
    free(st->sent_act);
    free(st->sent_grad);
    free(st->pc);
    free(st->held);
    free(st->clock);
    return rc;
}

/* ---- the entry points --------------------------------------------------- */

/* The lists and the table the first two passes filled. */
struct tt_checked_schedule {
    const tt_action_list *lists;
    tt_sched_table t;
};

void tt_checked_schedule_free(tt_checked_schedule *cs)
{
    if (!cs)
        return;
    for (int k = 0; k < T_N; k++)
        free(cs->t.at[k]);
    free(cs);
}

tt_checked_schedule *tt_schedule_checked(const tt_action_list *lists, int p, int m, int v,
                                         tt_err *e)
{
    if (p < 1 || m < 1 || v < 1 || p > TT_MAX_SIM_CHUNKS / v) {
        tt_fail(e, "schedule check: need p >= 1, m >= 1, v >= 1, p x v <= %d (got p = %d, m = "
                   "%d, v = %d)", TT_MAX_SIM_CHUNKS, p, m, v);
        return NULL;
    }
    /* One placement for all stages (the lists were built for one schedule);
     * lists that disagree cannot describe one pipeline. */
    for (int s = 1; s < p; s++)
        if (lists[s].place != lists[0].place) {
            tt_fail(e, "schedule check: stage %d's list places the chunks %s, stage 0's %s", s,
                    lists[s].place == TT_PLACE_V ? "in a V" : "in a loop",
                    lists[0].place == TT_PLACE_V ? "in a V" : "in a loop");
            return NULL;
        }
    tt_checked_schedule *cs = tt_calloc(1, sizeof *cs);
    cs->lists = lists;
    cs->t = (tt_sched_table){p, m, p * v, lists[0].place, 0, {0}};
    const size_t n_ev = (size_t)m * (size_t)cs->t.K;
    for (int k = 0; k < T_N; k++) {
        cs->t.at[k] = tt_malloc(n_ev * sizeof(int));
        for (size_t i = 0; i < n_ev; i++)
            cs->t.at[k][i] = -1;
    }
    if (tt_sched_check_fields(lists, &cs->t, e) || tt_sched_check_order(lists, &cs->t, e)) {
        tt_checked_schedule_free(cs);
        return NULL;
    }
    return cs;
}

int tt_schedule_simulate_checked(const tt_checked_schedule *cs, const tt_sim_costs *cost,
                                 tt_sim_result *res, tt_err *e)
{
    if (res)
        memset(res, 0, sizeof *res);
    const tt_action_list *lists = cs->lists;
    const int p = cs->t.p;
    sim_state st = {.cost = cost};
    st.start = tt_calloc((size_t)p, sizeof *st.start);
    st.busy = tt_calloc((size_t)p, sizeof *st.busy);
    st.peak = tt_calloc((size_t)p, sizeof *st.peak);
    for (int s = 0; s < p; s++)
        st.start[s] = tt_calloc((size_t)lists[s].n, sizeof **st.start);
    double span = 0.0, *end = tt_calloc((size_t)p, sizeof *end);
    int rc = simulate(lists, &cs->t, &st, &span, end, e);
    if (rc == 0 && res) {
        *res = (tt_sim_result){.p = p, .m = cs->t.m, .v = cs->t.K / p, .start = st.start,
                               .span = span, .end = end, .busy = st.busy, .peak_held = st.peak};
        return 0;
    }
    free(end);
    for (int s = 0; s < p; s++)
        free(st.start[s]);
    free(st.start);
    free(st.busy);
    free(st.peak);
    return rc;
}

int tt_schedule_simulate(const tt_action_list *lists, int p, int m, int v, const tt_sim_costs *cost,
                         tt_sim_result *res, tt_err *e)
{
    if (res)
        memset(res, 0, sizeof *res);
    tt_checked_schedule *cs = tt_schedule_checked(lists, p, m, v, e);
    if (!cs)
        return -1;
    int rc = tt_schedule_simulate_checked(cs, cost, res, e);
    tt_checked_schedule_free(cs);
    return rc;
}

void tt_sim_result_free(tt_sim_result *res)
{
    if (!res)
        return;
    if (res->start)
        for (int s = 0; s < res->p; s++)
            free(res->start[s]);
    free(res->start);
    free(res->end);
    free(res->busy);
    free(res->peak_held);
    memset(res, 0, sizeof *res);
}
