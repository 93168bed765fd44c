/* xpu_stream.c: streams, events, timers and everything enqueued on a stream.
 *
 * Each SP_Stream is a FIFO of operations drained by its own worker thread. The host's calls
 * validate their arguments, append an operation and return; the worker runs operations one at
 * a time, in order, and broadcasts XpuDevice.state_cv after one that may end somebody's wait
 * (the host in block_host_*, other workers in a wait; progress_wakes), who then re-checks its
 * condition. A
 * worker whose queue ran empty spins, naps (a timed wait) or sleeps on its stream's work_cv
 * depending on how work has been arriving (wait_for_work); a sleeping worker is signalled by
 * the next enqueue, a napping one by a host thread that starts to wait.
 *
 * Kernels (xpu_kernels*.c) enqueue a function and its argument: a heap block the stream frees
 * after the run (xpu_stream_enqueue_fn), or a struct copied into the operation record
 * (xpu_stream_enqueue_work). Finished records return to a per-stream free list with their
 * buffers, so steady work allocates nothing. The worker runs the function without the device
 * lock; a function that reports an error puts the stream in its error state. Kernels find the device of the
 * SP_Stream they are handed through a global registry of live streams, which also keeps the
 * kernels' helper-thread pool alive while any stream exists.
 *
 * A copy is a single memmove of the whole range; a memcpy_dtod whose source or destination
 * lies in a peer device of the same platform (PLUGGABLE_PLATFORM_PEER_DTOD) is validated
 * against that device when it is enqueued and carries a pin on its arena mapping, dropped
 * once it ran.
 *
 * Ordering is tracked with tickets: every operation gets the next device-wide ticket when it
 * is enqueued and stays at the head of its queue until it has finished, so "all work enqueued
 * on S before now is done" means "S's head ticket is past the last ticket S had".
 *
 * Events count their recordings: record_event bumps `recorded_gen` and the worker raises
 * `completed_gen` when it reaches the recording. A wait captures the generation current when
 * it is enqueued (the CUDA rule) and lets its stream continue once that generation, or a later
 * one, has completed; a wait on a never-recorded event (generation 0) passes at once.
 * create_stream_dependency records a private event on `other` and waits for it on `dependent`.
 *
 * Across devices of one platform (TensorFlow's copies between two devices): a stream may wait
 * for a stream or an event of another device, and record another device's event. Such
 * handles are found through plugin-wide registries of live streams and events (their own
 * lock, taken before any device lock), and an event's state stays guarded by its own
 * device's lock: a worker that records or waits for another device's event drops its own
 * device's lock, takes the event's device's (waiting on that device's state_cv), and retakes
 * its own after, so no thread ever holds two device locks. A copy (memcpy_dtod) may read
 * from or write into a peer device's arena, pinned until it ran.
 *
 * A stream that fails keeps the first error until it is destroyed. After that the worker skips
 * copies, fills, waits and timer marks; recordings still complete, as SE_EVENT_ERROR carrying
 * the stream's error, so that nobody waiting on them hangs; host callbacks still run (with an
 * OK status), because hosts release resources in them. A stream that waits on an errored
 * event takes the event's error.
 *
 * Profiling (xpu_profiler.c): while a session runs, the worker stamps each operation's start
 * and end (CLOCK_REALTIME) and appends an event to its stream's XpuProfStream buffer; a kernel
 * enqueued during a session carries a copy of its node name for that event. Without a session
 * the worker pays one relaxed atomic load per operation, and enqueueing nothing.
 */
#include "xpu_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum OpKind {
  OP_COPY,
  OP_FILL,
  OP_RECORD,
  OP_WAIT,
  OP_TIMER_START,
  OP_TIMER_STOP,
  OP_CALLBACK,
  OP_FN, /* kernel work: fn(arg), then free_arg(arg) */
} OpKind;

typedef struct XpuOp {
  struct XpuOp* next;
  OpKind kind;
  const char* name; /* the API call that enqueued it, for error messages */
  uint64_t ticket;
  bool internal; /* plugin bookkeeping: not counted by the `stream` fault kind */
  char* prof_name; /* OP_FN enqueued during a profiling session: the node name, else NULL */
  uint64_t launch; /* OP_FN: the host's correlation id of the launch (0: none) */
  union {
    /* `pin` / `dst_pin`: the source's / destination's device mapping, pinned for a peer
     * copy (else NULL). `direction`: which of the profiler's memcpy kinds it is. */
    struct {
      void* dst; const void* src; uint64_t size; XpuMapping* pin; XpuMapping* dst_pin;
      XpuProfKind direction;
    } copy;
    struct { void* dst; uint32_t pattern; unsigned width; uint64_t size; } fill;
    struct { SP_Event event; uint64_t gen; } event; /* OP_RECORD, OP_WAIT */
    SP_Timer timer;
    struct { SE_StatusCallbackFn fn; void* arg; } callback;
    /* `arg` is `payload` when the work was copied in (xpu_stream_enqueue_work): then
     * free_arg, if any, releases what the work owns, not the block itself. */
    struct { XpuStreamFn fn; void* arg; void (*free_arg)(void*); bool in_payload; } work;
  } u;
  /* A buffer the operation keeps when it is recycled, for kernels' work copied in. */
  void* payload;
  size_t payload_size;
} XpuOp;

/* Fields are guarded by dev->mu unless noted. */
struct SP_Stream_st {
  XpuDevice* dev; /* immutable */
  uint64_t id;    /* immutable, for messages */
  pthread_t thread;
  pthread_cond_t work_cv; /* signalled when work arrives or the stream shuts down */
  XpuOp* head;            /* the operation running or next to run */
  XpuOp* tail;
  uint64_t last_ticket;
  int host_waiters; /* host threads blocked on this stream; destroy waits for them */
  bool closing;     /* destroy_stream has begun: no new work, lookups fail */
  bool shutdown;    /* the worker exits once the queue is empty */
  TF_Code error_code; /* TF_OK until an operation fails, then sticky */
  char* error_message;
  bool inline_running;      /* a host thread runs the head operation itself (submit) */
  bool sleeping;            /* the worker waits on work_cv: enqueue must wake it */
  bool napping;             /* the worker naps on work_cv with a timeout: only a waiter wakes it */
  atomic_uint_fast64_t enqueued; /* operations ever enqueued; read unlocked while spinning */
  /* `enqueued` when a host thread last blocked on this stream's work: if the host waits after
   * nearly every operation, the worker's reaction time is the host's latency. */
  uint_fast64_t host_wait_mark;
  /* Finished operation records kept for reuse, with their payloads (at most
   * XPU_FREE_OPS_MAX), so that a steady stream of work allocates nothing. */
  XpuOp* free_ops;
  unsigned free_count;
  /* The worker's wait policy (wait_for_work); touched by the worker only. */
  uint64_t spin_credit_ns; /* spinning it may still do in throughput mode */
  uint64_t credit_stamp_ns; /* when the credit was last refilled */
  bool work_came_fast;     /* the last wait ended with work within XPU_WORKER_SPIN_NS */
  bool batching;           /* the last wait found work: nap (timed) rather than sleep */
  XpuProfStream* prof; /* immutable; NULL when it could not be allocated (not profiled) */
};

/* Guarded by dev->mu. */
struct SP_Event_st {
  XpuDevice* dev;
  int refs; /* the host's handle (unless internal) + every queued operation using it */
  uint64_t recorded_gen;
  uint64_t completed_gen;
  TF_Code error_code; /* of the latest completed recording */
  char* error_message;
};

/* Guarded by g_timer_mu: nanoseconds() has no device argument, so timers live in a global
 * registry instead of a per-device one. */
struct SP_Timer_st {
  XpuDevice* dev;
  int refs;
  bool started;
  bool stopped;
  uint64_t start_ns;
  uint64_t stop_ns;
};

/* Operation records taken from the C library (XPU_OpRecordAllocations). */
static atomic_uint_fast64_t g_op_allocations;

static pthread_mutex_t g_timer_mu = PTHREAD_MUTEX_INITIALIZER;
static XpuPtrSet g_timers;
/* Every live SP_Stream of every device, for kernels, which get a stream but no device. A
 * stream is listed from the end of create_stream until just before destroy_stream frees it,
 * and a device outlives its streams, so while this lock is held a listed stream and its
 * device are alive. Taken before a device's mu, never under it. */
static pthread_mutex_t g_stream_registry_mu = PTHREAD_MUTEX_INITIALIZER;
static XpuPtrSet g_live_streams;
/* Every SP_Event handed to the host, of every device, under the same lock, so that a stream
 * of one device can record or wait for an event of another device of its platform (the
 * device's events set stays the authority; this only finds the owner). An event is listed
 * from the end of create_event until destroy_event or its device's teardown unlists it. */
static XpuPtrSet g_live_events;
/* The stream whose worker runs on this thread, so re-entrant calls that would wait for the
 * calling worker itself fail instead of deadlocking. Read at every enqueue: the initial-exec
 * model makes that one load instead of a call to __tls_get_addr (a plugin is opened with
 * dlopen, whose loader keeps room for a few such bytes). */
static __thread SP_Stream tl_worker_stream __attribute__((tls_model("initial-exec")));

/* ---- small helpers ---------------------------------------------------------------------- */

