/* test_flags.c - the flag table, --help, the parser and the man page held
 * against each other (Check).
 *
 * --help is printed from the same table the parser walks, so most of what is
 * checked here is that the pieces agree: every flag is in --help and in the
 * man page, every option the two mention is one the parser takes, and every
 * "(default X)" that --help prints is what the parser leaves when the flag is
 * not given. The defaults are read back from the help text as a user reads
 * it, not from the table, so a formatting slip shows up here. Bad values and
 * the one-line messages users (and labs) see: test_flags_values.c. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt/app/flags.h"
#include "tt/parallel/pipeline.h"

#include "check_run.h"
#include "flags_check.h"

/* mpirun's own options, which --help and the man page name in their notes
 * about Open MPI; tiny_transformer rightly refuses them. */
static const char *const mpirun_words[] = {"--oversubscribe", "--allow-run-as-root", NULL};

static char *help_text(void)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *out = open_memstream(&buf, &n);
    tt_run_config c;
    tt_err e;
    ck_assert_int_eq(parse(&c, &e, out, "--help", NULL), 1);
    fclose(out);
    return buf;
}

static int is_word_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-';
}

static char *man_text(void)
{
    const char *dir = getenv("TT_SRCDIR");
    ck_assert_msg(dir != NULL, "TT_SRCDIR must name the tests' source directory");
    char path[4096];
    snprintf(path, sizeof path, "%s/../doc/tiny_transformer.1", dir);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    char *buf = malloc(1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* roff writes a minus as \- ; as text it is "-". */
    char *w = buf;
    for (const char *r = buf; *r; r++)
        if (!(r[0] == '\\' && r[1] == '-'))
            *w++ = *r;
    *w = '\0';
    return buf;
}

/* Does text name the option word as a whole ("--seq" but not in "--seq-x")? */
static int names(const char *text, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word))
        if ((p == text || !is_word_char(p[-1])) && !is_word_char(p[n]))
            return 1;
    return 0;
}

static const tt_flag *row_of(const char *name)
{
    for (size_t i = 0; i < tt_flag_count; i++)
        if (strcmp(tt_flags[i].name, name) == 0)
            return &tt_flags[i];
    return NULL;
}

/* Values the row's kind and range accept; returns how many (0: none taken). */
static int valid_values(const tt_flag *f, char vals[][64], int max)
{
    int n = 0;
    switch (f->kind) {
    case TT_FLAG_INT: case TT_FLAG_LONG: case TT_FLAG_U64:
        snprintf(vals[n++], 64, "%ld", f->lo);
        snprintf(vals[n++], 64, "%ld", f->hi);
        break;
    case TT_FLAG_DOUBLE:
        snprintf(vals[n++], 64, "%.17g", f->dlo);
        snprintf(vals[n++], 64, "%.17g", f->dhi);
        if (f->zero_off)
            snprintf(vals[n++], 64, "0");
        break;
    case TT_FLAG_SIZE:
        snprintf(vals[n++], 64, "4");
        snprintf(vals[n++], 64, "256K");
        snprintf(vals[n++], 64, "1G");
        break;
    case TT_FLAG_STRING:
        snprintf(vals[n++], 64, "x");
        break;
    case TT_FLAG_CHOICE: case TT_FLAG_LIST:
        for (int i = 0; f->words[i].word && n < max; i++)
            snprintf(vals[n++], 64, "%s", f->words[i].word);
        break;
    case TT_FLAG_CUSTOM: {
        /* The words the metavar offers: "naive|gpipe|...". */
        const char *p = f->metavar;
        while (*p && n < max) {
            size_t len = strcspn(p, "|");
            snprintf(vals[n++], 64, "%.*s", (int)len, p);
            p += len + (p[len] == '|');
        }
        break;
    }
    default:
        break;
    }
    return n;
}

/* The parser takes the option word, with each valid value of its row in both
 * spellings (--flag VALUE and --flag=VALUE). */
