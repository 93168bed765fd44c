/* The host tracer's /host:CPU plane: the per-event work of encoding its records.
 *
 * `encode_host_events` walks HostTracer.records (tuples; their layouts are documented in
 * profiler/host_tracer.py) and returns, per Python thread in order of its first record,
 * (ident, first_ns, last_ns, events) where `events` is that XLine's XEvent fields in
 * protobuf wire format, sorted by start time. Everything that is not per event stays in
 * Python (profiler/xspace.py's PlaneBuilder): the stats of an op plan, of an allocation
 * size, of a copy or an annotation are encoded there, once per key, and reached through the
 * callbacks given; so are the ids of event and stat metadata. The line headers and the plane
 * around them are written there too. */
#include "compiled_internal.h" /* Python.h first, as CPython requires */

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

static const char* const kind_layouts[REC_KINDS] = {
    "(OP, ident, start_ns, end_ns, op_name, info, fresh, correlation_id)",
    "(COPY, ident, start_ns, end_ns, call, executor, stream, nbytes)",
    "(ALLOC, ident, when_ns, bfc, nbytes)",
    "(FREE, ident, when_ns, bfc, nbytes)",
    "(ANNOTATION, ident, start_ns, end_ns, name, step_num, metadata)",
};
static const Py_ssize_t kind_sizes[REC_KINDS] = {8, 8, 5, 5, 7};

/* Event names of allocations (TensorFlow's names, which xprof's memory profile reads). */
static PyObject* allocate_name;
static PyObject* deallocate_name;
/* An executor's device allocator (its BFC allocator, None when it has none). */
static PyObject* allocator_attribute;

/* The longest varint and the fixed part of an event, for the size bound of a line. */
#define VARINT_MAX 10
#define EVENT_OVERHEAD (4 * (1 + VARINT_MAX) + 1 + VARINT_MAX)

typedef struct {
  int64_t start, end; /* CLOCK_REALTIME ns; any int64 (arithmetic on them is unsigned) */
  PyObject* name;    /* borrowed: alive in the records' snapshot or in `keep` */
  const char* stats; /* encoded XEvent.stats fields, inside a bytes object kept alive */
  Py_ssize_t stats_len;
  int64_t in_use; /* the bytes-in-use stat of an allocation event; -1: none */
  int64_t peak;   /* with in_use: the allocator's peak bytes in use so far */
  uint64_t correlation; /* the correlation_id stat of an op launch; 0: none */
} Event;

typedef struct {
  unsigned long key; /* the thread's ident */
  Event* events;
  Py_ssize_t count, capacity;
  Py_ssize_t bound; /* an upper bound of the encoded size */
  int64_t first, last;
} Line;

typedef struct {
  PyObject* bfc; /* strong */
  long long in_use;
  long long peak;
  PyObject* chunks; /* dict: chunk size -> encoded fixed stats */
  int64_t last_chunk; /* the last one looked up, and its stats (borrowed from `chunks`) */
  PyObject* last_fixed;
} Allocator;

typedef struct {
  PyObject *op_stats, *allocation_stats, *baseline, *rare_event, *event_id;
  /* The XStat fields before the value of the per-event stats: bytes in use, peak bytes in
   * use (int64) and correlation id (uint64). */
  const char* prefix;
  Py_ssize_t prefix_len;
  const char* peak_prefix;
  Py_ssize_t peak_prefix_len;
  const char* correlation_prefix;
  Py_ssize_t correlation_prefix_len;
  PyObject* op_names; /* dict: op type -> "name:type", the name of its launch events */
  PyObject* last_op_name; /* the last op type looked up, and its entry (borrowed) */
  PyObject* last_op_full;
  PyObject* keep;     /* list: objects the events point into */
  PyObject* op_cache; /* dict: info -> encoded stats */
  PyObject* last_info;
  PyObject* last_op_stats; /* borrowed from op_cache */
  PyObject* last_executor; /* borrowed from the snapshot */
  PyObject* last_executor_allocator;
  /* The last fresh outputs of one output read (most ops of a session share the plan's
   * tuple): borrowed, as its allocator and size (bfc NULL: nothing allocated). */
  PyObject* last_fresh;
  PyObject* last_fresh_bfc;
  int64_t last_fresh_nbytes;
  PyObject* ids; /* dict: event name -> metadata id */
  struct {       /* in front of `ids`: by the name object's address */
    PyObject* name;
    uint64_t id;
  } id_cache[64];
  Line* lines;
  Py_ssize_t nlines, lines_capacity, last_line;
  Allocator* allocators;
  Py_ssize_t nallocators, allocators_capacity, last_allocator;
  Py_ssize_t index; /* the record being read, for error messages */
} State;

/* pluggable.errors.InternalError, handed over by pluggable.base.native at import. */
PyObject* pg_internal_error;

