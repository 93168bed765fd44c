/* tensorflow/c/experimental/stream_executor/stream_executor.h: the StreamExecutor C API, the
 * device half of a PluggableDevice plugin (platform, devices, memory, streams, events, timers).
 * Layouts, names and signatures are those of TensorFlow 2.21; see include/ABI.md.
 *
 * Conventions
 *   SE_ structs are filled by the host, SP_ structs by the plugin, unless a field says
 *       otherwise. The host owns the memory of every struct it passes; the plugin fills it.
 *   struct_size  first field of every struct, set by BOTH sides: the host sets its own
 *       *_STRUCT_SIZE before handing a struct over, the plugin overwrites it with the
 *       *_STRUCT_SIZE it was built with. A reader treats fields ending past struct_size as
 *       absent. A struct_size of 0 or below the struct's first published size is an error.
 *   *_STRUCT_SIZE  TF_OFFSET_OF_END(struct, last field). Fields are only ever appended.
 *   ext   second field: NULL, or a plugin's extension chain (pluggable/plugin_ext.h) on SP_
 *       structs. Reserved on SE_ structs.
 *   [Optional]  the callback may be NULL; ABI.md lists the host's fallback for each one. Any
 *       callback without the tag must be set, or the plugin is rejected.
 *   Versions  SE_MAJOR.SE_MINOR.SE_PATCH. The host passes its version in
 *       SE_PlatformRegistrationParams; a plugin built for another major version is rejected.
 *   Strings  const char* fields filled by a plugin are NUL-terminated and stay valid until
 *       the struct they sit in is destroyed.
 *
 * Lifecycle: SE_InitPlugin (or SE_InitializePlugin) fills the platform; then
 * get_device_count, and per device create_device followed by create_device_fns and
 * create_stream_executor for it. Everything created is destroyed by the matching destroy_*
 * callback, children before parents.
 */
#ifndef TENSORFLOW_C_EXPERIMENTAL_STREAM_EXECUTOR_STREAM_EXECUTOR_H_
#define TENSORFLOW_C_EXPERIMENTAL_STREAM_EXECUTOR_STREAM_EXECUTOR_H_
#include <stddef.h>
#include <stdint.h>

#include "tensorflow/c/c_api_macros.h"
#include "tensorflow/c/tf_status.h"

#define SE_MAJOR 0
#define SE_MINOR 0
#define SE_PATCH 1

