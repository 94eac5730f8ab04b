/* main.c - tiny_transformer: every MPI rank is one virtual GPU.
 *
 * The configuration is parsed and checked identically on every rank before
 * any work; rank 0 alone prints a usage error, and all ranks leave with the
 * same status, so a bad flag never hangs a peer waiting in a collective. */
#include "config.h"

#include <mpi.h>
#include <cblas.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tt/core/common.h"
#include "tt/app/flags.h"
#include "tt/comm/grid.h"
#include "tt/app/plan.h"
#include "tt/comm/comm.h"
#include "tt/comm/cores.h"
#include "tt/comm/doorbell.h"
#include "tt/comm/pair_reduce.h"
#include "tt/comm/watchdog.h"
#include "tt/comm/yield.h"
#include "tt/app/run.h"
#include "tt/train/checkpoint.h"
#include "tt/train/resume.h"

/* --resume: the checkpoint completes the config, and what it brought must
 * pass the flags' own ranges (a file is hostile until proven otherwise). */
static int resume_config(tt_run_config *rc, tt_err *e)
{
    tt_ckpt_info info;
    if (tt_resume_prepare(rc, &info, e))
        return -1;
    char source[300];
    snprintf(source, sizeof source, "checkpoint '%s'", rc->resume);
    if (tt_config_check_ranges(rc, source, e))
        return -1;
    return tt_checkpoint_check_depth(rc->resume, &info, e);
}

/* --resume auto: the --save file when it exists, else a fresh start, said
 * in one line (*said) by rank 0 once every rank has agreed. A file that is there but cannot be continued from is
 * refused and kept: starting over would replace it with a younger run's
 * checkpoint. 0 or an exit status. */
static int resume_auto(tt_run_config *rc, const char **said, tt_err *e)
{
    static char line[PATH_MAX + 96]; /* rank 0 prints it after the agreement */
    int found = tt_resume_auto(rc, e);
    if (found < 0)
        return rc->save ? TT_EXIT_RUNTIME : TT_EXIT_USAGE;
    if (found == 0) {
        snprintf(line, sizeof line, "no checkpoint '%s' yet: starting from step 0", rc->save);
        *said = line;
        return 0;
    }
    if (resume_config(rc, e)) {
        tt_err why = *e;
        tt_fail(e, "--resume auto: checkpoint '%s' exists but cannot be continued from (kept "
                   "as it is; move it away to start afresh): %s", rc->save, why.msg);
        return TT_EXIT_RUNTIME;
    }
    snprintf(line, sizeof line, "continuing from checkpoint '%s' at step %ld", rc->save,
             rc->resume_step);
    *said = line;
    return 0;
}

/* "./tiny_transformer --tp 2 ...": the options as typed (quoted where the
 * shell would need it), for the mpirun line a layout error suggests. NULL
 * when they do not fit: the message then names only the sizes. */
static const char *command_line(int argc, char **argv, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "./tiny_transformer");
    for (int i = 1; i < argc && k < n; i++) {
        int plain = argv[i][0] != 0 && strspn(argv[i], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLM"
                                                        "NOPQRSTUVWXYZ0123456789-_.,/=:+") ==
                                               strlen(argv[i]);
        if (!plain && strchr(argv[i], '\''))
            return NULL;
        k += (size_t)snprintf(buf + k, n - k, plain ? " %s" : " '%s'", argv[i]);
    }
    return k < n ? buf : NULL;
}

/* The layout rules' fits: what the run would check of a layout the sizes
 * not given are chosen to make. */
static int run_fits(const void *ctx, int tp, int pp, int dp)
{
    return tt_run_layout_check(ctx, tp, pp, dp, NULL) != 0;
}

/* 1 on every rank when all ranks resume from one file, or none resumes;
 * else 0 everywhere with the message in *e. Each rank read the checkpoint
 * itself: one path may name different files on different hosts, or the
 * file may be replaced between two ranks' reads. */
static int resume_same(const tt_run_config *rc, tt_err *e)
{
    if (tt_all_equal_world(rc->resume ? rc->resume_print : 0))
        return 1;
    tt_fail(e, "checkpoint '%s' is not the same file on every rank (its header or size "
               "differs, or some ranks found none): all ranks must resume from one checkpoint, "
               "on a filesystem they share (doc/multihost.md)", rc->resume ? rc->resume : rc->save);
    return 0;
}

