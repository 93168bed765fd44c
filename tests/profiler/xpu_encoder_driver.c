/* A C driver for the XPU profiler's XSpace encoder (plugins/xpu/xpu_profiler.c, included
 * here so that the driver can count and fail its allocations and pin its clock).
 *
 *   cc -std=c11 -pthread -I include -I plugins/xpu tests/profiler/xpu_encoder_driver.c
 *
 *   driver session SCENARIO OUT   records a session of events made up from a fixed seed, on
 *                                 several devices and streams, stops and collects it: OUT gets
 *                                 the XSpace and stdout lists what was recorded
 *   driver oom                    runs one session per allocation collect makes, failing that
 *                                 allocation: each must fail with RESOURCE_EXHAUSTED and leave
 *                                 no block behind; prints how many allocations were failed
 *
 * Scenarios: 0 mixed events (some streams span several chunks), 1 an event cap of 7 per
 * stream (dropped events), 2 nothing recorded, 3 three thousand events per stream. The clock is
 * CLOCK_REALTIME (no time-stamp counter), so events keep the nanoseconds they are given.
 * Listing lines (tab-separated): "stream ORDINAL ID NAME" (NAME "!" when unnamed), "event
 * ORDINAL STREAM KIND START END BYTES OP_TYPE NAME CORRELATION" (OP_TYPE and NAME "!" when
 * NULL, else "=" and the text), "cap N". Exit status 0 means every check passed. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The encoder's allocations, counted (live blocks) and failed on demand (the n-th call). */
static long g_calls, g_fail_at = -1, g_live;
static void* counted_malloc(size_t n) {
  if (++g_calls == g_fail_at) return NULL;
  void* p = malloc(n);
  g_live += p != NULL;
  return p;
}
static void* counted_calloc(size_t count, size_t n) {
  if (++g_calls == g_fail_at) return NULL;
  void* p = calloc(count, n);
  g_live += p != NULL;
  return p;
}
static void* counted_realloc(void* old, size_t n) {
  if (++g_calls == g_fail_at) return NULL;
  void* p = realloc(old, n);
  g_live += p != NULL && old == NULL;
  return p;
}
static void counted_free(void* p) {
  g_live -= p != NULL;
  free(p);
}
#define malloc counted_malloc
#define calloc counted_calloc
#define realloc counted_realloc
#define free counted_free
#include "xpu_profiler.c"
#undef malloc
#undef calloc
#undef realloc
#undef free

/* What the profiler needs of the rest of the plugin and of the host's runtime. */
struct TSL_Status {
  TF_Code code;
  char message[1024];
};
void TF_SetStatus(TF_Status* s, TF_Code code, const char* message) {
  s->code = code;
  snprintf(s->message, sizeof s->message, "%s", message);
}
void xpu_status(TF_Status* s, TF_Code code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  s->code = code;
  vsnprintf(s->message, sizeof s->message, fmt, ap);
  va_end(ap);
}
bool xpu_check_size(TF_Status* s, const char* fn, const char* name, size_t got, size_t needed) {
  if (got >= needed) return true;
  xpu_status(s, TF_INVALID_ARGUMENT, "%s: %s is too small", fn, name);
  return false;
}
uint64_t xpu_fault_hit(XpuFaultKind kind) {
  (void)kind;
  return 0;
}
void xpu_fault_status(TF_Status* s, XpuFaultKind kind, uint64_t call, const char* fn) {
  (void)kind;
  (void)call;
  xpu_status(s, TF_INTERNAL, "%s: injected fault", fn);
}

/* xorshift64: the same events on every run, whatever the compiler (one call per statement
 * or per branch of ?:, never two in one expression, whose order C leaves unspecified). */
static uint64_t g_rng;
static uint64_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

/* A value of any width from 1 to 64 bits. */
static uint64_t rnd_wide(void) {
  uint64_t v = rnd();
  return v >> (rnd() % 64);
}

static TP_Profiler g_profiler;
static TP_ProfilerFns g_fns;
static bool g_list = true; /* print the listing */
static XpuProfStream* g_live_streams[64];
static int g_live_count;
static char g_long_name[400]; /* longer than XPU_PROF_MAX_NAME */

