/* tt/parallel/pipeline.h - pipeline schedules as data.
 *
 * Before a step, every stage's list of actions (forward micro-batch i of
 * chunk k, backward, send, receive) is generated; all stages' lists are then
 * run through a small simulation that proves every send meets its receive,
 * every dependency is satisfied and nothing can deadlock. The executor runs
 * the list and nothing else decides the order.
 *
 * Where: the schedule registry and its rules in src/parallel/schedule.c, the
 * builders in schedule_build.c,
 * the check in schedule_check.c and schedule_sim.c, the narration in
 * schedule_explain.c.
 *
 * Chunks: with v virtual stages the model's blocks are cut into p*v chunks;
 * global chunk k is local chunk k / p of its stage. Where it lives is the
 * schedule's placement (tt_chunk_stage):
 *   loop (Megatron's interleaving): chunk k on stage k % p, so stage s holds
 *     chunks s, s+p, s+2p, ...; activations go from stage p-1 back to 0
 *     between rounds. Without interleaving v = 1 and chunk k is stage k.
 *   V (zb-v, v = 2): the first p chunks go down the stages and the next p
 *     come back up: stage s holds chunks s and 2p-1-s. Stage p-1 holds two
 *     consecutive chunks (p-1 and p), so that transfer stays on the GPU (a
 *     copy, no message), and stage 0 holds both the embeddings and the loss.
 *     Worked example, p = 4: stage 0 holds chunks 0 and 7, stage 1 chunks 1
 *     and 6, stage 2 chunks 2 and 5, stage 3 chunks 3 and 4.
 * Global chunk 0 also holds the embeddings; chunk p*v-1 holds ln_f, lm_head
 * and the loss. Activations go from chunk k to k+1, gradients from k+1 back
 * to k.
 *
 * Execution semantics the simulation assumes (and the executor follows):
 * sends are non-blocking (buffered until the receiver takes them); a receive
 * waits until the matching send has been issued; compute actions take time
 * and run one at a time per stage, in list order. */
#ifndef TT_PIPELINE_H
#define TT_PIPELINE_H

#include <stdio.h>
#include "tt/core/common.h"
#include "tt/model/model.h" /* TT_MAX_CHUNKS */

typedef enum {
    TT_SCHED_NAIVE,      /* one micro-batch at a time through the whole pipe */
    TT_SCHED_GPIPE,      /* all forwards, then all backwards */
    TT_SCHED_1F1B,       /* warm-up, one-forward-one-backward, cool-down */
    TT_SCHED_INTERLEAVED, /* 1F1B over v chunks per stage */
    TT_SCHED_ZB_H1,       /* 1F1B with the backward split into B and W, W filling the
                             cool-down (zero bubble, Qi et al. 2023) */
    TT_SCHED_ZB_V         /* two chunks per stage in a V, B and W apart (zero bubble) */
} tt_schedule_kind;

/* Where the chunks of a pipeline live (see "Chunks" above). */
typedef enum {
    TT_PLACE_LOOP, /* chunk k on stage k % p */
    TT_PLACE_V     /* chunk k on stage k for k < p, on stage 2p-1-k after */
} tt_placement;

/* The stage that holds global chunk k, and the global chunk that is local
 * chunk j of stage s. */
int tt_chunk_stage(tt_placement place, int p, int k);
int tt_stage_chunk(tt_placement place, int p, int s, int j);

typedef enum {
    TT_ACT_FWD,       /* forward of (mb, chunk) */
    TT_ACT_BWD,       /* backward of (mb, chunk) */
    TT_ACT_SEND_ACT,  /* send the output activation of (mb, chunk) to the next chunk */
    TT_ACT_RECV_ACT,  /* receive the input activation of (mb, chunk) from the previous chunk */
    TT_ACT_SEND_GRAD, /* send the input gradient of (mb, chunk) to the previous chunk */
    TT_ACT_RECV_GRAD, /* receive the output gradient of (mb, chunk) from the next chunk */
    TT_ACT_W          /* weight gradients of (mb, chunk) (zero-bubble schedules: then
                         TT_ACT_BWD is B, the input gradient only) */
} tt_action_kind;

typedef struct {
    tt_action_kind kind;
    int mb;    /* micro-batch, 0..m-1 */
    int chunk; /* global chunk index, 0..p*v-1 (the chunk this stage computes) */
    int peer;  /* send/recv: the other stage; -1 for compute */
} tt_action;

typedef struct {
    int n, cap;
    tt_action *a;
    tt_placement place; /* where the chunks live: the builder's schedule's placement
                           (lists built by hand: TT_PLACE_LOOP, zero) */
} tt_action_list;

/* ---- the schedule registry: one row per schedule ----
 * A schedule's kind is its row's index, 0..tt_schedule_count()-1 (the enum
 * above names the rows code refers to). */
int tt_schedule_count(void);

