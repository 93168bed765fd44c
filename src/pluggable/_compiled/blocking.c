/* Blocking plugin calls with a deadline: `bounded_call` runs `void fn(const SP_Device*,
 * TF_Status*)` (SP_StreamExecutor.synchronize_all_activity, which has no status to poll), or a
 * call of the same shape (destroy_stream's device and stream handle, two pointers), on a
 * helper thread, and the caller gives up when the call has not returned within its timeout.
 * A call given up on is abandoned, not cancelled: it goes on on its helper, and the status it
 * was given stays its own (the caller must neither free nor reuse it).
 *
 * Helpers are detached pthreads kept in a process-wide pool: one whose call returned waits
 * for the next, and a call takes an idle helper or starts one when none is idle. A job (one
 * call) is counted by its two holders, the caller and the helper; whichever lets go last
 * frees it, so a caller that gave up and a helper that comes back much later free it exactly
 * once between them. A helper puts itself back on the idle list before it tells the caller
 * that the call returned: a caller that comes straight back for the next call finds it there.
 *
 * The caller releases the GIL for the whole wait (a plugin's synchronize may wait for a
 * stream whose next item is a Python host callback, which needs it) and waits in two steps:
 * it spins, with the CPU's pause instruction, on the job's `done` flag for at most `spin_ns`
 * (SPIN_NS_DEFAULT, 50 µs), then sleeps on the job's condition variable (CLOCK_MONOTONIC)
 * until the deadline. The spin is there because waking a sleeping thread is what a hand-off
 * costs on a small virtual machine, and how much depends on whether the sleeper's vCPU has
 * halted: on the 2-vCPU KVM guest this was written on, a C pthread condition-variable
 * ping-pong where both sides sleep took about 53 µs a round trip in one measurement and 9-10
 * µs in another, and 4-5 µs when the side waiting for the answer spins.
 * The budget, measured there: idle `device.synchronize()` with the default deadline, best of
 * 5 runs of 2000 calls, 24 such figures per budget (4 processes, budgets interleaved):
 *
 *   budget                        0 µs    5 µs   20 µs   50 µs  100 µs
 *   median                        11.5    13.6    13.0    13.2    12.9 µs
 *   worst                         69      56      38      16      16 µs
 *   figures of 24 above 20 µs     10      11       2       0       0
 *
 * Without a spin (or with one shorter than the helper's wake-up) the caller sleeps, and in
 * about 4 of 10 runs every call then paid a halted vCPU's wake-up (45-69 µs a call; the
 * Python helper this replaces cost 77); from 50 µs no run did. A call that takes longer than
 * the budget pays the spin on top (at most `spin_ns` of one CPU, once per call) and the
 * sleeping hand-off it would have paid anyway. The helper still sleeps between calls and is
 * woken once per call: only the caller spins. `bounded_call_spin(seconds)` changes the
 * budget (for measurements like the one above).
 *
 * While it sleeps the caller takes the GIL back every CHECK_NS to run the signal handlers
 * (on the main thread, Ctrl-C): a handler that raises abandons the call as a deadline would,
 * and the exception is raised.
 *
 * After fork() only the forking thread exists in the child: a pthread_atfork handler forgets
 * the parent's helpers (their memory is left alone), so the child starts its own. */
#include "compiled_internal.h" /* Python.h first; it defines _GNU_SOURCE (pthread_setname_np) */

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensorflow/c/experimental/stream_executor/stream_executor.h"

#define SPIN_NS_DEFAULT 50000LL
/* How often a sleeping caller runs the signal handlers. */
#define CHECK_NS 100000000ULL
/* Idle helpers kept; a helper that returns to a full idle list ends. */
#define IDLE_MAX 8u
/* Timeouts from here on (about 31 years) are no deadline at all. */
#define FOREVER_SECONDS 1e9

typedef void (*BlockingFn)(const SP_Device*, TF_Status*);

struct PgJob {
  BlockingFn fn; /* a bounded call's: fn(device, status) */
  const SP_Device* device;
  TF_Status* status;
  void (*run)(void*); /* else a job of pg_job_new: run(work), work_free(work) with the job */
  void* work;
  void (*work_free)(void*);
  atomic_int done;    /* set, under mu, once fn returned */
  atomic_int holders; /* the caller and the helper; the last to let go frees the job */
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC: signalled when done is set */
};
typedef struct PgJob Job;

typedef struct Helper {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* signalled when job is set */
  Job* job;          /* the next call, under mu */
  struct Helper* next_idle;
} Helper;

static struct {
  pthread_mutex_t mu;
  Helper* idle;
  unsigned idle_count;
  unsigned long long started;  /* helpers this process started */
  unsigned long long in_calls; /* helpers in a call (given up on or not) */
} pool = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0};

