/* faults.c - the planted-fault switch (see tt/core/faults.h). */
#include "tt/core/faults.h"

/* One process is one virtual GPU: one switch per process. */
static tt_fault active = TT_FAULT_NONE;

void tt_fault_set(tt_fault f) { active = f > TT_FAULT_NONE && f < TT_NFAULTS ? f : TT_FAULT_NONE; }

int tt_fault_active(tt_fault f) { return f != TT_FAULT_NONE && f == active; }
