/* tensor.c: TF_Tensor, TF_DataTypeSize and TF_Buffer, as tf_tensor.h, tf_datatype.h and
 * tf_buffer.h declare them.
 *
 * A TF_Tensor is a dtype, a shape and a reference to a PG_Buffer (tensor_internal.h). A
 * buffer is refcounted: every tensor over it holds one reference (TF_TensorBitcastFrom and
 * a kernel's TF_SetOutput add more), and the bytes go back to where they came from when
 * the last reference is dropped: free() for the runtime's host memory, the BFC allocator
 * for device memory of kernels (TF_AllocateOutput, TF_AllocateTemp), the caller's
 * deallocator for TF_NewTensor, nothing for the inputs of a kernel run (the host owns
 * them).
 *
 * Device memory given back to the BFC allocator may be handed out again at once. That is
 * safe because the host follows TensorFlow's stream-ordered rule: all kernels of a device
 * enqueue their work on its compute stream, so memory freed while earlier work on that
 * stream may still read or write it is reused only by work enqueued later on the same
 * stream, which runs after it.
 *
 * Differences from TensorFlow, none visible to a correct caller:
 *   - TF_NewTensor never copies: TensorFlow copies host data that is not 64-byte aligned,
 *     which would be wrong for device memory; here the tensor wraps the data as it is
 *     (TF_TensorIsAligned tells).
 *   - TF_TensorMaybeMove returns the tensor itself when it can be moved, as TensorFlow's
 *     implementation does.
 *   - Calls TensorFlow answers with a CHECK failure (a bad dimension index, a shape with a
 *     different element count) return a harmless value or leave the tensor unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_internal.h"
#include "tensorflow/c/tf_tstring.h"
#include "tensor_internal.h"
#include "tensorflow/c/tf_buffer.h"
#include "tensorflow/c/tf_datatype.h"
#include "tensorflow/c/tf_tensor.h"

/* ---- TF_DataTypeSize ------------------------------------------------------------------ */

size_t TF_DataTypeSize(TF_DataType dt) {
  switch (dt) {
    case TF_BOOL: case TF_INT8: case TF_UINT8: case TF_QINT8: case TF_QUINT8:
      return 1;
    case TF_INT16: case TF_UINT16: case TF_QINT16: case TF_QUINT16: case TF_HALF:
    case TF_BFLOAT16:
      return 2;
    case TF_FLOAT: case TF_INT32: case TF_UINT32: case TF_QINT32:
      return 4;
    case TF_DOUBLE: case TF_INT64: case TF_UINT64: case TF_COMPLEX64:
      return 8;
    case TF_COMPLEX128:
      return 16;
    /* 8-bit floats, and the sub-byte types, which TensorFlow (like ml_dtypes) stores one
     * element per byte. */
    case TF_FLOAT8_E5M2: case TF_FLOAT8_E4M3FN: case TF_FLOAT8_E4M3FNUZ:
    case TF_FLOAT8_E4M3B11FNUZ: case TF_FLOAT8_E5M2FNUZ: case TF_INT4: case TF_UINT4:
    case TF_INT2: case TF_UINT2: case TF_FLOAT4_E2M1FN:
      return 1;
    case TF_STRING: case TF_RESOURCE: case TF_VARIANT:
    default:
      return 0;
  }
}

/* ---- buffers ---------------------------------------------------------------------------- */

void* pg_host_alloc(size_t len) {
  if (len == 0) return NULL;
  size_t rounded = (len + PG_HOST_ALIGNMENT - 1) & ~(size_t)(PG_HOST_ALIGNMENT - 1);
  if (rounded < len) return NULL; /* overflow */
  return aligned_alloc(PG_HOST_ALIGNMENT, rounded);
}