/* Parses a row's name (any case); -1 if unknown. */
int tt_schedule_parse(const char *name);
/* The name of row `kind` ("unknown" outside the table); also the name by index. */
const char *tt_schedule_name(tt_schedule_kind kind);
/* One line on what the schedule does, for help texts. */
const char *tt_schedule_about(tt_schedule_kind kind);
/* The bubble tt_bubble_theory computes, as text: "(p-1)/(m + p-1)", ... */
const char *tt_schedule_formula(tt_schedule_kind kind);
/* Chunks per stage the schedule runs when v are asked for: v for a schedule
 * that interleaves chunks, else 1 (so K = p x this). */
int tt_schedule_chunks_per_stage(tt_schedule_kind kind, int v);
/* The v a run takes when --virtual-stages is not given: 1, or the fewest
 * chunks per stage a schedule that interleaves runs (2; zb-v exactly 2). */
int tt_schedule_default_v(tt_schedule_kind kind);
/* 1 when --plan tries the schedule without --schedule naming it. */
int tt_schedule_planned(tt_schedule_kind kind);
/* Where the schedule puts the chunks. */
tt_placement tt_schedule_placement(tt_schedule_kind kind);
/* The schedule a run of p stages with v virtual stages runs when kind is
 * asked for: one stage with one chunk runs 1F1B whatever is asked (each
 * micro-batch forward then backward), so zb-h1's split backward is not
 * taken there either. */
tt_schedule_kind tt_schedule_as_run(tt_schedule_kind kind, int p, int v);
/* 1 when the schedule splits the backward into B (TT_ACT_BWD) and W
 * (TT_ACT_W); the model then keeps B's output gradients until W. */
int tt_schedule_splits_w(tt_schedule_kind kind);
/* The most (mb, chunk) pairs stage s of the schedule may hold at once (from
 * the forward to the backward, or to W when it splits): its memory bound. */
int tt_schedule_held_bound(tt_schedule_kind kind, int p, int m, int v, int s);
/* Writes every row's name into buf as "a, b, ... or z" (cut to n bytes,
 * terminated when n > 0) and returns buf. */
const char *tt_schedule_names(char *buf, size_t n);

/* Fails (message in e) if the schedule cannot run p stages, m micro-batches,
 * v chunks per stage: v is 1 except for interleaved (v >= 2, and m a multiple
 * of p, as in Megatron-LM) and zb-v (exactly 2); interleaved and zb-v need
 * p >= 2; zb-h1 needs m >= p and zb-v m >= 2(p-1). Each message names the
 * value to use instead. */
int tt_schedule_validate_args(tt_schedule_kind kind, int p, int m, int v, tt_err *e);
/* Its rule on v alone (1 for a schedule of one chunk per stage, exactly 2
 * for zb-v, at least 2 for interleaved), which the layout cannot change. */
int tt_schedule_validate_chunks(tt_schedule_kind kind, int v, tt_err *e);

/* The action list of one stage. */
void tt_schedule_build(tt_action_list *out, tt_schedule_kind kind, int p, int m, int v,
                       int stage);
void tt_action_list_free(tt_action_list *l);

/* The simulated run of all stages' lists with unit compute times (forward
 * fwd_cost, backward bwd_cost time units; lists with W actions spend half of
 * bwd_cost in B and half in W, so 1 and 2 give the papers' F = B = W). */
typedef struct {
    int p, m, v;
    double **start;  /* [stage][action] start time (compute and comm actions) */
    double span;     /* time until the last stage finishes */
    double *end;     /* [stage] time its last action ends (span is the most) */
    double *busy;    /* [stage] time spent computing */
    int *peak_held;  /* [stage] most micro-batches forwarded, not yet backwarded
                        (or, with W actions, not yet through W), counting each
                        (mb, chunk) pair: activations held */
} tt_sim_result;

/* Simulates lists[0..p-1] together; returns 0 and fills res when every
 * micro-batch is forwarded and backwarded exactly once per chunk (and, when
 * any list has a W, given exactly one W after its B, on the same stage), every
 * dependency holds, every send meets exactly one receive and the run cannot
 * deadlock; otherwise -1 with the first problem in e (naming the stage, the
 * action and why). res may be NULL. */
int tt_schedule_check(const tt_action_list *lists, int p, int m, int v, double fwd_cost,
                      double bwd_cost, tt_sim_result *res, tt_err *e);

/* Fails, naming the stage, when a checked run (res) held more (mb, chunk)
 * pairs on a stage than the schedule's tt_schedule_held_bound. */
int tt_schedule_check_bound(tt_schedule_kind kind, const tt_sim_result *res, tt_err *e);

/* The same simulation with each chunk's own costs, as the virtual clocks see
 * them: fwd[k] and bwd[k] seconds for chunk k (k < p*v), and link[k] the
 * delay of a message between chunks k and k+1 (either way; NULL: free). A
 * receive completes at the later of its stage reaching it and its send's
 * time plus the link (doc/design.md section 12). The planner's pipeline time. */
