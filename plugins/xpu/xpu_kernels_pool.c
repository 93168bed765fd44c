/* xpu_kernels_pool.c: the small pool of helper threads that large kernels split their work
 * across.
 *
 * A kernel runs on its stream's worker thread. When it is large enough to be worth splitting
 * (MatMul, Conv2D, big element-wise ops and reductions) it calls xpu_parallel_for with a
 * number of independent tasks; the worker publishes the job, wakes the helpers and claims
 * tasks itself, so a job always finishes even if no helper ever joins (and several streams
 * can run jobs at once: helpers take tasks from the oldest job with some left). The pool has
 * XPU_KERNEL_THREADS - 1 helpers (default: the number of online CPUs minus one), because the
 * stream worker is the remaining thread. Helpers are started by the first parallel job and
 * joined when the last stream of the plugin is destroyed (xpu_pool_retain/release, called by
 * create_stream/destroy_stream), so an idle plugin has no helper threads.
 *
 * The split into tasks is chosen by the kernels so that results (floating-point sums in
 * particular) do not depend on XPU_KERNEL_THREADS: from the problem size only, except the
 * GEMM's tiles of C, which do not change how an element is computed (xpu_pool_threads). The
 * pool lock is a leaf lock: tasks run without it.
 *
 * Element-wise kernels (a few bytes of memory traffic per element, no arithmetic to speak
 * of) are split from XPU_ELEMENTWISE_SPLIT elements on (default 2^16, two tasks of 32768).
 * Below that, waking a helper and, on a busy machine, waiting at the end for a helper the
 * scheduler preempted in the middle of its task cost more than the second core gives. While
 * helpers slept between jobs, a split paid only from 2^22 elements on; since they spin for
 * the next job (below), AddV2 float32 split across 2 threads takes 0.52-0.83x the time of one
 * thread from 2^17 to 2^21 elements, quiet or beside a busy process, and 0.83-1.02x at 2^16
 * (medians, the 2-core machine of BENCHMARKS.md); from 2^22 on 0.59-0.82x on a quiet
 * machine, 1.08-1.25x beside a busy process, as before the change.
 * `benchmarks/bench_kernels.py --grain` measures it.
 *
 * Waiting. On the 2-core test VM, waking a sleeping thread took from a few microseconds to
 * over 2 ms (more right after the process had kept both cores busy, which is what another
 * library's threads do just before: OpenBLAS's, in the benchmarks). A thread that has just
 * worked on a job therefore spins before it sleeps: a helper for the next job, a caller for
 * the helpers still on its job, each at most XPU_POOL_SPIN_NS and never longer than its own
 * part of the job took. A stream of MatMuls then finds its helper awake, and the spinning
 * at most doubles the CPU time of the work; small kernels never split, so a stream of them
 * never spins here. A kernel that knows at enqueue time that it will split (a large GEMM)
 * wakes the sleeping helpers then (xpu_pool_expect_job): they spin for its job, at most as
 * long as the job should take, so their wake-up overlaps the stream worker's.
 *
 * Where the threads of a job run. A helper woken for a job sometimes shares the stream
 * worker's core while the other core idles, and stays there: the scheduler keeps both in
 * place because both ran recently (cache-hot), and a stream of 512^2 MatMuls then ran at
 * one core's speed for tens of milliseconds. So every thread that joins a job marks its
 * CPU, and a helper that finds its CPU already taken by the job moves to one that is not: it
 * narrows its affinity to the CPUs it may use minus the taken ones, which moves it at once,
 * and puts the affinity back as it was, so nothing stays pinned (Linux only).
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* sched_getcpu, sched_setaffinity */
#endif
#include "xpu_internal.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define XPU_MAX_KERNEL_THREADS 256

/* One parallel_for call; lives on the caller's stack until every helper has let go of it. */
typedef struct PoolJob {
  struct PoolJob* next;
  void (*fn)(void* ctx, int64_t task);
  void* ctx;
  int64_t task_count;
  atomic_int_fast64_t next_task; /* the next unclaimed task */
  atomic_int helpers;            /* helpers working on it; changed under g_pool.mu */
  atomic_uint_fast64_t cpus;     /* CPUs (below 64) its threads joined it on */
} PoolJob;

/* A helper that finished its part of a job spins this long at most for the next job before
 * it sleeps, and a caller that finished its part spins as long at most for the helpers still
 * on it; neither spins longer than its part took, so spinning at most doubles the CPU time
 * of the work. See the top of this file. */
#define XPU_POOL_SPIN_NS UINT64_C(1000000)

