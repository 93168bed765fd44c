/* xpu_plugin.c: the XPU reference plugin's StreamExecutor entry point, its platform and its
 * devices.
 *
 * Holds:
 *   SE_InitPlugin, SE_InitializePlugin  the entry points: check the host's structs, read and
 *                                       check the environment (README.md, "Environment"),
 *                                       fill SP_Platform and SP_PlatformFns
 *   the platform and device registry    live platforms and devices; xpu_device_get, and
 *                                       xpu_peer_pin_range, which finds a peer copy's memory
 *   SP_PlatformFns callbacks            get_device_count, create/destroy_device,
 *                                       create/destroy_device_fns,
 *                                       create/destroy_stream_executor,
 *                                       create/destroy_timer_fns, destroy_platform(_fns)
 *   SP_DeviceFns callbacks              get_numa_node, get_memory_bandwidth, get_gflops
 *   the SP_StreamExecutor.ext chain     PLUGGABLE_LiveHandlesExt, PLUGGABLE_StreamNamesExt
 * The executor's memory and stream slots are filled by xpu_memory.c and xpu_stream.c; the
 * status helpers are in xpu_status.c. README.md lists every file.
 *
 * This plugin implements TensorFlow's StreamExecutor C API
 * (tensorflow/c/experimental/stream_executor/stream_executor.h) for an imaginary accelerator,
 * the "XPU", that lives entirely in host memory but behaves like real hardware, and registers
 * kernels for it through TensorFlow's kernel C API (tensorflow/c/kernels.h), so that a host
 * (TensorFlow, or this project's Python host) can be exercised on any machine.
 *
 * What is simulated:
 *   - XPU_DEVICE_COUNT devices (default 2, 0..64), platform "REF_XPU", device type "XPU".
 *   - Device memory: one arena of XPU_MEMORY_BYTES per device (default 1 GiB), reserved
 *     lazily with mmap, with its own best-fit allocator (256-byte alignment, coalescing).
 *     Exhaustion is a real out-of-memory; every device pointer handed back by the host is
 *     checked against the live allocations of that device (xpu_memory.c).
 *   - Streams: one worker thread per stream runs its FIFO asynchronously: copies, fills,
 *     event records and waits, timer marks, host callbacks. Events really complete later;
 *     waits and stream dependencies really order work across streams, also streams and
 *     events of different devices of the platform; errors are sticky per stream
 *     (xpu_stream.c).
 *   - Fault injection (XPU_FAIL: allocation, copy, fill, stream, kernel and other faults) and
 *     an artificial per-operation delay (XPU_STREAM_DELAY_US), both also settable at run time
 *     through xpu_control.h (xpu_faults.c).
 *   - Unified memory: blocks of the same arena, which the host can dereference directly.
 *   - Handle validation: streams, events, timers, devices and host allocations are kept in
 *     registries, so a destroyed or foreign handle is an error status, not a crash.
 *   - Project extensions on `ext` chains (pluggable/plugin_ext.h): platform capability flags,
 *     the DLPack device (kDLExtDev, not host-addressable), per-device
 *     live-handle counters for leak tests, and stream names for the profiler.
 *   - Peer copies (PLUGGABLE_PLATFORM_PEER_DTOD): memcpy_dtod of device D accepts a source
 *     and a destination in live allocations of any device created from the same SP_Platform
 *     (TensorFlow's cross-device copy runs on the source device's stream and writes the
 *     other device's memory); sync_memcpy_dtod accepts a peer source. The source is looked up and checked when the call is made
 *     (xpu_peer_pin_range below) and its arena mapping stays pinned until the copy is done,
 *     so even a source device destroyed too early cannot make the copy fault. The copy is
 *     ordered on D's stream only; the host waits for the source's producer before enqueueing.
 *   - Kernels (TF_InitKernel, xpu_kernels*.c): element-wise math with NumPy broadcasting,
 *     Cast, Select, BiasAdd, shape and array ops (Identity, Fill, Reshape, Transpose, ConcatV2,
 *     StridedSlice, GatherV2, ...), reductions, ArgMax, Softmax, MatMul, BatchMatMulV2, Conv2D,
 *     gradients and losses, resource-variable updates and optimizers, registered with
 *     TF_NewKernelBuilder.
 *     compute() validates synchronously, allocates outputs and enqueues the work on the
 *     stream TF_GetStream gives (checked to be a live XPU stream, with every device buffer
 *     inside a live allocation); the stream's worker runs it later, splitting large kernels
 *     across a helper-thread pool of XPU_KERNEL_THREADS threads (xpu_kernels_pool.c). No
 *     data value fails the stream: each has a defined result, as on a GPU (integer RealDiv
 *     and FloorDiv by zero give -1; README.md, "Values never fail the stream"). MatMul,
 *     BatchMatMulV2 and Conv2D share a cache-blocked GEMM with AVX-512 / AVX2 / generic
 *     micro-kernels chosen at run time (xpu_kernels_gemm.c).
 *
 *   - A device profiler (TF_InitProfiler, xpu_profiler.c): while a session runs, every stream
 *     worker records its kernels (op type and node name), copies (direction, bytes), fills,
 *     host callbacks and event records and waits, with CLOCK_REALTIME start and end, into a
 *     buffer of its own; collect_data_xspace serialises them as an XSpace (one XPlane per
 *     device, one XLine per stream) with a protobuf encoder of its own.
 *
 * What is left out:
 *   - Other peer access: apart from a device-to-device copy, a device only accepts its own
 *     memory (kernels, fills, host copies).
 *   - Memory spaces other than 0, and real NUMA placement (every device reports node 0).
 *   - Timing realism: copies run at memcpy speed; the fixed bandwidth and GFLOPS numbers are
 *     descriptive only.
 *
 * The plugin calls nothing from its host except TensorFlow's C API (TF_SetStatus,
 * TF_GetCode, TF_Message, TF_NewStatus, TF_DeleteStatus, and the kernel API: TF_NewKernelBuilder,
 * TF_GetInput, TF_AllocateOutput, TF_GetStream, ...); those symbols stay undefined in the
 * shared object and are resolved when it is loaded.
 */