#ifdef __cplusplus
extern "C" {
#endif

/* Handles the plugin creates and destroys; the host only passes them back. */
typedef struct SP_Stream_st* SP_Stream;
typedef struct SP_Event_st* SP_Event;
typedef struct SP_Timer_st* SP_Timer;

/* Host function a plugin runs through host_callback: called as fn(callback_arg, status),
 * with a status the plugin owns; the host sets it to report a failure back. */
typedef void (*SE_StatusCallbackFn)(void* const, TF_Status* const);

/* Filled by create_timer_fns. */
typedef struct SP_TimerFns {
  size_t struct_size;
  void* ext;
  /* Time between start_timer and stop_timer, once both have run on the stream. */
  uint64_t (*nanoseconds)(SP_Timer timer);
} SP_TimerFns;

#define SP_TIMER_FNS_STRUCT_SIZE TF_OFFSET_OF_END(SP_TimerFns, nanoseconds)

/* Allocator statistics, filled by get_allocator_stats. Byte counts; has_* are 0 or 1 and say
 * whether the limit after them is meaningful. */
typedef struct SP_AllocatorStats {
  size_t struct_size;
  int64_t num_allocs;
  int64_t bytes_in_use;
  int64_t peak_bytes_in_use;
  int64_t largest_alloc_size;

  int8_t has_bytes_limit;
  int64_t bytes_limit;

  int64_t bytes_reserved;
  int64_t peak_bytes_reserved;

  int8_t has_bytes_reservable_limit;
  int64_t bytes_reservable_limit;

  int64_t largest_free_block_bytes;
} SP_AllocatorStats;

#define SP_ALLOCATORSTATS_STRUCT_SIZE \
  TF_OFFSET_OF_END(SP_AllocatorStats, largest_free_block_bytes)

/* Result of get_event_status. UNKNOWN and ERROR are failures. */
typedef enum SE_EventStatus {
  SE_EVENT_UNKNOWN,
  SE_EVENT_ERROR,
  SE_EVENT_PENDING,
  SE_EVENT_COMPLETE,
} SE_EventStatus;

/* A device allocation. The host allocates the struct; `allocate` fills it. */
typedef struct SP_DeviceMemoryBase {
  size_t struct_size;
  void* ext;
  void* opaque;     /* plugin's value for the allocation, not necessarily an address */
  uint64_t size;    /* bytes */
  uint64_t payload; /* free for the plugin's use */
} SP_DeviceMemoryBase;

#define SP_DEVICE_MEMORY_BASE_STRUCT_SIZE \
  TF_OFFSET_OF_END(SP_DeviceMemoryBase, payload)

/* One device. Host-owned memory, filled by create_device; emptied by destroy_device. */
typedef struct SP_Device {
  size_t struct_size;
  void* ext;
  int32_t ordinal;     /* index of the device, 0 .. device count - 1 */
  void* device_handle; /* the plugin's own device object */

  const char* hardware_name; /* [Optional] for display */
  const char* device_vendor; /* [Optional] for display */
  const char* pci_bus_id;    /* [Optional] "dddd:bb:dd.f" PCI address, for display */
} SP_Device;

#define SP_DEVICE_STRUCT_SIZE TF_OFFSET_OF_END(SP_Device, pci_bus_id)

typedef struct SE_CreateDeviceParams {
  size_t struct_size;
  void* ext;
  int32_t ordinal; /* the device to create */

  /* In: host memory with struct_size set by the host. Out: filled by the plugin. */
  SP_Device* device;
} SE_CreateDeviceParams;

#define SE_CREATE_DEVICE_PARAMS_STRUCT_SIZE \
  TF_OFFSET_OF_END(SE_CreateDeviceParams, device)

/* Device properties, filled by create_device_fns. A negative result means "unknown". */
typedef struct SP_DeviceFns {
  size_t struct_size;
  void* ext;

  int32_t (*get_numa_node)(const SP_Device* device);        /* [Optional] */
  int64_t (*get_memory_bandwidth)(const SP_Device* device); /* [Optional] bytes/s, on-device */
  double (*get_gflops)(const SP_Device* device);            /* [Optional] GFLOP/s estimate */
} SP_DeviceFns;

#define SP_DEVICE_FNS_STRUCT_SIZE TF_OFFSET_OF_END(SP_DeviceFns, get_gflops)

typedef struct SE_CreateDeviceFnsParams {
  size_t struct_size;
  void* ext;

  SP_DeviceFns* device_fns; /* host memory, filled by the plugin */
} SE_CreateDeviceFnsParams;

#define SE_CREATE_DEVICE_FNS_PARAMS_STRUCT_SIZE \
  TF_OFFSET_OF_END(SE_CreateDeviceFnsParams, device_fns)

/* Per-device operations, filled by create_stream_executor. Every callback receives the
 * SP_Device it was created for. Stream operations (memcpy_*, record_event, mem_zero, ...)
 * only enqueue work: they return at once, and a failure found later is reported by the
 * stream (get_stream_status, block_host_until_done). The first published version of this
 * struct ends at synchronize_all_activity; mem_zero, memset, memset32 and host_callback are
 * later additions, absent when struct_size stops short of them. */
typedef struct SP_StreamExecutor {
  size_t struct_size;
  void* ext; /* pluggable host: may hold PLUGGABLE_LiveHandlesExt */

  /* --- memory --- */
  /* Allocates `size` bytes of device memory and fills `mem`; on failure, leaves
   * mem->opaque NULL. `memory_space` is 0. */
  void (*allocate)(const SP_Device* device, uint64_t size, int64_t memory_space,
                   SP_DeviceMemoryBase* mem);

  /* Frees memory from `allocate`; a NULL opaque is a no-op. */
  void (*deallocate)(const SP_Device* device, SP_DeviceMemoryBase* memory);

  /* [Optional] Host memory usable by asynchronous copies (pinned, registered). Set both or
   * neither of host_memory_allocate / host_memory_deallocate. */
  void* (*host_memory_allocate)(const SP_Device* device, uint64_t size);

  /* [Optional] Frees memory from host_memory_allocate. */
  void (*host_memory_deallocate)(const SP_Device* device, void* mem);

  /* [Optional] Memory reachable from host and device alike; needed only when
   * SP_Platform.supports_unified_memory is set. */
  void* (*unified_memory_allocate)(const SP_Device* device, uint64_t bytes);

  /* [Optional] Frees memory from unified_memory_allocate. */
  void (*unified_memory_deallocate)(const SP_Device* device, void* location);

  /* [Optional] Fills `stats` (struct_size set by the host); returns 0 if unavailable. */
  TF_Bool (*get_allocator_stats)(const SP_Device* device,
                                 SP_AllocatorStats* stats);

  /* [Optional] Free and total device memory in bytes; returns 0 if unavailable, and then
   * need not write them. */
  TF_Bool (*device_memory_usage)(const SP_Device* device, int64_t* free,
                                 int64_t* total);

  /* --- streams: in-order queues of device work --- */
  /* Creates a stream and stores its handle in *stream. */
  void (*create_stream)(const SP_Device* device, SP_Stream* stream,
                        TF_Status* status);

  /* Destroys a stream. The host first waits for the stream's work to finish. */
  void (*destroy_stream)(const SP_Device* device, SP_Stream stream);

  /* [Optional] Work enqueued on `dependent` after this call starts only once the work
   * enqueued on `other` before it is done. */
  void (*create_stream_dependency)(const SP_Device* device, SP_Stream dependent,
                                   SP_Stream other, TF_Status* status);

  /* [Optional] The stream's error state, without waiting. */
  void (*get_stream_status)(const SP_Device* device, SP_Stream stream,
                            TF_Status* status);

  /* --- events: markers in a stream --- */
  void (*create_event)(const SP_Device* device, SP_Event* event,
                       TF_Status* status);

  void (*destroy_event)(const SP_Device* device, SP_Event event);

  /* Polls an event without waiting. */
  SE_EventStatus (*get_event_status)(const SP_Device* device, SP_Event event);

  /* Enqueues `event` on `stream`; it completes when the work before it is done. */
  void (*record_event)(const SP_Device* device, SP_Stream stream,
                       SP_Event event, TF_Status* status);

  /* Later work on `stream` waits until `event` has completed. Does not block the host. */
  void (*wait_for_event)(const SP_Device* const device, SP_Stream stream,
                         SP_Event event, TF_Status* const status);

  /* --- timers: [Optional] as a group; see ABI.md --- */
  /* [Optional] */
  void (*create_timer)(const SP_Device* device, SP_Timer* timer,
                       TF_Status* status);

  /* [Optional] */
  void (*destroy_timer)(const SP_Device* device, SP_Timer timer);

  /* [Optional] Enqueues the timer's start mark on `stream`. */
  void (*start_timer)(const SP_Device* device, SP_Stream stream, SP_Timer timer,
                      TF_Status* status);

  /* [Optional] Enqueues the timer's stop mark on `stream`. */
  void (*stop_timer)(const SP_Device* device, SP_Stream stream, SP_Timer timer,
                     TF_Status* status);

  /* --- copies. Asynchronous ones keep using the host buffer until the stream reaches
   * them; the host keeps it alive until then. --- */
  void (*memcpy_dtoh)(const SP_Device* device, SP_Stream stream, void* host_dst,
                      const SP_DeviceMemoryBase* device_src, uint64_t size,
                      TF_Status* status);

  void (*memcpy_htod)(const SP_Device* device, SP_Stream stream,
                      SP_DeviceMemoryBase* device_dst, const void* host_src,
                      uint64_t size, TF_Status* status);

  void (*memcpy_dtod)(const SP_Device* device, SP_Stream stream,
                      SP_DeviceMemoryBase* device_dst,
                      const SP_DeviceMemoryBase* device_src, uint64_t size,
                      TF_Status* status);

  /* [Optional] Copies and returns when done. */
  void (*sync_memcpy_dtoh)(const SP_Device* device, void* host_dst,
                           const SP_DeviceMemoryBase* device_src, uint64_t size,
                           TF_Status* status);

  /* [Optional] Copies and returns when done. */
  void (*sync_memcpy_htod)(const SP_Device* device,
                           SP_DeviceMemoryBase* device_dst,
                           const void* host_src, uint64_t size,
                           TF_Status* status);

  /* [Optional] Copies and returns when done. */
  void (*sync_memcpy_dtod)(const SP_Device* device,
                           SP_DeviceMemoryBase* device_dst,
                           const SP_DeviceMemoryBase* device_src, uint64_t size,
                           TF_Status* status);

  /* --- waiting --- */
  /* [Optional] Returns once `event` has completed. */
  void (*block_host_for_event)(const SP_Device* device, SP_Event event,
                               TF_Status* status);

  /* [Optional] Returns once all work enqueued on `stream` is done; reports the stream's
   * error, if any. */
  void (*block_host_until_done)(const SP_Device* device, SP_Stream stream,
                                TF_Status* status);

  /* Returns once all work on every stream of the device is done. */
  void (*synchronize_all_activity)(const SP_Device* device, TF_Status* status);

  /* --- later additions: absent when struct_size ends before them --- */
  /* [Optional] Enqueues zeroing of `size` bytes at `location`. */
  void (*mem_zero)(const SP_Device* device, SP_Stream stream,
                   SP_DeviceMemoryBase* location, uint64_t size,
                   TF_Status* status);

  /* [Optional] Enqueues filling `size` bytes at `location` with `pattern`. */
  void (*memset)(const SP_Device* device, SP_Stream stream,
                 SP_DeviceMemoryBase* location, uint8_t pattern, uint64_t size,
                 TF_Status* status);

  /* [Optional] Enqueues filling `size` bytes (a multiple of 4) at `location` with the
   * 32-bit `pattern`. */
  void (*memset32)(const SP_Device* device, SP_Stream stream,
                   SP_DeviceMemoryBase* location, uint32_t pattern,
                   uint64_t size, TF_Status* status);

  /* [Optional] Enqueues a host function: once the work before it is done, the plugin calls
   * callback_fn(callback_arg, status) exactly once, never from inside host_callback itself.
   * Returns 0 if it could not be enqueued (the function will then never run). */
  TF_Bool (*host_callback)(const SP_Device* device, SP_Stream stream,
                           SE_StatusCallbackFn callback_fn, void* callback_arg);
} SP_StreamExecutor;

#define SP_STREAMEXECUTOR_STRUCT_SIZE \
  TF_OFFSET_OF_END(SP_StreamExecutor, host_callback)

typedef struct SE_CreateStreamExecutorParams {
  size_t struct_size;
  void* ext;

  SP_StreamExecutor* stream_executor; /* host memory, filled by the plugin */
} SE_CreateStreamExecutorParams;

#define SE_CREATE_STREAM_EXECUTOR_PARAMS_STRUCT_SIZE \
  TF_OFFSET_OF_END(SE_CreateStreamExecutorParams, stream_executor)

/* The platform, filled by SE_InitPlugin. */
typedef struct SP_Platform {
  size_t struct_size;
  void* ext; /* pluggable host: may hold PLUGGABLE_PlatformInfoExt */

  /* Platform (subdevice type) name, e.g. "MY_XPU": a capital letter, then capitals and
   * underscores. Required. */
  const char* name;

  /* Device type, e.g. "GPU" or "XPU"; same character rules. Required. */
  const char* type;

  TF_Bool supports_unified_memory; /* unified_memory_allocate is available */
  TF_Bool use_bfc_allocator;       /* the host pools allocations in a BFC allocator */
  TF_Bool force_memory_growth;     /* grow the pool on demand, never reserve it all */
} SP_Platform;

#define SP_PLATFORM_STRUCT_SIZE \
  TF_OFFSET_OF_END(SP_Platform, force_memory_growth)

/* Platform-level callbacks, filled by SE_InitPlugin. A destroy_* callback frees what the
 * plugin put inside the struct, never the struct itself (the host owns it). */
typedef struct SP_PlatformFns {
  size_t struct_size;
  void* ext;

  void (*get_device_count)(const SP_Platform* platform, int* device_count,
                           TF_Status* status);

  /* Fills params->device for params->ordinal. */
  void (*create_device)(const SP_Platform* platform,
                        SE_CreateDeviceParams* params, TF_Status* status);

  void (*destroy_device)(const SP_Platform* platform, SP_Device* device);

  /* [Optional] Fills params->device_fns. */
  void (*create_device_fns)(const SP_Platform* platform,
                            SE_CreateDeviceFnsParams* params,
                            TF_Status* status);

  /* [Optional] */
  void (*destroy_device_fns)(const SP_Platform* platform,
                             SP_DeviceFns* device_fns);

  /* Fills params->stream_executor. */
  void (*create_stream_executor)(const SP_Platform* platform,
                                 SE_CreateStreamExecutorParams* params,
                                 TF_Status* status);

  void (*destroy_stream_executor)(const SP_Platform* platform,
                                  SP_StreamExecutor* stream_executor);

  /* [Optional] Fills `timer` (host memory, struct_size set). Timers need it. */
  void (*create_timer_fns)(const SP_Platform* platform, SP_TimerFns* timer,
                           TF_Status* status);

  /* [Optional] */
  void (*destroy_timer_fns)(const SP_Platform* platform,
                            SP_TimerFns* timer_fns);
} SP_PlatformFns;

#define SP_PLATFORM_FNS_STRUCT_SIZE \
  TF_OFFSET_OF_END(SP_PlatformFns, destroy_timer_fns)

/* Argument of SE_InitPlugin. The host fills the version and points `platform` and
 * `platform_fns` at zeroed structs whose struct_size it has set; the plugin fills those and
 * the two destroy callbacks. */
typedef struct SE_PlatformRegistrationParams {
  size_t struct_size;
  void* ext;

  /* The host's StreamExecutor C API version. */
  int32_t major_version;
  int32_t minor_version;
  int32_t patch_version;

  SP_Platform* platform;        /* filled by the plugin */
  SP_PlatformFns* platform_fns; /* filled by the plugin */
  /* [Optional] for the pluggable host, required by TensorFlow. Set by the plugin; they free
   * what the plugin put inside the struct, not the struct. */
  void (*destroy_platform)(SP_Platform* platform);
  void (*destroy_platform_fns)(SP_PlatformFns* platform_fns); /* [Optional], as above */
} SE_PlatformRegistrationParams;

#define SE_PLATFORM_REGISTRATION_PARAMS_STRUCT_SIZE \
  TF_OFFSET_OF_END(SE_PlatformRegistrationParams, destroy_platform_fns)

/* The plugin's entry point (defined by the plugin, called once by the host). TensorFlow
 * looks up SE_InitPlugin; the pluggable host looks up SE_InitPlugin, then SE_InitializePlugin
 * (the name in the StreamExecutor C API RFC). Defining one of them is enough. */
void SE_InitPlugin(SE_PlatformRegistrationParams* params, TF_Status* status);
void SE_InitializePlugin(SE_PlatformRegistrationParams* params,
                         TF_Status* status);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TENSORFLOW_C_EXPERIMENTAL_STREAM_EXECUTOR_STREAM_EXECUTOR_H_ */
