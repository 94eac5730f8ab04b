/* tt/core/outpath.h - outputs never destroy good data.
 *
 * Before a run does any work it checks every file it will write (--save,
 * --log, --trace, --timeline, --plot, --plan-json) against the files it
 * reads (--data, --resume, a --cluster file, --plot's CSVs) and against each
 * other, so a wrong path costs a message, not the training
 * text, a checkpoint or a device node; and every file written under a
 * temporary name is renamed onto its path only if that path is still a
 * regular file or absent (tt_replace_file). */
#ifndef TT_CORE_OUTPATH_H
#define TT_CORE_OUTPATH_H

#include <stdio.h>

#include "tt/core/common.h"
#include "tt/core/config.h"

/* One file the run names: a flag ("--save"), what it holds ("checkpoint",
 * for messages), its path (NULL: not given), whether the run reads it (input) or writes it, and whether the collective
 * MPI-IO writer opens it (which bounds the length of the name, see
 * TT_MPIIO_PATH_MAX). */
typedef struct {
    const char *flag;
    const char *what;
    const char *path;
    int input;
    int mpiio;
} tt_path_use;

/* Open MPI 4.1's MPI_File_open overflows an internal buffer (abort, not an
 * error code) when the absolute name of the file it opens is longer than
 * about 244 characters. The opened file is "<path>.tmp.<pid>", so the target
 * itself may have at most this many characters once made absolute, leaving
 * room for ".tmp." and a pid of 10 digits. */
#define TT_MPIIO_PATH_MAX 225

/* Every output is checked: the name fits (its temporary too), its directory
 * exists and is writable, it is a regular file or absent (a directory,
 * device, FIFO, socket or any symbolic link is refused), a regular file may
 * be written (a file with no write permission at all is refused even to
 * root), a checkpoint is replaced only by --save and --save replaces
 * nothing else (an empty file aside), and it is not the
 * same file, by identity (st_dev/st_ino) or by resolved name, as an input or
 * another output. One exception: --save may name the --resume file (the run
 * has read it whole before its first step, and the new checkpoint replaces
 * it by rename only once complete). 0, or -1 with e = "--FLAG: cannot write
 * WHAT 'PATH': WHY" for the first output refused. */
int tt_outpaths_check(const tt_path_use *uses, int n, tt_err *e);

/* tt_outpaths_check on a run's (or a plan's) files: --data, --resume and a
 * --cluster file read; --save (MPI-IO), --log, --trace, --timeline, --plot
 * and --plan-json written. */
int tt_config_outputs_check(const tt_run_config *rc, tt_err *e);

/* "<path>.tmp.<pid>": the private name every output is written under before
 * it is renamed onto path (a new string; free it). The pid keeps two runs
 * aimed at the same path off each other's file. */
char *tt_temp_name(const char *path, long pid);

/* Removes what a killed writer of path left behind: the regular files in
 * path's directory named exactly as tt_temp_name names path's temporaries
 * ("<name>.tmp.<digits>", nothing else, not other outputs' temporaries), except
 * one whose pid is a running process on this host (a run still writing; a
 * zombie, as a killed rank mpirun did not reap, is not running). Each
 * removal is said on `out` (NULL: silent). Errors are ignored: a temporary
 * left in place is never read. Returns how many were removed. */
int tt_remove_stale_temps(const char *path, FILE *out);

/* Is there room beside path for a file of `bytes` bytes (its temporary,
 * written whole while path still holds the previous version)? Counted in the
 * filesystem's blocks available to this user (statvfs), and against this
 * process's file size limit (RLIMIT_FSIZE); 0, or -1 with e = "cannot write
 * <what> '<path>': it needs N bytes, the filesystem of 'DIR' has M free" (or
 * "the file size limit (ulimit -f) is M bytes"). A check, not a
 * reservation: the writer may still fail. */
int tt_check_room(const char *path, uint64_t bytes, const char *what, tt_err *e);

/* rename(tmp, path) for a temporary written in full, re-checking first that
 * path is still a regular file or absent (it may have changed since the run
 * began). On failure leaves tmp in place (the caller removes it) and fills
 * e with "cannot write <what> '<path>': <reason>". */
int tt_replace_file(const char *tmp, const char *path, const char *what, tt_err *e);

/* Guards path (a run's --save, a string that must stay valid; NULL: none)
 * from here on: tt_replace_file
 * does not rename onto it once another program has made or replaced it since
 * this call or this process's own last rename onto it: it links the
 * temporary beside it as "<path>.kept.<pid>" and fails, naming that. */
void tt_replace_guard(const char *path);

#endif