/* What every rank of one job must be given alike: its command line, and
 * TT_MPI_YIELDS, which decides how the ranks' collectives are made (the
 * other TT_ settings act on each rank alone or are agreed where they are
 * read). Each rank parses its own, so an MPMD launch (`mpirun -np 1 prog A
 * : -np 1 prog B`) or a variable set on one host only could start ranks that
 * disagree on the steps, the layout or how a collective is made, and wait
 * for each other for ever. */
static const char *const job_env[] = {"TT_MPI_YIELDS"};
enum { JOB_ENV = sizeof job_env / sizeof *job_env };

/* The job as one text of words, each "<length>:<bytes>" (so no word can
 * pass for two): the command line's count, its words, then "NAME=value" or
 * "NAME unset" for each job_env variable (empty counts as unset, as the
 * setting reads it). */
static char *job_text(int argc, char **argv)
{
    const char *w[JOB_ENV];
    char envw[JOB_ENV][128];
    size_t n = 24;
    for (int i = 1; i < argc; i++)
        n += strlen(argv[i]) + 24;
    for (int v = 0; v < JOB_ENV; v++) {
        const char *x = getenv(job_env[v]);
        snprintf(envw[v], sizeof envw[v], x && *x ? "%s=%.100s" : "%s unset", job_env[v], x);
        w[v] = envw[v];
        n += strlen(w[v]) + 24;
    }
    char *t = tt_malloc(n), *o = t;
    o += sprintf(o, "%d;", argc - 1);
    for (int i = 1; i < argc; i++)
        o += sprintf(o, "%zu:%s", strlen(argv[i]), argv[i]);
    for (int v = 0; v < JOB_ENV; v++)
        o += sprintf(o, "%zu:%s", strlen(w[v]), w[v]);
    return t;
}

/* Word k of a job text (the command line's words first, then the
 * settings') and its length; NULL past the last. *args: the command line's
 * word count. */
static const char *job_word(const char *t, int k, int *len, int *args)
{
    char *p;
    *args = (int)strtol(t, &p, 10);
    for (p++; *p; k--) {
        const size_t l = strtoul(p, &p, 10);
        if (k == 0) {
            *len = (int)l;
            return p + 1;
        }
        p += 1 + l;
    }
    return NULL;
}

/* Word k of a job text (one that exists) as a quoted phrase, long words
 * shortened; a flag's value with the flag before it ("--steps 4"). */
static void job_phrase(const char *t, int k, char *out, size_t n)
{
    int len = 0, blen = 0, args;
    const char *w = job_word(t, k, &len, &args);
    const char *b = k > 0 && k < args ? job_word(t, k - 1, &blen, &args) : NULL;
    if (b && strncmp(w, "--", 2) != 0)
        snprintf(out, n, "'%.*s %.*s%s'", blen < 60 ? blen : 60, b, len < 60 ? len : 60, w,
                 len > 60 ? "..." : "");
    else
        snprintf(out, n, "'%.*s%s'", len < 100 ? len : 100, w, len > 100 ? "..." : "");
}

/* 0 when every rank was given rank 0's command line and job_env settings;
 * else the usage status on every rank, with a message naming the first
 * word this rank's job differs in (the lowest such rank's, everywhere). */
static int same_job(int argc, char **argv, int rank, tt_err *e)
{
    char *mine = job_text(argc, argv), *first = tt_bcast_text_world(mine);
    int status = 0;
    if (strcmp(first, mine) != 0) {
        int k = 0, la = 0, lb = 0, na, nb;
        for (;; k++) { /* ends: the texts differ */
            const char *a = job_word(mine, k, &la, &na), *b = job_word(first, k, &lb, &nb);
            /* (a word of one command line against a setting of the other) */
            if (!a || !b || la != lb || memcmp(a, b, (size_t)la) != 0 || (k < na) != (k < nb))
                break;
        }
        char a[240] = "nothing more", b[240] = "nothing more";
        if (k < na || k < nb) {
            if (k < na)
                job_phrase(mine, k, a, sizeof a);
            if (k < nb)
                job_phrase(first, k, b, sizeof b);
            tt_fail(e, "rank %d was given %s on its command line where rank 0 has %s: every "
                       "rank of a job must be given the same flags", rank, a, b);
        } else {
            job_phrase(mine, k, a, sizeof a);
            job_phrase(first, k, b, sizeof b);
            tt_fail(e, "rank %d has %s in its environment where rank 0 has %s: every rank of a "
                       "job must be given the same TT_MPI_YIELDS", rank, a, b);
        }
        status = TT_EXIT_USAGE;
    }
    free(first);
    free(mine);
    return tt_agree_error_world(status, e);
}

