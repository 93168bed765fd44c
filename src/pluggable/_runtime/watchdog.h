/* Watched plugin calls (watchdog.c): a call on the caller's thread that the deadline and
 * Ctrl-C can end. Private to the runtime library. Use:
 *
 *   PG_Watch* w = pg_watch_slot();
 *   if (w != NULL && sigsetjmp(w->env, 0) != 0) { the call was abandoned: w->escape says why }
 *   else { if (w) pg_watch_begin(w); the plugin call; if (w) pg_watch_end(w); }
 *
 * sigsetjmp must be called in the frame that makes the call, hence no wrapper function. */
#ifndef PLUGGABLE_WATCHDOG_H_
#define PLUGGABLE_WATCHDOG_H_

#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L
#error "watchdog.h needs _POSIX_C_SOURCE 200809L before any include"
#endif
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdint.h>

#include "tensorflow/c/c_api_macros.h"

enum { PG_WATCH_RUNNING = 0, PG_WATCH_OVERDUE = 1, PG_WATCH_INTERRUPTED = 2 };

typedef struct PG_Watch {
  sigjmp_buf env;
  atomic_int active;               /* in a watched call */
  atomic_int escape;               /* PG_WATCH_*: why the call is to be abandoned */
  atomic_uint_fast64_t started;    /* the watchdog's tick when the call began */
  pthread_t thread;
} PG_Watch;

/* The calling thread's record (NULL when every slot is taken: the call goes unwatched). */
PG_Watch* pg_watch_slot(void);
void pg_watch_begin(PG_Watch* w);
void pg_watch_end(PG_Watch* w);
/* After an escape: unblocks the signals the handler left blocked. */
void pg_watch_recover(void);
/* The deadline in seconds (0: none). */
double pg_watch_deadline(void);

/* Sets the deadline of watched calls (seconds, 0 for none); `main_thread_here` says the caller
 * is the main thread (Ctrl-C's thread). */
TF_CAPI_EXPORT void pluggable_SetCallDeadline(double seconds, int main_thread_here);

#endif /* PLUGGABLE_WATCHDOG_H_ */