/* bind_errors(InternalError): the class a malformed record raises. */
static PyObject* fast_bind_errors(PyObject* self, PyObject* cls) {
  (void)self;
  if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject*)cls, (PyTypeObject*)PyExc_Exception)) {
    PyErr_SetString(PyExc_TypeError, "bind_errors() takes an exception class");
    return NULL;
  }
  Py_INCREF(cls);
  Py_XSETREF(pg_internal_error, cls);
  Py_RETURN_NONE;
}

/* Raises pluggable.errors.InternalError: a record that is not what the hooks append. */
static int malformed(State* s, const char* format, ...) {
  va_list args;
  va_start(args, format);
  PyObject* detail = PyUnicode_FromFormatV(format, args);
  va_end(args);
  if (detail == NULL) return -1;
  PyObject* message = PyUnicode_FromFormat(
      "host tracer record %zd is malformed: %U; the records are appended by the host "
      "tracer's hooks (profiler/host_tracer.py documents their layouts), so this is a bug "
      "in the code that appended it: please report it with this message",
      s->index, detail);
  Py_DECREF(detail);
  if (message == NULL) return -1;
  PyObject* cls = pg_internal_error;
  if (cls == NULL) { /* not bound yet: pluggable.base.native binds it at import */
    PyErr_SetObject(PyExc_RuntimeError, message);
    Py_DECREF(message);
    return -1;
  }
  Py_INCREF(cls);
  PyObject* args_tuple = PyTuple_Pack(1, message);
  PyObject* kwargs = Py_BuildValue("{s:s}", "call", "HostTracer.build_plane");
  PyObject* error = (args_tuple && kwargs) ? PyObject_Call(cls, args_tuple, kwargs) : NULL;
  Py_XDECREF(args_tuple);
  Py_XDECREF(kwargs);
  Py_DECREF(cls);
  Py_DECREF(message);
  if (error == NULL) return -1;
  PyErr_SetObject((PyObject*)Py_TYPE(error), error);
  Py_DECREF(error);
  return -1;
}

