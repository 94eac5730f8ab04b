/* test_checkpoint_bad.c - unit tests of the safetensors reader on damaged
 * and hostile files (Check): missing, a directory, truncated anywhere, a
 * flipped byte in any tensor, malformed or absurd headers, metadata without
 * its keys or checksums, tensors of another shape and tensors missing. Each
 * is refused by both readers with a one-line message naming the file and
 * what is wrong, and a load refused from the header (a shape, a missing
 * tensor, a file replaced since its header was read) overwrites nothing; a checksum failure, found while copying, may
 * leave the table partly loaded, and the caller then stops. The good files they
 * start from are the small table of ckpt_check.h; round trips and failing
 * saves are in test_checkpoint.c. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_check.h"

/* ---- bad files ------------------------------------------------------------------- */

START_TEST(test_missing_file)
{
    char path[8192];
    in_tmp(path, sizeof path, "absent.safetensors");
    expect_unreadable(path, "No such file");
    /* a directory is not a checkpoint either */
    expect_unreadable(tmpdir, "directory");
}
END_TEST

START_TEST(test_truncated)
{
    char path[8192], cut[8192];
    size_t n, h;
    unsigned char *buf = saved_whole(path, sizeof path, "ck.safetensors", &n, &h);
    in_tmp(cut, sizeof cut, "cut.safetensors");
    const size_t lengths[] = {0, 1, 7, 8, 9, h / 2, h - 1, h, h + 1, h + 4 * 28, n / 2 + 3,
                              n - 4, n - 1};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        spit(cut, buf, lengths[i]);
        expect_unreadable(cut, "truncated");
    }
    free(buf);
}
END_TEST