static pthread_condattr_t monotonic_clock;
static atomic_llong spin_ns = SPIN_NS_DEFAULT;

/* Reads CLOCK_MONOTONIC in nanoseconds. */
static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/* Hints the CPU that this is a spin-wait loop. */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static void job_free(Job* job) {
  if (job->work_free != NULL) job->work_free(job->work);
  pthread_cond_destroy(&job->cv);
  pthread_mutex_destroy(&job->mu);
  free(job);
}

/* One holder lets go of the job; the last one frees it. */
static void job_release(Job* job) {
  if (atomic_fetch_sub_explicit(&job->holders, 1, memory_order_acq_rel) == 1) job_free(job);
}

/* Out of its call and back on the idle list, or 0 when the list is full (the helper then
 * ends). */
static int become_idle(Helper* self) {
  pthread_mutex_lock(&pool.mu);
  pool.in_calls--;
  int kept = pool.idle_count < IDLE_MAX;
  if (kept) {
    self->next_idle = pool.idle;
    pool.idle = self;
    pool.idle_count++;
  }
  pthread_mutex_unlock(&pool.mu);
  return kept;
}

/* Tells the caller the call returned, and lets go of the job. */
static void finish(Job* job) {
  pthread_mutex_lock(&job->mu);
  atomic_store_explicit(&job->done, 1, memory_order_release);
  pthread_cond_signal(&job->cv);
  pthread_mutex_unlock(&job->mu);
  job_release(job);
}

static void helper_free(Helper* helper) {
  pthread_cond_destroy(&helper->cv);
  pthread_mutex_destroy(&helper->mu);
  free(helper);
}

/* A helper thread: runs the calls it is handed, one at a time. */
static void* helper_main(void* arg) {
  Helper* self = arg;
#ifdef __linux__
  pthread_setname_np(pthread_self(), "pluggable-block");
#endif
  pthread_mutex_lock(&self->mu);
  for (;;) {
    while (self->job == NULL) pthread_cond_wait(&self->cv, &self->mu);
    Job* job = self->job;
    self->job = NULL;
    pthread_mutex_unlock(&self->mu);
    if (job->run != NULL) job->run(job->work);
    else job->fn(job->device, job->status);
    int kept = become_idle(self);
    finish(job);
    if (!kept) {
      helper_free(self);
      return NULL;
    }
    pthread_mutex_lock(&self->mu);
  }
}

/* Hands `job` to an idle helper, or to a new one; 0, or the error of pthread_create. */
static int hand_over(Job* job) {
  pthread_mutex_lock(&pool.mu);
  Helper* helper = pool.idle;
  if (helper != NULL) {
    pool.idle = helper->next_idle;
    pool.idle_count--;
    pool.in_calls++;
  }
  pthread_mutex_unlock(&pool.mu);
  if (helper != NULL) {
    pthread_mutex_lock(&helper->mu);
    helper->job = job;
    pthread_cond_signal(&helper->cv);
    pthread_mutex_unlock(&helper->mu);
    return 0;
  }
  helper = calloc(1, sizeof *helper);
  if (helper == NULL) return ENOMEM;
  int err = pthread_mutex_init(&helper->mu, NULL);
  if (err != 0) {
    free(helper);
    return err;
  }
  err = pthread_cond_init(&helper->cv, NULL);
  if (err != 0) {
    pthread_mutex_destroy(&helper->mu);
    free(helper);
    return err;
  }
  helper->job = job;
  pthread_attr_t attr;
  err = pthread_attr_init(&attr);
  if (err == 0) {
    err = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    if (err == 0) err = pthread_create(&thread, &attr, helper_main, helper);
    pthread_attr_destroy(&attr);
  }
  if (err != 0) {
    helper_free(helper);
    return err;
  }
  pthread_mutex_lock(&pool.mu);
  pool.started++;
  pool.in_calls++;
  pthread_mutex_unlock(&pool.mu);
  return 0;
}

static struct timespec to_timespec(uint64_t ns) {
  struct timespec ts;
  ts.tv_sec = (time_t)(ns / UINT64_C(1000000000));
  ts.tv_nsec = (long)(ns % UINT64_C(1000000000));
  return ts;
}

/* A job for one call, held by its caller and the helper that will run it; NULL when out of
 * memory. */
static Job* job_new(void) {
  Job* job = calloc(1, sizeof *job);
  if (job == NULL) return NULL;
  if (pthread_mutex_init(&job->mu, NULL) != 0) {
    free(job);
    return NULL;
  }
  if (pthread_cond_init(&job->cv, &monotonic_clock) != 0) {
    pthread_mutex_destroy(&job->mu);
    free(job);
    return NULL;
  }
  atomic_init(&job->done, 0);
  atomic_init(&job->holders, 2);
  return job;
}

