/* test_checkpoint_mpi_np4.c - the collective checkpoint writer on 4 ranks.
 *
 * Every element of the model (weights and both moments) gets a 32-bit pattern
 * that is a pure function of (global tensor name, global index, kind), so
 * every layout holds the same global values. For each layout (tp4, tp2 x dp2,
 * dp4, tp2 x pp2) the ranks save their shards with tt_checkpoint_save_sharded
 * and rank 0 saves the whole model with the serial tt_checkpoint_save: the two
 * files must be byte-identical. The file is then loaded into the shards of
 * another layout, which must read back exactly their slices. The vocabulary
 * (254) is not a multiple of tp 4, so the last TP rank holds padding rows:
 * they are filled with garbage and must never reach the file.
 *
 * Failing saves (missing directory, shards that overlap, a file-size limit
 * hit mid-save, a directory in the way) must fail on every rank with the same
 * message, leave no temporary behind and leave an existing file untouched.
 *
 * Checks do not leave a test early (Check's asserts would longjmp out on one
 * rank and leave the others waiting in a collective): they are recorded, and
 * each test ends by agreeing on them over all ranks. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tt/train/checkpoint.h"
#include "tt/comm/grid.h"
#include "tt/model/model.h"

#define TT_CHECK_MPI
#include "ckpt_values.h"
#include "check_run.h"

static int me;
static char dir[4096]; /* made by rank 0, shared by all */

/* V = 254 leaves tp 4 with two padding rows on its last rank. */
static const tt_config CFG = {.V = 254, .C = 16, .L = 2, .NH = 4, .T = 8};

typedef struct {
    int tp, pp, dp;
} layout;

static const layout LAYOUTS[] = {{4, 1, 1}, {2, 1, 2}, {1, 1, 4}, {2, 2, 1}};
#define NLAYOUTS ((int)(sizeof LAYOUTS / sizeof LAYOUTS[0]))

/* ---- failures recorded on this rank, agreed at the end of each test ---------- */

static int failures;
static char first_failure[1024];

