/* tf_portable_plugin.c: a plugin written only against TensorFlow's public plugin headers
 * (stream_executor.h, kernels.h, kernels_experimental.h, ops.h), to show that one source
 * builds and runs in TensorFlow 2.21 and in pluggable alike.
 *
 * Simulated: a device of type "PORT" (platform "PORTABLE_HOST") whose memory is host memory
 * and whose streams are synchronous (work runs when it is enqueued, so every event is
 * complete once recorded). Two ops of its own, registered through ops.h with shape functions:
 *   PortableScaleAdd(x: T, y: T; scale: float = 1) -> z = x * scale + y   (shapes equal)
 *   PortableRowSum(x: T) -> y[i] = sum_j x[i, j]                          (x a matrix)
 *   PortableStringLengths(x: float) -> y: int64, the lengths of strings it builds in a
 *     temporary string tensor, one per element of x (short, long and borrowed ones)
 * and their kernels; and variable kernels through kernels_experimental.h: AssignVariableOp,
 * AssignAddVariableOp, AssignSubVariableOp and ResourceApplyGradientDescent, for float and
 * double; and a graph optimizer (grappler.h) that leaves graphs as they are and turns
 * TensorFlow's remapper off (-DPORT_BAD_OPTIMIZER: one without optimize_func, which hosts
 * refuse). Left out: timers, unified memory, asynchronous work, a profiler.
 *
 * Built for tests by tests/portability (against pluggable.get_include() and against
 * TensorFlow's headers) and for TensorFlow itself by tests/tensorflow. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* TensorFlow's ops.h names these types without typedefs, which C needs; C11 allows a
 * typedef to be repeated, so this also builds where the header has them. */
typedef struct TF_DimensionHandle TF_DimensionHandle;
typedef struct TF_OpDefinitionBuilder TF_OpDefinitionBuilder;
typedef struct TF_ShapeHandle TF_ShapeHandle;
typedef struct TF_ShapeInferenceContext TF_ShapeInferenceContext;

#include "tensorflow/c/experimental/grappler/grappler.h"
#include "tensorflow/c/experimental/stream_executor/stream_executor.h"
#include "tensorflow/c/kernels.h"
#include "tensorflow/c/kernels_experimental.h"
#include "tensorflow/c/ops.h"
#include "tensorflow/c/tf_tstring.h"

/* TensorFlow 2.20 and 2.21 declare kernels_experimental.h but no binary of theirs defines
 * it (tensorflow/tensorflow#126374), so a plugin referring to it strongly cannot load there.
 * Weak references load everywhere; the variable kernels are registered only where the
 * functions exist (pluggable, TensorFlow releases that export them again). */
#pragma weak TF_AssignVariable
#pragma weak TF_AssignUpdateVariable
#pragma weak TF_MaybeLockVariableInputMutexesInOrder
#pragma weak TF_GetInputTensorFromVariable
#pragma weak TF_ReleaseVariableInputLockHolder
#pragma weak TF_TemporaryVariable
#pragma weak TF_AddNVariant
#pragma weak TF_IsRefInput

#define EXPORT __attribute__((visibility("default")))
#define DEVICE_TYPE "PORT"

/* ---- the device -------------------------------------------------------------------------- */

struct SP_Stream_st { int unused; };
struct SP_Event_st { int unused; };
struct SP_Timer_st { int unused; };

/* Memory: plain host memory, so "device" pointers are host pointers. */
static void port_allocate(const SP_Device* device, uint64_t size, int64_t memory_space,
                          SP_DeviceMemoryBase* mem) {
  (void)device, (void)memory_space;
  mem->struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE;
  mem->opaque = size ? aligned_alloc(64, (size + 63) / 64 * 64) : NULL;
  mem->size = mem->opaque ? size : 0;
}

static void port_deallocate(const SP_Device* device, SP_DeviceMemoryBase* memory) {
  (void)device;
  free(memory->opaque);
  memory->opaque = NULL;
}

static void* port_host_allocate(const SP_Device* device, uint64_t size) {
  (void)device;
  return aligned_alloc(64, (size + 63) / 64 * 64 + 64);
}

static void port_host_deallocate(const SP_Device* device, void* mem) {
  (void)device;
  free(mem);
}

static TF_Bool port_allocator_stats(const SP_Device* device, SP_AllocatorStats* stats) {
  (void)device;
  size_t size = stats->struct_size;
  memset(stats, 0, sizeof *stats);
  stats->struct_size = size;
  return 1;
}

static TF_Bool port_memory_usage(const SP_Device* device, int64_t* free_bytes, int64_t* total) {
  (void)device;
  *free_bytes = (int64_t)1 << 30;
  *total = (int64_t)1 << 30;
  return 1;
}

