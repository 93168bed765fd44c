/* Hostile plugins: the minimal test plugin (test_plugin.c, included below) wrapped by an entry
 * point that misbehaves in one chosen way, so that the tests can show that no plugin takes the
 * host down, hangs it, or gets bad data or text past it.
 *
 * Exactly one HOSTILE_* macro is meant to be set (none: the wrapper changes nothing):
 *
 *   crashes, exits and hangs, by step (the probe must report each, the host survive it)
 *   HOSTILE_SEGV_IN_INIT, HOSTILE_ABORT_IN_INIT, HOSTILE_EXIT_IN_INIT, HOSTILE_EXIT0_IN_INIT,
 *   HOSTILE_KILL_IN_INIT, HOSTILE_FPE_IN_INIT, HOSTILE_BUS_IN_INIT, HOSTILE_HANG_IN_INIT
 *   HOSTILE_SEGV_IN_DEVICE_COUNT, HOSTILE_ABORT_IN_CREATE_DEVICE, HOSTILE_HANG_IN_CREATE_DEVICE,
 *   HOSTILE_EXIT_IN_CREATE_STREAM_EXECUTOR, HOSTILE_ABORT_IN_INIT_KERNEL,
 *   HOSTILE_HANG_IN_INIT_KERNEL, HOSTILE_SEGV_IN_DESTROY_PLATFORM
 *
 *   data the host must refuse, naming the field
 *   HOSTILE_INT_MAX_DEVICES, HOSTILE_DEVICE_TYPE_CPU, HOSTILE_HUGE_PLATFORM_STRUCT,
 *   HOSTILE_HUGE_PLATFORM_FNS_STRUCT, HOSTILE_HUGE_SE_STRUCT, HOSTILE_HUGE_DEVICE_STRUCT,
 *   HOSTILE_NEGATIVE_MEMORY, HOSTILE_FREE_ABOVE_TOTAL
 *
 *   fields set by the test at run time, for property-based tests
 *   HOSTILE_CONFIGURABLE: hostile_set(field, value) sets, before the next SE_InitPlugin, one
 *   of platform_struct_size, platform_fns_struct_size, se_struct_size, device_struct_size,
 *   timer_fns_struct_size, major_version, device_count, memory_free, memory_total,
 *   event_status; hostile_reset() forgets them all. Unset fields keep the plugin's values.
 *
 *   a planted memory error, for the sanitizer step of .ci/run to prove it catches one
 *   HOSTILE_HEAP_OVERFLOW_IN_INIT (writes one byte past a heap block; otherwise harmless)
 *
 *   text the host must bound and escape
 *   HOSTILE_HUGE_MESSAGE (16 MiB in the init status), HOSTILE_ESCAPE_MESSAGE (terminal escape
 *   codes in it), HOSTILE_ESCAPE_DEVICE_NAME (in SP_Device.hardware_name),
 *   HOSTILE_HUGE_DEVICE_MESSAGE (16 MiB in create_device's status)
 *
 *   crashes after loading, in what a user does next (the probe must exercise each step)
 *   HOSTILE_SEGV_IN_CREATE_STREAM, HOSTILE_BOGUS_ALLOCATE (allocate hands out an address
 *   nothing is mapped at), HOSTILE_SEGV_IN_COMPUTE (a Neg kernel whose compute crashes),
 *   HOSTILE_SEGV_IN_PROFILER_START (a profiler whose start crashes),
 *   HOSTILE_SEGV_UNLESS_PROBE (SE_InitPlugin crashes unless its command line says "probe":
 *   a plugin that behaves only where it thinks it is watched)
 *
 *   HOSTILE_DUMP_PROCESS: SE_InitPlugin copies /proc/self/cmdline and /proc/self/environ, and
 *   lists where its open descriptors lead, into $HOSTILE_DUMP_DIR/<pid>.{cmdline,environ,fds}:
 *   what a plugin could look at to tell the probe from the user's process
 *
 *   HOSTILE_SLOW_KERNELS: 40 Neg kernels whose compute each sleeps 600 ms: every step is
 *   within its time limit, all of them together are not
 *
 *   a kernel's failure text the host must bound and escape
 *   HOSTILE_ESCAPE_KERNEL_MESSAGE (a Neg kernel failing with escape codes, CR and LF in 8 KiB)
 *
 *   events and waits the host must bound (they load; the runtime tests use them)
 *   HOSTILE_EVENT_STATUS_77 (get_event_status returns a value outside SE_EventStatus),
 *   HOSTILE_EVENT_ERROR (every event completes with SE_EVENT_ERROR),
 *   HOSTILE_EVENT_NEVER_COMPLETES (SE_EVENT_PENDING for ever), HOSTILE_BLOCKING_HANGS (the
 *   blocking calls never return; the event statuses stay pending)
 *
 *   what a plugin does wrong after loading (they load; tests/runtime/test_hostile_runtime.py)
 *   HOSTILE_STREAM_DATA_LOSS (streams have handles of their own; work enqueued on a stream
 *   while hostile_arm(1) is in force loses its data and makes that stream's
 *   get_stream_status report TF_DATA_LOSS for good; hostile_arm(0) ends the fault),
 *   HOSTILE_OVERLAPPING_ALLOCATE (allocate hands out blocks of one static arena for every
 *   device; armed, it hands out the block it handed out last again, while that is in use;
 *   DEVICE_COUNT=2 gives two devices),
 *   HOSTILE_SHORT_ALLOCATE (allocate reports half the size asked),
 *   HOSTILE_MISALIGNED_ALLOCATE (allocate returns an address 8 bytes past a 256-byte one),
 *   HOSTILE_OVERLAPPING_HOST_ALLOCATE, HOSTILE_MISALIGNED_HOST_ALLOCATE (the same misdeeds,
 *   armed, of host_memory_allocate and unified_memory_allocate, which share one arena; the
 *   platform supports unified memory),
 *   HOSTILE_DESTROY_STREAM_HANGS, HOSTILE_PROFILER_START_HANGS, HOSTILE_COMPUTE_HANGS (the
 *   call never returns once hostile_arm(1) was called; the plugin then counts the calls it
 *   still gets, hostile_calls_after_wedged(), reported on stderr at exit as
 *   "HOSTILE_CALLS_AFTER_WEDGED n"), HOSTILE_WRITES_PAST_OUTPUT (its Neg
 *   kernel writes 16 bytes past the end of its output), HOSTILE_WRITES_PAST_TEMP (16 bytes
 *   past a TF_AllocateTemp buffer it then deletes), HOSTILE_WRITES_PAST_FORWARDED (past an
 *   output from TF_ForwardInputOrAllocateOutput), HOSTILE_WRITES_PAST_SET_OUTPUT (past a
 *   temporary it makes its output with TF_SetOutput), HOSTILE_LATE_CALLBACK (host_callback
 *   invokes the callback from a thread of its own 300 ms later, after the stream reports the
 *   work done), HOSTILE_LATE_STATUS_WRITE (create_event keeps its TF_Status*, and the next
 *   record_event, or the LATE_STATUS_CALLS-th one after it, writes an error into it). The
 *   COMPUTE_HANGS and WRITES_PAST_* variants register Neg (T=float) for their device; the
 *   PROFILER_START_HANGS variant has a profiler.
 */
