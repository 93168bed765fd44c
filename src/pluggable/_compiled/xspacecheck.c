/* A plugin's serialized XSpace, checked without building it: `check_xspace(data)` walks the
 * protobuf wire format with xplane.proto's schema (profiler/xplane.proto) and refuses what the
 * protobuf package's parser refuses: a truncated or overlong varint, a length past the end, a
 * wire type that does not exist, a group left open or closed twice, field number 0, a string
 * field that is not UTF-8 (proto3 strings), a packed repeated int64 that is not varints, and
 * any of these inside a nested message. A field whose wire type is not its declared one is
 * an unknown field, as for the parser. It returns the XPlane ids, which is all the session
 * needs before it appends the host plane; the profile's Python views parse the bytes only
 * when asked for. A plugin's bytes are collected and checked on a helper thread
 * (`begin_collect`, at the end). */
#include "compiled_internal.h" /* Python.h first */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The messages of xplane.proto, and what a field of each is. */
typedef enum { M_SPACE, M_PLANE, M_LINE, M_EVENT, M_STAT, M_EVENT_META, M_STAT_META,
               M_EVENT_META_ENTRY, M_STAT_META_ENTRY, M_NONE } Msg;
typedef enum { F_OTHER, F_MESSAGE, F_STRING, F_PACKED_INT } FieldKind;

static const char* const msg_names[] = {"XSpace", "XPlane", "XLine", "XEvent", "XStat",
                                        "XEventMetadata", "XStatMetadata",
                                        "XPlane.event_metadata entry",
                                        "XPlane.stat_metadata entry"};

/* What field `number` of `msg` is; `sub` the message type of a message field. */
static FieldKind field_kind(Msg msg, uint64_t number, Msg* sub) {
  *sub = M_NONE;
  switch (msg) {
    case M_SPACE:
      if (number == 1) return *sub = M_PLANE, F_MESSAGE;
      return number >= 2 && number <= 4 ? F_STRING : F_OTHER;
    case M_PLANE:
      if (number == 2) return F_STRING;
      if (number == 3) return *sub = M_LINE, F_MESSAGE;
      if (number == 4) return *sub = M_EVENT_META_ENTRY, F_MESSAGE;
      if (number == 5) return *sub = M_STAT_META_ENTRY, F_MESSAGE;
      if (number == 6) return *sub = M_STAT, F_MESSAGE;
      return F_OTHER;
    case M_LINE:
      if (number == 2 || number == 11) return F_STRING;
      if (number == 4) return *sub = M_EVENT, F_MESSAGE;
      return F_OTHER;
    case M_EVENT:
      if (number == 4) return *sub = M_STAT, F_MESSAGE;
      return F_OTHER;
    case M_STAT:
      return number == 5 ? F_STRING : F_OTHER;
    case M_EVENT_META:
      if (number == 2 || number == 4) return F_STRING;
      if (number == 5) return *sub = M_STAT, F_MESSAGE;
      if (number == 6) return F_PACKED_INT;
      return F_OTHER;
    case M_STAT_META:
      return number == 2 || number == 3 ? F_STRING : F_OTHER;
    case M_EVENT_META_ENTRY:
      if (number == 2) return *sub = M_EVENT_META, F_MESSAGE;
      return F_OTHER;
    case M_STAT_META_ENTRY:
      if (number == 2) return *sub = M_STAT_META, F_MESSAGE;
      return F_OTHER;
    default:
      return F_OTHER;
  }
}

typedef struct {
  const uint8_t* base;
  const char* problem; /* the first one found */
  size_t at;           /* its offset in the data */
  const char* where;   /* the message it was found in */
  int64_t* plane_ids;  /* grown as planes are found (the walk runs without the GIL) */
  size_t nplanes, capacity;
} Check;

static int fail(Check* c, const uint8_t* p, Msg msg, const char* problem) {
  c->problem = problem;
  c->at = (size_t)(p - c->base);
  c->where = msg < M_NONE ? msg_names[msg] : "a group";
  return -1;
}

static inline const uint8_t* read_varint(const uint8_t* p, const uint8_t* end, uint64_t* out) {
  if (p < end && *p < 0x80) { /* most tags, ids and lengths */
    *out = *p;
    return p + 1;
  }
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (p == end) return NULL;
    uint8_t b = *p++;
    v |= (uint64_t)(b & 0x7F) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return p;
    }
  }
  return NULL;
}

