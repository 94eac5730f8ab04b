/* pipeline_rules.c - what the executor (pipeline_run.c) agrees to run and
 * what it implies: the schedule a run gets (one stage with one chunk runs
 * 1F1B whatever --schedule says), the combinations it refuses and why, and
 * the pipeline traffic a run's counters must show (doc/communication.md). */
#include "tt/parallel/pipeline_run.h"

tt_schedule_kind tt_pipe_kind(const tt_run_config *rc, int p)
{
    /* One stage: each micro-batch forward then backward (1F1B with no
     * warm-up), holding one micro-batch's activations at a time. */
    return tt_schedule_as_run((tt_schedule_kind)rc->schedule, p, rc->virtual_stages);
}

int tt_pipe_check_flags(const tt_run_config *rc, int p, tt_err *e)
{
    tt_schedule_kind kind = tt_pipe_kind(rc, p);
    /* --recompute rebuilds a block's activations into one set the slots
     * share, just before that block's backward; a W that runs later would
     * read the next block's. */
    if (tt_schedule_splits_w(kind) && rc->recompute != TT_RECOMPUTE_NONE)
        return tt_fail(e,
                       "the %s schedule cannot run with --recompute: its W runs after the "
                       "backward and needs the block's activations kept until then, which "
                       "recomputation does not keep; use --recompute none or --schedule 1f1b",
                       tt_schedule_name(kind));
    /* Sequence parallelism's backward gathers each linear's input again
     * inside the block; ZeRO-3 frees a unit's gathered weights after its
     * backward. Neither is split into B and W yet: W would find neither. */
    if (tt_schedule_splits_w(kind) && rc->sequence_parallel)
        return tt_fail(e,
                       "the %s schedule cannot run with --sequence-parallel yet: its W would "
                       "need the inputs that sequence parallelism gathers only inside the "
                       "fused backward; use --schedule 1f1b",
                       tt_schedule_name(kind));
    if (tt_schedule_splits_w(kind) && rc->zero >= 3)
        return tt_fail(e,
                       "the %s schedule cannot run with --zero 3 yet: its W runs after the "
                       "backward has released the unit's gathered weights; use --zero 2 or "
                       "--schedule 1f1b",
                       tt_schedule_name(kind));
    return 0;
}

/* ---- the traffic the executor implies (doc/communication.md) ------------ */

void tt_pipe_expected_traffic(tt_comm_stats *add, const tt_run_config *rc, const tt_grid *g,
                              long steps)
{
    /* Per micro-batch and chunk: the activation (mbs x T x C floats) goes
     * forward to the next chunk and its gradient comes back; a chunk receives
     * its input unless it is the first and its output gradient unless it is
     * the last, and nothing travels between two chunks of one stage (the
     * turn of zb-v's V). Chunks sit where the schedule's placement puts them. */
    const int p = g->pp, v = rc->virtual_stages, K = p * v;
    const tt_placement place = tt_schedule_placement(tt_pipe_kind(rc, p));
    const long long M = rc->micro_batches;
    const long long mbs = tt_micro_batch_size(rc, g->dp);
    /* with sequence parallelism each TP rank sends its 1/tp of the rows */
    const long long sp = rc->sequence_parallel && g->tp > 1 ? g->tp : 1;
    const long long msg = 4 * mbs * rc->model.T * rc->model.C / sp;
    long long sends = 0, recvs = 0;
    for (int j = 0; j < v; j++) {
        int k = tt_stage_chunk(place, p, g->pp_rank, j);
        int prev = k > 0 && tt_chunk_stage(place, p, k - 1) != g->pp_rank;
        int next = k < K - 1 && tt_chunk_stage(place, p, k + 1) != g->pp_rank;
        sends += next + prev;
        recvs += prev + next;
    }
    add->c[TT_GROUP_PP][TT_OP_SEND].calls += steps * M * sends;
    add->c[TT_GROUP_PP][TT_OP_SEND].bytes += steps * M * sends * msg;
    add->c[TT_GROUP_PP][TT_OP_RECV].calls += steps * M * recvs;
    add->c[TT_GROUP_PP][TT_OP_RECV].bytes += steps * M * recvs * msg;
}
