"""Mirror of tensorflow/c/experimental/stream_executor/stream_executor.h.

Handles (SP_Stream, SP_Event, SP_Timer) and pointers to host objects (TF_Status*) are
``c_void_p``. Function-pointer arguments that point to structs are ``c_void_p`` too, so the
host can pass ``ctypes.byref(struct)`` or a plain address; struct fields that point to
structs are ``POINTER(Struct)`` so ``.contents`` reads them. ``const char*`` fields are
``c_void_p`` as well: the host reads a plugin's strings itself, bounded, from the address.

Function-pointer types are declared once each, named ``<Struct>_<field>_fn``, with the C
prototype above. A NULL function pointer read from a struct is falsy.
"""

from __future__ import annotations

import enum
from ctypes import (
    CFUNCTYPE,
    POINTER,
    c_double,
    c_int,
    c_int8,
    c_int32,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)

from ._struct import ABIStruct, TF_Bool

SE_MAJOR = 0
SE_MINOR = 0
SE_PATCH = 1

# Opaque handles created by the plugin.
SP_Stream = c_void_p  # typedef struct SP_Stream_st* SP_Stream;
SP_Event = c_void_p  # typedef struct SP_Event_st* SP_Event;
SP_Timer = c_void_p  # typedef struct SP_Timer_st* SP_Timer;


class SE_EventStatus(enum.IntEnum):
    SE_EVENT_UNKNOWN = 0
    SE_EVENT_ERROR = 1
    SE_EVENT_PENDING = 2
    SE_EVENT_COMPLETE = 3


# typedef void (*SE_StatusCallbackFn)(void* const, TF_Status* const);
SE_StatusCallbackFn = CFUNCTYPE(None, c_void_p, c_void_p)


# --- SP_TimerFns -----------------------------------------------------------------------------
# uint64_t (*nanoseconds)(SP_Timer timer);
SP_TimerFns_nanoseconds_fn = CFUNCTYPE(c_uint64, c_void_p)


class SP_TimerFns(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ext", c_void_p),
        ("nanoseconds", SP_TimerFns_nanoseconds_fn),
    ]
    _last_field_ = "nanoseconds"
    _size_macro_ = "SP_TIMER_FNS_STRUCT_SIZE"


# --- SP_AllocatorStats -----------------------------------------------------------------------
class SP_AllocatorStats(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("num_allocs", c_int64),
        ("bytes_in_use", c_int64),
        ("peak_bytes_in_use", c_int64),
        ("largest_alloc_size", c_int64),
        ("has_bytes_limit", c_int8),
        ("bytes_limit", c_int64),
        ("bytes_reserved", c_int64),
        ("peak_bytes_reserved", c_int64),
        ("has_bytes_reservable_limit", c_int8),
        ("bytes_reservable_limit", c_int64),
        ("largest_free_block_bytes", c_int64),
    ]
    _last_field_ = "largest_free_block_bytes"
    _size_macro_ = "SP_ALLOCATORSTATS_STRUCT_SIZE"


# --- SP_DeviceMemoryBase ---------------------------------------------------------------------
class SP_DeviceMemoryBase(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ext", c_void_p),
        ("opaque", c_void_p),
        ("size", c_uint64),
        ("payload", c_uint64),
    ]
    _last_field_ = "payload"
    _size_macro_ = "SP_DEVICE_MEMORY_BASE_STRUCT_SIZE"


# --- SP_Device, SE_CreateDeviceParams --------------------------------------------------------
class SP_Device(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ext", c_void_p),
        ("ordinal", c_int32),
        ("device_handle", c_void_p),
        ("hardware_name", c_void_p),  # const char*
        ("device_vendor", c_void_p),  # const char*
        ("pci_bus_id", c_void_p),  # const char*
    ]
    _last_field_ = "pci_bus_id"
    _optional_ = ("hardware_name", "device_vendor", "pci_bus_id")
    _size_macro_ = "SP_DEVICE_STRUCT_SIZE"


class SE_CreateDeviceParams(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ext", c_void_p),
        ("ordinal", c_int32),
        ("device", POINTER(SP_Device)),
    ]
    _last_field_ = "device"
    _size_macro_ = "SE_CREATE_DEVICE_PARAMS_STRUCT_SIZE"


