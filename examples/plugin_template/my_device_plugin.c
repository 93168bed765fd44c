/* A complete, minimal device plugin: start your own plugin from this file.
 *
 * What it is. A plugin for a device type "MY_DEVICE" (platform name "MY_PLATFORM") whose
 * "device memory" is ordinary host memory and whose streams do every operation at once, on
 * the thread that asks for it. That makes it synchronous: an event is complete as soon as it
 * is recorded, a copy is done when the call returns. Real hardware is asynchronous; the XPU
 * reference plugin in plugins/xpu shows how to run a stream on a worker thread. Everything
 * else here is what a real plugin needs:
 *
 *   SE_InitPlugin    the StreamExecutor C API: platform, devices, memory, streams, events,
 *                    copies (tensorflow/c/experimental/stream_executor/stream_executor.h)
 *   TF_InitKernel    one kernel, AddV2 for float with broadcasting, through the kernel C API
 *                    (tensorflow/c/kernels.h)
 *   TF_InitProfiler  a profiler that records every kernel run and hands the records over as
 *                    a serialized XSpace protobuf
 *                    (tensorflow/c/experimental/pluggable_profiler/pluggable_profiler.h)
 *
 * It includes only TensorFlow's C API headers (and, when they are there, pluggable's
 * extensions, pluggable/plugin_ext.h), so the same source builds against TensorFlow's headers
 * or against pluggable's (`pluggable.get_include()`), and the same .so loads in either host. It links against nothing: TF_SetStatus, TF_NewKernelBuilder and the
 * other TF_* functions it calls are provided by the host process when the plugin is loaded.
 *
 * The rules of the C API that every function below follows:
 * - SE_* structs are filled by the host, SP_* structs by the plugin. Every struct starts with
 *   `struct_size`: the plugin writes the *_STRUCT_SIZE of the headers it was built with, which
 *   is how the host knows which fields exist.
 * - A function reports failure by setting its TF_Status; it leaves the status alone on success.
 */
#define _POSIX_C_SOURCE 200809L /* posix_memalign, clock_gettime */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensorflow/c/experimental/pluggable_profiler/pluggable_profiler.h"
#include "tensorflow/c/experimental/stream_executor/stream_executor.h"
#include "tensorflow/c/kernels.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"
#if defined(__has_include)
#if __has_include("pluggable/plugin_ext.h")
#include "pluggable/plugin_ext.h" /* the host's launch ids, for the profiler */
#define HAVE_PLUGGABLE_EXT 1
#endif
#endif

#define DEVICE_TYPE "MY_DEVICE"
#define PLATFORM_NAME "MY_PLATFORM"
#define DEVICE_COUNT 1
#define MEMORY_BYTES ((int64_t)1 << 30) /* what this device claims to have */

/* ---- memory ----------------------------------------------------------------------------
 * Device memory is a (size, pointer) pair, SP_DeviceMemoryBase. Here it is host memory, so a
 * device pointer can be read by the host; a real device returns its own addresses and the
 * host only ever hands them back to the plugin. */

static int64_t bytes_in_use; /* the statistics the host reads through get_allocator_stats */
static int64_t peak_bytes_in_use;
static int64_t num_allocs;

/* A header in front of every allocation remembers its size for deallocate's statistics. */
typedef struct Allocation {
  uint64_t size;
  uint64_t padding; /* keeps the payload 16-byte aligned */
} Allocation;

/* Allocates `size` bytes of device memory; a failure leaves `opaque` NULL (the host then
 * reports out of memory). */
static void my_allocate(const SP_Device* device, uint64_t size, int64_t memory_space,
                        SP_DeviceMemoryBase* mem) {
  (void)device;
  mem->struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE;
  mem->opaque = NULL;
  mem->size = 0;
  if (size == 0 || memory_space != 0) return;
  if (bytes_in_use + (int64_t)size > MEMORY_BYTES) return; /* "device" memory exhausted */
  Allocation* block = (Allocation*)malloc(sizeof(Allocation) + size);
  if (block == NULL) return;
  block->size = size;
  bytes_in_use += (int64_t)size;
  if (bytes_in_use > peak_bytes_in_use) peak_bytes_in_use = bytes_in_use;
  num_allocs++;
  mem->opaque = block + 1;
  mem->size = size;
}

/* Frees memory from my_allocate; NULL is allowed and does nothing. */
static void my_deallocate(const SP_Device* device, SP_DeviceMemoryBase* mem) {
  (void)device;
  if (mem->opaque == NULL) return;
  Allocation* block = (Allocation*)mem->opaque - 1;
  bytes_in_use -= (int64_t)block->size;
  free(block);
  mem->opaque = NULL;
  mem->size = 0;
}

