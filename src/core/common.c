/* common.c - error formatting, host allocation, the clock, CRC-32 and opening
 * an input file. */
#define _POSIX_C_SOURCE 200809L /* fstat, fcntl's O_NONBLOCK */
#include "tt/core/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int tt_fail(tt_err *e, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int tt_env_switch(const char *name, int unset, const char *meaning, tt_err *e)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return unset;
    if (strcmp(v, "0") == 0 || strcmp(v, "1") == 0)
        return *v - '0';
    return tt_fail(e, "%s='%s' in the environment: %s", name, v, meaning);
}

int tt_launched(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_RANK"); /* Open MPI's, MPICH's */
}

void tt_appendf(char *buf, size_t n, const char *fmt, ...)
{
    size_t k = strlen(buf);
    if (k + 1 >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + k, n - k, fmt, ap);
    va_end(ap);
}

void *tt_grow(void *array, int n, int *cap, size_t size)
{
    if (n < *cap)
        return array;
    *cap = *cap ? 2 * *cap : 64;
    void *grown = tt_malloc((size_t)*cap * size);
    if (n)
        memcpy(grown, array, (size_t)n * size);
    free(array);
    return grown;
}

void *tt_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "tiny_transformer: host out of memory allocating %zu bytes\n", n);
        abort();
    }
    return p;
}

void *tt_calloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "tiny_transformer: host out of memory allocating %zu x %zu bytes\n",
                count, size);
        abort();
    }
    return p;
}

double tt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tt_cpu_usage(double out[TT_CPU_N])
{
    struct rusage u;
    memset(out, 0, TT_CPU_N * sizeof *out);
    if (getrusage(RUSAGE_SELF, &u) != 0)
        return;
    out[TT_CPU_USER] = (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec;
    out[TT_CPU_KERNEL] = (double)u.ru_stime.tv_sec + 1e-6 * (double)u.ru_stime.tv_usec;
    out[TT_CPU_WAITS] = (double)u.ru_nvcsw;
    out[TT_CPU_PREEMPTED] = (double)u.ru_nivcsw;
}

/* Table-driven CRC-32 with the reflected polynomial 0xEDB88320; the table is
 * built on first use (a race between threads would only rebuild it identically). */
uint32_t tt_crc32(uint32_t crc, const void *data, size_t n)
{
    static uint32_t table[256];
    static int ready;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t r = i;
            for (int b = 0; b < 8; b++)
                r = (r & 1u) ? (r >> 1) ^ 0xEDB88320u : r >> 1;
            table[i] = r;
        }
        ready = 1;
    }
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

int tt_open_regular(const char *path, const char **why)
{
    /* O_NONBLOCK: a plain open of a FIFO waits for a writer, for ever if
     * none comes, and every rank would wait there. On a regular file the
     * flag changes nothing; it is cleared anyway. */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        *why = strerror(errno);
        return -1;
    }
    struct stat st;
    int flags;
    if (fstat(fd, &st) != 0 || (flags = fcntl(fd, F_GETFL)) < 0 ||
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        *why = strerror(errno);
    else if (S_ISDIR(st.st_mode))
        *why = "it is a directory";
    else if (!S_ISREG(st.st_mode))
        *why = "not a regular file (a pipe or a device)";
    else
        return fd;
    close(fd);
    return -1;
}

FILE *tt_fopen_regular(const char *path, const char *mode, const char **why)
{
    int fd = tt_open_regular(path, why);
    FILE *f = fd >= 0 ? fdopen(fd, mode) : NULL;
    if (!f && fd >= 0) {
        *why = strerror(errno);
        close(fd);
    }
    return f;
}