/* Reads CLOCK_MONOTONIC in nanoseconds. */
static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/* Sleeps `us` microseconds, resuming after signals. */
static void sleep_us(uint64_t us) {
  struct timespec ts = {.tv_sec = (time_t)(us / 1000000), .tv_nsec = (long)(us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Copies a string, or returns NULL (treated as "") when out of memory. */
static char* copy_string(const char* s) {
  size_t n = strlen(s) + 1;
  char* out = malloc(n);
  if (out != NULL) memcpy(out, s, n);
  return out;
}

/* Puts `s` into the error state unless it already is; the first error wins. Under dev->mu. */
static void stream_fail(SP_Stream s, TF_Code code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void stream_fail(SP_Stream s, TF_Code code, const char* fmt, ...) {
  if (s->error_code != TF_OK) return;
  char reason[768];
  va_list args;
  va_start(args, fmt);
  vsnprintf(reason, sizeof reason, fmt, args);
  va_end(args);
  char message[1024];
  snprintf(message, sizeof message, "%s [XPU device %d, stream %" PRIu64 "]", reason,
           s->dev->ordinal, s->id);
  s->error_code = code;
  s->error_message = copy_string(message);
}

/* The message of a failed stream or event ("" if it could not be stored). */
static const char* message_or_empty(const char* m) { return m != NULL ? m : ""; }

/* Drops one reference to an event, freeing it with the last. Under dev->mu. */
static void event_unref(SP_Event ev) {
  if (--ev->refs > 0) return;
  free(ev->error_message);
  free(ev);
}

/* Drops one reference to a timer, freeing it with the last. Under g_timer_mu. */
static void timer_unref(SP_Timer t) {
  if (--t->refs == 0) free(t);
}

/* Finished operation records a stream keeps for reuse. A few dozen cover any queue depth a
 * host reaches between waits; beyond that, records go back to the C library. */
#define XPU_FREE_OPS_MAX 128u

/* An operation for `s`: a recycled record (keeping its payload buffer) or a new one; sets
 * RESOURCE_EXHAUSTED and returns NULL when out of memory. Under dev->mu. */
static XpuOp* op_new(SP_Stream s, OpKind kind, const char* name, TF_Status* status) {
  XpuOp* op = s->free_ops;
  if (op != NULL) {
    s->free_ops = op->next;
    s->free_count--;
    void* payload = op->payload;
    size_t payload_size = op->payload_size;
    memset(op, 0, sizeof *op);
    op->payload = payload;
    op->payload_size = payload_size;
  } else {
    op = calloc(1, sizeof *op);
    if (op != NULL) atomic_fetch_add_explicit(&g_op_allocations, 1, memory_order_relaxed);
  }
  if (op == NULL) {
    xpu_status(status, TF_RESOURCE_EXHAUSTED, "%s: out of host memory for the stream queue", name);
    return NULL;
  }
  op->kind = kind;
  op->name = name;
  return op;
}

/* Returns an operation record that holds no references to `s`'s free list, or frees it when
 * the list is full. Under dev->mu. */
static void op_recycle(SP_Stream s, XpuOp* op) {
  if (s->free_count < XPU_FREE_OPS_MAX) {
    op->next = s->free_ops;
    s->free_ops = op;
    s->free_count++;
    return;
  }
  free(op->payload);
  free(op);
}

/* Frees a stream's recycled operation records. */
static void free_op_list(SP_Stream s) {
  while (s->free_ops != NULL) {
    XpuOp* op = s->free_ops;
    s->free_ops = op->next;
    free(op->payload);
    free(op);
  }
  s->free_count = 0;
}

/* Appends `op` to the stream and wakes its worker if it sleeps (a napping worker wakes by
 * itself). Under dev->mu. */
static void enqueue(SP_Stream s, XpuOp* op) {
  op->ticket = ++s->dev->next_ticket;
  s->last_ticket = op->ticket;
  if (s->tail != NULL) s->tail->next = op; else s->head = op;
  s->tail = op;
  atomic_fetch_add_explicit(&s->enqueued, 1, memory_order_release);
  if (s->sleeping) {
    s->sleeping = false; /* one wake-up is enough: the worker drains the whole queue */
    pthread_cond_signal(&s->work_cv);
  }
}

static bool run_head(SP_Stream s, XpuOp* op);

/* Whether work of `bytes` bytes may run on the calling thread: inlining is on
 * (xpu_inline_max_bytes is not 0) and the work is small, or it is a copy between host and
 * device memory (`host_copy`) of any size: the host cannot reuse its side of such a copy
 * before the copy is done, so it waits for it whoever runs it, and a copy in place saves the
 * wait's hand-off (a real device's pageable copies block the host likewise). */
static bool may_run_inline(uint64_t bytes, bool host_copy) {
  uint64_t max = xpu_inline_max_bytes();
  return max != 0 && (host_copy || bytes <= max);
}

/* Enqueues `op` (of `bytes` bytes of work), or runs it at once on the calling thread when
 * that cannot be told apart from the worker running it at once: the stream is idle (nothing
 * queued or running), the work is small or a host copy (may_run_inline), no stream delay is
 * set and the caller is not a stream worker. A real device's launch has a fixed cost; here handing a
 * small operation to a sleeping worker thread and waiting for it costs more than the work,
 * and on a host with few cores the worker competes with the caller. The operation goes
 * through the same steps as on the worker (faults, profiling, events, errors), holding the
 * head of the queue while it runs; a worker that wakes meanwhile waits (stream_worker).
 * Under dev->mu, which run_op releases while the work runs. */
static void submit(SP_Stream s, XpuOp* op, uint64_t bytes, bool host_copy) {
  if (s->head != NULL || s->inline_running || s->closing || s->shutdown ||
      !may_run_inline(bytes, host_copy) || tl_worker_stream != NULL ||
      xpu_stream_delay_us() > 0) {
    enqueue(s, op);
    return;
  }
  XpuDevice* dev = s->dev;
  op->ticket = ++dev->next_ticket;
  s->last_ticket = op->ticket;
  s->head = s->tail = op;
  s->inline_running = true;
  (void)run_head(s, op); /* leaves the work other threads enqueued meanwhile at the head */
  s->inline_running = false;
  if (s->head != NULL && s->sleeping) {
    s->sleeping = false;
    pthread_cond_signal(&s->work_cv);
  }
  pthread_cond_broadcast(&dev->state_cv);
}

/* A host thread is about to block until `s` reaches some point: from now on the worker reacts
 * at once (latency mode), and a napping worker is woken. Under dev->mu. */
static void host_waits_on(SP_Stream s) {
  s->host_wait_mark = atomic_load_explicit(&s->enqueued, memory_order_relaxed);
  if (s->napping) {
    s->napping = false;
    pthread_cond_signal(&s->work_cv);
  }
}

/* host_waits_on for every stream of `dev` (the caller waits for an event or for all work,
 * whose stream it does not know). Under dev->mu. */
static void host_waits_on_device(XpuDevice* dev) {
  for (size_t i = 0; i < dev->streams.capacity; i++) {
    SP_Stream s = dev->streams.slots[i];
    if (s != NULL) host_waits_on(s);
  }
}

/* The worker's wait, when its queue runs empty, trades CPU time for reaction time
 * (plugins/xpu/README.md, "How a stream worker waits"):
 *
 * - Latency mode: a host thread blocked on this stream within the last XPU_LATENCY_OPS
 *   operations (a loop that waits for each result). The worker spins up to
 *   XPU_WORKER_SPIN_NS for the next operation, since a futex wake-up of a sleeping worker
 *   (several microseconds, more on a loaded machine) would be paid on every operation;
 *   then it sleeps, so that the next enqueue wakes it at once rather than the host's wait.
 * - Throughput mode: the host issues work without waiting. A spin is worth it only while
 *   work arrives faster than a wake-up costs (the last wait ended within the spin time), and
 *   then only out of a budget that refills at 1/XPU_SPIN_SHARE of the wall time, so that a
 *   stream of small operations costs the process at most that much extra CPU. When the
 *   spin gives up, the worker naps: a timed wait of XPU_WORKER_NAP_NS that enqueue does
 *   not interrupt, so the host issues operations without a system call each and the worker
 *   drains them in batches. A nap that ends with nothing queued means the stream went idle:
 *   the worker sleeps until enqueue signals it. A host that starts to wait wakes a napping
 *   worker at once (host_waits_on).
 */
#define XPU_WORKER_SPIN_NS UINT64_C(20000)
#define XPU_WORKER_NAP_NS UINT64_C(50000)
#define XPU_SPIN_SHARE 8u
#define XPU_SPIN_CREDIT_MAX_NS UINT64_C(200000)
#define XPU_LATENCY_OPS 2u

/* Hints the CPU that this is a spin-wait loop. */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Spins without the lock until `s` gets new work or `limit_ns` pass; returns the time spent.
 * Called and returns with dev->mu held. */
static uint64_t spin_for_work(SP_Stream s, uint64_t started, uint64_t limit_ns) {
  uint_fast64_t seen = atomic_load_explicit(&s->enqueued, memory_order_acquire);
  pthread_mutex_unlock(&s->dev->mu);
  uint64_t now = started;
  for (unsigned i = 1; atomic_load_explicit(&s->enqueued, memory_order_acquire) == seen; i++) {
    cpu_relax();
    if ((i & 63) == 0 && (now = now_ns()) - started >= limit_ns) break;
  }
  pthread_mutex_lock(&s->dev->mu);
  return now_ns() - started;
}

/* Adds a deadline `ns` from now to a CLOCK_MONOTONIC timespec. */
static struct timespec deadline_in(uint64_t ns) {
  uint64_t t = now_ns() + ns;
  return (struct timespec){.tv_sec = (time_t)(t / UINT64_C(1000000000)),
                           .tv_nsec = (long)(t % UINT64_C(1000000000))};
}

/* Waits until `s` has work or shuts down: spins, naps or sleeps as described above
 * XPU_WORKER_SPIN_NS. Under dev->mu. */
static void wait_for_work(SP_Stream s) {
  XpuDevice* dev = s->dev;
  if (s->head != NULL || s->shutdown) return;
  uint64_t started = now_ns();
  uint64_t refill = (started - s->credit_stamp_ns) / XPU_SPIN_SHARE;
  s->spin_credit_ns = s->spin_credit_ns + refill < XPU_SPIN_CREDIT_MAX_NS
                          ? s->spin_credit_ns + refill : XPU_SPIN_CREDIT_MAX_NS;
  s->credit_stamp_ns = started;
  uint_fast64_t enqueued = atomic_load_explicit(&s->enqueued, memory_order_relaxed);
  bool latency = enqueued - s->host_wait_mark <= XPU_LATENCY_OPS;
  uint64_t spin = latency ? XPU_WORKER_SPIN_NS
                  : !s->work_came_fast ? 0
                  : s->spin_credit_ns < XPU_WORKER_SPIN_NS ? s->spin_credit_ns
                  : XPU_WORKER_SPIN_NS;
  if (spin > 0) {
    uint64_t spent = spin_for_work(s, started, spin);
    if (!latency) s->spin_credit_ns -= spent < s->spin_credit_ns ? spent : s->spin_credit_ns;
  }
  while (s->head == NULL && !s->shutdown) {
    if (s->batching && !latency) {
      struct timespec until = deadline_in(XPU_WORKER_NAP_NS);
      s->napping = true;
      int rc = pthread_cond_timedwait(&s->work_cv, &dev->mu, &until);
      s->napping = false;
      if (rc == ETIMEDOUT && s->head == NULL) s->batching = false; /* idle: sleep next */
    } else {
      s->sleeping = true;
      pthread_cond_wait(&s->work_cv, &dev->mu);
      s->sleeping = false;
    }
  }
  s->work_came_fast = now_ns() - started < XPU_WORKER_SPIN_NS;
  s->batching = true;
}

/* Releases what a work item owns: its heap block, or what a copied-in payload owns. */
static void release_work(XpuOp* op) {
  if (op->u.work.arg == NULL) return;
  if (op->u.work.free_arg != NULL) op->u.work.free_arg(op->u.work.arg);
  else if (!op->u.work.in_payload) free(op->u.work.arg);
  op->u.work.arg = NULL;
}

/* Drops the references a finished operation of `s` held and recycles it. Under dev->mu. */
static void op_release(SP_Stream s, XpuOp* op) {
  if (op->prof_name != NULL) xpu_prof_free_name(op->prof_name); /* normally handed over */
  if (op->kind == OP_COPY) { /* normally already dropped */
    xpu_mapping_unref(op->u.copy.pin);
    xpu_mapping_unref(op->u.copy.dst_pin);
  }
  if (op->kind == OP_FN) release_work(op); /* normally already done by the worker */
  if (op->kind == OP_RECORD || op->kind == OP_WAIT) {
    SP_Event ev = op->u.event.event;
    if (ev->dev == s->dev) {
      event_unref(ev);
    } else { /* one device lock at a time; the unref may free ev */
      XpuDevice* owner = ev->dev;
      pthread_mutex_unlock(&s->dev->mu);
      pthread_mutex_lock(&owner->mu);
      event_unref(ev);
      pthread_mutex_unlock(&owner->mu);
      pthread_mutex_lock(&s->dev->mu);
    }
  }
  if (op->kind == OP_TIMER_START || op->kind == OP_TIMER_STOP) {
    pthread_mutex_lock(&g_timer_mu);
    timer_unref(op->u.timer);
    pthread_mutex_unlock(&g_timer_mu);
  }
  op_recycle(s, op);
}

/* Checks that `stream` is a live stream of `dev`. Under dev->mu. */
static bool stream_valid(XpuDevice* dev, SP_Stream stream, const char* fn, TF_Status* status) {
  if (stream == NULL || !xpu_ptrset_contains(&dev->streams, stream) || stream->closing) {
    xpu_status(status, TF_INVALID_ARGUMENT,
               "%s: stream %p is not a live stream of XPU device %d (destroyed, being destroyed, "
               "or created by another device)", fn, (void*)stream, dev->ordinal);
    return false;
  }
  return true;
}

/* Checks that `event` is a live event of `dev`. Under dev->mu. */
static bool event_valid(XpuDevice* dev, SP_Event event, const char* fn, TF_Status* status) {
  if (event == NULL || !xpu_ptrset_contains(&dev->events, event)) {
    xpu_status(status, TF_INVALID_ARGUMENT,
               "%s: event %p is not a live event of XPU device %d (destroyed, or created by "
               "no device of its platform)", fn, (void*)event, dev->ordinal);
    return false;
  }
  return true;
}

/* Whether streams and events of `a` and `b` may order each other: devices of one platform,
 * as TensorFlow's cross-device copies need. Built with XPU_SAME_DEVICE_ONLY, only a device
 * with itself: the plugin's old refusal, kept so that tests can show conformance catches it. */
static bool same_platform(const XpuDevice* a, const XpuDevice* b) {
#ifdef XPU_SAME_DEVICE_ONLY
  return a == b;
#else
  return a->platform_id == b->platform_id;
#endif
}

/* Under g_stream_registry_mu: the device of `event` when it is a live event of a device of
 * dev's platform, else NULL. The registry lock keeps that device alive while it is held. */
static XpuDevice* event_owner(const XpuDevice* dev, SP_Event event) {
  if (event == NULL || !xpu_ptrset_contains(&g_live_events, event)) return NULL;
  return same_platform(dev, event->dev) ? event->dev : NULL;
}

/* Under g_stream_registry_mu: the device of `stream` when it is a listed stream of a device
 * of dev's platform, else NULL. */
static XpuDevice* stream_owner(const XpuDevice* dev, SP_Stream stream) {
  if (stream == NULL || !xpu_ptrset_contains(&g_live_streams, stream)) return NULL;
  return same_platform(dev, stream->dev) ? stream->dev : NULL;
}

/* Locks and returns the device of `event` if it is a live event of a device of dev's
 * platform; otherwise locks and returns `dev`, whose event_valid then refuses the handle. */
static XpuDevice* lock_event_device(XpuDevice* dev, SP_Event event) {
  pthread_mutex_lock(&g_stream_registry_mu);
  XpuDevice* owner = event_owner(dev, event);
  if (owner == NULL) owner = dev;
  pthread_mutex_lock(&owner->mu);
  pthread_mutex_unlock(&g_stream_registry_mu);
  return owner;
}

/* Refuses `other` of create_stream_dependency: a stream of no device of dev's platform, or
 * one being destroyed. */
static void other_stream_invalid(XpuDevice* dev, SP_Stream other, const char* fn,
                                 TF_Status* status) {
#ifdef XPU_SAME_DEVICE_ONLY
  stream_valid(dev, other, fn, status);
#else
  xpu_status(status, TF_INVALID_ARGUMENT,
             "%s: stream %p is not a live stream of XPU device %d or of another XPU device of "
             "its platform (destroyed, being destroyed, or never created)", fn, (void*)other,
             dev->ordinal);
#endif
}

/* Checks that `timer` is a live timer of `dev` and takes a reference for a queued mark. */
static bool timer_ref(XpuDevice* dev, SP_Timer timer, const char* fn, TF_Status* status) {
  pthread_mutex_lock(&g_timer_mu);
  bool ok = timer != NULL && xpu_ptrset_contains(&g_timers, timer) && timer->dev == dev;
  if (ok) timer->refs++;
  pthread_mutex_unlock(&g_timer_mu);
  if (!ok) {
    xpu_status(status, TF_INVALID_ARGUMENT,
               "%s: timer %p is not a live timer of XPU device %d (destroyed, or created by "
               "another device)", fn, (void*)timer, dev->ordinal);
  }
  return ok;
}

/* Resolves the device and locks it, then checks the stream. Returns the locked device, or
 * NULL (unlocked) after setting `status`. */
static XpuDevice* lock_stream(const SP_Device* device, SP_Stream stream, const char* fn,
                              TF_Status* status) {
  XpuDevice* dev = xpu_device_get(device, fn, status);
  if (dev == NULL) return NULL;
  pthread_mutex_lock(&dev->mu);
  if (!stream_valid(dev, stream, fn, status)) {
    pthread_mutex_unlock(&dev->mu);
    return NULL;
  }
  return dev;
}

/* ---- the worker ------------------------------------------------------------------------- */

/* Marks recording `gen` of `ev` complete with `code` (and `message` when not TF_OK). Under
 * the mu of the event's device. */
static void event_complete_code(SP_Event ev, uint64_t gen, TF_Code code, const char* message) {
  if (gen <= ev->completed_gen) return; /* a later recording already finished */
  ev->completed_gen = gen;
  free(ev->error_message);
  ev->error_message = NULL;
  ev->error_code = code;
  if (code != TF_OK) ev->error_message = copy_string(message_or_empty(message));
}

/* Marks recording `gen` of `ev` complete, carrying the error of `s` if it has one. Called
 * with the mu of s's device held; for an event of another device that lock is dropped while
 * the event's device is locked (one device lock at a time), whose waiters are then woken. */
static void event_complete(SP_Event ev, uint64_t gen, SP_Stream s) {
  if (ev->dev == s->dev) {
    event_complete_code(ev, gen, s->error_code, s->error_message);
    return;
  }
  TF_Code code = s->error_code;
  char* message = code != TF_OK ? copy_string(message_or_empty(s->error_message)) : NULL;
  pthread_mutex_unlock(&s->dev->mu);
  pthread_mutex_lock(&ev->dev->mu);
  event_complete_code(ev, gen, code, message);
  pthread_cond_broadcast(&ev->dev->state_cv);
  pthread_mutex_unlock(&ev->dev->mu);
  pthread_mutex_lock(&s->dev->mu);
  free(message);
}

/* Writes `size` bytes of a 1- or 4-byte pattern to `dst` (for width 4, `size` is a multiple
 * of 4). A 32-bit pattern whose four bytes are equal is a memset; any other is written by
 * copying an L1-resident tile of the pattern, so both run at memset/memcpy speed. */
static void fill_pattern(void* dst, uint32_t pattern, unsigned width, uint64_t size) {
  unsigned char byte = (unsigned char)(pattern & 0xffu);
  if (width == 1 || pattern == byte * UINT32_C(0x01010101)) {
    memset(dst, byte, (size_t)size);
    return;
  }
  enum { kTile = 4096 };
  _Alignas(64) unsigned char tile[kTile];
  for (size_t i = 0; i < kTile; i += 4) memcpy(tile + i, &pattern, 4);
  unsigned char* p = dst;
  size_t n = (size_t)size;
  for (; n >= kTile; p += kTile, n -= kTile) memcpy(p, tile, kTile);
  memcpy(p, tile, n);
}

/* Runs the host callback of `op` with a fresh status; a non-OK result fails the stream. Called
 * and returns with dev->mu held; the callback itself runs without it. */
static void run_callback(SP_Stream s, XpuOp* op) {
  pthread_mutex_unlock(&s->dev->mu);
  TF_Status* cb_status = TF_NewStatus();
  if (cb_status != NULL) op->u.callback.fn(op->u.callback.arg, cb_status);
  pthread_mutex_lock(&s->dev->mu);
  if (cb_status == NULL) {
    stream_fail(s, TF_RESOURCE_EXHAUSTED, "host_callback: TF_NewStatus failed; callback not run");
    return;
  }
  if (TF_GetCode(cb_status) != TF_OK) {
    stream_fail(s, TF_GetCode(cb_status), "host_callback: the callback reported an error: %s",
                TF_Message(cb_status));
  }
  TF_DeleteStatus(cb_status);
}

/* Runs a kernel's function (unless the stream has failed) and frees its argument; an error
 * it reports fails the stream. Called and returns with dev->mu held; the work runs without. */
static void run_work(SP_Stream s, XpuOp* op, bool healthy) {
  pthread_mutex_unlock(&s->dev->mu);
  char message[768];
  message[0] = '\0';
  TF_Code code = healthy ? op->u.work.fn(op->u.work.arg, message, sizeof message) : TF_OK;
  release_work(op);
  pthread_mutex_lock(&s->dev->mu);
  if (code != TF_OK) {
    stream_fail(s, code, "%s", message[0] != '\0' ? message : op->name);
  }
}

/* Executes one operation at the head of `s`. Called and returns with dev->mu held. Returns
 * whether it did its work (false when skipped because the stream has failed), for the
 * profiler. */
static bool run_op(SP_Stream s, XpuOp* op) {
  XpuDevice* dev = s->dev;
  bool healthy = s->error_code == TF_OK;
  if (healthy && !op->internal) {
    uint64_t call = xpu_fault_hit(XPU_FAULT_STREAM);
    if (call != 0) {
      stream_fail(s, TF_INTERNAL, "%s: injected fault (XPU fault kind 'stream', stream "
                  "operation #%" PRIu64 ")", op->name, call);
      healthy = false;
    }
  }
  switch (op->kind) {
    case OP_COPY:
      if (!healthy && op->u.copy.pin == NULL && op->u.copy.dst_pin == NULL) return false;
      pthread_mutex_unlock(&dev->mu);
      /* One memmove for the whole range: a host-to-device or device-to-host copy runs at
       * memcpy speed (a peer copy reads or writes another device's arena, pinned in
       * op->u.copy.pin / dst_pin). */
      if (healthy) memmove(op->u.copy.dst, op->u.copy.src, (size_t)op->u.copy.size);
      xpu_mapping_unref(op->u.copy.pin); /* may unmap a peer's arena: done without the lock */
      xpu_mapping_unref(op->u.copy.dst_pin);
      op->u.copy.pin = NULL;
      op->u.copy.dst_pin = NULL;
      pthread_mutex_lock(&dev->mu);
      return healthy;
    case OP_FILL:
      if (!healthy) return false;
      pthread_mutex_unlock(&dev->mu);
      fill_pattern(op->u.fill.dst, op->u.fill.pattern, op->u.fill.width, op->u.fill.size);
      pthread_mutex_lock(&dev->mu);
      break;
    case OP_RECORD:
      event_complete(op->u.event.event, op->u.event.gen, s);
      break;
    case OP_WAIT: {
      if (!healthy) return false;
      SP_Event ev = op->u.event.event;
      if (ev->dev != dev) { /* an event of another device: wait under that device's lock */
        XpuDevice* owner = ev->dev;
        pthread_mutex_unlock(&dev->mu);
        pthread_mutex_lock(&owner->mu);
        if (ev->completed_gen < op->u.event.gen) host_waits_on_device(owner);
        while (ev->completed_gen < op->u.event.gen) {
          pthread_cond_wait(&owner->state_cv, &owner->mu);
        }
        TF_Code code = op->u.event.gen > 0 ? ev->error_code : TF_OK;
        char* message = code != TF_OK ? copy_string(message_or_empty(ev->error_message)) : NULL;
        pthread_mutex_unlock(&owner->mu);
        pthread_mutex_lock(&dev->mu);
        if (code != TF_OK) {
          stream_fail(s, code, "%s: the awaited work (XPU device %d) failed: %s", op->name,
                      owner->ordinal, message_or_empty(message));
        }
        free(message);
        break;
      }
      if (ev->completed_gen < op->u.event.gen) host_waits_on_device(dev); /* no napping */
      while (ev->completed_gen < op->u.event.gen) pthread_cond_wait(&dev->state_cv, &dev->mu);
      if (op->u.event.gen > 0 && ev->error_code != TF_OK) {
        stream_fail(s, ev->error_code, "%s: the awaited work failed: %s", op->name,
                    message_or_empty(ev->error_message));
      }
      break;
    }
    case OP_TIMER_START:
    case OP_TIMER_STOP:
      if (!healthy) break;
      pthread_mutex_lock(&g_timer_mu);
      if (op->kind == OP_TIMER_START) {
        op->u.timer->start_ns = now_ns();
        op->u.timer->started = true;
        op->u.timer->stopped = false;
      } else {
        op->u.timer->stop_ns = now_ns();
        op->u.timer->stopped = true;
      }
      pthread_mutex_unlock(&g_timer_mu);
      return false; /* not profiled */
    case OP_CALLBACK:
      run_callback(s, op);
      break;
    case OP_FN:
      run_work(s, op, healthy);
      return healthy;
  }
  return true;
}

/* Hands the operation that ran from `start_ns` until now to the stream's profiler buffer. */
static void profile_op(SP_Stream s, XpuOp* op, uint64_t start_ns) {
  uint64_t end_ns = xpu_prof_now_ns();
  XpuProfKind kind;
  uint64_t bytes = 0;
  const char* op_type = NULL;
  char* name = NULL;
  uint64_t launch = 0;
  switch (op->kind) {
    case OP_COPY: kind = op->u.copy.direction; bytes = op->u.copy.size; break;
    case OP_FILL: kind = XPU_PROF_MEMSET; bytes = op->u.fill.size; break;
    case OP_RECORD: kind = XPU_PROF_RECORD_EVENT; break;
    case OP_WAIT: kind = XPU_PROF_WAIT_EVENT; break;
    case OP_CALLBACK: kind = XPU_PROF_HOST_CALLBACK; break;
    case OP_FN:
      kind = XPU_PROF_KERNEL;
      op_type = op->name;
      name = op->prof_name;
      op->prof_name = NULL;
      launch = op->launch;
      break;
    default: return;
  }
  xpu_prof_record(s->prof, kind, start_ns, end_ns, bytes, op_type, name, launch);
}

/* Whether finishing `op` of `s` (the head already moved past it) may end a wait on
 * dev->state_cv: an event completed (block_host_for_event, a stream's wait), the queue ran
 * empty (destroy_stream, and the last step of any drain), or the head moved past the lowest
 * ticket a host thread waits for (block_host_until_done, synchronize_all_activity: each
 * waits until every queue's head is past its ticket, and any ticket it waits for is at least
 * dev->wait_ticket). Anything else wakes nobody: a host that waits for a stream of 200 adds
 * used to be woken after each of them, a futex wake-up per op in the worker. Under dev->mu. */
static bool progress_wakes(SP_Stream s, const XpuOp* op) {
  return op->kind == OP_RECORD || s->head == NULL || s->head->ticket > s->dev->wait_ticket;
}

/* Runs `op`, the head of `s`, profiles it and takes it off the queue: what the worker does with
 * each operation, and submit with one it runs inline. Under dev->mu (run_op releases it while
 * the work runs); the caller wakes the waiters, needed when this returns true
 * (progress_wakes). */
static bool run_head(SP_Stream s, XpuOp* op) {
  /* Read once per operation: a session that starts while it runs catches the next one. */
  bool profiling = xpu_prof_active();
  uint64_t start_ns = profiling ? xpu_prof_now_ns() : 0;
  if (run_op(s, op) && profiling) profile_op(s, op, start_ns);
  s->head = op->next;
  if (s->head == NULL) s->tail = NULL;
  bool wakes = progress_wakes(s, op);
  op_release(s, op);
  return wakes;
}

/* A host thread starts / stops waiting until every queue's head is past `ticket`. Under
 * dev->mu. */
static void ticket_wait_begin(XpuDevice* dev, uint64_t ticket) {
  dev->ticket_waiters++;
  if (ticket < dev->wait_ticket) dev->wait_ticket = ticket;
}

static void ticket_wait_end(XpuDevice* dev) {
  if (--dev->ticket_waiters == 0) dev->wait_ticket = UINT64_MAX;
}

/* The body of a stream's worker thread: runs the queue in order until shutdown. */
static void* stream_worker(void* arg) {
  SP_Stream s = arg;
  XpuDevice* dev = s->dev;
  tl_worker_stream = s;
  pthread_mutex_lock(&dev->mu);
  for (;;) {
    wait_for_work(s);
    if (s->head == NULL) break;
    if (s->inline_running) { /* a host thread runs the head: wait until it is done */
      pthread_cond_wait(&dev->state_cv, &dev->mu);
      continue;
    }
    XpuOp* op = s->head;
    uint64_t delay = xpu_stream_delay_us();
    if (delay > 0) {
      pthread_mutex_unlock(&dev->mu);
      sleep_us(delay);
      pthread_mutex_lock(&dev->mu);
    }
    if (run_head(s, op)) pthread_cond_broadcast(&dev->state_cv);
  }
  pthread_mutex_unlock(&dev->mu);
  return NULL;
}

/* ---- streams ---------------------------------------------------------------------------- */

/* SP_StreamExecutor.create_stream: a new FIFO with its own worker thread. */
static void xpu_create_stream(const SP_Device* device, SP_Stream* stream, TF_Status* status) {
  const char* fn = "create_stream";
  XpuDevice* dev = xpu_device_get(device, fn, status);
  if (dev == NULL) return;
  if (stream == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: the SP_Stream output pointer is NULL", fn);
    return;
  }
  *stream = NULL;
  uint64_t call = xpu_fault_hit(XPU_FAULT_CREATE_STREAM);
  if (call != 0) {
    xpu_fault_status(status, XPU_FAULT_CREATE_STREAM, call, fn);
    return;
  }
  SP_Stream s = calloc(1, sizeof *s);
  pthread_condattr_t attr;
  bool cv_ok = s != NULL && pthread_condattr_init(&attr) == 0;
  if (cv_ok) { /* naps are timed on the monotonic clock */
    cv_ok = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 &&
            pthread_cond_init(&s->work_cv, &attr) == 0;
    pthread_condattr_destroy(&attr);
  }
  if (!cv_ok) {
    free(s);
    xpu_status(status, TF_RESOURCE_EXHAUSTED, "%s: out of host memory", fn);
    return;
  }
  s->dev = dev;
  s->error_code = TF_OK;
  pthread_mutex_lock(&dev->mu);
  s->id = ++dev->next_stream_id;
  s->prof = xpu_prof_stream_new(dev->ordinal, s->id);
  bool ok = xpu_ptrset_insert(&dev->streams, s);
  int rc = ok ? pthread_create(&s->thread, NULL, stream_worker, s) : 0;
  if (ok && rc != 0) {
    xpu_ptrset_remove(&dev->streams, s);
    ok = false;
  }
  pthread_mutex_unlock(&dev->mu);
  if (!ok) {
    xpu_prof_stream_release(s->prof);
    pthread_cond_destroy(&s->work_cv);
    free(s);
    xpu_status(status, TF_RESOURCE_EXHAUSTED, "%s: cannot start a worker thread (%s)", fn,
               rc != 0 ? strerror(rc) : "out of host memory");
    return;
  }
  /* Not listed when out of memory: the stream still works, only kernels cannot find it. */
  pthread_mutex_lock(&g_stream_registry_mu);
  xpu_ptrset_insert(&g_live_streams, s);
  pthread_mutex_unlock(&g_stream_registry_mu);
  xpu_prof_stream_publish(s->prof);
  xpu_pool_retain();
  *stream = s;
}

/* Drains a live stream, stops its worker and frees it. Takes and releases dev->mu. */
static void stream_destroy(XpuDevice* dev, SP_Stream s) {
  pthread_mutex_lock(&dev->mu);
  if (!xpu_ptrset_contains(&dev->streams, s) || s->closing || tl_worker_stream == s) {
    /* Already being destroyed, or called from the stream's own host callback: a worker cannot
     * join itself, so the stream is left running rather than deadlocking. */
    pthread_mutex_unlock(&dev->mu);
    return;
  }
  s->closing = true;
  while (s->head != NULL) pthread_cond_wait(&dev->state_cv, &dev->mu);
  s->shutdown = true;
  pthread_cond_signal(&s->work_cv);
  pthread_mutex_unlock(&dev->mu);
  pthread_join(s->thread, NULL);
  pthread_mutex_lock(&dev->mu);
  while (s->host_waiters > 0) pthread_cond_wait(&dev->state_cv, &dev->mu);
  xpu_ptrset_remove(&dev->streams, s);
  pthread_cond_broadcast(&dev->state_cv);
  pthread_mutex_unlock(&dev->mu);
  pthread_mutex_lock(&g_stream_registry_mu);
  xpu_ptrset_remove(&g_live_streams, s);
  pthread_mutex_unlock(&g_stream_registry_mu);
  xpu_prof_stream_release(s->prof); /* keeps what it recorded in a running session */
  pthread_cond_destroy(&s->work_cv);
  free(s->error_message);
  free_op_list(s);
  free(s);
  xpu_pool_release();
}

/* SP_StreamExecutor.destroy_stream: finishes the queued work, joins the worker, frees. */
static void xpu_destroy_stream(const SP_Device* device, SP_Stream stream) {
  XpuDevice* dev = xpu_device_get(device, "destroy_stream", NULL);
  if (dev != NULL && stream != NULL) stream_destroy(dev, stream);
}

/* create_stream_dependency when `other` is a stream of `owner`, another device of dev's
 * platform: a private event recorded on `other` under owner's lock, waited for on
 * `dependent` under dev's (one device lock at a time; the caller holds the stream registry
 * lock, which keeps both streams and devices alive). The waiting worker blocks on owner's
 * state (run_op). */
static void cross_device_dependency(XpuDevice* dev, SP_Stream dependent, XpuDevice* owner,
                                    SP_Stream other, const char* fn, TF_Status* status) {
  pthread_mutex_lock(&dev->mu);
  XpuOp* wait = stream_valid(dev, dependent, fn, status) ? op_new(dependent, OP_WAIT, fn, status)
                                                         : NULL;
  pthread_mutex_unlock(&dev->mu);
  if (wait == NULL) return;
  pthread_mutex_lock(&owner->mu);
  SP_Event marker = NULL;
  if (!xpu_ptrset_contains(&owner->streams, other) || other->closing) {
    other_stream_invalid(dev, other, fn, status);
  } else {
    marker = calloc(1, sizeof *marker);
    XpuOp* record = marker != NULL ? op_new(other, OP_RECORD, fn, status) : NULL;
    if (record == NULL) {
      xpu_status(status, TF_RESOURCE_EXHAUSTED, "%s: out of host memory", fn);
      free(marker);
      marker = NULL;
    } else {
      marker->dev = owner;
      marker->refs = 2; /* the two operations; the host never sees this event */
      marker->recorded_gen = 1;
      record->internal = true;
      record->u.event.event = marker;
      record->u.event.gen = 1;
      enqueue(other, record);
    }
  }
  pthread_mutex_unlock(&owner->mu);
  pthread_mutex_lock(&dev->mu);
  bool queued = marker != NULL && !dependent->closing;
  if (queued) {
    wait->u.event.event = marker;
    wait->u.event.gen = 1;
    enqueue(dependent, wait);
  } else {
    op_recycle(dependent, wait);
  }
  pthread_mutex_unlock(&dev->mu);
  if (marker != NULL && !queued) { /* `dependent` was destroyed meanwhile */
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: stream %p was destroyed during the call", fn,
               (void*)dependent);
    pthread_mutex_lock(&owner->mu);
    event_unref(marker);
    pthread_mutex_unlock(&owner->mu);
  }
}

/* SP_StreamExecutor.create_stream_dependency: `dependent` waits for `other`'s queued work;
 * `other` may be a stream of another device of the platform. */
static void xpu_create_stream_dependency(const SP_Device* device, SP_Stream dependent,
                                         SP_Stream other, TF_Status* status) {
  const char* fn = "create_stream_dependency";
  XpuDevice* dev = xpu_device_get(device, fn, status);
  if (dev == NULL) return;
  pthread_mutex_lock(&g_stream_registry_mu);
  XpuDevice* owner = stream_owner(dev, other);
  if (owner != NULL && owner != dev) {
    cross_device_dependency(dev, dependent, owner, other, fn, status);
    pthread_mutex_unlock(&g_stream_registry_mu);
    return;
  }
  pthread_mutex_unlock(&g_stream_registry_mu);
  dev = lock_stream(device, dependent, fn, status);
  if (dev == NULL) return;
  if (other == NULL || !xpu_ptrset_contains(&dev->streams, other) || other->closing) {
    other_stream_invalid(dev, other, fn, status);
    pthread_mutex_unlock(&dev->mu);
    return;
  }
  if (dependent == other) {
    pthread_mutex_unlock(&dev->mu);
    return; /* a stream trivially depends on itself */
  }
  SP_Event marker = calloc(1, sizeof *marker);
  XpuOp* record = op_new(other, OP_RECORD, fn, status);
  XpuOp* wait = op_new(dependent, OP_WAIT, fn, status);
  if (marker == NULL || record == NULL || wait == NULL) {
    xpu_status(status, TF_RESOURCE_EXHAUSTED, "%s: out of host memory", fn);
    if (record != NULL) op_recycle(other, record);
    if (wait != NULL) op_recycle(dependent, wait);
    pthread_mutex_unlock(&dev->mu);
    free(marker);
    return;
  }
  marker->dev = dev;
  marker->refs = 2; /* the two operations; the host never sees this event */
  marker->recorded_gen = 1;
  record->internal = true;
  record->u.event.event = marker;
  record->u.event.gen = 1;
  wait->u.event.event = marker;
  wait->u.event.gen = 1;
  enqueue(other, record);
  enqueue(dependent, wait);
  pthread_mutex_unlock(&dev->mu);
}

/* SP_StreamExecutor.get_stream_status: the stream's sticky error, or OK; never blocks on work. */
static void xpu_get_stream_status(const SP_Device* device, SP_Stream stream, TF_Status* status) {
  XpuDevice* dev = lock_stream(device, stream, "get_stream_status", status);
  if (dev == NULL) return;
  if (stream->error_code != TF_OK) {
    TF_SetStatus(status, stream->error_code, message_or_empty(stream->error_message));
  } else {
    TF_SetStatus(status, TF_OK, "");
  }
  pthread_mutex_unlock(&dev->mu);
}

/* Waits (dev->mu held) for the work queued on `stream` so far; reports the stream's state. */
static void wait_until_done_locked(XpuDevice* dev, SP_Stream stream, TF_Status* status) {
  uint64_t target = stream->last_ticket;
  host_waits_on(stream);
  stream->host_waiters++;
  ticket_wait_begin(dev, target);
  while (stream->head != NULL && stream->head->ticket <= target) {
    pthread_cond_wait(&dev->state_cv, &dev->mu);
  }
  ticket_wait_end(dev);
  stream->host_waiters--;
  if (stream->error_code != TF_OK) {
    TF_SetStatus(status, stream->error_code, message_or_empty(stream->error_message));
  } else {
    TF_SetStatus(status, TF_OK, "");
  }
  pthread_cond_broadcast(&dev->state_cv);
}

/* SP_StreamExecutor.block_host_until_done: waits for the stream's queued work, reports its state. */
static void xpu_block_host_until_done(const SP_Device* device, SP_Stream stream,
                                      TF_Status* status) {
  const char* fn = "block_host_until_done";
  XpuDevice* dev = lock_stream(device, stream, fn, status);
  if (dev == NULL) return;
  if (tl_worker_stream == stream) {
    xpu_status(status, TF_FAILED_PRECONDITION,
               "%s: called from a host callback running on the same stream; it would wait for "
               "itself", fn);
    pthread_mutex_unlock(&dev->mu);
    return;
  }
  wait_until_done_locked(dev, stream, status);
  pthread_mutex_unlock(&dev->mu);
}

/* SP_StreamExecutor.synchronize_all_activity: waits for every stream of the device; reports
 * the error of a failed stream if there is one. */
static void xpu_synchronize_all_activity(const SP_Device* device, TF_Status* status) {
  const char* fn = "synchronize_all_activity";
  XpuDevice* dev = xpu_device_get(device, fn, status);
  if (dev == NULL) return;
  pthread_mutex_lock(&dev->mu);
  if (tl_worker_stream != NULL && tl_worker_stream->dev == dev) {
    xpu_status(status, TF_FAILED_PRECONDITION,
               "%s: called from a host callback running on a stream of the same device; it "
               "would wait for itself", fn);
    pthread_mutex_unlock(&dev->mu);
    return;
  }
  uint64_t target = dev->next_ticket;
  host_waits_on_device(dev);
  ticket_wait_begin(dev, target);
  for (;;) {
    bool busy = false;
    for (size_t i = 0; i < dev->streams.capacity && !busy; i++) {
      SP_Stream s = dev->streams.slots[i];
      busy = s != NULL && s->head != NULL && s->head->ticket <= target;
    }
    if (!busy) break;
    pthread_cond_wait(&dev->state_cv, &dev->mu);
  }
  ticket_wait_end(dev);
  TF_SetStatus(status, TF_OK, "");
  for (size_t i = 0; i < dev->streams.capacity; i++) {
    SP_Stream s = dev->streams.slots[i];
    if (s != NULL && s->error_code != TF_OK) {
      xpu_status(status, s->error_code, "%s: a stream of XPU device %d has failed: %s", fn,
                 dev->ordinal, message_or_empty(s->error_message));
      break;
    }
  }
  pthread_mutex_unlock(&dev->mu);
}

/* ---- events ----------------------------------------------------------------------------- */

/* SP_StreamExecutor.create_event: a new, never-recorded event. */
static void xpu_create_event(const SP_Device* device, SP_Event* event, TF_Status* status) {
  const char* fn = "create_event";
  XpuDevice* dev = xpu_device_get(device, fn, status);
  if (dev == NULL) return;
  if (event == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: the SP_Event output pointer is NULL", fn);
    return;
  }
  *event = NULL;
  uint64_t call = xpu_fault_hit(XPU_FAULT_CREATE_EVENT);
  if (call != 0) {
    xpu_fault_status(status, XPU_FAULT_CREATE_EVENT, call, fn);
    return;
  }
  SP_Event ev = calloc(1, sizeof *ev);
  if (ev == NULL) {
    xpu_status(status, TF_RESOURCE_EXHAUSTED, "%s: out of host memory", fn);
    return;
  }
  ev->dev = dev;
  ev->refs = 1;
  ev->error_code = TF_OK;
  pthread_mutex_lock(&dev->mu);
  bool ok = xpu_ptrset_insert(&dev->events, ev);
  pthread_mutex_unlock(&dev->mu);
  if (!ok) {
    free(ev);
    xpu_status(status, TF_RESOURCE_EXHAUSTED, "%s: out of host memory", fn);
    return;
  }
  /* Not listed when out of memory: the event still works on its own device's streams. */
  pthread_mutex_lock(&g_stream_registry_mu);
  xpu_ptrset_insert(&g_live_events, ev);
  pthread_mutex_unlock(&g_stream_registry_mu);
  *event = ev;
}

/* SP_StreamExecutor.destroy_event: drops the host's handle; queued uses keep it alive. */
static void xpu_destroy_event(const SP_Device* device, SP_Event event) {
  XpuDevice* dev = xpu_device_get(device, "destroy_event", NULL);
  if (dev == NULL) return;
  pthread_mutex_lock(&g_stream_registry_mu);
  XpuDevice* owner = event_owner(dev, event);
  if (owner != NULL) xpu_ptrset_remove(&g_live_events, event);
  else owner = dev;
  pthread_mutex_lock(&owner->mu);
  pthread_mutex_unlock(&g_stream_registry_mu);
  if (xpu_ptrset_remove(&owner->events, event)) event_unref(event);
  pthread_mutex_unlock(&owner->mu);
}

/* SP_StreamExecutor.get_event_status: UNKNOWN if never recorded, else the latest recording's
 * state; a foreign or destroyed handle reads as SE_EVENT_ERROR. A host that polls a recorded
 * event is taken to wait for results (hosts poll events to bound their waits), as in
 * block_host_for_event: the workers stay in latency mode rather than napping, also when the
 * poll finds the event complete at once (the host will wait again). */
static SE_EventStatus xpu_get_event_status(const SP_Device* device, SP_Event event) {
  XpuDevice* dev = xpu_device_get(device, "get_event_status", NULL);
  if (dev == NULL) return SE_EVENT_ERROR;
  SE_EventStatus result;
  dev = lock_event_device(dev, event); /* the event's device, maybe another of the platform */
  if (!event_valid(dev, event, "get_event_status", NULL)) {
    result = SE_EVENT_ERROR;
  } else if (event->recorded_gen == 0) {
    result = SE_EVENT_UNKNOWN;
  } else if (event->completed_gen < event->recorded_gen) {
    result = SE_EVENT_PENDING;
  } else {
    result = event->error_code == TF_OK ? SE_EVENT_COMPLETE : SE_EVENT_ERROR;
  }
  if (result != SE_EVENT_UNKNOWN) host_waits_on_device(dev); /* a host polling waits */
  pthread_mutex_unlock(&dev->mu);
  return result;
}

/* record_event of an event of `owner`, another device of dev's platform, on a stream of
 * `dev`: the operation is made under dev's lock, the recording counted under owner's, the
 * operation enqueued under dev's again (one device lock at a time; the caller holds the
 * stream registry lock, which keeps the stream, the event's listing and both devices alive).
 * The worker completes the recording under owner's lock (event_complete). */
static void record_foreign_event(XpuDevice* dev, SP_Stream stream, XpuDevice* owner,
                                 SP_Event event, const char* fn, TF_Status* status) {
  pthread_mutex_lock(&dev->mu);
  XpuOp* op = NULL;
  if (stream_valid(dev, stream, fn, status)) {
    uint64_t call = xpu_fault_hit(XPU_FAULT_RECORD_EVENT);
    if (call != 0) xpu_fault_status(status, XPU_FAULT_RECORD_EVENT, call, fn);
    else op = op_new(stream, OP_RECORD, fn, status);
  }
  pthread_mutex_unlock(&dev->mu);
  if (op == NULL) return;
  pthread_mutex_lock(&owner->mu);
  uint64_t gen = ++event->recorded_gen;
  event->refs++;
  pthread_mutex_unlock(&owner->mu);
  pthread_mutex_lock(&dev->mu);
  bool queued = !stream->closing;
  if (queued) {
    op->u.event.event = event;
    op->u.event.gen = gen;
    enqueue(stream, op);
  } else {
    op_recycle(stream, op);
  }
  pthread_mutex_unlock(&dev->mu);
  if (!queued) { /* the stream was destroyed meanwhile: the recording can never complete */
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: stream %p was destroyed during the call", fn,
               (void*)stream);
    pthread_mutex_lock(&owner->mu);
    event_complete_code(event, gen, TF_CANCELLED,
                        "record_event: the stream was destroyed before it reached the event");
    pthread_cond_broadcast(&owner->state_cv);
    event_unref(event);
    pthread_mutex_unlock(&owner->mu);
  }
}

/* SP_StreamExecutor.record_event: the event completes when the stream reaches this point.
 * The event may be one of another device of the platform. */
static void xpu_record_event(const SP_Device* device, SP_Stream stream, SP_Event event,
                             TF_Status* status) {
  const char* fn = "record_event";
  XpuDevice* dev = xpu_device_get(device, fn, status);
  if (dev == NULL) return;
  pthread_mutex_lock(&g_stream_registry_mu);
  XpuDevice* owner = event_owner(dev, event);
  if (owner != NULL && owner != dev) {
    record_foreign_event(dev, stream, owner, event, fn, status);
    pthread_mutex_unlock(&g_stream_registry_mu);
    return;
  }
  pthread_mutex_unlock(&g_stream_registry_mu);
  dev = lock_stream(device, stream, fn, status);
  if (dev == NULL) return;
  XpuOp* op = NULL;
  uint64_t call = 0;
  if (event_valid(dev, event, fn, status)) {
    call = xpu_fault_hit(XPU_FAULT_RECORD_EVENT);
    if (call != 0) xpu_fault_status(status, XPU_FAULT_RECORD_EVENT, call, fn);
    else op = op_new(stream, OP_RECORD, fn, status);
  }
  if (op != NULL) {
    op->u.event.event = event;
    op->u.event.gen = ++event->recorded_gen;
    event->refs++;
    submit(stream, op, 0, false);
  }
  pthread_mutex_unlock(&dev->mu);
}

/* SP_StreamExecutor.wait_for_event: the stream pauses until the event's current recording
 * completes (at once if it was never recorded). */
static void xpu_wait_for_event(const SP_Device* const device, SP_Stream stream, SP_Event event,
                               TF_Status* const status) {
  const char* fn = "wait_for_event";
  XpuDevice* dev = xpu_device_get(device, fn, status);
  if (dev == NULL) return;
  pthread_mutex_lock(&g_stream_registry_mu);
  XpuDevice* owner = event_owner(dev, event);
  if (owner != NULL && owner != dev) {
    /* An event of another device of the platform: its current recording is read under its
     * device's lock, the wait enqueued under ours, one at a time; the registry lock keeps
     * the event's listing and both devices alive meanwhile. */
    pthread_mutex_lock(&owner->mu);
    uint64_t gen = event->recorded_gen;
    event->refs++;
    pthread_mutex_unlock(&owner->mu);
    pthread_mutex_lock(&dev->mu);
    XpuOp* op = stream_valid(dev, stream, fn, status) ? op_new(stream, OP_WAIT, fn, status) : NULL;
    if (op != NULL) {
      op->u.event.event = event;
      op->u.event.gen = gen;
      enqueue(stream, op);
    }
    pthread_mutex_unlock(&dev->mu);
    if (op == NULL) {
      pthread_mutex_lock(&owner->mu);
      event_unref(event);
      pthread_mutex_unlock(&owner->mu);
    }
    pthread_mutex_unlock(&g_stream_registry_mu);
    return;
  }
  pthread_mutex_unlock(&g_stream_registry_mu);
  dev = lock_stream(device, stream, fn, status);
  if (dev == NULL) return;
  XpuOp* op = event_valid(dev, event, fn, status) ? op_new(stream, OP_WAIT, fn, status) : NULL;
  if (op != NULL) {
    op->u.event.event = event;
    op->u.event.gen = event->recorded_gen;
    event->refs++;
    enqueue(stream, op);
  }
  pthread_mutex_unlock(&dev->mu);
}

/* SP_StreamExecutor.block_host_for_event: waits until the event's current recording completes;
 * an event recorded on a failed stream reports that stream's error. */
static void xpu_block_host_for_event(const SP_Device* device, SP_Event event, TF_Status* status) {
  const char* fn = "block_host_for_event";
  XpuDevice* dev = xpu_device_get(device, fn, status);
  if (dev == NULL) return;
  dev = lock_event_device(dev, event); /* the event's device, maybe another of the platform */
  if (!event_valid(dev, event, fn, status)) {
    pthread_mutex_unlock(&dev->mu);
    return;
  }
  uint64_t gen = event->recorded_gen;
  event->refs++;
  if (event->completed_gen < gen) host_waits_on_device(dev);
  while (event->completed_gen < gen) pthread_cond_wait(&dev->state_cv, &dev->mu);
  if (gen > 0 && event->error_code != TF_OK) {
    xpu_status(status, event->error_code, "%s: the event was recorded on a stream that failed: %s",
               fn, message_or_empty(event->error_message));
  } else {
    TF_SetStatus(status, TF_OK, "");
  }
  event_unref(event);
  pthread_mutex_unlock(&dev->mu);
}

/* ---- timers ----------------------------------------------------------------------------- */

/* SP_StreamExecutor.create_timer: a timer with neither mark reached. */
static void xpu_create_timer(const SP_Device* device, SP_Timer* timer, TF_Status* status) {
  const char* fn = "create_timer";
  XpuDevice* dev = xpu_device_get(device, fn, status);
  if (dev == NULL) return;
  if (timer == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: the SP_Timer output pointer is NULL", fn);
    return;
  }
  *timer = NULL;
  uint64_t call = xpu_fault_hit(XPU_FAULT_CREATE_TIMER);
  if (call != 0) {
    xpu_fault_status(status, XPU_FAULT_CREATE_TIMER, call, fn);
    return;
  }
  SP_Timer t = calloc(1, sizeof *t);
  if (t == NULL) {
    xpu_status(status, TF_RESOURCE_EXHAUSTED, "%s: out of host memory", fn);
    return;
  }
  t->dev = dev;
  t->refs = 1;
  pthread_mutex_lock(&g_timer_mu);
  bool ok = xpu_ptrset_insert(&g_timers, t);
  if (ok) dev->live_timers++;
  pthread_mutex_unlock(&g_timer_mu);
  if (!ok) {
    free(t);
    xpu_status(status, TF_RESOURCE_EXHAUSTED, "%s: out of host memory", fn);
    return;
  }
  *timer = t;
}

/* SP_StreamExecutor.destroy_timer: drops the host's handle; queued marks keep it alive. */
static void xpu_destroy_timer(const SP_Device* device, SP_Timer timer) {
  XpuDevice* dev = xpu_device_get(device, "destroy_timer", NULL);
  if (dev == NULL || timer == NULL) return;
  pthread_mutex_lock(&g_timer_mu);
  if (xpu_ptrset_contains(&g_timers, timer) && timer->dev == dev) {
    xpu_ptrset_remove(&g_timers, timer);
    dev->live_timers--;
    timer_unref(timer);
  }
  pthread_mutex_unlock(&g_timer_mu);
}

/* Enqueues a start or stop mark of `timer` on `stream`. */
static void enqueue_timer_mark(const SP_Device* device, SP_Stream stream, SP_Timer timer,
                               OpKind kind, const char* fn, TF_Status* status) {
  XpuDevice* dev = lock_stream(device, stream, fn, status);
  if (dev == NULL) return;
  if (timer_ref(dev, timer, fn, status)) {
    XpuOp* op = op_new(stream, kind, fn, status);
    if (op != NULL) {
      op->u.timer = timer;
      enqueue(stream, op);
    } else {
      pthread_mutex_lock(&g_timer_mu);
      timer_unref(timer);
      pthread_mutex_unlock(&g_timer_mu);
    }
  }
  pthread_mutex_unlock(&dev->mu);
}

/* SP_StreamExecutor.start_timer: the worker stamps the start when it reaches this point. */
static void xpu_start_timer(const SP_Device* device, SP_Stream stream, SP_Timer timer,
                            TF_Status* status) {
  enqueue_timer_mark(device, stream, timer, OP_TIMER_START, "start_timer", status);
}

/* SP_StreamExecutor.stop_timer: the worker stamps the stop when it reaches this point. */
static void xpu_stop_timer(const SP_Device* device, SP_Stream stream, SP_Timer timer,
                           TF_Status* status) {
  enqueue_timer_mark(device, stream, timer, OP_TIMER_STOP, "stop_timer", status);
}

/* SP_TimerFns.nanoseconds: stop minus start, or 0 until both marks have been reached. */
static uint64_t xpu_timer_nanoseconds(SP_Timer timer) {
  uint64_t ns = 0;
  pthread_mutex_lock(&g_timer_mu);
  if (timer != NULL && xpu_ptrset_contains(&g_timers, timer) && timer->started &&
      timer->stopped && timer->stop_ns >= timer->start_ns) {
    ns = timer->stop_ns - timer->start_ns;
  }
  pthread_mutex_unlock(&g_timer_mu);
  return ns;
}

/* ---- copies, fills, host callbacks ------------------------------------------------------ */

/* Validates and enqueues an asynchronous copy. `*_on_device` false marks a host pointer. With
 * `src_peer` (memcpy_dtod, PLUGGABLE_PLATFORM_PEER_DTOD) a device source outside this device's
 * arena may belong to a peer device of the same platform: the device lock is dropped, the
 * peer is looked up and its mapping pinned (registry lock -> peer's mu, never two device
 * locks at once), then the stream and the destination are checked again under the lock and
 * the copy is enqueued holding the pin, which the worker drops when the copy is done. */
static void enqueue_copy(const SP_Device* device, SP_Stream stream, const char* fn,
                         XpuFaultKind kind, void* dst, bool dst_on_device, const void* src,
                         bool src_on_device, bool src_peer, uint64_t size, TF_Status* status) {
  XpuDevice* dev = lock_stream(device, stream, fn, status);
  if (dev == NULL) return;
  bool ok = true;
  XpuMapping* pin = NULL;
  XpuMapping* dst_pin = NULL;
  if (size == 0) {
    ok = false; /* a no-op that succeeds */
  } else if ((!dst_on_device && dst == NULL) || (!src_on_device && src == NULL)) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: host %s pointer is NULL for a %" PRIu64
               "-byte copy", fn, dst_on_device ? "source" : "destination", size);
    ok = false;
  } else {
    /* A peer destination is what TensorFlow's cross-device copy needs: it runs on the
     * source device's stream and writes the other device's memory. */
    bool dst_peer = src_peer && dst_on_device && dst != NULL && !xpu_arena_contains(dev, dst);
#ifdef XPU_SAME_DEVICE_ONLY
    dst_peer = false; /* the old behaviour, for tests that conformance catches it */
#endif
    ok = !dst_on_device || dst_peer ||
         xpu_check_device_range(dev, dst, size, fn, "device destination", status);
    bool peer = ok && src_on_device && src_peer && src != NULL && !xpu_arena_contains(dev, src);
    if (ok && src_on_device && !peer) {
      ok = xpu_check_device_range(dev, src, size, fn, "device source", status);
    }
    if (ok && (peer || dst_peer)) {
      pthread_mutex_unlock(&dev->mu);
      if (peer && !xpu_peer_pin_range(dev, src, size, fn, "device source", status, &pin)) return;
      if (dst_peer &&
          !xpu_peer_pin_range(dev, dst, size, fn, "device destination", status, &dst_pin)) {
        xpu_mapping_unref(pin);
        return;
      }
      dev = lock_stream(device, stream, fn, status);
      if (dev == NULL) {
        xpu_mapping_unref(pin);
        xpu_mapping_unref(dst_pin);
        return;
      }
      /* Checked again: the allocation may have been freed while the lock was dropped. */
      if (!dst_peer) ok = xpu_check_device_range(dev, dst, size, fn, "device destination", status);
      if (ok && src_on_device && !peer) {
        ok = xpu_check_device_range(dev, src, size, fn, "device source", status);
      }
    }
  }
  uint64_t call = ok ? xpu_fault_hit(kind) : 0;
  if (call != 0) {
    xpu_fault_status(status, kind, call, fn);
    ok = false;
  }
  XpuOp* op = ok ? op_new(stream, OP_COPY, fn, status) : NULL;
  if (op != NULL) {
    op->u.copy.dst = dst;
    op->u.copy.src = src;
    op->u.copy.size = size;
    op->u.copy.pin = pin;
    op->u.copy.dst_pin = dst_pin;
    op->u.copy.direction = !dst_on_device ? XPU_PROF_MEMCPY_D2H
                           : src_on_device ? XPU_PROF_MEMCPY_D2D : XPU_PROF_MEMCPY_H2D;
    pin = NULL;
    dst_pin = NULL;
    submit(stream, op, size, op->u.copy.direction != XPU_PROF_MEMCPY_D2D);
  }
  pthread_mutex_unlock(&dev->mu);
  xpu_mapping_unref(pin); /* not enqueued */
  xpu_mapping_unref(dst_pin);
}