/* Pinned host memory: a real device returns page-locked memory it can copy from fast. */
static void* my_host_allocate(const SP_Device* device, uint64_t size) {
  (void)device;
  void* memory = NULL;
  return posix_memalign(&memory, 64, size ? size : 1) == 0 ? memory : NULL;
}

static void my_host_deallocate(const SP_Device* device, void* mem) {
  (void)device;
  free(mem);
}

/* What the host's memory statistics (pluggable.config.get_memory_info) show. */
static TF_Bool my_allocator_stats(const SP_Device* device, SP_AllocatorStats* stats) {
  (void)device;
  stats->struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE;
  stats->num_allocs = num_allocs;
  stats->bytes_in_use = bytes_in_use;
  stats->peak_bytes_in_use = peak_bytes_in_use;
  stats->largest_alloc_size = 0;
  stats->has_bytes_limit = 1;
  stats->bytes_limit = MEMORY_BYTES;
  return 1;
}

static TF_Bool my_memory_usage(const SP_Device* device, int64_t* free_bytes,
                               int64_t* total_bytes) {
  (void)device;
  *total_bytes = MEMORY_BYTES;
  *free_bytes = MEMORY_BYTES - bytes_in_use;
  return 1;
}

/* ---- streams, events, timers ----------------------------------------------------------
 * A stream is an ordered queue of device work. Work here runs at once, so a stream needs
 * no state: the handle is an opaque pointer the host never looks into, and NULL is a valid
 * handle. Events mark a point in a stream; a recorded event of a synchronous stream is
 * complete at once. */

static void my_create_stream(const SP_Device* device, SP_Stream* stream, TF_Status* status) {
  (void)device;
  (void)status;
  *stream = NULL;
}

static void my_destroy_stream(const SP_Device* device, SP_Stream stream) {
  (void)device;
  (void)stream;
}

/* `dependent` must not run ahead of the work already on `other`: nothing to do when all
 * work is finished the moment it is enqueued. */
static void my_stream_dependency(const SP_Device* device, SP_Stream dependent, SP_Stream other,
                                 TF_Status* status) {
  (void)device;
  (void)dependent;
  (void)other;
  (void)status;
}

/* A stream that failed stays failed; this one never fails. */
static void my_stream_status(const SP_Device* device, SP_Stream stream, TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
}

/* An event's state: never recorded (UNKNOWN) or recorded and therefore complete. */
typedef struct MyEvent {
  SE_EventStatus status;
} MyEvent;

static void my_create_event(const SP_Device* device, SP_Event* event, TF_Status* status) {
  (void)device;
  MyEvent* e = (MyEvent*)calloc(1, sizeof(MyEvent));
  if (e == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "my_device: out of host memory for an event");
    return;
  }
  e->status = SE_EVENT_UNKNOWN;
  *event = (SP_Event)e;
}

static void my_destroy_event(const SP_Device* device, SP_Event event) {
  (void)device;
  free(event);
}

static SE_EventStatus my_event_status(const SP_Device* device, SP_Event event) {
  (void)device;
  return ((MyEvent*)event)->status;
}

static void my_record_event(const SP_Device* device, SP_Stream stream, SP_Event event,
                            TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
  ((MyEvent*)event)->status = SE_EVENT_COMPLETE;
}

/* `stream` must wait until `event` completes: it already has. */
static void my_wait_for_event(const SP_Device* const device, SP_Stream stream, SP_Event event,
                              TF_Status* const status) {
  (void)device;
  (void)stream;
  (void)event;
  (void)status;
}

static void my_block_for_event(const SP_Device* device, SP_Event event, TF_Status* status) {
  (void)device;
  (void)event;
  (void)status;
}

static void my_block_until_done(const SP_Device* device, SP_Stream stream, TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
}

static void my_synchronize(const SP_Device* device, TF_Status* status) {
  (void)device;
  (void)status;
}

/* A timer measures the time a stream spent between two marks. */
typedef struct MyTimer {
  uint64_t start_ns, stop_ns;
} MyTimer;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts); /* the profilers' clock: host and device line up */
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void my_create_timer(const SP_Device* device, SP_Timer* timer, TF_Status* status) {
  (void)device;
  MyTimer* t = (MyTimer*)calloc(1, sizeof(MyTimer));
  if (t == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "my_device: out of host memory for a timer");
    return;
  }
  *timer = (SP_Timer)t;
}

static void my_destroy_timer(const SP_Device* device, SP_Timer timer) {
  (void)device;
  free(timer);
}

