/* tt/app/interrupt.h - one line from rank 0 when a signal (Ctrl-C, kill, a closed
 * terminal) stops a run: where it was and which checkpoint is kept. The run
 * still dies of the signal; interrupt.c says why and how. */
#ifndef TT_APP_INTERRUPT_H
#define TT_APP_INTERRUPT_H

/* Installs the handlers for SIGINT, SIGTERM and SIGHUP. speaks: this rank
 * writes the line (rank 0). save, save_every, steps: the run's flags;
 * resumed (or NULL) and resume_step: the checkpoint it started from, the
 * last one kept until the run writes its own. */
void tt_interrupt_install(int speaks, const char *save, long save_every, long steps,
                          const char *resumed, long resume_step);
/* The run is training step `step` (from 0). */
void tt_interrupt_step(long step);
/* A save of the state before step `step` to --save's file begins (the
 * file may or may not hold it until tt_interrupt_saved says it does). */
void tt_interrupt_saving(long step);
/* A checkpoint of the state before step `step` is in --save's file. */
void tt_interrupt_saved(long step);
/* Every step is trained; what runs now is the run's end. */
void tt_interrupt_finished(void);

#endif