/* The number of processes the launcher started, from its variables (Open
 * MPI's mpirun; MPICH's Hydra and other PMI launchers such as Slurm's), with
 * this process's place among them and the launcher's name; 0 without one. */
static int launcher_size(int *place, const char **who)
{
    static const struct { const char *size, *rank, *who; } vars[] = {
        {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "Open MPI's mpirun"},
        {"PMI_SIZE", "PMI_RANK", "a PMI launcher (MPICH's mpirun, Slurm)"},
    };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *n = getenv(vars[i].size), *r = getenv(vars[i].rank);
        if (n && atoi(n) > 0) {
            *place = r ? atoi(r) : 0;
            *who = vars[i].who;
            return atoi(n);
        }
    }
    return 0;
}

/* The library's name and version from MPI_Get_library_version, on one
 * line: "Open MPI v4.1.4" as it is; MPICH's "MPICH Version:<tab>4.0.2" as
 * "MPICH 4.0.2". */
static void library_name(char *out, size_t size)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, ",\n")] = '\0';
    size_t k = 0;
    for (const char *c = lib; *c && k + 1 < size; c++) {
        if (strncmp(c, " Version:", 9) == 0)
            c += 8; /* the word; the blanks after it become one space */
        else if (*c == ' ' || *c == '\t' || *c == ':') {
            if (k > 0 && out[k - 1] != ' ')
                out[k++] = ' ';
        } else {
            out[k++] = *c;
        }
    }
    out[k] = '\0';
}

/* A launcher of one MPI starting a program built with another: each process
 * then starts MPI alone (a singleton) and would train as a whole 1-GPU job,
 * all of them writing the same files. Said by the launcher's first process
 * only (the others cannot tell each other); the others wait 3 s before they
 * exit 2, since Open MPI's mpirun ends the whole job at the first non-zero
 * exit, which could come before the first process has said why. 1 when it
 * refused. */
static int other_launcher(int world)
{
    int place = 0;
    const char *who = NULL;
    const int n = launcher_size(&place, &who);
    if (world != 1 || n <= 1)
        return 0;
    if (place == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        library_name(lib, sizeof lib);
        fprintf(stderr, "tiny_transformer: %s started %d processes, but MPI gives this one a "
                        "world of 1: the program was built with %s, and each process would "
                        "train alone. Launch it with the mpirun of the MPI it was built with, "
                        "%s (--help says which flags it needs)\n", who, n, lib, TT_MPIRUN);
        fflush(stderr);
    } else {
        sleep(3);
    }
    return 1;
}

/* --help and --version, answered before MPI starts: a singleton's MPI_Init
 * can take a minute on a loaded machine. Only without a launcher (under
 * mpirun rank 0 alone answers, and only MPI knows the rank; PMIX_RANK is
 * set before MPI_Init only by a launcher). The parse is the one below, so
 * "--steps --help" stays an error and "--help" after a bad flag too. 1 when
 * it answered. */
static int answer_without_mpi(int argc, char **argv)
{
    if (tt_launched() || getenv("PMIX_RANK"))
        return 0;
    tt_run_config rc;
    tt_err err;
    if (tt_config_parse(&rc, argc, argv, NULL, &err) != 1)
        return 0;
    tt_config_parse(&rc, argc, argv, stdout, &err);
    return 1;
}

/* A parsed and agreed configuration: its values checked, its layout chosen
 * from the world size, then the run (or the grid's map). The exit status. */