static void my_start_timer(const SP_Device* device, SP_Stream stream, SP_Timer timer,
                           TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
  ((MyTimer*)timer)->start_ns = now_ns();
}

static void my_stop_timer(const SP_Device* device, SP_Stream stream, SP_Timer timer,
                          TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
  ((MyTimer*)timer)->stop_ns = now_ns();
}

static uint64_t my_timer_nanoseconds(SP_Timer timer) {
  MyTimer* t = (MyTimer*)timer;
  return t->stop_ns > t->start_ns ? t->stop_ns - t->start_ns : 0;
}

/* ---- copies and fills ------------------------------------------------------------------
 * htod: host to device, dtoh: device to host, dtod: within the device. The asynchronous
 * forms take a stream; the sync_ forms return when the copy is done. Both are one memcpy
 * here. */

static void my_memcpy_dtoh(const SP_Device* device, SP_Stream stream, void* host_dst,
                           const SP_DeviceMemoryBase* device_src, uint64_t size,
                           TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
  memcpy(host_dst, device_src->opaque, size);
}

static void my_memcpy_htod(const SP_Device* device, SP_Stream stream,
                           SP_DeviceMemoryBase* device_dst, const void* host_src, uint64_t size,
                           TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
  memcpy(device_dst->opaque, host_src, size);
}

static void my_memcpy_dtod(const SP_Device* device, SP_Stream stream,
                           SP_DeviceMemoryBase* device_dst,
                           const SP_DeviceMemoryBase* device_src, uint64_t size,
                           TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
  memmove(device_dst->opaque, device_src->opaque, size);
}

static void my_sync_dtoh(const SP_Device* device, void* host_dst,
                         const SP_DeviceMemoryBase* device_src, uint64_t size,
                         TF_Status* status) {
  my_memcpy_dtoh(device, NULL, host_dst, device_src, size, status);
}

static void my_sync_htod(const SP_Device* device, SP_DeviceMemoryBase* device_dst,
                         const void* host_src, uint64_t size, TF_Status* status) {
  my_memcpy_htod(device, NULL, device_dst, host_src, size, status);
}

static void my_sync_dtod(const SP_Device* device, SP_DeviceMemoryBase* device_dst,
                         const SP_DeviceMemoryBase* device_src, uint64_t size,
                         TF_Status* status) {
  my_memcpy_dtod(device, NULL, device_dst, device_src, size, status);
}

static void my_mem_zero(const SP_Device* device, SP_Stream stream,
                        SP_DeviceMemoryBase* location, uint64_t size, TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
  memset(location->opaque, 0, size);
}

static void my_memset(const SP_Device* device, SP_Stream stream, SP_DeviceMemoryBase* location,
                      uint8_t pattern, uint64_t size, TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
  memset(location->opaque, pattern, size);
}

/* Fills `size` bytes (a multiple of 4) with a 32-bit pattern. */
static void my_memset32(const SP_Device* device, SP_Stream stream,
                        SP_DeviceMemoryBase* location, uint32_t pattern, uint64_t size,
                        TF_Status* status) {
  (void)device;
  (void)stream;
  if (size % 4 != 0) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "my_device: memset32 needs a multiple of 4 bytes");
    return;
  }
  uint32_t* words = (uint32_t*)location->opaque;
  for (uint64_t i = 0; i < size / 4; i++) words[i] = pattern;
}

/* Runs `callback_fn` on the stream after the work before it: that is now. Returning 1 means
 * the callback was accepted. */
static TF_Bool my_host_callback(const SP_Device* device, SP_Stream stream,
                                SE_StatusCallbackFn callback_fn, void* callback_arg) {
  (void)device;
  (void)stream;
  TF_Status* status = TF_NewStatus();
  callback_fn(callback_arg, status);
  TF_DeleteStatus(status);
  return 1;
}

/* ---- platform and devices --------------------------------------------------------------- */

static void my_device_count(const SP_Platform* platform, int* count, TF_Status* status) {
  (void)platform;
  (void)status;
  *count = DEVICE_COUNT;
}

/* Describes device `params->ordinal`. The strings must outlive the device. */
static void my_create_device(const SP_Platform* platform, SE_CreateDeviceParams* params,
                             TF_Status* status) {
  (void)platform;
  (void)status;
  SP_Device* device = params->device;
  device->struct_size = SP_DEVICE_STRUCT_SIZE;
  device->device_handle = NULL; /* a real plugin points this at its per-device state */
  device->ordinal = params->ordinal;
  device->hardware_name = "my device (template)";
  device->device_vendor = "plugin template";
  device->pci_bus_id = NULL;
}

static void my_destroy_device(const SP_Platform* platform, SP_Device* device) {
  (void)platform;
  device->device_handle = NULL;
}

