/* flags.c - how the flags are read: the parser, walking the one table of
 * flags (flags_table.c) as --help does (flags_usage.c); the checks of the
 * values against each other are flags_check.c's. */
#include "tt/app/flags.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The field of c that row f stores into (TT_FLAG_CFIELD reads it). */
#define FIELD(c, f, type) ((type *)((char *)(c) + (f)->field))

/* ---- reading one value ----------------------------------------------------- */

/* Whole-string integer in [lo, hi]. */
static int parse_long(const char *flag, const char *s, long lo, long hi, long *out, tt_err *e)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    /* an integer too long for a long is out of any range, not a non-integer */
    if (errno == ERANGE && end != s && *end == '\0')
        return tt_fail(e, "%s must be between %ld and %ld, got '%s'", flag, lo, hi, s);
    if (errno || end == s || *end != '\0')
        return tt_fail(e, "%s expects an integer, got '%s'", flag, s);
    if (v < lo || v > hi)
        return tt_fail(e, "%s must be between %ld and %ld, got %ld", flag, lo, hi, v);
    *out = v;
    return 0;
}

/* A finite number in row f's [dlo, dhi], or 0 where the row takes 0 as off. */
static int parse_double(const char *flag, const char *s, const tt_flag *f, double *out, tt_err *e)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* A number too small for a double (1e-400) is taken as the nearest one,
     * as strtod gives it; too large is out of range. Out of range is named as
     * typed: %g of 0.9999995 prints 1. */
    const int whole = end != s && *end == '\0';
    const int tiny = whole && errno == ERANGE && fabs(v) <= DBL_MIN;
    if (!whole || isnan(v) || (errno && !tiny && !isinf(v)))
        return tt_fail(e, "%s expects a number, got '%s'", flag, s);
    if (!isfinite(v) || ((v < f->dlo || v > f->dhi) && !(v == 0 && f->zero_off)))
        return tt_fail(e, "%s must be between %g and %g%s, got %s", flag, f->dlo, f->dhi,
                       f->zero_off ? " (or 0: off)" : "", s);
    *out = v == 0 ? 0.0 : v; /* -0 is 0 */
    return 0;
}

/* A byte count with an optional K, M, G or T suffix (powers of 1024), as the
 * program prints sizes too: 4M, 4MB and 4MiB are the same. The range
 * is the same for every size and is spelt out in the message, so it lives
 * here rather than in the table. */
static int parse_size(const char *flag, const char *s, size_t *out, tt_err *e)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double mult = 1;
    if (*end == 'K' || *end == 'k') mult = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mult = 1024.0 * 1024.0, end++;
    else if (*end == 'G' || *end == 'g') mult = 1024.0 * 1024.0 * 1024.0, end++;
    else if (*end == 'T' || *end == 't') mult = 1024.0 * 1024.0 * 1024.0 * 1024.0, end++;
    if (mult > 1 && (*end == 'i' || *end == 'I') && (end[1] == 'B' || end[1] == 'b'))
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (errno || end == s || *end != '\0' || !isfinite(v))
        return tt_fail(e, "%s expects a size such as 4096, 256K or 4M, got '%s'", flag, s);
    v *= mult;
    /* The upper end is the one the message names, typed as it says. */
    if (v < 4 || v > 1000.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0)
        return tt_fail(e, "%s must be between 4 bytes and 1000T, got '%s'", flag, s);
    *out = (size_t)v;
    return 0;
}

/* The word of the list that is the len characters at p, in any case (as
 * --schedule takes the papers' 1F1B: "--recompute Full" was refused where
 * "--schedule GPipe" was not), or NULL. */
static const tt_flag_word *find_word(const tt_flag_word *w, const char *p, size_t len)
{
    for (; w->word; w++)
        if (strlen(w->word) == len && strncasecmp(w->word, p, len) == 0)
            return w;
    return NULL;
}

/* A choice is one word of the row; a list is words joined by commas, where
 * empty items are skipped (",comm," means comm) and the value is read in
 * place, whatever its length. The message names what would have been
 * accepted: "a or b" for a choice, "a, b or a,b" for a list. */
