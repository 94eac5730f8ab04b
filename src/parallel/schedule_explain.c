/* schedule_explain.c - a checked step told the way a textbook tells it, one
 * time step at a time: who computes what, which transfers leave, how many
 * GPUs are busy ("Time step 3 - computing: ...; communication: gpu0 -> gpu1
 * activations of mb3; active GPUs 75%"). It reads the start times of a
 * simulation with unit costs (tt_schedule_check with forward = backward = 1,
 * or backward 2 for lists with W, so that B and W take a step each).
 *
 * With unit costs a compute that starts at time t fills time step t + 1, and
 * the sends it triggers are issued at its end, time t + 1: those are the
 * step's communication. */
#include "tt/parallel/pipeline.h"

#include <stdio.h>
#include <stdlib.h>

/* Stage s's GPU name: the caller's, or "stage<s>" written into fallback. */
static const char *name_of(const char *const *names, int s, char *fallback, size_t n)
{
    if (names)
        return names[s];
    snprintf(fallback, n, "stage%d", s);
    return fallback;
}

/* Action i of stage s starts at time t (the simulation's times are whole
 * numbers with unit costs; rounding guards against representation). */
static int starts_at(const tt_sim_result *res, int s, int i, int t)
{
    return (int)(res->start[s][i] + 0.5) == t;
}

/* "computing:" - every forward and backward filling step t; marks the stages
 * that compute in busy[] and returns how many do. */
static int print_computing(FILE *out, const tt_action_list *lists, const tt_sim_result *res,
                           const char *const *names, int t, char *busy)
{
    char fb[32];
    int active = 0, first = 1, split = 0;
    for (int s = 0; s < res->p; s++)
        for (int i = 0; i < lists[s].n; i++)
            split |= lists[s].a[i].kind == TT_ACT_W;
    fprintf(out, "  computing:");
    for (int s = 0; s < res->p; s++)
        for (int i = 0; i < lists[s].n; i++) {
            const tt_action *a = &lists[s].a[i];
            if ((a->kind != TT_ACT_FWD && a->kind != TT_ACT_BWD && a->kind != TT_ACT_W) ||
                !starts_at(res, s, i, t - 1))
                continue;
            fprintf(out, "%s %s %s mb%d of chunk %d", first ? "" : ";",
                    name_of(names, s, fb, sizeof fb),
                    a->kind == TT_ACT_FWD ? "forward"
                    : a->kind == TT_ACT_W ? "W (weight gradients of)"
                    : split               ? "B (input gradient of)"
                                          : "backward",
                    a->mb, a->chunk);
            first = 0;
            if (!busy[s]) {
                busy[s] = 1;
                active++;
            }
        }
    if (first)
        fprintf(out, " nothing");
    fprintf(out, "\n");
    return active;
}

/* "communication:" - the sends issued at the end of step t. */
static void print_communication(FILE *out, const tt_action_list *lists,
                                const tt_sim_result *res, const char *const *names, int t)
{
    char fb[32];
    int first = 1;
    fprintf(out, "  communication:");
    for (int s = 0; s < res->p; s++)
        for (int i = 0; i < lists[s].n; i++) {
            const tt_action *a = &lists[s].a[i];
            if ((a->kind != TT_ACT_SEND_ACT && a->kind != TT_ACT_SEND_GRAD) ||
                !starts_at(res, s, i, t))
                continue;
            int act = a->kind == TT_ACT_SEND_ACT;
            fprintf(out, "%s %s -> ", first ? "" : ";", name_of(names, s, fb, sizeof fb));
            fprintf(out, "%s %s of mb%d", name_of(names, a->peer, fb, sizeof fb),
                    act ? "activations" : "gradients", a->mb);
            if (res->v > 1) /* interleaved: say which chunk boundary is crossed */
                fprintf(out, " (chunk %d -> %d)", a->chunk, act ? a->chunk + 1 : a->chunk - 1);
            first = 0;
        }
    if (first)
        fprintf(out, " none");
    fprintf(out, "\n");
}

/* "active GPUs N%:" - the busy ones, then the idle ones in brackets. */
static void print_active(FILE *out, int p, const char *const *names, const char *busy,
                         int active)
{
    char fb[32];
    int first = 1;
    fprintf(out, "  active GPUs %d%%:", (100 * active + p / 2) / p);
    for (int s = 0; s < p; s++)
        if (busy[s]) {
            fprintf(out, "%s %s", first ? "" : ",", name_of(names, s, fb, sizeof fb));
            first = 0;
        }
    if (active < p) {
        fprintf(out, " (idle:");
        for (int s = 0; s < p; s++)
            if (!busy[s])
                fprintf(out, " %s", name_of(names, s, fb, sizeof fb));
        fprintf(out, ")");
    }
    fprintf(out, "\n");
}

void tt_schedule_explain(FILE *out, const tt_action_list *lists, const tt_sim_result *res,
                         const char *const *names)
{
    int p = res->p, steps = (int)(res->span + 0.5);
    char *busy = tt_calloc((size_t)p, 1);
    for (int t = 1; t <= steps; t++) {
        fprintf(out, "Time step %d\n", t);
        for (int s = 0; s < p; s++)
            busy[s] = 0;
        int active = print_computing(out, lists, res, names, t, busy);
        print_communication(out, lists, res, names, t);
        print_active(out, p, names, busy, active);
    }
    free(busy);
}
