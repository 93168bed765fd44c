/* A small StreamExecutor plugin for the host's loader tests, compiled in variants.
 *
 * Without macros it is a correct, minimal plugin: platform "TEST_DEV" of device type "TEST",
 * one device, memory from malloc, and streams on which every operation runs at once, on the
 * calling thread (so events complete as soon as they are recorded). It never sets a status on
 * success and uses NULL as its stream, event and timer handle, both of which the API allows.
 *
 * Each macro breaks or changes one thing, the way the Vulkan loader's test driver does, so the
 * tests can show how the host treats a plugin that gets that thing wrong:
 *
 *   NO_INIT_SYMBOL            export no entry point at all
 *   USE_INITIALIZE_NAME       export SE_InitializePlugin (the RFC's name) instead of SE_InitPlugin
 *   INIT_ERROR                the entry point sets an error status
 *   PLATFORM_STRUCT_SIZE=n    SP_Platform.struct_size is n instead of SP_PLATFORM_STRUCT_SIZE
 *   PLATFORM_STRUCT_EXTRA=n   SP_Platform.struct_size is n bytes larger (a newer plugin)
 *   SE_STRUCT_SIZE_BEFORE_MEM_ZERO  SP_StreamExecutor ends before mem_zero (an older plugin)
 *   NULL_NAME, NULL_TYPE, LOWERCASE_NAME, UNTERMINATED_NAME   bad platform name or type
 *   PLATFORM_NAME=X, DEVICE_TYPE=Y         other names (duplicates of another plugin's)
 *   NULL_SE_CALLBACK=f        SP_StreamExecutor.f is NULL (NULL_SE_CALLBACK2=g: g too)
 *   NULL_PLATFORM_CALLBACK=f  SP_PlatformFns.f is NULL
 *   MAJOR_VERSION=n           claims StreamExecutor C API major version n
 *   DEVICE_COUNT=n            reports n devices
 *   FAIL_CREATE_DEVICE        create_device fails
 *   FAIL_CREATE_STREAM_EXECUTOR  create_stream_executor fails
 *   ALLOCATE_LIMIT=n          allocate of more than n bytes returns without writing the struct
 *   UNKNOWN_EXT               SP_Platform.ext starts with an extension type the host does not
 *                             know, followed by a PLATFORM_INFO extension
 *   DEFAULT_PRIORITY=n        declares priority n through PLATFORM_INFO
 *   NO_TIMERS                 no timer callbacks
 *   DLPACK_DEVICE_TYPE=n      declares DLPack device type n (PLUGGABLE_DLPackDeviceExt after
 *                             PLATFORM_INFO); DLPACK_FLAGS=m sets its flags (its "device
 *                             memory" is malloc'd host memory, so host-addressable is true);
 *                             DLPACK_EXT_SIZE=k gives that extension struct_size k
 *
 * For the conformance suite (src/pluggable/tools/conformance): CONFORMANT makes the plugin pass
 * every check (byte-accurate allocator statistics, a memory limit of CONFORMANT_MEMORY bytes
 * reported by device_memory_usage and enforced by allocate, timers that measure time), and each
 * BUG_* macro on top of it plants one defect that exactly one check must catch:
 *
 *   BUG_MEMSET32      memset32 writes the pattern's bytes in the wrong order
 *   BUG_MEMSET        memset writes pattern + 1
 *   BUG_MEM_ZERO      mem_zero leaves the last byte alone
 *   BUG_DTOD          memcpy_dtod (on a stream) copies one byte too few
 *   BUG_STATS         get_allocator_stats never counts bytes in use
 *   BUG_STATS_ROUNDED get_allocator_stats reports bytes in use in whole MiB, rounded down
 *   BUG_OOM           allocate ignores the memory limit
 *   BUG_TIMER         timers always measure 0 ns
 *   BUG_MEMORY_USAGE  device_memory_usage reports more free memory than there is in total
 *
 * NO_BFC_ALLOCATOR: SP_Platform.use_bfc_allocator is 0 (the host must not pool its memory).
 *
 * Logging (tensorflow/c/logging.h): LOGS makes the entry point log at every level, once from
 * a thread of its own; LOGS_FATAL makes it log a fatal error, which ends the process.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pluggable/plugin_ext.h"
#include "tensorflow/c/experimental/stream_executor/stream_executor.h"
#include "tensorflow/c/tf_status.h"

#ifndef PLATFORM_NAME
#define PLATFORM_NAME TEST_DEV
#endif
#ifndef DEVICE_TYPE
#define DEVICE_TYPE TEST
#endif
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#ifndef MAJOR_VERSION
#define MAJOR_VERSION SE_MAJOR
#endif
#ifndef DEVICE_COUNT
#define DEVICE_COUNT 1
#endif
#ifndef DEFAULT_PRIORITY
#define DEFAULT_PRIORITY 0
#endif

/* Live allocations, so that the tests can tell leaks from frees. */
static int64_t live_allocations;