static int read_words(tt_run_config *c, const tt_flag *f, const char *flag, const char *val,
                      tt_err *e)
{
    int list = f->kind == TT_FLAG_LIST;
    const char *p = val;
    while (*p) {
        size_t len = list ? strcspn(p, ",") : strlen(p);
        if (len > 0) {
            const tt_flag_word *w = find_word(f->words, p, len);
            if (!w)
                break;
            *(int *)((char *)c + w->field) = w->value;
        }
        p += len + (p[len] == ',');
    }
    if (*p == '\0' && (list || *val))
        return 0;
    char want[160] = "";
    for (int i = 0; f->words[i].word; i++) {
        int last = f->words[i + 1].word == NULL;
        tt_appendf(want, sizeof want, "%s%s", i == 0 ? "" : last && !list ? " or " : ", ",
               f->words[i].word);
    }
    for (int i = 0; list && f->words[i].word; i++)
        tt_appendf(want, sizeof want, "%s%s", i == 0 ? " or " : ",", f->words[i].word);
    return tt_fail(e, "%s expects %s, got '%s'", flag, want, val);
}

/* Reads val the way row f says and stores it; -1 with e on a bad value. */
static int read_value(tt_run_config *c, const tt_flag *f, const char *flag, const char *val,
                      tt_err *e)
{
    long v = 0;
    switch (f->kind) {
    case TT_FLAG_INT:
    case TT_FLAG_LONG:
    case TT_FLAG_U64:
        if (parse_long(flag, val, f->lo, f->hi, &v, e))
            return -1;
        if (f->kind == TT_FLAG_INT)
            *FIELD(c, f, int) = (int)v;
        else if (f->kind == TT_FLAG_LONG)
            *FIELD(c, f, long) = v;
        else
            *FIELD(c, f, uint64_t) = (uint64_t)v;
        return 0;
    case TT_FLAG_DOUBLE:
        return parse_double(flag, val, f, FIELD(c, f, double), e);
    case TT_FLAG_SIZE:
        return parse_size(flag, val, FIELD(c, f, size_t), e);
    case TT_FLAG_STRING:
        *FIELD(c, f, const char *) = val;
        return 0;
    case TT_FLAG_CHOICE:
    case TT_FLAG_LIST:
        return read_words(c, f, flag, val, e);
    case TT_FLAG_CUSTOM:
        return f->set(c, flag, val, e);
    default: /* switches and answers take no value */
        return 0;
    }
}

/* ---- the parser ------------------------------------------------------------ */

static const tt_flag *find_flag(const char *name)
{
    for (size_t i = 0; i < tt_flag_count; i++)
        if (strcmp(tt_flags[i].name, name) == 0)
            return &tt_flags[i];
    return NULL;
}

/* Edit distance of a and b (at most 64 characters each; longer ones differ). */
static int edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 64 || m > 64)
        return 99;
    int d[65][65];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

/* The flag a mistyped name most likely meant: one the name starts, or within
 * two edits; NULL when none is that close. */
static const char *closest_flag(const char *name)
{
    const char *best = NULL;
    /* Two edits for a name of four letters or more, one for two or three,
     * none for less: "--" and "--x" are near no flag (both were "--tp"). */
    const size_t letters = strlen(name) > 2 ? strlen(name) - 2 : 0;
    int best_d = letters >= 4 ? 3 : letters >= 2 ? 2 : 0;
    for (size_t i = 0; i < tt_flag_count; i++) {
        const char *f = tt_flags[i].name;
        int d = strncmp(f, name, strlen(name)) == 0 && strlen(name) > 3 ? 1
                                                                        : edit_distance(name, f);
        if (d < best_d)
            best = f, best_d = d;
    }
    return best;
}

/* --plan, --show-grid and --plot with --log CSVs train nothing: a file only
 * a training run writes, given with them, would be ignored, and the run would
 * end with status 0 and without the checkpoint, log or trace asked for.
 * (--resume stays allowed with --plan and --show-grid: it supplies the model
 * that is planned or shown; --plot of CSVs has no use for one.) */
