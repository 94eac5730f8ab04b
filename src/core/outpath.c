/* outpath.c - the checks on output paths before a run (see tt/core/outpath.h
 * for what is refused and why); writing under a temporary name and the
 * guarded rename after it are core/replace.c's.
 *
 * A check before the run cannot rule out a path changing during it (another
 * process may create a FIFO or a directory there); the rename re-checks right
 * before acting, which narrows that window to the two calls. */
#define _XOPEN_SOURCE 700

#include "tt/core/outpath.h"
#include "tt/core/cluster.h"
#include "tt/core/config.h"
#include "core/paths.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ".tmp." and the decimal digits of any pid: what a temporary adds. */
#define TMP_SUFFIX_MAX 25

/* What a non-regular file is, for the message. */
const char *tt_path_kind(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISCHR(m) || S_ISBLK(m))
        return "a device";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISSOCK(m))
        return "a socket";
    return "not a regular file";
}

/* The directory part of path ("." when there is none); malloc'd. */
char *tt_path_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = tt_malloc(n + 1);
    memcpy(d, path, n);
    d[n] = '\0';
    return d;
}

/* "--save: cannot write checkpoint 'PATH': WHY", the one line every refusal
 * prints. */
static int refuse(const tt_path_use *u, tt_err *e, const char *why)
{
    size_t n = strlen(u->path);
    if (n <= 240)
        return tt_fail(e, "%s: cannot write %s '%s': %s", u->flag, u->what, u->path, why);
    /* A name too long for the message: its start and its end, so the why fits. */
    return tt_fail(e, "%s: cannot write %s '%.100s...%s': %s", u->flag, u->what, u->path,
                   u->path + n - 40, why);
}

/* The name and its temporary's fit the system's limits: the whole name
 * within PATH_MAX, every component within NAME_MAX. */
static int check_name(const tt_path_use *u, tt_err *e)
{
    const char *p = u->path;
    size_t len = strlen(p);
    char why[128];
    if (len == 0)
        return refuse(u, e, "the name is empty");
    if (p[len - 1] == '/')
        return refuse(u, e, "names a directory, not a file");
    if (len + TMP_SUFFIX_MAX >= PATH_MAX) {
        snprintf(why, sizeof why, "the name is too long (%zu characters; at most %d)", len,
                 PATH_MAX - 1 - TMP_SUFFIX_MAX);
        return refuse(u, e, why);
    }
    const char *base = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
    for (const char *c = p; *c;) {
        size_t n = strcspn(c, "/");
        /* The file's own name also carries the temporary's suffix. */
        size_t room = c == base ? NAME_MAX - TMP_SUFFIX_MAX : NAME_MAX;
        if (n > room) {
            snprintf(why, sizeof why, "a part of the name is too long (%zu characters; at "
                     "most %zu)", n, room);
            return refuse(u, e, why);
        }
        c += n + (c[n] == '/');
    }
    return 0;
}

/* Absent, or a regular file this user may write; a symbolic link is refused
 * whatever it points to (a rename would replace the link itself, an in-place
 * write would follow it: neither is what the name promises). */
static int check_target(const tt_path_use *u, tt_err *e)
{
    struct stat st;
    char why[128];
    if (lstat(u->path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(why, sizeof why, "cannot check it: %s", strerror(errno));
        return refuse(u, e, why);
    }
    if (S_ISLNK(st.st_mode))
        return refuse(u, e, "is a symbolic link (name the file itself)");
    if (S_ISDIR(st.st_mode))
        return refuse(u, e, strerror(EISDIR));
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, sizeof why, "is %s, not a regular file", tt_path_kind(st.st_mode));
        return refuse(u, e, why);
    }
    /* The rename that replaces an output needs only the directory, so it
     * would ignore a file's own protection: one nobody may write (chmod a-w,
     * kept on purpose; root too is held to it, as rm asks root before
     * removing such a file) or one this user may not write (someone else's). */
    if (!(st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)))
        return refuse(u, e, "is write-protected (no write permission: chmod u+w it to let "
                            "the run replace it)");
    if (access(u->path, W_OK) != 0) {
        snprintf(why, sizeof why, "cannot replace it: %s", strerror(errno));
        return refuse(u, e, why);
    }
    return 0;
}

/* The temporary is created in the same directory. */
static int check_dir(const tt_path_use *u, tt_err *e)
{
    char *d = tt_path_dir(u->path);
    char why[160];
    struct stat st;
    why[0] = '\0';
    if (stat(d, &st) != 0)
        snprintf(why, sizeof why, "directory '%.80s' %s", d,
                 errno == ENOENT ? "does not exist" : strerror(errno));
    else if (!S_ISDIR(st.st_mode))
        snprintf(why, sizeof why, "'%.80s' is not a directory", d);
    else if (access(d, W_OK | X_OK) != 0)
        snprintf(why, sizeof why, "directory '%.80s' is not writable: %s", d, strerror(errno));
    free(d);
    return why[0] ? refuse(u, e, why) : 0;
}

/* The absolute name with links resolved: realpath of the file, or of its
 * directory for a file not yet there; the name as given if neither resolves
 * (an input that does not exist: its reader reports it). malloc'd. */
static char *resolved(const char *path)
{
    char *r = realpath(path, NULL);
    if (r)
        return r;
    char *d = tt_path_dir(path), *rd = realpath(d, NULL);
    free(d);
    if (!rd)
        return strdup(path);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t n = strlen(rd) + strlen(base) + 2;
    r = tt_malloc(n);
    snprintf(r, n, "%s/%s", strcmp(rd, "/") ? rd : "", base);
    free(rd);
    return r;
}

