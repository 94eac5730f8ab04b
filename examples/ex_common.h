/* ex_common.h - the two things every example does besides its one idea:
 * start MPI on the number of ranks it needs, and compare a result with the
 * unsharded one. */
#ifndef EX_COMMON_H
#define EX_COMMON_H

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* MPI_Init, then this rank and the world size; exits with status 2 on every
 * rank (rank 0 says why) when the world is not between lo and hi ranks. */
static inline int ex_start(int *argc, char ***argv, const char *name, int lo, int hi, int *world)
{
    int rank;
    MPI_Init(argc, argv);
    MPI_Comm_size(MPI_COMM_WORLD, world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (*world < lo || *world > hi) {
        if (rank == 0) {
            if (lo == hi)
                fprintf(stderr, "%s needs exactly %d ranks (got %d)\n", name, lo, *world);
            else
                fprintf(stderr, "%s needs %d to %d ranks (got %d)\n", name, lo, hi, *world);
        }
        MPI_Finalize();
        exit(2);
    }
    return rank;
}

/* max |a - ref| / max |ref|: the relative error of a result. */
static inline double ex_rel_err(const float *a, const float *ref, int n)
{
    double diff = 0, scale = 1e-30;
    for (int i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - ref[i]));
        scale = fmax(scale, fabs((double)ref[i]));
    }
    return diff / scale;
}

#endif