# --- SP_DeviceFns, SE_CreateDeviceFnsParams --------------------------------------------------
# int32_t (*get_numa_node)(const SP_Device* device);
SP_DeviceFns_get_numa_node_fn = CFUNCTYPE(c_int32, c_void_p)
# int64_t (*get_memory_bandwidth)(const SP_Device* device);
SP_DeviceFns_get_memory_bandwidth_fn = CFUNCTYPE(c_int64, c_void_p)
# double (*get_gflops)(const SP_Device* device);
SP_DeviceFns_get_gflops_fn = CFUNCTYPE(c_double, c_void_p)


class SP_DeviceFns(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ext", c_void_p),
        ("get_numa_node", SP_DeviceFns_get_numa_node_fn),
        ("get_memory_bandwidth", SP_DeviceFns_get_memory_bandwidth_fn),
        ("get_gflops", SP_DeviceFns_get_gflops_fn),
    ]
    _last_field_ = "get_gflops"
    _optional_ = ("get_numa_node", "get_memory_bandwidth", "get_gflops")
    _size_macro_ = "SP_DEVICE_FNS_STRUCT_SIZE"


class SE_CreateDeviceFnsParams(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ext", c_void_p),
        ("device_fns", POINTER(SP_DeviceFns)),
    ]
    _last_field_ = "device_fns"
    _size_macro_ = "SE_CREATE_DEVICE_FNS_PARAMS_STRUCT_SIZE"