/* Streams and events: work is done when enqueued, so there is nothing to wait for. */
static void port_create_stream(const SP_Device* device, SP_Stream* stream, TF_Status* status) {
  (void)device;
  *stream = calloc(1, sizeof **stream);
  TF_SetStatus(status, *stream ? TF_OK : TF_RESOURCE_EXHAUSTED, *stream ? "" : "out of memory");
}

static void port_destroy_stream(const SP_Device* device, SP_Stream stream) {
  (void)device;
  free(stream);
}

static void port_stream_dependency(const SP_Device* device, SP_Stream dependent, SP_Stream other,
                                   TF_Status* status) {
  (void)device, (void)dependent, (void)other;
  TF_SetStatus(status, TF_OK, "");
}

static void port_stream_status(const SP_Device* device, SP_Stream stream, TF_Status* status) {
  (void)device, (void)stream;
  TF_SetStatus(status, TF_OK, "");
}

static void port_create_event(const SP_Device* device, SP_Event* event, TF_Status* status) {
  (void)device;
  *event = calloc(1, sizeof **event);
  TF_SetStatus(status, *event ? TF_OK : TF_RESOURCE_EXHAUSTED, *event ? "" : "out of memory");
}

static void port_destroy_event(const SP_Device* device, SP_Event event) {
  (void)device;
  free(event);
}

static SE_EventStatus port_event_status(const SP_Device* device, SP_Event event) {
  (void)device, (void)event;
  return SE_EVENT_COMPLETE;
}

static void port_record_event(const SP_Device* device, SP_Stream stream, SP_Event event,
                              TF_Status* status) {
  (void)device, (void)stream, (void)event;
  TF_SetStatus(status, TF_OK, "");
}

static void port_wait_for_event(const SP_Device* const device, SP_Stream stream, SP_Event event,
                                TF_Status* const status) {
  (void)device, (void)stream, (void)event;
  TF_SetStatus(status, TF_OK, "");
}

/* Copies: memcpy, whichever side. */
static void port_memcpy_dtoh(const SP_Device* device, SP_Stream stream, void* host_dst,
                             const SP_DeviceMemoryBase* device_src, uint64_t size,
                             TF_Status* status) {
  (void)device, (void)stream;
  if (size) memcpy(host_dst, device_src->opaque, size);
  TF_SetStatus(status, TF_OK, "");
}

static void port_memcpy_htod(const SP_Device* device, SP_Stream stream,
                             SP_DeviceMemoryBase* device_dst, const void* host_src,
                             uint64_t size, TF_Status* status) {
  (void)device, (void)stream;
  if (size) memcpy(device_dst->opaque, host_src, size);
  TF_SetStatus(status, TF_OK, "");
}

static void port_memcpy_dtod(const SP_Device* device, SP_Stream stream,
                             SP_DeviceMemoryBase* device_dst,
                             const SP_DeviceMemoryBase* device_src, uint64_t size,
                             TF_Status* status) {
  (void)device, (void)stream;
  if (size) memmove(device_dst->opaque, device_src->opaque, size);
  TF_SetStatus(status, TF_OK, "");
}

static void port_sync_dtoh(const SP_Device* device, void* host_dst,
                           const SP_DeviceMemoryBase* device_src, uint64_t size,
                           TF_Status* status) {
  port_memcpy_dtoh(device, NULL, host_dst, device_src, size, status);
}

static void port_sync_htod(const SP_Device* device, SP_DeviceMemoryBase* device_dst,
                           const void* host_src, uint64_t size, TF_Status* status) {
  port_memcpy_htod(device, NULL, device_dst, host_src, size, status);
}

static void port_sync_dtod(const SP_Device* device, SP_DeviceMemoryBase* device_dst,
                           const SP_DeviceMemoryBase* device_src, uint64_t size,
                           TF_Status* status) {
  port_memcpy_dtod(device, NULL, device_dst, device_src, size, status);
}

static void port_block_for_event(const SP_Device* device, SP_Event event, TF_Status* status) {
  (void)device, (void)event;
  TF_SetStatus(status, TF_OK, "");
}

static void port_block_until_done(const SP_Device* device, SP_Stream stream, TF_Status* status) {
  (void)device, (void)stream;
  TF_SetStatus(status, TF_OK, "");
}

static void port_synchronize(const SP_Device* device, TF_Status* status) {
  (void)device;
  TF_SetStatus(status, TF_OK, "");
}

static void port_mem_zero(const SP_Device* device, SP_Stream stream,
                          SP_DeviceMemoryBase* location, uint64_t size, TF_Status* status) {
  (void)device, (void)stream;
  if (size) memset(location->opaque, 0, size);
  TF_SetStatus(status, TF_OK, "");
}

static void port_memset(const SP_Device* device, SP_Stream stream, SP_DeviceMemoryBase* location,
                        uint8_t pattern, uint64_t size, TF_Status* status) {
  (void)device, (void)stream;
  if (size) memset(location->opaque, pattern, size);
  TF_SetStatus(status, TF_OK, "");
}

