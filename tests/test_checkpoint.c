/* test_checkpoint.c - unit tests of the safetensors checkpoints (Check):
 * what a good file holds and what a failing save leaves.
 *
 * On the small hand-built table of ckpt_check.h, whose every stored element
 * is an arbitrary 32-bit pattern of (tensor name, kind, global index), a
 * round trip is checked bit for bit, a slice against the global tensor it
 * came from, and padding rows as neither stored nor loaded. A save that
 * fails (the disk full, a slice, a directory in the way, no directory) is
 * refused with a telling one-line message while the good file on disk stays
 * as it was. Damaged and hostile files: test_checkpoint_bad.c. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "ckpt_check.h"

/* ---- round trips ----------------------------------------------------------------- */

START_TEST(test_roundtrip)
{
    char path[8192];
    in_tmp(path, sizeof path, "ck.safetensors");
    tt_params a, b;
    tt_err e = {{0}};
    build(&a, &WHOLE);
    fill(&a, 0);
    tt_ckpt_info in = sample_info(), out;
    ck_assert_msg(tt_checkpoint_save(path, &a, &in, &e) == 0, "save: %s", e.msg);
    ck_assert_int_eq(count_tmp_files(), 0);

    size_t n;
    unsigned char *buf = slurp(path, &n);
    uint64_t hlen = header_len(buf);
    ck_assert((8 + hlen) % 8 == 0);
    /* 3 tensors of 28 + 4 + 12 floats, times w, m, v */
    ck_assert_uint_eq(n, 8 + hlen + 3 * 4 * (28 + 4 + 12));
    ck_assert(buf[8] == '{');
    /* Doubles in the fewest digits that read back the same: 0.1 and 0.95
     * as typed (%.17g wrote 0.10000000000000001), 1/3 in 16 (Python's repr). */
    buf[8 + hlen - 1] = '\0';
    ck_assert_msg(strstr((char *)buf + 8, "\"weight_decay\":\"0.1\"") &&
                      strstr((char *)buf + 8, "\"beta2\":\"0.95\"") &&
                      strstr((char *)buf + 8, "\"lr\":\"0.0003\"") &&
                      strstr((char *)buf + 8, "\"lr_min\":\"0.3333333333333333\""),
                  "header: %s", (char *)buf + 8);
    free(buf);

    memset(&out, 0xA5, sizeof out);
    ck_assert_msg(tt_checkpoint_read_info(path, &out, &e) == 0, "read_info: %s", e.msg);
    ck_assert_int_eq(out.step, in.step);
    ck_assert_int_eq(out.run.model.V, 7);
    ck_assert_int_eq(out.run.model.C, 4);
    ck_assert_int_eq(out.run.model.L, 1);
    ck_assert_int_eq(out.run.model.NH, 2);
    ck_assert_int_eq(out.run.model.T, 3);
    ck_assert_int_eq(out.run.batch, 8);
    ck_assert_int_eq(out.run.micro_batches, 2);
    ck_assert_int_eq(out.run.steps, 1000);
    ck_assert(out.run.seed == in.run.seed);
    ck_assert_int_eq(out.run.eval_every, 50);
    ck_assert_int_eq(out.run.optim.warmup, 10);
    /* exact equality of doubles is the point: %.17g round-trips */
    ck_assert(out.run.optim.lr == in.run.optim.lr);
    ck_assert(out.run.optim.lr_min == in.run.optim.lr_min);
    ck_assert(out.run.optim.weight_decay == in.run.optim.weight_decay);
    ck_assert(out.run.optim.clip == in.run.optim.clip);
    ck_assert(out.run.optim.beta1 == in.run.optim.beta1);
    ck_assert(out.run.optim.beta2 == in.run.optim.beta2);
    ck_assert(out.run.optim.eps == in.run.optim.eps);
    ck_assert_int_eq(out.tp, 2);
    ck_assert_int_eq(out.pp, 3);
    ck_assert_int_eq(out.dp, 1);

    build(&b, &WHOLE);
    ck_assert_msg(tt_checkpoint_load(path, &b, &e) == 0, "load: %s", e.msg);
    ck_assert_uint_eq(a.total, b.total);
    for (int i = 0; i < a.n; i++) {
        ck_assert(memcmp(a.t[i].w, b.t[i].w, a.t[i].numel * 4) == 0);
        ck_assert(memcmp(a.t[i].m, b.t[i].m, a.t[i].numel * 4) == 0);
        ck_assert(memcmp(a.t[i].v, b.t[i].v, a.t[i].numel * 4) == 0);
    }
    check_filled(&b);

    /* Saving over an existing checkpoint replaces it. */
    in.step = 124;
    ck_assert_msg(tt_checkpoint_save(path, &a, &in, &e) == 0, "resave: %s", e.msg);
    ck_assert(tt_checkpoint_read_info(path, &out, &e) == 0);
    ck_assert_int_eq(out.step, 124);
    ck_assert_int_eq(count_tmp_files(), 0);
    tt_params_free(&a);
    tt_params_free(&b);
}
END_TEST

/* Vocabulary padding rows are neither stored nor loaded: a table with one
 * padding row writes the same [7,4] tensor, and loading zeroes the padding. */