static void check_accepted(const char *word, const char *where)
{
    const tt_flag *f = row_of(word);
    tt_run_config c;
    tt_err e;
    ck_assert_msg(f != NULL, "%s names %s, which is no row of the flag table", where, word);
    int rc = parse(&c, &e, NULL, word, NULL);
    if (f->kind == TT_FLAG_SWITCH || f->kind == TT_FLAG_ANSWER)
        ck_assert_msg(rc == (f->kind == TT_FLAG_ANSWER), "%s (from %s): %s", word, where, e.msg);
    else
        ck_assert_msg(rc < 0 && strstr(e.msg, "needs a value"), "%s without a value: %s", word,
                      e.msg);
    char vals[8][64], joined[640];
    int n = valid_values(f, vals, 8);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(parse(&c, &e, NULL, word, vals[i], NULL) == 0, "%s %s (from %s): %s", word,
                      vals[i], where, e.msg);
        snprintf(joined, sizeof joined, "%s=%s", word, vals[i]);
        ck_assert_msg(parse(&c, &e, NULL, joined, NULL) == 0, "%s: %s", joined, e.msg);
    }
}

/* Every "--word" of text other than mpirun's; returns how many it checked. */
static int check_words_accepted(const char *text, const char *where)
{
    int count = 0;
    for (const char *p = strstr(text, "--"); p; p = strstr(p + 2, "--")) {
        if ((p > text && is_word_char(p[-1])) || !(p[2] >= 'a' && p[2] <= 'z'))
            continue;
        char word[64];
        size_t len = 2;
        while (is_word_char(p[len]) && len < sizeof word - 1)
            len++;
        snprintf(word, sizeof word, "%.*s", (int)len, p);
        int theirs = 0;
        for (int i = 0; mpirun_words[i]; i++)
            theirs |= strcmp(word, mpirun_words[i]) == 0;
        if (!theirs) {
            check_accepted(word, where);
            count++;
        }
    }
    return count;
}

START_TEST(every_flag_in_help)
{
    char *help = help_text();
    for (size_t i = 0; i < tt_flag_count; i++)
        ck_assert_msg(names(help, tt_flags[i].name), "--help does not name %s", tt_flags[i].name);
    free(help);
}
END_TEST

START_TEST(help_names_only_flags)
{
    char *help = help_text();
    /* Well over one mention per flag: the check looked at the whole text. */
    ck_assert_int_ge(check_words_accepted(help, "--help"), (int)tt_flag_count);
    free(help);
}
END_TEST

/* --schedule's words are text in the flag table and the man page, while the
 * parser takes the registry's rows: the three must name the same schedules,
 * in the registry's order. */
START_TEST(schedule_words_are_the_registry)
{
    char want[256] = "";
    for (int k = 0; k < tt_schedule_count(); k++) {
        strncat(want, k ? "|" : "", sizeof want - strlen(want) - 1);
        strncat(want, tt_schedule_name(k), sizeof want - strlen(want) - 1);
    }
    const tt_flag *f = row_of("--schedule");
    ck_assert_msg(f && f->metavar, "no --schedule row");
    ck_assert_msg(strcmp(f->metavar, want) == 0, "--help's --schedule words are %s, the registry's %s",
                  f->metavar, want);
    char *man = man_text();
    char line[300];
    snprintf(line, sizeof line, ".BR --schedule \" %s\"\n", want);
    ck_assert_msg(strstr(man, line), "the man page's --schedule line is not %s", line);
    free(man);
}
END_TEST

START_TEST(man_page_matches_table)
{
    char *man = man_text();
    for (size_t i = 0; i < tt_flag_count; i++)
        ck_assert_msg(names(man, tt_flags[i].name), "the man page does not document %s",
                      tt_flags[i].name);
    ck_assert_int_ge(check_words_accepted(man, "the man page"), (int)tt_flag_count);
    free(man);
}
END_TEST

/* Equal apart from which flags were given, and with strings compared by
 * their text (a default is a literal, a given value points into argv). */
static int same_config(const tt_run_config *a, const tt_run_config *b)
{
    tt_run_config x = *a, y = *b;
    const char **sx[] = {&x.data, &x.save, &x.resume, &x.log, &x.prompt,
                         &x.stage_layers, &x.trace, &x.timeline, &x.inject_bug, &x.cluster};
    const char **sy[] = {&y.data, &y.save, &y.resume, &y.log, &y.prompt,
                         &y.stage_layers, &y.trace, &y.timeline, &y.inject_bug, &y.cluster};
    for (size_t i = 0; i < sizeof sx / sizeof sx[0]; i++) {
        if ((*sx[i] == NULL) != (*sy[i] == NULL) || (*sx[i] && strcmp(*sx[i], *sy[i]) != 0))
            return 0;
        *sx[i] = *sy[i] = NULL;
    }
    x.given = y.given = 0;
    x.train_only = y.train_only = NULL; /* which flags were given, too */
    return memcmp(&x, &y, sizeof x) == 0;
}