#include "xpu_internal.h"

#include "dlpack/dlpack.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fixed, documented device properties (an HBM-class accelerator of moderate size). */
#define XPU_HARDWARE_NAME "XPU reference device"
#define XPU_DEVICE_VENDOR "pluggable project"
#define XPU_NUMA_NODE 0
#define XPU_MEMORY_BANDWIDTH INT64_C(900000000000) /* 900 GB/s of device memory bandwidth */
#define XPU_GFLOPS 19500.0                         /* 19.5 TFLOP/s, fp32 */

/* Live platforms (XpuPlatform*) and devices (XpuDevice*). The first lock of the order
 * (xpu_internal.h): only xpu_peer_pin_range takes another lock (one device's mu at a time)
 * while holding it; every other holder takes nothing else. */
static pthread_mutex_t g_registry_mu = PTHREAD_MUTEX_INITIALIZER;
static XpuPtrSet g_platforms;
static XpuPtrSet g_devices;
static uint64_t g_next_platform_id; /* guarded by g_registry_mu */

/* ---- configuration from the environment ------------------------------------------------- */

/* Parses XPU_DEVICE_COUNT; false with a message when it is not an integer in 0..64. */
static bool parse_device_count(const char* text, int* out, TF_Status* status) {
  if (text == NULL) {
    *out = XPU_DEFAULT_DEVICE_COUNT;
    return true;
  }
  int value = 0;
  bool ok = *text != '\0';
  for (const char* p = text; ok && *p != '\0'; p++) {
    ok = *p >= '0' && *p <= '9' && value <= XPU_MAX_DEVICE_COUNT;
    value = value * 10 + (*p - '0');
  }
  if (!ok || value > XPU_MAX_DEVICE_COUNT) {
    xpu_status(status, TF_INVALID_ARGUMENT,
               "XPU plugin: XPU_DEVICE_COUNT='%s' is not valid: expected an integer from 0 to %d",
               text, XPU_MAX_DEVICE_COUNT);
    return false;
  }
  *out = value;
  return true;
}