/* Optional details: NUMA node, memory bandwidth and compute rate of a device. */
static int32_t my_get_numa_node(const SP_Device* device) {
  (void)device;
  return 0;
}

static int64_t my_get_memory_bandwidth(const SP_Device* device) {
  (void)device;
  return 10LL * 1000 * 1000 * 1000; /* bytes per second */
}

static double my_get_gflops(const SP_Device* device) {
  (void)device;
  return 10.0;
}

static void my_create_device_fns(const SP_Platform* platform, SE_CreateDeviceFnsParams* params,
                                 TF_Status* status) {
  (void)platform;
  (void)status;
  SP_DeviceFns* fns = params->device_fns;
  fns->struct_size = SP_DEVICE_FNS_STRUCT_SIZE;
  fns->get_numa_node = my_get_numa_node;
  fns->get_memory_bandwidth = my_get_memory_bandwidth;
  fns->get_gflops = my_get_gflops;
}

static void my_destroy_device_fns(const SP_Platform* platform, SP_DeviceFns* device_fns) {
  (void)platform;
  (void)device_fns;
}

/* The table of device functions; the host calls it once per device. */
static void my_create_stream_executor(const SP_Platform* platform,
                                      SE_CreateStreamExecutorParams* params, TF_Status* status) {
  (void)platform;
  (void)status;
  SP_StreamExecutor* se = params->stream_executor;
  se->struct_size = SP_STREAMEXECUTOR_STRUCT_SIZE;
  se->allocate = my_allocate;
  se->deallocate = my_deallocate;
  se->host_memory_allocate = my_host_allocate;
  se->host_memory_deallocate = my_host_deallocate;
  se->get_allocator_stats = my_allocator_stats;
  se->device_memory_usage = my_memory_usage;
  se->create_stream = my_create_stream;
  se->destroy_stream = my_destroy_stream;
  se->create_stream_dependency = my_stream_dependency;
  se->get_stream_status = my_stream_status;
  se->create_event = my_create_event;
  se->destroy_event = my_destroy_event;
  se->get_event_status = my_event_status;
  se->record_event = my_record_event;
  se->wait_for_event = my_wait_for_event;
  se->create_timer = my_create_timer;
  se->destroy_timer = my_destroy_timer;
  se->start_timer = my_start_timer;
  se->stop_timer = my_stop_timer;
  se->memcpy_dtoh = my_memcpy_dtoh;
  se->memcpy_htod = my_memcpy_htod;
  se->memcpy_dtod = my_memcpy_dtod;
  se->sync_memcpy_dtoh = my_sync_dtoh;
  se->sync_memcpy_htod = my_sync_htod;
  se->sync_memcpy_dtod = my_sync_dtod;
  se->block_host_for_event = my_block_for_event;
  se->block_host_until_done = my_block_until_done;
  se->synchronize_all_activity = my_synchronize;
  se->mem_zero = my_mem_zero;
  se->memset = my_memset;
  se->memset32 = my_memset32;
  se->host_callback = my_host_callback;
}

static void my_destroy_stream_executor(const SP_Platform* platform,
                                       SP_StreamExecutor* stream_executor) {
  (void)platform;
  (void)stream_executor;
}

static void my_create_timer_fns(const SP_Platform* platform, SP_TimerFns* timer_fns,
                                TF_Status* status) {
  (void)platform;
  (void)status;
  timer_fns->struct_size = SP_TIMER_FNS_STRUCT_SIZE;
  timer_fns->nanoseconds = my_timer_nanoseconds;
}

static void my_destroy_timer_fns(const SP_Platform* platform, SP_TimerFns* timer_fns) {
  (void)platform;
  (void)timer_fns;
}

static void my_destroy_platform(SP_Platform* platform) { (void)platform; }

static void my_destroy_platform_fns(SP_PlatformFns* platform_fns) { (void)platform_fns; }