static void check(const TF_Status* s, const char* what) {
  if (s->code == TF_OK) return;
  fprintf(stderr, "%s failed: %s\n", what, s->message);
  exit(1);
}

static const char* opt(const char* s, char* out, size_t size) {
  if (s == NULL) return "!";
  snprintf(out, size, "=%s", s);
  return out;
}

/* Starts a session and records scenario `scenario`'s events (the streams stay live until
 * stop_session, but about one in four is destroyed during the session). */
static void record_session(int scenario) {
  static const char* const kOps[] = {"MatMul", "AddV2", "Relu", "BiasAdd"};
  TF_Status st = {0};
  uint64_t cap = scenario == 1 ? 7 : 0;
  XPU_SetProfilerMaxEvents(cap);
  g_fns.start(&g_profiler, &st);
  check(&st, "start");
  if (g_list) printf("cap\t%llu\n", (unsigned long long)(cap != 0 ? cap : XPU_PROF_MAX_EVENTS));
  if (scenario == 2) return;
  static const int kOrdinals[] = {0, 1, 3};
  uint64_t stream_id = 100;
  for (int d = 0; d < 3; d++) {
    int streams = 1 + (int)(rnd() % 3);
    for (int s = 0; s < streams; s++) {
      stream_id += 1 + rnd() % 300;
      XpuProfStream* b = xpu_prof_stream_new(kOrdinals[d], stream_id);
      xpu_prof_stream_publish(b);
      const char* stream_name = NULL;
      switch (rnd() % 3) {
        case 1: stream_name = "compute"; break;
        case 2: stream_name = g_long_name; break;
        default: break;
      }
      if (stream_name != NULL) xpu_prof_stream_set_name(b, stream_name);
      char a[512], c[512];
      if (g_list) {
        printf("stream\t%d\t%llu\t%s\n", kOrdinals[d], (unsigned long long)stream_id,
               opt(stream_name, a, sizeof a));
      }
      int n = scenario == 3 ? 3000 : (int)(rnd() % 1500);
      if (d == 2 && s == 0 && scenario == 0) n = 1;
      uint64_t t = UINT64_C(1700000000000000000) + rnd() % 1000000;
      for (int i = 0; i < n; i++) {
        XpuProfKind kind = rnd() % 3 == 0 ? (XpuProfKind)(rnd() % XPU_PROF_KIND_COUNT)
                                          : XPU_PROF_KERNEL;
        uint64_t jitter = rnd() % 50;
        uint64_t start = t + jitter - (rnd() % 10 == 0 ? 60 : 0); /* not always in order */
        uint64_t duration = rnd() % 5 == 0   ? 0
                            : rnd() % 4 == 0 ? rnd() % 100000000
                                             : rnd() % 3000;
        uint64_t end = rnd() % 50 == 0 ? start - 5 : start + duration; /* kept as start */
        if (end > t) t = end;
        uint64_t bytes = rnd() % 4 == 0 ? rnd_wide() : rnd() % 300;
        const char* op_type = NULL;
        char* name = NULL;
        uint64_t correlation_id = 0;
        if (kind == XPU_PROF_KERNEL) {
          op_type = kOps[rnd() % 4];
          char node[64];
          int len;
          switch (rnd() % 6) {
            case 0: break;
            case 1: name = xpu_prof_copy_name(op_type, strlen(op_type)); break;
            case 2: name = xpu_prof_copy_name("", 0); break;
            case 3: name = xpu_prof_copy_name(g_long_name, strlen(g_long_name)); break;
            default:
              len = snprintf(node, sizeof node, "layer_%d/%s", (int)(rnd() % 5), op_type);
              name = xpu_prof_copy_name(node, (size_t)len);
          }
          switch (rnd() % 5) {
            case 0: break;
            case 1: correlation_id = UINT64_MAX; break;
            case 2: correlation_id = rnd_wide(); break;
            default: correlation_id = 1 + (uint64_t)i;
          }
          if (rnd() % 20 == 0) op_type = NULL; /* work without an op type */
        }
        if (g_list) {
          printf("event\t%d\t%llu\t%d\t%llu\t%llu\t%llu\t%s\t%s\t%llu\n", kOrdinals[d],
                 (unsigned long long)stream_id, (int)kind, (unsigned long long)start,
                 (unsigned long long)end, (unsigned long long)bytes, opt(op_type, a, sizeof a),
                 opt(name, c, sizeof c), (unsigned long long)correlation_id);
        }
        xpu_prof_record(b, kind, start, end, bytes, op_type, name, correlation_id);
      }
      if (rnd() % 4 == 0) {
        xpu_prof_stream_release(b); /* destroyed during the session: keeps its events */
      } else {
        g_live_streams[g_live_count++] = b;
      }
    }
  }
}

