/* tt/core/memory.h - each virtual GPU's memory: a budget (--gpu-mem) and an exact
 * account of what the GPU holds, by the categories of doc/background.md section 1:
 * weights, activations (the weighted sums z and outputs y kept for the
 * backward), errors (activation gradients), local gradients, buffers for data
 * received from or sent to peers, and optimizer state (Adam's m and v).
 *
 * Everything a GPU needs is allocated before the first step (activation
 * slots for the schedule's peak of micro-batches in flight, the transfer
 * buffers of every send and receive), so going over the budget is found, and
 * reported by every rank together, before any work. */
#ifndef TT_MEMORY_H
#define TT_MEMORY_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    TT_MEM_WEIGHTS,
    TT_MEM_ACTIVATIONS, /* z and y of every block, per micro-batch in flight */
    TT_MEM_ERRORS,      /* activation gradients (backward scratch) */
    TT_MEM_GRADS,       /* local gradients of the weights */
    TT_MEM_COMM,        /* activations and gradients to and from peers */
    TT_MEM_OPTIMIZER,   /* Adam m and v */
    TT_MEM_NCAT
} tt_mem_cat;

extern const char *const tt_mem_names[TT_MEM_NCAT];

/* This host's physical memory in bytes (0 when the system does not say). */
uint64_t tt_mem_host_bytes(void);

/* Capacity of this virtual GPU in bytes; 0 = unlimited. */
void tt_mem_set_budget(size_t bytes);
size_t tt_mem_budget(void);

/* Zeroed memory, booked in category cat; `what` names it in an
 * out-of-memory message. Over the budget the memory is still handed out (the
 * run is stopped by the caller at the next agreement point, see tt_mem_oom),
 * so callers need no error path. */
void *tt_mem_alloc(tt_mem_cat cat, size_t bytes, const char *what);
void tt_mem_free(tt_mem_cat cat, void *p, size_t bytes);
/* Books (or releases) bytes allocated elsewhere, e.g. one buffer holding
 * several categories. */
void tt_mem_account(tt_mem_cat cat, size_t bytes, const char *what);
void tt_mem_release(tt_mem_cat cat, size_t bytes);

/* Off while building things that are not on the virtual GPU (the --validate
 * reference lives on the host); returns the previous state. */
int tt_mem_tracking(int on);
int tt_mem_is_tracking(void);

/* The largest total held so far, with the categories at that moment. */
size_t tt_mem_peak(size_t *by_cat_at_peak /* TT_MEM_NCAT, or NULL */);
/* 1 when an allocation went over the budget; msg then says what, how much,
 * and the breakdown at that moment. */
int tt_mem_oom(char *msg, size_t n);

/* "12.30 MiB", "3.5 KiB", "12 B" (powers of 1024, as --gpu-mem reads them) */
const char *tt_mem_human(size_t bytes, char *buf, size_t n);

#endif
