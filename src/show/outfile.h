/* outfile.h - a whole output file written under a private temporary name
 * ("<path>.tmp.<pid>") and renamed onto its path only once every byte is
 * out, so a failed write (full disk, bad directory) never leaves a truncated
 * file where a good one was expected, nor clobbers an older good one.
 *
 * Internal to the library (not installed): the trace and timeline writers,
 * --plot and the --log rewrite on resume share it. Both
 * calls report failure as "cannot write <what> '<path>': <reason>". */
#ifndef TT_SHOW_OUTFILE_H
#define TT_SHOW_OUTFILE_H

#include <stdio.h>
#include "tt/core/common.h"

typedef struct {
    FILE *f;          /* write here */
    char *tmp;        /* the temporary name, owned until finish */
    const char *path; /* where the file ends up */
    const char *what; /* "trace", "timeline", "plot", "log": for the error message */
} tt_outfile;

/* Creates the temporary file; 0, or -1 with nothing left to clean up. */
int tt_outfile_open(tt_outfile *o, const char *path, const char *what, tt_err *e);
/* Flushes, closes and renames onto the path; on any failure removes the
 * temporary file instead. Frees what open allocated either way. */
int tt_outfile_finish(tt_outfile *o, tt_err *e);

#endif
