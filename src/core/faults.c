/* faults.c - the planted-fault switch and the test hooks of the save's and
 * the resume's windows (see tt/core/faults.h). */
#define _POSIX_C_SOURCE 200809L

#include "tt/core/faults.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* One process is one virtual GPU: one switch per process. */
static tt_fault active = TT_FAULT_NONE;

void tt_fault_set(tt_fault f) { active = f > TT_FAULT_NONE && f < TT_NFAULTS ? f : TT_FAULT_NONE; }

int tt_fault_active(tt_fault f) { return f != TT_FAULT_NONE && f == active; }

void tt_fault_pause_in_save(long step, int world_rank)
{
    /* The environment, not a flag: the rerun a test compares must be the
     * very command of the killed run, so the hook cannot be on its line. */
    const char *v = getenv("TT_TEST_PAUSE_IN_SAVE");
    char *end;
    if (!v || *v == '\0' || strtol(v, &end, 10) != step || *end != '\0')
        return;
    if (world_rank == 0) {
        fprintf(stderr, "tiny_transformer: test hook: the save of step %ld pauses for 60 s, "
                        "its temporary written (TT_TEST_PAUSE_IN_SAVE)\n", step);
        fflush(stderr);
    }
    sleep(60);
}

void tt_fault_pause_before_load(int world_rank)
{
    const char *v = getenv("TT_TEST_PAUSE_BEFORE_LOAD");
    char *end;
    long secs = v && *v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end != '\0' || secs < 1 || secs > 60)
        return;
    if (world_rank == 0) {
        fprintf(stderr, "tiny_transformer: test hook: the resume pauses for %ld s before "
                        "loading the checkpoint (TT_TEST_PAUSE_BEFORE_LOAD)\n", secs);
        fflush(stderr);
    }
    sleep((unsigned)secs);
}
