/* pluggable/plugin_ext.h: the project's extensions to TensorFlow's plugin C API.
 *
 * TensorFlow's structs keep their layouts untouched. A plugin that wants to tell the
 * pluggable host more than TensorFlow's API can carry hangs a chain of extension structs
 * off an `ext` pointer that TensorFlow leaves to the plugin:
 *
 *   SP_Platform.ext         -> PLUGGABLE_PlatformInfoExt -> PLUGGABLE_DLPackDeviceExt
 *   SP_StreamExecutor.ext   -> PLUGGABLE_LiveHandlesExt -> PLUGGABLE_StreamNamesExt
 *
 * and one chain the host fills for the plugin to read:
 *
 *   TF_ProfilerRegistrationParams.ext -> PLUGGABLE_ProfilerContextExt
 *
 * Every extension starts with the same three fields (PLUGGABLE_ExtHeader), so the host walks a
 * chain without knowing every type in it: it reads `type`, uses the structs it knows, and
 * follows `next` past the ones it does not. TensorFlow never reads these pointers, so the same
 * plugin binary still loads there. A plugin owns its extension structs and keeps them alive
 * until the struct they hang from is destroyed.
 *
 * The rules for `struct_size` are those of TensorFlow's own structs: a reader treats fields
 * past `struct_size` as absent, and new fields are only ever appended. See include/ABI.md.
 */
#ifndef PLUGGABLE_PLUGIN_EXT_H_
#define PLUGGABLE_PLUGIN_EXT_H_

#include <stddef.h>
#include <stdint.h>

#include "tensorflow/c/c_api_macros.h"
#include "tensorflow/c/experimental/stream_executor/stream_executor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLUGGABLE_EXT_MAJOR 0
#define PLUGGABLE_EXT_MINOR 4
#define PLUGGABLE_EXT_PATCH 0

/* Extension type tags. Values are never reused. TensorFlow lets a plugin keep private data in
 * SP_Platform.ext, so the tags are distinctive 32-bit values ("PLG" and a number) rather than
 * small integers. A host skips a tag of the form 0x504C47xx that it does not know (a newer
 * extension) and follows `next`; it stops at any other value, which is not an extension
 * header at all but the plugin's own data. */
#define PLUGGABLE_EXT_TAG_MASK 0xFFFFFF00u
#define PLUGGABLE_EXT_TAG_BASE 0x504C4700u
typedef enum PLUGGABLE_ExtType {
  PLUGGABLE_EXT_PLATFORM_INFO = 0x504C4701, /* PLUGGABLE_PlatformInfoExt, on SP_Platform.ext */
  PLUGGABLE_EXT_LIVE_HANDLES = 0x504C4702,  /* PLUGGABLE_LiveHandlesExt, on SP_StreamExecutor.ext */
  PLUGGABLE_EXT_DLPACK_DEVICE = 0x504C4703, /* PLUGGABLE_DLPackDeviceExt, on SP_Platform.ext */
  PLUGGABLE_EXT_STREAM_NAMES = 0x504C4704,  /* PLUGGABLE_StreamNamesExt, on SP_StreamExecutor.ext */
  PLUGGABLE_EXT_PROFILER_CONTEXT = 0x504C4705, /* PLUGGABLE_ProfilerContextExt, on
                                                  TF_ProfilerRegistrationParams.ext */
} PLUGGABLE_ExtType;

/* The prefix every extension struct begins with. */
typedef struct PLUGGABLE_ExtHeader {
  size_t struct_size;
  int32_t type; /* a PLUGGABLE_ExtType value */
  void* next;   /* the next extension in the chain, or NULL */
} PLUGGABLE_ExtHeader;

#define PLUGGABLE_EXT_HEADER_STRUCT_SIZE TF_OFFSET_OF_END(PLUGGABLE_ExtHeader, next)

/* Capability bits of PLUGGABLE_PlatformInfoExt.flags. */
/* memcpy_htod / memcpy_dtoh accept any host memory, not only host_memory_allocate's: the
 * host may hand them a caller's buffer directly, and keeps it alive until the copy is done. */
#define PLUGGABLE_PLATFORM_PAGEABLE_ASYNC_COPY ((uint64_t)1 << 0)
/* Peer copies between devices of one platform (since 0.2.0). memcpy_dtod and sync_memcpy_dtod
 * called for a device D (memcpy_dtod on a stream of D) accept a *source* pointer that lies in
 * device memory of ANY device created from the same SP_Platform (the same SE_InitPlugin call),
 * D included; [src, src + size) must still lie inside one live allocation of that device. The
 * destination must be D's own memory, as without this flag (a plugin may accept more: the
 * reference XPU's memcpy_dtod also writes into another device of the platform, as
 * TensorFlow's cross-device copy needs; this host never asks it to). The copy is ordered on D's stream
 * only: the plugin does not wait for work on the source device, so the host makes sure the
 * source is ready before it enqueues the copy (it waits for the source's producer itself) and
 * keeps the source allocation (and its device) alive until the copy is done. Without this bit
 * the source must be memory of D, as TensorFlow assumes. */
#define PLUGGABLE_PLATFORM_PEER_DTOD ((uint64_t)1 << 1)

typedef struct PLUGGABLE_PlatformInfoExt {
  size_t struct_size;
  int32_t type; /* PLUGGABLE_EXT_PLATFORM_INFO */
  void* next;
  uint64_t flags;                     /* PLUGGABLE_PLATFORM_* bits */
  const char* plugin_version;         /* free-form version string of the plugin, or NULL */
  /* Priority among plugins of the same device type when the user gives none (higher wins;
   * the host's default is 0). */
  int32_t default_priority;
} PLUGGABLE_PlatformInfoExt;