/* The deadline `timeout` seconds after `started` (UINT64_MAX: none). */
static uint64_t deadline_after(uint64_t started, double timeout) {
  return timeout >= FOREVER_SECONDS ? UINT64_MAX : started + (uint64_t)(timeout * 1e9);
}

/* Waits for the job, without the GIL (*thread is the caller's saved thread state): 1 once it
 * is done, 0 at `deadline` (UINT64_MAX: none), -1 when a signal handler raised (with the
 * GIL, and the exception set). */
static int wait_for(Job* job, uint64_t started, uint64_t deadline, PyThreadState** thread) {
  uint64_t spin_until = started + (uint64_t)atomic_load_explicit(&spin_ns, memory_order_relaxed);
  if (spin_until > deadline) spin_until = deadline;
  for (unsigned i = 1;; i++) {
    if (atomic_load_explicit(&job->done, memory_order_acquire)) return 1;
    cpu_relax();
    if ((i & 15) == 0 && now_ns() >= spin_until) break;
  }
  pthread_mutex_lock(&job->mu);
  for (;;) {
    uint64_t now = now_ns();
    uint64_t check = now + CHECK_NS;
    uint64_t wake = check < deadline ? check : deadline;
    while (!atomic_load_explicit(&job->done, memory_order_acquire) && now < wake) {
      struct timespec until = to_timespec(wake);
      pthread_cond_timedwait(&job->cv, &job->mu, &until);
      now = now_ns();
    }
    if (atomic_load_explicit(&job->done, memory_order_acquire)) break;
    if (now >= deadline) break;
    pthread_mutex_unlock(&job->mu);
    PyEval_RestoreThread(*thread);
    if (PyErr_CheckSignals() < 0) return -1;
    *thread = PyEval_SaveThread();
    pthread_mutex_lock(&job->mu);
  }
  int done = atomic_load_explicit(&job->done, memory_order_acquire);
  pthread_mutex_unlock(&job->mu);
  return done;
}

/* An address argument of `who`: an int that fits a pointer, nonzero unless `may_be_null`. */
int pg_address_argument(PyObject* value, const char* who, const char* name, void** out,
                        int may_be_null) {
  if (!PyLong_Check(value)) {
    PyErr_Format(PyExc_TypeError, "%s: %s must be an int (an address), not %.100s", who, name,
                 Py_TYPE(value)->tp_name);
    return -1;
  }
  unsigned long long address = PyLong_AsUnsignedLongLong(value);
  if (address == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Format(PyExc_ValueError, "%s: %s must be an address from 1 to 2**64-1, not %R", who,
                 name, value);
    return -1;
  }
  if (address == 0 && !may_be_null) {
    PyErr_Format(PyExc_ValueError, "%s: %s is 0 (a NULL pointer)", who, name);
    return -1;
  }
  if ((unsigned long long)(uintptr_t)address != address) {
    PyErr_Format(PyExc_ValueError, "%s: %s %R does not fit a pointer", who, name, value);
    return -1;
  }
  *out = (void*)(uintptr_t)address;
  return 0;
}

/* bounded_call(fn_address, device_address, status_address, timeout) -> bool */
static PyObject* fast_bounded_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 4) {
    PyErr_Format(PyExc_TypeError, "bounded_call(fn_address, device_address, status_address, "
                 "timeout) takes 4 arguments (%zd given)", nargs);
    return NULL;
  }
  void *fn, *device, *status;
  /* The second argument may be NULL: destroy_stream(device, stream) is called this way too,
   * and a plugin may use NULL as a stream handle. */
  if (pg_address_argument(args[0], "bounded_call", "fn_address", &fn, 0) < 0 ||
      pg_address_argument(args[1], "bounded_call", "device_address", &device, 0) < 0 ||
      pg_address_argument(args[2], "bounded_call", "status_address", &status, 1) < 0) {
    return NULL;
  }
  double timeout = PyFloat_AsDouble(args[3]);
  if (timeout == -1.0 && PyErr_Occurred()) return NULL;
  if (!(timeout >= 0)) { /* also NaN */
    PyErr_Format(PyExc_ValueError, "bounded_call: timeout must be 0 or more seconds, not %R",
                 args[3]);
    return NULL;
  }
  Job* job = job_new();
  if (job == NULL) return PyErr_NoMemory();
  *(void**)&job->fn = fn;
  job->device = device;
  job->status = status;

  PyThreadState* thread = PyEval_SaveThread();
  uint64_t started = now_ns();
  int err = hand_over(job);
  int outcome = err != 0 ? 0 : wait_for(job, started, deadline_after(started, timeout), &thread);
  if (outcome >= 0) PyEval_RestoreThread(thread);
  if (err != 0) {
    job_free(job); /* never handed over */
    PyErr_Format(PyExc_RuntimeError, "bounded_call: cannot start a helper thread: %s",
                 strerror(err));
    return NULL;
  }
  job_release(job);
  if (outcome < 0) return NULL;
  return PyBool_FromLong(outcome);
}