/* Parses XPU_MEMORY_BYTES (bytes, or a number with a K, M, G or T suffix, powers of 1024); the
 * result is rounded down to the 256-byte allocation granule. */
static bool parse_memory_bytes(const char* text, uint64_t* out, TF_Status* status) {
  if (text == NULL) {
    *out = XPU_DEFAULT_MEMORY_BYTES;
    return true;
  }
  uint64_t value = 0;
  const char* p = text;
  bool ok = *p >= '0' && *p <= '9';
  for (; ok && *p >= '0' && *p <= '9'; p++) {
    if (value > XPU_MAX_MEMORY_BYTES) ok = false;
    value = value * 10 + (uint64_t)(*p - '0');
  }
  unsigned shift = 0;
  if (ok && *p != '\0') {
    switch (*p) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      case 't': case 'T': shift = 40; break;
      default: ok = false;
    }
    ok = ok && p[1] == '\0';
  }
  if (ok && value > (XPU_MAX_MEMORY_BYTES >> shift)) ok = false;
  if (ok) value <<= shift;
  if (!ok || value < XPU_MIN_MEMORY_BYTES || value > XPU_MAX_MEMORY_BYTES) {
    xpu_status(status, TF_INVALID_ARGUMENT,
               "XPU plugin: XPU_MEMORY_BYTES='%s' is not valid: expected a byte count from 4K "
               "to 1T, as plain bytes or with a K, M, G or T suffix (e.g. 512M)", text);
    return false;
  }
  *out = value & ~(XPU_ALIGNMENT - 1);
  return true;
}

/* ---- platform ------------------------------------------------------------------------------ */

/* Returns the plugin state behind `platform`, or NULL after setting INVALID_ARGUMENT. */
static XpuPlatform* platform_get(const SP_Platform* platform, const char* fn, TF_Status* status) {
  XpuPlatform* xp = NULL;
  if (platform != NULL && XPU_FITS(platform, SP_Platform, ext)) {
    pthread_mutex_lock(&g_registry_mu);
    if (xpu_ptrset_contains(&g_platforms, platform->ext)) xp = platform->ext;
    pthread_mutex_unlock(&g_registry_mu);
  }
  if (xp == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT,
               "%s: the SP_Platform is not one initialized by this XPU plugin (or it has been "
               "destroyed)", fn);
  }
  return xp;
}

XpuDevice* xpu_device_get(const SP_Device* device, const char* fn, TF_Status* status) {
  if (device == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: the SP_Device is NULL", fn);
    return NULL;
  }
  if (!XPU_FITS(device, SP_Device, device_handle)) {
    xpu_check_size(status, fn, "SP_Device", device->struct_size,
                   TF_OFFSET_OF_END(SP_Device, device_handle));
    return NULL;
  }
  XpuDevice* dev = NULL;
  pthread_mutex_lock(&g_registry_mu);
  if (xpu_ptrset_contains(&g_devices, device->device_handle)) dev = device->device_handle;
  pthread_mutex_unlock(&g_registry_mu);
  if (dev == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT,
               "%s: the SP_Device is not a live XPU device (never created by this plugin, or "
               "already destroyed)", fn);
  }
  return dev;
}

bool xpu_peer_pin_range(XpuDevice* dev, const void* src, uint64_t size, const char* fn,
                        const char* role, TF_Status* status, XpuMapping** pin) {
  *pin = NULL;
  bool found = false, ok = false;
  /* Holding the registry lock keeps every listed device alive: destroy_device unlists a
   * device under this lock before it tears it down. Device locks are taken one at a time. */
  pthread_mutex_lock(&g_registry_mu);
  for (size_t i = 0; i < g_devices.capacity && !found; i++) {
    XpuDevice* peer = g_devices.slots[i];
    if (peer == NULL || peer == dev || peer->platform_id != dev->platform_id) continue;
    pthread_mutex_lock(&peer->mu);
    found = xpu_arena_contains(peer, src);
    if (found) ok = xpu_pin_device_range(peer, src, size, fn, role, status, pin);
    pthread_mutex_unlock(&peer->mu);
  }
  pthread_mutex_unlock(&g_registry_mu);
  if (!found) {
    xpu_status(status, TF_INVALID_ARGUMENT,
               "%s: %s %p is not inside a live allocation of XPU device %d or of "
               "another XPU device of its platform", fn, role, src, dev->ordinal);
  }
  return ok;
}

