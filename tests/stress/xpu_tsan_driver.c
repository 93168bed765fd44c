/* A C driver (no Python) that hammers the XPU reference plugin from several threads, built
 * with -fsanitize=thread by the sanitizer step of .ci/run together with the plugin's and the
 * host runtime's sources. ThreadSanitizer must report nothing.
 *
 * The driver plays the host: it calls SE_InitPlugin, creates every device and its stream
 * executor, then THREADS threads each run ROUNDS rounds on both devices of: create a stream
 * and an event, allocate, copy host-to-device, record the event on the stream, make a second
 * stream wait for it, zero part of the memory, copy device-to-host on the second stream, enqueue
 * a host callback, block until done, check every byte, free everything. Live-handle counters
 * must be back to zero at the end. Every third round also runs cross_round: streams, events
 * and copies across the two devices. Then GEMM_THREADS threads run split GEMMs (xpu_gemm, the
 * engine of MatMul and Conv2D, called directly since the driver is built from the plugin's
 * sources) on the kernel-thread pool, which spins, moves helpers and wakes them early
 * (xpu_kernels_pool.c), through two start-stop cycles of its helpers, checking every result
 * against a plain product. Exit status 0 means every check passed.
 *
 *   cc -std=c11 -fsanitize=thread -pthread -I include -I src/pluggable/_runtime \
 *      -I plugins/xpu tests/stress/xpu_tsan_driver.c \
 *      <every .c of plugins/xpu and src/pluggable/_runtime> -lm
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pluggable/plugin_ext.h"
#include "xpu_kernels.h"
#include "tensorflow/c/experimental/stream_executor/stream_executor.h"
#include "tensorflow/c/tf_status.h"

#define THREADS 6
#define ROUNDS 150
#define DEVICES 2
#define BYTES 4096

void SE_InitPlugin(SE_PlatformRegistrationParams* params, TF_Status* status);

static SP_Platform platform = {.struct_size = SP_PLATFORM_STRUCT_SIZE};
static SP_PlatformFns platform_fns = {.struct_size = SP_PLATFORM_FNS_STRUCT_SIZE};
static SP_Device devices[DEVICES];
static SP_StreamExecutor executors[DEVICES];
static int failures;
static pthread_mutex_t failure_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char* what, TF_Status* status) {
  pthread_mutex_lock(&failure_lock);
  failures++;
  fprintf(stderr, "xpu_tsan_driver: %s failed: %s\n", what,
          status ? TF_Message(status) : "(no status)");
  pthread_mutex_unlock(&failure_lock);
}

#define CHECK(call, what)                                 \
  do {                                                    \
    call;                                                 \
    if (TF_GetCode(status) != TF_OK) {                    \
      fail(what, status);                                 \
      TF_DeleteStatus(status);                            \
      return;                                             \
    }                                                     \
  } while (0)

/* The host callback: counts how many ran, from the stream's worker thread. */
static void count_callback(void* arg, TF_Status* status) {
  (void)status;
  __atomic_fetch_add((int*)arg, 1, __ATOMIC_SEQ_CST);
}