static int runs_no_training(const tt_run_config *c, tt_err *e)
{
    if (c->plan && c->plot_nlogs)
        return tt_fail(e, "--plan and --plot with --log CSVs are two runs that train nothing; "
                          "give one of them");
    const char *mode = c->plan          ? "--plan"
                       : c->plot_nlogs  ? "--plot with --log CSVs"
                       : c->show_grid   ? "--show-grid"
                                        : NULL;
    const char *flag = c->save       ? "--save"
                       : c->log      ? "--log"
                       : c->trace    ? "--trace"
                       : c->timeline ? "--timeline"
                       : (c->plan || c->show_grid) && c->plot ? "--plot"
                       : c->plot_nlogs && c->resume          ? "--resume"
                                                              : NULL;
    if (c->plan && c->train_only && !flag)
        return tt_fail(e, "--plan trains nothing, so %s would be ignored (the planner reads the "
                          "model, the layout, --batch, --dp-bucket, --cluster, --resume and its "
                          "own flags%s)", c->train_only,
                       strcmp(c->train_only, "--gpu-mem") == 0
                           ? "; a GPU's memory is the cluster's gpu_memory_bytes"
                           : "");
    if (mode && flag)
        return tt_fail(e, "%s trains nothing, so %s would be ignored (it belongs to a training "
                          "run)", mode, flag);
    return 0;
}

int tt_config_parse(tt_run_config *c, int argc, char **argv, FILE *out, tt_err *e)
{
    tt_config_defaults(c);
    for (int i = 1; i < argc; i++) {
        /* -h is the one short spelling: what people type first. */
        const char *arg = strcmp(argv[i], "-h") == 0 ? "--help" : argv[i];
        if (strncmp(arg, "--", 2) != 0) {
            /* The --log CSVs that --plot overlays: the one kind of operand. */
            if (c->plot && c->plot_nlogs < TT_MAX_PLOT_LOGS && arg[0] != '\0') {
                c->plot_logs[c->plot_nlogs++] = arg;
                continue;
            }
            if (c->plot)
                return tt_fail(e, "unexpected argument '%s' (--plot takes at most %d CSV files)",
                               arg, TT_MAX_PLOT_LOGS);
            return tt_fail(e, "unexpected argument '%s' (options start with --; see --help)", arg);
        }

        /* --flag VALUE or --flag=VALUE. */
        char flag[64];
        const char *eq = strchr(arg, '=');
        if (eq) {
            size_t n = (size_t)(eq - arg);
            if (n >= sizeof flag)
                n = sizeof flag - 1;
            memcpy(flag, arg, n);
            flag[n] = '\0';
        } else {
            snprintf(flag, sizeof flag, "%s", arg);
        }
        const tt_flag *f = find_flag(flag);
        int bare = f && (f->kind == TT_FLAG_SWITCH || f->kind == TT_FLAG_ANSWER);
        /* A flag without a value has no "=" spelling: --quiet=1 is unknown. */
        if (!f || (bare && eq)) {
            const char *near = f ? NULL : closest_flag(flag);
            if (near)
                return tt_fail(e, "unknown option '%s'; did you mean %s? (see --help)", flag,
                               near);
            return tt_fail(e, "unknown option '%s' (see --help)", flag);
        }
        if (f->kind == TT_FLAG_ANSWER) {
            if (out)
                f->answer(out);
            return 1;
        }
        if (f->train_only && !c->train_only)
            c->train_only = f->name;
        if (f->kind == TT_FLAG_SWITCH) {
            *FIELD(c, f, int) = (int)f->lo;
            c->given |= f->given;
            continue;
        }
        const char *val = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!val)
            return tt_fail(e, "option %s needs a value (see --help)", flag);
        /* A forgotten value would take the next option as its own: --log
         * --quiet would write a log named "--quiet" and drop the switch. A
         * value that really starts with an option's name is given with "=". */
        if (!eq && strncmp(val, "--", 2) == 0) {
            char next[64];
            snprintf(next, sizeof next, "%.*s", (int)strcspn(val, "="), val);
            if (find_flag(next))
                return tt_fail(e, "option %s needs a value, but the next argument is the option "
                                  "%s (for a value that starts with --, write %s=VALUE)",
                               flag, next, flag);
        }
        if (read_value(c, f, flag, val, e))
            return -1;
        c->given |= f->given;
        /* Checked after the value's own checks, whose message says more. */
        if (val[0] == '\0')
            return tt_fail(e, "option %s needs a non-empty value", flag);
    }
    if (runs_no_training(c, e))
        return -1;
    tt_config_finish(c);
    return 0;
}