/* SP_PlatformFns.get_device_count: XPU_DEVICE_COUNT as read at SE_InitPlugin. */
static void xpu_get_device_count(const SP_Platform* platform, int* device_count,
                                 TF_Status* status) {
  XpuPlatform* xp = platform_get(platform, "get_device_count", status);
  if (xp == NULL) return;
  if (device_count == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "get_device_count: device_count is NULL");
    return;
  }
  *device_count = xp->config.device_count;
}

/* SP_PlatformFns.create_device: a device with its own (not yet mapped) arena. Each call makes
 * an independent device, even for an ordinal that already has one. */
static void xpu_create_device(const SP_Platform* platform, SE_CreateDeviceParams* params,
                              TF_Status* status) {
  const char* fn = "create_device";
  XpuPlatform* xp = platform_get(platform, fn, status);
  if (xp == NULL) return;
  if (params == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: params is NULL", fn);
    return;
  }
  if (!xpu_check_size(status, fn, "SE_CreateDeviceParams", params->struct_size,
                      SE_CREATE_DEVICE_PARAMS_STRUCT_SIZE)) {
    return;
  }
  SP_Device* device = params->device;
  if (device == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: params->device is NULL", fn);
    return;
  }
  /* ordinal and device_handle are required; the three description strings are optional. */
  if (!xpu_check_size(status, fn, "SP_Device", device->struct_size,
                      TF_OFFSET_OF_END(SP_Device, device_handle))) {
    return;
  }
  if (params->ordinal < 0 || params->ordinal >= xp->config.device_count) {
    xpu_status(status, TF_INVALID_ARGUMENT,
               "%s: ordinal %d is out of range; this platform has %d XPU device(s) "
               "(XPU_DEVICE_COUNT)", fn, params->ordinal, xp->config.device_count);
    return;
  }
  XpuDevice* dev = calloc(1, sizeof *dev);
  if (dev == NULL || pthread_mutex_init(&dev->mu, NULL) != 0) {
    free(dev);
    xpu_status(status, TF_RESOURCE_EXHAUSTED, "%s: out of host memory", fn);
    return;
  }
  if (pthread_cond_init(&dev->state_cv, NULL) != 0) {
    pthread_mutex_destroy(&dev->mu);
    free(dev);
    xpu_status(status, TF_RESOURCE_EXHAUSTED, "%s: out of host memory", fn);
    return;
  }
  dev->ordinal = params->ordinal;
  dev->platform_id = xp->id;
  dev->wait_ticket = UINT64_MAX;
  snprintf(dev->pci_bus_id, sizeof dev->pci_bus_id, "0000:%02x:00.0", (unsigned)dev->ordinal);
  xpu_memory_init_device(dev, xp->config.memory_bytes);
  pthread_mutex_lock(&g_registry_mu);
  bool ok = xpu_ptrset_insert(&g_devices, dev);
  pthread_mutex_unlock(&g_registry_mu);
  if (!ok) {
    pthread_cond_destroy(&dev->state_cv);
    pthread_mutex_destroy(&dev->mu);
    free(dev);
    xpu_status(status, TF_RESOURCE_EXHAUSTED, "%s: out of host memory", fn);
    return;
  }
  size_t host_size = device->struct_size;
  device->ext = NULL;
  device->ordinal = dev->ordinal;
  device->device_handle = dev;
  if (host_size >= TF_OFFSET_OF_END(SP_Device, hardware_name)) {
    device->hardware_name = XPU_HARDWARE_NAME;
  }
  if (host_size >= TF_OFFSET_OF_END(SP_Device, device_vendor)) {
    device->device_vendor = XPU_DEVICE_VENDOR;
  }
  if (host_size >= TF_OFFSET_OF_END(SP_Device, pci_bus_id)) device->pci_bus_id = dev->pci_bus_id;
  device->struct_size = host_size < SP_DEVICE_STRUCT_SIZE ? host_size : SP_DEVICE_STRUCT_SIZE;
}