/* SP_StreamExecutor.memcpy_dtoh: asynchronous device-to-host copy. */
static void xpu_memcpy_dtoh(const SP_Device* device, SP_Stream stream, void* host_dst,
                            const SP_DeviceMemoryBase* device_src, uint64_t size,
                            TF_Status* status) {
  void* src = NULL;
  if (size != 0 && !xpu_memory_base_pointer(device_src, "memcpy_dtoh", "source", status, &src)) {
    return;
  }
  enqueue_copy(device, stream, "memcpy_dtoh", XPU_FAULT_MEMCPY_DTOH, host_dst, false, src, true,
               false, size, status);
}

/* SP_StreamExecutor.memcpy_htod: asynchronous host-to-device copy (any host memory). */
static void xpu_memcpy_htod(const SP_Device* device, SP_Stream stream,
                            SP_DeviceMemoryBase* device_dst, const void* host_src, uint64_t size,
                            TF_Status* status) {
  void* dst = NULL;
  if (size != 0 &&
      !xpu_memory_base_pointer(device_dst, "memcpy_htod", "destination", status, &dst)) {
    return;
  }
  enqueue_copy(device, stream, "memcpy_htod", XPU_FAULT_MEMCPY_HTOD, dst, true, host_src, false,
               false, size, status);
}

