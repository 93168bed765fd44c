/* xpu_profiler.c: the XPU's device profiler (TF_InitProfiler, TensorFlow's pluggable profiler
 * C API) and the small protobuf encoder that writes what it recorded as an XSpace.
 *
 * Recording. Every stream owns an XpuProfStream buffer. After each operation its worker calls
 * xpu_prof_record, which appends one event (kind, CLOCK_REALTIME start and end, bytes, op type
 * and node name) if a session runs. The worker is the only writer of its buffer, so appending
 * takes no lock: it raises the buffer's `writing` flag, checks that the session still runs and
 * appends. stop() first clears the session flag and then waits until no buffer's `writing` is
 * raised; both sides use sequentially consistent accesses for the flag and `writing`, so either
 * the worker sees the session over and appends nothing, or stop() sees the worker busy and
 * waits the few nanoseconds of the append. Without a session the only cost on the hot path is
 * the relaxed load in xpu_prof_active() before an operation.
 *
 * Memory is bounded: events go into chunks of XPU_PROF_CHUNK_EVENTS, allocated as needed, and
 * a stream keeps at most XPU_PROF_MAX_EVENTS events per session. Later ones are counted as
 * dropped; the XSpace then carries a warning per stream and the plane a "dropped_events" stat.
 *
 * Sessions. start() opens one; stop() closes it and moves every buffer's events into the
 * stopped session (a buffer whose stream has been destroyed is freed then, so a stream that
 * went away during the session keeps its events); collect_data_xspace() serialises the stopped
 * session once, answers the size query with the exact size, copies the bytes on the second
 * call and then drops them, so the next session starts clean. start() also drops a stopped
 * session that was never collected. All of this runs under g_prof_mu, a leaf lock; the host's
 * set_stream_name takes it under a device lock. The profiler is one per loaded library:
 * several TF_InitProfiler calls share it, each with the host extensions it was given (the
 * session started through a registration uses that registration's).
 *
 * The XSpace (tsl/profiler/protobuf/xplane.proto's field numbers), in the form xprof (the
 * profile tools of TensorBoard) reads a device's: one XPlane per device that did work, id =
 * ordinal, named "/device:GPU:<ordinal>" (xprof draws planes named /device:GPU:, /device:TPU:
 * and /device:CUSTOM:, and computes op and kernel statistics from /device:GPU: and
 * /device:TPU: ones only), with the stats "device_ordinal" (int64) and "device_type_string"
 * ("XPU", which the pluggable host reads to name the device); one XLine per stream that did work,
 * id = display_id = the stream's id, named by the host (PLUGGABLE_StreamNamesExt) or
 * "stream <id>", timestamp_ns = its first event's start; XEvents with offset_ps from it and
 * duration_ps; event metadata names the op type ("MatMul", display_name = the node name when
 * it differs) or the operation ("MemcpyH2D", "MemcpyD2H", "MemcpyD2D", "Memset",
 * "HostCallback", "RecordEvent", "WaitForEvent"); stats "bytes" (uint64, copies and fills),
 * on kernels "op_type", "tf_op" ("<node name>:<op type>", TensorFlow's op name that xprof's
 * op statistics group kernels by), "kernel_details" (the launch shape xprof's kernel
 * statistics parse: one worker thread), these three as ref_values (the id of a stat metadata
 * entry named by the string, written once per plane, as TensorFlow's GPU tracer does), and "correlation_id" (uint64, the host's id of the
 * launch, from PLUGGABLE_ProfilerContextExt; xprof draws a flow arrow from the host event
 * with the same id), and, on the plane, "dropped_events" (uint64, when some were dropped).
 */
#include "xpu_internal.h"

#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pluggable/profiler_clock.h"
#include "tensorflow/c/experimental/pluggable_profiler/pluggable_profiler.h"

/* The bytes a line's encoded events start with, per event: about a kernel event's size (its
 * buffer doubles when they take more). A build may set it, e.g. to 1 to exercise the growth. */
#ifndef XPU_PROF_EVENT_BYTES
#define XPU_PROF_EVENT_BYTES 48
#endif
/* Events per chunk (one chunk is about 56 KiB). */
#define XPU_PROF_CHUNK_EVENTS 1024
/* Events one stream keeps per session by default (about 14 MiB); later ones are dropped and
 * counted. XPU_SetProfilerMaxEvents changes it for sessions started afterwards. */
#define XPU_PROF_MAX_EVENTS (256 * XPU_PROF_CHUNK_EVENTS)

/* While a session runs, events hold clock ticks (pluggable/profiler_clock.h: time-stamp
 * counter values where the kernel keeps time with it, else nanoseconds); end_session turns
 * them into CLOCK_REALTIME nanoseconds. */
typedef struct XpuProfEvent {
  uint64_t start_ns;
  uint64_t end_ns;
  uint64_t bytes;      /* copies and fills */
  const char* op_type; /* kernels: a string of the plugin; NULL otherwise */
  char* name;          /* kernels: the node name (owned), or NULL */
  uint64_t correlation_id; /* kernels: the host's launch id, 0 when none */
  XpuProfKind kind;
} XpuProfEvent;

typedef struct XpuProfChunk {
  struct XpuProfChunk* next;
  size_t count;
  XpuProfEvent events[XPU_PROF_CHUNK_EVENTS];
} XpuProfChunk;

struct XpuProfStream {
  int ordinal;        /* immutable */
  uint64_t stream_id; /* immutable */
  /* Guarded by g_prof_mu. */
  XpuProfStream* next; /* in g_streams */
  bool released;       /* the stream is gone: freed once its events have been taken */
  char* name;          /* set by the host, or NULL */
  /* Raised by the worker around an append (see the overview). */
  atomic_int writing;
  /* The worker's while a session runs; g_prof_mu's holder's otherwise. */
  XpuProfChunk* first;
  XpuProfChunk* last;
  size_t count;
  uint64_t dropped;
};

/* One stream's share of the stopped session. */
typedef struct XpuProfLine {
  int ordinal;
  uint64_t stream_id;
  char* name; /* owned, or NULL */
  XpuProfChunk* first;
  size_t count;
  uint64_t dropped;
} XpuProfLine;

static pthread_mutex_t g_prof_mu = PTHREAD_MUTEX_INITIALIZER;
atomic_bool xpu_prof_session; /* written under g_prof_mu, read anywhere */
/* Guarded by g_prof_mu. */
static XpuProfStream* g_streams; /* every published buffer */
static XpuProfLine* g_lines;     /* the stopped session, sorted by (ordinal, stream id) */
static size_t g_line_count;
static bool g_encoded_ready; /* g_encoded holds the stopped session, serialised */
static uint8_t* g_encoded;
static size_t g_encoded_size;
/* The per-stream cap of XPU_SetProfilerMaxEvents, and the running session's copy of it. */
static atomic_uint_fast64_t g_max_events_setting = XPU_PROF_MAX_EVENTS;
static atomic_uint_fast64_t g_max_events = XPU_PROF_MAX_EVENTS;
/* Heap blocks held by the profiler (XPU_ProfilerHeapBlocks). */
static atomic_int_fast64_t g_heap_blocks;

