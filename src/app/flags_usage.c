/* flags_usage.c - --help: the flag table (flags_table.c) printed by section,
 * each entry's text at one column with its default filled in from
 * tt_config_defaults, so the help cannot drift from the parser. */
#include "tt/app/flags.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define HELP_COL 27 /* column of the help text, after "  --flag METAVAR" */

/* Row f's default in d as --help shows it. */
static void default_text(const tt_flag *f, const tt_run_config *d, char *buf, size_t n)
{
    if (f->show) {
        f->show(d, buf, n);
        return;
    }
    switch (f->kind) {
    case TT_FLAG_INT: snprintf(buf, n, "%d", *TT_FLAG_CFIELD(d, f, int)); break;
    case TT_FLAG_LONG: snprintf(buf, n, "%ld", *TT_FLAG_CFIELD(d, f, long)); break;
    case TT_FLAG_U64: snprintf(buf, n, "%llu", (unsigned long long)*TT_FLAG_CFIELD(d, f, uint64_t)); break;
    case TT_FLAG_DOUBLE: snprintf(buf, n, "%g", *TT_FLAG_CFIELD(d, f, double)); break;
    case TT_FLAG_STRING: snprintf(buf, n, "\"%s\"", *TT_FLAG_CFIELD(d, f, char *)); break;
    case TT_FLAG_SIZE: {
        /* In the unit a user would type; 0 is "no limit" (--gpu-mem), the
         * only size whose default is 0. */
        size_t v = *TT_FLAG_CFIELD(d, f, size_t);
        const char *unit = "GMK";
        size_t scale = (size_t)1 << 30;
        while (*unit && v % scale != 0)
            unit++, scale >>= 10;
        if (v == 0)
            snprintf(buf, n, "unlimited");
        else if (*unit)
            snprintf(buf, n, "%zu%c", v / scale, *unit);
        else
            snprintf(buf, n, "%zu", v);
        break;
    }
    default: snprintf(buf, n, "?"); break;
    }
}

/* Prints the entry of row f and of the rows after it that join it (help
 * NULL); returns how many rows it took. */
static size_t print_entry(FILE *out, const tt_flag *f, size_t left, const tt_run_config *d)
{
    char head[160] = "", dflt[160] = "";
    size_t k = 0;
    do {
        char one[64];
        default_text(&f[k], d, one, sizeof one);
        tt_appendf(head, sizeof head, "%s%s%s%s", k ? ", " : "", f[k].name,
               f[k].metavar ? " " : "", f[k].metavar ? f[k].metavar : "");
        tt_appendf(dflt, sizeof dflt, "%s%s", k ? ", " : "", one);
        k++;
    } while (k < left && f[k].help == NULL);

    /* At least two spaces after the names; names too long for that get a
     * line of their own. */
    int len = (int)strlen(head);
    fprintf(out, "  %s", head);
    if (f->help[0] != '\0') {
        if (len > HELP_COL - 1)
            fprintf(out, "\n%*s", HELP_COL, "");
        else
            fprintf(out, "%*s", len <= HELP_COL - 4 ? HELP_COL - 2 - len : 2, "");
    }
    for (const char *p = f->help; *p; p++) {
        if (p[0] == '%' && p[1] == 'D')
            fputs(dflt, out), p++;
        else if (*p == '\n')
            fprintf(out, "\n%*s", HELP_COL, "");
        else
            fputc(*p, out);
    }
    fputc('\n', out);
    return k;
}

void tt_config_usage(FILE *out)
{
    tt_run_config d;
    tt_config_defaults(&d);
    fputs("Usage: mpirun -np N tiny_transformer [OPTION]...\n"
          "Train a tiny GPT on N virtual GPUs (one MPI rank each) on CPU.\n\n",
          out);
    for (int s = 0; s < TT_SEC_COUNT; s++) {
        fprintf(out, "%s:\n", tt_flag_sections[s]);
        for (size_t i = 0; i < tt_flag_count; i++)
            if (tt_flags[i].section == (tt_flag_section)s && tt_flags[i].help)
                i += print_entry(out, &tt_flags[i], tt_flag_count - i, &d) - 1;
    }
    fputs("\nOpen MPI needs --oversubscribe for more ranks than cores and\n"
          "--allow-run-as-root when run as root. A build with MPICH (README)\n"
          "runs under mpirun.mpich, which needs neither.\n",
          out);
}