static void port_memset32(const SP_Device* device, SP_Stream stream,
                          SP_DeviceMemoryBase* location, uint32_t pattern, uint64_t size,
                          TF_Status* status) {
  (void)device, (void)stream;
  uint32_t* words = location->opaque;
  for (uint64_t i = 0; i < size / 4; i++) words[i] = pattern;
  TF_SetStatus(status, TF_OK, "");
}

static TF_Bool port_host_callback(const SP_Device* device, SP_Stream stream,
                                  SE_StatusCallbackFn callback_fn, void* callback_arg) {
  (void)device, (void)stream;
  TF_Status* status = TF_NewStatus();
  callback_fn(callback_arg, status);
  TF_DeleteStatus(status);
  return 1;
}

/* Platform callbacks. */
static void port_device_count(const SP_Platform* platform, int* count, TF_Status* status) {
  (void)platform;
  *count = 1;
  TF_SetStatus(status, TF_OK, "");
}

static void port_create_device(const SP_Platform* platform, SE_CreateDeviceParams* params,
                               TF_Status* status) {
  (void)platform;
  params->device->struct_size = SP_DEVICE_STRUCT_SIZE;
  params->device->ordinal = params->ordinal;
  params->device->device_handle = NULL;
  params->device->hardware_name = "portable host device";
  params->device->device_vendor = "pluggable tests";
  params->device->pci_bus_id = NULL;
  TF_SetStatus(status, TF_OK, "");
}

static void port_destroy_device(const SP_Platform* platform, SP_Device* device) {
  (void)platform, (void)device;
}

static void port_create_device_fns(const SP_Platform* platform, SE_CreateDeviceFnsParams* params,
                                   TF_Status* status) {
  (void)platform;
  params->device_fns->struct_size = SP_DEVICE_FNS_STRUCT_SIZE;
  TF_SetStatus(status, TF_OK, "");
}

static void port_destroy_device_fns(const SP_Platform* platform, SP_DeviceFns* fns) {
  (void)platform, (void)fns;
}

static void port_create_stream_executor(const SP_Platform* platform,
                                        SE_CreateStreamExecutorParams* params,
                                        TF_Status* status) {
  (void)platform;
  SP_StreamExecutor* se = params->stream_executor;
  se->struct_size = SP_STREAMEXECUTOR_STRUCT_SIZE;
  se->allocate = port_allocate;
  se->deallocate = port_deallocate;
  se->host_memory_allocate = port_host_allocate;
  se->host_memory_deallocate = port_host_deallocate;
  se->get_allocator_stats = port_allocator_stats;
  se->device_memory_usage = port_memory_usage;
  se->create_stream = port_create_stream;
  se->destroy_stream = port_destroy_stream;
  se->create_stream_dependency = port_stream_dependency;
  se->get_stream_status = port_stream_status;
  se->create_event = port_create_event;
  se->destroy_event = port_destroy_event;
  se->get_event_status = port_event_status;
  se->record_event = port_record_event;
  se->wait_for_event = port_wait_for_event;
  se->memcpy_dtoh = port_memcpy_dtoh;
  se->memcpy_htod = port_memcpy_htod;
  se->memcpy_dtod = port_memcpy_dtod;
  se->sync_memcpy_dtoh = port_sync_dtoh;
  se->sync_memcpy_htod = port_sync_htod;
  se->sync_memcpy_dtod = port_sync_dtod;
  se->block_host_for_event = port_block_for_event;
  se->block_host_until_done = port_block_until_done;
  se->synchronize_all_activity = port_synchronize;
  se->mem_zero = port_mem_zero;
  se->memset = port_memset;
  se->memset32 = port_memset32;
  se->host_callback = port_host_callback;
  TF_SetStatus(status, TF_OK, "");
}

static void port_destroy_stream_executor(const SP_Platform* platform, SP_StreamExecutor* se) {
  (void)platform, (void)se;
}

static void port_destroy_platform(SP_Platform* platform) { (void)platform; }

static void port_destroy_platform_fns(SP_PlatformFns* fns) { (void)fns; }

EXPORT void SE_InitPlugin(SE_PlatformRegistrationParams* params, TF_Status* status) {
  params->platform->struct_size = SP_PLATFORM_STRUCT_SIZE;
  params->platform->name = "PORTABLE_HOST";
  params->platform->type = DEVICE_TYPE;
  params->platform->supports_unified_memory = 0;
  params->platform->use_bfc_allocator = 1;
  params->platform->force_memory_growth = 1;
  SP_PlatformFns* fns = params->platform_fns;
  fns->struct_size = SP_PLATFORM_FNS_STRUCT_SIZE;
  fns->get_device_count = port_device_count;
  fns->create_device = port_create_device;
  fns->destroy_device = port_destroy_device;
  fns->create_device_fns = port_create_device_fns;
  fns->destroy_device_fns = port_destroy_device_fns;
  fns->create_stream_executor = port_create_stream_executor;
  fns->destroy_stream_executor = port_destroy_stream_executor;
  params->destroy_platform = port_destroy_platform;
  params->destroy_platform_fns = port_destroy_platform_fns;
  TF_SetStatus(status, TF_OK, "");
}