static struct {
  pthread_mutex_t mu;
  pthread_cond_t work_cv; /* helpers wait here for jobs */
  pthread_cond_t done_cv; /* callers wait here for helpers to leave their job */
  PoolJob* jobs;          /* open jobs, oldest first */
  atomic_uint_fast64_t posted; /* jobs ever published; read unlocked by spinning helpers */
  int sleeping;           /* helpers waiting on work_cv */
  uint64_t expected_until; /* a job is on its way until then (xpu_pool_expect_job) */
  pthread_t* helpers;
  int helper_count;       /* started helpers */
  int64_t refs;           /* live streams */
  bool stopping;
  int configured;         /* XPU_KERNEL_THREADS; 0 = online CPUs */
} g_pool = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .work_cv = PTHREAD_COND_INITIALIZER,
    .done_cv = PTHREAD_COND_INITIALIZER,
};

bool xpu_parse_kernel_threads(const char* text, int* out, char* err, size_t err_size) {
  int value = 0;
  bool ok = *text != '\0';
  for (const char* p = text; ok && *p != '\0'; p++) {
    ok = *p >= '0' && *p <= '9' && value <= XPU_MAX_KERNEL_THREADS;
    value = value * 10 + (*p - '0');
  }
  if (!ok || value < 1 || value > XPU_MAX_KERNEL_THREADS) {
    snprintf(err, err_size,
             "XPU_KERNEL_THREADS='%s' is not valid: expected a whole number of threads from 1 "
             "to %d", text, XPU_MAX_KERNEL_THREADS);
    return false;
  }
  *out = value;
  return true;
}

static atomic_int_fast64_t g_elementwise_split = XPU_ELEMENTWISE_SPLIT_DEFAULT;

/* Helpers that moved off a CPU their job had taken (XPU_PoolMoveCount). */
static atomic_uint_fast64_t g_moves;

uint64_t XPU_PoolMoveCount(void) {
  return (uint64_t)atomic_load_explicit(&g_moves, memory_order_relaxed);
}

/* Tasks of the jobs that were split (XPU_SplitTaskCount). */
static atomic_uint_fast64_t g_split_tasks;

uint64_t XPU_SplitTaskCount(void) {
  return (uint64_t)atomic_load_explicit(&g_split_tasks, memory_order_relaxed);
}

bool xpu_parse_elementwise_split(const char* text, int64_t* out, char* err, size_t err_size) {
  uint64_t value = 0;
  if (!xpu_parse_whole(text, (uint64_t)1 << 62, &value)) {
    snprintf(err, err_size,
             "XPU_ELEMENTWISE_SPLIT='%s' is not valid: expected a whole number of elements "
             "from 0 to 2^62 (element-wise kernels with fewer run on one thread)", text);
    return false;
  }
  *out = (int64_t)value;
  return true;
}

void xpu_pool_configure_elementwise_split(int64_t elements) {
  atomic_store(&g_elementwise_split, elements);
}

int64_t xpu_pool_elementwise_split(void) { return atomic_load(&g_elementwise_split); }

void xpu_pool_configure(int threads) {
  pthread_mutex_lock(&g_pool.mu);
  g_pool.configured = threads;
  pthread_mutex_unlock(&g_pool.mu);
}

/* The configured parallelism, or the number of online CPUs (read once: sysconf reads a file
 * each time, several µs, and split GEMMs ask for every product). Under g_pool.mu. */
static int wanted_threads(void) {
  static int online;
  if (g_pool.configured > 0) return g_pool.configured;
  if (online == 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1) cpus = 1;
    if (cpus > XPU_MAX_KERNEL_THREADS) cpus = XPU_MAX_KERNEL_THREADS;
    online = (int)cpus;
  }
  return online;
}

/* Claims and runs tasks of `job` until none is left. */
static void run_tasks(PoolJob* job) {
  for (;;) {
    int64_t t = atomic_fetch_add(&job->next_task, 1);
    if (t >= job->task_count) return;
    job->fn(job->ctx, t);
  }
}

/* The oldest job that still has unclaimed tasks, or NULL. Under g_pool.mu. */
static PoolJob* open_job(void) {
  for (PoolJob* j = g_pool.jobs; j != NULL; j = j->next) {
    if (atomic_load(&j->next_task) < j->task_count) return j;
  }
  return NULL;
}

/* Marks the calling thread's CPU as taken by `job`. A helper (`move`) whose CPU another
 * thread of the job has taken first moves to a CPU that none has, when its affinity allows
 * one (see the top of this file). */