static int get_int64(State* s, PyObject* value, const char* what, int64_t* out) {
  if (!PyLong_Check(value)) {
    return malformed(s, "its %s must be an int, got %s", what, Py_TYPE(value)->tp_name);
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (overflow) return malformed(s, "its %s %R does not fit in 64 bits", what, value);
  *out = (int64_t)v;
  return 0;
}

/* The line of the thread `ident`, made on its first record. */
static Line* line_for_key(State* s, unsigned long key);

static Line* line_for(State* s, PyObject* ident) {
  if (!PyLong_Check(ident)) {
    malformed(s, "its thread ident must be an int, got %s", Py_TYPE(ident)->tp_name);
    return NULL;
  }
  /* A thread ident is a C unsigned long (threading.get_ident), a new int on each call. */
  unsigned long key = PyLong_AsUnsignedLong(ident);
  if (key == (unsigned long)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    malformed(s, "its thread ident %R is not a thread ident (an int of 0 to %lu)", ident,
              (unsigned long)-1);
    return NULL;
  }
  return line_for_key(s, key);
}

static Line* line_for_key(State* s, unsigned long key) {
  if (s->last_line >= 0 && s->lines[s->last_line].key == key) return &s->lines[s->last_line];
  for (Py_ssize_t i = 0; i < s->nlines; i++) {
    if (s->lines[i].key == key) {
      s->last_line = i;
      return &s->lines[i];
    }
  }
  if (s->nlines == s->lines_capacity) {
    Py_ssize_t capacity = s->lines_capacity ? 2 * s->lines_capacity : 8;
    Line* grown = PyMem_Realloc(s->lines, (size_t)capacity * sizeof(Line));
    if (grown == NULL) {
      PyErr_NoMemory();
      return NULL;
    }
    s->lines = grown;
    s->lines_capacity = capacity;
  }
  Line* line = &s->lines[s->nlines];
  memset(line, 0, sizeof *line);
  line->key = key;
  s->last_line = s->nlines++;
  return line;
}

static int add_event(Line* line, int64_t start, int64_t end, PyObject* name,
                     PyObject* stats, int64_t in_use, int64_t peak, uint64_t correlation,
                     Py_ssize_t per_event_bound) {
  if (line->count == line->capacity) {
    Py_ssize_t capacity = line->capacity ? 2 * line->capacity : 256;
    Event* grown = PyMem_Realloc(line->events, (size_t)capacity * sizeof(Event));
    if (grown == NULL) {
      PyErr_NoMemory();
      return -1;
    }
    line->events = grown;
    line->capacity = capacity;
  }
  Event* e = &line->events[line->count++];
  e->start = start;
  e->end = end;
  e->name = name;
  e->stats = PyBytes_AS_STRING(stats);
  e->stats_len = PyBytes_GET_SIZE(stats);
  e->in_use = in_use;
  e->peak = peak;
  e->correlation = correlation;
  line->bound += EVENT_OVERHEAD + e->stats_len + per_event_bound;
  return 0;
}

/* Calls a stats callback; its result must be bytes (the encoded XEvent.stats fields). */
static PyObject* call_for_bytes(State* s, PyObject* fn, const char* what, PyObject* a,
                                PyObject* b) {
  PyObject* result = b ? PyObject_CallFunctionObjArgs(fn, a, b, NULL)
                       : PyObject_CallOneArg(fn, a);
  if (result != NULL && !PyBytes_Check(result)) {
    PyErr_Format(PyExc_TypeError, "host plane: the %s callback returned %s, not bytes "
                 "(record %zd)", what, Py_TYPE(result)->tp_name, s->index);
    Py_CLEAR(result);
  }
  return result;
}

static Allocator* allocator_for(State* s, PyObject* bfc) {
  if (s->last_allocator >= 0 && s->allocators[s->last_allocator].bfc == bfc) {
    return &s->allocators[s->last_allocator];
  }
  for (Py_ssize_t i = 0; i < s->nallocators; i++) {
    if (s->allocators[i].bfc == bfc) {
      s->last_allocator = i;
      return &s->allocators[i];
    }
  }
  PyObject* baseline = PyObject_CallOneArg(s->baseline, bfc);
  if (baseline == NULL) return NULL;
  int overflow = 0;
  long long in_use = PyLong_Check(baseline) ? PyLong_AsLongLongAndOverflow(baseline, &overflow)
                                            : -1;
  if (!PyLong_Check(baseline) || overflow) {
    PyErr_Format(PyExc_TypeError, "host plane: the baseline callback returned %R, not an "
                 "int of 64 bits", baseline);
    Py_DECREF(baseline);
    return NULL;
  }
  Py_DECREF(baseline);
  if (in_use == -1 && PyErr_Occurred()) return NULL;
  if (s->nallocators == s->allocators_capacity) {
    Py_ssize_t capacity = s->allocators_capacity ? 2 * s->allocators_capacity : 8;
    Allocator* grown = PyMem_Realloc(s->allocators, (size_t)capacity * sizeof(Allocator));
    if (grown == NULL) {
      PyErr_NoMemory();
      return NULL;
    }
    s->allocators = grown;
    s->allocators_capacity = capacity;
  }
  PyObject* chunks = PyDict_New();
  if (chunks == NULL) return NULL;
  Allocator* a = &s->allocators[s->nallocators];
  Py_INCREF(bfc);
  a->bfc = bfc;
  a->in_use = in_use;
  a->peak = in_use;
  a->chunks = chunks;
  a->last_chunk = -1;
  a->last_fixed = NULL;
  s->last_allocator = s->nallocators++;
  return a;
}

/* An Allocate or Deallocate event: the allocator's running bytes in use, and the fixed
 * stats of (allocator, chunk) encoded once. */
static int allocation(State* s, Line* line, int kind, int64_t when, PyObject* bfc,
                      int64_t nbytes) {
  if (nbytes < 0 || nbytes > INT64_MAX - 255) {
    return malformed(s, "its byte count %lld is not a size", (long long)nbytes);
  }
  int64_t chunk = (nbytes + 255) & ~(int64_t)255; /* the BFC allocator's 256-byte chunks */
  Allocator* a = allocator_for(s, bfc);
  if (a == NULL) return -1;
  if (__builtin_add_overflow(a->in_use, kind == REC_ALLOC ? chunk : -chunk, &a->in_use)) {
    return malformed(s, "its %lld bytes take its allocator's bytes in use past 64 bits",
                     (long long)nbytes);
  }
  PyObject* fixed = a->last_chunk == chunk ? a->last_fixed : NULL;
  if (fixed == NULL) {
    PyObject* key = PyLong_FromLongLong(chunk);
    if (key == NULL) return -1;
    fixed = PyDict_GetItemWithError(a->chunks, key); /* borrowed */
    if (fixed == NULL) {
      if (PyErr_Occurred() || (fixed = call_for_bytes(s, s->allocation_stats,
                                                      "allocation stats", bfc, key)) == NULL) {
        Py_DECREF(key);
        return -1;
      }
      int failed = PyDict_SetItem(a->chunks, key, fixed);
      Py_DECREF(fixed); /* the dict keeps it */
      if (failed < 0) {
        Py_DECREF(key);
        return -1;
      }
    }
    Py_DECREF(key);
    a->last_chunk = chunk;
    a->last_fixed = fixed;
  }
  int64_t in_use = a->in_use > 0 ? a->in_use : 0;
  if (in_use > a->peak) a->peak = in_use;
  return add_event(line, when, when, kind == REC_ALLOC ? allocate_name : deallocate_name, fixed,
                   in_use, a->peak, 0,
                   s->prefix_len + s->peak_prefix_len + 2 * (2 + 2 * VARINT_MAX));
}

/* The device allocator of `executor` (borrowed; None when it has none), NULL on error. Most
 * records name the executor of the one before. */
static PyObject* executor_allocator(State* s, PyObject* executor) {
  if (executor != s->last_executor) {
    PyObject* bfc = PyObject_GetAttr(executor, allocator_attribute);
    if (bfc == NULL) return NULL;
    Py_XSETREF(s->last_executor_allocator, bfc);
    s->last_executor = executor;
  }
  return s->last_executor_allocator;
}

/* An op's launch event and the allocations of its fresh outputs (a tuple of (executor,
 * nbytes), or NULL: none). */
static int op_event(State* s, Line* line, int64_t start, int64_t end, PyObject* name,
                    PyObject* info, PyObject* fresh, uint64_t correlation) {
  PyObject* stats = s->last_info == info ? s->last_op_stats : NULL;
  if (stats == NULL) {
    stats = PyDict_GetItemWithError(s->op_cache, info); /* borrowed */
    if (stats == NULL) {
      if (PyErr_Occurred()) return -1;
      stats = call_for_bytes(s, s->op_stats, "op stats", info, NULL);
      if (stats == NULL) return -1;
      int failed = PyDict_SetItem(s->op_cache, info, stats);
      Py_DECREF(stats); /* the dict keeps it */
      if (failed < 0) return -1;
    }
    s->last_info = info;
    s->last_op_stats = stats;
  }
  /* TensorFlow names an op's event "<node name>:<op type>"; an eager node is named after its
   * op type. */
  PyObject* full = name == s->last_op_name ? s->last_op_full : NULL;
  if (full == NULL) full = PyDict_GetItemWithError(s->op_names, name); /* borrowed */
  if (full == NULL) {
    if (PyErr_Occurred()) return -1;
    full = PyUnicode_FromFormat("%U:%U", name, name);
    if (full == NULL) return -1;
    int failed = PyDict_SetItem(s->op_names, name, full);
    Py_DECREF(full); /* the dict keeps it */
    if (failed < 0) return -1;
  }
  s->last_op_name = name; /* alive in the records while the call runs */
  s->last_op_full = full;
  if (add_event(line, start, end, full, stats, -1, 0, correlation,
                correlation ? s->correlation_prefix_len + 2 + 2 * VARINT_MAX : 0) < 0) {
    return -1;
  }
  Py_ssize_t outputs = fresh != NULL ? PyTuple_GET_SIZE(fresh) : 0;
  if (outputs == 1 && fresh == s->last_fresh) {
    return s->last_fresh_bfc == NULL
               ? 0
               : allocation(s, line, REC_ALLOC, end, s->last_fresh_bfc, s->last_fresh_nbytes);
  }
  if (outputs == 1) s->last_fresh = NULL; /* until it is read */
  for (Py_ssize_t i = 0; i < outputs; i++) {
    PyObject* output = PyTuple_GET_ITEM(fresh, i);
    if (!PyTuple_Check(output) || PyTuple_GET_SIZE(output) != 2) {
      return malformed(s, "its fresh output %zd must be a tuple (executor, nbytes), got %R", i,
                       output);
    }
    PyObject* nbytes_object = PyTuple_GET_ITEM(output, 1);
    int empty = PyObject_Not(nbytes_object);
    if (empty < 0) return -1;
    if (empty) {
      if (outputs == 1) s->last_fresh_bfc = NULL, s->last_fresh = fresh;
      continue;
    }
    int64_t nbytes = 0;
    if (get_int64(s, nbytes_object, "byte count", &nbytes) < 0) return -1;
    PyObject* executor = PyTuple_GET_ITEM(output, 0);
    PyObject* bfc = executor_allocator(s, executor);
    if (bfc == NULL) return -1;
    if (bfc != Py_None && allocation(s, line, REC_ALLOC, end, bfc, nbytes) < 0) return -1;
    if (outputs == 1) {
      s->last_fresh = fresh;
      s->last_fresh_bfc = bfc != Py_None ? bfc : NULL;
      s->last_fresh_nbytes = nbytes;
    }
  }
  return 0;
}

/* An OP record tuple (see kind_layouts). */
static int op_record(State* s, Line* line, PyObject* record) {
  int64_t start = 0, end = 0;
  if (get_int64(s, PyTuple_GET_ITEM(record, 2), "start_ns", &start) < 0 ||
      get_int64(s, PyTuple_GET_ITEM(record, 3), "end_ns", &end) < 0) {
    return -1;
  }
  PyObject* name = PyTuple_GET_ITEM(record, 4);
  if (!PyUnicode_Check(name)) {
    return malformed(s, "its op name must be a str, got %s", Py_TYPE(name)->tp_name);
  }
  PyObject* fresh = PyTuple_GET_ITEM(record, 6);
  if (!PyTuple_Check(fresh)) {
    return malformed(s, "its fresh outputs must be a tuple of (executor, nbytes), got %s",
                     Py_TYPE(fresh)->tp_name);
  }
  uint64_t correlation = 0;
  PyObject* launch = PyTuple_GET_ITEM(record, 7);
  if (!PyLong_Check(launch) ||
      ((correlation = PyLong_AsUnsignedLongLong(launch)) == (uint64_t)-1 && PyErr_Occurred())) {
    PyErr_Clear();
    return malformed(s, "its correlation id must be an int of 64 bits, got %R", launch);
  }
  return op_event(s, line, start, end, name, PyTuple_GET_ITEM(record, 5), fresh, correlation);
}

/* COPY and ANNOTATION records (rare): Python gives (name, encoded stats). */
static int rare_record(State* s, Line* line, PyObject* record) {
  int64_t start = 0, end = 0;
  if (get_int64(s, PyTuple_GET_ITEM(record, 2), "start_ns", &start) < 0 ||
      get_int64(s, PyTuple_GET_ITEM(record, 3), "end_ns", &end) < 0) {
    return -1;
  }
  PyObject* result = PyObject_CallOneArg(s->rare_event, record);
  if (result == NULL) return -1;
  if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 2 ||
      !PyUnicode_Check(PyTuple_GET_ITEM(result, 0)) ||
      !PyBytes_Check(PyTuple_GET_ITEM(result, 1))) {
    PyErr_Format(PyExc_TypeError, "host plane: the event callback returned %R, not (name, "
                 "encoded stats) (record %zd)", result, s->index);
    Py_DECREF(result);
    return -1;
  }
  int failed = PyList_Append(s->keep, result);
  Py_DECREF(result); /* `keep` holds it for the events that point into it */
  if (failed < 0) return -1;
  return add_event(line, start, end, PyTuple_GET_ITEM(result, 0),
                   PyTuple_GET_ITEM(result, 1), -1, 0, 0, 0);
}