/* SP_StreamExecutor.memcpy_dtod: asynchronous copy into this device's memory from its own
 * memory (ranges may overlap) or from a peer device of the same platform
 * (PLUGGABLE_PLATFORM_PEER_DTOD), ordered on this device's stream only. */
static void xpu_memcpy_dtod(const SP_Device* device, SP_Stream stream,
                            SP_DeviceMemoryBase* device_dst, const SP_DeviceMemoryBase* device_src,
                            uint64_t size, TF_Status* status) {
  void* dst = NULL;
  void* src = NULL;
  if (size != 0 &&
      (!xpu_memory_base_pointer(device_dst, "memcpy_dtod", "destination", status, &dst) ||
       !xpu_memory_base_pointer(device_src, "memcpy_dtod", "source", status, &src))) {
    return;
  }
  enqueue_copy(device, stream, "memcpy_dtod", XPU_FAULT_MEMCPY_DTOD, dst, true, src, true, true,
               size, status);
}

/* Validates and enqueues a fill of `size` bytes with a 1- or 4-byte pattern. */
static void enqueue_fill(const SP_Device* device, SP_Stream stream, const char* fn,
                         SP_DeviceMemoryBase* location, uint32_t pattern, unsigned width,
                         uint64_t size, TF_Status* status) {
  void* dst = NULL;
  if (size != 0 && !xpu_memory_base_pointer(location, fn, "destination", status, &dst)) return;
  XpuDevice* dev = lock_stream(device, stream, fn, status);
  if (dev == NULL) return;
  bool ok = size != 0;
  if (ok && width == 4 && (size % 4 != 0 || (uintptr_t)dst % 4 != 0)) {
    xpu_status(status, TF_INVALID_ARGUMENT,
               "%s: size (%" PRIu64 ") and destination (%p) must be multiples of 4", fn, size,
               dst);
    ok = false;
  }
  ok = ok && xpu_check_device_range(dev, dst, size, fn, "device destination", status);
  uint64_t call = ok ? xpu_fault_hit(XPU_FAULT_MEMSET) : 0;
  if (call != 0) {
    xpu_fault_status(status, XPU_FAULT_MEMSET, call, fn);
    ok = false;
  }
  XpuOp* op = ok ? op_new(stream, OP_FILL, fn, status) : NULL;
  if (op != NULL) {
    op->u.fill.dst = dst;
    op->u.fill.pattern = pattern;
    op->u.fill.width = width;
    op->u.fill.size = size;
    submit(stream, op, size, false);
  }
  pthread_mutex_unlock(&dev->mu);
}

