/* tests/pipeline_check.h - what the pipeline test programs (test_pipeline*.c)
 * share: every stage's list of one schedule built and freed together, and one
 * schedule built and checked in one call. Single process, no MPI.
 *
 * K = p*v is the number of chunks, chunk k lives on stage k % p (loop
 * placement; zb-v's V is tt_chunk_stage's other case). */
#ifndef TT_PIPELINE_CHECK_H
#define TT_PIPELINE_CHECK_H

#include <check.h>
#include <stddef.h>

#include "tt/parallel/pipeline.h"

#define PMAX 8

static inline void build_all(tt_action_list *L, tt_schedule_kind kind, int p, int m, int v)
{
    for (int s = 0; s < p; s++)
        tt_schedule_build(&L[s], kind, p, m, v, s);
}

static inline void free_all(tt_action_list *L, int p)
{
    for (int s = 0; s < p; s++)
        tt_action_list_free(&L[s]);
}

/* Builds and checks one schedule; 0 on success (the message in e otherwise). */
static inline int run(tt_schedule_kind kind, int p, int m, int v, double fc, double bc,
                      tt_sim_result *r, tt_err *e)
{
    tt_action_list L[PMAX];
    build_all(L, kind, p, m, v);
    int rc = tt_schedule_check(L, p, m, v, fc, bc, r, e);
    free_all(L, p);
    return rc;
}

/* A program's suite: its n tests in one test case, each allowed 60 s. */
static inline Suite *pipeline_suite(const char *name, const TTest *const *tests, size_t n)
{
    Suite *s = suite_create(name);
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    for (size_t i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return s;
}

#endif
