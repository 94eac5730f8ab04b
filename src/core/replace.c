/* replace.c - writing a file under a temporary name and renaming it into
 * place: the temporary's name, the removal of the ones a killed writer left,
 * the room a file needs, and the rename, which re-checks its target and
 * never replaces a --save another program has put there meanwhile (see
 * tt/core/outpath.h). */
#define _XOPEN_SOURCE 700

#include "tt/core/outpath.h"
#include "core/paths.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* "<path>.<word>.<pid>", a new string: a name of this process's own beside path. */
static char *name_beside(const char *path, const char *word, long pid)
{
    size_t cap = strlen(path) + strlen(word) + 32;
    char *name = tt_malloc(cap);
    snprintf(name, cap, "%s.%s.%ld", path, word, pid);
    return name;
}

char *tt_temp_name(const char *path, long pid) { return name_beside(path, "tmp", pid); }

/* The pid of a name that is "<base>.tmp.<digits>", else -1. */
static long temp_pid(const char *name, const char *base)
{
    size_t n = strlen(base);
    if (strncmp(name, base, n) != 0 || strncmp(name + n, ".tmp.", 5) != 0)
        return -1;
    const char *d = name + n + 5;
    size_t k = strspn(d, "0123456789");
    if (k == 0 || k > 10 || d[k] != '\0')
        return -1;
    return strtol(d, NULL, 10);
}

/* Is pid a running process on this host? kill(pid, 0) fails with ESRCH only
 * when there is no such process; a zombie (a killed rank whose parent, mpirun,
 * left without reaping it) is dead all the same, as its /proc stat says. */
static int pid_running(long pid)
{
    if (pid <= 0 || pid > INT_MAX || (kill((pid_t)pid, 0) != 0 && errno == ESRCH))
        return 0;
    char stat_path[64], buf[256];
    snprintf(stat_path, sizeof stat_path, "/proc/%ld/stat", pid);
    FILE *f = fopen(stat_path, "r");
    if (!f)
        return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')'); /* the name may hold spaces */
    return !(paren && paren[1] == ' ' && paren[2] == 'Z');
}

int tt_remove_stale_temps(const char *path, FILE *out)
{
    char *dir = tt_path_dir(path);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    DIR *d = opendir(dir);
    int removed = 0;
    for (struct dirent *ent; d && (ent = readdir(d));) {
        long pid = temp_pid(ent->d_name, base);
        if (pid <= 0 || pid_running(pid))
            continue;
        /* Named as the writer named it: in path's directory, as given. */
        size_t cap = (size_t)(base - path) + strlen(ent->d_name) + 1;
        char *full = tt_malloc(cap);
        snprintf(full, cap, "%.*s%s", (int)(base - path), path, ent->d_name);
        struct stat st;
        if (lstat(full, &st) == 0 && S_ISREG(st.st_mode) && unlink(full) == 0) {
            removed++;
            if (out)
                fprintf(out, "removed '%s', the temporary of an interrupted write of '%s'\n",
                        full, path);
        }
        free(full);
    }
    if (d)
        closedir(d);
    free(dir);
    return removed;
}

/* The one file a run guards (its --save): what was under its name when the
 * run began, or after its own last rename, to tell whether someone else
 * has replaced it since. */
static struct {
    const char *path; /* the caller's string, which outlives the run */
    int exists, renamed;
    struct stat st;
} guard;

static void guard_note(void)
{
    guard.exists = lstat(guard.path, &guard.st) == 0;
}

void tt_replace_guard(const char *path)
{
    guard.path = path;
    guard.renamed = 0;
    if (path)
        guard_note();
}

/* Is the file now at path (stat now) the guarded one, and not what this run
 * saw there: absent then, or another file or other bytes since? */
static int guard_changed(const char *path, const struct stat *now)
{
    if (!guard.path || strcmp(path, guard.path) != 0)
        return 0;
    return !guard.exists || now->st_dev != guard.st.st_dev || now->st_ino != guard.st.st_ino ||
           now->st_size != guard.st.st_size || now->st_mtim.tv_sec != guard.st.st_mtim.tv_sec ||
           now->st_mtim.tv_nsec != guard.st.st_mtim.tv_nsec;
}

int tt_replace_file(const char *tmp, const char *path, const char *what, tt_err *e)
{
    struct stat st;
    const int exists = lstat(path, &st) == 0;
    if (exists && !S_ISREG(st.st_mode))
        return tt_fail(e, "cannot write %s '%s': it is now %s, not a regular file", what,
                       path, S_ISLNK(st.st_mode) ? "a symbolic link" : tt_path_kind(st.st_mode));
    /* Two runs saving to one file (a job started twice, a requeue beside
     * the old job) would overwrite each other's steps, an older over a
     * newer. Neither is lost: what is there stays, this save goes beside it
     * under a name of its own (link: never over an existing file). A file
     * removed meanwhile protects nothing: the save takes its place. */
    if (exists && guard_changed(path, &st)) {
        char *kept = name_beside(path, "kept", (long)getpid());
        const int aside = link(tmp, kept) == 0 && unlink(tmp) == 0;
        tt_fail(e, "cannot write %s '%s': another program has %s it since this run %s (two "
                   "runs saving to one file?); it is kept%s%s%s", what, path,
                guard.exists ? "replaced" : "made", guard.renamed ? "last saved it" : "began",
                aside ? ", and this save is beside it as '" : "", aside ? kept : "",
                aside ? "'" : "");
        free(kept);
        return -1;
    }
    if (rename(tmp, path) != 0)
        return tt_fail(e, "cannot write %s '%s': %s", what, path, strerror(errno));
    if (guard.path && strcmp(path, guard.path) == 0) {
        guard_note();
        guard.renamed = 1;
    }
    return 0;
}

int tt_check_room(const char *path, uint64_t bytes, const char *what, tt_err *e)
{
    char *d = tt_path_dir(path);
    struct statvfs v;
    int rc = 0;
    /* A filesystem that does not say (statvfs fails) is given the benefit of
     * the doubt: the writer's own errors still stop the save. */
    if (statvfs(d, &v) == 0) {
        const uint64_t block = v.f_frsize ? (uint64_t)v.f_frsize : (uint64_t)v.f_bsize;
        const uint64_t free_bytes = (uint64_t)v.f_bavail * block;
        if (block > 0 && (uint64_t)v.f_bavail < bytes / block + (bytes % block != 0))
            rc = tt_fail(e, "cannot write %s '%s': it needs %llu bytes, the filesystem of "
                            "'%.80s' has %llu free", what, path, (unsigned long long)bytes, d,
                         (unsigned long long)free_bytes);
    }
    /* The largest file this process may write (ulimit -f): past it a write
     * fails with EFBIG (or SIGXFSZ ends the process) as on a full disk. */
    struct rlimit lim;
    if (rc == 0 && getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
        (uint64_t)lim.rlim_cur < bytes)
        rc = tt_fail(e, "cannot write %s '%s': it needs %llu bytes, the file size limit "
                        "(ulimit -f) is %llu bytes", what, path, (unsigned long long)bytes,
                     (unsigned long long)lim.rlim_cur);
    free(d);
    return rc;
}