/* SP_StreamExecutor.mem_zero: asynchronous fill with zero bytes. */
static void xpu_mem_zero(const SP_Device* device, SP_Stream stream, SP_DeviceMemoryBase* location,
                         uint64_t size, TF_Status* status) {
  enqueue_fill(device, stream, "mem_zero", location, 0, 1, size, status);
}

/* SP_StreamExecutor.memset: asynchronous fill with an 8-bit pattern. */
static void xpu_memset(const SP_Device* device, SP_Stream stream, SP_DeviceMemoryBase* location,
                       uint8_t pattern, uint64_t size, TF_Status* status) {
  enqueue_fill(device, stream, "memset", location, pattern, 1, size, status);
}

/* SP_StreamExecutor.memset32: asynchronous fill with a 32-bit pattern (size in bytes). */
static void xpu_memset32(const SP_Device* device, SP_Stream stream, SP_DeviceMemoryBase* location,
                         uint32_t pattern, uint64_t size, TF_Status* status) {
  enqueue_fill(device, stream, "memset32", location, pattern, 4, size, status);
}

/* SP_StreamExecutor.host_callback: the worker calls fn(arg, status) when it gets there. */
static TF_Bool xpu_host_callback(const SP_Device* device, SP_Stream stream,
                                 SE_StatusCallbackFn callback_fn, void* callback_arg) {
  const char* fn = "host_callback";
  if (callback_fn == NULL) return 0;
  XpuDevice* dev = lock_stream(device, stream, fn, NULL);
  if (dev == NULL) return 0;
  XpuOp* op = xpu_fault_hit(XPU_FAULT_HOST_CALLBACK) == 0 ? op_new(stream, OP_CALLBACK, fn, NULL) : NULL;
  if (op != NULL) {
    op->u.callback.fn = callback_fn;
    op->u.callback.arg = callback_arg;
    enqueue(stream, op);
  }
  pthread_mutex_unlock(&dev->mu);
  return op != NULL;
}

