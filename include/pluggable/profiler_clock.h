/* A cheap clock for profilers that must report CLOCK_REALTIME nanoseconds.
 *
 * TensorFlow's profiler, and pluggable's, put every plane on CLOCK_REALTIME. Reading it costs
 * a `clock_gettime` (about 20-25 ns through the vDSO), two per recorded event, on the path
 * of the work being measured. Where the CPU's time-stamp counter is the kernel's own clock
 * source (x86 with an invariant TSC), a profiler can instead read the counter (about 8 ns),
 * take one (counter, CLOCK_REALTIME) pair when its session starts and one when it stops, and
 * turn counter values into nanoseconds between the two by linear interpolation when it
 * writes its events out. Two profilers doing so (a plugin's and the host's) agree with each
 * other to within the jitter of reading a pair (tens of nanoseconds).
 *
 *   int tsc = pg_profiler_tsc_usable();                        // once per process
 *   PG_ClockPair start = pg_profiler_clock_pair(tsc, realtime);   // session start
 *   uint64_t t = pg_profiler_ticks(tsc, realtime);             // per event
 *   PG_ClockPair stop = pg_profiler_clock_pair(tsc, realtime);    // session stop
 *   int64_t ns = pg_profiler_ticks_to_ns(tsc, start, stop, t);
 *
 * `realtime` is the caller's reading of CLOCK_REALTIME in nanoseconds (`clock_gettime` is
 * POSIX, which a strict C99 translation unit does not declare).
 * Without a usable counter (another architecture, another clock source, or the file that
 * says so unreadable) ticks are CLOCK_REALTIME nanoseconds and the conversion is the
 * identity. Header-only; C99 and C++. */
#ifndef PLUGGABLE_PROFILER_CLOCK_H_
#define PLUGGABLE_PROFILER_CLOCK_H_

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define PG_PROFILER_HAVE_TSC 1
#else
#define PG_PROFILER_HAVE_TSC 0
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* A counter value and the CLOCK_REALTIME nanoseconds it stood for. */
typedef struct PG_ClockPair {
  uint64_t ticks;
  int64_t ns;
} PG_ClockPair;

/* The caller's CLOCK_REALTIME, in nanoseconds. */
typedef int64_t (*PG_RealtimeNs)(void);

/* 1 when the time-stamp counter can stand in for CLOCK_REALTIME: the kernel keeps time with
 * it (its current clock source is "tsc", which it chooses only for an invariant counter). */
static inline int pg_profiler_tsc_usable(void) {
#if PG_PROFILER_HAVE_TSC
  FILE* f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (f == NULL) return 0;
  char name[32] = {0};
  int ok = fgets(name, (int)sizeof name, f) != NULL && strncmp(name, "tsc\n", 4) == 0;
  fclose(f);
  return ok;
#else
  return 0;
#endif
}

/* The clock's current value: counter ticks when `tsc`, else CLOCK_REALTIME nanoseconds. */
static inline uint64_t pg_profiler_ticks(int tsc, PG_RealtimeNs realtime) {
#if PG_PROFILER_HAVE_TSC
  if (tsc) return (uint64_t)__rdtsc();
#endif
  (void)tsc;
  return (uint64_t)realtime();
}

/* A (ticks, nanoseconds) pair read now: the counter between two clock reads, and their
 * mean, so that the pair's own error is half the time of one clock read. */
static inline PG_ClockPair pg_profiler_clock_pair(int tsc, PG_RealtimeNs realtime) {
  PG_ClockPair pair;
  int64_t before = realtime();
  pair.ticks = pg_profiler_ticks(tsc, realtime);
  int64_t after = realtime();
  pair.ns = before + (after - before) / 2;
  if (!tsc) pair.ticks = (uint64_t)pair.ns;
  return pair;
}

/* `ticks` as CLOCK_REALTIME nanoseconds, by the line through `start` and `stop` (any two
 * pairs; ticks outside them are extrapolated). */
static inline int64_t pg_profiler_ticks_to_ns(int tsc, PG_ClockPair start, PG_ClockPair stop,
                                              uint64_t ticks) {
  if (!tsc) return (int64_t)ticks;
  double span = (double)(int64_t)(stop.ticks - start.ticks);
  if (span <= 0) return start.ns; /* the pairs are the same instant: nothing to scale by */
  double per_tick = (double)(stop.ns - start.ns) / span;
  return start.ns + (int64_t)((double)(int64_t)(ticks - start.ticks) * per_tick);
}

#ifdef __cplusplus
}
#endif

#endif /* PLUGGABLE_PROFILER_CLOCK_H_ */