static int read_record(State* s, PyObject* record) {
  if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) < 2) {
    return malformed(s, "it must be a tuple (kind, ident, ...), got %R", record);
  }
  PyObject* kind_object = PyTuple_GET_ITEM(record, 0);
  long kind = PyLong_Check(kind_object) ? PyLong_AsLong(kind_object) : -1;
  if (kind == -1 && PyErr_Occurred()) PyErr_Clear();
  if (kind < 0 || kind >= REC_KINDS) {
    return malformed(s, "its kind %R is none of OP, COPY, ALLOC, FREE, ANNOTATION (0-4)",
                     kind_object);
  }
  if (PyTuple_GET_SIZE(record) != kind_sizes[kind]) {
    return malformed(s, "it has %zd fields where %s has %zd", PyTuple_GET_SIZE(record),
                     kind_layouts[kind], kind_sizes[kind]);
  }
  Line* line = line_for(s, PyTuple_GET_ITEM(record, 1));
  if (line == NULL) return -1;
  switch (kind) {
    case REC_OP:
      return op_record(s, line, record);
    case REC_ALLOC:
    case REC_FREE: {
      int64_t when = 0, nbytes = 0;
      if (get_int64(s, PyTuple_GET_ITEM(record, 2), "when_ns", &when) < 0 ||
          get_int64(s, PyTuple_GET_ITEM(record, 4), "byte count", &nbytes) < 0) {
        return -1;
      }
      return allocation(s, line, (int)kind, when, PyTuple_GET_ITEM(record, 3), nbytes);
    }
    default:
      return rare_record(s, line, record);
  }
}