#define _DEFAULT_SOURCE 1 /* readlink, under -std=c11 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NO_INIT_SYMBOL 1
#include "test_plugin.c"

#if defined(HOSTILE_SEGV_IN_COMPUTE) || defined(HOSTILE_ESCAPE_KERNEL_MESSAGE) || \
    defined(HOSTILE_SLOW_KERNELS) || defined(HOSTILE_COMPUTE_HANGS) ||                    \
    defined(HOSTILE_WRITES_PAST_OUTPUT) || defined(HOSTILE_WRITES_PAST_TEMP) ||            \
    defined(HOSTILE_WRITES_PAST_FORWARDED) || defined(HOSTILE_WRITES_PAST_SET_OUTPUT)
#include "tensorflow/c/kernels.h"
#define HOSTILE_KERNEL 1
#endif
#if defined(HOSTILE_SEGV_IN_PROFILER_START) || defined(HOSTILE_PROFILER_START_HANGS)
#include "tensorflow/c/experimental/pluggable_profiler/pluggable_profiler.h"
#define HOSTILE_PROFILER 1
#endif

/* A real invalid write, not a raised signal; not NULL, so that UBSan's null check (in the
 * sanitizer build) leaves the SIGSEGV to happen. */
__attribute__((unused)) static void write_nowhere(void) {
  volatile int* nowhere = (volatile int*)(uintptr_t)16;
  *nowhere = 1;
}

/* Never returns, and uses no CPU while it waits to be killed. */
static void hang_forever(void) {
  for (;;) pause();
}

/* The host's time limits work only if it never waits in a call like these: they can block. */
#if defined(HOSTILE_HUGE_MESSAGE) || defined(HOSTILE_HUGE_DEVICE_MESSAGE)
static void set_huge_status(TF_Status* status) {
  size_t size = (size_t)16 << 20;
  char* text = malloc(size + 1);
  if (text == NULL) return;
  memset(text, 'M', size);
  text[size] = '\0';
  TF_SetStatus(status, TF_INTERNAL, text);
  free(text);
}
#endif

#ifdef HOSTILE_CONFIGURABLE
/* The fields a test may set, and whether it did. */
enum {
  PLATFORM_STRUCT_SIZE_FIELD, PLATFORM_FNS_STRUCT_SIZE_FIELD, SE_STRUCT_SIZE_FIELD,
  DEVICE_STRUCT_SIZE_FIELD, TIMER_FNS_STRUCT_SIZE_FIELD, MAJOR_VERSION_FIELD,
  DEVICE_COUNT_FIELD, MEMORY_FREE_FIELD, MEMORY_TOTAL_FIELD, EVENT_STATUS_FIELD, FIELD_COUNT
};
static const char* const field_names[FIELD_COUNT] = {
    "platform_struct_size", "platform_fns_struct_size", "se_struct_size",
    "device_struct_size", "timer_fns_struct_size", "major_version", "device_count",
    "memory_free", "memory_total", "event_status"};
static int64_t field_values[FIELD_COUNT];
static int field_set[FIELD_COUNT];

/* Sets one field; returns 0, or -1 for a name it does not know. */
__attribute__((visibility("default"))) int hostile_set(const char* field, int64_t value) {
  for (int i = 0; i < FIELD_COUNT; i++) {
    if (strcmp(field, field_names[i]) == 0) {
      field_values[i] = value;
      field_set[i] = 1;
      return 0;
    }
  }
  return -1;
}

__attribute__((visibility("default"))) void hostile_reset(void) {
  memset(field_set, 0, sizeof field_set);
}

#define CONFIGURED(field, target, type) \
  if (field_set[field]) (target) = (type)field_values[field]
#else
#define CONFIGURED(field, target, type) (void)0
#endif

#ifdef HOSTILE_SEGV_UNLESS_PROBE
/* Whether this process's command line mentions "probe" anywhere. */
static int command_line_says_probe(void) {
  char line[65536];
  int fd = open("/proc/self/cmdline", O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, line, sizeof line - 1);
  close(fd);
  for (ssize_t i = 0; i < n; i++) {
    if (line[i] == '\0') line[i] = ' ';
  }
  line[n > 0 ? n : 0] = '\0';
  return strstr(line, "probe") != NULL;
}
#endif