/* SP_PlatformFns.destroy_device: joins every worker, frees the device and unmaps its arena. */
static void xpu_destroy_device(const SP_Platform* platform, SP_Device* device) {
  (void)platform; /* the device is self-contained; it may even outlive its platform */
  XpuDevice* dev = xpu_device_get(device, "destroy_device", NULL);
  /* From a host callback of this device the calling worker would have to join itself: the
   * device is left alive (leaked) rather than freed under the running callback. */
  if (dev == NULL || xpu_stream_on_worker_of(dev)) return;
  pthread_mutex_lock(&g_registry_mu);
  bool owned = xpu_ptrset_remove(&g_devices, dev);
  pthread_mutex_unlock(&g_registry_mu);
  if (!owned) return; /* another thread is destroying it */
  xpu_stream_teardown_device(dev);
  xpu_memory_teardown_device(dev);
  pthread_cond_destroy(&dev->state_cv);
  pthread_mutex_destroy(&dev->mu);
  free(dev);
  device->device_handle = NULL;
  if (XPU_FITS(device, SP_Device, pci_bus_id)) device->pci_bus_id = NULL;
}

/* SP_DeviceFns.get_numa_node: every XPU hangs off node 0 (-1 for an invalid device). */
static int32_t xpu_get_numa_node(const SP_Device* device) {
  return xpu_device_get(device, "get_numa_node", NULL) != NULL ? XPU_NUMA_NODE : -1;
}

/* SP_DeviceFns.get_memory_bandwidth: a fixed 900 GB/s (-1 for an invalid device). */
static int64_t xpu_get_memory_bandwidth(const SP_Device* device) {
  return xpu_device_get(device, "get_memory_bandwidth", NULL) != NULL ? XPU_MEMORY_BANDWIDTH : -1;
}

/* SP_DeviceFns.get_gflops: a fixed 19500 GFLOPS (-1 for an invalid device). */
static double xpu_get_gflops(const SP_Device* device) {
  return xpu_device_get(device, "get_gflops", NULL) != NULL ? XPU_GFLOPS : -1.0;
}

/* SP_PlatformFns.create_device_fns: fills the optional device queries that fit the host's
 * SP_DeviceFns. */
static void xpu_create_device_fns(const SP_Platform* platform, SE_CreateDeviceFnsParams* params,
                                  TF_Status* status) {
  const char* fn = "create_device_fns";
  if (platform_get(platform, fn, status) == NULL) return;
  if (params == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: params is NULL", fn);
    return;
  }
  if (!xpu_check_size(status, fn, "SE_CreateDeviceFnsParams", params->struct_size,
                      SE_CREATE_DEVICE_FNS_PARAMS_STRUCT_SIZE)) {
    return;
  }
  SP_DeviceFns* fns = params->device_fns;
  if (fns == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: params->device_fns is NULL", fn);
    return;
  }
  /* Every callback of SP_DeviceFns is optional: fill those the host's struct has room for. */
  if (!xpu_check_size(status, fn, "SP_DeviceFns", fns->struct_size,
                      TF_OFFSET_OF_END(SP_DeviceFns, ext))) {
    return;
  }
  fns->ext = NULL;
  if (XPU_FITS(fns, SP_DeviceFns, get_numa_node)) fns->get_numa_node = xpu_get_numa_node;
  if (XPU_FITS(fns, SP_DeviceFns, get_memory_bandwidth)) {
    fns->get_memory_bandwidth = xpu_get_memory_bandwidth;
  }
  if (XPU_FITS(fns, SP_DeviceFns, get_gflops)) fns->get_gflops = xpu_get_gflops;
  if (fns->struct_size > SP_DEVICE_FNS_STRUCT_SIZE) fns->struct_size = SP_DEVICE_FNS_STRUCT_SIZE;
}

/* SP_PlatformFns.destroy_device_fns: the table holds only static functions. */
static void xpu_destroy_device_fns(const SP_Platform* platform, SP_DeviceFns* device_fns) {
  (void)platform;
  (void)device_fns;
}

