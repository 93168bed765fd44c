/* A test plugin with a device profiler (TF_InitProfiler), built in -D variants that break
 * one rule each, so the host's handling of every defect is tested.
 *
 * By default the library provides ONLY a profiler (TensorFlow allows a library with a
 * profiler and no device). Its profiler records nothing real: a session's XSpace is one
 * plane PLANE_NAME with a line "compute" of EVENT_COUNT events named "TestKernel", stamped
 * from the time `start` was called (CLOCK_REALTIME), hand-encoded in protobuf wire format.
 *
 *   WITH_DEVICE               also the device of tests/plugins/test_plugin.c (included)
 *   PROFILER_TYPE=X           TP_Profiler.device_type (default TEST); PLANE_NAME=Y the plane
 *   EVENT_COUNT=n             events per session (default 3; 0: collect returns 0 bytes)
 *   NO_TF_INIT_PROFILER       the library does not export TF_InitProfiler
 *   INIT_PROFILER_ERROR       TF_InitProfiler fails (status FAILED_PRECONDITION)
 *   NULL_START                TP_ProfilerFns.start left NULL
 *   FNS_STRUCT_SIZE_ZERO      TP_ProfilerFns.struct_size set to 0
 *   PROFILER_STRUCT_SIZE_ZERO TP_Profiler.struct_size set to 0
 *   EMPTY_TYPE                TP_Profiler.device_type ""
 *   COLLECT_OVERFLOW          collect writes 64 bytes more than the size it announced
 *   COLLECT_MALFORMED         collect returns bytes that are not an XSpace
 *   START_ERROR / COLLECT_ERROR   start / collect fail (status INTERNAL)
 *
 * TestProfiler_Counts(int64_t out[6]) gives: profilers created (TF_InitProfiler calls),
 * starts, stops, collects with a buffer, destroy_profiler calls, destroy_profiler_fns calls.
 */
#ifdef WITH_DEVICE
#include "test_plugin.c"
#else
#include <stdint.h>
#include <string.h>

#include "tensorflow/c/tf_status.h"
#endif
#include <stdatomic.h>
#include <time.h>

#include "tensorflow/c/experimental/pluggable_profiler/pluggable_profiler.h"

#define PP_STRINGIFY2(x) #x
#define PP_STRINGIFY(x) PP_STRINGIFY2(x)
#ifndef PROFILER_TYPE
#define PROFILER_TYPE TEST
#endif
#ifndef PLANE_NAME
#define PLANE_NAME /device:TEST:0
#endif
#ifndef EVENT_COUNT
#define EVENT_COUNT 3
#endif

static atomic_llong pp_created, pp_started, pp_stopped, pp_collected, pp_destroyed,
    pp_destroyed_fns;
static int64_t pp_start_ns;
static int pp_has_data;

TF_CAPI_EXPORT void TestProfiler_Counts(int64_t out[6]) {
  out[0] = pp_created;
  out[1] = pp_started;
  out[2] = pp_stopped;
  out[3] = pp_collected;
  out[4] = pp_destroyed;
  out[5] = pp_destroyed_fns;
}

/* -- a minimal protobuf writer: with out == NULL it only counts ---------------------------- */
typedef struct PPWriter {
  uint8_t* out;
  size_t n;
} PPWriter;

static void pp_byte(PPWriter* w, uint8_t b) {
  if (w->out) w->out[w->n] = b;
  w->n++;
}

static void pp_varint(PPWriter* w, uint64_t v) {
  while (v >= 0x80) {
    pp_byte(w, (uint8_t)(v | 0x80));
    v >>= 7;
  }
  pp_byte(w, (uint8_t)v);
}

static void pp_int_field(PPWriter* w, int field, uint64_t v) {
  pp_varint(w, (uint64_t)field << 3);
  pp_varint(w, v);
}

static void pp_bytes_field(PPWriter* w, int field, const void* data, size_t len) {
  pp_varint(w, ((uint64_t)field << 3) | 2);
  pp_varint(w, len);
  for (size_t i = 0; i < len; i++) pp_byte(w, ((const uint8_t*)data)[i]);
}

static void pp_string_field(PPWriter* w, int field, const char* s) {
  pp_bytes_field(w, field, s, strlen(s));
}

/* Nested messages are written twice: once to learn their length, once for real. */
typedef void (*pp_message_fn)(PPWriter* w, int index);

static void pp_message_field(PPWriter* w, int field, pp_message_fn fn, int index) {
  PPWriter count = {NULL, 0};
  fn(&count, index);
  pp_varint(w, ((uint64_t)field << 3) | 2);
  pp_varint(w, count.n);
  PPWriter body = {w->out ? w->out + w->n : NULL, 0}; /* right behind the length prefix */
  fn(&body, index);
  w->n += body.n;
}

static void pp_event(PPWriter* w, int i) { /* XEvent */
  pp_int_field(w, 1, 1);                               /* metadata_id */
  pp_int_field(w, 2, (uint64_t)i * 2000000);          /* offset_ps: every 2 us */
  pp_int_field(w, 3, 1000000);                        /* duration_ps: 1 us */
}

