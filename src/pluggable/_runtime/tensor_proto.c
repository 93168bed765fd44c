/* TF_TensorFromProto (TensorFlow's c_api.h): a serialized TensorProto
 * (tensorflow/core/framework/tensor.proto) into a TF_Tensor, replacing what the tensor held.
 *
 * Read as TensorFlow reads it: the bytes of `tensor_content` when present (exactly the
 * tensor's size), else the typed repeated field of the dtype (float_val, double_val,
 * int_val, int64_val, bool_val, half_val, uint32_val, uint64_val, scomplex_val,
 * dcomplex_val), packed or not; fewer values than elements repeat the last one, none means
 * zeros. String, resource and variant tensors are TF_UNIMPLEMENTED: pluggable's tensors
 * cannot hold them. A malformed message is TF_INVALID_ARGUMENT and leaves the tensor as it
 * was. The bytes are the runtime's host memory. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_internal.h"
#include "tensor_internal.h"
#include "tensorflow/c/tf_buffer.h"

/* TensorProto's and TensorShapeProto's field numbers. */
enum {
  F_DTYPE = 1, F_SHAPE = 2, F_CONTENT = 4, F_FLOAT = 5, F_DOUBLE = 6, F_INT = 7,
  F_STRING = 8, F_SCOMPLEX = 9, F_INT64 = 10, F_BOOL = 11, F_DCOMPLEX = 12, F_HALF = 13,
  F_RESOURCE = 14, F_VARIANT = 15, F_UINT32 = 16, F_UINT64 = 17,
  SHAPE_DIM = 2, SHAPE_UNKNOWN_RANK = 3, DIM_SIZE = 1
};

typedef struct {
  const uint8_t* at;
  const uint8_t* end;
} Reader;

static bool read_varint(Reader* r, uint64_t* value) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && r->at < r->end; shift += 7) {
    uint8_t byte = *r->at++;
    v |= (uint64_t)(byte & 0x7F) << shift;
    if (!(byte & 0x80)) {
      *value = v;
      return true;
    }
  }
  return false;
}

/* The next field: its number, wire type and, for length-delimited ones, its bytes. */
static bool read_field(Reader* r, uint32_t* number, int* wire, Reader* inner, uint64_t* value) {
  uint64_t key;
  if (!read_varint(r, &key)) return false;
  *number = (uint32_t)(key >> 3);
  *wire = (int)(key & 7);
  switch (*wire) {
    case 0: return read_varint(r, value);
    case 1: case 5: {
      size_t n = *wire == 1 ? 8 : 4;
      if ((size_t)(r->end - r->at) < n) return false;
      *value = 0;
      memcpy(value, r->at, n); /* little-endian hosts only, as the runtime is */
      r->at += n;
      return true;
    }
    case 2: {
      uint64_t len;
      if (!read_varint(r, &len) || len > (uint64_t)(r->end - r->at)) return false;
      inner->at = r->at;
      inner->end = r->at + len;
      r->at += len;
      return true;
    }
    default: return false;
  }
}

/* The values of one repeated scalar field, gathered from every occurrence (packed or not). */
typedef struct {
  uint32_t field;
  int wire; /* 0 varint, 1 fixed64, 5 fixed32 */
  uint64_t* values;
  int64_t count, capacity;
} Values;

static bool append(Values* v, uint64_t value) {
  if (v->count == v->capacity) {
    int64_t grown = v->capacity ? 2 * v->capacity : 16;
    uint64_t* more = realloc(v->values, sizeof *more * (size_t)grown);
    if (more == NULL) return false;
    v->values = more;
    v->capacity = grown;
  }
  v->values[v->count++] = value;
  return true;
}