/* Giving a flag its default must change nothing. A default that applies only
 * with another flag is checked with that flag: --virtual-stages's help gives
 * the number of chunks of the interleaved schedule. */
static void check_default(const char *flag, const char *value)
{
    const char *with = NULL, *with_value = NULL;
    if (strcmp(flag, "--virtual-stages") == 0)
        with = "--schedule", with_value = "interleaved";
    tt_run_config d, c;
    tt_err e;
    ck_assert_int_eq(parse(&d, &e, NULL, with, with_value, NULL), 0);
    if (strcmp(value, "unlimited") == 0) {
        /* The one default that is a word, not a value one could type. */
        ck_assert_str_eq(flag, "--gpu-mem");
        ck_assert_uint_eq(d.gpu_mem, 0);
        return;
    }
    char bare[64];
    snprintf(bare, sizeof bare, "%s", value);
    size_t n = strlen(bare);
    if (n >= 2 && bare[0] == '"' && bare[n - 1] == '"')
        memmove(bare, bare + 1, n - 2), bare[n - 2] = '\0';
    int rc = with ? parse(&c, &e, NULL, with, with_value, flag, bare, NULL)
                  : parse(&c, &e, NULL, flag, bare, NULL);
    ck_assert_msg(rc == 0, "%s %s, the default --help gives, is refused: %s", flag, bare, e.msg);
    ck_assert_msg(same_config(&d, &c), "--help says %s defaults to %s, but it does not", flag,
                  value);
}

/* Checks the defaults of one --help entry: its option names (head) and its
 * text; returns how many it checked. */
static int check_entry_defaults(const char *head, const char *text)
{
    char flags[4][48];
    int nflags = 0;
    for (const char *p = strstr(head, "--"); p && nflags < 4; p = strstr(p + 2, "--"))
        snprintf(flags[nflags++], 48, "%.*s", (int)strcspn(p, " ,"), p);
    const char *d = strstr(text, "(default ");
    if (d) {
        /* "(default 0.9, 0.95)": one value per option of the entry. */
        char list[128];
        snprintf(list, sizeof list, "%.*s", (int)strcspn(d + 9, ")"), d + 9);
        int k = 0;
        char *v = list;
        for (char *next; v && k < nflags; v = next, k++) {
            next = strstr(v, ", ");
            if (next)
                *next = '\0', next += 2;
            check_default(flags[k], v);
        }
        ck_assert_msg(k == nflags && v == NULL, "%s: not one default per option", head);
        return k;
    }
    const char *w = strstr(text, " (default)");
    if (w) {
        /* "megatron (default): ...": the word before names the default. */
        const char *b = w;
        while (b > text && is_word_char(b[-1]))
            b--;
        char word[48];
        snprintf(word, sizeof word, "%.*s", (int)(w - b), b);
        check_default(flags[0], word);
        return 1;
    }
    return 0;
}

START_TEST(help_defaults_are_the_parsers)
{
    char *help = help_text();
    char head[256] = "", text[2048] = "";
    int checked = 0;
    /* An entry starts with "  --" (its options, then two spaces or the end of
     * the line) and goes on in lines indented further. */
    for (char *line = strtok(help, "\n");; line = strtok(NULL, "\n")) {
        if (!line || strncmp(line, "  --", 4) == 0 || strncmp(line, "      ", 6) != 0) {
            if (head[0])
                checked += check_entry_defaults(head, text);
            head[0] = text[0] = '\0';
        }
        if (!line)
            break;
        if (strncmp(line, "  --", 4) == 0) {
            char *end = strstr(line + 2, "  ");
            size_t n = end ? (size_t)(end - line - 2) : strlen(line + 2);
            snprintf(head, sizeof head, "%.*s", (int)n, line + 2);
            snprintf(text, sizeof text, "%s", end ? end : "");
        } else if (head[0]) {
            size_t len = strlen(text);
            snprintf(text + len, sizeof text - len, " %s", line + strspn(line, " "));
        }
    }
    /* Today 24 entries give a default; a parse of the help that found few
     * would be checking nothing. */
    ck_assert_int_ge(checked, 20);
    free(help);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("flags");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, every_flag_in_help);
    tcase_add_test(tc, help_names_only_flags);
    tcase_add_test(tc, man_page_matches_table);
    tcase_add_test(tc, schedule_words_are_the_registry);
    tcase_add_test(tc, help_defaults_are_the_parsers);
    suite_add_tcase(s, tc);
    return tt_check_run(s);
}