START_TEST(test_flipped_byte)
{
    char path[8192], bad[8192];
    size_t n, data;
    unsigned char *buf = saved_whole(path, sizeof path, "ck.safetensors", &n, &data);
    in_tmp(bad, sizeof bad, "bad.safetensors");
    /* byte positions in the data section and the tensor each one belongs to */
    const struct {
        size_t at;
        const char *tensor;
    } cases[] = {
        {0, "tok_emb.weight"},
        {4 * 28 + 1, "ln_f.bias"},
        {4 * 44 + 4 * 28 + 4 * 4 + 5, "optim.m.blocks.0.attn.proj.weight"},
        {4 * 44 * 3 - 1, "optim.v.blocks.0.attn.proj.weight"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        buf[data + cases[i].at] ^= 0x10;
        spit(bad, buf, n);
        buf[data + cases[i].at] ^= 0x10;
        tt_params p;
        tt_err e = {{0}};
        tt_ckpt_info info;
        build(&p, &WHOLE);
        char want[160];
        snprintf(want, sizeof want, "checksum mismatch in tensor '%s'", cases[i].tensor);
        expect_fail(tt_checkpoint_load(bad, &p, &e), &e, bad, want);
        tt_params_free(&p);
        /* the header is intact: the metadata is still readable */
        ck_assert_msg(tt_checkpoint_read_info(bad, &info, &e) == 0, "%s", e.msg);
    }
    free(buf);
}
END_TEST

/* A file with the given header text (length field computed) and `data` zero
 * bytes after it. */
static void write_raw(const char *path, const char *header, size_t data)
{
    size_t h = strlen(header);
    unsigned char *buf = calloc(8 + h + data + 1, 1);
    ck_assert(buf != NULL);
    for (int b = 0; b < 8; b++)
        buf[b] = (unsigned char)((uint64_t)h >> (8 * b));
    memcpy(buf + 8, header, h);
    spit(path, buf, 8 + h + data);
    free(buf);
}

#define FMT "\"format\":\"tiny_transformer/1\""

START_TEST(test_bad_headers)
{
    char path[8192];
    in_tmp(path, sizeof path, "hostile.safetensors");
    const struct {
        const char *header;
        size_t data;
        const char *word;
    } cases[] = {
        {"", 0, "not valid JSON"},
        {"{\"__metadata__\":{" FMT, 0, "not valid JSON"},
        {"{\"__metadata__\":{" FMT "}} trailing", 0, "not valid JSON"},
        {"[1,2,3]", 0, "not an object"},
        /* a key twice: readers differ on which one counts */
        {"{\"__metadata__\":{" FMT ",\"format\":\"tiny_transformer/1\"}}", 0,
         "key \"format\" appears twice"},
        {"{\"__metadata__\":{" FMT "},\"t\":{\"dtype\":\"F32\",\"shape\":[2],"
         "\"data_offsets\":[0,8]},\"t\":{\"dtype\":\"F32\",\"shape\":[2],"
         "\"data_offsets\":[8,16]}}", 16, "key \"t\" appears twice"},
        {"\"just a string\"", 0, "not an object"},
        {"{}", 0, "__metadata__"},
        {"{\"__metadata__\":[]}", 0, "__metadata__"},
        {"{\"__metadata__\":{\"format\":\"other/9\"}}", 0, "format"},
        {"{\"__metadata__\":{\"step\":\"1\"}}", 0, "format"},
        {"{\"__metadata__\":{" FMT ",\"step\":5}}", 0, "not a string"},
        {"{\"__metadata__\":{" FMT "},\"t\":{\"dtype\":\"F16\",\"shape\":[2],"
         "\"data_offsets\":[0,4]}}", 4, "dtype"},
        {"{\"__metadata__\":{" FMT "},\"t\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype"},
        {"{\"__metadata__\":{" FMT "},\"t\":{\"dtype\":\"F32\",\"shape\":[-2],"
         "\"data_offsets\":[0,8]}}", 8, "shape"},
        {"{\"__metadata__\":{" FMT "},\"t\":{\"dtype\":\"F32\",\"shape\":[1.5],"
         "\"data_offsets\":[0,8]}}", 8, "shape"},
        {"{\"__metadata__\":{" FMT "},\"t\":{\"dtype\":\"F32\",\"shape\":\"2\","
         "\"data_offsets\":[0,8]}}", 8, "shape"},
        {"{\"__metadata__\":{" FMT "},\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
         "\"data_offsets\":[0,4]}}", 8, "shape"},
        {"{\"__metadata__\":{" FMT "},\"t\":{\"dtype\":\"F32\",\"shape\":[2147483647,"
         "2147483647,2147483647],\"data_offsets\":[0,8]}}", 8, "shape"},
        {"{\"__metadata__\":{" FMT "},\"t\":{\"dtype\":\"F32\",\"shape\":[2],"
         "\"data_offsets\":[8,0]}}", 8, "data_offsets"},
        {"{\"__metadata__\":{" FMT "},\"t\":{\"dtype\":\"F32\",\"shape\":[2],"
         "\"data_offsets\":[0]}}", 8, "data_offsets"},
        {"{\"__metadata__\":{" FMT "},\"t\":{\"dtype\":\"F32\",\"shape\":[2],"
         "\"data_offsets\":[0,12]}}", 12, "data_offsets"},
        {"{\"__metadata__\":{" FMT "},\"t\":{\"dtype\":\"F32\",\"shape\":[2],"
         "\"data_offsets\":[0,1e300]}}", 8, "data_offsets"},
        {"{\"__metadata__\":{" FMT "},\"t\":{\"dtype\":\"F32\",\"shape\":[2],"
         "\"data_offsets\":[4,12]}}", 8, "truncated"},
        {"{\"__metadata__\":{" FMT "},\"t\":[1]}", 0, "not a tensor"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_raw(path, cases[i].header, cases[i].data);
        expect_unreadable(path, cases[i].word);
    }

    /* Padding must be spaces: NUL bytes after the JSON are not a header. */
    {
        const char *h = "{\"__metadata__\":{" FMT "}}";
        size_t len = strlen(h) + 4;
        unsigned char nul[256] = {0};
        nul[0] = (unsigned char)len;
        memcpy(nul + 8, h, strlen(h));
        spit(path, nul, 8 + len);
        expect_unreadable(path, "not valid JSON");
    }

    /* Nesting far beyond what a header needs must be refused, not recursed. */
    enum { DEPTH = 100000 };
    char *deep = malloc(2 * DEPTH + 1);
    ck_assert(deep != NULL);
    memset(deep, '[', DEPTH);
    memset(deep + DEPTH, ']', DEPTH);
    deep[2 * DEPTH] = '\0';
    write_raw(path, deep, 0);
    free(deep);
    expect_unreadable(path, "not valid JSON");

    /* Header lengths that do not fit the file, or are absurd. */
    unsigned char buf[16] = {0};
    memset(buf, 0xFF, 8);
    spit(path, buf, 16);
    expect_unreadable(path, "absurd");
    memset(buf, 0, 8);
    buf[0] = 200;
    spit(path, buf, 16);
    expect_unreadable(path, "truncated");

    /* One corrupted character in a real header. */
    char good[8192];
    size_t n;
    unsigned char *file = saved_whole(good, sizeof good, "ck.safetensors", &n, NULL);
    unsigned char *colon = memchr(file + 8, ':', (size_t)header_len(file));
    ck_assert(colon != NULL);
    *colon = ';';
    spit(path, file, n);
    free(file);
    expect_unreadable(path, "not valid JSON");
}
END_TEST

START_TEST(test_bad_metadata)
{
    char path[8192];
    in_tmp(path, sizeof path, "meta.safetensors");
    tt_ckpt_info info;
    tt_err e = {{0}};
    /* right format, but the keys read_info needs are missing or malformed */
    write_raw(path, "{\"__metadata__\":{" FMT "}}", 0);
    expect_fail(tt_checkpoint_read_info(path, &info, &e), &e, path, "'step'");
    write_raw(path, "{\"__metadata__\":{" FMT ",\"step\":\"12x\"}}", 0);
    expect_fail(tt_checkpoint_read_info(path, &info, &e), &e, path, "'step'");
    write_raw(path, "{\"__metadata__\":{" FMT ",\"step\":\"-1\"}}", 0);
    expect_fail(tt_checkpoint_read_info(path, &info, &e), &e, path, "'step'");

    /* well-formed tensors whose checksums are absent or malformed are not trusted */
    tt_params p;
    memset(&p, 0, sizeof p);
    tt_params_add(&p, "tok_emb.weight", 2, 7, 4, TT_SPLIT_ROWS, 0, 7);
    tt_params_alloc(&p);
#define ENTRY(name, b, e) "\"" name "\":{\"dtype\":\"F32\",\"shape\":[7,4],\"data_offsets\":[" \
        #b "," #e "]}"
#define TENSORS ENTRY("tok_emb.weight", 0, 112) "," ENTRY("optim.m.tok_emb.weight", 112, 224) \
        "," ENTRY("optim.v.tok_emb.weight", 224, 336)
    write_raw(path, "{\"__metadata__\":{" FMT "}," TENSORS "}", 336);
    expect_fail(tt_checkpoint_load(path, &p, &e), &e, path, "'crc32.tok_emb.weight'");
    /* a checksum that is not 8 hex digits */
    write_raw(path, "{\"__metadata__\":{" FMT ",\"crc32.tok_emb.weight\":\"0x2a\"}," TENSORS "}",
              336);
    expect_fail(tt_checkpoint_load(path, &p, &e), &e, path, "'crc32.tok_emb.weight'");
    /* m and v absent: refused before anything is read */
    write_raw(path, "{\"__metadata__\":{" FMT "}," ENTRY("tok_emb.weight", 0, 112) "}", 112);
    expect_fail(tt_checkpoint_load(path, &p, &e), &e, path, "missing");
    ck_assert_msg(strstr(e.msg, "'optim.m.tok_emb.weight'"), "%s", e.msg);
#undef TENSORS
#undef ENTRY
    tt_params_free(&p);
}
END_TEST

START_TEST(test_shape_mismatch)
{
    char path[8192];
    in_tmp(path, sizeof path, "ck.safetensors");
    save_whole(path);
    tt_params p;
    tt_err e = {{0}};
    layout wide = WHOLE;
    wide.mat_cols = wide.mat_local = 5;
    build(&p, &wide);
    for (int kind = 0; kind < TT_NKINDS; kind++)
        for (size_t k = 0; k < p.total; k++)
            tt_params_buffer(&p, kind)[k] = 42.0f;
    expect_fail(tt_checkpoint_load(path, &p, &e), &e, path, "shape");
    ck_assert_msg(strstr(e.msg, "[3,4]") && strstr(e.msg, "[3,5]") &&
                      strstr(e.msg, "blocks.0.attn.proj.weight"), "%s", e.msg);
    /* refused from the header: nothing was overwritten */
    for (int kind = 0; kind < TT_NKINDS; kind++)
        for (size_t k = 0; k < p.total; k++)
            ck_assert(tt_params_buffer(&p, kind)[k] == 42.0f);
    tt_params_free(&p);

    /* same elements, different rank: [4] stored, [4,1] wanted */
    memset(&p, 0, sizeof p);
    tt_params_add(&p, "ln_f.bias", 2, 4, 1, TT_SPLIT_NONE, 0, 0);
    tt_params_alloc(&p);
    expect_fail(tt_checkpoint_load(path, &p, &e), &e, path, "shape");
    ck_assert_msg(strstr(e.msg, "[4]") && strstr(e.msg, "[4,1]"), "%s", e.msg);
    tt_params_free(&p);
}
END_TEST

START_TEST(test_missing_tensor)
{
    char path[8192];
    in_tmp(path, sizeof path, "ck.safetensors");
    save_whole(path);
    tt_params p;
    tt_err e = {{0}};
    memset(&p, 0, sizeof p);
    tt_params_add(&p, "tok_emb.weight", 2, 7, 4, TT_SPLIT_ROWS, 0, 7);
    tt_params_add(&p, "blocks.1.mlp.fc1.weight", 2, 16, 4, TT_SPLIT_ROWS, 0, 16);
    tt_params_alloc(&p);
    for (int kind = 0; kind < TT_NKINDS; kind++)
        for (size_t k = 0; k < p.total; k++)
            tt_params_buffer(&p, kind)[k] = 42.0f;
    expect_fail(tt_checkpoint_load(path, &p, &e), &e, path, "missing");
    ck_assert_msg(strstr(e.msg, "'blocks.1.mlp.fc1.weight'"), "%s", e.msg);
    /* refused from the header alone: nothing was overwritten */
    for (int kind = 0; kind < TT_NKINDS; kind++)
        for (size_t k = 0; k < p.total; k++)
            ck_assert(tt_params_buffer(&p, kind)[k] == 42.0f);
    tt_params_free(&p);
}
END_TEST

/* A run reads the header at start-up and loads later: a file put under the
 * name in between (another job's save) is refused whole, and the file it
 * read is still loaded. */
START_TEST(test_replaced_after_header)
{
    char path[8192];
    in_tmp(path, sizeof path, "ck.safetensors");
    save_whole(path);
    tt_ckpt_info first, second;
    tt_err e = {{0}};
    ck_assert_msg(tt_checkpoint_read_info(path, &first, &e) == 0, "%s", e.msg);
    /* the same tensors, one step on */
    tt_params p;
    build(&p, &WHOLE);
    fill(&p, 0);
    tt_ckpt_info in = sample_info();
    in.step++;
    ck_assert_msg(tt_checkpoint_save(path, &p, &in, &e) == 0, "save: %s", e.msg);
    ck_assert_msg(tt_checkpoint_read_info(path, &second, &e) == 0, "%s", e.msg);
    ck_assert(second.fingerprint != first.fingerprint);
    for (int kind = 0; kind < TT_NKINDS; kind++)
        for (size_t k = 0; k < p.total; k++)
            tt_params_buffer(&p, kind)[k] = 42.0f;
    expect_fail(tt_checkpoint_load_same(path, first.fingerprint, &p, &e), &e, path,
                "changed after this run read its header");
    for (int kind = 0; kind < TT_NKINDS; kind++)
        for (size_t k = 0; k < p.total; k++)
            ck_assert(tt_params_buffer(&p, kind)[k] == 42.0f);
    ck_assert_msg(tt_checkpoint_load_same(path, second.fingerprint, &p, &e) == 0, "%s", e.msg);
    check_filled(&p);
    tt_params_free(&p);
}
END_TEST

static Suite *checkpoint_bad_suite(void)
{
    Suite *s = suite_create("checkpoint_bad");
    TCase *tc = tcase_create("safetensors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_flipped_byte);
    tcase_add_test(tc, test_bad_headers);
    tcase_add_test(tc, test_bad_metadata);
    tcase_add_test(tc, test_shape_mismatch);
    tcase_add_test(tc, test_replaced_after_header);
    tcase_add_test(tc, test_missing_tensor);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ckpt_run("test_checkpoint_bad", checkpoint_bad_suite());
}