/* ---- the custom ops ---------------------------------------------------------------------- */

/* PortableScaleAdd: x and y of one shape; z has it. */
static void scale_add_shape(TF_ShapeInferenceContext* ctx, TF_Status* status) {
  TF_ShapeHandle* x = TF_NewShapeHandle();
  TF_ShapeHandle* y = TF_NewShapeHandle();
  TF_ShapeInferenceContextGetInput(ctx, 0, x, status);
  if (TF_GetCode(status) == TF_OK) TF_ShapeInferenceContextGetInput(ctx, 1, y, status);
  if (TF_GetCode(status) == TF_OK && TF_ShapeInferenceContextRankKnown(ctx, x) &&
      TF_ShapeInferenceContextRankKnown(ctx, y)) {
    int64_t rank = TF_ShapeInferenceContextRank(ctx, x);
    int same = rank == TF_ShapeInferenceContextRank(ctx, y);
    TF_DimensionHandle* a = TF_NewDimensionHandle();
    TF_DimensionHandle* b = TF_NewDimensionHandle();
    for (int64_t i = 0; same && i < rank; i++) {
      TF_ShapeInferenceContextDim(ctx, x, i, a);
      TF_ShapeInferenceContextDim(ctx, y, i, b);
      same = !TF_DimensionHandleValueKnown(a) || !TF_DimensionHandleValueKnown(b) ||
             TF_DimensionHandleValue(a) == TF_DimensionHandleValue(b);
    }
    TF_DeleteDimensionHandle(a);
    TF_DeleteDimensionHandle(b);
    if (!same) TF_SetStatus(status, TF_INVALID_ARGUMENT, "PortableScaleAdd: x and y must have one shape");
  }
  if (TF_GetCode(status) == TF_OK) TF_ShapeInferenceContextSetOutput(ctx, 0, x, status);
  TF_DeleteShapeHandle(x);
  TF_DeleteShapeHandle(y);
}

/* PortableRowSum: x a matrix [rows, cols]; y a vector [rows]. */
static void row_sum_shape(TF_ShapeInferenceContext* ctx, TF_Status* status) {
  TF_ShapeHandle* x = TF_NewShapeHandle();
  TF_ShapeHandle* matrix = TF_NewShapeHandle();
  TF_ShapeHandle* rows = TF_NewShapeHandle();
  TF_ShapeInferenceContextGetInput(ctx, 0, x, status);
  if (TF_GetCode(status) == TF_OK) TF_ShapeInferenceContextWithRank(ctx, x, 2, matrix, status);
  if (TF_GetCode(status) == TF_OK) TF_ShapeInferenceContextSubshape(ctx, matrix, 0, 1, rows, status);
  if (TF_GetCode(status) == TF_OK) TF_ShapeInferenceContextSetOutput(ctx, 0, rows, status);
  TF_DeleteShapeHandle(x);
  TF_DeleteShapeHandle(matrix);
  TF_DeleteShapeHandle(rows);
}

typedef struct { float scale; } ScaleAdd;

static void* scale_add_create(TF_OpKernelConstruction* ctx) {
  ScaleAdd* k = calloc(1, sizeof *k);
  TF_Status* status = TF_NewStatus();
  TF_OpKernelConstruction_GetAttrFloat(ctx, "scale", &k->scale, status);
  if (TF_GetCode(status) != TF_OK) TF_OpKernelConstruction_Failure(ctx, status);
  TF_DeleteStatus(status);
  return k;
}

static void scale_add_delete(void* kernel) { free(kernel); }