static const char* const kKindNames[XPU_PROF_KIND_COUNT] = {
    "Kernel", "MemcpyH2D", "MemcpyD2H", "MemcpyD2D",
    "Memset", "HostCallback", "RecordEvent", "WaitForEvent",
};

/* Stat metadata ids, the same on every plane. */
enum {
  STAT_BYTES = 1, STAT_OP_TYPE, STAT_DEVICE_ORDINAL, STAT_DROPPED_EVENTS, STAT_TF_OP,
  STAT_KERNEL_DETAILS, STAT_CORRELATION_ID, STAT_DEVICE_TYPE_STRING, STAT_COUNT
};
static const char* const kStatNames[STAT_COUNT] = {
    NULL, "bytes", "op_type", "device_ordinal", "dropped_events", "tf_op", "kernel_details",
    "correlation_id", "device_type_string",
};
/* A kernel runs on its stream's one worker thread: a grid and a block of one. */
static const char kKernelDetails[] =
    "regs:0 static_shared:0 dynamic_shared:0 grid:1,1,1 block:1,1,1 occ_pct:0";

/* ---- the host's launch ids (PLUGGABLE_ProfilerContextExt) -------------------------------- */

typedef uint64_t (*XpuCorrelationFn)(struct TF_OpKernelContext*);

/* The running session's: the function of the registration whose start() opened it (NULL when
 * that host passed no extension); read by kernels. */
static _Atomic(XpuCorrelationFn) g_correlation_id_fn;

/* Live registrations, each TF_InitProfiler call's TP_Profiler with the correlation function
 * its host passed (NULL: none). Several hosts in one process may register the one profiler,
 * some with the extension and some without (TensorFlow passes none): each keeps its own, so
 * a registration never takes another's away. TF_InitProfiler adds one (or renews the entry of
 * a TP_Profiler filled again), destroy_profiler removes it. Guarded by g_prof_mu. */
#define XPU_PROF_REGISTRATIONS 64
static struct {
  const TP_Profiler* profiler;
  XpuCorrelationFn correlation_id;
} g_registrations[XPU_PROF_REGISTRATIONS];

uint64_t xpu_prof_correlation_id(struct TF_OpKernelContext* ctx) {
  XpuCorrelationFn fn = atomic_load_explicit(&g_correlation_id_fn, memory_order_acquire);
  return fn != NULL ? fn(ctx) : 0;
}

/* The index of `profiler`'s registration; with `add`, of a free entry when it has none. -1
 * when there is none (with `add`: every entry is taken). Under g_prof_mu. */
static int registration_of(const TP_Profiler* profiler, bool add) {
  int free_entry = -1;
  for (int i = 0; i < XPU_PROF_REGISTRATIONS; i++) {
    if (g_registrations[i].profiler == profiler) return i;
    if (free_entry < 0 && g_registrations[i].profiler == NULL) free_entry = i;
  }
  return add ? free_entry : -1;
}

/* ---- counted heap blocks ---------------------------------------------------------------- */

/* malloc, counted in g_heap_blocks. */
static void* prof_alloc(size_t size) {
  void* p = malloc(size);
  if (p != NULL) atomic_fetch_add_explicit(&g_heap_blocks, 1, memory_order_relaxed);
  return p;
}

/* realloc of a prof_alloc block (NULL: a new one); on failure the block is kept, unchanged. */
static void* prof_realloc(void* p, size_t size) {
  void* q = realloc(p, size);
  if (q != NULL && p == NULL) atomic_fetch_add_explicit(&g_heap_blocks, 1, memory_order_relaxed);
  return q;
}

/* free of a prof_alloc block (NULL is ignored). */
static void prof_free(void* p) {
  if (p == NULL) return;
  atomic_fetch_sub_explicit(&g_heap_blocks, 1, memory_order_relaxed);
  free(p);
}

char* xpu_prof_copy_name(const char* text, size_t len) {
  if (text == NULL) return NULL;
  if (len > XPU_PROF_MAX_NAME) len = XPU_PROF_MAX_NAME;
  char* out = prof_alloc(len + 1);
  if (out != NULL) {
    memcpy(out, text, len);
    out[len] = '\0';
  }
  return out;
}

void xpu_prof_free_name(char* name) { prof_free(name); }

/* Frees a chain of chunks and the names their events own. */
static void free_chunks(XpuProfChunk* c) {
  while (c != NULL) {
    XpuProfChunk* next = c->next;
    for (size_t i = 0; i < c->count; i++) prof_free(c->events[i].name);
    prof_free(c);
    c = next;
  }
}

/* ---- recording -------------------------------------------------------------------------- */

static int64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * INT64_C(1000000000) + (int64_t)ts.tv_nsec;
}

/* Whether ticks are counter values: decided by the first start(), before its session flag is
 * set (the workers read it only while a session runs); then fixed. The session's two clock
 * pairs are guarded by g_prof_mu. */
static int g_tsc = -1;
static PG_ClockPair g_clock_start, g_clock_stop;

uint64_t xpu_prof_now_ns(void) { return pg_profiler_ticks(g_tsc > 0, realtime_ns); }

XpuProfStream* xpu_prof_stream_new(int ordinal, uint64_t stream_id) {
  XpuProfStream* b = prof_alloc(sizeof *b);
  if (b == NULL) return NULL;
  memset(b, 0, sizeof *b);
  b->ordinal = ordinal;
  b->stream_id = stream_id;
  atomic_init(&b->writing, 0);
  return b;
}

void xpu_prof_stream_publish(XpuProfStream* b) {
  if (b == NULL) return;
  pthread_mutex_lock(&g_prof_mu);
  b->next = g_streams;
  g_streams = b;
  pthread_mutex_unlock(&g_prof_mu);
}

/* Unlinks `b` from g_streams and frees it with its events. Under g_prof_mu. */
static void stream_unlink_free(XpuProfStream* b) {
  for (XpuProfStream** p = &g_streams; *p != NULL; p = &(*p)->next) {
    if (*p == b) {
      *p = b->next;
      break;
    }
  }
  free_chunks(b->first);
  prof_free(b->name);
  prof_free(b);
}

void xpu_prof_stream_release(XpuProfStream* b) {
  if (b == NULL) return;
  pthread_mutex_lock(&g_prof_mu);
  /* Events recorded in a running session stay until stop() takes them. */
  if (atomic_load(&xpu_prof_session) && (b->count > 0 || b->dropped > 0)) b->released = true;
  else stream_unlink_free(b);
  pthread_mutex_unlock(&g_prof_mu);
}

