/* tt/app/flags.h - the command line: every flag of design.md section 9, its
 * default, and the parser that checks it identically on every rank.
 *
 * The flags are one table (tt_flags, src/app/flags_table.c): the parser walks
 * it and --help is printed from it, so the two cannot disagree. The table is
 * public so that tests can hold the help text, the man page and the parser
 * against each other. */
#ifndef TT_APP_FLAGS_H
#define TT_APP_FLAGS_H

#include <stdio.h>
#include <stdint.h>
#include "tt/core/common.h"
#include "tt/core/config.h"

/* How a flag's value is read and stored. */
typedef enum {
    TT_FLAG_SWITCH, /* no value: stores lo into the int at field */
    TT_FLAG_ANSWER, /* no value: answer() prints, the parse returns 1 (--help) */
    TT_FLAG_INT,    /* whole number in [lo, hi], stored as int */
    TT_FLAG_LONG,   /* ... stored as long */
    TT_FLAG_U64,    /* ... read as a long, stored as uint64_t (--seed) */
    TT_FLAG_DOUBLE, /* finite number in [dlo, dhi] (or 0, with zero_off) */
    TT_FLAG_SIZE,   /* bytes, optional K/M/G/T suffix, stored as size_t */
    TT_FLAG_STRING, /* non-empty text; the pointer into argv is stored */
    TT_FLAG_CHOICE, /* exactly one word of words[] */
    TT_FLAG_LIST,   /* comma-separated words of words[] */
    TT_FLAG_CUSTOM  /* set() reads and stores the value (--schedule) */
} tt_flag_kind;

/* A word a choice or list flag accepts: it stores value into the int at
 * field (its own field, so a list can set several). */
typedef struct {
    const char *word;
    size_t field;
    int value;
} tt_flag_word;

/* The sections of --help, in print order (titles in tt_flag_sections). */
typedef enum {
    TT_SEC_LAYOUT, TT_SEC_MODEL, TT_SEC_TRAINING, TT_SEC_FILES, TT_SEC_OUTPUT, TT_SEC_PLAN,
    TT_SEC_COUNT
} tt_flag_section;

typedef struct {
    const char *name;          /* "--layers" */
    tt_flag_kind kind;
    size_t field;              /* offsetof(tt_run_config, ...) */
    long lo, hi;               /* range of INT, LONG, U64; SWITCH: the value stored */
    double dlo, dhi;           /* range of DOUBLE */
    int zero_off;              /* DOUBLE: 0 (off) is taken too, below dlo (--watchdog) */
    const tt_flag_word *words; /* CHOICE, LIST: ended by a NULL word */
    int (*set)(tt_run_config *c, const char *flag, const char *val, tt_err *e); /* CUSTOM */
    void (*show)(const tt_run_config *d, char *buf, size_t n); /* default text, if odd */
    void (*answer)(FILE *out); /* ANSWER */
    unsigned given;            /* TT_GIVEN_* bit set when the flag is given */
    const char *metavar;       /* "L" in "--layers L"; NULL for no value */
    tt_flag_section section;
    int train_only;            /* refused with --plan, which would ignore it */
    /* Help lines separated by '\n'; "%D" becomes the default (of every row of
     * the entry, joined by ", "). NULL: this row joins the entry of the row
     * before it ("--beta1 X, --beta2 X"). */
    const char *help;
} tt_flag;

/* The field of a configuration c that row f stores into, read-only (the
 * parser's checks and --help read it; only the parser writes). */
/* The most GPUs --gpus (and a plan's tp x pp x dp) may name. */
#define TT_MAX_GPUS (1 << 24)

#define TT_FLAG_CFIELD(c, f, type) ((const type *)((const char *)(c) + (f)->field))

extern const tt_flag tt_flags[];
extern const size_t tt_flag_count;
extern const char *const tt_flag_sections[TT_SEC_COUNT];

/* Every field at its default: the one place a default is written. */
void tt_config_defaults(tt_run_config *c);
/* Defaults that depend on other flags, applied after the last flag. */
void tt_config_finish(tt_run_config *c);

/* Parses argv into c (defaults first). Returns 0 to run, 1 when --help or
 * --version was answered (text written to out, may be NULL on ranks > 0), and
 * -1 on a usage error with the message in e. */
int tt_config_parse(tt_run_config *c, int argc, char **argv, FILE *out, tt_err *e);
/* Checks the values against each other (sizes, divisibility); -1 with e. */
int tt_config_check(const tt_run_config *c, tt_err *e);
/* The outputs that picture a run's steps, as "--trace, --timeline and
 * --plot" (those given; --plot of earlier logs is not one) into buf; returns
 * how many. */
int tt_pictures_named(const tt_run_config *c, char *buf, size_t n);
/* The values a resumed run took from its checkpoint (every row with a given
 * bit) against the same ranges as the flags, eps in (0, 1], and against each
 * other where the file brought both (heads divides dim, micro-batches divide
 * the batch, lr_min <= lr); -1 with a message that starts with `source`
 * ("checkpoint 'F'") and names the keys. */
int tt_config_check_ranges(const tt_run_config *c, const char *source, tt_err *e);
/* --help, printed from tt_flags. */
void tt_config_usage(FILE *out);

#endif
