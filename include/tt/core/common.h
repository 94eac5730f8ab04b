/* tt/core/common.h - small shared helpers: error reporting, allocation, timing.
 *
 * Library functions never print or exit on bad input: they fill a tt_err and
 * return -1, so the caller (which knows whether it is rank 0, and whether the
 * error is a usage or a runtime one) decides who prints and how to exit. */
#ifndef TT_COMMON_H
#define TT_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TT_EXIT_RUNTIME 1 /* bad data, checkpoint, I/O, numerical failure */
#define TT_EXIT_USAGE 2   /* bad flag or value on the command line */

typedef struct {
    char msg[2048]; /* room for a refusal with its table of layouts and a long command line */
} tt_err;

/* Formats msg into e (if e is non-NULL) and returns -1. */
int tt_fail(tt_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* An environment variable that switches something on (1) or off (0):
 * `unset` when it is unset or empty, else its value; -1 with "NAME='v' in
 * the environment: MEANING" in e for anything but 0 or 1. */
int tt_env_switch(const char *name, int unset, const char *meaning, tt_err *e);
/* 1 when an MPI launcher started this process (its variables are set:
 * Open MPI's mpirun, MPICH's Hydra). mpirun hands its ranks a pseudo-terminal
 * whether its own output is a terminal or a file, so under it isatty says
 * nothing about where lines end up, and \r-updated lines would litter a log. */
int tt_launched(void);

/* Appends printf-style text to the NUL-terminated buf of size n, cut off at
 * its end (messages and tables built piece by piece). */
void tt_appendf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Allocation that aborts on out-of-memory of the host (not of a virtual GPU). */
void *tt_malloc(size_t n);
void *tt_calloc(size_t count, size_t size);
/* An array of *cap elements of `size` bytes holding n: doubled (from 64)
 * when full, so that element n can be written. Returns the array. */
void *tt_grow(void *array, int n, int *cap, size_t size);

/* Monotonic wall clock in seconds. */
double tt_now(void);

/* What this process has used of its cores so far (wall-clock resources,
 * not the virtual clocks): CPU seconds in user code and in the kernel, and
 * context switches, waiting (it slept) and preempted (it was made to give
 * way). Zeros where the system does not say. */
enum { TT_CPU_USER, TT_CPU_KERNEL, TT_CPU_WAITS, TT_CPU_PREEMPTED, TT_CPU_N };
void tt_cpu_usage(double out[TT_CPU_N]);

/* CRC-32 (IEEE 802.3, reflected, as zlib's crc32) of n bytes, continuing from crc
 * (start with 0). Used for the per-tensor checksums in checkpoints. */
uint32_t tt_crc32(uint32_t crc, const void *data, size_t n);

/* Opens an input file (a checkpoint, a cluster file, a CSV to plot) for
 * reading: a descriptor, or -1 with *why saying why not (strerror, or "it is
 * a directory", or "not a regular file (a pipe or a device)"). Anything but a
 * regular file is refused without blocking: a FIFO's plain open would wait
 * for a writer, and the run would hang before it could say anything. */
int tt_open_regular(const char *path, const char **why);
/* The same as a stream (mode "r" or "rb"), or NULL with *why set. */
FILE *tt_fopen_regular(const char *path, const char *mode, const char **why);

#endif
