/* A plugin's serialized XSpace, checked without building it: `check_xspace(data)` walks the
 * protobuf wire format with xplane.proto's schema (profiler/xplane.proto) and refuses what the
 * protobuf package's parser refuses: a truncated or overlong varint, a length past the end, a
 * wire type that does not exist, a group left open or closed twice, field number 0, a string
 * field that is not UTF-8 (proto3 strings), a packed repeated int64 that is not varints, and
 * any of these inside a nested message. A field whose wire type is not its declared one is
 * an unknown field, as for the parser. It returns the XPlane ids, which is all the session
 * needs before it appends the host plane; the profile's Python views parse the bytes only
 * when asked for. */
#include "compiled_internal.h" /* Python.h first */

#include <stdint.h>
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
  PyObject* plane_ids; /* list */
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
    PyObject* id = PyLong_FromLongLong(plane_id);
    int failed = id == NULL || PyList_Append(c->plane_ids, id) < 0;
    Py_XDECREF(id);
    if (failed) return -2;
  }
  return 0;
}

/* check_xspace(data): the XPlane ids of a serialized XSpace; ValueError saying what is wrong
 * and where when it is not one. */
static PyObject* check_xspace(PyObject* module, PyObject* arg) {
  (void)module;
  Py_buffer view;
  if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
  Check c = {view.buf, NULL, 0, NULL, PyList_New(0)};
  PyObject* result = NULL;
  if (c.plane_ids != NULL) {
    const uint8_t* p = view.buf;
    int rc = check_fields(&c, p, p + view.len, M_SPACE, 0, 0, NULL);
    if (rc == 0) {
      result = c.plane_ids;
      c.plane_ids = NULL;
    } else if (rc == -1) {
      PyErr_Format(PyExc_ValueError, "%s at byte %zu, in %s", c.problem, c.at, c.where);
    }
  }
  Py_XDECREF(c.plane_ids);
  PyBuffer_Release(&view);
  return result;
}

PyMethodDef pg_xspacecheck_methods[] = {
    {"check_xspace", (PyCFunction)check_xspace, METH_O,
     "check_xspace(data): the XPlane ids of a serialized XSpace, checked against "
     "xplane.proto's wire format without building it; ValueError saying what is wrong and "
     "where when it is not one."},
    {NULL, NULL, 0, NULL}};