#ifdef HOSTILE_DUMP_PROCESS
#include <dirent.h>

static void dump_file(const char* from, const char* dir, const char* suffix) {
  char to[4096];
  snprintf(to, sizeof to, "%s/%d.%s", dir, (int)getpid(), suffix);
  int in = open(from, O_RDONLY);
  int out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  char buffer[4096];
  ssize_t n;
  while (in >= 0 && out >= 0 && (n = read(in, buffer, sizeof buffer)) > 0) {
    if (write(out, buffer, (size_t)n) != n) break;
  }
  if (in >= 0) close(in);
  if (out >= 0) close(out);
}

static void dump_process(void) {
  const char* dir = getenv("HOSTILE_DUMP_DIR");
  if (dir == NULL) return;
  dump_file("/proc/self/cmdline", dir, "cmdline");
  dump_file("/proc/self/environ", dir, "environ");
  char to[4096];
  snprintf(to, sizeof to, "%s/%d.fds", dir, (int)getpid());
  FILE* out = fopen(to, "w");
  DIR* fds = opendir("/proc/self/fd");
  struct dirent* entry;
  while (out != NULL && fds != NULL && (entry = readdir(fds)) != NULL) {
    char link[300], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%s", entry->d_name);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n > 0) fprintf(out, "%.*s\n", (int)n, target);
  }
  if (fds != NULL) closedir(fds);
  if (out != NULL) fclose(out);
}
#endif

#ifdef HOSTILE_SEGV_IN_CREATE_STREAM
static void hostile_create_stream(const SP_Device* device, SP_Stream* stream,
                                  TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
  write_nowhere();
}
#endif

#ifdef HOSTILE_BOGUS_ALLOCATE
/* An address aligned as the host asks, at which nothing is mapped. */
static void hostile_allocate(const SP_Device* device, uint64_t size, int64_t memory_space,
                             SP_DeviceMemoryBase* mem) {
  (void)device;
  (void)memory_space;
  mem->struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE;
  mem->opaque = (void*)(uintptr_t)0x1000;
  mem->size = size;
}

static void hostile_deallocate(const SP_Device* device, SP_DeviceMemoryBase* mem) {
  (void)device;
  mem->opaque = NULL;
}
#endif

static void (*original_create_device)(const SP_Platform*, SE_CreateDeviceParams*, TF_Status*);
static void (*original_create_stream_executor)(const SP_Platform*,
                                               SE_CreateStreamExecutorParams*, TF_Status*);

static void hostile_device_count(const SP_Platform* platform, int* count, TF_Status* status) {
  (void)platform;
  (void)status;
#ifdef HOSTILE_SEGV_IN_DEVICE_COUNT
  raise(SIGSEGV);
#endif
#ifdef HOSTILE_INT_MAX_DEVICES
  *count = INT32_MAX;
#else
  *count = DEVICE_COUNT;
#endif
  CONFIGURED(DEVICE_COUNT_FIELD, *count, int);
}

static void hostile_create_device(const SP_Platform* platform, SE_CreateDeviceParams* params,
                                  TF_Status* status) {
#ifdef HOSTILE_ABORT_IN_CREATE_DEVICE
  abort();
#endif
#ifdef HOSTILE_HANG_IN_CREATE_DEVICE
  hang_forever();
#endif
  original_create_device(platform, params, status);
  CONFIGURED(DEVICE_STRUCT_SIZE_FIELD, params->device->struct_size, size_t);
#ifdef HOSTILE_HUGE_DEVICE_STRUCT
  params->device->struct_size = (size_t)1 << 40;
#endif
#ifdef HOSTILE_ESCAPE_DEVICE_NAME
  params->device->hardware_name = "evil\x1b]0;pwned\x07\x1b[2J device";
#endif
#ifdef HOSTILE_HUGE_DEVICE_MESSAGE
  set_huge_status(status);
#endif
}

static SE_EventStatus hostile_event_status(const SP_Device* device, SP_Event event) {
  (void)device;
  (void)event;
#if defined(HOSTILE_CONFIGURABLE)
  SE_EventStatus state = SE_EVENT_COMPLETE;
  CONFIGURED(EVENT_STATUS_FIELD, state, SE_EventStatus);
  return state;
#elif defined(HOSTILE_EVENT_STATUS_77)
  return (SE_EventStatus)77;
#elif defined(HOSTILE_EVENT_ERROR)
  return SE_EVENT_ERROR;
#else
  return SE_EVENT_PENDING;
#endif
}

static void hostile_block_for_event(const SP_Device* device, SP_Event event,
                                    TF_Status* status) {
  (void)device;
  (void)event;
  (void)status;
  hang_forever();
}

static void hostile_block_until_done(const SP_Device* device, SP_Stream stream,
                                     TF_Status* status) {
  (void)device;
  (void)stream;
  (void)status;
  hang_forever();
}

static void hostile_synchronize(const SP_Device* device, TF_Status* status) {
  (void)device;
  (void)status;
  hang_forever();
}

static TF_Bool hostile_memory_usage(const SP_Device* device, int64_t* free_bytes,
                                    int64_t* total_bytes) {
  (void)device;
#if defined(HOSTILE_NEGATIVE_MEMORY)
  *free_bytes = 0;
  *total_bytes = -4096;
#elif defined(HOSTILE_FREE_ABOVE_TOTAL)
  *free_bytes = 2 << 20;
  *total_bytes = 1 << 20;
#else
  *free_bytes = 1 << 20;
  *total_bytes = 1 << 20;
#endif
  CONFIGURED(MEMORY_FREE_FIELD, *free_bytes, int64_t);
  CONFIGURED(MEMORY_TOTAL_FIELD, *total_bytes, int64_t);
  return 1;
}

