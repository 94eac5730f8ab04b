/* interrupt.c - what a run says when it is stopped from outside: Ctrl-C
 * (mpirun passes it on to every rank as SIGTERM, as it does when another
 * rank has failed), kill, or a closed terminal. The run still dies of the
 * signal, as the user asked; rank 0 first writes one line saying where it
 * was and what is kept, so that an interrupted run is never a silent loss:
 * the last checkpoint and the --resume that continues it, or that nothing
 * was saved and which flags would have.
 *
 * A signal handler may only call async-signal-safe functions, so the line
 * is put together with write() from a few numbers and strings the run
 * publishes as it goes; no stdio, no malloc, no MPI. A checkpoint is
 * published in two steps, "being written" before the save and "written"
 * after it, each as one store of an index into slots the handler only reads,
 * so a signal between any two stores still sees a consistent pair: a save
 * that may or may not have reached its rename is said to be either. */
#define _POSIX_C_SOURCE 200809L

#include "tt/app/interrupt.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

/* What the run has kept: a checkpoint file and its step, and the step a
 * save under way will give the file (0 when none is under way). */
typedef struct {
    const char *file; /* NULL: nothing kept */
    long step;
    long saving;
} kept;

static struct {
    int speaks;          /* rank 0 writes the line; the others only die */
    const char *save;    /* --save FILE, or NULL */
    long save_every;     /* --save-every K, or 0 */
    long steps;          /* the run's --steps */
    volatile long step;  /* the step being trained, -1 before the first */
    volatile sig_atomic_t finished; /* every step trained: the run's end is under way */
    kept slot[2];        /* the handler reads slot[cur]; the run fills the other, then flips */
    volatile sig_atomic_t cur;
} st;

static void publish(const char *file, long step, long saving)
{
    const int next = !st.cur;
    st.slot[next] = (kept){file, step, saving};
    st.cur = next;
}

/* ---- async-signal-safe output ------------------------------------------------ */

static char line[1024];
static size_t len;

/* Room is kept for the newline that ends the line, whatever is cut. */
static void put(const char *s)
{
    while (*s && len + 2 < sizeof line)
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
    while (n > 0 && len + 2 < sizeof line)
        line[len++] = d[--n];
}

/* The command that continues from a checkpoint, quoted for pasting. */
static void put_resume(const char *file)
{
    put(": --resume '");
    put(file);
    put("' continues from there");
}

static const struct { int sig; const char *name, *why; } signals[] = {
    {SIGINT, "SIGINT", " (Ctrl-C)"},
    {SIGTERM, "SIGTERM", " (sent by mpirun on Ctrl-C or when another rank failed, and by kill)"},
    {SIGHUP, "SIGHUP", " (the terminal closed)"},
};

static void say(int sig)
{
    const kept k = st.slot[st.cur];
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
    if (k.saving) {
        put("; '");
        put(st.save);
        put("' holds step ");
        put_long(k.saving);
        put(" if the save under way finished");
        if (!k.file) {
            put(", else nothing was saved");
        } else if (k.file == st.save) {
            put(", else step ");
            put_long(k.step);
            put_resume(st.save);
        } else {
            put("; else the last checkpoint is '");
            put(k.file);
            put("' at step ");
            put_long(k.step);
        }
    } else if (k.file) {
        put("; the last checkpoint holds step ");
        put_long(k.step);
        put_resume(k.file);
    } else if (st.save && st.save_every) {
        put("; no checkpoint written yet (--save-every ");
        put_long(st.save_every);
        put(" writes the first after step ");
        put_long(st.save_every);
        put(")");
    } else if (st.save) {
        put("; nothing saved: --save writes its file at the end, and --save-every K every K "
            "steps, which --resume continues");
    } else {
        put("; nothing saved (--save FILE --save-every K keeps a checkpoint every K steps, "
            "which --resume continues)");
    }
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

static void on_signal(int sig)
{
    /* One line, from the first signal on the first thread to get one: the
     * others wait for that thread's raise to end the process. */
    static volatile int entered;
    if (__atomic_exchange_n(&entered, 1, __ATOMIC_SEQ_CST))
        for (;;)
            pause();
    const int saved_errno = errno;
    if (st.speaks)
        say(sig);
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
    st.finished = 0;
    publish(resumed, resumed ? resume_step : 0, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        sigaddset(&sa.sa_mask, signals[i].sig);
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) {
        /* A signal the run was started ignoring (nohup, a background job
         * of a script) stays ignored: that was asked too. */
        struct sigaction old;
        if (sigaction(signals[i].sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaction(signals[i].sig, &sa, NULL);
    }
}

void tt_interrupt_step(long step) { st.step = step; }

void tt_interrupt_saving(long step)
{
    const kept k = st.slot[st.cur];
    publish(k.file, k.step, step);
}

void tt_interrupt_saved(long step) { publish(st.save, step, 0); }

void tt_interrupt_finished(void) { st.finished = 1; }