#define TT_MAX_SIM_CHUNKS 65536
typedef struct {
    const double *fwd, *bwd, *link;
    const double *wgt; /* W of chunk k (NULL: free); bwd is then B alone */
} tt_sim_costs;
int tt_schedule_simulate(const tt_action_list *lists, int p, int m, int v,
                         const tt_sim_costs *cost, tt_sim_result *res, tt_err *e);
void tt_sim_result_free(tt_sim_result *res);
/* The same in two halves, for lists priced many times over (the planner's
 * layouts that differ only in recomputation or SP share their lists):
 * the checker's first two passes once (NULL, message in e, when they fail),
 * then the simulation with any costs. The lists must outlive the result. */
typedef struct tt_checked_schedule tt_checked_schedule;
tt_checked_schedule *tt_schedule_checked(const tt_action_list *lists, int p, int m, int v,
                                         tt_err *e);
int tt_schedule_simulate_checked(const tt_checked_schedule *cs, const tt_sim_costs *cost,
                                 tt_sim_result *res, tt_err *e);
void tt_checked_schedule_free(tt_checked_schedule *cs);

/* What a stage's action list makes the executor allocate (pipeline_run.c,
 * allocate_for_list; slots.c's pools), each the most the list holds at once
 * (a (mb, chunk) pair is held from the action that lands its input, its
 * receive or chunk 0's forward, to its backward, or W when the list has W):
 * slots, one per pair (at least v, for eval); blocks' activations, nb[j] per
 * pair of local chunk j (NULL: 1; at least every chunk's once); the head's
 * buffers, one per pair of the model's last chunk p v - 1 (at least one on
 * its stage, else 0); and the transfer buffers (sends to another stage and
 * received gradients, each one micro-batch wide), all of the step's: zb-v's
 * turn costs its stage one per micro-batch, the gradient's. Under the
 * interleaved schedule the chunks peak at different times: stage 0 holds
 * p v + p - 1 chunk micro-batches at once, not the p v + p of the per-chunk
 * maxima (Korthikanti et al. 2022: L (1 + (p-1)/(p v)) layers' activations),
 * and the last stage p v - p + 1 with one head among them. */
typedef struct {
    int slots, blocks, heads, buffers;
} tt_stage_buffers;
void tt_schedule_buffers(const tt_action_list *l, int p, int v, const int *nb /* [v] */,
                         tt_stage_buffers *out);
/* The most a stage holds at once when a micro-batch of local chunk j weighs
 * bytes[j] (the same taking and giving back as tt_schedule_buffers). */
double tt_schedule_peak_held(const tt_action_list *l, int p, int v, const double *bytes);
/* 1 for the transfers of stage `stage` that get a buffer of their own: the
 * sends to another stage and the gradient receives (an activation is
 * received into its slot; a send to the stage itself holds no buffer). */
int tt_action_needs_buffer(const tt_action *a, int stage);

/* Idle fraction the theory predicts for the schedule:
 * naive (p-1)/p; gpipe and 1f1b (p-1)/(m+p-1); interleaved (p-1)/(v m + p-1);
 * zb-h1 (p-1)/(3m+p-1) and zb-v (p-1)/(6m+p-1), at the papers' unit costs
 * F = B = W = 1 (doc/pipeline.md). */
double tt_bubble_theory(tt_schedule_kind kind, int p, int m, int v);

/* ---- the step as the papers draw it (schedule_explain.c) ----
 * On their time steps a forward fills one, a backward two and a transfer
 * none; each action kind's letter, words and length are a row of the label
 * tables there. */

/* tt_schedule_check on those time steps (res->start are whole time steps). */
int tt_schedule_textbook(const tt_action_list *lists, int p, int m, int v, tt_sim_result *res,
                         tt_err *e);
/* One line: "time steps as the papers draw them: a forward takes 1, ...". */
void tt_schedule_legend(FILE *out, int split);
/* The ASCII Gantt chart of res (from tt_schedule_textbook): one row per
 * stage named names[s] (short, e.g. "g4"), one column per time step, cells
 * "F3" / "B3" (with interleaving "F3c5": micro-batch 3 on chunk 5), "." idle;
 * cut into blocks of columns so no line passes 100 characters. */
void tt_schedule_gantt(FILE *out, const tt_action_list *lists, const tt_sim_result *res,
                       const char *const *names);
/* The chart's key: what F3, B3, ... and '.' mean (v > 1: the chunk suffix). */
void tt_schedule_gantt_key(FILE *out, int v, int split);
/* Narrates res one time step per line group: "Time step 3", "computing: g0
 * forward of micro-batch 2 on chunk 0; ...", "communication: g0 -> g1
 * activations of micro-batch 2", "active GPUs 75%: g0, g1, g2 (idle: g3)";
 * a backward says which of its time steps it fills ("(part 1 of 2)"). */
void tt_schedule_explain(FILE *out, const tt_action_list *lists, const tt_sim_result *res,
                         const char *const *names);

#endif
