/* interrupt.c - what a run says when it is stopped from outside: Ctrl-C
 * (mpirun passes it on to every rank as SIGTERM), kill, or a closed
 * terminal. The run still dies of the signal, as the user asked; rank 0
 * first writes one line saying where it was and what is kept, so that an
 * interrupted run is never a silent loss: the last checkpoint and how to
 * continue from it, or that nothing was saved and which flag would have.
 *
 * A signal handler may only call async-signal-safe functions, so the line
 * is put together with write() from a few numbers the run updates as it
 * goes (sig_atomic_t-sized stores of plain longs) and strings fixed before
 * the first step; no stdio, no malloc, no MPI. */
#define _POSIX_C_SOURCE 200809L

#include "tt/app/interrupt.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static struct {
    int speaks;            /* rank 0 writes the line; the others only die */
    const char *save;      /* --save FILE, or NULL */
    long save_every;       /* --save-every K, or 0 */
    long steps;            /* the run's --steps */
    volatile long step;    /* the step being trained, -1 before the first */
    volatile long saved;   /* the step of the last checkpoint, -1 none */
    const char *volatile last; /* its file: --save's, or the one resumed from */
    volatile int finished; /* every step trained: the end's work is running */
} st = {0, NULL, 0, 0, -1, -1, NULL, 0};

/* ---- async-signal-safe output ------------------------------------------------ */

static char line[1400];
static size_t len;

static void put(const char *s)
{
    while (*s && len + 1 < sizeof line)
        line[len++] = *s++;
}

static void put_long(long v)
{
    char d[24];
    int n = 0;
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    do
        d[n++] = (char)('0' + u % 10);
    while ((u /= 10) && n < (int)sizeof d);
    if (v < 0)
        put("-");
    while (n > 0 && len + 1 < sizeof line)
        line[len++] = d[--n];
}

static const struct { int sig; const char *name, *why; } signals[] = {
    {SIGINT, "SIGINT", " (Ctrl-C)"},
    {SIGTERM, "SIGTERM", " (what mpirun sends on Ctrl-C, and kill by default)"},
    {SIGHUP, "SIGHUP", " (the terminal closed)"},
};

static void on_signal(int sig)
{
    const int saved_errno = errno;
    if (st.speaks) {
        len = 0;
        put("tiny_transformer: stopped by ");
        for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
            if (signals[i].sig == sig) {
                put(signals[i].name);
                put(signals[i].why);
            }
        if (st.finished) {
            put(" after its last step");
        } else if (st.step < 0) {
            put(" before its first step");
        } else {
            put(" in step ");
            put_long(st.step);
            put(" of ");
            put_long(st.steps);
        }
        if (st.saved >= 0) {
            put("; the last checkpoint is '");
            put(st.last);
            put("' at step ");
            put_long(st.saved);
            put(": --resume ");
            put(st.last);
            put(" continues from there\n");
        } else if (st.save && st.save_every) {
            put("; no checkpoint written yet (--save-every ");
            put_long(st.save_every);
            put(" writes the first after step ");
            put_long(st.save_every);
            put(")\n");
        } else if (st.save) {
            put("; nothing saved: --save writes '");
            put(st.save);
            put("' at the end, and --save-every K every K steps, which --resume continues\n");
        } else {
            put("; nothing saved (--save FILE --save-every K keeps a checkpoint every K steps, "
                "which --resume continues)\n");
        }
        ssize_t w = write(STDERR_FILENO, line, len);
        (void)w;
    }
    errno = saved_errno;
    /* Die of the signal, as asked: mpirun then reports it as such. */
    signal(sig, SIG_DFL);
    raise(sig);
}

void tt_interrupt_install(int speaks, const char *save, long save_every, long steps,
                          const char *resumed, long resume_step)
{
    st.speaks = speaks;
    st.save = save;
    st.save_every = save_every;
    st.steps = steps;
    st.step = -1;
    st.saved = resumed ? resume_step : -1;
    st.last = resumed;
    st.finished = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        sigaction(signals[i].sig, &sa, NULL);
}

void tt_interrupt_step(long step) { st.step = step; }
void tt_interrupt_saved(long step)
{
    st.last = st.save;
    st.saved = step;
}
void tt_interrupt_finished(void) { st.finished = 1; }