void xpu_prof_stream_set_name(XpuProfStream* b, const char* name) {
  if (b == NULL || name == NULL) return;
  char* copy = xpu_prof_copy_name(name, strlen(name));
  if (copy == NULL) return;
  pthread_mutex_lock(&g_prof_mu);
  char* old = b->name;
  b->name = copy;
  pthread_mutex_unlock(&g_prof_mu);
  prof_free(old);
}

void xpu_prof_record(XpuProfStream* b, XpuProfKind kind, uint64_t start_ns, uint64_t end_ns,
                     uint64_t bytes, const char* op_type, char* name, uint64_t correlation_id) {
  if (b == NULL) {
    prof_free(name);
    return;
  }
  atomic_store_explicit(&b->writing, 1, memory_order_seq_cst);
  if (!atomic_load_explicit(&xpu_prof_session, memory_order_seq_cst)) {
    atomic_store_explicit(&b->writing, 0, memory_order_release);
    prof_free(name);
    return;
  }
  XpuProfChunk* c = b->last;
  uint64_t cap = atomic_load_explicit(&g_max_events, memory_order_relaxed);
  if (b->count < cap && (c == NULL || c->count == XPU_PROF_CHUNK_EVENTS)) {
    c = prof_alloc(sizeof *c);
    if (c != NULL) {
      c->next = NULL;
      c->count = 0;
      if (b->last != NULL) b->last->next = c; else b->first = c;
      b->last = c;
    }
  }
  if (b->count >= cap || c == NULL) {
    b->dropped++;
    atomic_store_explicit(&b->writing, 0, memory_order_release);
    prof_free(name);
    return;
  }
  XpuProfEvent* e = &c->events[c->count++];
  e->start_ns = start_ns;
  e->end_ns = end_ns >= start_ns ? end_ns : start_ns;
  e->bytes = bytes;
  e->op_type = op_type;
  e->name = name;
  e->correlation_id = correlation_id;
  e->kind = kind;
  b->count++;
  atomic_store_explicit(&b->writing, 0, memory_order_release);
}

/* ---- sessions (all under g_prof_mu) ----------------------------------------------------- */

/* Drops the stopped session and its serialised form. */
static void discard_stopped_session(void) {
  for (size_t i = 0; i < g_line_count; i++) {
    free_chunks(g_lines[i].first);
    prof_free(g_lines[i].name);
  }
  prof_free(g_lines);
  g_lines = NULL;
  g_line_count = 0;
  prof_free(g_encoded);
  g_encoded = NULL;
  g_encoded_size = 0;
  g_encoded_ready = false;
}

/* qsort order of the stopped session's lines: by device, then by stream id. */
static int compare_lines(const void* a, const void* b) {
  const XpuProfLine* x = a;
  const XpuProfLine* y = b;
  if (x->ordinal != y->ordinal) return x->ordinal < y->ordinal ? -1 : 1;
  return x->stream_id < y->stream_id ? -1 : x->stream_id > y->stream_id;
}

/* Ends recording and moves every buffer's events into the stopped session. Returns false when
 * the session's line table could not be allocated (its events are then dropped). */
static bool end_session(void) {
  atomic_store_explicit(&xpu_prof_session, false, memory_order_seq_cst);
  g_clock_stop = pg_profiler_clock_pair(g_tsc > 0, realtime_ns);
  discard_stopped_session(); /* normally nothing: start() dropped the previous one */
  size_t n = 0;
  for (XpuProfStream* b = g_streams; b != NULL; b = b->next) {
    while (atomic_load_explicit(&b->writing, memory_order_seq_cst) != 0) sched_yield();
    if (b->count > 0 || b->dropped > 0) n++;
  }
  XpuProfLine* lines = n > 0 ? prof_alloc(n * sizeof *lines) : NULL;
  size_t used = 0;
  for (XpuProfStream** p = &g_streams; *p != NULL;) {
    XpuProfStream* b = *p;
    if ((b->count > 0 || b->dropped > 0) && lines != NULL) {
      XpuProfLine* line = &lines[used++];
      line->ordinal = b->ordinal;
      line->stream_id = b->stream_id;
      line->first = b->first;
      line->count = b->count;
      line->dropped = b->dropped;
      if (b->released) {
        line->name = b->name;
        b->name = NULL;
      } else {
        line->name = b->name != NULL ? xpu_prof_copy_name(b->name, strlen(b->name)) : NULL;
      }
    } else {
      free_chunks(b->first);
    }
    b->first = b->last = NULL;
    b->count = 0;
    b->dropped = 0;
    if (b->released) {
      *p = b->next;
      prof_free(b->name);
      prof_free(b);
    } else {
      p = &b->next;
    }
  }
  for (size_t i = 0; i < used; i++) {
    for (XpuProfChunk* c = lines[i].first; c != NULL; c = c->next) {
      for (size_t k = 0; k < c->count; k++) {
        XpuProfEvent* e = &c->events[k];
        e->start_ns = (uint64_t)pg_profiler_ticks_to_ns(g_tsc > 0, g_clock_start, g_clock_stop,
                                                        e->start_ns);
        e->end_ns = (uint64_t)pg_profiler_ticks_to_ns(g_tsc > 0, g_clock_start, g_clock_stop,
                                                      e->end_ns);
      }
    }
  }
  if (used > 1) qsort(lines, used, sizeof *lines, compare_lines);
  g_lines = lines;
  g_line_count = used;
  return n == 0 || lines != NULL;
}

/* ---- a minimal protobuf writer ---------------------------------------------------------- */

/* With p == NULL it only counts: every message is measured with the same code that writes it.
 * Events, the bulk of the bytes, are not written through it: each line's are encoded once,
 * directly, into a buffer of their own (encode_line), which the line's message then copies. */
typedef struct PbOut {
  uint8_t* p;
  size_t n;
} PbOut;

enum { PB_VARINT = 0, PB_LEN = 2 };

/* Bytes of `v` as a base-128 varint: one per started group of 7 significant bits. */
static inline size_t varint_size(uint64_t v) {
  return (size_t)(64 - __builtin_clzll(v | 1) + 6) / 7;
}

/* Writes `v` as a varint at `q`; returns the end. */
static inline uint8_t* put_varint(uint8_t* q, uint64_t v) {
  for (; v >= 0x80; v >>= 7) *q++ = (uint8_t)(v | 0x80);
  *q++ = (uint8_t)v;
  return q;
}

/* Appends `v` as a varint. */
static void pb_varint(PbOut* o, uint64_t v) {
  if (o->p != NULL) put_varint(o->p + o->n, v);
  o->n += varint_size(v);
}

/* Appends a field key. */
static void pb_tag(PbOut* o, unsigned field, unsigned wire_type) {
  pb_varint(o, (uint64_t)field << 3 | wire_type);
}

/* An int64 / uint64 field (int64 values are written as their two's-complement uint64). */
static void pb_int(PbOut* o, unsigned field, uint64_t v) {
  pb_tag(o, field, PB_VARINT);
  pb_varint(o, v);
}