/* ---- kernel work ------------------------------------------------------------------------ */

/* Releases a kernel's argument that will never reach the worker: a heap block, or only what
 * a caller's work struct that was to be copied (`copied`) owns. */
static void free_work_arg(void* arg, bool copied, void (*free_arg)(void*)) {
  if (arg == NULL) return;
  if (free_arg != NULL) free_arg(arg);
  else if (!copied) free(arg);
}

/* The bytes a kernel reads and writes: its inputs' and outputs' device ranges. */
static uint64_t work_bytes(const XpuDeviceRange* ranges, size_t count) {
  uint64_t total = 0;
  for (size_t i = 0; i < count; i++) total += ranges[i].size;
  return total;
}

/* xpu_stream_enqueue_fn (work == NULL: `arg` is a heap block the stream owns) and
 * xpu_stream_enqueue_work (`work_size` bytes at `work` are copied into the operation's
 * payload, which is recycled with the operation; `arg` is NULL). `node` (node_len bytes, not
 * NUL-terminated) names the kernel's node for a profiling session. */
static bool enqueue_kernel_work(SP_Stream stream, const char* name, const char* node,
                                size_t node_len, uint64_t launch, XpuStreamFn fn, void* arg,
                                const void* work,
                                size_t work_size, void (*free_arg)(void*),
                                const XpuDeviceRange* ranges, size_t range_count, bool wait,
                                TF_Status* status) {
  void* owned = work != NULL ? (void*)work : arg; /* what free_arg releases on failure */
  /* Copied before any lock is taken, only while a session runs, and only when it says more
   * than the op type (eager nodes are usually named after their op). */
  char* prof_name = NULL;
  if (node != NULL && node_len > 0 && fn != NULL && xpu_prof_active() &&
      !(strlen(name) == node_len && memcmp(name, node, node_len) == 0)) {
    prof_name = xpu_prof_copy_name(node, node_len);
  }
  /* Find and lock the stream's device while the registry keeps both alive. */
  XpuDevice* dev = NULL;
  pthread_mutex_lock(&g_stream_registry_mu);
  if (stream != NULL && xpu_ptrset_contains(&g_live_streams, stream)) {
    dev = stream->dev;
    pthread_mutex_lock(&dev->mu);
  }
  pthread_mutex_unlock(&g_stream_registry_mu);
  if (dev == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT,
               "%s: stream %p is not a live stream of an XPU device (TF_GetStream returned a "
               "destroyed or foreign stream)", name, (void*)stream);
    free_work_arg(owned, work != NULL, free_arg);
    xpu_prof_free_name(prof_name);
    return false;
  }
  bool ok = stream_valid(dev, stream, name, status);
  for (size_t i = 0; ok && i < range_count; i++) {
    if (ranges[i].size == 0) continue;
    ok = xpu_check_device_range(dev, ranges[i].ptr, ranges[i].size, name, ranges[i].role,
                                status);
  }
  XpuOp* op = ok && fn != NULL ? op_new(stream, OP_FN, name, status) : NULL;
  if (op != NULL && work != NULL && op->payload_size < work_size) {
    void* grown = realloc(op->payload, work_size);
    if (grown == NULL) {
      xpu_status(status, TF_RESOURCE_EXHAUSTED, "%s: out of host memory for the stream queue",
                 name);
      op_recycle(stream, op);
      op = NULL;
    } else {
      op->payload = grown;
      op->payload_size = work_size;
    }
  }
  if (op != NULL) {
    op->u.work.fn = fn;
    op->u.work.free_arg = free_arg;
    if (work != NULL) {
      memcpy(op->payload, work, work_size);
      op->u.work.arg = op->payload;
      op->u.work.in_payload = true;
    } else {
      op->u.work.arg = arg;
    }
    op->prof_name = prof_name;
    op->launch = launch;
    prof_name = NULL;
    submit(stream, op, work_bytes(ranges, range_count), false);
  }
  bool queued = ok && (fn == NULL || op != NULL);
  if (queued && fn != NULL && wait && tl_worker_stream != stream) {
    wait_until_done_locked(dev, stream, status);
    queued = TF_GetCode(status) == TF_OK;
  }
  pthread_mutex_unlock(&dev->mu);
  xpu_prof_free_name(prof_name); /* not enqueued */
  if (op == NULL) free_work_arg(owned, work != NULL, free_arg);
  return queued;
}

