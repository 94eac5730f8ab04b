/* paths.h - (internal) what outpath.c and replace.c both say of a path. */
#ifndef TT_CORE_PATHS_H
#define TT_CORE_PATHS_H

#include <sys/stat.h>

/* What a non-regular file is, for a message ("a directory", "a FIFO", ...). */
const char *tt_path_kind(mode_t m);

/* The directory part of path ("." when there is none); malloc'd. */
char *tt_path_dir(const char *path);

#endif