static void hostile_runtime_setup(SP_StreamExecutor* se);

static void hostile_create_stream_executor(const SP_Platform* platform,
                                           SE_CreateStreamExecutorParams* params,
                                           TF_Status* status) {
#ifdef HOSTILE_EXIT_IN_CREATE_STREAM_EXECUTOR
  exit(4);
#endif
  original_create_stream_executor(platform, params, status);
  SP_StreamExecutor* se = params->stream_executor;
  (void)se;
#ifdef HOSTILE_HUGE_SE_STRUCT
  se->struct_size = (size_t)1 << 40;
#endif
  CONFIGURED(SE_STRUCT_SIZE_FIELD, se->struct_size, size_t);
#if defined(HOSTILE_EVENT_STATUS_77) || defined(HOSTILE_EVENT_ERROR) || \
    defined(HOSTILE_EVENT_NEVER_COMPLETES) || defined(HOSTILE_BLOCKING_HANGS) || \
    defined(HOSTILE_CONFIGURABLE)
  se->get_event_status = hostile_event_status;
#else
  (void)hostile_event_status;
#endif
#if defined(HOSTILE_EVENT_NEVER_COMPLETES) || defined(HOSTILE_BLOCKING_HANGS)
  /* Without the blocking callbacks the host polls; with them (BLOCKING_HANGS) it must not
   * trust them to return. */
  se->block_host_for_event = NULL;
  se->block_host_until_done = NULL;
#endif
  hostile_runtime_setup(se);
#ifdef HOSTILE_BLOCKING_HANGS
  se->block_host_for_event = hostile_block_for_event;
  se->block_host_until_done = hostile_block_until_done;
  se->synchronize_all_activity = hostile_synchronize;
#else
  (void)hostile_block_for_event;
  (void)hostile_block_until_done;
  (void)hostile_synchronize;
#endif
#ifdef HOSTILE_SEGV_IN_CREATE_STREAM
  se->create_stream = hostile_create_stream;
#endif
#ifdef HOSTILE_BOGUS_ALLOCATE
  se->allocate = hostile_allocate;
  se->deallocate = hostile_deallocate;
#endif
#if defined(HOSTILE_NEGATIVE_MEMORY) || defined(HOSTILE_FREE_ABOVE_TOTAL) || \
    defined(HOSTILE_CONFIGURABLE)
  se->device_memory_usage = hostile_memory_usage;
#else
  (void)hostile_memory_usage;
#endif
}

#ifdef HOSTILE_CONFIGURABLE
static void (*original_create_timer_fns)(const SP_Platform*, SP_TimerFns*, TF_Status*);

static void configured_create_timer_fns(const SP_Platform* platform, SP_TimerFns* timer_fns,
                                        TF_Status* status) {
  original_create_timer_fns(platform, timer_fns, status);
  timer_fns->struct_size = (size_t)field_values[TIMER_FNS_STRUCT_SIZE_FIELD];
}
#endif

#ifdef HOSTILE_HEAP_OVERFLOW_IN_INIT
/* A global, so that the optimiser keeps the allocation and the store. */
static char* volatile planted_block;
#endif

#ifdef HOSTILE_SEGV_IN_DESTROY_PLATFORM
static void hostile_destroy_platform(SP_Platform* platform) {
  (void)platform;
  raise(SIGSEGV);
}
#endif

void SE_InitPlugin(SE_PlatformRegistrationParams* params, TF_Status* status) {
#ifdef HOSTILE_SEGV_IN_INIT
  write_nowhere();
#endif
#ifdef HOSTILE_SEGV_UNLESS_PROBE
  if (!command_line_says_probe()) write_nowhere();
#endif
#ifdef HOSTILE_DUMP_PROCESS
  dump_process();
#endif
#ifdef HOSTILE_ABORT_IN_INIT
  abort();
#endif
#ifdef HOSTILE_EXIT_IN_INIT
  exit(3);
#endif
#ifdef HOSTILE_EXIT0_IN_INIT
  _exit(0);
#endif
#ifdef HOSTILE_KILL_IN_INIT
  raise(SIGKILL);
#endif
#ifdef HOSTILE_FPE_IN_INIT
  raise(SIGFPE);
#endif
#ifdef HOSTILE_BUS_IN_INIT
  raise(SIGBUS);
#endif
#ifdef HOSTILE_HANG_IN_INIT
  hang_forever();
#endif
#ifdef HOSTILE_HEAP_OVERFLOW_IN_INIT
  {
    volatile size_t past = 16;
    planted_block = malloc(16);
    if (planted_block != NULL) planted_block[past] = 1; /* out of bounds: ASan must say so */
    free(planted_block);
  }
#endif
  test_plugin_not_an_entry_point(params, status);
  SP_PlatformFns* fns = params->platform_fns;
  original_create_device = fns->create_device;
  original_create_stream_executor = fns->create_stream_executor;
  fns->get_device_count = hostile_device_count;
  fns->create_device = hostile_create_device;
  fns->create_stream_executor = hostile_create_stream_executor;
#ifdef HOSTILE_DEVICE_TYPE_CPU
  params->platform->type = "CPU";
#endif
#if defined(HOSTILE_OVERLAPPING_HOST_ALLOCATE) || defined(HOSTILE_MISALIGNED_HOST_ALLOCATE)
  params->platform->supports_unified_memory = 1;
#endif
#ifdef HOSTILE_HUGE_PLATFORM_STRUCT
  params->platform->struct_size = (size_t)1 << 40;
#endif
#ifdef HOSTILE_HUGE_PLATFORM_FNS_STRUCT
  fns->struct_size = (size_t)1 << 40;
#endif
  CONFIGURED(PLATFORM_STRUCT_SIZE_FIELD, params->platform->struct_size, size_t);
  CONFIGURED(PLATFORM_FNS_STRUCT_SIZE_FIELD, fns->struct_size, size_t);
  CONFIGURED(MAJOR_VERSION_FIELD, params->major_version, int32_t);
#ifdef HOSTILE_CONFIGURABLE
  if (field_set[TIMER_FNS_STRUCT_SIZE_FIELD]) {
    original_create_timer_fns = fns->create_timer_fns;
    fns->create_timer_fns = configured_create_timer_fns;
  }
#endif
#ifdef HOSTILE_SEGV_IN_DESTROY_PLATFORM
  params->destroy_platform = hostile_destroy_platform;
#endif
#ifdef HOSTILE_HUGE_MESSAGE
  set_huge_status(status);
#endif
#ifdef HOSTILE_ESCAPE_MESSAGE
  TF_SetStatus(status, TF_INTERNAL, "\x1b[31mred alert\x1b[0m\r\nforged line\x07");
#endif
}

