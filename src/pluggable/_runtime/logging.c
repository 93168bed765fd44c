/* tensorflow/c/logging.h: TF_Log, TF_VLog and TF_DVLog, for plugins.
 *
 * A line is formatted here, prefixed with the file name of the library that wrote it (found
 * with dladdr from the caller's address), and queued. Python takes lines off the queue on a
 * thread of its own (pluggable.base.plugin_log), blocked in pluggable_WaitLogRecord without
 * the GIL, and hands them to `logging`. The plugin's thread never waits for Python: a plugin
 * may log from a stream worker that the thread holding the GIL is waiting for.
 *
 * The queue keeps the last PG_LOG_CAPACITY lines; older ones are dropped and counted when
 * nothing takes them (no Python thread started: a process that loaded no plugin that logs).
 * TF_FATAL writes its line to stderr and ends the process with abort(), as TensorFlow does;
 * a plugin may rely on it not returning.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime_internal.h"
#include "tensorflow/c/logging.h"

#define PG_LOG_CAPACITY 256
#define PG_LOG_LINE 2048

/* Python's logging levels, which the queue carries. */
enum { PG_LOG_DEBUG = 10, PG_LOG_INFO = 20, PG_LOG_WARNING = 30, PG_LOG_ERROR = 40 };

typedef struct {
  int level;
  char text[PG_LOG_LINE];
} LogLine;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t log_ready = PTHREAD_COND_INITIALIZER;
static LogLine log_queue[PG_LOG_CAPACITY];
static size_t log_head, log_count;
static unsigned long long log_dropped;

/* "libfoo.so: " for the library holding `caller`, or "" when unknown. */
static void caller_prefix(const void* caller, char* out, size_t size) {
  Dl_info info;
  out[0] = '\0';
  if (caller != NULL && dladdr(caller, &info) && info.dli_fname != NULL) {
    const char* base = strrchr(info.dli_fname, '/');
    snprintf(out, size, "%s: ", base ? base + 1 : info.dli_fname);
  }
}

static void format_line(char* out, size_t size, const void* caller, const char* fmt,
                        va_list args) {
  char prefix[256];
  caller_prefix(caller, prefix, sizeof prefix);
  int used = snprintf(out, size, "%s", prefix);
  if (used < 0 || (size_t)used >= size) used = 0;
  if (fmt == NULL) fmt = "(no message: the format was NULL)";
  vsnprintf(out + used, size - (size_t)used, fmt, args);
}

static void enqueue(int level, const void* caller, const char* fmt, va_list args) {
  pthread_mutex_lock(&log_lock);
  size_t slot = (log_head + log_count) % PG_LOG_CAPACITY;
  if (log_count == PG_LOG_CAPACITY) { /* full: the oldest line goes */
    log_head = (log_head + 1) % PG_LOG_CAPACITY;
    log_dropped++;
  } else {
    log_count++;
  }
  log_queue[slot].level = level;
  format_line(log_queue[slot].text, sizeof log_queue[slot].text, caller, fmt, args);
  pthread_cond_signal(&log_ready);
  pthread_mutex_unlock(&log_lock);
}

/* TF_CPP_MAX_VLOG_LEVEL, read once (TensorFlow reads it at start-up too). */
static int max_vlog_level(void) {
  static int level = -1;
  if (__atomic_load_n(&level, __ATOMIC_ACQUIRE) < 0) {
    const char* text = getenv("TF_CPP_MAX_VLOG_LEVEL");
    int value = text != NULL ? atoi(text) : 0;
    __atomic_store_n(&level, value < 0 ? 0 : value, __ATOMIC_RELEASE);
  }
  return __atomic_load_n(&level, __ATOMIC_ACQUIRE);
}

void TF_Log(TF_LogLevel level, const char* fmt, ...) {
  const void* caller = __builtin_return_address(0);
  va_list args;
  va_start(args, fmt);
  if (level == TF_FATAL) {
    char line[PG_LOG_LINE];
    format_line(line, sizeof line, caller, fmt, args);
    va_end(args);
    fprintf(stderr, "pluggable: a plugin logged a fatal error, which ends the process "
                    "(TF_Log(TF_FATAL), as in TensorFlow): %s\n", line);
    fflush(stderr);
    abort();
  }
  int python_level = level == TF_INFO      ? PG_LOG_INFO
                     : level == TF_WARNING ? PG_LOG_WARNING
                                           : PG_LOG_ERROR; /* TF_ERROR and unknown levels */
  enqueue(python_level, caller, fmt, args);
  va_end(args);
}

void TF_VLog(int level, const char* fmt, ...) {
  if (level > max_vlog_level()) return;
  va_list args;
  va_start(args, fmt);
  enqueue(PG_LOG_DEBUG, __builtin_return_address(0), fmt, args);
  va_end(args);
}

void TF_DVLog(int level, const char* fmt, ...) {
  (void)level; /* TensorFlow's release builds compile debug-only verbose logging out */
  (void)fmt;
}

int pluggable_WaitLogRecord(int* level, char* text, size_t capacity, int timeout_ms) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += timeout_ms / 1000;
  deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec++;
    deadline.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&log_lock);
  while (log_count == 0) {
    if (pthread_cond_timedwait(&log_ready, &log_lock, &deadline) == ETIMEDOUT) break;
  }
  int got = 0;
  if (log_count > 0) {
    const LogLine* line = &log_queue[log_head];
    *level = line->level;
    if (capacity > 0) snprintf(text, capacity, "%s", line->text);
    log_head = (log_head + 1) % PG_LOG_CAPACITY;
    log_count--;
    got = 1;
  }
  pthread_mutex_unlock(&log_lock);
  return got;
}

unsigned long long pluggable_LogRecordsDropped(void) {
  pthread_mutex_lock(&log_lock);
  unsigned long long dropped = log_dropped;
  pthread_mutex_unlock(&log_lock);
  return dropped;
}