/* UTF-8 as the protobuf runtime takes it: no overlong forms, no surrogates, at most U+10FFFF. */
static int utf8_valid(const uint8_t* p, const uint8_t* end) {
  for (uint64_t word; end - p >= 8; p += 8) { /* ASCII, 8 bytes at a time */
    memcpy(&word, p, 8);
    if (word & UINT64_C(0x8080808080808080)) break;
  }
  while (p < end) {
    uint8_t b = *p;
    if (b < 0x80) {
      p++;
      continue;
    }
    size_t n;
    uint32_t cp;
    if (b >= 0xC2 && b <= 0xDF) n = 1, cp = b & 0x1F;
    else if (b >= 0xE0 && b <= 0xEF) n = 2, cp = b & 0x0F;
    else if (b >= 0xF0 && b <= 0xF4) n = 3, cp = b & 0x07;
    else return 0;
    if ((size_t)(end - p) < n + 1) return 0;
    for (size_t i = 1; i <= n; i++) {
      if ((p[i] & 0xC0) != 0x80) return 0;
      cp = cp << 6 | (p[i] & 0x3F);
    }
    if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (n == 3 && (cp < 0x10000 || cp > 0x10FFFF))) {
      return 0;
    }
    p += n + 1;
  }
  return 1;
}

static int check_fields(Check* c, const uint8_t* p, const uint8_t* end, Msg msg, int depth,
                        uint64_t group, const uint8_t** after);

/* The common shapes of the two messages a profile has most of, XEvent and its XStats, walked
 * without the general walk's per-field dispatch: 1 when [p, end) is made only of the fields
 * below (one-byte tags, varint values, an XStat's double, an XEvent's stats), all well formed;
 * 0 for anything else, which the general walk then checks from the start, so that what is
 * refused and how it is reported do not depend on this. */
static int plain_message(const uint8_t* p, const uint8_t* end, Msg msg) {
  while (p < end) {
    uint8_t tag = *p++;
    uint64_t value;
    if (msg == M_STAT && tag == 0x11) { /* double_value */
      if (end - p < 8) return 0;
      p += 8;
      continue;
    }
    if (msg == M_EVENT && tag == 0x22) { /* stats */
      if ((p = read_varint(p, end, &value)) == NULL || value > (uint64_t)(end - p) ||
          !plain_message(p, p + value, M_STAT)) {
        return 0;
      }
      p += value;
      continue;
    }
    /* varints: XEvent metadata_id, offset_ps, duration_ps, num_occurrences; XStat
     * metadata_id, uint64_value, int64_value, ref_value */
    int varint = msg == M_EVENT ? (tag == 0x08 || tag == 0x10 || tag == 0x18 || tag == 0x28)
                                : (tag == 0x08 || tag == 0x18 || tag == 0x20 || tag == 0x38);
    if (!varint || (p = read_varint(p, end, &value)) == NULL) return 0;
  }
  return 1;
}

/* Checks the fields in [p, end) of a `msg`; with `group` set, they end at the end-group tag
 * of that field number, and *after is where the walk stopped. */