static void one_round(int device_index, unsigned seed) {
  SP_Device* device = &devices[device_index];
  SP_StreamExecutor* se = &executors[device_index];
  TF_Status* status = TF_NewStatus();
  SP_Stream upload = NULL, download = NULL;
  SP_Event uploaded = NULL;
  unsigned char source[BYTES], result[BYTES];
  for (int i = 0; i < BYTES; i++) source[i] = (unsigned char)(seed * 31u + (unsigned)i);
  memset(result, 0xEE, sizeof result);
  int callbacks = 0;

  CHECK(se->create_stream(device, &upload, status), "create_stream");
  CHECK(se->create_stream(device, &download, status), "create_stream");
  CHECK(se->create_event(device, &uploaded, status), "create_event");
  SP_DeviceMemoryBase memory = {.struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE};
  se->allocate(device, BYTES, 0, &memory);
  if (memory.opaque == NULL) {
    fail("allocate", NULL);
    TF_DeleteStatus(status);
    return;
  }
  CHECK(se->memcpy_htod(device, upload, &memory, source, BYTES, status), "memcpy_htod");
  CHECK(se->record_event(device, upload, uploaded, status), "record_event");
  CHECK(se->wait_for_event(device, download, uploaded, status), "wait_for_event");
  SP_DeviceMemoryBase tail = memory;
  tail.opaque = (char*)memory.opaque + BYTES / 2;
  tail.size = BYTES / 2;
  CHECK(se->mem_zero(device, download, &tail, BYTES / 2, status), "mem_zero");
  CHECK(se->memcpy_dtoh(device, download, result, &memory, BYTES, status), "memcpy_dtoh");
  if (!se->host_callback(device, download, count_callback, &callbacks)) fail("host_callback", NULL);
  CHECK(se->block_host_until_done(device, download, status), "block_host_until_done");
  CHECK(se->block_host_until_done(device, upload, status), "block_host_until_done");
  if (se->get_event_status(device, uploaded) != SE_EVENT_COMPLETE) fail("event status", NULL);
  for (int i = 0; i < BYTES; i++) {
    unsigned char expected = i < BYTES / 2 ? source[i] : 0;
    if (result[i] != expected) {
      fail("data check", NULL);
      break;
    }
  }
  if (__atomic_load_n(&callbacks, __ATOMIC_SEQ_CST) != 1) fail("host callback count", NULL);
  se->deallocate(device, &memory);
  se->destroy_event(device, uploaded);
  se->destroy_stream(device, download);
  se->destroy_stream(device, upload);
  TF_DeleteStatus(status);
}

/* Across the two devices, as TensorFlow's copies between them do: device `a`'s stream writes
 * its memory and records an event of `a`; device `b`'s stream waits for that event, copies
 * the memory into `b`'s (a peer source) and records a second event of `a` (a foreign event);
 * `a`'s stream then depends on `b`'s stream and copies `b`'s memory back into a second
 * buffer of `a`; the host waits for the foreign event through device `a` and checks the
 * bytes. */
static void cross_round(int a, unsigned seed) {
  int b = 1 - a;
  SP_Device* da = &devices[a];
  SP_Device* db = &devices[b];
  SP_StreamExecutor* sa = &executors[a];
  SP_StreamExecutor* sb = &executors[b];
  TF_Status* status = TF_NewStatus();
  SP_Stream on_a = NULL, on_b = NULL;
  SP_Event written = NULL, copied = NULL;
  unsigned char source[BYTES], result[BYTES];
  for (int i = 0; i < BYTES; i++) source[i] = (unsigned char)(seed * 17u + (unsigned)i);
  memset(result, 0xEE, sizeof result);
  CHECK(sa->create_stream(da, &on_a, status), "create_stream");
  CHECK(sb->create_stream(db, &on_b, status), "create_stream");
  CHECK(sa->create_event(da, &written, status), "create_event");
  CHECK(sa->create_event(da, &copied, status), "create_event");
  SP_DeviceMemoryBase mem_a = {.struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE};
  SP_DeviceMemoryBase back_a = {.struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE};
  SP_DeviceMemoryBase mem_b = {.struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE};
  sa->allocate(da, BYTES, 0, &mem_a);
  sa->allocate(da, BYTES, 0, &back_a);
  sb->allocate(db, BYTES, 0, &mem_b);
  if (mem_a.opaque == NULL || back_a.opaque == NULL || mem_b.opaque == NULL) {
    fail("allocate", NULL);
    TF_DeleteStatus(status);
    return;
  }
  CHECK(sa->memcpy_htod(da, on_a, &mem_a, source, BYTES, status), "memcpy_htod");
  CHECK(sa->record_event(da, on_a, written, status), "record_event");
  CHECK(sb->wait_for_event(db, on_b, written, status), "wait_for_event (foreign event)");
  CHECK(sb->memcpy_dtod(db, on_b, &mem_b, &mem_a, BYTES, status), "memcpy_dtod (peer source)");
  CHECK(sb->record_event(db, on_b, copied, status), "record_event (foreign event)");
  CHECK(sa->create_stream_dependency(da, on_a, on_b, status), "create_stream_dependency");
  CHECK(sa->memcpy_dtod(da, on_a, &back_a, &mem_b, BYTES, status), "memcpy_dtod (peer source)");
  CHECK(sa->memcpy_dtoh(da, on_a, result, &back_a, BYTES, status), "memcpy_dtoh");
  CHECK(sa->block_host_for_event(da, copied, status), "block_host_for_event");
  if (sb->get_event_status(db, copied) != SE_EVENT_COMPLETE) fail("foreign event status", NULL);
  CHECK(sa->block_host_until_done(da, on_a, status), "block_host_until_done");
  if (memcmp(result, source, BYTES) != 0) fail("cross-device data check", NULL);
  sa->deallocate(da, &mem_a);
  sa->deallocate(da, &back_a);
  sb->deallocate(db, &mem_b);
  sa->destroy_event(da, copied);
  sa->destroy_event(da, written);
  sb->destroy_stream(db, on_b);
  sa->destroy_stream(da, on_a);
  TF_DeleteStatus(status);
}