# --- SP_StreamExecutor -----------------------------------------------------------------------
# Every callback's first argument is `const SP_Device* device` (c_void_p).
_dev = c_void_p
# void (*allocate)(const SP_Device* device, uint64_t size, int64_t memory_space,
#                  SP_DeviceMemoryBase* mem);
SP_StreamExecutor_allocate_fn = CFUNCTYPE(None, _dev, c_uint64, c_int64, c_void_p)
# void (*deallocate)(const SP_Device* device, SP_DeviceMemoryBase* memory);
SP_StreamExecutor_deallocate_fn = CFUNCTYPE(None, _dev, c_void_p)
# void* (*host_memory_allocate)(const SP_Device* device, uint64_t size);
SP_StreamExecutor_host_memory_allocate_fn = CFUNCTYPE(c_void_p, _dev, c_uint64)
# void (*host_memory_deallocate)(const SP_Device* device, void* mem);
SP_StreamExecutor_host_memory_deallocate_fn = CFUNCTYPE(None, _dev, c_void_p)
# void* (*unified_memory_allocate)(const SP_Device* device, uint64_t bytes);
SP_StreamExecutor_unified_memory_allocate_fn = CFUNCTYPE(c_void_p, _dev, c_uint64)
# void (*unified_memory_deallocate)(const SP_Device* device, void* location);
SP_StreamExecutor_unified_memory_deallocate_fn = CFUNCTYPE(None, _dev, c_void_p)
# TF_Bool (*get_allocator_stats)(const SP_Device* device, SP_AllocatorStats* stats);
SP_StreamExecutor_get_allocator_stats_fn = CFUNCTYPE(TF_Bool, _dev, c_void_p)
# TF_Bool (*device_memory_usage)(const SP_Device* device, int64_t* free, int64_t* total);
SP_StreamExecutor_device_memory_usage_fn = CFUNCTYPE(TF_Bool, _dev, c_void_p, c_void_p)
# void (*create_stream)(const SP_Device* device, SP_Stream* stream, TF_Status* status);
SP_StreamExecutor_create_stream_fn = CFUNCTYPE(None, _dev, c_void_p, c_void_p)
# void (*destroy_stream)(const SP_Device* device, SP_Stream stream);
SP_StreamExecutor_destroy_stream_fn = CFUNCTYPE(None, _dev, SP_Stream)
# void (*create_stream_dependency)(const SP_Device* device, SP_Stream dependent,
#                                  SP_Stream other, TF_Status* status);
SP_StreamExecutor_create_stream_dependency_fn = CFUNCTYPE(
    None, _dev, SP_Stream, SP_Stream, c_void_p
)
# void (*get_stream_status)(const SP_Device* device, SP_Stream stream, TF_Status* status);
SP_StreamExecutor_get_stream_status_fn = CFUNCTYPE(None, _dev, SP_Stream, c_void_p)
# void (*create_event)(const SP_Device* device, SP_Event* event, TF_Status* status);
SP_StreamExecutor_create_event_fn = CFUNCTYPE(None, _dev, c_void_p, c_void_p)
# void (*destroy_event)(const SP_Device* device, SP_Event event);
SP_StreamExecutor_destroy_event_fn = CFUNCTYPE(None, _dev, SP_Event)
# SE_EventStatus (*get_event_status)(const SP_Device* device, SP_Event event);
SP_StreamExecutor_get_event_status_fn = CFUNCTYPE(c_int, _dev, SP_Event)
# void (*record_event)(const SP_Device* device, SP_Stream stream, SP_Event event,
#                      TF_Status* status);
SP_StreamExecutor_record_event_fn = CFUNCTYPE(None, _dev, SP_Stream, SP_Event, c_void_p)
# void (*wait_for_event)(const SP_Device* const device, SP_Stream stream, SP_Event event,
#                        TF_Status* const status);
SP_StreamExecutor_wait_for_event_fn = CFUNCTYPE(None, _dev, SP_Stream, SP_Event, c_void_p)
# void (*create_timer)(const SP_Device* device, SP_Timer* timer, TF_Status* status);
SP_StreamExecutor_create_timer_fn = CFUNCTYPE(None, _dev, c_void_p, c_void_p)
# void (*destroy_timer)(const SP_Device* device, SP_Timer timer);
SP_StreamExecutor_destroy_timer_fn = CFUNCTYPE(None, _dev, SP_Timer)
# void (*start_timer)(const SP_Device* device, SP_Stream stream, SP_Timer timer,
#                     TF_Status* status);
SP_StreamExecutor_start_timer_fn = CFUNCTYPE(None, _dev, SP_Stream, SP_Timer, c_void_p)
# void (*stop_timer)(const SP_Device* device, SP_Stream stream, SP_Timer timer,
#                    TF_Status* status);
SP_StreamExecutor_stop_timer_fn = CFUNCTYPE(None, _dev, SP_Stream, SP_Timer, c_void_p)
# void (*memcpy_dtoh)(const SP_Device* device, SP_Stream stream, void* host_dst,
#                     const SP_DeviceMemoryBase* device_src, uint64_t size, TF_Status* status);
SP_StreamExecutor_memcpy_dtoh_fn = CFUNCTYPE(
    None, _dev, SP_Stream, c_void_p, c_void_p, c_uint64, c_void_p
)
# void (*memcpy_htod)(const SP_Device* device, SP_Stream stream, SP_DeviceMemoryBase* device_dst,
#                     const void* host_src, uint64_t size, TF_Status* status);
SP_StreamExecutor_memcpy_htod_fn = CFUNCTYPE(
    None, _dev, SP_Stream, c_void_p, c_void_p, c_uint64, c_void_p
)
# void (*memcpy_dtod)(const SP_Device* device, SP_Stream stream, SP_DeviceMemoryBase* device_dst,
#                     const SP_DeviceMemoryBase* device_src, uint64_t size, TF_Status* status);
SP_StreamExecutor_memcpy_dtod_fn = CFUNCTYPE(
    None, _dev, SP_Stream, c_void_p, c_void_p, c_uint64, c_void_p
)
# void (*sync_memcpy_dtoh)(const SP_Device* device, void* host_dst,
#                          const SP_DeviceMemoryBase* device_src, uint64_t size,
#                          TF_Status* status);
SP_StreamExecutor_sync_memcpy_dtoh_fn = CFUNCTYPE(
    None, _dev, c_void_p, c_void_p, c_uint64, c_void_p
)
# void (*sync_memcpy_htod)(const SP_Device* device, SP_DeviceMemoryBase* device_dst,
#                          const void* host_src, uint64_t size, TF_Status* status);
SP_StreamExecutor_sync_memcpy_htod_fn = CFUNCTYPE(
    None, _dev, c_void_p, c_void_p, c_uint64, c_void_p
)
# void (*sync_memcpy_dtod)(const SP_Device* device, SP_DeviceMemoryBase* device_dst,
#                          const SP_DeviceMemoryBase* device_src, uint64_t size,
#                          TF_Status* status);
SP_StreamExecutor_sync_memcpy_dtod_fn = CFUNCTYPE(
    None, _dev, c_void_p, c_void_p, c_uint64, c_void_p
)
# void (*block_host_for_event)(const SP_Device* device, SP_Event event, TF_Status* status);
SP_StreamExecutor_block_host_for_event_fn = CFUNCTYPE(None, _dev, SP_Event, c_void_p)
# void (*block_host_until_done)(const SP_Device* device, SP_Stream stream, TF_Status* status);
SP_StreamExecutor_block_host_until_done_fn = CFUNCTYPE(None, _dev, SP_Stream, c_void_p)
# void (*synchronize_all_activity)(const SP_Device* device, TF_Status* status);
SP_StreamExecutor_synchronize_all_activity_fn = CFUNCTYPE(None, _dev, c_void_p)
# void (*mem_zero)(const SP_Device* device, SP_Stream stream, SP_DeviceMemoryBase* location,
#                  uint64_t size, TF_Status* status);
SP_StreamExecutor_mem_zero_fn = CFUNCTYPE(None, _dev, SP_Stream, c_void_p, c_uint64, c_void_p)
# void (*memset)(const SP_Device* device, SP_Stream stream, SP_DeviceMemoryBase* location,
#                uint8_t pattern, uint64_t size, TF_Status* status);
SP_StreamExecutor_memset_fn = CFUNCTYPE(
    None, _dev, SP_Stream, c_void_p, c_uint8, c_uint64, c_void_p
)
# void (*memset32)(const SP_Device* device, SP_Stream stream, SP_DeviceMemoryBase* location,
#                  uint32_t pattern, uint64_t size, TF_Status* status);
SP_StreamExecutor_memset32_fn = CFUNCTYPE(
    None, _dev, SP_Stream, c_void_p, c_uint32, c_uint64, c_void_p
)
# TF_Bool (*host_callback)(const SP_Device* device, SP_Stream stream,
#                          SE_StatusCallbackFn callback_fn, void* callback_arg);
SP_StreamExecutor_host_callback_fn = CFUNCTYPE(
    TF_Bool, _dev, SP_Stream, SE_StatusCallbackFn, c_void_p
)
del _dev


