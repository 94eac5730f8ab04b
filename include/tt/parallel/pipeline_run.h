/* tt/parallel/pipeline_run.h - running a pipeline: the split of the blocks
 * into stages and each rank's shard (src/parallel/stage_split.c), and the
 * executor that runs a stage's action list (tt/parallel/pipeline.h) with the
 * model's chunk forward/backward and MPI point-to-point transfers between the
 * stages' ranks of equal (dp, tp) (src/parallel/pipeline_run.c). */
#ifndef TT_PIPELINE_RUN_H
#define TT_PIPELINE_RUN_H

#include <mpi.h>
#include "tt/core/config.h"
#include "tt/core/data.h"
#include "tt/comm/comm.h"
#include "tt/comm/grid.h"
#include "tt/model/model.h"
#include "tt/parallel/pipeline.h"

/* Blocks per global chunk (K = pp x virtual stages chunks): the --stage-layers
 * list when given (K positive numbers summing to L), else the split that
 * minimises the most expensive chunk, counting a block as one unit and
 * lm_head with the loss as (2CV)/(24C^2 + 4TC) of a block - or, under the V
 * placement (zb-v), the most expensive stage (its two chunks together),
 * then the costlier of each stage's two chunks. */
int tt_stage_split(int *chunk_layers, const tt_config *cfg, int K, tt_placement place,
                   const char *override, tt_err *e);

/* The shard of world rank r: its TP slice of the blocks of its chunks. */
tt_shard_spec tt_stage_spec(const tt_grid *g, const tt_run_config *rc, const int *chunk_layers,
                            int r);

typedef struct {
    tt_model *m;
    const tt_run_config *rc;
    const tt_grid *g;          /* NULL: one virtual GPU outside MPI */
    int p, v, K, M, stage, mbs;
    tt_schedule_kind kind;
    int split_w;               /* the schedule runs B and W apart (TT_ACT_W) */
    tt_action_list *all;       /* every stage's actions, checked together */
    tt_action_list list;       /* this stage's: all[stage] */
    tt_sim_result sim;         /* the checked simulation, forward 1, backward 2
                                  (B 1 and W 1 when split) */
    tt_slot **held;            /* [M*v] activations of (mb, local chunk) */
    float **buf;               /* [list.n] transfer buffer of each send to another
                                  stage / gradient receive, allocated once (comm
                                  buffers); NULL for the rest */
    size_t buf_size;           /* bytes of each of them */
    float **grad_in;           /* [M*v] where (mb, chunk)'s output gradient arrives */
    float **grad_out;          /* [M*v] where its input gradient waits to be sent */
    const float **local;       /* [2*K*M] by message tag: where a transfer between two
                                  chunks of this stage left its data (zb-v's V
                                  turns on one stage: the producer's slot output or
                                  the receive's own buffer, not a message) */
    MPI_Request *reqs;         /* [list.n] sends in flight */
    int nreq;
    /* the last step, measured */
    double step_seconds, busy_seconds;
    double window_seconds;     /* first forward to last backward of the pipeline
                                  (virtual clock; else the step) */
    int peak_held;
} tt_pipe;

/* The schedule a run with p stages executes: rc->schedule, except 1f1b on
 * one stage without interleaving. */
tt_schedule_kind tt_pipe_kind(const tt_run_config *rc, int p);
/* Fails with one line when the schedule cannot run with the other flags
 * (a schedule with B and W apart refuses --recompute, --sequence-parallel
 * and --zero 3). */
int tt_pipe_check_flags(const tt_run_config *rc, int p, tt_err *e);

/* Builds and checks the schedule (every stage's list through the
 * simulation; a wrong schedule is an error before anything runs). */
int tt_pipe_init(tt_pipe *pipe, tt_model *m, const tt_run_config *rc, const tt_grid *g,
                 tt_err *e);
void tt_pipe_free(tt_pipe *pipe);

/* Runs this stage's list for one training step: the micro-batches of this DP
 * replica's share of the global batch of `step`. Returns the sum over the
 * micro-batches of (mean loss x sequences) on the stage with the loss, else 0. */
double tt_pipe_train(tt_pipe *pipe, const tt_corpus *c, long step, float dloss);

/* Forward only, B sequences through every chunk in order (eval, generation).
 * Returns the mean loss on the ranks of the last stage (targets given), else
 * 0; with targets NULL the last stage's logits are in m->logits. */
double tt_pipe_forward(tt_pipe *pipe, const int *idx, const int *targets, int B);

/* The PP traffic the executor causes on this GPU (stage g->pp_rank of a
 * pipeline of g->pp > 1 stages) for `steps` training steps, added to *add
 * (doc/communication.md). Reads only the shape: sizes and ranks of g, and the
 * batch, micro-batches, schedule (its placement), virtual stages,
 * sequence parallelism, T and C of rc. */
void tt_pipe_expected_traffic(tt_comm_stats *add, const tt_run_config *rc, const tt_grid *g,
                              long steps);

#endif
