// A C++17 plugin with a device and one kernel, for the kernel API tests.
//
// Platform "KTEST_DEV" of device type "KTEST": one device, memory from malloc, and streams
// that are real objects (so TF_GetStream's answer can be checked) whose work runs at once on
// the calling thread. Built with g++ -std=c++17 -Wall -Wextra -Werror against the headers in
// include/, exactly as a plugin written for TensorFlow would be.
//
// TF_InitKernel registers "ScaleAndShift" for KTEST, T in {float}:
//   attrs  scale: float, shifts: list(int), T: type
//   input  x: T     output  y: T = x * scale + sum(shifts)
// create_func reads the attributes with TF_OpKernelConstruction_GetAttrFloat / GetAttrSize /
// GetAttrInt64List / GetAttrType and fails construction (TF_OpKernelConstruction_Failure)
// when one is missing or of another type; compute_func enqueues its work on the stream
// TF_GetStream returns.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "tensorflow/c/experimental/stream_executor/stream_executor.h"
#include "tensorflow/c/kernels.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"

// SP_Stream is an opaque pointer to a plugin-defined struct.
struct SP_Stream_st {
  int64_t id;
};
struct SP_Event_st {
  int unused;
};
struct SP_Timer_st {
  int unused;
};

namespace {

int64_t live_allocations = 0;
int64_t next_stream_id = 1;
SP_Stream last_stream = nullptr;  // what the kernel's last TF_GetStream returned
int64_t kernels_alive = 0;        // created minus deleted kernel instances

// ---- the device -------------------------------------------------------------------------
void Allocate(const SP_Device*, uint64_t size, int64_t, SP_DeviceMemoryBase* mem) {
  mem->struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE;
  mem->opaque = size ? std::malloc(size) : nullptr;
  mem->size = mem->opaque ? size : 0;
  if (mem->opaque) live_allocations++;
}

void Deallocate(const SP_Device*, SP_DeviceMemoryBase* mem) {
  if (mem->opaque) live_allocations--;
  std::free(mem->opaque);
  mem->opaque = nullptr;
}

TF_Bool MemoryUsage(const SP_Device*, int64_t* free_bytes, int64_t* total_bytes) {
  *free_bytes = *total_bytes = int64_t{64} << 20;
  return 1;
}

void CreateStream(const SP_Device*, SP_Stream* stream, TF_Status*) {
  *stream = new SP_Stream_st{next_stream_id++};
}
void DestroyStream(const SP_Device*, SP_Stream stream) { delete stream; }
void CreateEvent(const SP_Device*, SP_Event* event, TF_Status*) { *event = new SP_Event_st{}; }
void DestroyEvent(const SP_Device*, SP_Event event) { delete event; }
SE_EventStatus EventStatus(const SP_Device*, SP_Event) { return SE_EVENT_COMPLETE; }
void RecordEvent(const SP_Device*, SP_Stream, SP_Event, TF_Status*) {}
void WaitForEvent(const SP_Device*, SP_Stream, SP_Event, TF_Status*) {}
void BlockForEvent(const SP_Device*, SP_Event, TF_Status*) {}
void Synchronize(const SP_Device*, TF_Status*) {}

void MemcpyDtoH(const SP_Device*, SP_Stream, void* dst, const SP_DeviceMemoryBase* src,
                uint64_t size, TF_Status*) {
  if (size) std::memcpy(dst, src->opaque, size);
}
void MemcpyHtoD(const SP_Device*, SP_Stream, SP_DeviceMemoryBase* dst, const void* src,
                uint64_t size, TF_Status*) {
  if (size) std::memcpy(dst->opaque, src, size);
}
void MemcpyDtoD(const SP_Device*, SP_Stream, SP_DeviceMemoryBase* dst,
                const SP_DeviceMemoryBase* src, uint64_t size, TF_Status*) {
  if (size) std::memcpy(dst->opaque, src->opaque, size);
}
void SyncDtoH(const SP_Device* d, void* dst, const SP_DeviceMemoryBase* src, uint64_t size,
              TF_Status* s) {
  MemcpyDtoH(d, nullptr, dst, src, size, s);
}
void SyncHtoD(const SP_Device* d, SP_DeviceMemoryBase* dst, const void* src, uint64_t size,
              TF_Status* s) {
  MemcpyHtoD(d, nullptr, dst, src, size, s);
}

void CreateDevice(const SP_Platform*, SE_CreateDeviceParams* params, TF_Status*) {
  params->device->struct_size = SP_DEVICE_STRUCT_SIZE;
  params->device->ordinal = params->ordinal;
  params->device->hardware_name = "kernel test device";
}
void DestroyDevice(const SP_Platform*, SP_Device*) {}
void DeviceCount(const SP_Platform*, int* count, TF_Status*) { *count = 1; }

void CreateStreamExecutor(const SP_Platform*, SE_CreateStreamExecutorParams* params,
                          TF_Status*) {
  SP_StreamExecutor* se = params->stream_executor;
  se->struct_size = SP_STREAMEXECUTOR_STRUCT_SIZE;
  se->allocate = Allocate;
  se->deallocate = Deallocate;
  se->device_memory_usage = MemoryUsage;
  se->create_stream = CreateStream;
  se->destroy_stream = DestroyStream;
  se->create_event = CreateEvent;
  se->destroy_event = DestroyEvent;
  se->get_event_status = EventStatus;
  se->record_event = RecordEvent;
  se->wait_for_event = WaitForEvent;
  se->memcpy_dtoh = MemcpyDtoH;
  se->memcpy_htod = MemcpyHtoD;
  se->memcpy_dtod = MemcpyDtoD;
  se->sync_memcpy_dtoh = SyncDtoH;
  se->sync_memcpy_htod = SyncHtoD;
  se->block_host_for_event = BlockForEvent;
  se->synchronize_all_activity = Synchronize;
}
void DestroyStreamExecutor(const SP_Platform*, SP_StreamExecutor*) {}

// ---- the kernel ----------------------------------------------------------------------------
struct ScaleAndShift {
  float scale = 1.0f;
  std::vector<int64_t> shifts;
  TF_DataType type = TF_FLOAT;
  ScaleAndShift() { kernels_alive++; }
  ~ScaleAndShift() { kernels_alive--; }
  ScaleAndShift(const ScaleAndShift&) = delete;
  ScaleAndShift& operator=(const ScaleAndShift&) = delete;
};

using StatusPtr = std::unique_ptr<TF_Status, decltype(&TF_DeleteStatus)>;
StatusPtr NewStatus() { return StatusPtr(TF_NewStatus(), &TF_DeleteStatus); }

void* Create(TF_OpKernelConstruction* ctx) {
  auto kernel = std::make_unique<ScaleAndShift>();
  StatusPtr status = NewStatus();
  TF_OpKernelConstruction_GetAttrFloat(ctx, "scale", &kernel->scale, status.get());
  if (TF_GetCode(status.get()) == TF_OK) {
    int32_t list_size = 0, total_size = 0;
    TF_OpKernelConstruction_GetAttrSize(ctx, "shifts", &list_size, &total_size, status.get());
    if (TF_GetCode(status.get()) == TF_OK) {
      kernel->shifts.resize(list_size > 0 ? static_cast<size_t>(list_size) : 0);
      TF_OpKernelConstruction_GetAttrInt64List(ctx, "shifts", kernel->shifts.data(), list_size,
                                               status.get());
    }
  }
  if (TF_GetCode(status.get()) == TF_OK) {
    TF_OpKernelConstruction_GetAttrType(ctx, "T", &kernel->type, status.get());
  }
  if (TF_GetCode(status.get()) != TF_OK) {
    TF_OpKernelConstruction_Failure(ctx, status.get());
    return nullptr;  // TensorFlow (and pluggable) still call Delete with it
  }
  return kernel.release();
}

void Compute(void* instance, TF_OpKernelContext* ctx) {
  auto* kernel = static_cast<ScaleAndShift*>(instance);
  StatusPtr status = NewStatus();
  SP_Stream stream = TF_GetStream(ctx, status.get());
  if (TF_GetCode(status.get()) != TF_OK) return TF_OpKernelContext_Failure(ctx, status.get());
  last_stream = stream;
  TF_Tensor* x = nullptr;
  TF_GetInput(ctx, 0, &x, status.get());
  if (TF_GetCode(status.get()) != TF_OK) return TF_OpKernelContext_Failure(ctx, status.get());
  std::unique_ptr<TF_Tensor, decltype(&TF_DeleteTensor)> input(x, &TF_DeleteTensor);
  std::vector<int64_t> dims(static_cast<size_t>(TF_NumDims(x)));
  for (size_t i = 0; i < dims.size(); i++) dims[i] = TF_Dim(x, static_cast<int>(i));
  TF_Tensor* y = TF_AllocateOutput(ctx, 0, TF_ExpectedOutputDataType(ctx, 0), dims.data(),
                                   static_cast<int>(dims.size()), TF_TensorByteSize(x),
                                   status.get());
  if (TF_GetCode(status.get()) != TF_OK) return TF_OpKernelContext_Failure(ctx, status.get());
  std::unique_ptr<TF_Tensor, decltype(&TF_DeleteTensor)> output(y, &TF_DeleteTensor);
  // The "device work", enqueued on the stream: this device's streams run it at once.
  const float shift = static_cast<float>(
      std::accumulate(kernel->shifts.begin(), kernel->shifts.end(), int64_t{0}));
  const float* in = static_cast<const float*>(TF_TensorData(x));
  float* out = static_cast<float*>(TF_TensorData(y));
  for (int64_t i = 0; i < TF_TensorElementCount(x); i++) out[i] = in[i] * kernel->scale + shift;
}

void Delete(void* instance) { delete static_cast<ScaleAndShift*>(instance); }

}  // namespace