static void pp_line(PPWriter* w, int index) { /* XLine */
  (void)index;
  pp_int_field(w, 1, 1);
  pp_int_field(w, 10, 1);
  pp_string_field(w, 2, "compute");
  pp_int_field(w, 3, (uint64_t)pp_start_ns);
  for (int i = 0; i < EVENT_COUNT; i++) pp_message_field(w, 4, pp_event, i);
}

static void pp_event_metadata(PPWriter* w, int index) { /* XEventMetadata */
  (void)index;
  pp_int_field(w, 1, 1);
  pp_string_field(w, 2, "TestKernel");
}

static void pp_event_metadata_entry(PPWriter* w, int index) { /* map<int64, XEventMetadata> */
  pp_int_field(w, 1, 1);
  pp_message_field(w, 2, pp_event_metadata, index);
}

static void pp_plane(PPWriter* w, int index) { /* XPlane */
  (void)index;
  pp_int_field(w, 1, 0);
  pp_string_field(w, 2, PP_STRINGIFY(PLANE_NAME));
  pp_message_field(w, 3, pp_line, 0);
  pp_message_field(w, 4, pp_event_metadata_entry, 0);
}

static void pp_space(PPWriter* w) { pp_message_field(w, 1, pp_plane, 0); }

/* -- the profiler ------------------------------------------------------------------------ */
static void pp_start(const TP_Profiler* profiler, TF_Status* status) {
  (void)profiler;
  pp_started++;
#ifdef START_ERROR
  TF_SetStatus(status, TF_INTERNAL, "the test profiler refuses to start");
  return;
#endif
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  pp_start_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  pp_has_data = 1;
  TF_SetStatus(status, TF_OK, "");
}

static void pp_stop(const TP_Profiler* profiler, TF_Status* status) {
  (void)profiler;
  pp_stopped++;
  TF_SetStatus(status, TF_OK, "");
}

static void pp_collect(const TP_Profiler* profiler, uint8_t* buffer, size_t* size_in_bytes,
                       TF_Status* status) {
  (void)profiler;
#ifdef COLLECT_ERROR
  (void)buffer;
  (void)size_in_bytes;
  TF_SetStatus(status, TF_INTERNAL, "the test profiler cannot collect");
  return;
#endif
  PPWriter w = {NULL, 0};
  if (pp_has_data && EVENT_COUNT > 0) pp_space(&w);
  if (buffer == NULL) {
    *size_in_bytes = w.n;
    TF_SetStatus(status, TF_OK, "");
    return;
  }
  pp_collected++;
  w.out = buffer;
  w.n = 0;
  if (pp_has_data && EVENT_COUNT > 0) pp_space(&w);
#ifdef COLLECT_MALFORMED
  memset(buffer, 0xFF, w.n);
#endif
#ifdef COLLECT_OVERFLOW
  memset(buffer + w.n, 0x01, 64);
#endif
  pp_has_data = 0;
  TF_SetStatus(status, TF_OK, "");
}

static void pp_destroy_profiler(TP_Profiler* profiler) {
  (void)profiler;
  pp_destroyed++;
}

static void pp_destroy_profiler_fns(TP_ProfilerFns* fns) {
  (void)fns;
  pp_destroyed_fns++;
}

#ifdef NO_TF_INIT_PROFILER /* the same code under a name no host looks for */
#define PP_INIT_NAME TestProfiler_NotTheEntryPoint
void PP_INIT_NAME(TF_ProfilerRegistrationParams* params, TF_Status* status);
#else
#define PP_INIT_NAME TF_InitProfiler
#endif
void PP_INIT_NAME(TF_ProfilerRegistrationParams* params, TF_Status* status) {
  pp_created++;
#ifdef INIT_PROFILER_ERROR
  TF_SetStatus(status, TF_FAILED_PRECONDITION, "the test profiler is switched off");
  return;
#endif
  params->struct_size = TF_PROFILER_REGISTRATION_PARAMS_STRUCT_SIZE;
  params->profiler->struct_size = TP_PROFILER_STRUCT_SIZE;
#ifdef PROFILER_STRUCT_SIZE_ZERO
  params->profiler->struct_size = 0;
#endif
#ifdef EMPTY_TYPE
  params->profiler->device_type = "";
#else
  params->profiler->device_type = PP_STRINGIFY(PROFILER_TYPE);
#endif
  TP_ProfilerFns* fns = params->profiler_fns;
  fns->struct_size = TP_PROFILER_FNS_STRUCT_SIZE;
#ifdef FNS_STRUCT_SIZE_ZERO
  fns->struct_size = 0;
#endif
#ifdef NULL_START
  fns->start = NULL;
  (void)pp_start;
#else
  fns->start = pp_start;
#endif
  fns->stop = pp_stop;
  fns->collect_data_xspace = pp_collect;
  params->destroy_profiler = pp_destroy_profiler;
  params->destroy_profiler_fns = pp_destroy_profiler_fns;
  TF_SetStatus(status, TF_OK, "");
}