static void expect(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void expect(int ok, const char *fmt, ...)
{
    if (ok)
        return;
    if (failures++ == 0) {
        int n = snprintf(first_failure, sizeof first_failure, "rank %d: ", me);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(first_failure + n, sizeof first_failure - (size_t)n, fmt, ap);
        va_end(ap);
    }
}

static void agree_and_finish(void)
{
    int total = failures;
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int mine = failures;
    failures = 0;
    ck_assert_msg(total == 0, "%d failed check(s); %s", total,
                  mine ? first_failure : "(on another rank)");
}

/* ---- the values ------------------------------------------------------------------ */


/* Every real element holds its pattern, every padding element zero. */
static void expect_filled(tt_params *p, const char *what)
{
    char msg[256];
    int bad = filled_mismatch(p, msg, sizeof msg);
    expect(!bad, "%s: %s", what, bad ? msg : "");
}

/* This rank's shard in layout l (the grid's rank formula, TP fastest). */
static tt_shard_spec spec_of(const layout *l)
{
    int tp_rank = me % l->tp, pp_rank = me / (l->tp * l->dp), per = CFG.L / l->pp;
    tt_shard_spec s = {.tp_rank = tp_rank, .tp_size = l->tp, .layer_begin = pp_rank * per,
                       .layer_end = (pp_rank + 1) * per, .first_stage = pp_rank == 0,
                       .last_stage = pp_rank == l->pp - 1};
    return s;
}

/* This rank's shard of layout l on its grid, every element holding its
 * pattern and the padding rows pad_bits. */
static void sharded_model(const layout *l, tt_grid *g, tt_model *m, uint32_t pad_bits)
{
    tt_grid_init(g, l->tp, l->pp, l->dp, MPI_COMM_WORLD);
    tt_shard_spec sh = spec_of(l);
    tt_model_init(m, &CFG, &sh, 0, 1);
    fill(&m->P, pad_bits);
}

static tt_ckpt_info info_for(const layout *l, long step)
{
    tt_ckpt_info in;
    memset(&in, 0, sizeof in);
    in.step = step;
    in.run.model = CFG;
    in.run.optim = (tt_optim_config){.lr = 3e-4, .lr_min = 1.0 / 3.0, .warmup = 10,
                                     .weight_decay = 0.1, .clip = 1.0, .beta1 = 0.9,
                                     .beta2 = 0.95, .eps = 1e-8};
    in.run.batch = 8;
    in.run.micro_batches = 2;
    in.run.steps = 100;
    in.run.seed = UINT64_MAX - 7;
    in.run.eval_every = 10;
    in.tp = l->tp;
    in.pp = l->pp;
    in.dp = l->dp;
    return in;
}

/* ---- files ------------------------------------------------------------------------ */

static void in_dir(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(size > 0 ? (size_t)size : 1);
    *n = fread(buf, 1, (size_t)size, f);
    fclose(f);
    return buf;
}

/* cmp(1) in C: -1 if identical, else the first differing byte (or the
 * shorter length). */
static long first_difference(const char *a, const char *b)
{
    size_t na, nb;
    unsigned char *x = slurp(a, &na), *y = slurp(b, &nb);
    long at = -1;
    if (!x || !y)
        at = 0;
    else
        for (size_t i = 0; i < (na > nb ? na : nb) && at < 0; i++)
            if (i >= na || i >= nb || x[i] != y[i])
                at = (long)i;
    free(x);
    free(y);
    return at;
}

/* Temporaries left in the directory (rank 0 looks; 0 elsewhere). */
static int count_tmp_files(void)
{
    if (me != 0)
        return 0;
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        n += strstr(de->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return n;
}

/* Every rank got -1 and the same message, which names the path and says
 * `why`. */
static void expect_same_failure(int rc, const tt_err *e, const char *path, const char *why)
{
    expect(rc == -1, "save of '%s' returned %d, expected -1", path, rc);
    char first[sizeof e->msg];
    memcpy(first, e->msg, sizeof first);
    MPI_Bcast(first, (int)sizeof first, MPI_CHAR, 0, MPI_COMM_WORLD);
    expect(strcmp(first, e->msg) == 0, "message differs from rank 0's:\n  %s\n  %s", e->msg,
           first);
    expect(strstr(e->msg, path) && strstr(e->msg, "cannot write checkpoint") &&
               strstr(e->msg, why),
           "message lacks the path or '%s': %s", why, e->msg);
    expect(!strchr(e->msg, '\n'), "message is not one line: %s", e->msg);
}

/* ---- tests ------------------------------------------------------------------------ */

START_TEST(identical_to_serial_and_loads_anywhere)
{
    for (int k = 0; k < NLAYOUTS; k++) {
        const layout *l = &LAYOUTS[k];
        tt_grid g;
        tt_model m;
        sharded_model(l, &g, &m, 0xDEADBEEFu); /* padding garbage must never reach the file */
        tt_ckpt_info in = info_for(l, 100 + k);
        char path[4200], serial[4200];
        snprintf(path, sizeof path, "%s/sharded_%d.safetensors", dir, k);
        snprintf(serial, sizeof serial, "%s/serial_%d.safetensors", dir, k);
        tt_err e = {{0}};
        int rc = tt_checkpoint_save_sharded(path, &g, &m.P, &in, &e);
        expect(rc == 0, "layout tp%d pp%d dp%d: %s", l->tp, l->pp, l->dp, e.msg);
        tt_model_free(&m);
        tt_grid_free(&g);

        /* Rank 0: the same values as one whole model, saved serially. */
        if (me == 0) {
            tt_shard_spec whole = tt_shard_whole(&CFG);
            tt_model_init(&m, &CFG, &whole, 0, 2);
            fill(&m.P, 0);
            rc = tt_checkpoint_save(serial, &m.P, &in, &e);
            expect(rc == 0, "serial save: %s", e.msg);
            tt_model_free(&m);
            long at = first_difference(path, serial);
            expect(at < 0, "layout tp%d pp%d dp%d: file differs from the serial one at byte %ld",
                   l->tp, l->pp, l->dp, at);
            expect(count_tmp_files() == 0, "a temporary file was left behind");
        }

        /* Every rank of the next layout reads exactly its slices (random
         * weights from a different seed first, so nothing passes by luck). */
        const layout *o = &LAYOUTS[(k + 1) % NLAYOUTS];
        tt_shard_spec sh = spec_of(o);
        tt_model_init(&m, &CFG, &sh, 0, 3);
        rc = tt_checkpoint_load(path, &m.P, &e);
        expect(rc == 0, "load into tp%d pp%d dp%d: %s", o->tp, o->pp, o->dp, e.msg);
        if (rc == 0) {
            char what[64];
            snprintf(what, sizeof what, "saved by layout %d, loaded by layout %d", k,
                     (k + 1) % NLAYOUTS);
            expect_filled(&m.P, what);
        }
        tt_model_free(&m);
        MPI_Barrier(MPI_COMM_WORLD); /* rank 0 compared before anyone moves on */
    }
    agree_and_finish();
}
END_TEST

START_TEST(missing_directory)
{
    const layout l = {2, 1, 2};
    tt_grid g;
    tt_model m;
    sharded_model(&l, &g, &m, 0);
    tt_ckpt_info in = info_for(&l, 1);
    char path[4200];
    in_dir(path, sizeof path, "no/such/dir/ck.safetensors");
    tt_err e = {{0}};
    int rc = tt_checkpoint_save_sharded(path, &g, &m.P, &in, &e);
    expect_same_failure(rc, &e, path, strerror(ENOENT));
    expect(count_tmp_files() == 0, "a temporary file was left behind");
    tt_model_free(&m);
    tt_grid_free(&g);
    agree_and_finish();
}
END_TEST

START_TEST(failed_save_keeps_old_file)
{
    const layout l = {2, 1, 2};
    tt_grid g;
    tt_model m;
    sharded_model(&l, &g, &m, 0);
    char path[4200];
    in_dir(path, sizeof path, "keep.safetensors");
    tt_err e = {{0}};
    tt_ckpt_info in = info_for(&l, 1);
    expect(tt_checkpoint_save_sharded(path, &g, &m.P, &in, &e) == 0, "first save: %s", e.msg);
    size_t n = 0;
    unsigned char *orig = me == 0 ? slurp(path, &n) : NULL;
    in.step = 2; /* any later save would change the file */

    /* 1. Both DP replicas claim to be the writer: every element would be
     *    written twice. Refused before anything is created. */
    tt_grid twice = g;
    twice.dp_rank = 0;
    int rc = tt_checkpoint_save_sharded(path, &twice, &m.P, &in, &e);
    expect_same_failure(rc, &e, path, "exactly 1");

    /* 2. A shard missing on one rank: its rows have no writer. */
    tt_params partial = m.P;
    if (me == 1)
        partial.n = 0;
    rc = tt_checkpoint_save_sharded(path, &g, &partial, &in, &e);
    expect_same_failure(rc, &e, path, "held by 0");

    /* 3. The disk "fills up" mid-save: a file-size limit far below the
     *    file's size (SIGXFSZ ignored so it is an error, not a death). */
    struct rlimit old, lim;
    expect(getrlimit(RLIMIT_FSIZE, &old) == 0, "getrlimit");
    lim = old;
    lim.rlim_cur = 16 * 1024;
    if (old.rlim_max != RLIM_INFINITY && old.rlim_max < lim.rlim_cur)
        lim.rlim_cur = old.rlim_max;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    expect(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit");
    rc = tt_checkpoint_save_sharded(path, &g, &m.P, &in, &e);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, old_handler);
    expect_same_failure(rc, &e, path, "the file size limit (ulimit -f)");
    expect(count_tmp_files() == 0, "a temporary file was left behind after the size limit");

    /* 4. A directory where the file should go: everything is written, the
     *    rename fails. */
    char adir[4200];
    in_dir(adir, sizeof adir, "adir");
    if (me == 0)
        expect(mkdir(adir, 0755) == 0, "mkdir: %s", strerror(errno));
    MPI_Barrier(MPI_COMM_WORLD);
    rc = tt_checkpoint_save_sharded(adir, &g, &m.P, &in, &e);
    expect_same_failure(rc, &e, adir, "it is now a directory, not a regular file");
    struct stat st;
    expect(stat(adir, &st) == 0 && S_ISDIR(st.st_mode), "the directory was replaced");
    expect(count_tmp_files() == 0, "a temporary file was left behind after the rename");

    if (me == 0) {
        size_t n2 = 0;
        unsigned char *now = slurp(path, &n2);
        expect(orig && now && n == n2 && memcmp(orig, now, n) == 0,
               "the existing file changed");
        free(now);
    }
    free(orig);
    tt_model_free(&m);
    tt_grid_free(&g);
    agree_and_finish();
}
END_TEST

/* Removes the flat test directory (and the one subdirectory made above). */
static void remove_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (unlink(p) != 0)
            rmdir(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int world;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (world != 4) {
        if (me == 0)
            fprintf(stderr, "run on 4 ranks\n");
        MPI_Finalize();
        return EXIT_FAILURE;
    }
    int made = 1;
    if (me == 0) {
        const char *base = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/tt_ckpt_mpi_XXXXXX", base && *base ? base : "/tmp");
        made = mkdtemp(dir) != NULL;
        if (!made)
            fprintf(stderr, "mkdtemp %s: %s\n", dir, strerror(errno));
    }
    MPI_Bcast(&made, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(dir, (int)sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (!made) {
        MPI_Finalize();
        return EXIT_FAILURE;
    }

    Suite *s = suite_create("checkpoint_mpi");
    TCase *tc = tcase_create("collective");
    tcase_add_test(tc, identical_to_serial_and_loads_anywhere);
    tcase_add_test(tc, missing_directory);
    tcase_add_test(tc, failed_save_keeps_old_file);
    suite_add_tcase(s, tc);
    int status = tt_check_run_mpi(s);
    if (me == 0)
        remove_dir();
    MPI_Finalize();
    return status;
}
