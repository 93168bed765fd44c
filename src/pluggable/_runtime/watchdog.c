/* watchdog.c: plugin calls that run on the caller's thread and may never return (a kernel's
 * compute), bounded by the deadline and interruptible by Ctrl-C, at no cost a per-op path
 * would notice.
 *
 * A call is watched by a record of its thread (PG_Watch, one slot per thread): entering
 * stores the watchdog's current tick and a sigsetjmp point (no system call), leaving clears
 * the record. A watchdog thread, started with the first watched call, advances the tick every
 * PG_WATCH_TICK_MS and sends the escape signal to a thread whose call has lasted longer than
 * the deadline; Ctrl-C (SIGINT, whose handler is wrapped) sends it to the thread in a watched
 * call. The escape signal's handler jumps back to the sigsetjmp point of a thread in a watched
 * call and does nothing otherwise. The plugin's call is abandoned where it was (its stack
 * frames are dropped, any lock it held stays held), so the plugin is marked stuck and never
 * called again through the kernel API; the rest of the process goes on.
 *
 * Python's signal.signal(SIGINT, ...) installs its own handler over the wrapper. The watchdog
 * puts the wrapper back in front of whatever handler is there, at every tick during which a
 * watched call is running: the check is a system call on the watchdog's thread, never on the
 * caller's, and a Ctrl-C reaches a stuck call from the first tick of that call on. SIGINT
 * ignored (SIG_IGN) or left to its default action (SIG_DFL) is never wrapped, so Ctrl-C then
 * interrupts nothing, or ends the process, as the program asked.
 */
#define _POSIX_C_SOURCE 200809L
#include "watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#define PG_WATCH_SLOTS 1024
#define PG_WATCH_TICK_MS 50

static PG_Watch slots[PG_WATCH_SLOTS];
static atomic_int slots_used[PG_WATCH_SLOTS];
static _Thread_local PG_Watch* my_slot;
static pthread_key_t slot_key;
static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static atomic_uint_fast64_t tick;
static atomic_int_fast64_t deadline_ms = 600000; /* 0: none */
static int escape_signal;
/* The handler the wrapper runs first: previous_sigint[previous_at]. The watchdog writes the
 * other one before it switches, so a Ctrl-C being handled never reads a half-written one. */
static struct sigaction previous_sigint[2];
static atomic_int previous_at;
static pthread_t main_thread;
static atomic_int have_main_thread;

/* The escape signal: back to the watched call's sigsetjmp point, if the thread is in one. */
static void on_escape(int sig) {
  (void)sig;
  PG_Watch* w = my_slot;
  if (w != NULL && atomic_load(&w->active) && atomic_load(&w->escape) != PG_WATCH_RUNNING) {
    atomic_store(&w->active, 0);
    siglongjmp(w->env, 1);
  }
}

/* Ctrl-C: Python's own handler first (it raises KeyboardInterrupt later), then the escape of
 * a thread in a watched call: this one, or the main thread. */
static void on_sigint(int sig, siginfo_t* info, void* context) {
  int saved = errno;
  const struct sigaction* previous = &previous_sigint[atomic_load(&previous_at)];
  if (previous->sa_flags & SA_SIGINFO) {
    if (previous->sa_sigaction != NULL) previous->sa_sigaction(sig, info, context);
  } else if (previous->sa_handler != SIG_IGN && previous->sa_handler != SIG_DFL &&
             previous->sa_handler != NULL) {
    previous->sa_handler(sig);
  }
  PG_Watch* w = my_slot;
  if (w != NULL && atomic_load(&w->active)) {
    atomic_store(&w->escape, PG_WATCH_INTERRUPTED);
    errno = saved;
    on_escape(escape_signal);
    return;
  }
  for (int i = 0; i < PG_WATCH_SLOTS; i++) {
    if (atomic_load(&slots_used[i]) && atomic_load(&slots[i].active) && have_main_thread &&
        pthread_equal(slots[i].thread, main_thread)) {
      atomic_store(&slots[i].escape, PG_WATCH_INTERRUPTED);
      pthread_kill(slots[i].thread, escape_signal);
    }
  }
  errno = saved;
}

/* Whether `a` runs a function (not SIG_DFL, not SIG_IGN). */
static int runs_a_handler(const struct sigaction* a) {
  return (a->sa_flags & SA_SIGINFO) ? a->sa_sigaction != NULL
                                    : a->sa_handler != SIG_IGN && a->sa_handler != SIG_DFL &&
                                          a->sa_handler != NULL;
}

static int is_wrapper(const struct sigaction* a) {
  return (a->sa_flags & SA_SIGINFO) && a->sa_sigaction == on_sigint;
}

static int same_action(const struct sigaction* a, const struct sigaction* b) {
  if ((a->sa_flags & SA_SIGINFO) != (b->sa_flags & SA_SIGINFO)) return 0;
  return (a->sa_flags & SA_SIGINFO) ? a->sa_sigaction == b->sa_sigaction
                                    : a->sa_handler == b->sa_handler;
}

