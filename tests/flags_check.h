/* tests/flags_check.h - what the flag test programs (test_flags.c,
 * test_flags_values.c) share: a parse of a few arguments after the program's
 * name, with the error message cleared first. */
#ifndef TT_FLAGS_CHECK_H
#define TT_FLAGS_CHECK_H

#include <stdarg.h>
#include <stdio.h>

#include "tt/app/flags.h"

/* Parses the arguments in ap (NULL-terminated) after a program name. */
static inline int vparse(tt_run_config *c, tt_err *e, FILE *out, va_list ap)
{
    char *argv[16] = {"tiny_transformer"};
    int argc = 1;
    for (char *a; argc < 15 && (a = va_arg(ap, char *)) != NULL;)
        argv[argc++] = a;
    e->msg[0] = '\0';
    return tt_config_parse(c, argc, argv, out, e);
}

/* Parses the arguments given (NULL-terminated) after a program name. */
static inline int parse(tt_run_config *c, tt_err *e, FILE *out, ...)
{
    va_list ap;
    va_start(ap, out);
    const int rc = vparse(c, e, out, ap);
    va_end(ap);
    return rc;
}

#endif