/* A record of the store kept in C while the session ran (compiled_internal.h): read in place,
 * no tuple made. */
static int store_record(void* ctx, const PgRecordView* r) {
  State* s = ctx;
  int rc;
  if (r->kind == PG_RECORD_TUPLE) {
    rc = read_record(s, r->a);
  } else {
    Line* line = line_for_key(s, r->ident);
    if (line == NULL) return -1;
    if (r->kind == REC_OP) {
      rc = op_event(s, line, r->start_ns, r->end_ns, r->a, r->b != NULL ? r->b : Py_None, r->c,
                    (uint64_t)r->n);
    } else { /* REC_FREE: left out when the executor has no allocator any more */
      PyObject* bfc = executor_allocator(s, r->a);
      rc = bfc == NULL ? -1
           : bfc == Py_None ? 0
           : allocation(s, line, REC_FREE, r->start_ns, bfc, (int64_t)r->n);
    }
  }
  s->index++;
  return rc;
}

/* A stable sort of a line's events by start time (merge sort; one pass over events that
 * are already in order, the common case). */
static void sort_events(Event* events, Event* scratch, Py_ssize_t n) {
  if (n < 2) return;
  if (n <= 16) { /* insertion sort: stable, cheap for short runs */
    for (Py_ssize_t i = 1; i < n; i++) {
      Event e = events[i];
      Py_ssize_t j = i;
      while (j > 0 && events[j - 1].start > e.start) {
        events[j] = events[j - 1];
        j--;
      }
      events[j] = e;
    }
    return;
  }
  Py_ssize_t half = n / 2;
  sort_events(events, scratch, half);
  sort_events(events + half, scratch, n - half);
  if (events[half - 1].start <= events[half].start) return; /* already in order */
  memcpy(scratch, events, (size_t)half * sizeof(Event));
  Py_ssize_t i = 0, j = half, k = 0;
  while (i < half && j < n) {
    events[k++] = events[j].start < scratch[i].start ? events[j++] : scratch[i++];
  }
  while (i < half) events[k++] = scratch[i++];
}