/* PLUGGABLE_LiveHandlesExt.get_live_handles: the device's outstanding handles, up to the
 * host's struct_size. */
static void xpu_get_live_handles(const SP_Device* device, PLUGGABLE_LiveHandles* counts) {
  if (counts == NULL) return;
  XpuDevice* dev = xpu_device_get(device, "get_live_handles", NULL);
  if (dev == NULL) return;
  int64_t streams = 0, events = 0, timers = 0, allocations, host_allocations;
  xpu_stream_live_handles(dev, &streams, &events, &timers);
  pthread_mutex_lock(&dev->mu);
  allocations = dev->arena.live_device_blocks;
  host_allocations = (int64_t)dev->host_allocs.count + dev->arena.live_unified_blocks;
  pthread_mutex_unlock(&dev->mu);
  if (XPU_FITS(counts, PLUGGABLE_LiveHandles, streams)) counts->streams = streams;
  if (XPU_FITS(counts, PLUGGABLE_LiveHandles, events)) counts->events = events;
  if (XPU_FITS(counts, PLUGGABLE_LiveHandles, timers)) counts->timers = timers;
  if (XPU_FITS(counts, PLUGGABLE_LiveHandles, allocations)) counts->allocations = allocations;
  if (XPU_FITS(counts, PLUGGABLE_LiveHandles, host_allocations)) {
    counts->host_allocations = host_allocations;
  }
}

/* The chain on every SP_StreamExecutor.ext; never written after initialization. */
static PLUGGABLE_StreamNamesExt g_stream_names_ext = {
    .struct_size = PLUGGABLE_STREAM_NAMES_EXT_STRUCT_SIZE,
    .type = PLUGGABLE_EXT_STREAM_NAMES,
    .next = NULL,
    .set_stream_name = xpu_stream_set_name,
};

static PLUGGABLE_LiveHandlesExt g_live_handles_ext = {
    .struct_size = PLUGGABLE_LIVE_HANDLES_EXT_STRUCT_SIZE,
    .type = PLUGGABLE_EXT_LIVE_HANDLES,
    .next = &g_stream_names_ext,
    .get_live_handles = xpu_get_live_handles,
};

/* SP_PlatformFns.create_stream_executor: fills every callback, optional ones included. */
static void xpu_create_stream_executor(const SP_Platform* platform,
                                       SE_CreateStreamExecutorParams* params, TF_Status* status) {
  const char* fn = "create_stream_executor";
  if (platform_get(platform, fn, status) == NULL) return;
  if (params == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: params is NULL", fn);
    return;
  }
  if (!xpu_check_size(status, fn, "SE_CreateStreamExecutorParams", params->struct_size,
                      SE_CREATE_STREAM_EXECUTOR_PARAMS_STRUCT_SIZE)) {
    return;
  }
  SP_StreamExecutor* se = params->stream_executor;
  if (se == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: params->stream_executor is NULL", fn);
    return;
  }
  /* Nearly every slot is required by TensorFlow, so a shorter table cannot work. */
  if (!xpu_check_size(status, fn, "SP_StreamExecutor", se->struct_size,
                      SP_STREAMEXECUTOR_STRUCT_SIZE)) {
    return;
  }
  se->struct_size = SP_STREAMEXECUTOR_STRUCT_SIZE;
  se->ext = &g_live_handles_ext;
  xpu_memory_fill_executor(se);
  xpu_stream_fill_executor(se);
}

/* SP_PlatformFns.destroy_stream_executor: the table holds only static data; device state is
 * freed by destroy_device. */
static void xpu_destroy_stream_executor(const SP_Platform* platform,
                                        SP_StreamExecutor* stream_executor) {
  (void)platform;
  if (stream_executor != NULL && XPU_FITS(stream_executor, SP_StreamExecutor, ext)) {
    stream_executor->ext = NULL;
  }
}