class SP_StreamExecutor(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ext", c_void_p),
        ("allocate", SP_StreamExecutor_allocate_fn),
        ("deallocate", SP_StreamExecutor_deallocate_fn),
        ("host_memory_allocate", SP_StreamExecutor_host_memory_allocate_fn),
        ("host_memory_deallocate", SP_StreamExecutor_host_memory_deallocate_fn),
        ("unified_memory_allocate", SP_StreamExecutor_unified_memory_allocate_fn),
        ("unified_memory_deallocate", SP_StreamExecutor_unified_memory_deallocate_fn),
        ("get_allocator_stats", SP_StreamExecutor_get_allocator_stats_fn),
        ("device_memory_usage", SP_StreamExecutor_device_memory_usage_fn),
        ("create_stream", SP_StreamExecutor_create_stream_fn),
        ("destroy_stream", SP_StreamExecutor_destroy_stream_fn),
        ("create_stream_dependency", SP_StreamExecutor_create_stream_dependency_fn),
        ("get_stream_status", SP_StreamExecutor_get_stream_status_fn),
        ("create_event", SP_StreamExecutor_create_event_fn),
        ("destroy_event", SP_StreamExecutor_destroy_event_fn),
        ("get_event_status", SP_StreamExecutor_get_event_status_fn),
        ("record_event", SP_StreamExecutor_record_event_fn),
        ("wait_for_event", SP_StreamExecutor_wait_for_event_fn),
        ("create_timer", SP_StreamExecutor_create_timer_fn),
        ("destroy_timer", SP_StreamExecutor_destroy_timer_fn),
        ("start_timer", SP_StreamExecutor_start_timer_fn),
        ("stop_timer", SP_StreamExecutor_stop_timer_fn),
        ("memcpy_dtoh", SP_StreamExecutor_memcpy_dtoh_fn),
        ("memcpy_htod", SP_StreamExecutor_memcpy_htod_fn),
        ("memcpy_dtod", SP_StreamExecutor_memcpy_dtod_fn),
        ("sync_memcpy_dtoh", SP_StreamExecutor_sync_memcpy_dtoh_fn),
        ("sync_memcpy_htod", SP_StreamExecutor_sync_memcpy_htod_fn),
        ("sync_memcpy_dtod", SP_StreamExecutor_sync_memcpy_dtod_fn),
        ("block_host_for_event", SP_StreamExecutor_block_host_for_event_fn),
        ("block_host_until_done", SP_StreamExecutor_block_host_until_done_fn),
        ("synchronize_all_activity", SP_StreamExecutor_synchronize_all_activity_fn),
        # Later additions: absent when struct_size ends at synchronize_all_activity.
        ("mem_zero", SP_StreamExecutor_mem_zero_fn),
        ("memset", SP_StreamExecutor_memset_fn),
        ("memset32", SP_StreamExecutor_memset32_fn),
        ("host_callback", SP_StreamExecutor_host_callback_fn),
    ]
    _last_field_ = "host_callback"
    _first_version_last_field_ = "synchronize_all_activity"
    _optional_ = (
        "host_memory_allocate",
        "host_memory_deallocate",
        "unified_memory_allocate",
        "unified_memory_deallocate",
        "get_allocator_stats",
        "device_memory_usage",
        "create_stream_dependency",
        "get_stream_status",
        "create_timer",
        "destroy_timer",
        "start_timer",
        "stop_timer",
        "sync_memcpy_dtoh",
        "sync_memcpy_htod",
        "sync_memcpy_dtod",
        "block_host_for_event",
        "block_host_until_done",
        "mem_zero",
        "memset",
        "memset32",
        "host_callback",
    )
    _size_macro_ = "SP_STREAMEXECUTOR_STRUCT_SIZE"