START_TEST(test_vocab_padding)
{
    char path[8192], plain[8192];
    in_tmp(path, sizeof path, "padded.safetensors");
    in_tmp(plain, sizeof plain, "plain.safetensors");
    layout padded = WHOLE;
    padded.vocab_local = 8;
    tt_params p;
    tt_err e = {{0}};
    tt_ckpt_info in = sample_info();
    build(&p, &padded);
    fill(&p, 0x7FC00001u); /* garbage in the padding row */
    ck_assert_msg(tt_checkpoint_save(path, &p, &in, &e) == 0, "save: %s", e.msg);
    save_whole(plain);
    size_t n1, n2;
    unsigned char *b1 = slurp(path, &n1), *b2 = slurp(plain, &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert(memcmp(b1, b2, n1) == 0); /* byte-identical to the unpadded table's file */
    free(b1);
    free(b2);

    ck_assert_msg(tt_checkpoint_load(path, &p, &e) == 0, "load: %s", e.msg);
    check_filled(&p); /* padding row back to zero */
    tt_params_free(&p);
}
END_TEST

/* Loading into shards: each gets exactly its slice of the global tensors. */
START_TEST(test_load_slices)
{
    char path[8192];
    in_tmp(path, sizeof path, "ck.safetensors");
    save_whole(path);
    const layout slices[] = {
        {2, 3, TT_SPLIT_ROWS, 1, 2, 4, 1, 2}, /* middle rows, 1-D rows, middle columns */
        {4, 4, TT_SPLIT_ROWS, 2, 2, 4, 2, 2}, /* last vocabulary shard with one padding row */
        {0, 4, TT_SPLIT_NONE, 0, 4, 4, 0, 1}, /* first column only */
        {6, 2, TT_SPLIT_ROWS, 3, 1, 4, 3, 1}, /* last row + padding, last element, last column */
    };
    for (size_t s = 0; s < sizeof slices / sizeof slices[0]; s++) {
        tt_params p;
        tt_err e = {{0}};
        build(&p, &slices[s]);
        fill(&p, 0xFFFFFFFFu); /* stale values everywhere, padding included */
        for (int kind = 0; kind < TT_NKINDS; kind++)
            for (size_t k = 0; k < p.total; k++)
                tt_params_buffer(&p, kind)[k] = -1.0f;
        ck_assert_msg(tt_checkpoint_load(path, &p, &e) == 0, "slice %zu: %s", s, e.msg);
        check_filled(&p);
        tt_params_free(&p);
    }
}
END_TEST

/* ---- failing saves ------------------------------------------------------------------ */

static void assert_same_file(const char *path, const unsigned char *want, size_t n)
{
    size_t got_n;
    unsigned char *got = slurp(path, &got_n);
    ck_assert_msg(got_n == n && memcmp(got, want, n) == 0, "'%s' was modified", path);
    free(got);
}

START_TEST(test_failed_save_keeps_old_file)
{
    char path[8192];
    size_t n;
    unsigned char *orig = saved_whole(path, sizeof path, "ck.safetensors", &n, NULL);
    tt_params p;
    tt_err e = {{0}};
    tt_ckpt_info in = sample_info();
    in.step = 999;

    /* 1. The disk "fills up" in the middle of the data: a file-size limit
     *    makes write() fail with EFBIG (SIGXFSZ ignored so it is an error). */
    layout big = WHOLE;
    big.mat_cols = big.mat_local = 4096; /* about 150 KB of data */
    build(&p, &big);
    fill(&p, 0);
    struct rlimit old, lim;
    ck_assert(getrlimit(RLIMIT_FSIZE, &old) == 0);
    lim = old;
    lim.rlim_cur = 64 * 1024;
    if (old.rlim_max != RLIM_INFINITY && old.rlim_max < lim.rlim_cur)
        lim.rlim_cur = old.rlim_max; /* a hard limit already lower: use it */
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    int rc = tt_checkpoint_save(path, &p, &in, &e);
    ck_assert(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, old_handler);
    expect_fail(rc, &e, path, "cannot write checkpoint");
    ck_assert_msg(strstr(e.msg, strerror(EFBIG)), "%s", e.msg);
    assert_same_file(path, orig, n);
    ck_assert_int_eq(count_tmp_files(), 0);
    tt_params_free(&p);

    /* 2. A table holding a slice, not whole tensors: refused up front. */
    layout slice = WHOLE;
    slice.vocab_off = 2;
    slice.vocab_local = 3;
    build(&p, &slice);
    expect_fail(tt_checkpoint_save(path, &p, &in, &e), &e, path, "slice");
    assert_same_file(path, orig, n);
    tt_params_free(&p);

    /* 3. The target is a directory: everything is written, the rename fails. */
    char dir[8192];
    in_tmp(dir, sizeof dir, "adir");
    ck_assert(mkdir(dir, 0755) == 0);
    build(&p, &WHOLE);
    expect_fail(tt_checkpoint_save(dir, &p, &in, &e), &e, dir, "cannot write checkpoint");
    struct stat st;
    ck_assert(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
    ck_assert_int_eq(count_tmp_files(), 0);

    /* 4. The directory does not exist. */
    char nodir[8192];
    in_tmp(nodir, sizeof nodir, "no/such/dir/ck.safetensors");
    expect_fail(tt_checkpoint_save(nodir, &p, &in, &e), &e, nodir, "No such file");
    tt_params_free(&p);

    assert_same_file(path, orig, n);
    ck_assert_int_eq(count_tmp_files(), 0);
    free(orig);
}
END_TEST

static Suite *checkpoint_suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("safetensors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_vocab_padding);
    tcase_add_test(tc, test_load_slices);
    tcase_add_test(tc, test_failed_save_keeps_old_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ckpt_run("test_checkpoint", checkpoint_suite());
}
