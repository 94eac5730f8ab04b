/* tt/comm/watchdog.h - the hang report of --watchdog SECONDS: a rank that
 * stays in one blocking communication that long prints what it waits for
 * (operation, group, peer and its grid coordinates, tag, step, micro-batch,
 * and what the call is for when its caller said) and what it last saw of its
 * peers, then ends its process with status 1, so
 * that mpirun ends the whole job.
 *
 * comm.c brackets each blocking MPI call with tt_watch_begin/tt_watch_end;
 * the executor tells the step and micro-batch at hand (tt_watch_context), and
 * the callers that know it what a call is for (tt_watch_purpose). A
 * helper thread that never calls MPI checks the deadline on the monotonic
 * clock, so the report comes out while the main thread is still blocked in
 * MPI. Before tt_watch_start (unit tests, tools) every hook is a no-op. */
#ifndef TT_COMM_WATCHDOG_H
#define TT_COMM_WATCHDOG_H

#include "tt/comm/grid.h"

/* What kind of call is watched: it decides what the report says of peers.
 * (The watchdog names calls by comm.c's words but does not include comm.h,
 * which includes this: the hooks pass the words and the communicator.) */
typedef enum {
    TT_WATCH_COLLECTIVE, /* every member of the communicator must enter it */
    TT_WATCH_SEND,       /* to peer (posting a non-blocking send counts as done) */
    TT_WATCH_RECV,       /* from peer */
    TT_WATCH_SENDS       /* waiting for this rank's posted sends to complete */
} tt_watch_kind;

/* Starts watching this rank's communication with a limit of `seconds`
 * (0: off, nothing is started). Call once, after the grid exists; g must
 * outlive tt_watch_stop. */
void tt_watch_start(const tt_grid *g, double seconds);
/* Stops the helper thread (immediately, not at its next tick). */
void tt_watch_stop(void);

/* A blocking call is about to start: op its name as the reports print it
 * ("all-reduce"; a string that outlives the run), comm the communicator it
 * runs on (one of the grid's: TP, PP, DP or the world), peer the world rank
 * of the other side of a point-to-point transfer (-1 otherwise), tag its tag
 * (-1 for none). */
void tt_watch_begin(tt_watch_kind kind, const char *op, MPI_Comm comm, int peer, int tag);
/* The call begun last has returned: it is remembered as what this rank last
 * did with that peer (or group). */
void tt_watch_end(void);
/* The training step and micro-batch the next calls belong to (mb -1: none,
 * e.g. the DP sync after the micro-batches). */
void tt_watch_context(long step, int mb);
/* What the next watched call is for; that call takes it, so it names no
 * other (what NULL: nothing said, for a caller whose call turned out not to
 * communicate). what is a printf format that outlives the run (a string
 * literal) with at most two %d, filled with a and b, and reads after "the":
 * "activation of micro-batch %d into chunk %d". It is formatted only in a
 * report, so saying it costs a healthy run three stores. Main thread only,
 * as the calls are. */
void tt_watch_purpose(const char *what, int a, int b);

#endif