class SE_CreateStreamExecutorParams(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ext", c_void_p),
        ("stream_executor", POINTER(SP_StreamExecutor)),
    ]
    _last_field_ = "stream_executor"
    _size_macro_ = "SE_CREATE_STREAM_EXECUTOR_PARAMS_STRUCT_SIZE"


# --- SP_Platform, SP_PlatformFns, SE_PlatformRegistrationParams ------------------------------
class SP_Platform(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ext", c_void_p),
        ("name", c_void_p),  # const char*
        ("type", c_void_p),  # const char*
        ("supports_unified_memory", TF_Bool),
        ("use_bfc_allocator", TF_Bool),
        ("force_memory_growth", TF_Bool),
    ]
    _last_field_ = "force_memory_growth"
    _size_macro_ = "SP_PLATFORM_STRUCT_SIZE"


# Every callback's first argument is `const SP_Platform* platform` (c_void_p).
_plat = c_void_p
# void (*get_device_count)(const SP_Platform* platform, int* device_count, TF_Status* status);
SP_PlatformFns_get_device_count_fn = CFUNCTYPE(None, _plat, c_void_p, c_void_p)
# void (*create_device)(const SP_Platform* platform, SE_CreateDeviceParams* params,
#                       TF_Status* status);
SP_PlatformFns_create_device_fn = CFUNCTYPE(None, _plat, c_void_p, c_void_p)
# void (*destroy_device)(const SP_Platform* platform, SP_Device* device);
SP_PlatformFns_destroy_device_fn = CFUNCTYPE(None, _plat, c_void_p)
# void (*create_device_fns)(const SP_Platform* platform, SE_CreateDeviceFnsParams* params,
#                           TF_Status* status);
SP_PlatformFns_create_device_fns_fn = CFUNCTYPE(None, _plat, c_void_p, c_void_p)
# void (*destroy_device_fns)(const SP_Platform* platform, SP_DeviceFns* device_fns);
SP_PlatformFns_destroy_device_fns_fn = CFUNCTYPE(None, _plat, c_void_p)
# void (*create_stream_executor)(const SP_Platform* platform,
#                                SE_CreateStreamExecutorParams* params, TF_Status* status);
SP_PlatformFns_create_stream_executor_fn = CFUNCTYPE(None, _plat, c_void_p, c_void_p)
# void (*destroy_stream_executor)(const SP_Platform* platform,
#                                 SP_StreamExecutor* stream_executor);
SP_PlatformFns_destroy_stream_executor_fn = CFUNCTYPE(None, _plat, c_void_p)
# void (*create_timer_fns)(const SP_Platform* platform, SP_TimerFns* timer, TF_Status* status);
SP_PlatformFns_create_timer_fns_fn = CFUNCTYPE(None, _plat, c_void_p, c_void_p)
# void (*destroy_timer_fns)(const SP_Platform* platform, SP_TimerFns* timer_fns);
SP_PlatformFns_destroy_timer_fns_fn = CFUNCTYPE(None, _plat, c_void_p)
del _plat