bool xpu_stream_enqueue_fn(SP_Stream stream, const char* name, const char* node,
                           size_t node_len, uint64_t launch, XpuStreamFn fn, void* arg,
                           void (*free_arg)(void*), const XpuDeviceRange* ranges,
                           size_t range_count, bool wait, TF_Status* status) {
  return enqueue_kernel_work(stream, name, node, node_len, launch, fn, arg, NULL, 0, free_arg,
                             ranges,
                             range_count, wait, status);
}

bool xpu_stream_enqueue_work(SP_Stream stream, const char* name, const char* node,
                             size_t node_len, uint64_t launch, XpuStreamFn fn, const void* work,
                             size_t work_size, void (*cleanup)(void*),
                             const XpuDeviceRange* ranges, size_t range_count, bool wait,
                             TF_Status* status) {
  return enqueue_kernel_work(stream, name, node, node_len, launch, fn, NULL, work, work_size,
                             cleanup,
                             ranges, range_count, wait, status);
}

/* PLUGGABLE_StreamNamesExt.set_stream_name: names the stream's timeline in profiles. The
 * callback has no status, so an invalid device or stream is ignored. */
void xpu_stream_set_name(const SP_Device* device, SP_Stream stream, const char* name) {
  if (name == NULL) return;
  XpuDevice* dev = lock_stream(device, stream, "set_stream_name", NULL);
  if (dev == NULL) return;
  xpu_prof_stream_set_name(stream->prof, name);
  pthread_mutex_unlock(&dev->mu);
}