static int check_fields(Check* c, const uint8_t* p, const uint8_t* end, Msg msg, int depth,
                        uint64_t group, const uint8_t** after) {
  if (depth > 64) return fail(c, p, msg, "nested more than 64 deep");
  int64_t plane_id = 0;
  while (p < end) {
    uint64_t tag;
    const uint8_t* start = p;
    if ((p = read_varint(p, end, &tag)) == NULL) return fail(c, start, msg, "a truncated tag");
    uint64_t number = tag >> 3;
    unsigned wire = (unsigned)(tag & 7);
    if (number == 0 || number > 0x1FFFFFFF) return fail(c, start, msg, "a field number of 0 or past 2**29");
    Msg sub;
    FieldKind kind = field_kind(msg, number, &sub);
    uint64_t value;
    switch (wire) {
      case 0:
        if ((p = read_varint(p, end, &value)) == NULL) {
          return fail(c, start, msg, "a truncated varint");
        }
        if (msg == M_PLANE && number == 1) plane_id = (int64_t)value;
        break;
      case 1:
      case 5: {
        size_t width = wire == 1 ? 8 : 4;
        if ((size_t)(end - p) < width) return fail(c, start, msg, "a truncated fixed-width value");
        p += width;
        break;
      }
      case 2: {
        if ((p = read_varint(p, end, &value)) == NULL) {
          return fail(c, start, msg, "a truncated length");
        }
        if (value > (uint64_t)(end - p)) return fail(c, start, msg, "a length past the end");
        const uint8_t* body_end = p + value;
        if (kind == F_MESSAGE) {
          if ((sub == M_EVENT || sub == M_STAT) && plain_message(p, body_end, sub)) {
            p = body_end;
            break;
          }
          if (check_fields(c, p, body_end, sub, depth + 1, 0, NULL) < 0) return -1;
        } else if (kind == F_STRING) {
          if (!utf8_valid(p, body_end)) return fail(c, start, msg, "a string field that is not UTF-8");
        } else if (kind == F_PACKED_INT) {
          for (const uint8_t* q = p; q < body_end;) {
            if ((q = read_varint(q, body_end, &value)) == NULL) {
              return fail(c, start, msg, "a packed repeated int64 that is not varints");
            }
          }
        }
        p = body_end;
        break;
      }
      case 3: { /* a group: an unknown field here; its fields end at its end tag */
        const uint8_t* rest;
        if (check_fields(c, p, end, M_NONE, depth + 1, number, &rest) < 0) return -1;
        p = rest;
        break;
      }
      case 4:
        if (group == 0 || number != group) return fail(c, start, msg, "an end-group tag without its group");
        if (after != NULL) *after = p;
        return 0;
      default:
        return fail(c, start, msg, "wire type 6 or 7, which does not exist");
    }
  }
  if (group != 0) return fail(c, p, msg, "a group that is never closed");
  if (msg == M_PLANE) {
    if (c->nplanes == c->capacity) {
      size_t capacity = c->capacity ? 2 * c->capacity : 8;
      int64_t* grown = PyMem_RawRealloc(c->plane_ids, capacity * sizeof *grown);
      if (grown == NULL) return -2;
      c->plane_ids = grown;
      c->capacity = capacity;
    }
    c->plane_ids[c->nplanes++] = plane_id;
  }
  return 0;
}

/* check_xspace(data): the XPlane ids of a serialized XSpace; ValueError saying what is wrong
 * and where when it is not one. The walk releases the GIL: a profiler's thread checks the
 * plugin's bytes while the session's thread encodes the host plane. */
static PyObject* check_xspace(PyObject* module, PyObject* arg) {
  (void)module;
  Py_buffer view;
  if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
  if (!PyBytes_Check(arg)) { /* a mutable buffer could change while the walk runs */
    PyBuffer_Release(&view);
    PyErr_Format(PyExc_TypeError, "check_xspace() takes bytes, got %s", Py_TYPE(arg)->tp_name);
    return NULL;
  }
  Check c = {view.buf, NULL, 0, NULL, NULL, 0, 0};
  const uint8_t* p = view.buf;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = check_fields(&c, p, p + view.len, M_SPACE, 0, 0, NULL);
  Py_END_ALLOW_THREADS
  PyObject* result = NULL;
  if (rc == 0) {
    result = PyList_New((Py_ssize_t)c.nplanes);
    for (size_t i = 0; result != NULL && i < c.nplanes; i++) {
      PyObject* id = PyLong_FromLongLong(c.plane_ids[i]);
      if (id == NULL) Py_CLEAR(result);
      else PyList_SET_ITEM(result, (Py_ssize_t)i, id);
    }
  } else if (rc == -1) {
    PyErr_Format(PyExc_ValueError, "%s at byte %zu, in %s", c.problem, c.at, c.where);
  } else {
    PyErr_NoMemory();
  }
  PyMem_RawFree(c.plane_ids);
  PyBuffer_Release(&view);
  return result;
}

/* ---- a plugin profiler's collect_data_xspace, on a helper thread ------------------------
 * `begin_collect` runs both calls of the two-call protocol (the size, then the data into a
 * buffer of that size followed by a guard region) and checks the bytes, on a helper thread of
 * blocking.c and without the GIL, while the caller goes on (a session encodes the host plane
 * meanwhile); the object it returns waits for that (`wait`) and gives what happened
 * (`result`). */

typedef void (*CollectFn)(const void* profiler, uint8_t* buffer, size_t* size_in_bytes,
                          TF_Status* status);

typedef struct {
  CollectFn fn;
  const void* profiler;
  TF_Status *query, *status; /* the caller's; it gives them up if it gives up on the job */
  size_t guard;              /* bytes after the announced size */
  int pattern;               /* what the guard is filled with */
  /* what happened */
  size_t announced;  /* the size query's answer (0: it failed, or nothing to give) */
  size_t size_after; /* what it set *size_in_bytes to */
  size_t written;    /* past the announced size: the end of the last guard byte changed, 0: none */
  int no_memory;     /* no buffer of the announced size */
  int checked;       /* the bytes were walked: check_rc and check say how it went */
  int check_rc;
  Check check;
  uint8_t* buffer;
} Collect;