static int run_layout(tt_run_config *rc, int argc, char **argv, int rank, int world)
{
    tt_err err;
    int status = 0;
    /* The values on their own first, then the layout they allow: sizes
     * not given are chosen from the world size, and a layout that cannot
     * work is refused here, before any work. */
    int tp = rc->tp, pp = rc->pp, dp = rc->dp;
    char command[160];
    tt_layout_rules rules = {rc->model.NH, rc->model.L, rc->batch, rc->micro_batches,
                             rc->virtual_stages, command_line(argc, argv, command, sizeof command),
                             run_fits, rc};
    int bad_values = tt_config_check(rc, &err) != 0;
    /* The environment's settings too: each rank reads its own, and a value
     * one rank refuses is refused on every rank in that rank's words. */
    if (!bad_values && (tt_cores_slice_env(&err) < 0 || tt_cores_lend_env(&err) < 0 ||
                        tt_mpi_yields_env(&err) < 0 || tt_bell_env(&err) < 0))
        bad_values = 1;
    bad_values = tt_agree_error_world(bad_values, &err) != 0;
    if (bad_values || tt_grid_choose(world, &tp, &pp, &dp, &rules, &err)) {
        /* One of the values may be the checkpoint's (--batch 4 when
         * --micro-batches 3 was given): say where the others came from. */
        if (bad_values && rc->resume)
            tt_appendf(err.msg, sizeof err.msg, " (values not given on the command line "
                       "come from checkpoint '%s')", rc->resume);
        if (rank == 0)
            fprintf(stderr, "tiny_transformer: %s\n", err.msg);
        status = TT_EXIT_USAGE;
    } else {
        tt_grid grid;
        tt_grid_init(&grid, tp, pp, dp, MPI_COMM_WORLD);
        /* before the watchdog's thread, which inherits the core */
        tt_cores_place(&grid, !rc->pin_off);
        tt_watch_start(&grid, rc->watchdog);
        if (rc->show_grid) {
            /* The map alone: a picture of the layout, no training. */
            if (rank == 0) {
                tt_grid_print(&grid, stdout);
                tt_cores_print(&grid, stdout, 1);
            }
        } else {
            status = tt_run_main(rc, &grid);
        }
        tt_watch_stop();
        tt_cores_forget();
        tt_grid_free(&grid);
    }
    return status;
}

/* Everything between MPI's start and its end: the configuration parsed and
 * agreed, then the run, the plan or the grid's map. Returns the exit status,
 * the same on every rank. */
static int run_world(int argc, char **argv, int rank, int world)
{
    /* One BLAS thread per rank: each rank is one GPU sharing the CPU with the
     * others. OPENBLAS_NUM_THREADS set by the user still wins. */
    if (!getenv("OPENBLAS_NUM_THREADS"))
        openblas_set_num_threads(1);

    tt_run_config rc;
    tt_err err;
    int status = 0;
    int parsed = tt_config_parse(&rc, argc, argv, rank == 0 ? stdout : NULL, &err);
    /* Each rank parsed its own command line and opens its own checkpoint
     * (an MPMD launch, hosts with disks of their own): a refusal by any rank
     * is every rank's, said once, before anyone goes on to wait for the
     * others; so is a help answered. The command lines are compared before
     * any checkpoint is read. */
    status = tt_agree_error_world(parsed < 0 ? TT_EXIT_USAGE : 0, &err);
    if (status == 0)
        parsed = tt_agree_status_world(parsed);
    if (status == 0 && parsed == 0)
        status = same_job(argc, argv, rank, &err);
    const char *said = NULL; /* --resume auto's line, once every rank agrees */
    if (status == 0 && parsed == 0 && rc.resume) {
        if (strcmp(rc.resume, TT_RESUME_AUTO) == 0)
            status = resume_auto(&rc, &said, &err);
        else if (resume_config(&rc, &err))
            status = TT_EXIT_RUNTIME; /* a checkpoint that cannot be read or does not fit */
        status = tt_agree_error_world(status, &err);
    }
    if (status == 0 && parsed == 0 && !resume_same(&rc, &err))
        status = tt_agree_error_world(TT_EXIT_RUNTIME, &err);
    if (status == 0 && said && rank == 0)
        printf("--resume auto: %s\n", said);
    if (status != 0) {
        if (rank == 0)
            fprintf(stderr, "tiny_transformer: %s\n", err.msg);
    } else if (parsed == 0 && rc.plan) {
        /* The planner runs on one process: rank 0 plans, the others wait for
         * its status and leave with it (so mpirun reports one outcome). */
        if (rank == 0)
            status = tt_plan_main(&rc);
        status = tt_agree_status_world(status);
    } else if (parsed == 0) {
        status = run_layout(&rc, argc, argv, rank, world);
    }
    return status;
}

int main(int argc, char **argv)
{
    if (answer_without_mpi(argc, argv))
        return 0;
    /* A write past the file size limit (ulimit -f) fails with EFBIG, as on a
     * full disk, instead of killing this rank with SIGXFSZ: the log is then
     * told and the run trains on, and a save is refused by its room check. */
    signal(SIGXFSZ, SIG_IGN);
    /* The watchdog's helper thread never calls MPI: FUNNELED is enough. */
    int threads;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &threads);
    /* Waiting ranks sleep until their peer rings (tt/comm/doorbell.h). */
    tt_bell_init();
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    const int status = other_launcher(world) ? TT_EXIT_USAGE : run_world(argc, argv, rank, world);
    tt_pair_flush();
    tt_pair_host_free();
    tt_bell_finalize();
    MPI_Finalize();
    return status;
}