/* The entry point: the host calls it once, when it loads the library. */
void SE_InitPlugin(SE_PlatformRegistrationParams* params, TF_Status* status) {
  (void)status;
  params->major_version = SE_MAJOR;
  params->minor_version = SE_MINOR;
  params->patch_version = SE_PATCH;

  SP_Platform* platform = params->platform;
  platform->struct_size = SP_PLATFORM_STRUCT_SIZE;
  platform->name = PLATFORM_NAME; /* the subdevice type */
  platform->type = DEVICE_TYPE;   /* the device type, e.g. "/my_device:0" */
  platform->supports_unified_memory = 0;
  platform->use_bfc_allocator = 1; /* the host suballocates from few large allocations */
  platform->force_memory_growth = 0;

  SP_PlatformFns* fns = params->platform_fns;
  fns->struct_size = SP_PLATFORM_FNS_STRUCT_SIZE;
  fns->get_device_count = my_device_count;
  fns->create_device = my_create_device;
  fns->destroy_device = my_destroy_device;
  fns->create_device_fns = my_create_device_fns;
  fns->destroy_device_fns = my_destroy_device_fns;
  fns->create_stream_executor = my_create_stream_executor;
  fns->destroy_stream_executor = my_destroy_stream_executor;
  fns->create_timer_fns = my_create_timer_fns;
  fns->destroy_timer_fns = my_destroy_timer_fns;
  params->destroy_platform = my_destroy_platform;
  params->destroy_platform_fns = my_destroy_platform_fns;
}

/* ---- the profiler ------------------------------------------------------------------------
 * Between start and stop, every kernel run is recorded (op, start, end). collect_data_xspace
 * hands the records to the host as an XSpace protobuf (tsl/profiler/protobuf/xplane.proto):
 * one XPlane with one XLine of XEvents, one XEventMetadata per op name. It is written the way
 * xprof (TensorBoard's profile tools) reads a device: the plane is named "/device:GPU:0"
 * (xprof draws only /device:GPU:, /device:TPU: and /device:CUSTOM: planes, and computes op
 * and kernel statistics from the first two) with the stats device_ordinal and
 * device_type_string ("MY_DEVICE"); each kernel event has the stats tf_op ("AddV2:AddV2"),
 * kernel_details (its launch shape) and, under pluggable, correlation_id, the host's id of
 * the launch (PLUGGABLE_ProfilerContextExt), which ties it to the host's event of the op.
 * The encoder below writes the protobuf wire format by hand, so the plugin needs no protobuf
 * library. */

#define MAX_RECORDS 4096 /* further runs in one session are counted, not recorded */
#define MAX_OPS 16        /* distinct op names; this plugin has one kernel */

typedef struct Record {
  int op;                 /* index into op_names; its XEventMetadata id is op + 1 */
  uint64_t start_ns, end_ns;
  uint64_t correlation_id; /* the host's launch id, 0 when none */
} Record;

/* The host's function that gives a kernel's launch id (NULL in TensorFlow). */
static uint64_t (*launch_id)(struct TF_OpKernelContext* ctx);

static int profiling; /* between start and stop */
static Record records[MAX_RECORDS];
static int num_records;
static int64_t dropped_records;
static const char* op_names[MAX_OPS]; /* string literals: they live for ever */
static int num_op_names;

static void record_kernel(const char* op, uint64_t start_ns, uint64_t end_ns,
                          TF_OpKernelContext* ctx) {
  if (!profiling) return; /* the whole cost when nobody profiles */
  int index = 0;
  while (index < num_op_names && strcmp(op_names[index], op) != 0) index++;
  if (index == num_op_names) {
    if (num_op_names == MAX_OPS || num_records == MAX_RECORDS) {
      dropped_records++;
      return;
    }
    op_names[num_op_names++] = op;
  }
  if (num_records == MAX_RECORDS) {
    dropped_records++;
    return;
  }
  records[num_records++] =
      (Record){index, start_ns, end_ns, launch_id != NULL ? launch_id(ctx) : 0};
}

/* Protobuf wire format: a field is a key (field number << 3 | wire type) then its value;
 * varints for integers (type 0), length-prefixed bytes for strings and messages (type 2). A
 * Writer with `out == NULL` only counts, so the same code gives the size and the bytes. */
typedef struct Writer {
  uint8_t* out;
  size_t size;
} Writer;

static void put_byte(Writer* w, uint8_t byte) {
  if (w->out != NULL) w->out[w->size] = byte;
  w->size++;
}

static void put_varint(Writer* w, uint64_t value) {
  while (value >= 0x80) {
    put_byte(w, (uint8_t)(value | 0x80));
    value >>= 7;
  }
  put_byte(w, (uint8_t)value);
}

static size_t varint_size(uint64_t value) {
  Writer counter = {NULL, 0};
  put_varint(&counter, value);
  return counter.size;
}

static void put_uint_field(Writer* w, int field, uint64_t value) {
  put_varint(w, (uint64_t)field << 3);
  put_varint(w, value);
}

static void put_bytes_field(Writer* w, int field, const void* data, size_t size) {
  put_varint(w, (uint64_t)field << 3 | 2);
  put_varint(w, size);
  for (size_t i = 0; i < size; i++) put_byte(w, ((const uint8_t*)data)[i]);
}

static void put_string_field(Writer* w, int field, const char* s) {
  put_bytes_field(w, field, s, strlen(s));
}

