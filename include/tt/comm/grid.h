/* tt/comm/grid.h - the virtual GPU grid: world = tp x pp x dp MPI ranks.
 *
 * Rank order is TP fastest (Megatron's convention), so tensor-parallel peers
 * are neighbours, the "same server, NVLink" group:
 *
 *     world_rank = tp_rank + tp * (dp_rank + dp * pp_rank)
 *
 * Worked example, 12 ranks as tp=2 pp=3 dp=2:
 *
 *     gpu0 (dp0,pp0,tp0)  gpu1 (dp0,pp0,tp1)    TP group {0,1}
 *     gpu2 (dp1,pp0,tp0)  gpu3 (dp1,pp0,tp1)    TP group {2,3}
 *     gpu4 (dp0,pp1,tp0)  gpu5 (dp0,pp1,tp1)    ...
 *     gpu6 (dp1,pp1,tp0)  gpu7 (dp1,pp1,tp1)
 *     gpu8 (dp0,pp2,tp0)  gpu9 (dp0,pp2,tp1)
 *     gpu10(dp1,pp2,tp0)  gpu11(dp1,pp2,tp1)
 *
 *     DP groups (same tp, pp): {0,2} {1,3} {4,6} {5,7} {8,10} {9,11}
 *     PP groups (same tp, dp): {0,4,8} {1,5,9} {2,6,10} {3,7,11}
 *
 * Each rank gets three communicators from MPI_Comm_split (tp_comm, dp_comm,
 * pp_comm; its rank in each is its tp, dp and pp coordinate) and its
 * previous/next pipeline stage as ranks of pp_comm (MPI_PROC_NULL at the
 * ends): stage-to-stage transfers run on pp_comm. */
#ifndef TT_GRID_H
#define TT_GRID_H

#include <mpi.h>
#include <stdio.h>
#include "tt/core/common.h"

typedef struct {
    int tp, pp, dp;                /* sizes */
    int world_rank, world_size;
    int tp_rank, pp_rank, dp_rank; /* coordinates */
    MPI_Comm world;                /* the communicator the grid was built on */
    MPI_Comm tp_comm, pp_comm, dp_comm;
    MPI_Comm pp_clock_comm;        /* pp_comm's twin: carries the virtual clock
                                      of each stage-to-stage message (comm.c) */
    int prev_stage, next_stage;    /* stages (= pp_comm ranks), MPI_PROC_NULL at the ends */
} tt_grid;

/* World rank of the virtual GPU at (dp, pp, tp), and back: the coordinates
 * of world rank r. */
int tt_grid_rank_of(const tt_grid *g, int dp_rank, int pp_rank, int tp_rank);
int tt_grid_tp_of(const tt_grid *g, int r);
int tt_grid_dp_of(const tt_grid *g, int r);
int tt_grid_pp_of(const tt_grid *g, int r);

/* What a layout must satisfy for a given model and batch. */
typedef struct {
    int heads, layers, batch, micro_batches;
    int virtual_stages; /* chunks per pipeline stage (0 or 1: one) */
    const char *command; /* the program and options as typed, for the mpirun
                            line a message suggests; NULL: ./tiny_transformer
                            and the sizes given */
    /* The rest of what the run checks once its layout is known (ZeRO needs
     * dp > 1, sequence parallelism tp > 1, a schedule its micro-batches
     * per stage): 0 when (tp, pp, dp) passes; NULL: nothing more. Sizes
     * chosen for the user, and the table of layouts that work, pass it
     * too; when no layout does, the choice ignores it and the run says why. */
    int (*fits)(const void *ctx, int tp, int pp, int dp);
    const void *ctx;
} tt_layout_rules;

/* 0 if (tp, pp, dp) works for world ranks under the rules, else -1 with
 * every constraint it breaks in e ("; "-separated). */
int tt_layout_check(int world, int tp, int pp, int dp, const tt_layout_rules *r, tt_err *e);

/* Chooses the sizes not given (-1) so that the layout passes tt_layout_check,
 * preferring as many sizes > 1 as possible, then the smallest tp, then the
 * largest pp (12 -> tp2 pp3 dp2, 8 -> tp2 pp2 dp2). On failure the message
 * (several lines) names every constraint broken, the mpirun line when more
 * ranks would do, and a table of the layouts that work on world ranks. Pure: no MPI
 * calls, so every rank reaches the same verdict. */
int tt_grid_choose(int world, int *tp, int *pp, int *dp, const tt_layout_rules *r, tt_err *e);

/* Builds the communicators of a layout chosen by tt_grid_choose. Collective. */
void tt_grid_init(tt_grid *g, int tp, int pp, int dp, MPI_Comm world);
void tt_grid_free(tt_grid *g);

/* "gpu5(dp0,pp1,tp1)" for world rank r (the example grid above). */
const char *tt_gpu_name(const tt_grid *g, int world_rank, char *buf, size_t n);

/* Prints the whole map (every virtual GPU and every TP, PP and DP group). */
void tt_grid_print(const tt_grid *g, FILE *out);

#endif