/* The repeated field and wire type that hold values of `dtype`; 0 for none. */
static uint32_t value_field(TF_DataType dtype, int* wire) {
  *wire = 0;
  switch (dtype) {
    case TF_FLOAT: *wire = 5; return F_FLOAT;
    case TF_DOUBLE: *wire = 1; return F_DOUBLE;
    case TF_COMPLEX64: *wire = 5; return F_SCOMPLEX;
    case TF_COMPLEX128: *wire = 1; return F_DCOMPLEX;
    case TF_INT32: case TF_INT16: case TF_INT8: case TF_UINT8: case TF_UINT16: case TF_QINT8:
    case TF_QUINT8: case TF_QINT16: case TF_QUINT16: case TF_QINT32: return F_INT;
    case TF_INT64: return F_INT64;
    case TF_BOOL: return F_BOOL;
    case TF_HALF: case TF_BFLOAT16: return F_HALF;
    case TF_UINT32: return F_UINT32;
    case TF_UINT64: return F_UINT64;
    default: return 0;
  }
}

static bool gather(Values* v, int wire, Reader* inner, uint64_t value) {
  if (wire != 2) return wire == v->wire && append(v, value);
  while (inner->at < inner->end) { /* packed */
    uint64_t x = 0;
    if (v->wire == 0) {
      if (!read_varint(inner, &x)) return false;
    } else {
      size_t n = v->wire == 1 ? 8 : 4;
      if ((size_t)(inner->end - inner->at) < n) return false;
      memcpy(&x, inner->at, n);
      inner->at += n;
    }
    if (!append(v, x)) return false;
  }
  return true;
}

static TF_Code fail(TF_Status* status, TF_Code code, const char* what) {
  char message[256];
  snprintf(message, sizeof message, "TF_TensorFromProto: %s", what);
  TF_SetStatus(status, code, message);
  return code;
}

