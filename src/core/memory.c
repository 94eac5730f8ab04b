/* memory.c - the budget and the account of one virtual GPU (one process),
 * and the host's physical memory that bounds them all. */
#define _DEFAULT_SOURCE /* _SC_PHYS_PAGES */
#include "tt/core/memory.h"
#include "tt/core/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const tt_mem_names[TT_MEM_NCAT] = {"weights", "activations", "errors",
                                               "gradients", "comm buffers", "optimizer"};

static struct {
    size_t budget, cur[TT_MEM_NCAT], total, peak, at_peak[TT_MEM_NCAT];
    int paused, oom;
    char oom_msg[400];
} mem;

uint64_t tt_mem_host_bytes(void)
{
    /* Physical pages, not what is free now: a bound to refuse the
     * impossible, not a promise that what is below it will fit. */
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || size <= 0)
        return 0;
    return (uint64_t)pages * (uint64_t)size;
}

void tt_mem_set_budget(size_t bytes) { mem.budget = bytes; }
size_t tt_mem_budget(void) { return mem.budget; }

int tt_mem_tracking(int on)
{
    int was = !mem.paused;
    mem.paused = !on;
    return was;
}

int tt_mem_is_tracking(void) { return !mem.paused; }

const char *tt_mem_human(size_t b, char *buf, size_t n)
{
    if (b >= (size_t)1 << 20)
        snprintf(buf, n, "%.2f MiB", b / 1048576.0);
    else if (b >= 1024)
        snprintf(buf, n, "%.1f KiB", b / 1024.0);
    else
        snprintf(buf, n, "%zu B", b);
    return buf;
}

void tt_mem_account(tt_mem_cat cat, size_t bytes, const char *what)
{
    if (mem.paused)
        return;
    if (mem.budget && !mem.oom && mem.total + bytes > mem.budget) {
        /* The first allocation over the budget is the one a GPU would fail. */
        char h[4][32];
        int k = snprintf(mem.oom_msg, sizeof mem.oom_msg,
                         "out of memory: allocating %s for %s would bring it to %s of its %s "
                         "(holding",
                         tt_mem_human(bytes, h[0], sizeof h[0]), what,
                         tt_mem_human(mem.total + bytes, h[1], sizeof h[1]),
                         tt_mem_human(mem.budget, h[2], sizeof h[2]));
        for (int c = 0; c < TT_MEM_NCAT && k > 0 && (size_t)k < sizeof mem.oom_msg; c++)
            k += snprintf(mem.oom_msg + k, sizeof mem.oom_msg - (size_t)k, "%s %s %s",
                          c ? "," : "", tt_mem_names[c],
                          tt_mem_human(mem.cur[c], h[3], sizeof h[3]));
        if (k > 0 && (size_t)k < sizeof mem.oom_msg)
            snprintf(mem.oom_msg + k, sizeof mem.oom_msg - (size_t)k, ")");
        mem.oom = 1;
    }
    mem.cur[cat] += bytes;
    mem.total += bytes;
    if (mem.total > mem.peak) {
        mem.peak = mem.total;
        memcpy(mem.at_peak, mem.cur, sizeof mem.cur);
    }
}

void tt_mem_release(tt_mem_cat cat, size_t bytes)
{
    if (mem.paused)
        return;
    mem.cur[cat] -= bytes;
    mem.total -= bytes;
}

void *tt_mem_alloc(tt_mem_cat cat, size_t bytes, const char *what)
{
    tt_mem_account(cat, bytes, what);
    return tt_calloc(bytes ? bytes : 1, 1);
}

void tt_mem_free(tt_mem_cat cat, void *p, size_t bytes)
{
    if (!p)
        return;
    tt_mem_release(cat, bytes);
    free(p);
}

size_t tt_mem_peak(size_t *by_cat)
{
    if (by_cat)
        memcpy(by_cat, mem.at_peak, sizeof mem.at_peak);
    return mem.peak;
}

int tt_mem_oom(char *msg, size_t n)
{
    if (mem.oom && msg)
        snprintf(msg, n, "%s", mem.oom_msg);
    return mem.oom;
}