#if defined(HOSTILE_ABORT_IN_INIT_KERNEL) || defined(HOSTILE_HANG_IN_INIT_KERNEL)
void TF_InitKernel(void) {
#ifdef HOSTILE_ABORT_IN_INIT_KERNEL
  abort();
#else
  hang_forever();
#endif
}
#endif

/* ---- run-time misbehaviour ---------------------------------------------------------------- */
#include <stdatomic.h>

/* Set by hostile_arm(): the run-time variants misbehave only from then on, so the host's
 * own setup (and the probe) sees a well-behaved plugin. */
static atomic_int armed;

__attribute__((visibility("default"))) void hostile_arm(int on) { atomic_store(&armed, on); }

#if defined(HOSTILE_COMPUTE_HANGS) || defined(HOSTILE_DESTROY_STREAM_HANGS) || \
    defined(HOSTILE_PROFILER_START_HANGS)
/* A plugin wedged by a call that never returns: the calls it gets afterwards are counted
 * (hostile_calls_after_wedged(), and a line on stderr when the process ends), since the host
 * must make none. A real plugin would block in them on the lock the stuck call holds. */
#define HOSTILE_WEDGES 1
static atomic_int wedged, calls_after_wedged;

__attribute__((visibility("default"))) int hostile_calls_after_wedged(void) {
  return atomic_load(&calls_after_wedged);
}

static void note_call(void) {
  if (atomic_load(&wedged)) atomic_fetch_add(&calls_after_wedged, 1);
}

/* The stuck call: never returns. */
static void wedge(void) {
  atomic_store(&wedged, 1);
  hang_forever();
}

__attribute__((destructor)) static void report_calls_after_wedged(void) {
  if (atomic_load(&wedged)) {
    fprintf(stderr, "HOSTILE_CALLS_AFTER_WEDGED %d\n", atomic_load(&calls_after_wedged));
  }
}

static void w_allocate(const SP_Device* d, uint64_t size, int64_t space, SP_DeviceMemoryBase* m) {
  note_call();
  plugin_allocate(d, size, space, m);
}
static void w_deallocate(const SP_Device* d, SP_DeviceMemoryBase* m) {
  note_call();
  plugin_deallocate(d, m);
}
static void w_create_stream(const SP_Device* d, SP_Stream* s, TF_Status* status) {
  note_call();
  plugin_create_stream(d, s, status);
}
static void w_destroy_stream(const SP_Device* d, SP_Stream s) {
  note_call();
  plugin_destroy_stream(d, s);
}
static void w_stream_status(const SP_Device* d, SP_Stream s, TF_Status* status) {
  note_call();
  plugin_stream_status(d, s, status);
}
static void w_create_event(const SP_Device* d, SP_Event* e, TF_Status* status) {
  note_call();
  plugin_create_event(d, e, status);
}
static void w_destroy_event(const SP_Device* d, SP_Event e) {
  note_call();
  plugin_destroy_event(d, e);
}
static SE_EventStatus w_event_status(const SP_Device* d, SP_Event e) {
  note_call();
  return plugin_event_status(d, e);
}
static void w_record_event(const SP_Device* d, SP_Stream s, SP_Event e, TF_Status* status) {
  note_call();
  plugin_record_event(d, s, e, status);
}
static void w_memcpy_dtoh(const SP_Device* d, SP_Stream s, void* dst,
                          const SP_DeviceMemoryBase* src, uint64_t size, TF_Status* status) {
  note_call();
  plugin_memcpy_dtoh(d, s, dst, src, size, status);
}
static void w_memcpy_htod(const SP_Device* d, SP_Stream s, SP_DeviceMemoryBase* dst,
                          const void* src, uint64_t size, TF_Status* status) {
  note_call();
  plugin_memcpy_htod(d, s, dst, src, size, status);
}
static void w_synchronize(const SP_Device* d, TF_Status* status) {
  note_call();
  plugin_synchronize(d, status);
}
static TF_Bool w_memory_usage(const SP_Device* d, int64_t* free_bytes, int64_t* total_bytes) {
  note_call();
  return plugin_memory_usage(d, free_bytes, total_bytes);
}

/* Counts the calls that matter; the variant's own callback is set after these. */
static void count_calls(SP_StreamExecutor* se) {
  se->allocate = w_allocate;
  se->deallocate = w_deallocate;
  se->create_stream = w_create_stream;
  se->destroy_stream = w_destroy_stream;
  se->get_stream_status = w_stream_status;
  se->create_event = w_create_event;
  se->destroy_event = w_destroy_event;
  se->get_event_status = w_event_status;
  se->record_event = w_record_event;
  se->memcpy_dtoh = w_memcpy_dtoh;
  se->memcpy_htod = w_memcpy_htod;
  se->synchronize_all_activity = w_synchronize;
  se->device_memory_usage = w_memory_usage;
}
#endif