extern "C" {

void SE_InitPlugin(SE_PlatformRegistrationParams* params, TF_Status*) {
  params->major_version = SE_MAJOR;
  params->minor_version = SE_MINOR;
  params->patch_version = SE_PATCH;
  params->platform->struct_size = SP_PLATFORM_STRUCT_SIZE;
  params->platform->name = "KTEST_DEV";
  params->platform->type = "KTEST";
  params->platform->use_bfc_allocator = 1;
  SP_PlatformFns* fns = params->platform_fns;
  fns->struct_size = SP_PLATFORM_FNS_STRUCT_SIZE;
  fns->get_device_count = DeviceCount;
  fns->create_device = CreateDevice;
  fns->destroy_device = DestroyDevice;
  fns->create_stream_executor = CreateStreamExecutor;
  fns->destroy_stream_executor = DestroyStreamExecutor;
}

void TF_InitKernel(void) {
  StatusPtr status = NewStatus();
  TF_KernelBuilder* builder = TF_NewKernelBuilder("ScaleAndShift", "KTEST", Create, Compute,
                                                  Delete);
  TF_KernelBuilder_TypeConstraint(builder, "T", TF_FLOAT, status.get());
  if (TF_GetCode(status.get()) != TF_OK) {
    TF_DeleteKernelBuilder(builder);
    return;
  }
  TF_RegisterKernelBuilder("ScaleAndShiftOp", builder, status.get());
}

// Read by the tests through ctypes.
int64_t ktest_live_allocations(void) { return live_allocations; }
void* ktest_last_stream(void) { return last_stream; }
int64_t ktest_kernels_alive(void) { return kernels_alive; }

}  // extern "C"