static void* worker(void* arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  for (unsigned round = 0; round < ROUNDS; round++) {
    one_round((int)((id + round) % DEVICES), id * 1000u + round);
    if (round % 3 == 0) cross_round((int)((id + round / 3) % DEVICES), id * 7919u + round);
  }
  return NULL;
}

#define GEMM_THREADS 3
#define GEMM_ROUNDS 12

/* Split GEMMs on the kernel-thread pool: m x k times k x n, m large enough for several row
 * tiles, each result checked against a plain triple loop. */
static void* gemm_worker(void* arg) {
  int64_t m = 200 + 24 * (int64_t)(uintptr_t)arg, n = 40, k = 33;
  float* a = malloc(sizeof(float) * (size_t)(m * k));
  float* b = malloc(sizeof(float) * (size_t)(k * n));
  float* c = malloc(sizeof(float) * (size_t)(m * n));
  if (a == NULL || b == NULL || c == NULL) {
    fail("allocating GEMM operands", NULL);
  } else {
    for (int64_t i = 0; i < m * k; i++) a[i] = (float)((i * 7 + (int64_t)(uintptr_t)arg) % 5);
    for (int64_t i = 0; i < k * n; i++) b[i] = (float)((i * 3) % 4);
    XpuGemm g = {.dtype = TF_FLOAT, .m = m, .n = n, .k = k, .batches = 1, .a = a, .a_rs = k,
                 .a_cs = 1, .b = b, .b_rs = n, .b_cs = 1, .c = c};
    for (int round = 0; round < GEMM_ROUNDS; round++) {
      xpu_gemm_expect(&g);
      if (!xpu_gemm(&g)) {
        fail("xpu_gemm", NULL);
        break;
      }
      bool exact = true; /* small whole numbers: the float sums are exact */
      for (int64_t i = 0; i < m && exact; i++) {
        for (int64_t j = 0; j < n && exact; j++) {
          float want = 0;
          for (int64_t p = 0; p < k; p++) want += a[i * k + p] * b[p * n + j];
          exact = c[i * n + j] == want;
        }
      }
      if (!exact) {
        fail("a split GEMM's result", NULL);
        break;
      }
    }
  }
  free(a);
  free(b);
  free(c);
  return NULL;
}

/* Two cycles of: the pool's helpers started by the first split GEMM, GEMM_THREADS threads
 * sharing them, then stopped and joined (as when a plugin's last stream goes). */