static void scale_add_compute(void* kernel, TF_OpKernelContext* ctx) {
  const ScaleAdd* k = kernel;
  TF_Status* status = TF_NewStatus();
  TF_Tensor *x = NULL, *y = NULL, *z = NULL;
  TF_GetInput(ctx, 0, &x, status);
  if (TF_GetCode(status) == TF_OK) TF_GetInput(ctx, 1, &y, status);
  if (TF_GetCode(status) == TF_OK && TF_TensorByteSize(x) != TF_TensorByteSize(y)) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "PortableScaleAdd: x and y must have one shape");
  }
  if (TF_GetCode(status) == TF_OK) {
    int64_t dims[8];
    int n = TF_NumDims(x);
    for (int i = 0; i < n && i < 8; i++) dims[i] = TF_Dim(x, i);
    z = TF_AllocateOutput(ctx, 0, TF_TensorType(x), dims, n, TF_TensorByteSize(x), status);
  }
  if (TF_GetCode(status) == TF_OK) {
    int64_t count = TF_TensorElementCount(x);
    if (TF_TensorType(x) == TF_FLOAT) {
      const float *a = TF_TensorData(x), *b = TF_TensorData(y);
      float* out = TF_TensorData(z);
      for (int64_t i = 0; i < count; i++) out[i] = a[i] * k->scale + b[i];
    } else {
      const double *a = TF_TensorData(x), *b = TF_TensorData(y);
      double* out = TF_TensorData(z);
      for (int64_t i = 0; i < count; i++) out[i] = a[i] * (double)k->scale + b[i];
    }
  }
  if (TF_GetCode(status) != TF_OK) TF_OpKernelContext_Failure(ctx, status);
  TF_DeleteTensor(x);
  TF_DeleteTensor(y);
  TF_DeleteTensor(z);
  TF_DeleteStatus(status);
}

static void* no_state(TF_OpKernelConstruction* ctx) {
  (void)ctx;
  return NULL;
}

static void no_delete(void* kernel) { (void)kernel; }

static void row_sum_compute(void* kernel, TF_OpKernelContext* ctx) {
  (void)kernel;
  TF_Status* status = TF_NewStatus();
  TF_Tensor *x = NULL, *y = NULL;
  TF_GetInput(ctx, 0, &x, status);
  if (TF_GetCode(status) == TF_OK && TF_NumDims(x) != 2) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "PortableRowSum: x must be a matrix");
  }
  int64_t rows = 0, cols = 0;
  if (TF_GetCode(status) == TF_OK) {
    rows = TF_Dim(x, 0);
    cols = TF_Dim(x, 1);
    size_t size = TF_TensorType(x) == TF_FLOAT ? sizeof(float) : sizeof(double);
    y = TF_AllocateOutput(ctx, 0, TF_TensorType(x), &rows, 1, (size_t)rows * size, status);
  }
  if (TF_GetCode(status) == TF_OK) {
    for (int64_t i = 0; i < rows; i++) {
      double sum = 0;
      for (int64_t j = 0; j < cols; j++) {
        sum += TF_TensorType(x) == TF_FLOAT ? ((const float*)TF_TensorData(x))[i * cols + j]
                                            : ((const double*)TF_TensorData(x))[i * cols + j];
      }
      if (TF_TensorType(x) == TF_FLOAT) ((float*)TF_TensorData(y))[i] = (float)sum;
      else ((double*)TF_TensorData(y))[i] = sum;
    }
  }
  if (TF_GetCode(status) != TF_OK) TF_OpKernelContext_Failure(ctx, status);
  TF_DeleteTensor(x);
  TF_DeleteTensor(y);
  TF_DeleteStatus(status);
}

/* A string temporary of as many elements as x: element i is a view of a static text when
 * i % 3 == 0, else i * 7 copies of 'a' + i (inline or on the heap). y[i] is its length, once
 * the content is checked. */
static void string_lengths_compute(void* kernel, TF_OpKernelContext* ctx) {
  (void)kernel;
  static const char borrowed[] = "borrowed text";
  TF_Status* status = TF_NewStatus();
  TF_Tensor *x = NULL, *strings = NULL, *y = NULL;
  TF_GetInput(ctx, 0, &x, status);
  int64_t n = TF_GetCode(status) == TF_OK ? TF_TensorElementCount(x) : 0;
  TF_AllocatorAttributes on_host = {TF_ALLOCATOR_ATTRIBUTES_STRUCT_SIZE, 1};
  if (TF_GetCode(status) == TF_OK) strings = TF_AllocateTemp(ctx, TF_STRING, &n, 1, &on_host, status);
  if (TF_GetCode(status) == TF_OK) y = TF_AllocateOutput(ctx, 0, TF_INT64, &n, 1, (size_t)n * 8, status);
  for (int64_t i = 0; TF_GetCode(status) == TF_OK && i < n; i++) {
    TF_TString* s = (TF_TString*)TF_TensorData(strings) + i;
    char text[128];
    size_t len = i % 3 == 0 ? sizeof borrowed - 1 : (size_t)(i * 7 % 100);
    memset(text, 'a' + (int)(i % 26), len);
    if (i % 3 == 0) TF_TString_AssignView(s, borrowed, len);
    else TF_TString_Copy(s, text, len);
    const char* back = TF_TString_GetDataPointer(s);
    if (TF_TString_GetSize(s) != len || memcmp(back, i % 3 == 0 ? borrowed : text, len) != 0) {
      TF_SetStatus(status, TF_INTERNAL, "PortableStringLengths: a string changed");
    }
    ((int64_t*)TF_TensorData(y))[i] = (int64_t)TF_TString_GetSize(s);
  }
  if (TF_GetCode(status) != TF_OK) TF_OpKernelContext_Failure(ctx, status);
  TF_DeleteTensor(strings); /* frees the strings it owns */
  TF_DeleteTensor(x);
  TF_DeleteTensor(y);
  TF_DeleteStatus(status);
}