/* SP_PlatformFns.create_timer_fns: fills nanoseconds(). */
static void xpu_create_timer_fns(const SP_Platform* platform, SP_TimerFns* timer_fns,
                                 TF_Status* status) {
  const char* fn = "create_timer_fns";
  if (platform_get(platform, fn, status) == NULL) return;
  if (timer_fns == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: timer_fns is NULL", fn);
    return;
  }
  if (!xpu_check_size(status, fn, "SP_TimerFns", timer_fns->struct_size,
                      SP_TIMER_FNS_STRUCT_SIZE)) {
    return;
  }
  timer_fns->struct_size = SP_TIMER_FNS_STRUCT_SIZE;
  timer_fns->ext = NULL;
  xpu_stream_fill_timer_fns(timer_fns);
}

/* SP_PlatformFns.destroy_timer_fns: nothing was allocated. */
static void xpu_destroy_timer_fns(const SP_Platform* platform, SP_TimerFns* timer_fns) {
  (void)platform;
  (void)timer_fns;
}

/* SE_PlatformRegistrationParams.destroy_platform: frees the state behind SP_Platform.ext. */
static void xpu_destroy_platform(SP_Platform* platform) {
  if (platform == NULL || !XPU_FITS(platform, SP_Platform, ext)) return;
  pthread_mutex_lock(&g_registry_mu);
  bool owned = xpu_ptrset_remove(&g_platforms, platform->ext);
  pthread_mutex_unlock(&g_registry_mu);
  if (!owned) return;
  free(platform->ext);
  platform->ext = NULL;
}

/* SE_PlatformRegistrationParams.destroy_platform_fns: the table holds only static functions. */
static void xpu_destroy_platform_fns(SP_PlatformFns* platform_fns) { (void)platform_fns; }

/* ---- entry points ----------------------------------------------------------------------- */