static void run_gemm_phase(void) {
  xpu_pool_configure(3);
  for (int cycle = 0; cycle < 2; cycle++) {
    xpu_pool_retain();
    pthread_t threads[GEMM_THREADS];
    for (uintptr_t t = 0; t < GEMM_THREADS; t++) {
      pthread_create(&threads[t], NULL, gemm_worker, (void*)t);
    }
    for (int t = 0; t < GEMM_THREADS; t++) pthread_join(threads[t], NULL);
    xpu_pool_release();
  }
  xpu_pool_configure(0);
}

int main(void) {
  TF_Status* status = TF_NewStatus();
  SE_PlatformRegistrationParams params = {
      .struct_size = SE_PLATFORM_REGISTRATION_PARAMS_STRUCT_SIZE};
  params.major_version = SE_MAJOR;
  params.minor_version = SE_MINOR;
  params.patch_version = SE_PATCH;
  params.platform = &platform;
  params.platform_fns = &platform_fns;
  SE_InitPlugin(&params, status);
  if (TF_GetCode(status) != TF_OK) {
    fprintf(stderr, "SE_InitPlugin failed: %s\n", TF_Message(status));
    return 1;
  }
  int count = 0;
  platform_fns.get_device_count(&platform, &count, status);
  if (count < DEVICES) {
    fprintf(stderr, "the XPU reports %d devices; the driver needs %d\n", count, DEVICES);
    return 1;
  }
  for (int i = 0; i < DEVICES; i++) {
    SE_CreateDeviceParams device_params = {.struct_size = SE_CREATE_DEVICE_PARAMS_STRUCT_SIZE};
    devices[i].struct_size = SP_DEVICE_STRUCT_SIZE;
    device_params.ordinal = i;
    device_params.device = &devices[i];
    platform_fns.create_device(&platform, &device_params, status);
    SE_CreateStreamExecutorParams se_params = {
        .struct_size = SE_CREATE_STREAM_EXECUTOR_PARAMS_STRUCT_SIZE};
    executors[i].struct_size = SP_STREAMEXECUTOR_STRUCT_SIZE;
    se_params.stream_executor = &executors[i];
    platform_fns.create_stream_executor(&platform, &se_params, status);
    if (TF_GetCode(status) != TF_OK) {
      fprintf(stderr, "device %d: %s\n", i, TF_Message(status));
      return 1;
    }
  }
  pthread_t threads[THREADS];
  for (uintptr_t t = 0; t < THREADS; t++) pthread_create(&threads[t], NULL, worker, (void*)t);
  for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
  run_gemm_phase();

  int leaks = 0;
  for (int i = 0; i < DEVICES; i++) {
    const PLUGGABLE_ExtHeader* link = executors[i].ext;
    for (; link != NULL; link = link->next) {
      if (link->type != PLUGGABLE_EXT_LIVE_HANDLES) continue;
      PLUGGABLE_LiveHandles counts = {.struct_size = PLUGGABLE_LIVE_HANDLES_STRUCT_SIZE};
      ((const PLUGGABLE_LiveHandlesExt*)link)->get_live_handles(&devices[i], &counts);
      leaks += (int)(counts.streams + counts.events + counts.timers + counts.allocations +
                     counts.host_allocations);
    }
    executors[i].synchronize_all_activity(&devices[i], status);
    platform_fns.destroy_stream_executor(&platform, &executors[i]);
    platform_fns.destroy_device(&platform, &devices[i]);
  }
  if (params.destroy_platform_fns) params.destroy_platform_fns(&platform_fns);
  if (params.destroy_platform) params.destroy_platform(&platform);
  TF_DeleteStatus(status);
  printf("xpu_tsan_driver: %d threads x %d rounds on %d devices, %d threads x %d split "
         "GEMMs x 2 pool cycles: %d failures, %d live handles\n",
         THREADS, ROUNDS, DEVICES, GEMM_THREADS, GEMM_ROUNDS, failures, leaks);
  return failures || leaks ? 1 : 0;
}