#ifdef HOSTILE_STREAM_DATA_LOSS
typedef struct HostileStream {
  atomic_int lost;
} HostileStream;

static void lossy_create_stream(const SP_Device* device, SP_Stream* stream, TF_Status* status) {
  (void)device;
  HostileStream* s = calloc(1, sizeof *s);
  if (s == NULL) TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
  *stream = (SP_Stream)s;
}

static void lossy_destroy_stream(const SP_Device* device, SP_Stream stream) {
  (void)device;
  free(stream);
}

/* Work on a stream while armed: its data is lost, the stream fails for good. */
static int lose(SP_Stream stream) {
  if (!atomic_load(&armed) || stream == NULL) return 0;
  atomic_store(&((HostileStream*)stream)->lost, 1);
  return 1;
}

static void lossy_stream_status(const SP_Device* device, SP_Stream stream, TF_Status* status) {
  (void)device;
  if (stream != NULL && atomic_load(&((HostileStream*)stream)->lost)) {
    TF_SetStatus(status, TF_DATA_LOSS, "hostile: the stream lost its data");
  }
}

static void lossy_memcpy_dtoh(const SP_Device* device, SP_Stream stream, void* host_dst,
                              const SP_DeviceMemoryBase* device_src, uint64_t size,
                              TF_Status* status) {
  if (!lose(stream)) plugin_memcpy_dtoh(device, stream, host_dst, device_src, size, status);
}

static void lossy_memcpy_htod(const SP_Device* device, SP_Stream stream,
                              SP_DeviceMemoryBase* device_dst, const void* host_src,
                              uint64_t size, TF_Status* status) {
  if (!lose(stream)) plugin_memcpy_htod(device, stream, device_dst, host_src, size, status);
}

static void lossy_memcpy_dtod(const SP_Device* device, SP_Stream stream,
                              SP_DeviceMemoryBase* device_dst,
                              const SP_DeviceMemoryBase* device_src, uint64_t size,
                              TF_Status* status) {
  if (!lose(stream)) plugin_memcpy_dtod(device, stream, device_dst, device_src, size, status);
}
#endif

#if defined(HOSTILE_OVERLAPPING_ALLOCATE) || defined(HOSTILE_SHORT_ALLOCATE) || \
    defined(HOSTILE_MISALIGNED_ALLOCATE)
/* One arena for every device: blocks are carved from it one after the other, 256-byte
 * aligned, and never reused. */
#define ARENA_BYTES ((size_t)64 << 20)
static _Alignas(256) unsigned char arena[ARENA_BYTES];
static size_t arena_next;
static void* last_live; /* the block handed out last, while it is not given back */
static pthread_mutex_t arena_mu = PTHREAD_MUTEX_INITIALIZER;

static void hostile_allocate(const SP_Device* device, uint64_t size, int64_t memory_space,
                             SP_DeviceMemoryBase* mem) {
  (void)device;
  (void)memory_space;
  mem->struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE;
  mem->opaque = NULL;
  mem->size = 0;
  pthread_mutex_lock(&arena_mu);
  size_t rounded = ((size_t)size + 255) & ~(size_t)255;
  if (size <= ARENA_BYTES && arena_next + rounded <= ARENA_BYTES) {
    mem->opaque = arena + arena_next;
    mem->size = size;
    arena_next += rounded;
#ifdef HOSTILE_OVERLAPPING_ALLOCATE
    /* Armed: the block handed out last, again, while it is still in use. */
    if (atomic_load(&armed) && last_live != NULL) mem->opaque = last_live;
#endif
    last_live = mem->opaque;
  }
  pthread_mutex_unlock(&arena_mu);
#ifdef HOSTILE_SHORT_ALLOCATE
  if (atomic_load(&armed)) mem->size = size / 2;
#endif
#ifdef HOSTILE_MISALIGNED_ALLOCATE
  if (atomic_load(&armed) && mem->opaque != NULL) mem->opaque = (char*)mem->opaque + 8;
#endif
}

static void hostile_deallocate(const SP_Device* device, SP_DeviceMemoryBase* mem) {
  (void)device;
  pthread_mutex_lock(&arena_mu);
  if (mem->opaque == last_live) last_live = NULL;
  pthread_mutex_unlock(&arena_mu);
}
#endif

#if defined(HOSTILE_OVERLAPPING_HOST_ALLOCATE) || defined(HOSTILE_MISALIGNED_HOST_ALLOCATE)
/* Host and unified memory carved from one static arena, 256-byte aligned, never reused. */
#define HOST_ARENA_BYTES ((size_t)16 << 20)
static _Alignas(256) unsigned char host_arena[HOST_ARENA_BYTES];
static size_t host_arena_next;
static void* host_last_live; /* the block handed out last, while it is not given back */
static pthread_mutex_t host_arena_mu = PTHREAD_MUTEX_INITIALIZER;

static void* hostile_host_allocate(const SP_Device* device, uint64_t size) {
  (void)device;
  void* p = NULL;
  pthread_mutex_lock(&host_arena_mu);
  size_t rounded = ((size_t)size + 255) & ~(size_t)255;
  if (size <= HOST_ARENA_BYTES && host_arena_next + rounded <= HOST_ARENA_BYTES) {
    p = host_arena + host_arena_next;
    host_arena_next += rounded;
#ifdef HOSTILE_OVERLAPPING_HOST_ALLOCATE
    /* Armed: the block handed out last, again, while it is still in use. */
    if (atomic_load(&armed) && host_last_live != NULL) p = host_last_live;
#endif
    host_last_live = p;
  }
  pthread_mutex_unlock(&host_arena_mu);
#ifdef HOSTILE_MISALIGNED_HOST_ALLOCATE
  if (atomic_load(&armed) && p != NULL) p = (char*)p + 8;
#endif
  return p;
}

