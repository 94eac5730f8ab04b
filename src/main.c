/* main.c - tiny_transformer: every MPI rank is one virtual GPU.
 *
 * The configuration is parsed and checked identically on every rank before
 * any work; rank 0 alone prints a usage error, and all ranks leave with the
 * same status, so a bad flag never hangs a peer waiting in a collective. */
#include <mpi.h>
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "tt/common.h"
#include "tt/config.h"
#include "tt/train.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    /* One BLAS thread per rank: each rank is one GPU sharing the CPU with the
     * others. OPENBLAS_NUM_THREADS set by the user still wins. */
    if (!getenv("OPENBLAS_NUM_THREADS"))
        openblas_set_num_threads(1);

    tt_run_config rc;
    tt_err err;
    int status = 0;
    int parsed = tt_config_parse(&rc, argc, argv, rank == 0 ? stdout : NULL, &err);
    if (parsed < 0) {
        if (rank == 0)
            fprintf(stderr, "tiny_transformer: %s\n", err.msg);
        status = TT_EXIT_USAGE;
    } else if (parsed == 0) {
        int tp = rc.tp ? rc.tp : 1, pp = rc.pp ? rc.pp : 1, dp = rc.dp ? rc.dp : 1;
        if (world != 1 || tp * pp * dp != 1) {
            if (rank == 0)
                fprintf(stderr,
                        "tiny_transformer: this version trains on one virtual GPU only "
                        "(tp=1 pp=1 dp=1, mpirun -np 1); got %d rank(s) with tp=%d pp=%d dp=%d\n",
                        world, tp, pp, dp);
            status = TT_EXIT_USAGE;
        } else {
            status = tt_train_main(&rc, rank);
        }
    }
    MPI_Finalize();
    return status;
}