static TF_Code parse(const TF_Buffer* from, TF_Tensor* to, TF_Status* status, Values* v) {
  Reader r = {(const uint8_t*)from->data, (const uint8_t*)from->data + from->length};
  uint64_t dtype = 0;
  int64_t dims[PG_MAX_DIMS];
  int num_dims = 0;
  Reader content = {NULL, NULL};
  bool has_content = false, unknown_rank = false, other_values = false;
  Reader message_fields = r;
  /* The dtype first: it decides which field holds the values. */
  while (r.at < r.end) {
    uint32_t number;
    int wire;
    Reader inner;
    uint64_t value;
    if (!read_field(&r, &number, &wire, &inner, &value)) {
      return fail(status, TF_INVALID_ARGUMENT, "the buffer is not a serialized TensorProto");
    }
    if (number == F_DTYPE && wire == 0) dtype = value;
  }
  int value_wire;
  v->field = value_field((TF_DataType)dtype, &value_wire);
  v->wire = value_wire;
  size_t size = TF_DataTypeSize((TF_DataType)dtype);
  if (dtype == 0 || (size == 0 && dtype != TF_STRING && dtype != TF_RESOURCE &&
                     dtype != TF_VARIANT)) {
    return fail(status, TF_INVALID_ARGUMENT, "the TensorProto has no valid dtype");
  }
  if (size == 0 || v->field == 0) {
    return fail(status, TF_UNIMPLEMENTED, "string, resource and variant tensors are not "
                "implemented by pluggable (its tensors cannot hold them)");
  }
  r = message_fields;
  while (r.at < r.end) {
    uint32_t number;
    int wire;
    Reader inner;
    uint64_t value;
    read_field(&r, &number, &wire, &inner, &value); /* checked above */
    if (number == F_SHAPE && wire == 2) {
      while (inner.at < inner.end) {
        uint32_t n2;
        int w2;
        Reader dim;
        uint64_t v2;
        if (!read_field(&inner, &n2, &w2, &dim, &v2)) {
          return fail(status, TF_INVALID_ARGUMENT, "its tensor_shape is malformed");
        }
        if (n2 == SHAPE_UNKNOWN_RANK && w2 == 0 && v2) unknown_rank = true;
        if (n2 != SHAPE_DIM || w2 != 2) continue;
        if (num_dims == PG_MAX_DIMS) {
          return fail(status, TF_INVALID_ARGUMENT, "its shape has too many dimensions");
        }
        int64_t d = 0;
        while (dim.at < dim.end) {
          uint32_t n3;
          int w3;
          Reader skip;
          uint64_t v3;
          if (!read_field(&dim, &n3, &w3, &skip, &v3)) {
            return fail(status, TF_INVALID_ARGUMENT, "a dimension of its shape is malformed");
          }
          if (n3 == DIM_SIZE && w3 == 0) d = (int64_t)v3;
        }
        dims[num_dims++] = d;
      }
    } else if (number == F_CONTENT && wire == 2) {
      content = inner;
      has_content = inner.end > inner.at;
    } else if (number == v->field) {
      if (!gather(v, wire, &inner, value)) {
        return fail(status, TF_INVALID_ARGUMENT, "its values are malformed");
      }
    } else if (number >= F_FLOAT && number <= F_UINT64 && number != F_DTYPE &&
               number != F_SHAPE && number != F_CONTENT) {
      other_values = true;
    }
  }
  if (unknown_rank) {
    return fail(status, TF_INVALID_ARGUMENT, "its shape has an unknown rank");
  }
  char err[160];
  int64_t elements = pg_shape_elements(dims, num_dims, err, sizeof err);
  if (elements < 0) return fail(status, TF_INVALID_ARGUMENT, err);
  if (other_values && v->count == 0 && !has_content) {
    return fail(status, TF_INVALID_ARGUMENT, "its values are in a field of another dtype");
  }
  int64_t per_element = (dtype == TF_COMPLEX64 || dtype == TF_COMPLEX128) ? 2 : 1;
  if ((uint64_t)elements > (UINT64_MAX >> 1) / size) {
    return fail(status, TF_INVALID_ARGUMENT, "the tensor is larger than 2^63 bytes");
  }
  size_t bytes = (size_t)elements * size;
  if (has_content && (size_t)(content.end - content.at) != bytes) {
    return fail(status, TF_INVALID_ARGUMENT, "its tensor_content does not hold the shape's "
                "number of elements of its dtype");
  }
  if (!has_content && v->count > elements * per_element) {
    return fail(status, TF_INVALID_ARGUMENT, "it holds more values than its shape has "
                "elements");
  }
  if (!has_content && v->count % per_element != 0) {
    return fail(status, TF_INVALID_ARGUMENT, "a complex value lacks its imaginary part");
  }
  uint8_t* data = bytes ? pg_host_alloc(bytes) : NULL;
  if (bytes && data == NULL) return fail(status, TF_RESOURCE_EXHAUSTED, "out of host memory");
  if (has_content) {
    memcpy(data, content.at, bytes);
  } else {
    size_t part = size / (size_t)per_element; /* the bytes of one stored value */
    for (int64_t i = 0; i < elements * per_element; i++) {
      uint64_t x = v->count == 0 ? 0
                   : v->values[i < v->count ? i : v->count - per_element + i % per_element];
      memcpy(data + (size_t)i * part, &x, part); /* the low bytes: little-endian */
    }
  }
  PG_Buffer* buf = pg_buffer_new(PG_MEM_HOST, data, bytes);
  if (buf == NULL) {
    free(data);
    return fail(status, TF_RESOURCE_EXHAUSTED, "out of host memory");
  }
  PG_Buffer* old = to->buf;
  to->buf = NULL;
  if (!pg_tensor_set_dims(to, dims, num_dims)) {
    to->buf = old;
    pg_buffer_unref(buf);
    return fail(status, TF_RESOURCE_EXHAUSTED, "out of host memory");
  }
  to->dtype = (TF_DataType)dtype;
  to->buf = buf;
  pg_buffer_unref(old);
  TF_SetStatus(status, TF_OK, "");
  return TF_OK;
}

void TF_TensorFromProto(const TF_Buffer* from, TF_Tensor* to, TF_Status* status) {
  if (from == NULL || to == NULL || (from->data == NULL && from->length > 0)) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "TF_TensorFromProto: from or to is NULL");
    return;
  }
  Values values = {0, 0, NULL, 0, 0};
  parse(from, to, status, &values);
  free(values.values);
}