static inline int varint_size(uint64_t v) {
  int bits = 64 - __builtin_clzll(v | 1); /* 7 bits a byte: (bits + 6) / 7, as 9 / 64 */
  return (bits * 9 + 64) / 64;
}

static inline char* put_varint(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (char)(v | 0x80);
    v >>= 7;
  }
  *p++ = (char)v;
  return p;
}

/* The event metadata id of `name` (ids are handed out by PlaneBuilder, in the order of
 * first use: lines in order, events in time order). */
static int event_id(State* s, PyObject* name, uint64_t* out) {
  size_t slot = ((uintptr_t)name >> 4) % (sizeof s->id_cache / sizeof s->id_cache[0]);
  if (s->id_cache[slot].name == name) {
    *out = s->id_cache[slot].id;
    return 0;
  }
  PyObject* id = PyDict_GetItemWithError(s->ids, name); /* borrowed */
  if (id == NULL) {
    if (PyErr_Occurred()) return -1;
    id = PyObject_CallOneArg(s->event_id, name);
    if (id == NULL) return -1;
    if (!PyLong_Check(id)) {
      PyErr_Format(PyExc_TypeError, "host plane: the event id callback returned %R for %R, "
                   "not an int", id, name);
      Py_DECREF(id);
      return -1;
    }
    int failed = PyDict_SetItem(s->ids, name, id);
    Py_DECREF(id); /* the dict keeps it */
    if (failed < 0) return -1;
  }
  unsigned long long v = PyLong_AsUnsignedLongLong(id);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
  s->id_cache[slot].name = name; /* alive while the call runs (records, `keep`, constants) */
  s->id_cache[slot].id = v;
  *out = v;
  return 0;
}

