/* tests/ckpt_check.h - what the checkpoint test programs (test_checkpoint.c,
 * test_checkpoint_bad.c) share: a scratch directory per test under one per
 * run, the small hand-built parameter table that stands in for a model (a
 * [7,4] vocabulary-like tensor split by rows, a [4] bias and a [3,4] matrix
 * split by columns, every element an arbitrary 32-bit pattern of
 * ckpt_values.h), whole-file reads and writes, and the checks that a call
 * failed with a telling one-line message. */
#ifndef TT_CKPT_CHECK_H
#define TT_CKPT_CHECK_H

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tt/train/checkpoint.h"

#include "ckpt_values.h"
#include "check_run.h"

/* The helpers are static inline, since each program uses only some of them;
 * remove_tree, which both use, is not (GCC, inlining it into its own
 * recursion, warns that the path may be cut short). */

/* One directory for the whole run, made and removed by ckpt_run() in the parent
 * process (in Check's fork mode a failing test never reaches its teardown),
 * and a fresh subdirectory of it for each test. */
static char basedir[4096];
static char tmpdir[4200];

/* Removes path and everything under it (no symbolic links are followed). */
static void remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *de;
            while ((de = readdir(d)) != NULL) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                    continue;
                char sub[8192];
                snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
                remove_tree(sub);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

static inline void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/test_XXXXXX", basedir);
    ck_assert_msg(mkdtemp(tmpdir) != NULL, "mkdtemp: %s", strerror(errno));
}

static inline void teardown(void)
{
    remove_tree(tmpdir);
}

static inline void in_tmp(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", tmpdir, name);
}

/* ---- the test table ------------------------------------------------------------ */

typedef struct {
    int vocab_off, vocab_local;   /* tok_emb.weight [7,4], split by rows */
    tt_split bias_split;          /* ln_f.bias [4]: whole, or rows like a q bias */
    int bias_off, bias_local;
    int mat_cols, mat_off, mat_local; /* blocks.0.attn.proj.weight [3,mat_cols], by columns */
} layout;

static const layout WHOLE = {0, 7, TT_SPLIT_NONE, 0, 4, 4, 0, 4};

static inline void build(tt_params *p, const layout *l)
{
    memset(p, 0, sizeof *p);
    tt_params_add(p, "tok_emb.weight", 2, 7, 4, TT_SPLIT_ROWS, l->vocab_off, l->vocab_local);
    tt_params_add(p, "ln_f.bias", 1, 4, 1, l->bias_split, l->bias_off, l->bias_local);
    tt_params_add(p, "blocks.0.attn.proj.weight", 2, 3, l->mat_cols, TT_SPLIT_COLS, l->mat_off,
                  l->mat_local);
    tt_params_alloc(p);
}


/* Asserts every shard holds exactly its slice of the global patterns and
 * zeros in its padding rows. */
static inline void check_filled(tt_params *p)
{
    char msg[256];
    ck_assert_msg(!filled_mismatch(p, msg, sizeof msg), "%s", msg);
}

static inline tt_ckpt_info sample_info(void)
{
    tt_ckpt_info in;
    memset(&in, 0, sizeof in);
    in.step = 123;
    in.run.model = (tt_config){.V = 7, .C = 4, .L = 1, .NH = 2, .T = 3};
    /* Values without a short decimal form: they must still come back exactly. */
    in.run.optim = (tt_optim_config){.lr = 3e-4, .lr_min = 1.0 / 3.0, .warmup = 10,
                                     .weight_decay = 0.1, .clip = 1.0, .beta1 = 0.9,
                                     .beta2 = 0.95, .eps = DBL_MIN};
    in.run.batch = 8;
    in.run.micro_batches = 2;
    in.run.steps = 1000;
    in.run.seed = UINT64_MAX - 5; /* above 2^63: must stay unsigned */
    in.run.eval_every = 50;
    in.tp = 2;
    in.pp = 3;
    in.dp = 1;
    return in;
}

static inline void save_whole(const char *path)
{
    tt_params p;
    tt_err e = {{0}};
    build(&p, &WHOLE);
    fill(&p, 0);
    tt_ckpt_info in = sample_info();
    ck_assert_msg(tt_checkpoint_save(path, &p, &in, &e) == 0, "save: %s", e.msg);
    tt_params_free(&p);
}

static inline unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)size + 1);
    ck_assert(buf != NULL);
    ck_assert(fread(buf, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    *n = (size_t)size;
    return buf;
}

static inline void spit(const char *path, const void *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "create %s: %s", path, strerror(errno));
    ck_assert(fwrite(buf, 1, n, f) == n);
    ck_assert(fclose(f) == 0);
}

static inline uint64_t header_len(const unsigned char *buf)
{
    uint64_t n = 0;
    for (int b = 7; b >= 0; b--)
        n = (n << 8) | buf[b];
    return n;
}

/* The whole model saved as `name` in the test's directory (its path in
 * path): the file's n bytes, the material the bad-file cases corrupt, and
 * where its data section starts (after the length and the header) in *data
 * unless data is NULL. */
static inline unsigned char *saved_whole(char *path, size_t cap, const char *name, size_t *n,
                                  size_t *data)
{
    in_tmp(path, cap, name);
    save_whole(path);
    unsigned char *buf = slurp(path, n);
    if (data)
        *data = 8 + (size_t)header_len(buf);
    return buf;
}

/* Asserts a failed call: -1, one line, names the file, contains `word`. */
static inline void expect_fail(int rc, const tt_err *e, const char *path, const char *word)
{
    ck_assert_msg(rc == -1, "expected failure (%s) but got %d", word, rc);
    ck_assert_msg(strchr(e->msg, '\n') == NULL, "message is not one line: %s", e->msg);
    ck_assert_msg(strstr(e->msg, path) != NULL, "message '%s' does not name '%s'", e->msg, path);
    ck_assert_msg(strstr(e->msg, word) != NULL, "message '%s' lacks '%s'", e->msg, word);
}

/* Both readers must refuse the file with `word` in the message. */
static inline void expect_unreadable(const char *path, const char *word)
{
    tt_params p;
    tt_ckpt_info info;
    tt_err e = {{0}};
    expect_fail(tt_checkpoint_read_info(path, &info, &e), &e, path, word);
    build(&p, &WHOLE);
    memset(&e, 0, sizeof e);
    expect_fail(tt_checkpoint_load(path, &p, &e), &e, path, word);
    tt_params_free(&p);
}

static inline int count_tmp_files(void)
{
    int n = 0;
    DIR *d = opendir(tmpdir);
    ck_assert(d != NULL);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += strstr(de->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

/* Runs the suite with the run's directory made and removed here, in the
 * parent process (in Check's fork mode a failing test never reaches its
 * teardown). */
static inline int ckpt_run(const char *prog, Suite *s)
{
    const char *base = getenv("TMPDIR");
    snprintf(basedir, sizeof basedir, "%s/tt_ckpt_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(basedir)) {
        fprintf(stderr, "%s: mkdtemp %s: %s\n", prog, basedir, strerror(errno));
        return EXIT_FAILURE;
    }
    int status = tt_check_run(s);
    remove_tree(basedir);
    return status;
}

#endif