static void hostile_host_deallocate(const SP_Device* device, void* mem) {
  (void)device;
  pthread_mutex_lock(&host_arena_mu);
  if (mem == host_last_live) host_last_live = NULL;
  pthread_mutex_unlock(&host_arena_mu);
}
#endif

#ifdef HOSTILE_DESTROY_STREAM_HANGS
static void hanging_destroy_stream(const SP_Device* device, SP_Stream stream) {
  note_call();
  if (atomic_load(&armed)) wedge();
  plugin_destroy_stream(device, stream);
}
#endif

#ifdef HOSTILE_LATE_CALLBACK
typedef struct LateCall {
  SE_StatusCallbackFn fn;
  void* arg;
} LateCall;

/* Calls the host callback 300 ms after the stream reported its work done. */
static void* call_late(void* p) {
  LateCall* call = p;
  struct timespec pause = {0, 300 * 1000000L};
  nanosleep(&pause, NULL);
  TF_Status* status = TF_NewStatus();
  call->fn(call->arg, status);
  TF_DeleteStatus(status);
  free(call);
  return NULL;
}

static TF_Bool late_host_callback(const SP_Device* device, SP_Stream stream,
                                  SE_StatusCallbackFn callback_fn, void* callback_arg) {
  (void)device;
  (void)stream;
  LateCall* call = malloc(sizeof *call);
  if (call == NULL) return 0;
  call->fn = callback_fn;
  call->arg = callback_arg;
  pthread_t thread;
  if (pthread_create(&thread, NULL, call_late, call) != 0) {
    free(call);
    return 0;
  }
  pthread_detach(thread);
  return 1;
}
#endif

#ifdef HOSTILE_LATE_STATUS_WRITE
/* create_event keeps its TF_Status*; the LATE_STATUS_CALLS-th record_event after it (default
 * the next one) writes an error into it. */
#ifndef LATE_STATUS_CALLS
#define LATE_STATUS_CALLS 1
#endif
static TF_Status* kept_status;
static int records_since_kept;

static void keeping_create_event(const SP_Device* device, SP_Event* event, TF_Status* status) {
  plugin_create_event(device, event, status);
  if (atomic_load(&armed)) kept_status = status;
}

static void late_writing_record_event(const SP_Device* device, SP_Stream stream,
                                      SP_Event event, TF_Status* status) {
  if (kept_status != NULL && ++records_since_kept >= LATE_STATUS_CALLS) {
    TF_SetStatus(kept_status, TF_INTERNAL, "hostile: a late error for create_event");
    kept_status = NULL;
    records_since_kept = 0;
  }
  plugin_record_event(device, stream, event, status);
}
#endif

static void hostile_runtime_setup(SP_StreamExecutor* se) {
  (void)se;
#ifdef HOSTILE_WEDGES
  count_calls(se);
#endif
#ifdef HOSTILE_LATE_STATUS_WRITE
  se->create_event = keeping_create_event;
  se->record_event = late_writing_record_event;
#endif
#ifdef HOSTILE_LATE_CALLBACK
  se->host_callback = late_host_callback;
#endif
#ifdef HOSTILE_STREAM_DATA_LOSS
  se->create_stream = lossy_create_stream;
  se->destroy_stream = lossy_destroy_stream;
  se->get_stream_status = lossy_stream_status;
  se->memcpy_dtoh = lossy_memcpy_dtoh;
  se->memcpy_htod = lossy_memcpy_htod;
  se->memcpy_dtod = lossy_memcpy_dtod;
#endif
#if defined(HOSTILE_OVERLAPPING_ALLOCATE) || defined(HOSTILE_SHORT_ALLOCATE) || \
    defined(HOSTILE_MISALIGNED_ALLOCATE)
  se->allocate = hostile_allocate;
  se->deallocate = hostile_deallocate;
#endif
#ifdef HOSTILE_DESTROY_STREAM_HANGS
  se->destroy_stream = hanging_destroy_stream;
#endif
#if defined(HOSTILE_OVERLAPPING_HOST_ALLOCATE) || defined(HOSTILE_MISALIGNED_HOST_ALLOCATE)
  se->host_memory_allocate = hostile_host_allocate;
  se->host_memory_deallocate = hostile_host_deallocate;
  se->unified_memory_allocate = hostile_host_allocate;
  se->unified_memory_deallocate = hostile_host_deallocate;
#endif
}