/* The line's events, sorted, as XLine.events fields. */
static PyObject* encode_line(State* s, Line* line) {
  Py_ssize_t sorted = 1; /* the common case: recorded in order, nothing to move */
  while (sorted < line->count && line->events[sorted - 1].start <= line->events[sorted].start) {
    sorted++;
  }
  if (sorted < line->count) {
    Event* scratch = PyMem_Malloc((size_t)(line->count / 2 + 1) * sizeof(Event));
    if (scratch == NULL) return PyErr_NoMemory();
    sort_events(line->events, scratch, line->count);
    PyMem_Free(scratch);
  }
  int64_t first = line->events[0].start, last = INT64_MIN;
  for (Py_ssize_t i = 0; i < line->count; i++) {
    int64_t end = line->events[i].end;
    if (end > last) last = end;
  }
  line->first = first;
  line->last = last;
  PyObject* out = PyBytes_FromStringAndSize(NULL, line->bound);
  if (out == NULL) return NULL;
  char* p = PyBytes_AS_STRING(out);
  for (Py_ssize_t i = 0; i < line->count; i++) {
    const Event* e = &line->events[i];
    uint64_t id;
    if (event_id(s, e->name, &id) < 0) {
      Py_DECREF(out);
      return NULL;
    }
    /* Picoseconds, as int64 on the wire (a negative duration takes 10 bytes), modulo 2**64
     * as Python's encoder masks them. */
    uint64_t offset = ((uint64_t)e->start - (uint64_t)first) * 1000u;
    uint64_t duration = ((uint64_t)e->end - (uint64_t)e->start) * 1000u;
    /* An instant event (an allocation) has no duration field: proto3 leaves out a 0, as
     * TensorFlow's encoder does. */
    Py_ssize_t body = 1 + varint_size(id) + 1 + varint_size(offset) +
                      (duration != 0 ? 1 + varint_size(duration) : 0) + e->stats_len;
    Py_ssize_t stat = 0, peak_stat = 0, correlation_stat = 0;
    if (e->in_use >= 0) {
      stat = s->prefix_len + varint_size((uint64_t)e->in_use);
      peak_stat = s->peak_prefix_len + varint_size((uint64_t)e->peak);
      body += 1 + varint_size((uint64_t)stat) + stat;
      body += 1 + varint_size((uint64_t)peak_stat) + peak_stat;
    }
    if (e->correlation != 0) {
      correlation_stat = s->correlation_prefix_len + varint_size(e->correlation);
      body += 1 + varint_size((uint64_t)correlation_stat) + correlation_stat;
    }
    *p++ = 0x22; /* XLine.events = 4 */
    p = put_varint(p, (uint64_t)body);
    *p++ = 0x08; /* XEvent.metadata_id = 1 */
    p = put_varint(p, id);
    *p++ = 0x10; /* offset_ps = 2 */
    p = put_varint(p, offset);
    if (duration != 0) {
      *p++ = 0x18; /* duration_ps = 3 */
      p = put_varint(p, duration);
    }
    memcpy(p, e->stats, (size_t)e->stats_len);
    p += e->stats_len;
    if (e->in_use >= 0) {
      *p++ = 0x22; /* XEvent.stats = 4: bytes in use */
      p = put_varint(p, (uint64_t)stat);
      memcpy(p, s->prefix, (size_t)s->prefix_len);
      p = put_varint(p + s->prefix_len, (uint64_t)e->in_use);
      *p++ = 0x22; /* and the peak */
      p = put_varint(p, (uint64_t)peak_stat);
      memcpy(p, s->peak_prefix, (size_t)s->peak_prefix_len);
      p = put_varint(p + s->peak_prefix_len, (uint64_t)e->peak);
    }
    if (e->correlation != 0) {
      *p++ = 0x22; /* XEvent.stats = 4: correlation_id */
      p = put_varint(p, (uint64_t)correlation_stat);
      memcpy(p, s->correlation_prefix, (size_t)s->correlation_prefix_len);
      p = put_varint(p + s->correlation_prefix_len, e->correlation);
    }
  }
  if (_PyBytes_Resize(&out, p - PyBytes_AS_STRING(out)) < 0) return NULL;
  return out;
}

static void state_clear(State* s) {
  for (Py_ssize_t i = 0; i < s->nlines; i++) PyMem_Free(s->lines[i].events);
  PyMem_Free(s->lines);
  for (Py_ssize_t i = 0; i < s->nallocators; i++) {
    Py_DECREF(s->allocators[i].bfc);
    Py_DECREF(s->allocators[i].chunks);
  }
  PyMem_Free(s->allocators);
  Py_XDECREF(s->keep);
  Py_XDECREF(s->op_cache);
  Py_XDECREF(s->ids);
  Py_XDECREF(s->op_names);
  Py_XDECREF(s->last_executor_allocator);
}