/* One file under two names: the same inode (hard links, links followed), or
 * the same resolved name (a file neither has created yet). */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char *ra = resolved(a), *rb = resolved(b);
    int same = strcmp(ra, rb) == 0;
    free(ra);
    free(rb);
    return same;
}

/* The collective writer's bound (TT_MPIIO_PATH_MAX), on the absolute name. */
static int check_mpiio(const tt_path_use *u, tt_err *e)
{
    size_t len = strlen(u->path);
    if (u->path[0] != '/') {
        char *cwd = getcwd(NULL, 0);
        len += cwd ? strlen(cwd) + 1 : 0;
        free(cwd);
    }
    if (len > TT_MPIIO_PATH_MAX) {
        char why[160];
        snprintf(why, sizeof why, "the name is %zu characters as an absolute path; MPI-IO "
                 "(Open MPI) cannot open names that long, at most %d", len, TT_MPIIO_PATH_MAX);
        return refuse(u, e, why);
    }
    return 0;
}

/* What the file at path begins like, from its first bytes (read once): a
 * safetensors file (an 8-byte little-endian header length, then the JSON
 * header's '{'), a --log CSV (its header's first two columns, which every
 * log has and --plot reads), or neither. */
enum { OTHER_FILE, CHECKPOINT_FILE, LOG_FILE };
static int file_kind(const char *path)
{
    static const char log_head[] = "step,loss,";
    unsigned char b[sizeof log_head - 1]; /* 10 bytes: room for either head */
    FILE *f = fopen(path, "rb");
    if (!f)
        return OTHER_FILE;
    size_t got = fread(b, 1, sizeof b, f);
    fclose(f);
    if (got == sizeof b && memcmp(b, log_head, sizeof b) == 0)
        return LOG_FILE;
    if (got < 9 || b[8] != '{')
        return OTHER_FILE;
    unsigned long long len = 0;
    for (int i = 7; i >= 0; i--)
        len = len << 8 | b[i];
    return len >= 2 && len <= 100ULL * 1024 * 1024 ? CHECKPOINT_FILE : OTHER_FILE;
}

/* A log, trace, timeline or plot never replaces a checkpoint: that is a
 * run's training, and a mistyped name must not cost it. Nor does a trace,
 * timeline or plot replace a training log (--plot a.csv b.csv, the chart's
 * name forgotten, turned log a.csv into a chart); --log itself rewrites an
 * earlier run's log, as a rerun should. The other way round too: --save
 * replaces only a checkpoint (or an empty file), never a text, a log or a
 * trace that a mistyped name points at. */
static int check_not_precious(const tt_path_use *u, tt_err *e)
{
    struct stat st;
    if (stat(u->path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    const int kind = file_kind(u->path), ckpt = kind == CHECKPOINT_FILE;
    if (u->mpiio && !ckpt && st.st_size > 0)
        return refuse(u, e, "it exists and is not a checkpoint (no safetensors header): "
                            "choose another name, or remove it first");
    if (!u->mpiio && strcmp(u->flag, "--log") != 0 && kind == LOG_FILE)
        return refuse(u, e, strcmp(u->flag, "--plot") == 0
                                ? "it is a training log (a --log CSV); the chart's name comes "
                                  "first: --plot OUT.svg a.csv b.csv"
                                : "it is a training log (a --log CSV); choose another name");
    if (u->mpiio || !ckpt)
        return 0;
    return refuse(u, e, "it is a checkpoint (a safetensors file); choose another name");
}

int tt_outpaths_check(const tt_path_use *u, int n, tt_err *e)
{
    for (int i = 0; i < n; i++) {
        if (!u[i].path || u[i].input)
            continue;
        if (check_name(&u[i], e) || check_dir(&u[i], e) || check_target(&u[i], e) ||
            (u[i].mpiio && check_mpiio(&u[i], e)))
            return -1;
        for (int j = 0; j < n; j++) {
            if (j == i || !u[j].path || (!u[j].input && j < i))
                continue; /* a pair of outputs is compared once */
            if (u[i].mpiio && u[j].input && strcmp(u[j].flag, "--resume") == 0)
                continue; /* saving onto the checkpoint resumed from: see the header */
            if (same_file(u[i].path, u[j].path))
                return tt_fail(e, "%s: cannot write %s '%s': it is the same file as %s '%s'",
                               u[i].flag, u[i].what, u[i].path, u[j].flag, u[j].path);
        }
        /* After the pairs: "the same file as --resume" says more. */
        if (check_not_precious(&u[i], e))
            return -1;
    }
    return 0;
}

int tt_config_outputs_check(const tt_run_config *rc, tt_err *e)
{
    /* --cluster is an input when it names a file, not a built-in. */
    const char *cluster = rc->cluster && !tt_cluster_builtin(rc->cluster) ? rc->cluster : NULL;
    tt_path_use uses[9 + TT_MAX_PLOT_LOGS] = {
        {"--data", "corpus", rc->data, 1, 0},
        {"--cluster", "cluster file", cluster, 1, 0},
        {"--plan-json", "the plan", rc->plan_json, 0, 0},
        {"--resume", "checkpoint", rc->resume, 1, 0},
        {"--save", "checkpoint", rc->save, 0, 1},
        {"--log", "log", rc->log, 0, 0},
        {"--trace", "trace", rc->trace, 0, 0},
        {"--timeline", "timeline", rc->timeline, 0, 0},
        {"--plot", "plot", rc->plot, 0, 0},
    };
    /* The CSVs a --plot reads: the chart must not overwrite one of them. */
    int n = 9;
    for (int i = 0; i < rc->plot_nlogs; i++)
        uses[n++] = (tt_path_use){"the --log CSV", "log", rc->plot_logs[i], 1, 0};
    return tt_outpaths_check(uses, n, e);
}
