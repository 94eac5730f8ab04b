/* outfile.c - write under "<path>.tmp.<pid>", then rename (see outfile.h). */
#include "show/outfile.h"
#include "tt/core/outpath.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tt_outfile_open(tt_outfile *o, const char *path, const char *what, tt_err *e)
{
    o->tmp = tt_temp_name(path, (long)getpid());
    o->path = path;
    o->what = what;
    o->f = fopen(o->tmp, "w");
    if (o->f)
        return 0;
    int err = errno;
    free(o->tmp);
    o->tmp = NULL;
    return tt_fail(e, "cannot write %s '%s': %s", what, path, strerror(err));
}

int tt_outfile_finish(tt_outfile *o, tt_err *e)
{
    int err = 0;
    errno = 0;
    /* fflush reports the errno of a write that failed (ENOSPC, EIO); ferror
     * catches an earlier failed fprintf whose errno may since be lost. */
    if (fflush(o->f) != 0 || ferror(o->f))
        err = errno ? errno : EIO;
    if (fclose(o->f) != 0 && !err)
        err = errno ? errno : EIO;
    o->f = NULL;
    int failed = err != 0;
    if (failed)
        tt_fail(e, "cannot write %s '%s': %s", o->what, o->path, strerror(err));
    else /* re-checks that path is still a regular file or absent */
        failed = tt_replace_file(o->tmp, o->path, o->what, e) != 0;
    if (failed)
        remove(o->tmp);
    free(o->tmp);
    o->tmp = NULL;
    return failed ? -1 : 0;
}