/* Makes `a` the handler the wrapper runs first. */
static void set_previous(const struct sigaction* a) {
  int spare = 1 - atomic_load(&previous_at);
  previous_sigint[spare] = *a;
  atomic_store(&previous_at, spare);
}

/* Puts the wrapper in front of SIGINT's handler, unless it is there already or SIGINT is
 * ignored or left to its default action. A handler installed between the look and the swap
 * becomes the previous one; an SIG_IGN or SIG_DFL installed then is put back. */
static void wrap_sigint(void) {
  struct sigaction current, replaced;
  if (sigaction(SIGINT, NULL, &current) != 0 || is_wrapper(&current) ||
      !runs_a_handler(&current)) {
    return;
  }
  set_previous(&current);
  struct sigaction wrapped;
  memset(&wrapped, 0, sizeof wrapped);
  wrapped.sa_sigaction = on_sigint;
  wrapped.sa_flags = SA_SIGINFO;
  sigemptyset(&wrapped.sa_mask);
  if (sigaction(SIGINT, &wrapped, &replaced) != 0 || same_action(&replaced, &current)) return;
  if (runs_a_handler(&replaced)) {
    set_previous(&replaced);
  } else {
    sigaction(SIGINT, &replaced, NULL);
  }
}

static void release_slot(void* slot) {
  PG_Watch* w = slot;
  atomic_store(&w->active, 0);
  atomic_store(&slots_used[w - slots], 0);
}

static void* watchdog_main(void* arg) {
  (void)arg;
  struct timespec pause = {0, PG_WATCH_TICK_MS * 1000000L};
  for (;;) {
    nanosleep(&pause, NULL);
    uint64_t now = atomic_fetch_add(&tick, 1) + 1;
    int64_t limit = atomic_load(&deadline_ms);
    uint64_t ticks = (uint64_t)(limit + PG_WATCH_TICK_MS - 1) / PG_WATCH_TICK_MS;
    int watching = 0;
    for (int i = 0; i < PG_WATCH_SLOTS; i++) {
      PG_Watch* w = &slots[i];
      if (!atomic_load(&slots_used[i]) || !atomic_load(&w->active)) continue;
      watching = 1;
      if (limit > 0 && now - atomic_load(&w->started) > ticks &&
          atomic_load(&w->escape) == PG_WATCH_RUNNING) {
        atomic_store(&w->escape, PG_WATCH_OVERDUE);
        pthread_kill(w->thread, escape_signal);
      }
    }
    if (watching) wrap_sigint();
  }
  return NULL;
}

static void start(void) {
  pthread_key_create(&slot_key, release_slot);
#ifdef SIGRTMIN
  escape_signal = SIGRTMIN + 4;
#else
  escape_signal = SIGUSR2;
#endif
  struct sigaction escape;
  memset(&escape, 0, sizeof escape);
  escape.sa_handler = on_escape;
  sigemptyset(&escape.sa_mask);
  sigaction(escape_signal, &escape, NULL);
  wrap_sigint();
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_t thread;
  pthread_create(&thread, &attr, watchdog_main, NULL);
  pthread_attr_destroy(&attr);
}

PG_Watch* pg_watch_slot(void) {
  PG_Watch* w = my_slot;
  if (w != NULL) return w;
  pthread_once(&start_once, start);
  for (int i = 0; i < PG_WATCH_SLOTS; i++) {
    int free_slot = 0;
    if (atomic_compare_exchange_strong(&slots_used[i], &free_slot, 1)) {
      w = &slots[i];
      atomic_store(&w->active, 0);
      w->thread = pthread_self();
      my_slot = w;
      pthread_setspecific(slot_key, w);
      return w;
    }
  }
  return NULL; /* more threads than slots: their calls are not watched */
}

void pg_watch_begin(PG_Watch* w) {
  atomic_store_explicit(&w->escape, PG_WATCH_RUNNING, memory_order_relaxed);
  atomic_store_explicit(&w->started, atomic_load_explicit(&tick, memory_order_relaxed),
                        memory_order_relaxed);
  atomic_store_explicit(&w->active, 1, memory_order_release);
}

void pg_watch_end(PG_Watch* w) { atomic_store_explicit(&w->active, 0, memory_order_release); }

void pluggable_SetCallDeadline(double seconds, int main_thread_here) {
  atomic_store(&deadline_ms, seconds > 0 ? (int64_t)(seconds * 1000.0 + 0.5) : 0);
  if (main_thread_here && !atomic_load(&have_main_thread)) {
    main_thread = pthread_self();
    atomic_store(&have_main_thread, 1);
  }
}

void pg_watch_recover(void) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, escape_signal);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

double pg_watch_deadline(void) { return (double)atomic_load(&deadline_ms) / 1000.0; }