PG_Buffer* pg_buffer_new(PG_MemoryKind kind, void* data, size_t len) {
  PG_Buffer* buf = pg_pool_alloc(PG_POOL_BUFFER, sizeof *buf);
  if (buf == NULL) return NULL;
  memset(buf, 0, sizeof *buf);
  atomic_init(&buf->refs, 1);
  buf->kind = kind;
  buf->host_memory = kind == PG_MEM_HOST;
  buf->data = data;
  buf->len = len;
  buf->input_index = -1;
  return buf;
}

void pg_buffer_ref(PG_Buffer* buf) {
  atomic_fetch_add_explicit(&buf->refs, 1, memory_order_relaxed);
}

bool pg_buffer_unique(const PG_Buffer* buf) {
  return atomic_load_explicit(&((PG_Buffer*)buf)->refs, memory_order_acquire) == 1;
}

void pg_buffer_release_struct(PG_Buffer* buf) { pg_pool_free(PG_POOL_BUFFER, buf); }

void pg_buffer_unref(PG_Buffer* buf) {
  if (buf == NULL) return;
  if (atomic_fetch_sub_explicit(&buf->refs, 1, memory_order_acq_rel) != 1) return;
  switch (buf->kind) {
    case PG_MEM_HOST:
      /* A string tensor owns what its elements point to. */
      for (int64_t i = 0; i < buf->tstrings; i++) TF_StringDealloc((TF_TString*)buf->data + i);
      free(buf->data);
      break;
    case PG_MEM_BFC:
      /* Stream-ordered reuse makes an immediate return safe (see the top of this file). */
      if (buf->data != NULL) pluggable_BFCDeallocate(buf->bfc, buf->data);
      break;
    case PG_MEM_EXTERNAL:
      if (buf->deallocator != NULL) buf->deallocator(buf->data, buf->len, buf->deallocator_arg);
      break;
    case PG_MEM_BORROWED:
      break;
  }
  pg_pool_free(PG_POOL_BUFFER, buf);
}

/* ---- shapes and tensors ----------------------------------------------------------------- */

int64_t pg_shape_elements(const int64_t* dims, int num_dims, char* err, size_t n) {
  if (num_dims < 0 || num_dims > PG_MAX_DIMS) {
    snprintf(err, n, "a tensor has 0 to %d dimensions, not %d", PG_MAX_DIMS, num_dims);
    return -1;
  }
  if (num_dims > 0 && dims == NULL) {
    snprintf(err, n, "dims is NULL for a shape of %d dimensions", num_dims);
    return -1;
  }
  int64_t count = 1;
  for (int i = 0; i < num_dims; i++) {
    if (dims[i] < 0) {
      snprintf(err, n, "dimension %d is %lld; dimensions must be non-negative", i,
               (long long)dims[i]);
      return -1;
    }
    if (dims[i] != 0 && count > INT64_MAX / dims[i]) {
      snprintf(err, n, "the shape has more than 2^63 elements");
      return -1;
    }
    count *= dims[i];
  }
  return count;
}

bool pg_tensor_set_dims(TF_Tensor* t, const int64_t* dims, int num_dims) {
  int64_t* storage = t->inline_dims;
  if (num_dims > PG_INLINE_DIMS) {
    storage = malloc(sizeof(int64_t) * (size_t)num_dims);
    if (storage == NULL) return false;
  }
  if (num_dims > 0) memmove(storage, dims, sizeof(int64_t) * (size_t)num_dims);
  if (t->dims != NULL && t->dims != t->inline_dims && t->dims != storage) free(t->dims);
  t->dims = storage;
  t->num_dims = num_dims;
  return true;
}

void pg_tensor_clear(TF_Tensor* t) {
  if (t->dims != NULL && t->dims != t->inline_dims) free(t->dims);
  t->dims = t->inline_dims;
  t->num_dims = 0;
  pg_buffer_unref(t->buf);
  t->buf = NULL;
}

