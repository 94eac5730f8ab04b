/* vclock.c - this rank's virtual GPU clock (tt/core/vclock.h). */
#include "tt/core/vclock.h"

#include <stdio.h>

/* One process is one virtual GPU: one clock per process. Until a run sets
 * it up, the clock models classroom (unit tests and examples). */
static struct {
    tt_cluster cluster;
    int have_cluster;
    tt_clock_mode mode;
    int running, paused;
    double now;
    char label[96];
} clk;

static void ensure_cluster(void)
{
    if (!clk.have_cluster) {
        tt_cluster_load(&clk.cluster, "classroom", NULL);
        clk.have_cluster = 1;
    }
}

void tt_vclock_setup(const tt_cluster *c, tt_clock_mode mode, int world_rank)
{
    (void)world_rank;
    clk.cluster = *c;
    clk.have_cluster = 1;
    clk.mode = mode;
    clk.running = clk.paused = 0;
    clk.now = 0.0;
}

const tt_cluster *tt_vclock_cluster(void)
{
    ensure_cluster();
    return &clk.cluster;
}

tt_clock_mode tt_vclock_mode(void) { return clk.mode; }

const char *tt_clock_label(void)
{
    ensure_cluster();
    if (clk.mode == TT_CLOCK_WALL)
        return "wall clock of this machine";
    snprintf(clk.label, sizeof clk.label, "virtual time on %s", clk.cluster.name);
    return clk.label;
}

void tt_vclock_run(int on)
{
    ensure_cluster();
    clk.running = on;
    clk.paused = 0;
}

void tt_vclock_pause(void) { clk.paused++; }
void tt_vclock_resume(void)
{
    if (clk.paused > 0)
        clk.paused--;
}

int tt_vclock_ticking(void) { return clk.running && !clk.paused && clk.mode == TT_CLOCK_VIRTUAL; }
int tt_vclock_in_step(void) { return clk.running; }
int tt_vclock_paused(void) { return clk.paused > 0; }

double tt_vclock_now(void) { return clk.now; }
void tt_vclock_set(double t) { clk.now = t; }

void tt_vclock_advance(double seconds)
{
    if (tt_vclock_ticking())
        clk.now += seconds;
}

void tt_vclock_compute(double flops, double bytes)
{
    if (!tt_vclock_ticking() || tt_cluster_fixed(&clk.cluster))
        return;
    clk.now += tt_cost_compute(&clk.cluster, flops, bytes);
}

double tt_clock_now(void) { return clk.mode == TT_CLOCK_WALL ? tt_now() : clk.now; }