#define PLUGGABLE_PLATFORM_INFO_EXT_STRUCT_SIZE \
  TF_OFFSET_OF_END(PLUGGABLE_PlatformInfoExt, default_priority)

/* Counts of the handles a device has given out and not yet had back. Leak tests compare them
 * before and after a piece of work. */
typedef struct PLUGGABLE_LiveHandles {
  size_t struct_size;
  int64_t streams;
  int64_t events;
  int64_t timers;
  int64_t allocations;      /* device memory allocations (allocate/deallocate) */
  int64_t host_allocations; /* host_memory_allocate and unified_memory_allocate */
} PLUGGABLE_LiveHandles;

#define PLUGGABLE_LIVE_HANDLES_STRUCT_SIZE \
  TF_OFFSET_OF_END(PLUGGABLE_LiveHandles, host_allocations)

typedef struct PLUGGABLE_LiveHandlesExt {
  size_t struct_size;
  int32_t type; /* PLUGGABLE_EXT_LIVE_HANDLES */
  void* next;
  /* Fills `counts` (the host sets counts->struct_size) for `device`. */
  void (*get_live_handles)(const SP_Device* device, PLUGGABLE_LiveHandles* counts);
} PLUGGABLE_LiveHandlesExt;

#define PLUGGABLE_LIVE_HANDLES_EXT_STRUCT_SIZE \
  TF_OFFSET_OF_END(PLUGGABLE_LiveHandlesExt, get_live_handles)

/* Names for a device's streams (since 0.3.0), which a device profiler uses to label its
 * timelines ("compute", "host_to_device", ...). The host calls set_stream_name when it knows
 * what a stream is for; calling it is optional (TensorFlow never does) and a stream without a
 * name is labelled by the plugin. The plugin copies `name` (the caller keeps ownership) and
 * may shorten a long one; a later call replaces the name. A NULL device, a stream that is not
 * a live stream of `device`, or a NULL name is ignored: the call cannot fail. */
typedef struct PLUGGABLE_StreamNamesExt {
  size_t struct_size;
  int32_t type; /* PLUGGABLE_EXT_STREAM_NAMES */
  void* next;
  void (*set_stream_name)(const SP_Device* device, SP_Stream stream, const char* name);
} PLUGGABLE_StreamNamesExt;

#define PLUGGABLE_STREAM_NAMES_EXT_STRUCT_SIZE \
  TF_OFFSET_OF_END(PLUGGABLE_StreamNamesExt, set_stream_name)
/* How the platform's device memory appears to DLPack (since 0.3.0). On SP_Platform.ext's
 * chain, so one declaration covers every device of the platform; the DLPack device_id of a
 * device is its SP_Device.ordinal (0 when device_type is kDLCPU, DLPack's only CPU id).
 * Without it the host exchanges the platform's tensors through host copies only. */
/* The host may dereference the platform's device pointers (SP_DeviceMemoryBase.opaque)
 * directly, once the stream work that writes them is done: a consumer asking for kDLCPU gets
 * the device memory itself, without a copy. */
#define PLUGGABLE_DLPACK_HOST_ADDRESSABLE ((uint64_t)1 << 0)

typedef struct PLUGGABLE_DLPackDeviceExt {
  size_t struct_size;
  int32_t type; /* PLUGGABLE_EXT_DLPACK_DEVICE */
  void* next;
  /* A DLDeviceType value (dlpack/dlpack.h): kDLCUDA for a CUDA-backed plugin, kDLCPU when
   * device memory is plain host memory, kDLExtDev for memory only the plugin understands. */
  int32_t device_type;
  uint64_t flags; /* PLUGGABLE_DLPACK_* bits */
} PLUGGABLE_DLPackDeviceExt;

#define PLUGGABLE_DLPACK_DEVICE_EXT_STRUCT_SIZE \
  TF_OFFSET_OF_END(PLUGGABLE_DLPackDeviceExt, flags)

/* What the host tells a device profiler about the ops it launches (since 0.4.0). The host
 * fills it and hangs it off TF_ProfilerRegistrationParams.ext before calling TF_InitProfiler;
 * it stays valid until the profiler is destroyed. A plugin that wants its kernel events tied
 * to the host's launches (xprof's flow arrows and op statistics) keeps `correlation_id` and
 * calls it from a kernel's compute function, with that call's context: the result is the id
 * of the op run the kernel belongs to, which the host's own event of that run carries as its
 * "correlation_id" stat. 0 means "no id" (no profiling session records, or the run is not an
 * op launch); any other value is unique within a session. TensorFlow leaves `ext` NULL, so a
 * plugin must treat the extension as optional. The call is cheap and thread-safe, and must
 * only be made during the compute call that received `ctx`. */
struct TF_OpKernelContext; /* tensorflow/c/kernels.h's TF_OpKernelContext */
typedef struct PLUGGABLE_ProfilerContextExt {
  size_t struct_size;
  int32_t type; /* PLUGGABLE_EXT_PROFILER_CONTEXT */
  void* next;
  uint64_t (*correlation_id)(struct TF_OpKernelContext* ctx);
} PLUGGABLE_ProfilerContextExt;

#define PLUGGABLE_PROFILER_CONTEXT_EXT_STRUCT_SIZE \
  TF_OFFSET_OF_END(PLUGGABLE_ProfilerContextExt, correlation_id)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PLUGGABLE_PLUGIN_EXT_H_ */
