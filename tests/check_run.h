/* tests/check_run.h - running a Check suite and turning its verdict into the
 * test's exit status, so that a failed check can never exit 0. */
#ifndef TT_CHECK_RUN_H
#define TT_CHECK_RUN_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

/* A single-process test: each test case forked, as Check likes it. */
static inline int tt_check_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#ifdef TT_CHECK_MPI
#include <mpi.h>
/* An MPI test (between MPI_Init and MPI_Finalize): no fork, since MPI does not
 * survive fork(); rank 0 prints its report, the other ranks their failures
 * (to stderr, with their rank); a failure on any rank fails the test. */
static inline int tt_check_run_mpi(Suite *s)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, rank == 0 ? CK_NORMAL : CK_SILENT);
    int failed = srunner_ntests_failed(sr);
    if (rank != 0 && failed) {
        /* the other ranks' own failures, which Check's silent mode drops */
        TestResult **tr = srunner_failures(sr);
        for (int i = 0; i < failed; i++)
            fprintf(stderr, "rank %d: %s:%d: %s\n", rank, tr_lfile(tr[i]), tr_lno(tr[i]),
                    tr_msg(tr[i]));
        free(tr);
    }
    srunner_free(sr);
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
#endif

#endif