static void take_cpu(PoolJob* job, bool move) {
#ifdef __linux__
  int cpu = sched_getcpu();
  if (cpu < 0 || cpu >= 64) return;
  uint_fast64_t taken = atomic_fetch_or_explicit(&job->cpus, UINT64_C(1) << cpu,
                                                 memory_order_relaxed);
  if (!move || (taken & (UINT64_C(1) << cpu)) == 0) return;
  cpu_set_t allowed, elsewhere;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  elsewhere = allowed;
  for (int c = 0; c < 64; c++) {
    if ((taken | (UINT64_C(1) << cpu)) & (UINT64_C(1) << c)) CPU_CLR(c, &elsewhere);
  }
  if (CPU_COUNT(&elsewhere) == 0) return;
  if (sched_setaffinity(0, sizeof elsewhere, &elsewhere) != 0) return;
  sched_setaffinity(0, sizeof allowed, &allowed);
  atomic_fetch_add_explicit(&g_moves, 1, memory_order_relaxed);
  cpu = sched_getcpu();
  if (cpu >= 0 && cpu < 64) {
    atomic_fetch_or_explicit(&job->cpus, UINT64_C(1) << cpu, memory_order_relaxed);
  }
#else
  (void)job;
  (void)move;
#endif
}

/* Reads CLOCK_MONOTONIC in nanoseconds. */
static uint64_t pool_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/* Spins while busy(arg) holds, at most `limit_ns`, without the pool lock. */
static void spin_while(bool (*busy)(void*), void* arg, uint64_t limit_ns) {
  uint64_t started = pool_now_ns();
  for (unsigned i = 1; busy(arg); i++) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 0 && pool_now_ns() - started >= limit_ns) return;
  }
}

/* spin_while predicates: no job published since *seen; helpers still on the job. */
static bool no_job_since(void* seen) {
  return atomic_load_explicit(&g_pool.posted, memory_order_relaxed) == *(uint_fast64_t*)seen;
}

static bool helpers_on(void* job) {
  return atomic_load_explicit(&((PoolJob*)job)->helpers, memory_order_acquire) > 0;
}

/* How long a thread that just worked `worked_ns` on a job may spin (XPU_POOL_SPIN_NS). */
static uint64_t spin_limit(uint64_t worked_ns) {
  return worked_ns < XPU_POOL_SPIN_NS ? worked_ns : XPU_POOL_SPIN_NS;
}

/* A helper thread: joins open jobs until the pool stops. */
static void* helper_main(void* arg) {
  (void)arg;
#ifdef __linux__
  pthread_setname_np(pthread_self(), "xpu-pool");
#endif
  uint64_t worked_ns = 0; /* how long its part of the last job took */
  pthread_mutex_lock(&g_pool.mu);
  for (;;) {
    PoolJob* job = open_job();
    if (job == NULL && !g_pool.stopping && worked_ns > 0) {
      uint_fast64_t seen = atomic_load_explicit(&g_pool.posted, memory_order_relaxed);
      pthread_mutex_unlock(&g_pool.mu);
      spin_while(no_job_since, &seen, spin_limit(worked_ns));
      pthread_mutex_lock(&g_pool.mu);
      job = open_job();
    }
    worked_ns = 0;
    while (!g_pool.stopping && job == NULL) {
      uint64_t now = pool_now_ns();
      if (g_pool.expected_until > now) {
        uint_fast64_t seen = atomic_load_explicit(&g_pool.posted, memory_order_relaxed);
        uint64_t limit = g_pool.expected_until - now;
        pthread_mutex_unlock(&g_pool.mu);
        spin_while(no_job_since, &seen, limit);
        pthread_mutex_lock(&g_pool.mu);
        if (open_job() == NULL) g_pool.expected_until = 0;
      } else {
        g_pool.sleeping++;
        pthread_cond_wait(&g_pool.work_cv, &g_pool.mu);
        g_pool.sleeping--;
      }
      job = open_job();
    }
    if (g_pool.stopping) break;
    atomic_fetch_add_explicit(&job->helpers, 1, memory_order_relaxed);
    pthread_mutex_unlock(&g_pool.mu);
    take_cpu(job, true);
    uint64_t started = pool_now_ns();
    run_tasks(job);
    worked_ns = pool_now_ns() - started;
    pthread_mutex_lock(&g_pool.mu);
    if (atomic_fetch_sub_explicit(&job->helpers, 1, memory_order_release) == 1) {
      pthread_cond_broadcast(&g_pool.done_cv);
    }
  }
  pthread_mutex_unlock(&g_pool.mu);
  return NULL;
}