#ifdef HOSTILE_KERNEL
/* Neg for float: y = -x (device memory is host memory here), or the variant's misdeed. */
static void hostile_compute(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
#ifdef HOSTILE_WEDGES
  note_call();
#endif
#ifdef HOSTILE_SEGV_IN_COMPUTE
  write_nowhere();
#endif
#ifdef HOSTILE_SLOW_KERNELS
  usleep(600 * 1000);
#endif
  TF_Status* s = TF_NewStatus();
#ifdef HOSTILE_ESCAPE_KERNEL_MESSAGE
  static char text[8192];
  const char* evil = "\x1b[2J\x1b]0;pwned\x07kernel\rforged\nline ";
  size_t n = strlen(evil), at = 0;
  while (at + n < sizeof text) {
    memcpy(text + at, evil, n);
    at += n;
  }
  text[at] = '\0';
  TF_SetStatus(s, TF_INTERNAL, text);
  TF_OpKernelContext_Failure(ctx, s);
#else
  TF_Tensor* x = NULL;
  TF_GetInput(ctx, 0, &x, s);
  if (TF_GetCode(s) == TF_OK) {
    int64_t dims[8];
    int rank = TF_NumDims(x);
    for (int i = 0; i < rank && i < 8; i++) dims[i] = TF_Dim(x, i);
    int64_t count = TF_TensorElementCount(x);
#ifdef HOSTILE_WRITES_PAST_TEMP
    /* A scratch buffer, overrun and deleted before the output is made. */
    TF_AllocatorAttributes attrs = {TF_ALLOCATOR_ATTRIBUTES_STRUCT_SIZE, 0};
    TF_Tensor* scratch = TF_AllocateTemp(ctx, TF_FLOAT, dims, rank, &attrs, s);
    if (TF_GetCode(s) == TF_OK) {
      memset(TF_TensorData(scratch), 0xCD, (size_t)count * sizeof(float) + 16);
    }
    TF_DeleteTensor(scratch);
    TF_SetStatus(s, TF_OK, "");
#endif
#if defined(HOSTILE_WRITES_PAST_FORWARDED)
    int candidate = 0, forwarded = -2;
    TF_Tensor* y = TF_ForwardInputOrAllocateOutput(ctx, &candidate, 1, 0, dims, rank,
                                                   &forwarded, s);
#elif defined(HOSTILE_WRITES_PAST_SET_OUTPUT)
    TF_AllocatorAttributes attrs = {TF_ALLOCATOR_ATTRIBUTES_STRUCT_SIZE, 0};
    TF_Tensor* y = TF_AllocateTemp(ctx, TF_FLOAT, dims, rank, &attrs, s);
#else
    TF_Tensor* y = TF_AllocateOutput(ctx, 0, TF_FLOAT, dims, rank,
                                     (size_t)count * sizeof(float), s);
#endif
    if (TF_GetCode(s) == TF_OK) {
#ifdef HOSTILE_COMPUTE_HANGS
      if (atomic_load(&armed)) wedge();
#endif
      const float* in = TF_TensorData(x);
      float* out = TF_TensorData(y);
      for (int64_t i = 0; i < count; i++) out[i] = -in[i];
#if defined(HOSTILE_WRITES_PAST_OUTPUT) || defined(HOSTILE_WRITES_PAST_FORWARDED) || \
    defined(HOSTILE_WRITES_PAST_SET_OUTPUT)
      memset((char*)out + count * (int64_t)sizeof(float), 0xAB, 16);
#endif
#ifdef HOSTILE_WRITES_PAST_SET_OUTPUT
      TF_SetOutput(ctx, 0, y, s);
#endif
    }
    TF_DeleteTensor(y);
  }
  TF_DeleteTensor(x);
  if (TF_GetCode(s) != TF_OK) TF_OpKernelContext_Failure(ctx, s);
#endif
  TF_DeleteStatus(s);
}

void TF_InitKernel(void) {
#ifdef HOSTILE_SLOW_KERNELS
  int count = 40;
#else
  int count = 1;
#endif
  for (int i = 0; i < count; i++) {
    char name[32];
    if (i == 0) snprintf(name, sizeof name, "HostileNeg");
    else snprintf(name, sizeof name, "HostileNeg%d", i);
    TF_Status* s = TF_NewStatus();
    TF_KernelBuilder* b =
        TF_NewKernelBuilder("Neg", STRINGIFY(DEVICE_TYPE), NULL, hostile_compute, NULL);
    TF_KernelBuilder_TypeConstraint(b, "T", TF_FLOAT, s);
    TF_KernelBuilder_Priority(b, i);
    TF_RegisterKernelBuilder(name, b, s);
    TF_DeleteStatus(s);
  }
}
#endif

#ifdef HOSTILE_PROFILER
static void hostile_profiler_start(const TP_Profiler* profiler, TF_Status* status) {
  (void)profiler;
  (void)status;
#ifdef HOSTILE_SEGV_IN_PROFILER_START
  write_nowhere();
#else
  note_call();
  if (atomic_load(&armed)) wedge();
#endif
}

static void hostile_profiler_stop(const TP_Profiler* profiler, TF_Status* status) {
  (void)profiler;
#ifdef HOSTILE_WEDGES
  note_call();
#endif
  TF_SetStatus(status, TF_OK, "");
}

static void hostile_profiler_collect(const TP_Profiler* profiler, uint8_t* buffer,
                                     size_t* size_in_bytes, TF_Status* status) {
  (void)profiler;
  (void)buffer;
#ifdef HOSTILE_WEDGES
  note_call();
#endif
  *size_in_bytes = 0;
  TF_SetStatus(status, TF_OK, "");
}

static void hostile_destroy_profiler(TP_Profiler* profiler) { (void)profiler; }

static void hostile_destroy_profiler_fns(TP_ProfilerFns* fns) { (void)fns; }

void TF_InitProfiler(TF_ProfilerRegistrationParams* params, TF_Status* status) {
  (void)status;
  params->struct_size = TF_PROFILER_REGISTRATION_PARAMS_STRUCT_SIZE;
  params->major_version = TP_MAJOR;
  params->minor_version = TP_MINOR;
  params->patch_version = TP_PATCH;
  params->profiler->struct_size = TP_PROFILER_STRUCT_SIZE;
  params->profiler->device_type = STRINGIFY(DEVICE_TYPE);
  params->profiler_fns->struct_size = TP_PROFILER_FNS_STRUCT_SIZE;
  params->profiler_fns->start = hostile_profiler_start;
  params->profiler_fns->stop = hostile_profiler_stop;
  params->profiler_fns->collect_data_xspace = hostile_profiler_collect;
  params->destroy_profiler = hostile_destroy_profiler;
  params->destroy_profiler_fns = hostile_destroy_profiler_fns;
}
#endif