class SP_PlatformFns(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ext", c_void_p),
        ("get_device_count", SP_PlatformFns_get_device_count_fn),
        ("create_device", SP_PlatformFns_create_device_fn),
        ("destroy_device", SP_PlatformFns_destroy_device_fn),
        ("create_device_fns", SP_PlatformFns_create_device_fns_fn),
        ("destroy_device_fns", SP_PlatformFns_destroy_device_fns_fn),
        ("create_stream_executor", SP_PlatformFns_create_stream_executor_fn),
        ("destroy_stream_executor", SP_PlatformFns_destroy_stream_executor_fn),
        ("create_timer_fns", SP_PlatformFns_create_timer_fns_fn),
        ("destroy_timer_fns", SP_PlatformFns_destroy_timer_fns_fn),
    ]
    _last_field_ = "destroy_timer_fns"
    _optional_ = (
        "create_device_fns",
        "destroy_device_fns",
        "create_timer_fns",
        "destroy_timer_fns",
    )
    _size_macro_ = "SP_PLATFORM_FNS_STRUCT_SIZE"


# void (*destroy_platform)(SP_Platform* platform);
SE_PlatformRegistrationParams_destroy_platform_fn = CFUNCTYPE(None, c_void_p)
# void (*destroy_platform_fns)(SP_PlatformFns* platform_fns);
SE_PlatformRegistrationParams_destroy_platform_fns_fn = CFUNCTYPE(None, c_void_p)


class SE_PlatformRegistrationParams(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ext", c_void_p),
        ("major_version", c_int32),
        ("minor_version", c_int32),
        ("patch_version", c_int32),
        ("platform", POINTER(SP_Platform)),
        ("platform_fns", POINTER(SP_PlatformFns)),
        ("destroy_platform", SE_PlatformRegistrationParams_destroy_platform_fn),
        ("destroy_platform_fns", SE_PlatformRegistrationParams_destroy_platform_fns_fn),
    ]
    _last_field_ = "destroy_platform_fns"
    _optional_ = ("destroy_platform", "destroy_platform_fns")  # TensorFlow requires both
    _size_macro_ = "SE_PLATFORM_REGISTRATION_PARAMS_STRUCT_SIZE"


# void SE_InitPlugin(SE_PlatformRegistrationParams* params, TF_Status* status);
# void SE_InitializePlugin(SE_PlatformRegistrationParams* params, TF_Status* status);
SE_InitPlugin_fn = CFUNCTYPE(None, c_void_p, c_void_p)
SE_INIT_PLUGIN_SYMBOLS = ("SE_InitPlugin", "SE_InitializePlugin")  # looked up in this order

SP_TIMER_FNS_STRUCT_SIZE = SP_TimerFns.struct_size()
SP_ALLOCATORSTATS_STRUCT_SIZE = SP_AllocatorStats.struct_size()
SP_DEVICE_MEMORY_BASE_STRUCT_SIZE = SP_DeviceMemoryBase.struct_size()
SP_DEVICE_STRUCT_SIZE = SP_Device.struct_size()
SE_CREATE_DEVICE_PARAMS_STRUCT_SIZE = SE_CreateDeviceParams.struct_size()
SP_DEVICE_FNS_STRUCT_SIZE = SP_DeviceFns.struct_size()
SE_CREATE_DEVICE_FNS_PARAMS_STRUCT_SIZE = SE_CreateDeviceFnsParams.struct_size()
SP_STREAMEXECUTOR_STRUCT_SIZE = SP_StreamExecutor.struct_size()
SE_CREATE_STREAM_EXECUTOR_PARAMS_STRUCT_SIZE = SE_CreateStreamExecutorParams.struct_size()
SP_PLATFORM_STRUCT_SIZE = SP_Platform.struct_size()
SP_PLATFORM_FNS_STRUCT_SIZE = SP_PlatformFns.struct_size()
SE_PLATFORM_REGISTRATION_PARAMS_STRUCT_SIZE = SE_PlatformRegistrationParams.struct_size()

STRUCTS = (
    SP_TimerFns,
    SP_AllocatorStats,
    SP_DeviceMemoryBase,
    SP_Device,
    SE_CreateDeviceParams,
    SP_DeviceFns,
    SE_CreateDeviceFnsParams,
    SP_StreamExecutor,
    SE_CreateStreamExecutorParams,
    SP_Platform,
    SP_PlatformFns,
    SE_PlatformRegistrationParams,
)