static PyObject* encode_host_events(PyObject* module, PyObject* const* args,
                                    Py_ssize_t nargs) {
  (void)module;
  if (nargs != 7 && nargs != 8) {
    PyErr_Format(PyExc_TypeError, "encode_host_events(records, prefixes, op_stats, "
                 "allocation_stats, baseline, rare_event, event_id[, store]) takes 7 or 8 "
                 "arguments, got %zd", nargs);
    return NULL;
  }
  int store = nargs == 8 ? PyObject_IsTrue(args[7]) : 0;
  if (store < 0) return NULL;
  if (!PyList_Check(args[0])) {
    PyErr_Format(PyExc_TypeError, "encode_host_events: records must be a list, got %s",
                 Py_TYPE(args[0])->tp_name);
    return NULL;
  }
  PyObject* prefixes = args[1];
  if (!PyTuple_Check(prefixes) || PyTuple_GET_SIZE(prefixes) != 3 ||
      !PyBytes_Check(PyTuple_GET_ITEM(prefixes, 0)) ||
      !PyBytes_Check(PyTuple_GET_ITEM(prefixes, 1)) ||
      !PyBytes_Check(PyTuple_GET_ITEM(prefixes, 2))) {
    PyErr_Format(PyExc_TypeError, "encode_host_events: prefixes must be a tuple of 3 bytes "
                 "(bytes in use, peak bytes in use, correlation id), got %R", prefixes);
    return NULL;
  }
  for (int i = 2; i < 7; i++) {
    if (!PyCallable_Check(args[i])) {
      PyErr_Format(PyExc_TypeError, "encode_host_events: argument %d must be callable, got "
                   "%s", i + 1, Py_TYPE(args[i])->tp_name);
      return NULL;
    }
  }
  State s = {0};
  s.prefix = PyBytes_AS_STRING(PyTuple_GET_ITEM(prefixes, 0));
  s.prefix_len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(prefixes, 0));
  s.peak_prefix = PyBytes_AS_STRING(PyTuple_GET_ITEM(prefixes, 1));
  s.peak_prefix_len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(prefixes, 1));
  s.correlation_prefix = PyBytes_AS_STRING(PyTuple_GET_ITEM(prefixes, 2));
  s.correlation_prefix_len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(prefixes, 2));
  s.op_stats = args[2];
  s.allocation_stats = args[3];
  s.baseline = args[4];
  s.rare_event = args[5];
  s.event_id = args[6];
  s.last_line = s.last_allocator = -1;
  PyObject* result = NULL;
  /* A snapshot: the callbacks run Python code, and a thread still inside a hook may append
   * to the list; the snapshot keeps every record (and what events borrow) alive. */
  PyObject* records = PyList_GetSlice(args[0], 0, PyList_GET_SIZE(args[0]));
  s.keep = PyList_New(0);
  s.op_cache = PyDict_New();
  s.ids = PyDict_New();
  s.op_names = PyDict_New();
  if (records == NULL || s.keep == NULL || s.op_cache == NULL || s.ids == NULL ||
      s.op_names == NULL) {
    goto done;
  }
  for (s.index = 0; s.index < PyList_GET_SIZE(records); s.index++) {
    if (read_record(&s, PyList_GET_ITEM(records, s.index)) < 0) goto done;
  }
  /* Then the store, in place; the session is over, so nothing is added to it meanwhile. */
  if (store) {
    unsigned long long lost = pg_records_lost();
    if (lost && PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "the host tracer lost %llu "
                                 "records: no memory for more", lost) < 0) {
      goto done;
    }
    if (pg_records_visit(store_record, &s) < 0) goto done;
  }
  result = PyList_New(s.nlines);
  if (result == NULL) goto done;
  for (Py_ssize_t i = 0; i < s.nlines; i++) {
    Line* line = &s.lines[i];
    PyObject* events = encode_line(&s, line);
    PyObject* item = events ? Py_BuildValue("(kLLN)", line->key, (long long)line->first,
                                            (long long)line->last, events)
                            : NULL;
    if (item == NULL) {
      Py_CLEAR(result);
      goto done;
    }
    PyList_SET_ITEM(result, i, item);
  }
done:
  state_clear(&s);
  Py_XDECREF(records);
  return result;
}

static PyObject* clear_records(PyObject* module, PyObject* unused) {
  (void)module;
  (void)unused;
  pg_records_clear();
  Py_RETURN_NONE;
}

static PyObject* records_kept(PyObject* module, PyObject* unused) {
  (void)module;
  (void)unused;
  return PyLong_FromSsize_t(pg_records_count());
}

PyMethodDef pg_hostplane_methods[] = {
    {"encode_host_events", (PyCFunction)(void (*)(void))encode_host_events, METH_FASTCALL,
     "encode_host_events(records, prefixes, op_stats, allocation_stats, baseline, "
     "rare_event, event_id, store=False)\n--\n\n"
     "The host tracer's records as XLine events: a list of (ident, first_ns, last_ns, "
     "events) per thread, in order of first record; `events` is the line's XEvent fields "
     "in protobuf wire format, by start time. op_stats(info), allocation_stats(bfc, chunk) "
     "and rare_event(record) -> (name, stats) give encoded XEvent.stats fields, once per "
     "key; baseline(bfc) an allocator's bytes in use at the start; event_id(name) an event "
     "metadata id. prefixes: the XStat fields before the value of the per-event stats "
     "(bytes in use, peak bytes in use, correlation id). With store, the records kept in C "
     "since the session started follow `records`, read in place (no tuple is made)."},
    {"clear_records", (PyCFunction)(void (*)(void))clear_records, METH_NOARGS,
     "clear_records(): drops the host tracer's records kept in C."},
    {"records_kept", (PyCFunction)(void (*)(void))records_kept, METH_NOARGS,
     "records_kept(): how many host tracer records are kept in C."},
    {"bind_errors", (PyCFunction)fast_bind_errors, METH_O,
     "bind_errors(InternalError): the class a malformed host tracer record raises."},
    {NULL, NULL, 0, NULL}};

int pg_hostplane_init(PyObject* module) {
  (void)module;
  allocate_name = PyUnicode_InternFromString("MemoryAllocation");
  deallocate_name = PyUnicode_InternFromString("MemoryDeallocation");
  allocator_attribute = PyUnicode_InternFromString("_allocator");
  return allocate_name && deallocate_name && allocator_attribute ? 0 : -1;
}