__attribute__((visibility("default"))) void SE_InitPlugin(SE_PlatformRegistrationParams* params,
                                                          TF_Status* status) {
  const char* fn = "SE_InitPlugin";
  if (params == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: params is NULL", fn);
    return;
  }
  if (!xpu_check_size(status, fn, "SE_PlatformRegistrationParams", params->struct_size,
                      SE_PLATFORM_REGISTRATION_PARAMS_STRUCT_SIZE)) {
    return;
  }
  SP_Platform* platform = params->platform;
  SP_PlatformFns* fns = params->platform_fns;
  if (platform == NULL || fns == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: params->%s is NULL", fn,
               platform == NULL ? "platform" : "platform_fns");
    return;
  }
  if (!xpu_check_size(status, fn, "SP_Platform", platform->struct_size, SP_PLATFORM_STRUCT_SIZE) ||
      !xpu_check_size(status, fn, "SP_PlatformFns", fns->struct_size,
                      SP_PLATFORM_FNS_STRUCT_SIZE)) {
    return;
  }

  /* Read and check every setting before changing anything. */
  XpuConfig config;
  if (!parse_device_count(getenv("XPU_DEVICE_COUNT"), &config.device_count, status) ||
      !parse_memory_bytes(getenv("XPU_MEMORY_BYTES"), &config.memory_bytes, status)) {
    return;
  }
  char err[1024];
  const char* delay_text = getenv("XPU_STREAM_DELAY_US");
  uint64_t delay = 0;
  if (delay_text != NULL && !xpu_parse_stream_delay(delay_text, &delay, err, sizeof err)) {
    xpu_status(status, TF_INVALID_ARGUMENT, "XPU plugin: %s", err);
    return;
  }
  const char* inline_text = getenv("XPU_INLINE_BYTES");
  uint64_t inline_bytes = 0;
  if (inline_text != NULL && !xpu_parse_inline_bytes(inline_text, &inline_bytes, err, sizeof err)) {
    xpu_status(status, TF_INVALID_ARGUMENT, "XPU plugin: %s", err);
    return;
  }
  const char* threads_text = getenv("XPU_KERNEL_THREADS");
  int kernel_threads = 0;
  if (threads_text != NULL &&
      !xpu_parse_kernel_threads(threads_text, &kernel_threads, err, sizeof err)) {
    xpu_status(status, TF_INVALID_ARGUMENT, "XPU plugin: %s", err);
    return;
  }
  const char* split_text = getenv("XPU_ELEMENTWISE_SPLIT");
  int64_t elementwise_split = XPU_ELEMENTWISE_SPLIT_DEFAULT;
  if (split_text != NULL &&
      !xpu_parse_elementwise_split(split_text, &elementwise_split, err, sizeof err)) {
    xpu_status(status, TF_INVALID_ARGUMENT, "XPU plugin: %s", err);
    return;
  }
  const char* fail_text = getenv("XPU_FAIL");
  XpuFaultSpec* faults = NULL;
  if (fail_text != NULL && !xpu_faults_parse(fail_text, "XPU_FAIL", &faults, err, sizeof err)) {
    xpu_status(status, TF_INVALID_ARGUMENT, "XPU plugin: %s", err);
    return;
  }
  XpuPlatform* xp = calloc(1, sizeof *xp);
  bool registered = false;
  if (xp != NULL) {
    pthread_mutex_lock(&g_registry_mu);
    registered = xpu_ptrset_insert(&g_platforms, xp);
    xp->id = ++g_next_platform_id;
    pthread_mutex_unlock(&g_registry_mu);
  }
  if (!registered) {
    free(xp);
    xpu_faults_free(faults);
    xpu_status(status, TF_RESOURCE_EXHAUSTED, "%s: out of host memory", fn);
    return;
  }
  /* Unset variables leave the run-time settings (xpu_control.h) as they are. */
  if (fail_text != NULL) xpu_faults_install(faults);
  if (delay_text != NULL) XPU_SetStreamDelayUs(delay);
  if (inline_text != NULL) XPU_SetInlineBytes(inline_bytes);
  if (threads_text != NULL) xpu_pool_configure(kernel_threads);
  if (split_text != NULL) xpu_pool_configure_elementwise_split(elementwise_split);

  xp->info.struct_size = PLUGGABLE_PLATFORM_INFO_EXT_STRUCT_SIZE;
  xp->info.type = PLUGGABLE_EXT_PLATFORM_INFO;
  xp->info.next = &xp->dlpack;
  xp->info.flags = PLUGGABLE_PLATFORM_PAGEABLE_ASYNC_COPY | PLUGGABLE_PLATFORM_PEER_DTOD;
  xp->info.plugin_version = XPU_PLUGIN_VERSION;
  xp->dlpack.struct_size = PLUGGABLE_DLPACK_DEVICE_EXT_STRUCT_SIZE;
  xp->dlpack.type = PLUGGABLE_EXT_DLPACK_DEVICE;
  xp->dlpack.next = NULL;
  xp->dlpack.device_type = kDLExtDev;
  xp->dlpack.flags = 0;
  xp->config = config;

  params->major_version = SE_MAJOR;
  params->minor_version = SE_MINOR;
  params->patch_version = SE_PATCH;

  platform->struct_size = SP_PLATFORM_STRUCT_SIZE;
  platform->ext = xp;
  platform->name = XPU_PLATFORM_NAME;
  platform->type = XPU_DEVICE_TYPE;
  platform->supports_unified_memory = 1;
  platform->use_bfc_allocator = 1;
  platform->force_memory_growth = 0;

  fns->struct_size = SP_PLATFORM_FNS_STRUCT_SIZE;
  fns->ext = NULL;
  fns->get_device_count = xpu_get_device_count;
  fns->create_device = xpu_create_device;
  fns->destroy_device = xpu_destroy_device;
  fns->create_device_fns = xpu_create_device_fns;
  fns->destroy_device_fns = xpu_destroy_device_fns;
  fns->create_stream_executor = xpu_create_stream_executor;
  fns->destroy_stream_executor = xpu_destroy_stream_executor;
  fns->create_timer_fns = xpu_create_timer_fns;
  fns->destroy_timer_fns = xpu_destroy_timer_fns;

  params->destroy_platform = xpu_destroy_platform;
  params->destroy_platform_fns = xpu_destroy_platform_fns;
}

__attribute__((visibility("default"))) void SE_InitializePlugin(
    SE_PlatformRegistrationParams* params, TF_Status* status) {
  SE_InitPlugin(params, status);
}