/* Stat metadata ids (XPlane.stat_metadata) and names. */
enum { STAT_TF_OP = 1, STAT_KERNEL_DETAILS, STAT_CORRELATION_ID, STAT_DEVICE_ORDINAL,
       STAT_DEVICE_TYPE, NUM_STATS };
static const char* const stat_names[NUM_STATS] = {
    NULL, "tf_op", "kernel_details", "correlation_id", "device_ordinal", "device_type_string"};

/* Writes an XStat (metadata_id = 1; uint64_value = 3, int64_value = 4 or str_value = 5) as
 * field `field` of the enclosing message; `text` NULL means the number. */
static void put_stat(Writer* w, int field, int id, int value_field, uint64_t number,
                     const char* text) {
  Writer counter = {NULL, 0};
  put_uint_field(&counter, 1, (uint64_t)id);
  if (text != NULL) put_string_field(&counter, value_field, text);
  else put_uint_field(&counter, value_field, number);
  put_varint(w, (uint64_t)field << 3 | 2);
  put_varint(w, counter.size);
  put_uint_field(w, 1, (uint64_t)id);
  if (text != NULL) put_string_field(w, value_field, text);
  else put_uint_field(w, value_field, number);
}

/* The fields of one XEvent (metadata_id = 1, offset_ps = 2, duration_ps = 3, stats = 4). */
static void put_event_body(Writer* w, const Record* r, uint64_t line_start_ns) {
  char tf_op[64];
  snprintf(tf_op, sizeof tf_op, "%s:%s", op_names[r->op], op_names[r->op]);
  put_uint_field(w, 1, (uint64_t)r->op + 1);
  put_uint_field(w, 2, (r->start_ns - line_start_ns) * 1000);
  put_uint_field(w, 3, (r->end_ns - r->start_ns) * 1000);
  put_stat(w, 4, STAT_TF_OP, 5, 0, tf_op);
  /* This device runs a kernel on the calling thread: a grid and a block of one. */
  put_stat(w, 4, STAT_KERNEL_DETAILS, 5, 0,
           "regs:0 static_shared:0 dynamic_shared:0 grid:1,1,1 block:1,1,1 occ_pct:0");
  if (r->correlation_id != 0) put_stat(w, 4, STAT_CORRELATION_ID, 3, r->correlation_id, NULL);
}

/* Writes one XEvent as XLine.events (field 4). */
static void put_event(Writer* w, const Record* r, uint64_t line_start_ns) {
  Writer counter = {NULL, 0};
  put_event_body(&counter, r, line_start_ns);
  put_varint(w, 4 << 3 | 2);
  put_varint(w, counter.size);
  put_event_body(w, r, line_start_ns);
}

/* Writes the XLine (id = 1, name = 2, timestamp_ns = 3, events = 4) into a sub-writer first,
 * to learn its length. */
static void put_line(Writer* w, uint64_t line_start_ns) {
  Writer counter = {NULL, 0};
  put_uint_field(&counter, 1, 0);
  put_string_field(&counter, 2, "stream");
  put_uint_field(&counter, 3, line_start_ns);
  for (int i = 0; i < num_records; i++) put_event(&counter, &records[i], line_start_ns);
  put_varint(w, 3 << 3 | 2); /* XPlane.lines = 3 */
  put_varint(w, counter.size);
  put_uint_field(w, 1, 0);
  put_string_field(w, 2, "stream");
  put_uint_field(w, 3, line_start_ns);
  for (int i = 0; i < num_records; i++) put_event(w, &records[i], line_start_ns);
}

/* XPlane.event_metadata is a map<int64, XEventMetadata> (field 4): each entry is a message
 * with key = 1 and value = 2; the value is an XEventMetadata (id = 1, name = 2). */
static void put_event_metadata(Writer* w, int id, const char* op) {
  size_t name = strlen(op);
  size_t value = 1 + varint_size((uint64_t)id) + 1 + varint_size(name) + name;
  size_t entry = 1 + varint_size((uint64_t)id) + 1 + varint_size(value) + value;
  put_varint(w, 4 << 3 | 2);
  put_varint(w, entry);
  put_uint_field(w, 1, (uint64_t)id);
  put_varint(w, 2 << 3 | 2);
  put_varint(w, value);
  put_uint_field(w, 1, (uint64_t)id);
  put_string_field(w, 2, op);
}

