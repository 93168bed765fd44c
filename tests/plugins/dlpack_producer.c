/* A tiny DLPack producer for the DLPack tests: managed tensors (versioned or legacy) over
 * memory it allocates, with a deleter that counts its calls, so the tests can prove that a
 * consumer calls it exactly once. It is not a plugin: tests load it with ctypes and wrap its
 * tensors in capsules themselves. Every field can be set to a bad value, to test how the
 * consumer rejects it.
 *
 * The memory is malloc'd host memory whatever device the tensor claims: a test plugin that
 * declares host-addressable "device" memory reads it as its own.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlpack/dlpack.h"

#define MAX_NDIM 8

typedef struct Box {
  DLManagedTensorVersioned versioned; /* used when is_versioned */
  DLManagedTensor legacy;             /* used otherwise */
  int is_versioned;
  int64_t shape[MAX_NDIM];
  int64_t strides[MAX_NDIM];
  void* memory;
} Box;

static int64_t deleter_calls; /* every call */
static int64_t live_tensors;  /* made and not yet deleted */

static void box_free(Box* box) {
  deleter_calls++;
  live_tensors--;
  free(box->memory);
  box->memory = NULL; /* a second call would free nothing more, and the count shows it */
}

/* The deleters free the data, not the box: a test may read the counts of a deleted tensor
 * through its box, so the boxes are released by producer_reset(). */
static void delete_versioned(DLManagedTensorVersioned* self) { box_free(self->manager_ctx); }
static void delete_legacy(DLManagedTensor* self) { box_free(self->manager_ctx); }

#define MAX_BOXES 16384
static Box* boxes[MAX_BOXES];
static int box_count;

/* A managed tensor over a copy of `nbytes` bytes of `init` (NULL: zeros); returns the
 * DLManagedTensorVersioned* or DLManagedTensor*, or NULL when out of room. */
void* producer_make(int versioned, const void* init, int64_t nbytes, int32_t device_type,
                    int32_t device_id, int32_t ndim, const int64_t* shape,
                    const int64_t* strides, uint8_t code, uint8_t bits, uint16_t lanes,
                    uint64_t byte_offset, uint64_t flags, uint32_t major, int null_deleter) {
  if (box_count == MAX_BOXES || ndim > MAX_NDIM) return NULL;
  Box* box = calloc(1, sizeof *box);
  if (box == NULL) return NULL;
  box->memory = calloc(1, nbytes > 0 ? (size_t)nbytes : 1);
  if (box->memory == NULL) {
    free(box);
    return NULL;
  }
  if (init != NULL && nbytes > 0) memcpy(box->memory, init, (size_t)nbytes);
  boxes[box_count++] = box;
  live_tensors++;
  box->is_versioned = versioned;
  DLTensor tensor;
  memset(&tensor, 0, sizeof tensor);
  tensor.data = box->memory;
  tensor.device.device_type = (DLDeviceType)device_type;
  tensor.device.device_id = device_id;
  tensor.ndim = ndim;
  tensor.dtype.code = code;
  tensor.dtype.bits = bits;
  tensor.dtype.lanes = lanes;
  if (ndim > 0 && shape != NULL) {
    memcpy(box->shape, shape, sizeof(int64_t) * (size_t)ndim);
    tensor.shape = box->shape;
  }
  if (ndim > 0 && strides != NULL) {
    memcpy(box->strides, strides, sizeof(int64_t) * (size_t)ndim);
    tensor.strides = box->strides;
  }
  tensor.byte_offset = byte_offset;
  if (versioned) {
    box->versioned.version.major = major;
    box->versioned.version.minor = DLPACK_MINOR_VERSION;
    box->versioned.manager_ctx = box;
    box->versioned.deleter = null_deleter ? NULL : delete_versioned;
    box->versioned.flags = flags;
    box->versioned.dl_tensor = tensor;
    return &box->versioned;
  }
  box->legacy.dl_tensor = tensor;
  box->legacy.manager_ctx = box;
  box->legacy.deleter = null_deleter ? NULL : delete_legacy;
  return &box->legacy;
}

/* What a capsule's destructor does with a tensor no consumer took. */
void producer_delete_unconsumed(void* managed, int versioned) {
  if (versioned) {
    DLManagedTensorVersioned* m = managed;
    if (m->deleter != NULL) m->deleter(m);
  } else {
    DLManagedTensor* m = managed;
    if (m->deleter != NULL) m->deleter(m);
  }
}

/* The address of a tensor's data. */
void* producer_data(void* managed, int versioned) {
  return versioned ? ((DLManagedTensorVersioned*)managed)->dl_tensor.data
                   : ((DLManagedTensor*)managed)->dl_tensor.data;
}

int64_t producer_deleter_calls(void) { return deleter_calls; }
int64_t producer_live_tensors(void) { return live_tensors; }

/* Frees every box (after the tests checked the counts); tensors still live stay counted. */
void producer_reset(void) {
  int kept = 0;
  for (int i = 0; i < box_count; i++) {
    if (boxes[i]->memory == NULL) {
      free(boxes[i]);
    } else {
      boxes[kept++] = boxes[i];
    }
  }
  box_count = kept;
}