#ifdef CONFORMANT
#ifndef CONFORMANT_MEMORY
#define CONFORMANT_MEMORY ((int64_t)1 << 30)
#endif
#include <time.h>
static int64_t bytes_in_use, peak_bytes_in_use;

/* A size header in front of each allocation, for the statistics. */
typedef struct SizedBlock {
  uint64_t size;
  uint64_t padding;
} SizedBlock;

static uint64_t realtime_ns(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#endif

/* --- memory: malloc behind an SP_DeviceMemoryBase ------------------------------------- */
static void plugin_allocate(const SP_Device* device, uint64_t size, int64_t memory_space,
                            SP_DeviceMemoryBase* mem) {
  (void)device;
  (void)memory_space;
#ifdef ALLOCATE_LIMIT
  if (size > (uint64_t)(ALLOCATE_LIMIT)) return; /* fails, leaving whatever the host passed */
#endif
  mem->struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE;
#ifdef CONFORMANT
  mem->opaque = NULL;
  mem->size = 0;
#ifndef BUG_OOM
  if (bytes_in_use + (int64_t)size > CONFORMANT_MEMORY) return;
#endif
  SizedBlock* block = size ? malloc(sizeof(SizedBlock) + size) : NULL;
  if (block == NULL) return;
  block->size = size;
  bytes_in_use += (int64_t)size;
  if (bytes_in_use > peak_bytes_in_use) peak_bytes_in_use = bytes_in_use;
  mem->opaque = block + 1;
  mem->size = size;
  live_allocations++;
#else
  mem->opaque = size ? malloc(size) : NULL;
  mem->size = mem->opaque ? size : 0;
  if (mem->opaque) live_allocations++;
#endif
}

static void plugin_deallocate(const SP_Device* device, SP_DeviceMemoryBase* mem) {
  (void)device;
  if (mem->opaque) live_allocations--;
#ifdef CONFORMANT
  if (mem->opaque) {
    SizedBlock* block = (SizedBlock*)mem->opaque - 1;
    bytes_in_use -= (int64_t)block->size;
    free(block);
  }
#else
  free(mem->opaque);
#endif
  mem->opaque = NULL;
}

static void* plugin_host_allocate(const SP_Device* device, uint64_t size) {
  (void)device;
  return malloc(size);
}

static void plugin_host_deallocate(const SP_Device* device, void* mem) {
  (void)device;
  free(mem);
}

static TF_Bool plugin_allocator_stats(const SP_Device* device, SP_AllocatorStats* stats) {
  (void)device;
  stats->num_allocs = live_allocations;
#if defined(CONFORMANT) && !defined(BUG_STATS)
  stats->bytes_in_use = bytes_in_use;
  stats->peak_bytes_in_use = peak_bytes_in_use;
#endif
#ifdef BUG_STATS_ROUNDED
  stats->bytes_in_use &= ~(int64_t)0xFFFFF;
#endif
  return 1;
}

static TF_Bool plugin_memory_usage(const SP_Device* device, int64_t* free_bytes,
                                   int64_t* total_bytes) {
  (void)device;
#ifdef CONFORMANT
  *total_bytes = CONFORMANT_MEMORY;
  *free_bytes = CONFORMANT_MEMORY - bytes_in_use;
#ifdef BUG_MEMORY_USAGE
  *free_bytes = 2 * CONFORMANT_MEMORY;
#endif
#else
  *free_bytes = 1 << 20;
  *total_bytes = 1 << 20;
#endif
  return 1;
}

/* --- streams, events and timers: NULL handles, work done at once ------------------------ */
static void plugin_create_stream(const SP_Device* device, SP_Stream* stream, TF_Status* status) {
  (void)device;
  (void)status;
  *stream = NULL;
}

static void plugin_destroy_stream(const SP_Device* device, SP_Stream stream) {
  (void)device;
  (void)stream;
}

static void plugin_stream_dependency(const SP_Device* device, SP_Stream dependent,
                                     SP_Stream other, TF_Status* status) {
  (void)device;
  (void)dependent;
  (void)other;
  (void)status;
}

static void plugin_stream_status(const SP_Device* device, SP_Stream stream, TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
}

static void plugin_create_event(const SP_Device* device, SP_Event* event, TF_Status* status) {
  (void)device;
  (void)status;
  *event = NULL;
}

static void plugin_destroy_event(const SP_Device* device, SP_Event event) {
  (void)device;
  (void)event;
}

static SE_EventStatus plugin_event_status(const SP_Device* device, SP_Event event) {
  (void)device;
  (void)event;
  return SE_EVENT_COMPLETE;
}

static void plugin_record_event(const SP_Device* device, SP_Stream stream, SP_Event event,
                                TF_Status* status) {
  (void)device;
  (void)stream;
  (void)event;
  (void)status;
}

static void plugin_wait_for_event(const SP_Device* const device, SP_Stream stream,
                                  SP_Event event, TF_Status* const status) {
  (void)device;
  (void)stream;
  (void)event;
  (void)status;
}

#ifdef CONFORMANT
/* A timer is two time stamps: its marks alternate between start and stop. */
typedef struct TestTimer {
  uint64_t marks[2];
  int next;
} TestTimer;
#endif

static void plugin_create_timer(const SP_Device* device, SP_Timer* timer, TF_Status* status) {
  (void)device;
  (void)status;
#ifdef CONFORMANT
  *timer = calloc(1, sizeof(TestTimer));
#else
  *timer = NULL;
#endif
}

static void plugin_destroy_timer(const SP_Device* device, SP_Timer timer) {
  (void)device;
#ifdef CONFORMANT
  free(timer);
#else
  (void)timer;
#endif
}

static void plugin_timer_mark(const SP_Device* device, SP_Stream stream, SP_Timer timer,
                              TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
#ifdef CONFORMANT
  TestTimer* t = (TestTimer*)timer;
  t->marks[t->next] = realtime_ns();
  t->next ^= 1;
#else
  (void)timer;
#endif
}

static uint64_t plugin_timer_nanoseconds(SP_Timer timer) {
#if defined(CONFORMANT) && !defined(BUG_TIMER)
  TestTimer* t = (TestTimer*)timer;
  return t->marks[1] > t->marks[0] ? t->marks[1] - t->marks[0] : 0;
#elif defined(CONFORMANT)
  (void)timer;
  return 0;
#else
  (void)timer;
  return 42;
#endif
}

/* --- copies: plain memcpy on the calling thread ----------------------------------------- */
static void plugin_memcpy_dtoh(const SP_Device* device, SP_Stream stream, void* host_dst,
                               const SP_DeviceMemoryBase* device_src, uint64_t size,
                               TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
  if (size) memcpy(host_dst, device_src->opaque, size);
}

static void plugin_memcpy_htod(const SP_Device* device, SP_Stream stream,
                               SP_DeviceMemoryBase* device_dst, const void* host_src,
                               uint64_t size, TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
  if (size) memcpy(device_dst->opaque, host_src, size);
}

static void plugin_memcpy_dtod(const SP_Device* device, SP_Stream stream,
                               SP_DeviceMemoryBase* device_dst,
                               const SP_DeviceMemoryBase* device_src, uint64_t size,
                               TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
#ifdef BUG_DTOD
  if (size) size--; /* plugin_sync_dtod below copies by itself, correctly */
#endif
  if (size) memcpy(device_dst->opaque, device_src->opaque, size);
}

static void plugin_sync_dtoh(const SP_Device* device, void* host_dst,
                             const SP_DeviceMemoryBase* device_src, uint64_t size,
                             TF_Status* status) {
  plugin_memcpy_dtoh(device, NULL, host_dst, device_src, size, status);
}

static void plugin_sync_htod(const SP_Device* device, SP_DeviceMemoryBase* device_dst,
                             const void* host_src, uint64_t size, TF_Status* status) {
  plugin_memcpy_htod(device, NULL, device_dst, host_src, size, status);
}

static void plugin_sync_dtod(const SP_Device* device, SP_DeviceMemoryBase* device_dst,
                             const SP_DeviceMemoryBase* device_src, uint64_t size,
                             TF_Status* status) {
#ifdef BUG_DTOD
  (void)device;
  (void)status;
  if (size) memcpy(device_dst->opaque, device_src->opaque, size);
#else
  plugin_memcpy_dtod(device, NULL, device_dst, device_src, size, status);
#endif
}

static void plugin_block_for_event(const SP_Device* device, SP_Event event, TF_Status* status) {
  (void)device;
  (void)event;
  (void)status;
}

static void plugin_block_until_done(const SP_Device* device, SP_Stream stream,
                                    TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
}

static void plugin_synchronize(const SP_Device* device, TF_Status* status) {
  (void)device;
  (void)status;
}

static void plugin_mem_zero(const SP_Device* device, SP_Stream stream,
                            SP_DeviceMemoryBase* location, uint64_t size, TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
#ifdef BUG_MEM_ZERO
  if (size) size--;
#endif
  memset(location->opaque, 0, size);
}

static void plugin_memset(const SP_Device* device, SP_Stream stream,
                          SP_DeviceMemoryBase* location, uint8_t pattern, uint64_t size,
                          TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
#ifdef BUG_MEMSET
  pattern++;
#endif
  memset(location->opaque, pattern, size);
}

static void plugin_memset32(const SP_Device* device, SP_Stream stream,
                            SP_DeviceMemoryBase* location, uint32_t pattern, uint64_t size,
                            TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
  uint32_t* words = location->opaque;
#ifdef BUG_MEMSET32
  pattern = __builtin_bswap32(pattern);
#endif
  for (uint64_t i = 0; i < size / 4; i++) words[i] = pattern;
}

static TF_Bool plugin_host_callback(const SP_Device* device, SP_Stream stream,
                                    SE_StatusCallbackFn callback_fn, void* callback_arg) {
  (void)device;
  (void)stream;
  TF_Status* status = TF_NewStatus();
  callback_fn(callback_arg, status);
  TF_DeleteStatus(status);
  return 1;
}

/* --- platform ---------------------------------------------------------------------------- */
static void plugin_device_count(const SP_Platform* platform, int* count, TF_Status* status) {
  (void)platform;
  (void)status;
  *count = DEVICE_COUNT;
}

static void plugin_create_device(const SP_Platform* platform, SE_CreateDeviceParams* params,
                                 TF_Status* status) {
  (void)platform;
  params->device->struct_size = SP_DEVICE_STRUCT_SIZE;
  params->device->ordinal = params->ordinal;
  params->device->hardware_name = "test device";
  params->device->device_vendor = "pluggable tests";
  params->device->pci_bus_id = NULL;
#ifdef FAIL_CREATE_DEVICE
  TF_SetStatus(status, TF_INTERNAL, "test plugin: create_device was told to fail");
#else
  (void)status;
#endif
}

static void plugin_destroy_device(const SP_Platform* platform, SP_Device* device) {
  (void)platform;
  (void)device;
}

static void plugin_create_stream_executor(const SP_Platform* platform,
                                          SE_CreateStreamExecutorParams* params,
                                          TF_Status* status) {
  (void)platform;
  SP_StreamExecutor* se = params->stream_executor;
  se->struct_size = SP_STREAMEXECUTOR_STRUCT_SIZE;
  se->allocate = plugin_allocate;
  se->deallocate = plugin_deallocate;
  se->host_memory_allocate = plugin_host_allocate;
  se->host_memory_deallocate = plugin_host_deallocate;
  se->get_allocator_stats = plugin_allocator_stats;
  se->device_memory_usage = plugin_memory_usage;
  se->create_stream = plugin_create_stream;
  se->destroy_stream = plugin_destroy_stream;
  se->create_stream_dependency = plugin_stream_dependency;
  se->get_stream_status = plugin_stream_status;
  se->create_event = plugin_create_event;
  se->destroy_event = plugin_destroy_event;
  se->get_event_status = plugin_event_status;
  se->record_event = plugin_record_event;
  se->wait_for_event = plugin_wait_for_event;
#ifndef NO_TIMERS
  se->create_timer = plugin_create_timer;
  se->destroy_timer = plugin_destroy_timer;
  se->start_timer = plugin_timer_mark;
  se->stop_timer = plugin_timer_mark;
#else
  (void)plugin_create_timer;
  (void)plugin_destroy_timer;
  (void)plugin_timer_mark;
#endif
  se->memcpy_dtoh = plugin_memcpy_dtoh;
  se->memcpy_htod = plugin_memcpy_htod;
  se->memcpy_dtod = plugin_memcpy_dtod;
  se->sync_memcpy_dtoh = plugin_sync_dtoh;
  se->sync_memcpy_htod = plugin_sync_htod;
  se->sync_memcpy_dtod = plugin_sync_dtod;
  se->block_host_for_event = plugin_block_for_event;
  se->block_host_until_done = plugin_block_until_done;
  se->synchronize_all_activity = plugin_synchronize;
  se->mem_zero = plugin_mem_zero;
  se->memset = plugin_memset;
  se->memset32 = plugin_memset32;
  se->host_callback = plugin_host_callback;
#ifdef SE_STRUCT_SIZE_BEFORE_MEM_ZERO
  /* An older plugin: its struct ends before mem_zero, whatever it wrote past it. */
  se->struct_size = TF_OFFSET_OF_END(SP_StreamExecutor, synchronize_all_activity);
#endif
#ifdef NULL_SE_CALLBACK
  se->NULL_SE_CALLBACK = NULL;
#endif
#ifdef NULL_SE_CALLBACK2
  se->NULL_SE_CALLBACK2 = NULL;
#endif
#ifdef FAIL_CREATE_STREAM_EXECUTOR
  TF_SetStatus(status, TF_RESOURCE_EXHAUSTED,
               "test plugin: create_stream_executor was told to fail");
#else
  (void)status;
#endif
}

static void plugin_destroy_stream_executor(const SP_Platform* platform,
                                           SP_StreamExecutor* stream_executor) {
  (void)platform;
  (void)stream_executor;
}

static void plugin_create_timer_fns(const SP_Platform* platform, SP_TimerFns* timer_fns,
                                    TF_Status* status) {
  (void)platform;
  (void)status;
  timer_fns->struct_size = SP_TIMER_FNS_STRUCT_SIZE;
  timer_fns->nanoseconds = plugin_timer_nanoseconds;
}

static void plugin_destroy_timer_fns(const SP_Platform* platform, SP_TimerFns* timer_fns) {
  (void)platform;
  (void)timer_fns;
}

static void plugin_destroy_platform(SP_Platform* platform) { (void)platform; }

static void plugin_destroy_platform_fns(SP_PlatformFns* platform_fns) { (void)platform_fns; }

/* The extension chain: optionally an unknown extension first, then PLATFORM_INFO, then
 * optionally the DLPack device. */
#ifdef DLPACK_DEVICE_TYPE
#ifndef DLPACK_FLAGS
#define DLPACK_FLAGS 0
#endif
#ifndef DLPACK_EXT_SIZE
#define DLPACK_EXT_SIZE PLUGGABLE_DLPACK_DEVICE_EXT_STRUCT_SIZE
#endif
static PLUGGABLE_DLPackDeviceExt dlpack_device = {DLPACK_EXT_SIZE, PLUGGABLE_EXT_DLPACK_DEVICE,
                                                  NULL, DLPACK_DEVICE_TYPE, DLPACK_FLAGS};
#define PLATFORM_INFO_NEXT (&dlpack_device)
#else
#define PLATFORM_INFO_NEXT NULL
#endif
static PLUGGABLE_PlatformInfoExt platform_info = {
    PLUGGABLE_PLATFORM_INFO_EXT_STRUCT_SIZE, PLUGGABLE_EXT_PLATFORM_INFO, PLATFORM_INFO_NEXT, 0,
    "test-plugin 1.0", DEFAULT_PRIORITY};

#ifdef UNKNOWN_EXT
typedef struct FutureExt {
  size_t struct_size;
  int32_t type;
  void* next;
  double something_new;
} FutureExt;
static FutureExt future_ext = {sizeof(FutureExt), (int32_t)0x504C47FF, &platform_info, 1.5};
#endif

#ifdef UNTERMINATED_NAME
/* Capitals all the way, and no NUL within the first 300 bytes. */
static char unterminated_name[300];
#endif

#ifdef NO_INIT_SYMBOL
#define ENTRY_POINT test_plugin_not_an_entry_point
#elif defined(USE_INITIALIZE_NAME)
#define ENTRY_POINT SE_InitializePlugin
#else
#define ENTRY_POINT SE_InitPlugin
#endif

#if defined(LOGS) || defined(LOGS_FATAL)
#include <pthread.h>

#include "tensorflow/c/logging.h"

/* A log line from a thread the host never saw. */
static void* log_from_a_thread(void* arg) {
  (void)arg;
  TF_Log(TF_ERROR, "from a thread of its own: %s", "ok");
  return NULL;
}

static void log_at_every_level(void) {
  TF_Log(TF_INFO, "initialising %d platform", 1);
  TF_Log(TF_WARNING, "a warning with a %s", "value");
  TF_VLog(1, "verbose at level %d", 1);
  TF_VLog(5, "too verbose to be shown");
  TF_DVLog(0, "only in debug builds");
  pthread_t thread;
  if (pthread_create(&thread, NULL, log_from_a_thread, NULL) == 0) pthread_join(thread, NULL);
#ifdef LOGS_FATAL
  TF_Log(TF_FATAL, "cannot go on: %s", "no hardware");
#endif
}
#endif

void ENTRY_POINT(SE_PlatformRegistrationParams* params, TF_Status* status) {
#if defined(LOGS) || defined(LOGS_FATAL)
  log_at_every_level();
#endif
  params->major_version = MAJOR_VERSION;
  params->minor_version = SE_MINOR;
  params->patch_version = SE_PATCH;

  SP_Platform* platform = params->platform;
#ifdef UNTERMINATED_NAME
  memset(unterminated_name, 'A', sizeof unterminated_name);
#endif
  platform->struct_size = SP_PLATFORM_STRUCT_SIZE;
#ifdef PLATFORM_STRUCT_SIZE
  platform->struct_size = PLATFORM_STRUCT_SIZE;
#endif
#ifdef PLATFORM_STRUCT_EXTRA
  platform->struct_size = SP_PLATFORM_STRUCT_SIZE + PLATFORM_STRUCT_EXTRA;
#endif
#ifdef UNKNOWN_EXT
  platform->ext = &future_ext;
#else
  platform->ext = &platform_info;
#endif
#ifdef NULL_NAME
  platform->name = NULL;
#elif defined(UNTERMINATED_NAME)
  platform->name = unterminated_name;
#elif defined(LOWERCASE_NAME)
  platform->name = "test_dev";
#else
  platform->name = STRINGIFY(PLATFORM_NAME);
#endif
#ifdef NULL_TYPE
  platform->type = NULL;
#else
  platform->type = STRINGIFY(DEVICE_TYPE);
#endif
  platform->supports_unified_memory = 0;
#ifdef NO_BFC_ALLOCATOR
  platform->use_bfc_allocator = 0;
#else
  platform->use_bfc_allocator = 1;
#endif
  platform->force_memory_growth = 0;

  SP_PlatformFns* fns = params->platform_fns;
  fns->struct_size = SP_PLATFORM_FNS_STRUCT_SIZE;
  fns->get_device_count = plugin_device_count;
  fns->create_device = plugin_create_device;
  fns->destroy_device = plugin_destroy_device;
  fns->create_stream_executor = plugin_create_stream_executor;
  fns->destroy_stream_executor = plugin_destroy_stream_executor;
#ifndef NO_TIMERS
  fns->create_timer_fns = plugin_create_timer_fns;
  fns->destroy_timer_fns = plugin_destroy_timer_fns;
#else
  (void)plugin_create_timer_fns;
  (void)plugin_destroy_timer_fns;
#endif
#ifdef NULL_PLATFORM_CALLBACK
  fns->NULL_PLATFORM_CALLBACK = NULL;
#endif
  params->destroy_platform = plugin_destroy_platform;
  params->destroy_platform_fns = plugin_destroy_platform_fns;
#ifdef INIT_ERROR
  TF_SetStatus(status, TF_FAILED_PRECONDITION, "test plugin: no device present");
#else
  (void)status;
#endif
}

/* Read by the tests through ctypes. */
int64_t test_plugin_live_allocations(void) { return live_allocations; }