TF_Tensor* pg_tensor_new(TF_DataType dtype, const int64_t* dims, int num_dims, PG_Buffer* buf) {
  TF_Tensor* t = pg_pool_alloc(PG_POOL_TENSOR, sizeof *t);
  if (t == NULL) {
    pg_buffer_unref(buf);
    return NULL;
  }
  t->dtype = dtype;
  t->dims = t->inline_dims;
  t->num_dims = 0;
  t->buf = buf;
  if (!pg_tensor_set_dims(t, dims, num_dims)) {
    pg_buffer_unref(buf);
    pg_pool_free(PG_POOL_TENSOR, t);
    return NULL;
  }
  return t;
}

/* ---- tf_tensor.h ------------------------------------------------------------------------ */

size_t TF_TensorDefaultAlignment(void) { return PG_HOST_ALIGNMENT; }

/* TensorFlow's CreateTensor: NULL when `len` is too small for the shape. */
static TF_Tensor* create_tensor(TF_DataType dtype, const int64_t* dims, int num_dims,
                                PG_Buffer* buf) {
  char err[128];
  int64_t elements = pg_shape_elements(dims, num_dims, err, sizeof err);
  size_t size = TF_DataTypeSize(dtype);
  if (elements < 0 ||
      (size > 0 && (uint64_t)elements > (uint64_t)SIZE_MAX / size) ||
      (size > 0 && (size_t)elements * size > buf->len)) {
    pg_buffer_unref(buf);
    return NULL;
  }
  return pg_tensor_new(dtype, dims, num_dims, buf);
}

TF_Tensor* TF_NewTensor(TF_DataType dtype, const int64_t* dims, int num_dims, void* data,
                        size_t len, void (*deallocator)(void* data, size_t len, void* arg),
                        void* deallocator_arg) {
  PG_Buffer* buf = pg_buffer_new(PG_MEM_EXTERNAL, data, len);
  if (buf == NULL) {
    if (deallocator != NULL) deallocator(data, len, deallocator_arg);
    return NULL;
  }
  buf->deallocator = deallocator;
  buf->deallocator_arg = deallocator_arg;
  return create_tensor(dtype, dims, num_dims, buf);
}

TF_Tensor* TF_AllocateTensor(TF_DataType dtype, const int64_t* dims, int num_dims,
                             size_t len) {
  void* data = pg_host_alloc(len);
  if (len > 0 && data == NULL) return NULL;
  PG_Buffer* buf = pg_buffer_new(PG_MEM_HOST, data, len);
  if (buf == NULL) {
    free(data);
    return NULL;
  }
  return create_tensor(dtype, dims, num_dims, buf);
}

TF_Tensor* TF_TensorMaybeMove(TF_Tensor* tensor) {
  if (tensor == NULL) return NULL;
  /* Movable when nothing else shares the bytes and the tensor owns them (TensorFlow:
   * RefCountIsOne() && OwnsMemory()); TF_NewTensor's memory belongs to its caller. */
  PG_Buffer* buf = tensor->buf;
  bool owns = buf->kind == PG_MEM_HOST || buf->kind == PG_MEM_BFC;
  return owns && pg_buffer_unique(buf) ? tensor : NULL;
}

void TF_DeleteTensor(TF_Tensor* tensor) {
  if (tensor == NULL) return;
  pg_tensor_clear(tensor);
  pg_pool_free(PG_POOL_TENSOR, tensor);
}

TF_DataType TF_TensorType(const TF_Tensor* tensor) {
  return tensor == NULL ? (TF_DataType)0 : tensor->dtype;
}

void TF_SetShape(TF_Tensor* tensor, const int64_t* dims, int num_dims) {
  if (tensor == NULL) return;
  char err[128];
  int64_t old_count = pg_shape_elements(tensor->dims, tensor->num_dims, err, sizeof err);
  int64_t new_count = pg_shape_elements(dims, num_dims, err, sizeof err);
  /* TensorFlow only DCHECKs this; a different element count is ignored here rather than
   * leaving a shape that does not fit the bytes. */
  if (new_count < 0 || new_count != old_count) return;
  pg_tensor_set_dims(tensor, dims, num_dims);
}