/* ---- jobs of the other parts (compiled_internal.h) ------------------------------------ */

PgJob* pg_job_new(void (*run)(void*), void* work, void (*work_free)(void*)) {
  Job* job = job_new();
  if (job == NULL) return NULL;
  job->run = run;
  job->work = work;
  job->work_free = work_free;
  return job;
}

int pg_job_start(PgJob* job, uint64_t* started) {
  *started = now_ns();
  return hand_over(job);
}

int pg_job_wait(PgJob* job, uint64_t started, double timeout) {
  PyThreadState* thread = PyEval_SaveThread();
  int outcome = wait_for(job, started, deadline_after(started, timeout), &thread);
  if (outcome >= 0) PyEval_RestoreThread(thread);
  return outcome;
}

int pg_job_done(PgJob* job) { return atomic_load_explicit(&job->done, memory_order_acquire); }

void pg_job_release(PgJob* job) { job_release(job); }

void pg_job_discard(PgJob* job) { job_free(job); }

/* bounded_call_spin([seconds]) -> the budget before the call */
static PyObject* fast_bounded_call_spin(PyObject* self, PyObject* const* args,
                                        Py_ssize_t nargs) {
  (void)self;
  if (nargs > 1) {
    PyErr_SetString(PyExc_TypeError, "bounded_call_spin([seconds]) takes at most one argument");
    return NULL;
  }
  double before = (double)atomic_load_explicit(&spin_ns, memory_order_relaxed) / 1e9;
  if (nargs == 1) {
    double seconds = PyFloat_AsDouble(args[0]);
    if (seconds == -1.0 && PyErr_Occurred()) return NULL;
    if (!(seconds >= 0 && seconds <= 1)) {
      PyErr_Format(PyExc_ValueError,
                   "bounded_call_spin: the budget must be 0 to 1 seconds, not %R", args[0]);
      return NULL;
    }
    atomic_store_explicit(&spin_ns, (long long)(seconds * 1e9), memory_order_relaxed);
  }
  return PyFloat_FromDouble(before);
}

/* bounded_call_helpers() -> (started, idle, in_calls) */
static PyObject* fast_bounded_call_helpers(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  pthread_mutex_lock(&pool.mu);
  unsigned long long started = pool.started, in_calls = pool.in_calls;
  unsigned idle = pool.idle_count;
  pthread_mutex_unlock(&pool.mu);
  return Py_BuildValue("(KIK)", started, idle, in_calls);
}

/* In a forked child: the helpers were the parent's threads and do not exist here. Their
 * memory is left alone (an idle helper's lock may be held by nobody in particular). */
static void forget_helpers(void) {
  pthread_mutex_init(&pool.mu, NULL);
  pool.idle = NULL;
  pool.idle_count = 0;
  pool.started = 0;
  pool.in_calls = 0;
}

static int setup_error;

static void setup(void) {
  setup_error = pthread_condattr_init(&monotonic_clock);
  if (setup_error == 0) setup_error = pthread_condattr_setclock(&monotonic_clock, CLOCK_MONOTONIC);
  if (setup_error == 0) setup_error = pthread_atfork(NULL, NULL, forget_helpers);
}

int pg_blocking_init(PyObject* module) {
  (void)module;
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, setup);
  if (setup_error != 0) {
    PyErr_Format(PyExc_ImportError, "pluggable._compiled: cannot set up bounded calls: %s",
                 strerror(setup_error));
    return -1;
  }
  return 0;
}

PyMethodDef pg_blocking_methods[] = {
    {"bounded_call", (PyCFunction)(void (*)(void))fast_bounded_call, METH_FASTCALL,
     "bounded_call(fn_address, device_address, status_address, timeout) -> bool: calls "
     "void fn(const SP_Device*, TF_Status*) on a helper thread, without the GIL; True when it "
     "returned within timeout seconds, False when not (the call is abandoned: it goes on with "
     "the status, which must then be neither freed nor reused)."},
    {"bounded_call_spin", (PyCFunction)(void (*)(void))fast_bounded_call_spin, METH_FASTCALL,
     "bounded_call_spin([seconds]): how long a bounded call spins for the result before it "
     "sleeps (the budget before the call); sets it when given."},
    {"bounded_call_helpers", (PyCFunction)fast_bounded_call_helpers, METH_NOARGS,
     "bounded_call_helpers() -> (started, idle, in_calls): helper threads this process "
     "started, those waiting for a call, and those in a call (one given up on included)."},
    {NULL, NULL, 0, NULL}};