/* Stops the session and destroys the streams still live. */
static void stop_session(void) {
  TF_Status st = {0};
  g_fns.stop(&g_profiler, &st);
  check(&st, "stop");
  for (int i = 0; i < g_live_count; i++) xpu_prof_stream_release(g_live_streams[i]);
  g_live_count = 0;
}

/* The two-call collect; NULL with st set when it fails. */
static uint8_t* collect(size_t* size, TF_Status* st) {
  *size = 0;
  g_fns.collect_data_xspace(&g_profiler, NULL, size, st);
  if (st->code != TF_OK) return NULL;
  uint8_t* bytes = malloc(*size + 1);
  if (bytes == NULL) exit(2);
  g_fns.collect_data_xspace(&g_profiler, bytes, size, st);
  return bytes;
}

int main(int argc, char** argv) {
  if (argc < 2 || (strcmp(argv[1], "session") == 0 && argc < 4)) {
    fprintf(stderr, "usage: %s session SCENARIO OUT | oom\n", argv[0]);
    return 2;
  }
  memset(g_long_name, 'n', sizeof g_long_name - 1);
  TF_ProfilerRegistrationParams params = {0};
  g_profiler.struct_size = TP_PROFILER_STRUCT_SIZE;
  g_fns.struct_size = TP_PROFILER_FNS_STRUCT_SIZE;
  params.struct_size = TF_PROFILER_REGISTRATION_PARAMS_STRUCT_SIZE;
  params.major_version = TP_MAJOR;
  params.profiler = &g_profiler;
  params.profiler_fns = &g_fns;
  TF_Status st = {0};
  TF_InitProfiler(&params, &st);
  check(&st, "TF_InitProfiler");
  g_tsc = 0; /* CLOCK_REALTIME: ticks are the nanoseconds recorded */
  if (strcmp(argv[1], "session") == 0) {
    int scenario = atoi(argv[2]);
    g_rng = UINT64_C(88172645463325252) + (uint64_t)scenario;
    record_session(scenario);
    stop_session();
    size_t size;
    uint8_t* bytes = collect(&size, &st);
    check(&st, "collect_data_xspace");
    FILE* f = fopen(argv[3], "wb");
    if (f == NULL || fwrite(bytes, 1, size, f) != size || fclose(f) != 0) return 2;
    free(bytes);
    if (XPU_ProfilerHeapBlocks() != 0) {
      fprintf(stderr, "%lld heap blocks left after collect\n",
              (long long)XPU_ProfilerHeapBlocks());
      return 1;
    }
    return 0;
  }
  /* oom: fail the first, second, ... allocation of collect until it succeeds. */
  g_list = false;
  long live = g_live;
  for (int k = 1;; k++) {
    g_rng = 1234;
    record_session(0);
    stop_session();
    g_calls = 0;
    g_fail_at = k;
    size_t size;
    uint8_t* bytes = collect(&size, &st);
    g_fail_at = -1;
    free(bytes);
    if (XPU_ProfilerHeapBlocks() != 0 || g_live != live) {
      fprintf(stderr, "failing allocation %d of collect left %lld counted heap blocks and "
              "%ld blocks in all behind\n", k, (long long)XPU_ProfilerHeapBlocks(),
              g_live - live);
      return 1;
    }
    if (st.code == TF_OK) {
      printf("%d\n", k - 1);
      return 0;
    }
    if (st.code != TF_RESOURCE_EXHAUSTED || strstr(st.message, "out of host memory") == NULL) {
      fprintf(stderr, "failing allocation %d of collect: code %d: %s\n", k, (int)st.code,
              st.message);
      return 1;
    }
  }
}