static void collect_free(void* arg) {
  Collect* c = arg;
  free(c->buffer);
  PyMem_RawFree(c->check.plane_ids);
  free(c);
}

static void collect_run(void* arg) {
  Collect* c = arg;
  size_t size = 0;
  c->fn(c->profiler, NULL, &size, c->query);
  if (pg_runtime.code(c->query) != 0 || size == 0) return;
  c->announced = size;
  c->buffer = malloc(size + c->guard);
  if (c->buffer == NULL) {
    c->no_memory = 1;
    return;
  }
  memset(c->buffer + size, c->pattern, c->guard);
  c->fn(c->profiler, c->buffer, &size, c->status);
  c->size_after = size;
  if (pg_runtime.code(c->status) != 0) return;
  for (size_t i = c->guard; i > 0; i--) {
    if (c->buffer[c->announced + i - 1] != (uint8_t)c->pattern) {
      c->written = c->announced + i;
      break;
    }
  }
  if (c->written != 0 || size > c->announced) return;
  c->check.base = c->buffer;
  c->check_rc = check_fields(&c->check, c->buffer, c->buffer + c->announced, M_SPACE, 0, 0, NULL);
  c->checked = 1;
}

typedef struct {
  PyObject_HEAD
  PgJob* job;
  Collect* work; /* the job's: alive while the job is held */
  uint64_t started;
} CollectObject;