/* XPlane.stat_metadata is a map<int64, XStatMetadata> (field 5), built like event_metadata. */
static void put_stat_metadata(Writer* w, int id, const char* name) {
  size_t length = strlen(name);
  size_t value = 1 + varint_size((uint64_t)id) + 1 + varint_size(length) + length;
  size_t entry = 1 + varint_size((uint64_t)id) + 1 + varint_size(value) + value;
  put_varint(w, 5 << 3 | 2);
  put_varint(w, entry);
  put_uint_field(w, 1, (uint64_t)id);
  put_varint(w, 2 << 3 | 2);
  put_varint(w, value);
  put_uint_field(w, 1, (uint64_t)id);
  put_string_field(w, 2, name);
}

static void put_plane_body(Writer* w, uint64_t line_start_ns) {
  put_uint_field(w, 1, 0);               /* XPlane.id: the device ordinal */
  put_string_field(w, 2, "/device:GPU:0"); /* XPlane.name, as xprof reads devices */
  put_line(w, line_start_ns);
  for (int i = 0; i < num_op_names; i++) put_event_metadata(w, i + 1, op_names[i]);
  for (int id = 1; id < NUM_STATS; id++) put_stat_metadata(w, id, stat_names[id]);
  put_stat(w, 6, STAT_DEVICE_ORDINAL, 4, 0, NULL);         /* XPlane.stats = 6 */
  put_stat(w, 6, STAT_DEVICE_TYPE, 5, 0, DEVICE_TYPE); /* what the device really is */
}

/* The whole XSpace: planes = 1; an empty session is 0 bytes (no planes at all). */
static size_t write_xspace(uint8_t* out) {
  Writer w = {out, 0};
  if (num_records == 0) return 0;
  uint64_t line_start_ns = records[0].start_ns;
  Writer counter = {NULL, 0};
  put_plane_body(&counter, line_start_ns);
  put_varint(&w, 1 << 3 | 2);
  put_varint(&w, counter.size);
  put_plane_body(&w, line_start_ns);
  return w.size;
}

static void my_profiler_start(const TP_Profiler* profiler, TF_Status* status) {
  (void)profiler;
  (void)status;
  num_records = 0;
  num_op_names = 0;
  dropped_records = 0;
  profiling = 1;
}

static void my_profiler_stop(const TP_Profiler* profiler, TF_Status* status) {
  (void)profiler;
  (void)status;
  profiling = 0;
}

/* Called twice: with buffer == NULL to ask the size, then with a buffer of that size. */
static void my_profiler_collect(const TP_Profiler* profiler, uint8_t* buffer,
                                size_t* size_in_bytes, TF_Status* status) {
  (void)profiler;
  size_t needed = write_xspace(NULL);
  if (buffer == NULL) {
    *size_in_bytes = needed;
    return;
  }
  if (*size_in_bytes < needed) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "my_device: the XSpace buffer is too small");
    return;
  }
  *size_in_bytes = write_xspace(buffer);
  num_records = 0; /* a session's data is handed over once */
  num_op_names = 0;
}

static void my_destroy_profiler(TP_Profiler* profiler) { (void)profiler; }

static void my_destroy_profiler_fns(TP_ProfilerFns* profiler_fns) { (void)profiler_fns; }

void TF_InitProfiler(TF_ProfilerRegistrationParams* params, TF_Status* status) {
  (void)status;
  params->struct_size = TF_PROFILER_REGISTRATION_PARAMS_STRUCT_SIZE;
  params->major_version = TP_MAJOR;
  params->minor_version = TP_MINOR;
  params->patch_version = TP_PATCH;
  params->profiler->struct_size = TP_PROFILER_STRUCT_SIZE;
  params->profiler->device_type = DEVICE_TYPE;
#ifdef HAVE_PLUGGABLE_EXT
  /* pluggable hangs its extensions off params->ext (TensorFlow leaves it NULL). */
  launch_id = NULL;
  for (const PLUGGABLE_ExtHeader* link = params->ext;
       link != NULL && (link->type & PLUGGABLE_EXT_TAG_MASK) == PLUGGABLE_EXT_TAG_BASE &&
       link->struct_size >= PLUGGABLE_EXT_HEADER_STRUCT_SIZE;
       link = link->next) {
    if (link->type == PLUGGABLE_EXT_PROFILER_CONTEXT &&
        link->struct_size >= PLUGGABLE_PROFILER_CONTEXT_EXT_STRUCT_SIZE) {
      launch_id = ((const PLUGGABLE_ProfilerContextExt*)link)->correlation_id;
    }
  }
#endif
  params->profiler_fns->struct_size = TP_PROFILER_FNS_STRUCT_SIZE;
  params->profiler_fns->start = my_profiler_start;
  params->profiler_fns->stop = my_profiler_stop;
  params->profiler_fns->collect_data_xspace = my_profiler_collect;
  params->destroy_profiler = my_destroy_profiler;
  params->destroy_profiler_fns = my_destroy_profiler_fns;
}