/* ---- variable kernels -------------------------------------------------------------------- */

/* The device is host memory and its streams synchronous: a copy is a memcpy. */
static void copy_tensor(TF_OpKernelContext* ctx, TF_Tensor* source, TF_Tensor* dest) {
  (void)ctx;
  memcpy(TF_TensorData(dest), TF_TensorData(source), TF_TensorByteSize(source));
}

/* tensor op= value, element-wise; op 0 adds, 1 subtracts. */
static void update_tensor(TF_OpKernelContext* ctx, TF_Tensor* tensor, TF_Tensor* value, int op) {
  (void)ctx;
  int64_t n = TF_TensorElementCount(tensor);
  double sign = op == 1 ? -1.0 : 1.0;
  if (TF_TensorType(tensor) == TF_FLOAT) {
    float* t = TF_TensorData(tensor);
    const float* v = TF_TensorData(value);
    for (int64_t i = 0; i < n; i++) t[i] += (float)sign * v[i];
  } else {
    double* t = TF_TensorData(tensor);
    const double* v = TF_TensorData(value);
    for (int64_t i = 0; i < n; i++) t[i] += sign * v[i];
  }
}

static void assign_compute(void* kernel, TF_OpKernelContext* ctx) {
  (void)kernel;
  TF_Status* status = TF_NewStatus();
  TF_AssignVariable(ctx, 0, 1, false, copy_tensor, status);
  if (TF_GetCode(status) != TF_OK) TF_OpKernelContext_Failure(ctx, status);
  TF_DeleteStatus(status);
}

/* AssignAddVariableOp (op 0) and AssignSubVariableOp (op 1). */
static void update_compute(TF_OpKernelContext* ctx, int op) {
  TF_Status* status = TF_NewStatus();
  TF_AssignUpdateVariable(ctx, 0, 1, op, 0, copy_tensor, update_tensor, status);
  if (TF_GetCode(status) != TF_OK) TF_OpKernelContext_Failure(ctx, status);
  TF_DeleteStatus(status);
}

static void assign_add_compute(void* kernel, TF_OpKernelContext* ctx) {
  (void)kernel;
  update_compute(ctx, 0);
}

static void assign_sub_compute(void* kernel, TF_OpKernelContext* ctx) {
  (void)kernel;
  update_compute(ctx, 1);
}

/* var -= alpha * delta, with the variable locked for the whole update. */
static void gradient_descent_compute(void* kernel, TF_OpKernelContext* ctx) {
  (void)kernel;
  TF_Status* status = TF_NewStatus();
  TF_VariableInputLockHolder* lock = NULL;
  TF_Tensor *var = NULL, *alpha = NULL, *delta = NULL;
  const int inputs[1] = {0};
  TF_MaybeLockVariableInputMutexesInOrder(ctx, true, false, inputs, 1, copy_tensor, &lock,
                                          status);
  if (TF_GetCode(status) == TF_OK) {
    TF_GetInputTensorFromVariable(ctx, 0, true, false, false, copy_tensor, &var, status);
  }
  if (TF_GetCode(status) == TF_OK) TF_GetInput(ctx, 1, &alpha, status);
  if (TF_GetCode(status) == TF_OK) TF_GetInput(ctx, 2, &delta, status);
  if (TF_GetCode(status) == TF_OK && TF_TensorElementCount(var) != TF_TensorElementCount(delta)) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "ResourceApplyGradientDescent: var and delta must have one shape");
  }
  if (TF_GetCode(status) == TF_OK) {
    int64_t n = TF_TensorElementCount(var);
    if (TF_TensorType(var) == TF_FLOAT) {
      float* v = TF_TensorData(var);
      const float* d = TF_TensorData(delta);
      float a = *(const float*)TF_TensorData(alpha);
      for (int64_t i = 0; i < n; i++) v[i] -= a * d[i];
    } else {
      double* v = TF_TensorData(var);
      const double* d = TF_TensorData(delta);
      double a = *(const double*)TF_TensorData(alpha);
      for (int64_t i = 0; i < n; i++) v[i] -= a * d[i];
    }
  }
  TF_ReleaseVariableInputLockHolder(lock);
  if (TF_GetCode(status) != TF_OK) TF_OpKernelContext_Failure(ctx, status);
  TF_DeleteTensor(var);
  TF_DeleteTensor(alpha);
  TF_DeleteTensor(delta);
  TF_DeleteStatus(status);
}

#ifdef PORT_MISUSE
/* PortableMisuse(resource, value; case): calls kernels_experimental.h wrongly or with what
 * needs TensorFlow's graph runtime, one way per `case`, to test the host's answers. */
