/* tt/core/events.h - the event log of one virtual GPU: what it did and when
 * (each forward and backward of a micro-batch and chunk, each transfer and
 * collective, each wait for collectives started earlier, the optimizer's
 * compute), recorded only while a trace is being captured. Any layer may
 * record; the trace (tt/show/trace.h) starts the log, feeds it the
 * communication through comm's observer, gathers the logs of every GPU and
 * draws them. No MPI here. */
#ifndef TT_CORE_EVENTS_H
#define TT_CORE_EVENTS_H

typedef enum {
    TT_EV_FORWARD, TT_EV_BACKWARD,   /* compute of (mb, chunk) */
    TT_EV_COMM,                      /* a transfer or collective (name = operation) */
    TT_EV_OPTIMIZER,                 /* compute after the backward: the gradient norm's
                                        sum of squares; clipping + AdamW (the norm's
                                        all-reduce between them is a TT_EV_COMM) */
    TT_EV_WAIT,                      /* blocked on non-blocking collectives started
                                        earlier (name = operation, group, bytes):
                                        communication, not compute nor bubble */
    TT_EV_PAUSED                     /* the oracle's work inside a step (--validate
                                        or a spot-checked step), while the clock is
                                        paused: no time on the virtual clock,
                                        so recorded only under --clock wall,
                                        where it takes time */
} tt_event_kind;

typedef struct {
    int kind;           /* tt_event_kind */
    char name[24];      /* "forward", "all-reduce", "send", ... */
    char group[8];      /* comm, wait: "TP", "PP", "DP", "other"; else "" */
    char purpose[32];   /* comm: what a named call was for ("loss all-reduce",
                           tt_allreduce_named); else "" */
    double t0, t1;      /* seconds since the log's origin (common to all ranks),
                           on the clock figures use (virtual unless --clock wall) */
    int step, mb, chunk;/* -1 when not applicable */
    char carries[12];   /* a pipeline transfer: "activation" or "gradient"; else "" */
    int peer;           /* send/recv: the other world rank; else -1 */
    long long bytes;    /* comm: bytes booked; wait: bytes waited for; else 0 */
} tt_event;

/* Starts recording; origin is tt_clock_now() (tt/core/vclock.h) at a moment
 * common to all ranks. Only training steps are recorded (not the oracle's
 * paused work, eval or sampling). */
void tt_events_start(double origin);
/* The step the following events belong to. */
void tt_events_set_step(int step);
/* The micro-batch and chunk the PP and TP communication recorded from now on
 * serves (a pipeline transfer: the chunk that receives it, and what it
 * carries, "activation" or "gradient"; a TP collective inside a forward or
 * backward: that chunk's, carries NULL), until the next call; -1, -1, NULL:
 * none. DP communication serves every micro-batch and is never tagged. */
void tt_events_tag(int mb, int chunk, const char *carries);
/* Records an event with absolute tt_clock_now() times (kept relative to the origin);
 * nothing when the log is not recording. */
void tt_events_add(int kind, const char *name, const char *group, double t0_abs, double t1_abs,
                   int mb, int chunk, int peer, long long bytes);
/* A transfer or collective (TT_EV_COMM, with the micro-batch and chunk of
 * tt_events_tag) with the purpose a named call gave (NULL: none). */
void tt_events_add_comm(const char *op, const char *group, const char *purpose, double t0_abs,
                        double t1_abs, int peer, long long bytes);
/* Stops recording and hands over the log (*n events; free it): the log is
 * empty afterwards. */
tt_event *tt_events_take(int *n);

#endif