/* ---- wiring and teardown ---------------------------------------------------------------- */

void xpu_stream_fill_executor(SP_StreamExecutor* se) {
  se->create_stream = xpu_create_stream;
  se->destroy_stream = xpu_destroy_stream;
  se->create_stream_dependency = xpu_create_stream_dependency;
  se->get_stream_status = xpu_get_stream_status;
  se->create_event = xpu_create_event;
  se->destroy_event = xpu_destroy_event;
  se->get_event_status = xpu_get_event_status;
  se->record_event = xpu_record_event;
  se->wait_for_event = xpu_wait_for_event;
  se->create_timer = xpu_create_timer;
  se->destroy_timer = xpu_destroy_timer;
  se->start_timer = xpu_start_timer;
  se->stop_timer = xpu_stop_timer;
  se->memcpy_dtoh = xpu_memcpy_dtoh;
  se->memcpy_htod = xpu_memcpy_htod;
  se->memcpy_dtod = xpu_memcpy_dtod;
  se->block_host_for_event = xpu_block_host_for_event;
  se->block_host_until_done = xpu_block_host_until_done;
  se->synchronize_all_activity = xpu_synchronize_all_activity;
  se->mem_zero = xpu_mem_zero;
  se->memset = xpu_memset;
  se->memset32 = xpu_memset32;
  se->host_callback = xpu_host_callback;
}

void xpu_stream_fill_timer_fns(SP_TimerFns* fns) { fns->nanoseconds = xpu_timer_nanoseconds; }

void xpu_stream_teardown_device(XpuDevice* dev) {
  size_t n = 0;
  pthread_mutex_lock(&dev->mu);
  void** streams = xpu_ptrset_snapshot(&dev->streams, &n);
  pthread_mutex_unlock(&dev->mu);
  for (size_t i = 0; i < n; i++) stream_destroy(dev, streams[i]);
  free(streams);

  pthread_mutex_lock(&g_stream_registry_mu);
  pthread_mutex_lock(&dev->mu);
  void** events = xpu_ptrset_snapshot(&dev->events, &n);
  for (size_t i = 0; i < n; i++) {
    xpu_ptrset_remove(&g_live_events, events[i]);
    event_unref(events[i]);
  }
  free(events);
  xpu_ptrset_clear(&dev->events);
  xpu_ptrset_clear(&dev->streams); /* empty unless a stream could not be joined */
  pthread_mutex_unlock(&dev->mu);
  pthread_mutex_unlock(&g_stream_registry_mu);

  pthread_mutex_lock(&g_timer_mu);
  void** timers = xpu_ptrset_snapshot(&g_timers, &n);
  for (size_t i = 0; i < n; i++) {
    SP_Timer t = timers[i];
    if (t->dev != dev) continue;
    xpu_ptrset_remove(&g_timers, t);
    timer_unref(t);
  }
  free(timers);
  dev->live_timers = 0;
  pthread_mutex_unlock(&g_timer_mu);
}

uint64_t XPU_OpRecordAllocations(void) {
  return (uint64_t)atomic_load_explicit(&g_op_allocations, memory_order_relaxed);
}

bool xpu_stream_on_worker_of(const XpuDevice* dev) {
  return tl_worker_stream != NULL && tl_worker_stream->dev == dev;
}

void xpu_stream_live_handles(XpuDevice* dev, int64_t* streams, int64_t* events,
                             int64_t* timers) {
  pthread_mutex_lock(&dev->mu);
  *streams = (int64_t)dev->streams.count;
  *events = (int64_t)dev->events.count;
  pthread_mutex_lock(&g_timer_mu);
  *timers = dev->live_timers;
  pthread_mutex_unlock(&g_timer_mu);
  pthread_mutex_unlock(&dev->mu);
}