static void* misuse_create(TF_OpKernelConstruction* ctx) {
  int64_t* which = calloc(1, sizeof *which);
  TF_Status* status = TF_NewStatus();
  TF_OpKernelConstruction_GetAttrInt64(ctx, "case", which, status);
  if (TF_GetCode(status) != TF_OK) TF_OpKernelConstruction_Failure(ctx, status);
  TF_DeleteStatus(status);
  return which;
}

static void misuse_compute(void* kernel, TF_OpKernelContext* ctx) {
  TF_Status* status = TF_NewStatus();
  TF_Tensor* out = NULL;
  switch (*(int64_t*)kernel) {
    case 0: /* the value is not a variable */
      TF_AssignUpdateVariable(ctx, 1, 1, 0, 0, copy_tensor, update_tensor, status);
      break;
    case 1:
      TF_GetInputTensorFromVariable(ctx, 0, false, false, false, copy_tensor, &out, status);
      break;
    case 2: {
      int64_t dims[1] = {1};
      TF_TemporaryVariable(ctx, TF_FLOAT, dims, 1, NULL, NULL, status);
      break;
    }
    case 3:
      TF_AddNVariant(ctx, NULL, status);
      break;
    case 4:
      TF_AssignUpdateVariable(ctx, 7, 1, 0, 0, copy_tensor, update_tensor, status);
      break;
    case 5: /* no reference inputs here; a bad index is an error */
      if (TF_IsRefInput(ctx, 0, status)) TF_SetStatus(status, TF_INTERNAL, "input 0 is a ref");
      if (TF_GetCode(status) == TF_OK) TF_IsRefInput(ctx, 9, status);
      break;
    default:
      TF_SetStatus(status, TF_OK, "");
  }
  if (TF_GetCode(status) != TF_OK) TF_OpKernelContext_Failure(ctx, status);
  TF_DeleteTensor(out);
  TF_DeleteStatus(status);
}

static void misuse_delete(void* kernel) { free(kernel); }
#endif

/* ---- registration ------------------------------------------------------------------------ */

static void register_op(const char* name, const char* const* attrs, const char* const* inputs,
                        const char* output,
                        void (*shape_fn)(TF_ShapeInferenceContext*, TF_Status*)) {
  TF_Status* status = TF_NewStatus();
  TF_OpDefinitionBuilder* b = TF_NewOpDefinitionBuilder(name);
  for (; *attrs != NULL; attrs++) TF_OpDefinitionBuilderAddAttr(b, *attrs);
  for (; *inputs != NULL; inputs++) TF_OpDefinitionBuilderAddInput(b, *inputs);
  TF_OpDefinitionBuilderAddOutput(b, output);
  if (shape_fn != NULL) TF_OpDefinitionBuilderSetShapeInferenceFunction(b, shape_fn);
  TF_RegisterOpDefinition(b, status);
  if (TF_GetCode(status) != TF_OK) fprintf(stderr, "%s: %s\n", name, TF_Message(status));
  TF_DeleteStatus(status);
}

static void register_kernel(const char* op, const char* type_attr, TF_DataType type,
                            void* (*create)(TF_OpKernelConstruction*),
                            void (*compute)(void*, TF_OpKernelContext*),
                            void (*destroy)(void*)) {
  TF_Status* status = TF_NewStatus();
  TF_KernelBuilder* b = TF_NewKernelBuilder(op, DEVICE_TYPE, create, compute, destroy);
  TF_KernelBuilder_TypeConstraint(b, type_attr, type, status);
  if (TF_GetCode(status) == TF_OK) {
    char name[96];
    snprintf(name, sizeof name, "Port%s_%d", op, (int)type);
    TF_RegisterKernelBuilder(name, b, status);
  }
  if (TF_GetCode(status) != TF_OK) fprintf(stderr, "%s: %s\n", op, TF_Message(status));
  TF_DeleteStatus(status);
}

