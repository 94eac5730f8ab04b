/* tt/app/flags.h - the command line: every flag of DESIGN section 9, its
 * default, and the parser that checks it identically on every rank. */
#ifndef TT_APP_FLAGS_H
#define TT_APP_FLAGS_H

#include <stdio.h>
#include <stdint.h>
#include "tt/core/common.h"
#include "tt/core/config.h"

/* Parses argv into c (defaults first). Returns 0 to run, 1 when --help or
 * --version was answered (text written to out, may be NULL on ranks > 0), and
 * -1 on a usage error with the message in e. */
int tt_config_parse(tt_run_config *c, int argc, char **argv, FILE *out, tt_err *e);
/* Checks the values against each other (sizes, divisibility); -1 with e. */
int tt_config_check(const tt_run_config *c, tt_err *e);
void tt_config_usage(FILE *out);

#endif