/* A length-delimited field whose body, of `len` bytes, the caller writes next. */
static void pb_len(PbOut* o, unsigned field, size_t len) {
  pb_tag(o, field, PB_LEN);
  pb_varint(o, len);
}

/* Appends `len` bytes already encoded. */
static void pb_raw(PbOut* o, const void* bytes, size_t len) {
  if (o->p != NULL && len > 0) memcpy(o->p + o->n, bytes, len);
  o->n += len;
}

/* A string field. */
static void pb_str(PbOut* o, unsigned field, const char* s) {
  size_t len = strlen(s);
  pb_len(o, field, len);
  pb_raw(o, s, len);
}

/* A submessage whose body `body(o, arg)` writes: measured first, then written. */
static void pb_message(PbOut* o, unsigned field, void (*body)(PbOut*, const void*),
                       const void* arg) {
  PbOut m = {NULL, 0};
  body(&m, arg);
  pb_len(o, field, m.n);
  if (o->p != NULL) body(o, arg);
  else o->n += m.n;
}

/* ---- the XSpace ------------------------------------------------------------------------- */

/* One event metadata entry of a plane. */
typedef struct MetaEntry {
  const char* name;    /* op type or operation name */
  const char* display; /* node name when it differs from name, else NULL */
  /* A kernel's: its stats but the correlation id (op_type, tf_op, kernel_details), the same
   * for every event of the entry, encoded once as XEvent.stats fields; else NULL. Their
   * values are ref_values: ids of stat metadata named by the strings (kernel_ref_id). */
  uint8_t* kernel_stats;
  size_t kernel_stats_len;
  char* tf_op; /* "<node>:<type>", with kernel_stats */
} MetaEntry;

/* A plane's event metadata: entries[i] has id i + 1; `slots` is an open-addressing index
 * (0 = empty, else id). */
typedef struct MetaTable {
  MetaEntry* entries;
  size_t count;
  size_t entry_capacity;
  uint32_t* slots;
  size_t slot_capacity; /* a power of two, at least twice count */
} MetaTable;

/* FNV-1a over `s` (NULL hashes like ""), continuing from `h`, with a terminator mixed in
 * so that ("ab", "c") and ("a", "bc") differ. */
static uint64_t hash_str(uint64_t h, const char* s) {
  for (; s != NULL && *s != '\0'; s++) h = (h ^ (unsigned char)*s) * UINT64_C(0x100000001b3);
  return (h ^ 0xff) * UINT64_C(0x100000001b3);
}

