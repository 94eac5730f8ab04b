/* tt/core/data.h - the training corpus and the sampler of design.md section 5.
 *
 * The corpus is a byte string of N bytes; the last N/10 are the eval split and
 * the first Ntr = N - N/10 the train split. Global sample j of step s is the
 * window starting at byte ((s*B + j) * T) mod (Ntr - T): inputs the T bytes
 * from there, targets the T bytes one further. */
#ifndef TT_DATA_H
#define TT_DATA_H

#include <stddef.h>
#include <stdint.h>
#include "tt/core/common.h"

typedef struct {
    unsigned char *bytes;
    size_t n;      /* N */
    size_t ntrain; /* Ntr = N - N/10 */
    char source[256]; /* file name, or a description of the generated corpus */
} tt_corpus;

/* Reads a whole file. Fails (with a message naming the file) if it is not a
 * regular file (a FIFO or a device: not opened at all), is larger than
 * max_bytes (0: no bound; checked from its size, before reading), cannot be
 * read, or is too short for a train window and an eval window of T+1 bytes. */
int tt_corpus_load(tt_corpus *c, const char *path, int T, uint64_t max_bytes, tt_err *e);
/* Generates a deterministic English-like corpus of about n bytes from seed:
 * short sentences from a small grammar, on which a tiny model visibly learns. */
void tt_corpus_generate(tt_corpus *c, size_t n, uint64_t seed);
void tt_corpus_free(tt_corpus *c);

/* Byte offset of global sample j of step s (the sampler's formula). */
size_t tt_sample_offset(const tt_corpus *c, long step, int B, int j, int T);
/* Fills inputs/targets [count, T] with global samples j0 .. j0+count-1 of step s. */
void tt_sample_batch(const tt_corpus *c, long step, int B, int j0, int count, int T,
                     int *inputs, int *targets);

/* Number of eval windows: the non-overlapping windows of T+1 bytes of the eval
 * split (window k starts at Ntr + k*T), at most max_windows. */
int tt_eval_windows(const tt_corpus *c, int T, int max_windows);
void tt_eval_batch(const tt_corpus *c, int k0, int count, int T, int *inputs, int *targets);

#endif