/* ---- a kernel ------------------------------------------------------------------------------
 * AddV2 for float: z = x + y with NumPy's broadcasting (shapes are aligned at their last
 * dimension; a dimension of 1 stretches). A real kernel enqueues its work on the device
 * stream (TF_GetStream); this device runs it here. Everything that can be checked without
 * reading the data (shapes, dtypes) is checked before any work, and reported through
 * TF_OpKernelContext_Failure. */

#define MAX_DIMS 8

/* Broadcasts the shapes of x and y into `dims` (rank `*rank`) and gives, per output
 * dimension, each input's element stride (0 where it is stretched). 0 when they do not
 * broadcast. */
static int broadcast(const TF_Tensor* x, const TF_Tensor* y, int64_t dims[MAX_DIMS], int* rank,
                     int64_t x_stride[MAX_DIMS], int64_t y_stride[MAX_DIMS]) {
  int rx = TF_NumDims(x), ry = TF_NumDims(y);
  *rank = rx > ry ? rx : ry;
  if (*rank > MAX_DIMS) return 0;
  int64_t sx = 1, sy = 1;
  for (int d = *rank - 1; d >= 0; d--) {
    int dx = d - (*rank - rx), dy = d - (*rank - ry); /* the inputs' own dimension, or < 0 */
    int64_t nx = dx >= 0 ? TF_Dim(x, dx) : 1, ny = dy >= 0 ? TF_Dim(y, dy) : 1;
    if (nx != ny && nx != 1 && ny != 1) return 0;
    dims[d] = nx == 1 ? ny : nx;
    x_stride[d] = nx == 1 ? 0 : sx;
    y_stride[d] = ny == 1 ? 0 : sy;
    sx *= nx;
    sy *= ny;
  }
  return 1;
}

static void add_compute(void* kernel, TF_OpKernelContext* ctx) {
  (void)kernel;
  uint64_t start_ns = now_ns();
  TF_Status* status = TF_NewStatus();
  TF_Tensor* x = NULL;
  TF_Tensor* y = NULL;
  TF_Tensor* z = NULL;
  int64_t dims[MAX_DIMS], x_stride[MAX_DIMS], y_stride[MAX_DIMS];
  int rank = 0;
  TF_GetInput(ctx, 0, &x, status);
  if (TF_GetCode(status) == TF_OK) TF_GetInput(ctx, 1, &y, status);
  if (TF_GetCode(status) != TF_OK) goto fail;
  if (!broadcast(x, y, dims, &rank, x_stride, y_stride)) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "my_device AddV2: the input shapes do not broadcast (or have more than 8 "
                 "dimensions)");
    goto fail;
  }
  int64_t n = 1;
  for (int d = 0; d < rank; d++) n *= dims[d];
  z = TF_AllocateOutput(ctx, 0, TF_FLOAT, dims, rank, (size_t)n * sizeof(float), status);
  if (TF_GetCode(status) != TF_OK) goto fail;

  const float* a = (const float*)TF_TensorData(x);
  const float* b = (const float*)TF_TensorData(y);
  float* out = (float*)TF_TensorData(z);
  int64_t index[MAX_DIMS] = {0}; /* the output element's coordinates */
  int64_t ia = 0, ib = 0;        /* and the inputs' element offsets */
  for (int64_t i = 0; i < n; i++) {
    out[i] = a[ia] + b[ib];
    for (int d = rank - 1; d >= 0; d--) { /* next coordinate, like an odometer */
      ia += x_stride[d];
      ib += y_stride[d];
      if (++index[d] < dims[d]) break;
      ia -= x_stride[d] * dims[d];
      ib -= y_stride[d] * dims[d];
      index[d] = 0;
    }
  }
  record_kernel("AddV2", start_ns, now_ns(), ctx);
  goto done;

fail:
  TF_OpKernelContext_Failure(ctx, status);
done:
  TF_DeleteTensor(x);
  TF_DeleteTensor(y);
  TF_DeleteTensor(z);
  TF_DeleteStatus(status);
}

void TF_InitKernel(void) {
  TF_Status* status = TF_NewStatus();
  TF_KernelBuilder* builder = TF_NewKernelBuilder("AddV2", DEVICE_TYPE, NULL, add_compute, NULL);
  TF_KernelBuilder_TypeConstraint(builder, "T", TF_FLOAT, status);
  if (TF_GetCode(status) == TF_OK) TF_RegisterKernelBuilder("MyDeviceAddV2", builder, status);
  /* A failed registration is the host's to report; nothing more to do here. */
  TF_DeleteStatus(status);
}