EXPORT void TF_InitKernel(void) {
  static const char* const scale_add_attrs[] = {"T: {float, double}", "scale: float = 1.0",
                                                NULL};
  static const char* const scale_add_inputs[] = {"x: T", "y: T", NULL};
  static const char* const row_sum_attrs[] = {"T: {float, double}", NULL};
  static const char* const row_sum_inputs[] = {"x: T", NULL};
  register_op("PortableScaleAdd", scale_add_attrs, scale_add_inputs, "z: T", scale_add_shape);
  register_op("PortableRowSum", row_sum_attrs, row_sum_inputs, "y: T", row_sum_shape);
  static const char* const no_attrs[] = {NULL};
  static const char* const float_input[] = {"x: float", NULL};
  register_op("PortableStringLengths", no_attrs, float_input, "y: int64", NULL);
  {
    TF_Status* status = TF_NewStatus();
    TF_KernelBuilder* b = TF_NewKernelBuilder("PortableStringLengths", DEVICE_TYPE, no_state,
                                              string_lengths_compute, no_delete);
    TF_RegisterKernelBuilder("PortStringLengths", b, status);
    TF_DeleteStatus(status);
  }

#ifdef PORT_MISUSE
  {
    static const char* const attrs[] = {"case: int", NULL};
    static const char* const inputs[] = {"resource: resource", "value: float", NULL};
    TF_Status* status = TF_NewStatus();
    TF_OpDefinitionBuilder* b = TF_NewOpDefinitionBuilder("PortableMisuse");
    for (int i = 0; attrs[i] != NULL; i++) TF_OpDefinitionBuilderAddAttr(b, attrs[i]);
    for (int i = 0; inputs[i] != NULL; i++) TF_OpDefinitionBuilderAddInput(b, inputs[i]);
    TF_RegisterOpDefinition(b, status);
    TF_KernelBuilder* k = TF_NewKernelBuilder("PortableMisuse", DEVICE_TYPE, misuse_create,
                                              misuse_compute, misuse_delete);
    TF_RegisterKernelBuilder("PortableMisuse", k, status);
    TF_DeleteStatus(status);
  }
#endif
#ifdef PORT_BAD_SPECS
  /* Refused by TF_RegisterOpDefinition: a spec without a type; and an op the host cannot
   * use (a reference input), which registers but is left out with a warning. */
  {
    static const char* const none[] = {NULL};
    static const char* const no_type[] = {"x", NULL};
    static const char* const ref[] = {"x: Ref(float)", NULL};
    register_op("PortableNoType", none, no_type, "y: float", NULL);
    register_op("PortableRef", none, ref, "y: float", NULL);
    /* The same name again with other specs. */
    static const char* const other[] = {"x: float", NULL};
    register_op("PortableRowSum", none, other, "y: float", NULL);
  }
#endif
  static const TF_DataType types[] = {TF_FLOAT, TF_DOUBLE};
  for (int i = 0; i < 2; i++) {
    register_kernel("PortableScaleAdd", "T", types[i], scale_add_create, scale_add_compute,
                    scale_add_delete);
    register_kernel("PortableRowSum", "T", types[i], no_state, row_sum_compute, no_delete);
    if (TF_AssignVariable == NULL || TF_AssignUpdateVariable == NULL ||
        TF_MaybeLockVariableInputMutexesInOrder == NULL ||
        TF_GetInputTensorFromVariable == NULL || TF_ReleaseVariableInputLockHolder == NULL) {
      continue; /* the host does not export kernels_experimental.h */
    }
    register_kernel("AssignVariableOp", "dtype", types[i], no_state, assign_compute, no_delete);
    register_kernel("AssignAddVariableOp", "dtype", types[i], no_state, assign_add_compute,
                    no_delete);
    register_kernel("AssignSubVariableOp", "dtype", types[i], no_state, assign_sub_compute,
                    no_delete);
    register_kernel("ResourceApplyGradientDescent", "T", types[i], no_state,
                    gradient_descent_compute, no_delete);
  }
}

/* ---- graph optimizer --------------------------------------------------------------------- */

static void free_graph(void* data, size_t length) {
  (void)length;
  free(data);
}

/* The optimized graph is the graph: a copy of the serialized GraphDef. */
static void optimize_graph(void* optimizer, const TF_Buffer* graph, const TF_GrapplerItem* item,
                           TF_Buffer* optimized, TF_Status* status) {
  (void)optimizer, (void)item;
  /* So that a test can see TensorFlow call it. */
  if (getenv("PORT_TRACE_OPTIMIZER") != NULL) {
    fprintf(stderr, "PORT graph optimizer: a GraphDef of %zu bytes\n", graph->length);
  }
  void* copy = malloc(graph->length ? graph->length : 1);
  if (copy == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory copying the graph");
    return;
  }
  if (graph->length) memcpy(copy, graph->data, graph->length);
  optimized->data = copy;
  optimized->length = graph->length;
  optimized->data_deallocator = free_graph;
  TF_SetStatus(status, TF_OK, "");
}

EXPORT void TF_InitGraph(TP_OptimizerRegistrationParams* params, TF_Status* status) {
  params->device_type = DEVICE_TYPE;
  params->optimizer_configs->struct_size = TP_OPTIMIZER_CONFIGS_STRUCT_SIZE;
  params->optimizer_configs->remapping = TF_TriState_Off;
  params->optimizer->struct_size = TP_OPTIMIZER_STRUCT_SIZE;
  params->optimizer->optimize_func = optimize_graph;
#ifdef PORT_BAD_OPTIMIZER
  params->optimizer->optimize_func = NULL;
#endif
  TF_SetStatus(status, TF_OK, "");
}
