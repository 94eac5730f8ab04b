/* test_checkpoint.c - unit tests of the safetensors checkpoints (Check).
 *
 * A small hand-built parameter table stands in for a model: a [7,4]
 * vocabulary-like tensor split by rows, a [4] bias and a [3,4] matrix split by
 * columns. Every stored element gets an arbitrary 32-bit pattern derived from
 * (tensor name, kind, global index), so a round trip can be checked bit for
 * bit and a slice can be checked against the global tensor it came from.
 * The rest feeds the reader damaged and hostile files and the writer failing
 * saves, and checks each is refused with a telling one-line message while the
 * good file on disk stays as it was. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tt/train/checkpoint.h"

#include "ckpt_values.h"
#include "check_run.h"

/* One directory for the whole run, made and removed by main() in the parent
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

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/test_XXXXXX", basedir);
    ck_assert_msg(mkdtemp(tmpdir) != NULL, "mkdtemp: %s", strerror(errno));
}

static void teardown(void)
{
    remove_tree(tmpdir);
}

static void in_tmp(char *out, size_t cap, const char *name)
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

static void build(tt_params *p, const layout *l)
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
static void check_filled(tt_params *p)
{
    char msg[256];
    ck_assert_msg(!filled_mismatch(p, msg, sizeof msg), "%s", msg);
}

static tt_ckpt_info sample_info(void)
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

static void save_whole(const char *path)
{
    tt_params p;
    tt_err e = {{0}};
    build(&p, &WHOLE);
    fill(&p, 0);
    tt_ckpt_info in = sample_info();
    ck_assert_msg(tt_checkpoint_save(path, &p, &in, &e) == 0, "save: %s", e.msg);
    tt_params_free(&p);
}

static unsigned char *slurp(const char *path, size_t *n)
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

static void spit(const char *path, const void *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "create %s: %s", path, strerror(errno));
    ck_assert(fwrite(buf, 1, n, f) == n);
    ck_assert(fclose(f) == 0);
}

static uint64_t header_len(const unsigned char *buf)
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
static unsigned char *saved_whole(char *path, size_t cap, const char *name, size_t *n,
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
static void expect_fail(int rc, const tt_err *e, const char *path, const char *word)
{
    ck_assert_msg(rc == -1, "expected failure (%s) but got %d", word, rc);
    ck_assert_msg(strchr(e->msg, '\n') == NULL, "message is not one line: %s", e->msg);
    ck_assert_msg(strstr(e->msg, path) != NULL, "message '%s' does not name '%s'", e->msg, path);
    ck_assert_msg(strstr(e->msg, word) != NULL, "message '%s' lacks '%s'", e->msg, word);
}

/* Both readers must refuse the file with `word` in the message. */
static void expect_unreadable(const char *path, const char *word)
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

static int count_tmp_files(void)
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
        {"", 0, "JSON"},
        {"{\"__metadata__\":{" FMT, 0, "JSON"},
        {"{\"__metadata__\":{" FMT "}} trailing", 0, "JSON"},
        {"[1,2,3]", 0, "not an object"},
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
        expect_unreadable(path, "JSON");
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
    expect_unreadable(path, "JSON");

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
    expect_unreadable(path, "JSON");
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
    expect_fail(tt_checkpoint_load(path, &p, &e), &e, path, "shape");
    ck_assert_msg(strstr(e.msg, "[3,4]") && strstr(e.msg, "[3,5]") &&
                      strstr(e.msg, "blocks.0.attn.proj.weight"), "%s", e.msg);
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
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_flipped_byte);
    tcase_add_test(tc, test_bad_headers);
    tcase_add_test(tc, test_bad_metadata);
    tcase_add_test(tc, test_shape_mismatch);
    tcase_add_test(tc, test_missing_tensor);
    tcase_add_test(tc, test_failed_save_keeps_old_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(basedir, sizeof basedir, "%s/tt_ckpt_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(basedir)) {
        fprintf(stderr, "test_checkpoint: mkdtemp %s: %s\n", basedir, strerror(errno));
        return EXIT_FAILURE;
    }
    int status = tt_check_run(checkpoint_suite());
    remove_tree(basedir);
    return status;
}