/* Starts the helpers if the pool is alive and has none yet. Under g_pool.mu. */
static void start_helpers(void) {
  if (g_pool.helper_count > 0 || g_pool.refs == 0 || g_pool.stopping) return;
  int want = wanted_threads() - 1;
  if (want <= 0) return;
  g_pool.helpers = calloc((size_t)want, sizeof(pthread_t));
  if (g_pool.helpers == NULL) return; /* jobs simply run on their caller */
  while (g_pool.helper_count < want &&
         pthread_create(&g_pool.helpers[g_pool.helper_count], NULL, helper_main, NULL) == 0) {
    g_pool.helper_count++;
  }
  if (g_pool.helper_count == 0) {
    free(g_pool.helpers);
    g_pool.helpers = NULL;
  }
}

void xpu_pool_retain(void) {
  pthread_mutex_lock(&g_pool.mu);
  g_pool.refs++;
  pthread_mutex_unlock(&g_pool.mu);
}

void xpu_pool_release(void) {
  pthread_mutex_lock(&g_pool.mu);
  if (--g_pool.refs > 0 || g_pool.helper_count == 0) {
    pthread_mutex_unlock(&g_pool.mu);
    return;
  }
  /* The last stream is gone, so no job is running: stop and join the helpers. */
  g_pool.stopping = true;
  pthread_cond_broadcast(&g_pool.work_cv);
  pthread_t* helpers = g_pool.helpers;
  int count = g_pool.helper_count;
  g_pool.helpers = NULL;
  g_pool.helper_count = 0;
  pthread_mutex_unlock(&g_pool.mu);
  for (int i = 0; i < count; i++) pthread_join(helpers[i], NULL);
  free(helpers);
  pthread_mutex_lock(&g_pool.mu);
  g_pool.stopping = false;
  pthread_mutex_unlock(&g_pool.mu);
}

void xpu_pool_expect_job(uint64_t work_ns) {
  pthread_mutex_lock(&g_pool.mu);
  if (g_pool.sleeping > 0) {
    uint64_t until = pool_now_ns() + spin_limit(work_ns);
    if (until > g_pool.expected_until) g_pool.expected_until = until;
    pthread_cond_broadcast(&g_pool.work_cv);
  }
  pthread_mutex_unlock(&g_pool.mu);
}

int xpu_pool_threads(void) {
  pthread_mutex_lock(&g_pool.mu);
  int threads = g_pool.helper_count > 0 ? g_pool.helper_count + 1 : wanted_threads();
  pthread_mutex_unlock(&g_pool.mu);
  return threads;
}

void xpu_parallel_for(int64_t task_count, void (*fn)(void* ctx, int64_t task), void* ctx) {
  if (task_count <= 0) return;
  PoolJob job = {.fn = fn, .ctx = ctx, .task_count = task_count};
  atomic_init(&job.next_task, 0);
  atomic_init(&job.cpus, 0);
  if (task_count > 1) {
    atomic_fetch_add_explicit(&g_split_tasks, (uint_fast64_t)task_count, memory_order_relaxed);
    take_cpu(&job, false);
    pthread_mutex_lock(&g_pool.mu);
    start_helpers();
    bool shared = g_pool.helper_count > 0;
    if (shared) {
      PoolJob** tail = &g_pool.jobs;
      while (*tail != NULL) tail = &(*tail)->next;
      *tail = &job;
      atomic_fetch_add_explicit(&g_pool.posted, 1, memory_order_relaxed);
      if (task_count - 1 >= g_pool.helper_count) pthread_cond_broadcast(&g_pool.work_cv);
      else for (int64_t i = 0; i < task_count - 1; i++) pthread_cond_signal(&g_pool.work_cv);
    }
    pthread_mutex_unlock(&g_pool.mu);
    if (shared) {
      uint64_t started = pool_now_ns();
      run_tasks(&job);
      /* Unlist the job so no helper joins it late, then wait for those still on it. */
      pthread_mutex_lock(&g_pool.mu);
      for (PoolJob** p = &g_pool.jobs; *p != NULL; p = &(*p)->next) {
        if (*p == &job) {
          *p = job.next;
          break;
        }
      }
      if (atomic_load_explicit(&job.helpers, memory_order_acquire) > 0) {
        pthread_mutex_unlock(&g_pool.mu);
        spin_while(helpers_on, &job, spin_limit(pool_now_ns() - started));
        pthread_mutex_lock(&g_pool.mu);
      }
      while (atomic_load_explicit(&job.helpers, memory_order_acquire) > 0) {
        pthread_cond_wait(&g_pool.done_cv, &g_pool.mu);
      }
      pthread_mutex_unlock(&g_pool.mu);
      return;
    }
  }
  run_tasks(&job);
}