static void collect_dealloc(CollectObject* self) {
  if (self->job != NULL) pg_job_release(self->job);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

/* wait(timeout) -> bool: whether the calls returned within `timeout` seconds of the start. */
static PyObject* collect_wait(CollectObject* self, PyObject* arg) {
  double timeout = PyFloat_AsDouble(arg);
  if (timeout == -1.0 && PyErr_Occurred()) return NULL;
  if (!(timeout >= 0)) {
    PyErr_Format(PyExc_ValueError, "wait: timeout must be 0 or more seconds, not %R", arg);
    return NULL;
  }
  int outcome = pg_job_wait(self->job, self->started, timeout);
  if (outcome < 0) return NULL;
  return PyBool_FromLong(outcome);
}

/* result() -> (announced, size_after, written, data, plane_ids, problem) */
static PyObject* collect_result(CollectObject* self, PyObject* unused) {
  (void)unused;
  if (!pg_job_done(self->job)) {
    PyErr_SetString(PyExc_RuntimeError, "result: the collect calls have not returned; wait first");
    return NULL;
  }
  Collect* c = self->work;
  if (c->no_memory) {
    return PyErr_Format(PyExc_MemoryError, "no host memory for the %zu bytes of the profile "
                        "the plugin announced", c->announced);
  }
  PyObject *data = Py_None, *ids = Py_None, *problem = Py_None;
  Py_INCREF(Py_None);
  Py_INCREF(Py_None);
  Py_INCREF(Py_None);
  if (c->checked && c->check_rc == 0) {
    Py_SETREF(data, PyBytes_FromStringAndSize((const char*)c->buffer, (Py_ssize_t)c->announced));
    Py_SETREF(ids, PyList_New((Py_ssize_t)c->check.nplanes));
    for (size_t i = 0; ids != NULL && i < c->check.nplanes; i++) {
      PyObject* id = PyLong_FromLongLong(c->check.plane_ids[i]);
      if (id == NULL) Py_CLEAR(ids);
      else PyList_SET_ITEM(ids, (Py_ssize_t)i, id);
    }
  } else if (c->checked) {
    Py_SETREF(problem, c->check_rc == -1
                           ? PyUnicode_FromFormat("%s at byte %zu, in %s", c->check.problem,
                                                  c->check.at, c->check.where)
                           : PyUnicode_FromString("no host memory to check it"));
  }
  PyObject* result = NULL;
  if (data != NULL && ids != NULL && problem != NULL) {
    result = Py_BuildValue("(nnnOOO)", (Py_ssize_t)c->announced, (Py_ssize_t)c->size_after,
                           (Py_ssize_t)c->written, data, ids, problem);
  }
  Py_XDECREF(data);
  Py_XDECREF(ids);
  Py_XDECREF(problem);
  return result;
}

static PyMethodDef collect_methods[] = {
    {"wait", (PyCFunction)collect_wait, METH_O,
     "wait(timeout) -> bool: waits, without the GIL, until the collect calls returned or "
     "`timeout` seconds after they started; whether they returned."},
    {"result", (PyCFunction)collect_result, METH_NOARGS,
     "result() -> (announced, size_after, written, data, plane_ids, problem): the size "
     "query's answer (0 when it failed or had nothing: then no data call was made), the size "
     "the data call set, where the plugin's writing past the announced size ended (0: it "
     "did not), and, when both calls succeeded and wrote within the size, the bytes with "
     "their XPlane ids, or what is wrong with them (`problem`, and data None)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject CollectType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pluggable._compiled.XSpaceCollect",
    .tp_basicsize = sizeof(CollectObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A plugin profiler's collect_data_xspace running on a helper thread "
              "(begin_collect).",
    .tp_dealloc = (destructor)collect_dealloc,
    .tp_methods = collect_methods,
};

/* begin_collect(fn, profiler, query_status, status, guard_bytes, pattern) -> XSpaceCollect */
static PyObject* begin_collect(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  (void)module;
  if (nargs != 6) {
    PyErr_Format(PyExc_TypeError, "begin_collect(fn, profiler, query_status, status, "
                 "guard_bytes, pattern) takes 6 arguments (%zd given)", nargs);
    return NULL;
  }
  if (pg_runtime.code == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "pluggable._compiled is not bound to the runtime library");
    return NULL;
  }
  void *fn, *profiler, *query, *status;
  const char* who = "begin_collect";
  if (pg_address_argument(args[0], who, "fn", &fn, 0) < 0 ||
      pg_address_argument(args[1], who, "profiler", &profiler, 0) < 0 ||
      pg_address_argument(args[2], who, "query_status", &query, 0) < 0 ||
      pg_address_argument(args[3], who, "status", &status, 0) < 0) {
    return NULL;
  }
  Py_ssize_t guard = PyLong_AsSsize_t(args[4]);
  long pattern = PyLong_AsLong(args[5]);
  if (PyErr_Occurred()) return NULL;
  if (guard < 0 || guard > (1 << 20) || pattern < 0 || pattern > 255) {
    PyErr_Format(PyExc_ValueError, "begin_collect: guard_bytes must be 0 to 2**20 and pattern "
                 "a byte, not %R and %R", args[4], args[5]);
    return NULL;
  }
  Collect* c = calloc(1, sizeof *c);
  if (c == NULL) return PyErr_NoMemory();
  *(void**)&c->fn = fn;
  c->profiler = profiler;
  c->query = query;
  c->status = status;
  c->guard = (size_t)guard;
  c->pattern = (int)pattern;
  CollectObject* self = PyObject_New(CollectObject, &CollectType);
  PgJob* job = self != NULL ? pg_job_new(collect_run, c, collect_free) : NULL;
  if (job == NULL) {
    free(c);
    Py_XDECREF(self);
    return PyErr_NoMemory();
  }
  self->job = NULL;
  self->work = c;
  int err = pg_job_start(job, &self->started);
  if (err != 0) {
    pg_job_discard(job);
    Py_DECREF(self);
    return PyErr_Format(PyExc_RuntimeError, "begin_collect: cannot start a helper thread: %s",
                        strerror(err));
  }
  self->job = job;
  return (PyObject*)self;
}

int pg_xspacecheck_init(PyObject* module) {
  (void)module;
  return PyType_Ready(&CollectType);
}

PyMethodDef pg_xspacecheck_methods[] = {
    {"begin_collect", (PyCFunction)(void (*)(void))begin_collect, METH_FASTCALL,
     "begin_collect(fn, profiler, query_status, status, guard_bytes, pattern) -> "
     "XSpaceCollect: starts a plugin profiler's collect_data_xspace `fn` (both calls of the "
     "two-call protocol, the buffer followed by `guard_bytes` of `pattern`) and the check of "
     "its bytes on a helper thread, without the GIL; the object waits for them and gives "
     "what happened. The statuses must stay alive until the calls returned."},
    {"check_xspace", (PyCFunction)check_xspace, METH_O,
     "check_xspace(data): the XPlane ids of a serialized XSpace, checked against "
     "xplane.proto's wire format without building it; ValueError saying what is wrong and "
     "where when it is not one."},
    {NULL, NULL, 0, NULL}};
