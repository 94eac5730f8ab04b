/* data.c - the corpus (a file's bytes or a generated text) and the sampler. */
#define _POSIX_C_SOURCE 200809L /* stat */
#include "tt/core/data.h"
#include "tt/core/params.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int tt_corpus_load(tt_corpus *c, const char *path, int T, uint64_t max_bytes, tt_err *e)
{
    memset(c, 0, sizeof *c);
    /* A FIFO, a device or a directory is refused before it is opened: a FIFO
     * would give its bytes to one rank only (opening it may even block), a
     * device may never end. Checked on the path, so nothing is opened. */
    struct stat st;
    if (stat(path, &st) != 0)
        return tt_fail(e, "cannot read data file '%s': %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return tt_fail(e, "data file '%s' is not a regular file (every rank reads it whole, "
                          "so a pipe or a device cannot be used)", path);
    /* Every rank holds the whole file: one that cannot fit is refused from
     * its size, before a byte is read (reading it would end in the OOM
     * killer's SIGKILL, on every rank of the host, with no message). */
    if (max_bytes && (uint64_t)st.st_size > max_bytes)
        return tt_fail(e, "data file '%s' has %.0f MiB, but this host has %.0f MiB of memory "
                          "per rank (every rank reads the whole file)", path,
                       (double)st.st_size / 1048576.0, (double)max_bytes / 1048576.0);
    FILE *f = fopen(path, "rb");
    if (!f)
        return tt_fail(e, "cannot read data file '%s': %s", path, strerror(errno));
    /* Its size and one byte, so reading to the end needs no reallocation
     * (the buffer still grows if the file does). */
    size_t cap = (size_t)st.st_size + 1, n = 0;
    if (cap < (size_t)1 << 16)
        cap = (size_t)1 << 16;
    unsigned char *buf = tt_malloc(cap);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return tt_fail(e, "data file '%s' does not fit in memory", path);
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return tt_fail(e, "cannot read data file '%s': read error", path);
    }
    /* The sampler needs one window of T+1 bytes inside the train split (the
     * first N - N/10 bytes) and eval one inside the eval split (the last
     * N/10): without it the eval would have nothing to measure. */
    size_t ntrain = n - n / 10, w = (size_t)T + 1;
    if (ntrain < w || n / 10 < w) {
        size_t need = 10 * w; /* the smallest N with N/10 >= w; then N - N/10 >= w too */
        free(buf);
        return tt_fail(e,
                       "data file '%s' has %zu bytes; with --seq %d it needs at least %zu "
                       "(its train split, the first 90%%, and its eval split, the last 10%%, "
                       "must each hold a window of %zu bytes)",
                       path, n, T, need, w);
    }
    c->bytes = buf;
    c->n = n;
    c->ntrain = ntrain;
    snprintf(c->source, sizeof c->source, "%s", path);
    return 0;
}

/* The generated corpus: sentences from a small grammar, so that a tiny model
 * first learns the spelling of a few dozen words, then which word may follow
 * which, and a student can watch the sample turn from noise into English. */
static const char *const subjects[] = {"the cat", "the dog", "a small bird", "the teacher",
                                       "my friend", "the old man", "a child", "the robot",
                                       "the farmer", "a student"};
static const char *const verbs[] = {"sees", "likes", "finds", "carries", "watches",
                                    "paints", "follows", "keeps"};
static const char *const objects[] = {"a red ball", "the blue box", "an apple", "the green hat",
                                      "a long letter", "the yellow boat", "a warm cup of tea",
                                      "the little fish"};
static const char *const places[] = {"in the garden", "at school", "near the river",
                                     "on the hill", "by the door", "under the tree"};
static const char *const times[] = {"today", "every morning", "at night", "after lunch"};

#define PICK(arr, u) (arr[(size_t)((u) * (double)(sizeof arr / sizeof arr[0]))])

void tt_corpus_generate(tt_corpus *c, size_t n, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    c->bytes = tt_malloc(n + 256);
    size_t len = 0;
    uint64_t k = 0;
    const uint64_t stream = 0x636F72707573ull; /* "corpus" */
    char sentence[256];
    while (len < n) {
        double u[6];
        for (int i = 0; i < 6; i++)
            u[i] = tt_hash_uniform(seed, stream, k++);
        int w;
        if (u[5] < 0.5)
            w = snprintf(sentence, sizeof sentence, "%s %s %s %s.", PICK(subjects, u[0]),
                         PICK(verbs, u[1]), PICK(objects, u[2]), PICK(places, u[3]));
        else
            w = snprintf(sentence, sizeof sentence, "%s %s %s %s.", PICK(times, u[4]),
                         PICK(subjects, u[0]), PICK(verbs, u[1]), PICK(objects, u[2]));
        sentence[0] = (char)(sentence[0] - 'a' + 'A');
        sentence[w++] = u[4] < 0.2 ? '\n' : ' ';
        size_t take = len + (size_t)w <= n ? (size_t)w : n - len;
        memcpy(c->bytes + len, sentence, take);
        len += take;
    }
    c->n = n;
    c->ntrain = n - n / 10;
    snprintf(c->source, sizeof c->source, "generated corpus (%zu bytes, seed %llu)", n,
             (unsigned long long)seed);
}

void tt_corpus_free(tt_corpus *c)
{
    free(c->bytes);
    memset(c, 0, sizeof *c);
}

size_t tt_sample_offset(const tt_corpus *c, long step, int B, int j, int T)
{
    unsigned long long pos = ((unsigned long long)step * (unsigned long long)B + (unsigned)j) *
                             (unsigned long long)T;
    return (size_t)(pos % (unsigned long long)(c->ntrain - (size_t)T));
}

static void window(const tt_corpus *c, size_t o, int T, int *inputs, int *targets)
{
    for (int t = 0; t < T; t++) {
        inputs[t] = c->bytes[o + (size_t)t];
        targets[t] = c->bytes[o + (size_t)t + 1];
    }
}

void tt_sample_batch(const tt_corpus *c, long step, int B, int j0, int count, int T,
                     int *inputs, int *targets)
{
    for (int i = 0; i < count; i++)
        window(c, tt_sample_offset(c, step, B, j0 + i, T), T, inputs + (size_t)i * T,
               targets + (size_t)i * T);
}

int tt_eval_windows(const tt_corpus *c, int T, int max_windows)
{
    size_t neval = c->n - c->ntrain;
    if (neval < (size_t)T + 1)
        return 0;
    size_t k = (neval - 1) / (size_t)T;
    return k < (size_t)max_windows ? (int)k : max_windows;
}

void tt_eval_batch(const tt_corpus *c, int k0, int count, int T, int *inputs, int *targets)
{
    for (int i = 0; i < count; i++)
        window(c, c->ntrain + (size_t)(k0 + i) * (size_t)T, T, inputs + (size_t)i * T,
               targets + (size_t)i * T);
}