/* String equality where NULL equals only NULL. */
static bool str_eq(const char* a, const char* b) {
  return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* Returns the id of (name, display), adding it if new; 0 when out of memory. */
static uint32_t meta_id(MetaTable* t, const char* name, const char* display) {
  if (2 * (t->count + 1) > t->slot_capacity) {
    size_t cap = t->slot_capacity ? 2 * t->slot_capacity : 64;
    uint32_t* slots = calloc(cap, sizeof *slots);
    if (slots == NULL) return 0;
    for (size_t i = 0; i < t->count; i++) {
      size_t j = hash_str(hash_str(UINT64_C(0xcbf29ce484222325), t->entries[i].name),
                          t->entries[i].display) & (cap - 1);
      while (slots[j] != 0) j = (j + 1) & (cap - 1);
      slots[j] = (uint32_t)(i + 1);
    }
    free(t->slots);
    t->slots = slots;
    t->slot_capacity = cap;
  }
  size_t j = hash_str(hash_str(UINT64_C(0xcbf29ce484222325), name), display) &
             (t->slot_capacity - 1);
  for (; t->slots[j] != 0; j = (j + 1) & (t->slot_capacity - 1)) {
    const MetaEntry* e = &t->entries[t->slots[j] - 1];
    if (str_eq(e->name, name) && str_eq(e->display, display)) return t->slots[j];
  }
  if (t->count == t->entry_capacity) {
    size_t cap = t->entry_capacity ? 2 * t->entry_capacity : 16;
    MetaEntry* grown = realloc(t->entries, cap * sizeof *grown);
    if (grown == NULL) return 0;
    t->entries = grown;
    t->entry_capacity = cap;
  }
  t->entries[t->count] = (MetaEntry){name, display, NULL, 0, NULL};
  t->slots[j] = (uint32_t)++t->count;
  return t->slots[j];
}

/* A line's events, encoded once as its XLine.events fields (key, length, XEvent each). */
typedef struct LineEvents {
  uint8_t* bytes; /* a prof_alloc block, or NULL */
  size_t len;
  uint64_t first; /* the line's timestamp: its first event's start */
  uint64_t last;  /* its last event's end */
} LineEvents;

/* One plane being written: lines g_lines[first, first + count) of one device. */
typedef struct PlaneCtx {
  int ordinal;
  size_t first;
  size_t count;
  uint64_t dropped;
  MetaTable meta;
  LineEvents* lines; /* lines[i]: the events of g_lines[first + i] */
  size_t size;       /* measured once, reused when writing */
} PlaneCtx;

typedef struct StatArg {
  unsigned meta_id;
  unsigned value_field; /* 3 uint64_value, 4 int64_value, 5 str_value */
  uint64_t number;
  const char* text;
} StatArg;

/* An XStat. */
static void stat_body(PbOut* o, const void* arg) {
  const StatArg* s = arg;
  pb_int(o, 1, s->meta_id);
  if (s->value_field == 5) pb_str(o, 5, s->text);
  else pb_int(o, s->value_field, s->number);
}

/* The stat metadata ids of ref_values: the kernel details string, then two per event
 * metadata entry (entry id `id`): its op type and its tf_op. */
enum { KERNEL_DETAILS_REF = STAT_COUNT };
static uint64_t kernel_ref_id(uint32_t id, int tf_op) {
  return KERNEL_DETAILS_REF + 2 * (uint64_t)id - 1 + (uint64_t)tf_op;
}

typedef struct KernelStatsArg {
  const MetaEntry* m;
  uint32_t id;
} KernelStatsArg;

/* The stats op_type, tf_op and kernel_details of a kernel entry, as XEvent.stats fields. */
static void kernel_stats_body(PbOut* o, const void* arg) {
  const KernelStatsArg* a = arg;
  StatArg s = {STAT_OP_TYPE, 7, kernel_ref_id(a->id, 0), NULL};
  pb_message(o, 4, stat_body, &s);
  StatArg t = {STAT_TF_OP, 7, kernel_ref_id(a->id, 1), NULL};
  pb_message(o, 4, stat_body, &t);
  StatArg k = {STAT_KERNEL_DETAILS, 7, KERNEL_DETAILS_REF, NULL};
  pb_message(o, 4, stat_body, &k);
}

/* Encodes the kernel stats of entry `id` once; false when out of memory. */
static bool meta_kernel_stats(MetaTable* t, uint32_t id) {
  MetaEntry* m = &t->entries[id - 1];
  if (m->kernel_stats != NULL) return true;
  /* "<node>:<type>"; an eager node without a name of its own is named after its type. */
  const char* node = m->display != NULL ? m->display : m->name;
  size_t len = strlen(node) + 1 + strlen(m->name);
  m->tf_op = prof_alloc(len + 1);
  if (m->tf_op == NULL) return false;
  snprintf(m->tf_op, len + 1, "%s:%s", node, m->name);
  KernelStatsArg a = {m, id};
  PbOut size = {NULL, 0};
  kernel_stats_body(&size, &a);
  PbOut w = {prof_alloc(size.n), 0};
  if (w.p == NULL) return false;
  kernel_stats_body(&w, &a);
  m->kernel_stats = w.p;
  m->kernel_stats_len = w.n;
  return true;
}

/* The first start and the last end of a line's events. */
static void line_span(const XpuProfLine* line, uint64_t* first, uint64_t* last) {
  *first = UINT64_MAX;
  *last = 0;
  for (const XpuProfChunk* c = line->first; c != NULL; c = c->next) {
    for (size_t i = 0; i < c->count; i++) {
      if (c->events[i].start_ns < *first) *first = c->events[i].start_ns;
      if (c->events[i].end_ns > *last) *last = c->events[i].end_ns;
    }
  }
}

/* Keys (field number << 3 | wire type) of the fields an event is made of; each is one byte. */
enum {
  KEY_LINE_EVENTS = 4 << 3 | PB_LEN,          /* XLine.events */
  KEY_EVENT_METADATA_ID = 1 << 3 | PB_VARINT, /* XEvent.metadata_id */
  KEY_EVENT_OFFSET_PS = 2 << 3 | PB_VARINT,   /* XEvent.offset_ps */
  KEY_EVENT_DURATION_PS = 3 << 3 | PB_VARINT, /* XEvent.duration_ps */
  KEY_EVENT_STATS = 4 << 3 | PB_LEN,          /* XEvent.stats */
  KEY_STAT_METADATA_ID = 1 << 3 | PB_VARINT,  /* XStat.metadata_id */
  KEY_STAT_UINT64 = 3 << 3 | PB_VARINT,       /* XStat.uint64_value */
};
/* put_u64_stat writes a stat's metadata id as one byte. */
_Static_assert(STAT_COUNT <= 0x80, "stat metadata ids must be one-byte varints");

/* The most an event's fields take, beside a kernel's pre-encoded stats: metadata id (key and
 * a uint32 varint, 6), offset and duration (key and a uint64 varint, 11 each), one uint64 stat
 * (key, length, metadata id field, value field: 15). */
enum { EVENT_FIELDS_MAX = 6 + 11 + 11 + 15 };

/* Writes an XEvent.stats field holding a uint64 XStat of stat metadata `id` at `q`: key,
 * length, then metadata id and value fields; returns the end. */
static inline uint8_t* put_u64_stat(uint8_t* q, unsigned id, uint64_t v) {
  q[0] = KEY_EVENT_STATS;
  q[2] = KEY_STAT_METADATA_ID;
  q[3] = (uint8_t)id;
  q[4] = KEY_STAT_UINT64;
  uint8_t* end = put_varint(q + 5, v);
  q[1] = (uint8_t)(end - (q + 2)); /* at most 13 */
  return end;
}

static const char kOutOfMemory[] = "out of host memory while serialising the XSpace";
static const char kSizesDisagree[] =
    "the XSpace encoder's size pass and write pass disagree (a plugin bug)";
static const char kEventTooLong[] =
    "the XSpace encoder wrote an event of 128 bytes or more, past the one-byte length it "
    "reserves (a plugin bug)";

/* Gives every event of `line` its metadata id in `meta` (adding entries, with their kernel
 * stats, as they first appear) and encodes the events into out->bytes, once: an XEvent is its
 * metadata id, its offset from the line's timestamp, its duration when not 0, and its stats:
 * a kernel's pre-encoded ones (MetaEntry.kernel_stats) and its correlation id when it has one,
 * a copy's or fill's "bytes". An event's body is below 128 bytes (EVENT_FIELDS_MAX and three
 * kernel stats of at most 10 bytes), so its length is one byte, filled in once the body is
 * written; a body that would not fit fails the encoding. out->bytes is set as soon as it is
 * allocated, so the caller frees it on every path. Returns NULL, or why it failed. */
static const char* encode_line(const XpuProfLine* line, MetaTable* meta, LineEvents* out) {
  line_span(line, &out->first, &out->last);
  const uint64_t first = out->first;
  size_t cap = XPU_PROF_EVENT_BYTES * line->count + 64;
  out->bytes = prof_alloc(cap);
  if (out->bytes == NULL) return kOutOfMemory;
  size_t len = 0;
  /* The last (name, display) looked up, by address: kernels of one op type share its static
   * name, and eager ones have no node name of their own, so runs of them skip the table. */
  const char* last_name = NULL;
  const char* last_display = NULL;
  uint32_t id = 0;
  const MetaEntry* m = NULL; /* entry `id`'s, when it is a kernel's */
  for (const XpuProfChunk* c = line->first; c != NULL; c = c->next) {
    for (size_t k = 0; k < c->count; k++) {
      const XpuProfEvent* e = &c->events[k];
      bool kernel = e->kind == XPU_PROF_KERNEL && e->op_type != NULL;
      const char* name = kKindNames[e->kind];
      const char* display = NULL;
      if (kernel) {
        name = e->op_type;
        if (e->name != NULL && e->name[0] != '\0' && strcmp(e->name, name) != 0) {
          display = e->name;
        }
      }
      if (id == 0 || name != last_name || display != last_display) {
        id = meta_id(meta, name, display);
        if (id == 0 || (kernel && !meta_kernel_stats(meta, id))) return kOutOfMemory;
        m = kernel ? &meta->entries[id - 1] : NULL;
        last_name = name;
        last_display = display;
      }
      /* Room for the most the event can take: key, length, its fields and kernel stats. */
      size_t most = len + 2 + EVENT_FIELDS_MAX + (m != NULL ? m->kernel_stats_len : 0);
      if (most > cap) {
        size_t grown_cap = 2 * cap > most ? 2 * cap : most;
        uint8_t* grown = prof_realloc(out->bytes, grown_cap);
        if (grown == NULL) return kOutOfMemory;
        out->bytes = grown;
        cap = grown_cap;
      }
      uint8_t* q = out->bytes + len;
      *q++ = KEY_LINE_EVENTS;
      uint8_t* body_len = q++;
      const uint8_t* body = q;
      *q++ = KEY_EVENT_METADATA_ID;
      q = put_varint(q, id);
      *q++ = KEY_EVENT_OFFSET_PS; /* a oneof: written even when 0 */
      q = put_varint(q, (e->start_ns - first) * 1000);
      uint64_t duration_ps = (e->end_ns - e->start_ns) * 1000;
      if (duration_ps != 0) {
        *q++ = KEY_EVENT_DURATION_PS;
        q = put_varint(q, duration_ps);
      }
      if (m != NULL) {
        memcpy(q, m->kernel_stats, m->kernel_stats_len);
        q += m->kernel_stats_len;
        if (e->correlation_id != 0) q = put_u64_stat(q, STAT_CORRELATION_ID, e->correlation_id);
      } else if (e->kind >= XPU_PROF_MEMCPY_H2D && e->kind <= XPU_PROF_MEMSET) {
        q = put_u64_stat(q, STAT_BYTES, e->bytes);
      }
      if (q - body >= 0x80) return kEventTooLong;
      *body_len = (uint8_t)(q - body);
      len = (size_t)(q - out->bytes);
    }
  }
  out->len = len;
  return NULL;
}

typedef struct LineArg {
  const XpuProfLine* line;
  const LineEvents* events;
} LineArg;

/* An XLine: its header, its events as encoded by encode_line, its duration and display id. */
static void line_body(PbOut* o, const void* arg) {
  const LineArg* a = arg;
  const XpuProfLine* line = a->line;
  char fallback[48];
  if (line->name == NULL) snprintf(fallback, sizeof fallback, "stream %" PRIu64, line->stream_id);
  pb_int(o, 1, line->stream_id);
  pb_str(o, 2, line->name != NULL ? line->name : fallback);
  pb_int(o, 3, a->events->first);
  pb_raw(o, a->events->bytes, a->events->len);
  if (a->events->last > a->events->first) pb_int(o, 9, (a->events->last - a->events->first) * 1000);
  pb_int(o, 10, line->stream_id);
}

typedef struct MetaArg {
  uint64_t id;
  const char* name;
  const char* display;
} MetaArg;

/* An XEventMetadata. */
static void event_metadata_body(PbOut* o, const void* arg) {
  const MetaArg* m = arg;
  pb_int(o, 1, m->id);
  pb_str(o, 2, m->name);
  if (m->display != NULL) pb_str(o, 4, m->display);
}

/* An XStatMetadata. */
static void stat_metadata_body(PbOut* o, const void* arg) {
  const MetaArg* m = arg;
  pb_int(o, 1, m->id);
  pb_str(o, 2, m->name);
}

/* A map<int64, M> entry: key = 1, value = 2. `arg` is a MetaArg; `value` writes M. */
typedef struct MapEntryArg {
  const MetaArg* meta;
  void (*value)(PbOut*, const void*);
} MapEntryArg;

/* One entry of an XPlane metadata map. */
static void map_entry_body(PbOut* o, const void* arg) {
  const MapEntryArg* m = arg;
  pb_int(o, 1, m->meta->id);
  pb_message(o, 2, m->value, m->meta);
}

/* An XPlane: lines (their events already encoded), metadata maps, stats. */
static void plane_body(PbOut* o, const void* arg) {
  PlaneCtx* p = (PlaneCtx*)arg;
  char name[32];
  snprintf(name, sizeof name, "/device:GPU:%d", p->ordinal);
  if (p->ordinal != 0) pb_int(o, 1, (uint64_t)(int64_t)p->ordinal); /* proto3: 0 is omitted */
  pb_str(o, 2, name);
  for (size_t i = 0; i < p->count; i++) {
    const LineArg line = {&g_lines[p->first + i], &p->lines[i]};
    pb_message(o, 3, line_body, &line);
  }
  for (size_t i = 0; i < p->meta.count; i++) {
    MetaArg m = {i + 1, p->meta.entries[i].name, p->meta.entries[i].display};
    MapEntryArg entry = {&m, event_metadata_body};
    pb_message(o, 4, map_entry_body, &entry);
  }
  for (unsigned id = 1; id < STAT_COUNT; id++) {
    MetaArg m = {id, kStatNames[id], NULL};
    MapEntryArg entry = {&m, stat_metadata_body};
    pb_message(o, 5, map_entry_body, &entry);
  }
  bool kernels = false;
  for (size_t i = 0; i < p->meta.count; i++) { /* the strings kernel stats refer to */
    const MetaEntry* e = &p->meta.entries[i];
    if (e->kernel_stats == NULL) continue;
    kernels = true;
    MetaArg op_type = {kernel_ref_id((uint32_t)i + 1, 0), e->name, NULL};
    MapEntryArg entry = {&op_type, stat_metadata_body};
    pb_message(o, 5, map_entry_body, &entry);
    MetaArg tf_op = {kernel_ref_id((uint32_t)i + 1, 1), e->tf_op, NULL};
    entry.meta = &tf_op;
    pb_message(o, 5, map_entry_body, &entry);
  }
  if (kernels) {
    MetaArg details = {KERNEL_DETAILS_REF, kKernelDetails, NULL};
    MapEntryArg entry = {&details, stat_metadata_body};
    pb_message(o, 5, map_entry_body, &entry);
  }
  StatArg ordinal = {STAT_DEVICE_ORDINAL, 4, (uint64_t)(int64_t)p->ordinal, NULL};
  pb_message(o, 6, stat_body, &ordinal);
  StatArg type = {STAT_DEVICE_TYPE_STRING, 5, 0, XPU_DEVICE_TYPE};
  pb_message(o, 6, stat_body, &type);
  if (p->dropped > 0) {
    StatArg dropped = {STAT_DROPPED_EVENTS, 3, p->dropped, NULL};
    pb_message(o, 6, stat_body, &dropped);
  }
}

/* The XSpace: planes (sizes recorded when measuring, as for lines) and warnings. */
static void space_body(PbOut* o, PlaneCtx* planes, size_t plane_count) {
  for (size_t i = 0; i < plane_count; i++) {
    if (o->p == NULL) {
      PbOut m = {NULL, 0};
      plane_body(&m, &planes[i]);
      planes[i].size = m.n;
    }
    pb_len(o, 1, planes[i].size);
    if (o->p != NULL) plane_body(o, &planes[i]);
    else o->n += planes[i].size;
  }
  for (size_t i = 0; i < g_line_count; i++) {
    const XpuProfLine* line = &g_lines[i];
    if (line->dropped == 0) continue;
    char warning[256];
    snprintf(warning, sizeof warning,
             "XPU device %d, stream %" PRIu64 ": %" PRIu64 " events dropped; the XPU profiler "
             "keeps at most %" PRIu64 " events per stream per session", line->ordinal,
             line->stream_id, line->dropped, (uint64_t)line->count);
    pb_str(o, 3, warning);
  }
}

/* Encodes the events of every line of the plane (encode_line); NULL, or why it failed. */
static const char* plane_encode_lines(PlaneCtx* p) {
  for (size_t i = 0; i < p->count; i++) {
    const XpuProfLine* line = &g_lines[p->first + i];
    p->dropped += line->dropped;
    const char* why = encode_line(line, &p->meta, &p->lines[i]);
    if (why != NULL) return why;
  }
  return NULL;
}

/* Serialises the stopped session into g_encoded (NULL and 0 bytes when no device did work)
 * and frees its events. False when it failed (out of memory, or a plugin bug), with `why`
 * set. Events are encoded once per line (plane_encode_lines); the few messages around them
 * are measured, then written, and both passes must agree. */
static bool encode_stopped_session(const char** why) {
  size_t plane_count = 0;
  for (size_t i = 0; i < g_line_count; i++) {
    if (i == 0 || g_lines[i].ordinal != g_lines[i - 1].ordinal) plane_count++;
  }
  const char* failure = NULL;
  PlaneCtx* planes = plane_count > 0 ? calloc(plane_count, sizeof *planes) : NULL;
  LineEvents* lines = g_line_count > 0 ? calloc(g_line_count, sizeof *lines) : NULL;
  if (plane_count > 0 && (planes == NULL || lines == NULL)) failure = kOutOfMemory;
  for (size_t i = 0, k = 0; failure == NULL && i < g_line_count; i++) {
    if (i > 0 && g_lines[i].ordinal == g_lines[i - 1].ordinal) {
      planes[k - 1].count++;
      continue;
    }
    planes[k] = (PlaneCtx){.ordinal = g_lines[i].ordinal, .first = i, .count = 1,
                           .lines = lines + i};
    k++;
  }
  for (size_t i = 0; failure == NULL && i < plane_count; i++) {
    failure = plane_encode_lines(&planes[i]);
  }
  uint8_t* bytes = NULL;
  PbOut out = {NULL, 0};
  if (failure == NULL && plane_count > 0) {
    space_body(&out, planes, plane_count);
    bytes = prof_alloc(out.n);
    if (bytes == NULL) failure = kOutOfMemory;
  }
  if (failure == NULL && bytes != NULL) {
    PbOut w = {bytes, 0};
    space_body(&w, planes, plane_count);
    if (w.n != out.n) failure = kSizesDisagree;
  }
  for (size_t i = 0; i < plane_count && planes != NULL; i++) {
    for (size_t k = 0; k < planes[i].meta.count; k++) {
      prof_free(planes[i].meta.entries[k].kernel_stats);
      prof_free(planes[i].meta.entries[k].tf_op);
    }
    free(planes[i].meta.entries);
    free(planes[i].meta.slots);
  }
  for (size_t i = 0; i < g_line_count && lines != NULL; i++) prof_free(lines[i].bytes);
  free(planes);
  free(lines);
  discard_stopped_session();
  if (failure != NULL) {
    prof_free(bytes);
    *why = failure;
    return false;
  }
  g_encoded = bytes;
  g_encoded_size = bytes != NULL ? out.n : 0;
  g_encoded_ready = true;
  return true;
}

/* ---- TP_ProfilerFns --------------------------------------------------------------------- */

static const char* const kProfilerType = XPU_DEVICE_TYPE;

/* True when `profiler` is one TF_InitProfiler filled, else INVALID_ARGUMENT. */
static bool profiler_valid(const TP_Profiler* profiler, const char* fn, TF_Status* status) {
  if (profiler != NULL && profiler->struct_size >= TP_PROFILER_STRUCT_SIZE &&
      profiler->device_type == kProfilerType) {
    return true;
  }
  xpu_status(status, TF_INVALID_ARGUMENT,
             "%s: the TP_Profiler is not the XPU plugin's (NULL, or not filled by this "
             "plugin's TF_InitProfiler)", fn);
  return false;
}

/* TP_ProfilerFns.start: opens a session; drops a stopped session that was never collected. */
static void xpu_profiler_start(const TP_Profiler* profiler, TF_Status* status) {
  const char* fn = "TP_ProfilerFns.start";
  if (!profiler_valid(profiler, fn, status)) return;
  uint64_t call = xpu_fault_hit(XPU_FAULT_PROFILER_START);
  if (call != 0) {
    xpu_fault_status(status, XPU_FAULT_PROFILER_START, call, fn);
    return;
  }
  pthread_mutex_lock(&g_prof_mu);
  if (atomic_load(&xpu_prof_session)) {
    pthread_mutex_unlock(&g_prof_mu);
    xpu_status(status, TF_FAILED_PRECONDITION,
               "%s: an XPU profiling session is already running; call stop first", fn);
    return;
  }
  discard_stopped_session();
  int entry = registration_of(profiler, false);
  atomic_store_explicit(&g_correlation_id_fn,
                        entry >= 0 ? g_registrations[entry].correlation_id : NULL,
                        memory_order_release);
  atomic_store_explicit(&g_max_events, atomic_load(&g_max_events_setting), memory_order_relaxed);
  if (g_tsc < 0) g_tsc = pg_profiler_tsc_usable();
  g_clock_start = pg_profiler_clock_pair(g_tsc > 0, realtime_ns);
  atomic_store_explicit(&xpu_prof_session, true, memory_order_seq_cst);
  pthread_mutex_unlock(&g_prof_mu);
  TF_SetStatus(status, TF_OK, "");
}

/* TP_ProfilerFns.stop: closes the session; its events wait for collect_data_xspace. */
static void xpu_profiler_stop(const TP_Profiler* profiler, TF_Status* status) {
  const char* fn = "TP_ProfilerFns.stop";
  if (!profiler_valid(profiler, fn, status)) return;
  pthread_mutex_lock(&g_prof_mu);
  if (!atomic_load(&xpu_prof_session)) {
    pthread_mutex_unlock(&g_prof_mu);
    xpu_status(status, TF_FAILED_PRECONDITION,
               "%s: no XPU profiling session is running (start was not called, or it failed)",
               fn);
    return;
  }
  bool ok = end_session();
  pthread_mutex_unlock(&g_prof_mu);
  if (ok) {
    TF_SetStatus(status, TF_OK, "");
  } else {
    xpu_status(status, TF_RESOURCE_EXHAUSTED,
               "%s: out of host memory; the session's events were dropped", fn);
  }
}

/* TP_ProfilerFns.collect_data_xspace: the two-call protocol over the stopped session. */
static void xpu_profiler_collect(const TP_Profiler* profiler, uint8_t* buffer,
                                 size_t* size_in_bytes, TF_Status* status) {
  const char* fn = "TP_ProfilerFns.collect_data_xspace";
  if (!profiler_valid(profiler, fn, status)) return;
  if (size_in_bytes == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: size_in_bytes is NULL", fn);
    return;
  }
  uint64_t call = xpu_fault_hit(XPU_FAULT_PROFILER_COLLECT);
  if (call != 0) {
    *size_in_bytes = 0;
    xpu_fault_status(status, XPU_FAULT_PROFILER_COLLECT, call, fn);
    return;
  }
  pthread_mutex_lock(&g_prof_mu);
  if (atomic_load(&xpu_prof_session)) {
    pthread_mutex_unlock(&g_prof_mu);
    *size_in_bytes = 0;
    xpu_status(status, TF_FAILED_PRECONDITION,
               "%s: the XPU profiling session is still running; call stop first", fn);
    return;
  }
  const char* why = NULL;
  if (!g_encoded_ready && !encode_stopped_session(&why)) {
    pthread_mutex_unlock(&g_prof_mu);
    *size_in_bytes = 0;
    xpu_status(status, TF_RESOURCE_EXHAUSTED, "%s: %s; the session's events were dropped", fn,
               why);
    return;
  }
  size_t needed = g_encoded_size;
  if (buffer == NULL) {
    *size_in_bytes = needed;
    pthread_mutex_unlock(&g_prof_mu);
    TF_SetStatus(status, TF_OK, "");
    return;
  }
  if (*size_in_bytes < needed) {
    size_t given = *size_in_bytes;
    *size_in_bytes = needed;
    pthread_mutex_unlock(&g_prof_mu);
    xpu_status(status, TF_INVALID_ARGUMENT,
               "%s: the buffer holds %zu bytes but the XSpace takes %zu; ask for the size with a "
               "NULL buffer first and pass a buffer of that size (nothing was written)", fn,
               given, needed);
    return;
  }
  if (needed > 0) memcpy(buffer, g_encoded, needed);
  *size_in_bytes = needed;
  prof_free(g_encoded);
  g_encoded = NULL;
  g_encoded_size = 0;
  g_encoded_ready = false;
  pthread_mutex_unlock(&g_prof_mu);
  TF_SetStatus(status, TF_OK, "");
}

/* TF_ProfilerRegistrationParams.destroy_profiler: ends a running session, frees every event
 * held and forgets the registration; the TP_Profiler itself is the host's. */
static void xpu_destroy_profiler(TP_Profiler* profiler) {
  pthread_mutex_lock(&g_prof_mu);
  if (atomic_load(&xpu_prof_session)) end_session();
  discard_stopped_session();
  int entry = registration_of(profiler, false);
  if (entry >= 0) {
    g_registrations[entry].profiler = NULL;
    g_registrations[entry].correlation_id = NULL;
  }
  pthread_mutex_unlock(&g_prof_mu);
}

/* TF_ProfilerRegistrationParams.destroy_profiler_fns: the table holds only static functions. */
static void xpu_destroy_profiler_fns(TP_ProfilerFns* profiler_fns) { (void)profiler_fns; }

__attribute__((visibility("default"))) void TF_InitProfiler(TF_ProfilerRegistrationParams* params,
                                                            TF_Status* status) {
  const char* fn = "TF_InitProfiler";
  if (params == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: params is NULL", fn);
    return;
  }
  if (!xpu_check_size(status, fn, "TF_ProfilerRegistrationParams", params->struct_size,
                      TF_OFFSET_OF_END(TF_ProfilerRegistrationParams, profiler_fns))) {
    return;
  }
  if (params->major_version != TP_MAJOR) {
    xpu_status(status, TF_FAILED_PRECONDITION,
               "%s: the host's profiler C API is version %d.%d.%d but the XPU plugin was built "
               "for %d.%d.%d; the major versions must match", fn, (int)params->major_version,
               (int)params->minor_version, (int)params->patch_version, TP_MAJOR, TP_MINOR,
               TP_PATCH);
    return;
  }
  TP_Profiler* profiler = params->profiler;
  TP_ProfilerFns* fns = params->profiler_fns;
  if (profiler == NULL || fns == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: params->%s is NULL", fn,
               profiler == NULL ? "profiler" : "profiler_fns");
    return;
  }
  if (!xpu_check_size(status, fn, "TP_Profiler", profiler->struct_size,
                      TP_PROFILER_STRUCT_SIZE) ||
      !xpu_check_size(status, fn, "TP_ProfilerFns", fns->struct_size,
                      TP_PROFILER_FNS_STRUCT_SIZE)) {
    return;
  }
  /* The host's extensions (pluggable/plugin_ext.h); TensorFlow leaves ext NULL. */
  XpuCorrelationFn correlation_id = NULL;
  if (XPU_FITS(params, TF_ProfilerRegistrationParams, ext)) {
    const PLUGGABLE_ExtHeader* link = params->ext;
    for (int hops = 0; link != NULL && hops < 64; hops++) {
      if (((uint32_t)link->type & PLUGGABLE_EXT_TAG_MASK) != PLUGGABLE_EXT_TAG_BASE) break;
      if (link->struct_size < PLUGGABLE_EXT_HEADER_STRUCT_SIZE) break;
      if (link->type == PLUGGABLE_EXT_PROFILER_CONTEXT &&
          link->struct_size >= PLUGGABLE_PROFILER_CONTEXT_EXT_STRUCT_SIZE) {
        correlation_id = ((const PLUGGABLE_ProfilerContextExt*)link)->correlation_id;
      }
      link = link->next;
    }
  }
  pthread_mutex_lock(&g_prof_mu);
  int entry = registration_of(profiler, true);
  if (entry >= 0) {
    g_registrations[entry].profiler = profiler;
    g_registrations[entry].correlation_id = correlation_id;
  }
  pthread_mutex_unlock(&g_prof_mu);
  if (entry < 0) {
    xpu_status(status, TF_RESOURCE_EXHAUSTED,
               "%s: the XPU profiler already has %d registrations; destroy one "
               "(TF_ProfilerRegistrationParams.destroy_profiler) before registering again", fn,
               XPU_PROF_REGISTRATIONS);
    return;
  }
  profiler->struct_size = TP_PROFILER_STRUCT_SIZE;
  profiler->ext = NULL;
  profiler->device_type = kProfilerType;
  fns->struct_size = TP_PROFILER_FNS_STRUCT_SIZE;
  fns->ext = NULL;
  fns->start = xpu_profiler_start;
  fns->stop = xpu_profiler_stop;
  fns->collect_data_xspace = xpu_profiler_collect;
  if (XPU_FITS(params, TF_ProfilerRegistrationParams, destroy_profiler)) {
    params->destroy_profiler = xpu_destroy_profiler;
  }
  if (XPU_FITS(params, TF_ProfilerRegistrationParams, destroy_profiler_fns)) {
    params->destroy_profiler_fns = xpu_destroy_profiler_fns;
  }
  TF_SetStatus(status, TF_OK, "");
}

void XPU_SetProfilerMaxEvents(uint64_t max_events) {
  atomic_store(&g_max_events_setting, max_events != 0 ? max_events : XPU_PROF_MAX_EVENTS);
}

int64_t XPU_ProfilerHeapBlocks(void) {
  return (int64_t)atomic_load_explicit(&g_heap_blocks, memory_order_relaxed);
}