int TF_NumDims(const TF_Tensor* tensor) { return tensor == NULL ? 0 : tensor->num_dims; }

int64_t TF_Dim(const TF_Tensor* tensor, int dim_index) {
  if (tensor == NULL || dim_index < 0 || dim_index >= tensor->num_dims) return -1;
  return tensor->dims[dim_index];
}

size_t TF_TensorByteSize(const TF_Tensor* tensor) {
  return tensor == NULL ? 0 : tensor->buf->len;
}

void* TF_TensorData(const TF_Tensor* tensor) {
  return tensor == NULL ? NULL : tensor->buf->data;
}

int64_t TF_TensorElementCount(const TF_Tensor* tensor) {
  if (tensor == NULL) return 0;
  int64_t count = 1;
  for (int i = 0; i < tensor->num_dims; i++) count *= tensor->dims[i];
  return count;
}

void TF_TensorBitcastFrom(const TF_Tensor* from, TF_DataType type, TF_Tensor* to,
                          const int64_t* new_dims, int num_new_dims, TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
  if (from == NULL || to == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "TF_TensorBitcastFrom: a tensor is NULL");
    return;
  }
  size_t in_size = TF_DataTypeSize(from->dtype), out_size = TF_DataTypeSize(type);
  if (in_size == 0) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "other tensor has zero-sized data type");
    return;
  }
  if (out_size == 0) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "specified output type is zero-sized");
    return;
  }
  char err[160];
  int64_t new_count = pg_shape_elements(new_dims, num_new_dims, err, sizeof err);
  if (new_count < 0) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, err);
    return;
  }
  int64_t old_count = TF_TensorElementCount(from);
  if ((uint64_t)new_count * out_size != (uint64_t)old_count * in_size) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "input and output shapes/data type sizes are not compatible");
    return;
  }
  /* Set the shape first: it is the step that can fail, and `to` must stay unchanged then.
   * `new_dims` may be `to`'s own dims: set_dims copies with memmove. */
  if (!pg_tensor_set_dims(to, new_dims, num_new_dims)) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "TF_TensorBitcastFrom: out of host memory");
    return;
  }
  to->dtype = type;
  if (to->buf != from->buf) {
    pg_buffer_ref(from->buf);
    pg_buffer_unref(to->buf);
    to->buf = from->buf;
  }
}

bool TF_TensorIsAligned(const TF_Tensor* tensor) {
  if (tensor == NULL) return false;
  return ((uintptr_t)tensor->buf->data % PG_HOST_ALIGNMENT) == 0;
}

/* ---- tf_buffer.h ------------------------------------------------------------------------ */

static void free_buffer_data(void* data, size_t length) {
  (void)length;
  free(data);
}

TF_Buffer* TF_NewBuffer(void) { return calloc(1, sizeof(TF_Buffer)); }

TF_Buffer* TF_NewBufferFromString(const void* proto, size_t proto_len) {
  TF_Buffer* buffer = TF_NewBuffer();
  if (buffer == NULL) return NULL;
  if (proto_len == 0) return buffer;
  void* copy = malloc(proto_len);
  if (copy == NULL) {
    free(buffer);
    return NULL;
  }
  if (proto != NULL) memcpy(copy, proto, proto_len);
  else memset(copy, 0, proto_len);
  buffer->data = copy;
  buffer->length = proto_len;
  buffer->data_deallocator = free_buffer_data;
  return buffer;
}

void TF_DeleteBuffer(TF_Buffer* buffer) {
  if (buffer == NULL) return;
  if (buffer->data_deallocator != NULL) {
    buffer->data_deallocator((void*)buffer->data, buffer->length);
  }
  free(buffer);
}

TF_Buffer TF_GetBuffer(TF_Buffer* buffer) {
  TF_Buffer copy = {NULL, 0, NULL};
  if (buffer != NULL) copy = *buffer;
  return copy;
}

/* ---- host-facing ------------------------------------------------------------------------ */

void pluggable_FreeHostMemory(void* data) { free(data); }
