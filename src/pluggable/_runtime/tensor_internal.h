/* What tensor.c and kernels.c share: the layout of TF_Tensor and of the refcounted buffer
 * under it. Private to the runtime library: neither plugins nor the Python host see it. */
#ifndef PLUGGABLE_RUNTIME_TENSOR_INTERNAL_H_
#define PLUGGABLE_RUNTIME_TENSOR_INTERNAL_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime_internal.h"
#include "tensorflow/c/tf_datatype.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"

/* TensorShape's limit in TensorFlow (kMaxDims). */
#define PG_MAX_DIMS 254
/* Host memory the runtime allocates is aligned like TensorFlow's CPU allocator. */
#define PG_HOST_ALIGNMENT 64
/* Shapes up to this rank live inside the TF_Tensor: no second allocation. */
#define PG_INLINE_DIMS 6

/* Where a buffer's bytes come from, and so how they are given back. */
typedef enum PG_MemoryKind {
  PG_MEM_HOST = 0,     /* aligned host memory of the runtime: free() */
  PG_MEM_BFC = 1,      /* a BFC allocation: pluggable_BFCDeallocate(bfc, data) */
  PG_MEM_EXTERNAL = 2, /* TF_NewTensor's caller's memory: its deallocator */
  PG_MEM_BORROWED = 3, /* an input of a kernel run, owned by the host: nothing */
} PG_MemoryKind;

/* The memory of one or more tensors. Every TF_Tensor over it holds one reference, and so
 * does an output slot of a running kernel; the bytes go back when the last one is dropped. */
typedef struct PG_Buffer {
  atomic_long refs;
  PG_MemoryKind kind;
  bool host_memory;  /* the bytes are host memory (PG_MEM_HOST, host-memory inputs) */
  void* data;        /* NULL for an empty buffer */
  size_t len;
  PG_BFC* bfc;       /* PG_MEM_BFC */
  void (*deallocator)(void* data, size_t len, void* arg); /* PG_MEM_EXTERNAL, may be NULL */
  void* deallocator_arg;
  uint64_t run_serial; /* PG_MEM_BORROWED: the kernel run whose input this is */
  int input_index;     /* PG_MEM_BORROWED: which input */
  /* PG_MEM_HOST holding TF_STRING elements: how many TF_TStrings to free with the bytes */
  int64_t tstrings;
} PG_Buffer;

struct TF_Tensor {
  TF_DataType dtype;
  int num_dims;
  int64_t* dims; /* inline_dims, or malloc'd for ranks above PG_INLINE_DIMS */
  int64_t inline_dims[PG_INLINE_DIMS];
  PG_Buffer* buf; /* never NULL for a tensor handed out */
};

/* A new buffer with one reference (the caller's); NULL when out of host memory. */
PG_Buffer* pg_buffer_new(PG_MemoryKind kind, void* data, size_t len);
void pg_buffer_ref(PG_Buffer* buf);
/* Drops one reference; the last one gives the bytes back and frees the buffer. */
void pg_buffer_unref(PG_Buffer* buf);
/* True when `buf` has exactly one reference. */
bool pg_buffer_unique(const PG_Buffer* buf);
/* Frees the buffer struct of a unique buffer *without* giving its bytes back: the caller
 * has taken them over. */
void pg_buffer_release_struct(PG_Buffer* buf);

/* Host memory aligned to PG_HOST_ALIGNMENT; NULL for 0 bytes or when out of memory. */
void* pg_host_alloc(size_t len);

/* A tensor over `buf`, adopting the caller's reference to it. NULL (and the reference
 * dropped) when out of host memory. `dims` must already be valid. */
TF_Tensor* pg_tensor_new(TF_DataType dtype, const int64_t* dims, int num_dims, PG_Buffer* buf);
/* Replaces the shape; false when out of host memory (the tensor is unchanged). */
bool pg_tensor_set_dims(TF_Tensor* t, const int64_t* dims, int num_dims);
/* Frees a tensor's dims storage and drops its buffer reference, leaving `t` itself. */
void pg_tensor_clear(TF_Tensor* t);

/* Validates a shape: 0 <= num_dims <= PG_MAX_DIMS, every dim >= 0, the element count fits
 * int64. Returns the element count, or -1 with a message in `err` (of `n` bytes). */
int64_t pg_shape_elements(const int64_t* dims, int num_dims, char* err, size_t n);

#endif
