/* xpu_internal.h: declarations shared by the XPU reference plugin's source files.
 *
 * Nothing here is part of the plugin's interface: the host sees only the StreamExecutor C
 * API entry points, the ext chains of pluggable/plugin_ext.h and the test controls of
 * xpu_control.h. Every declaration between the visibility pragmas below stays hidden inside
 * the shared object.
 *
 * Locking, in the only order locks are ever taken:
 *   the global platform/device registry lock (xpu_plugin.c)
 *   or the global stream registry lock (xpu_stream.c, kernels' stream lookup)
 *     ->  XpuDevice.mu  ->  the timer registry lock (xpu_stream.c)
 *                       ->  the fault-injection lock (xpu_faults.c)
 *     XpuDevice.mu  ->  the profiler lock (xpu_profiler.c), which is a leaf
 * The kernel thread pool's lock (xpu_kernels_pool.c) is a leaf: nothing else is taken while
 * it is held, and it is never taken under a device lock.
 * The registry lock is held over a device lock only by the peer-source lookup
 * (xpu_peer_pin_range), which locks the devices of a platform one at a time. No thread ever
 * holds two XpuDevice.mu at once, and no thread takes the registry lock while it holds a
 * device lock (a peer copy drops its own device's lock before the lookup and retakes it
 * after). Calls and workers that touch a stream or event of another device do the same: they
 * drop their own device's lock before taking the other device's (the calls hold the stream
 * registry lock meanwhile, which is taken before any device lock). XpuMapping.refs is atomic
 * and needs no lock.
 * XpuDevice.mu guards everything of one device: its arena, its handle registries, its stream
 * queues and the state of its events. Workers drop it while they copy memory or run a host
 * callback, so a long copy never blocks the host.
 */
#ifndef XPU_INTERNAL_H_
#define XPU_INTERNAL_H_

/* -std=c11 hides POSIX and BSD declarations (pthread, mmap flags, posix_memalign, clock_gettime);
 * every source file includes this header first so these take effect before any system header. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE 1
#endif
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pluggable/plugin_ext.h"
#include "tensorflow/c/c_api_macros.h"
#include "tensorflow/c/experimental/stream_executor/stream_executor.h"
#include "tensorflow/c/tf_status.h"
#include "xpu_control.h"

/* The entry point under the RFC's name; SE_InitPlugin is declared by stream_executor.h. */
void SE_InitializePlugin(SE_PlatformRegistrationParams* params, TF_Status* status);

#pragma GCC visibility push(hidden)

/* True when the caller-sized struct at `ptr` (which starts with size_t struct_size) is large
 * enough to hold `field`. The plugin never reads or writes a field for which this is false. */
#define XPU_FITS(ptr, type, field) ((ptr)->struct_size >= TF_OFFSET_OF_END(type, field))

#define XPU_PLATFORM_NAME "REF_XPU"
#define XPU_DEVICE_TYPE "XPU"
#define XPU_PLUGIN_VERSION "xpu-reference 0.3.0"

#define XPU_DEFAULT_DEVICE_COUNT 2
#define XPU_MAX_DEVICE_COUNT 64
#define XPU_DEFAULT_MEMORY_BYTES ((uint64_t)1 << 30)
#define XPU_MIN_MEMORY_BYTES ((uint64_t)4 << 10)
#define XPU_MAX_MEMORY_BYTES ((uint64_t)1 << 40)
#define XPU_MAX_STREAM_DELAY_US ((uint64_t)60 * 1000 * 1000)
#define XPU_DEFAULT_INLINE_BYTES ((uint64_t)64 * 1024)
#define XPU_MAX_INLINE_BYTES ((uint64_t)1 << 30)
/* Every device allocation starts and ends on this boundary, as on real accelerators. */
#define XPU_ALIGNMENT ((uint64_t)256)

/* ---- status helpers (xpu_status.c) ------------------------------------------------------ */

/* Sets `status` to `code` with a printf-formatted message; a NULL status is ignored. */
void xpu_status(TF_Status* status, TF_Code code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Reports a host struct whose struct_size is below what the plugin needs. Returns false so
 * callers can write `if (!xpu_check_size(...)) return;`. */
bool xpu_check_size(TF_Status* status, const char* fn, const char* struct_name, size_t got,
                    size_t needed);

/* ---- a set of pointers: the live-handle registries (xpu_ptrset.c) ----------------------- */

typedef struct XpuPtrSet {
  void** slots; /* open addressing, linear probing; NULL marks an empty slot */
  size_t capacity;
  size_t count;
} XpuPtrSet;

bool xpu_ptrset_insert(XpuPtrSet* set, void* p); /* false only when out of memory */
bool xpu_ptrset_contains(const XpuPtrSet* set, const void* p);
bool xpu_ptrset_remove(XpuPtrSet* set, const void* p); /* false when absent */
/* Copies the members into a new malloc'ed array (NULL when empty or out of memory). */
void** xpu_ptrset_snapshot(const XpuPtrSet* set, size_t* count);
void xpu_ptrset_clear(XpuPtrSet* set);

/* ---- platform and device state ---------------------------------------------------------- */

/* Configuration read from the environment by SE_InitPlugin. */
typedef struct XpuConfig {
  int device_count;
  uint64_t memory_bytes; /* per device, already rounded down to XPU_ALIGNMENT */
} XpuConfig;

/* What SP_Platform.ext points at: the project extension first, so the host can walk it as a
 * chain, followed by the plugin's own configuration. */
typedef struct XpuPlatform {
  PLUGGABLE_PlatformInfoExt info;
  XpuConfig config;
  /* Unique per SE_InitPlugin call, never reused; the devices created from this platform
   * carry it, and peer copies (PLUGGABLE_PLATFORM_PEER_DTOD) are allowed between devices
   * with the same id. An id rather than the pointer, because devices may outlive it. */
  uint64_t id;
  /* Next in the chain after `info`: DLPack sees XPU memory as kDLExtDev, not host-addressable
   * (the host cannot read arena pointers itself; consumers get host copies). */
  PLUGGABLE_DLPackDeviceExt dlpack;
} XpuPlatform;

enum { XPU_BLOCK_FREE = 0, XPU_BLOCK_DEVICE = 1, XPU_BLOCK_UNIFIED = 2 };

/* One range of the arena. Blocks are kept sorted by offset and tile the arena exactly. */
typedef struct XpuBlock {
  uint64_t offset;
  uint64_t size;      /* multiple of XPU_ALIGNMENT */
  uint64_t requested; /* the size the caller asked for; bounds checks use this */
  uint64_t id;        /* allocation id, handed out as SP_DeviceMemoryBase.payload */
  int kind;           /* XPU_BLOCK_* */
} XpuBlock;

/* The arena's address space. The device holds one reference and every queued peer copy that
 * reads from the arena holds another, so a source device destroyed while a peer copy is still
 * queued on another device's stream leaves its mapping in place until the copy is done. The
 * last reference unmaps it. */
typedef struct XpuMapping {
  unsigned char* base;
  size_t size;
  _Atomic int64_t refs;
} XpuMapping;

/* Drops one reference (NULL is ignored); the last one unmaps the arena and frees `m`. */
void xpu_mapping_unref(XpuMapping* m);

typedef struct XpuArena {
  unsigned char* base; /* NULL until the first allocation maps the arena */
  XpuMapping* mapping; /* NULL until then; base == mapping->base */
  uint64_t size;
  XpuBlock* blocks;
  size_t block_count;
  size_t block_capacity;
  uint64_t next_id;
  int64_t num_allocs; /* cumulative, as TensorFlow counts it */
  int64_t bytes_in_use;
  int64_t peak_bytes_in_use;
  int64_t largest_alloc_size;
  int64_t live_device_blocks;
  int64_t live_unified_blocks;
} XpuArena;

typedef struct XpuDevice {
  int ordinal;
  uint64_t platform_id; /* XpuPlatform.id of the platform that created it; immutable */
  char pci_bus_id[16];
  pthread_mutex_t mu;
  /* Broadcast when a stream's progress may end somebody's wait: an event completed, a queue
   * ran empty, or a queue's head moved past wait_ticket (see progress_wakes in xpu_stream.c).
   * Host threads blocked in block_host_* / synchronize_all_activity / destroy_stream and
   * workers blocked in a wait wait on it. */
  pthread_cond_t state_cv;
  /* The lowest ticket a host thread blocked in block_host_until_done or
   * synchronize_all_activity waits for (it waits until every queue's head is past it);
   * UINT64_MAX while none waits. A waiter that leaves while others still wait leaves it as
   * it is (lower than needed: more broadcasts, never a missed one). */
  uint64_t wait_ticket;
  int ticket_waiters;
  XpuArena arena;
  XpuPtrSet streams;     /* live SP_Stream handles */
  XpuPtrSet events;      /* live SP_Event handles given to the host */
  XpuPtrSet host_allocs; /* live host_memory_allocate blocks */
  uint64_t next_ticket;  /* every enqueued operation gets the next ticket, device-wide */
  uint64_t next_stream_id;
  int64_t live_timers; /* guarded by the timer registry lock, not by mu */
} XpuDevice;

/* Returns the device behind `device` or NULL after setting INVALID_ARGUMENT on `status`
 * (which may be NULL for callbacks that cannot report). `fn` names the caller in messages. */
XpuDevice* xpu_device_get(const SP_Device* device, const char* fn, TF_Status* status);

/* ---- memory (xpu_memory.c) -------------------------------------------------------------- */

void xpu_memory_init_device(XpuDevice* dev, uint64_t arena_bytes);
/* Frees host allocations the host leaked and unmaps the arena. Workers must be joined. */
void xpu_memory_teardown_device(XpuDevice* dev);
/* Fills the allocation, memory-usage and synchronous-copy slots of the executor. */
void xpu_memory_fill_executor(SP_StreamExecutor* se);
/* Under dev->mu: checks that [ptr, ptr + size) lies inside one live allocation of `dev`.
 * `role` names the pointer in messages ("device source"). Sets INVALID_ARGUMENT (not inside
 * an allocation) or OUT_OF_RANGE (runs past its end) and returns false on failure. */
bool xpu_check_device_range(XpuDevice* dev, const void* ptr, uint64_t size, const char* fn,
                            const char* role, TF_Status* status);
/* Under dev->mu: true when `ptr` lies in the address range of dev's arena, whether or not it
 * is inside a live allocation (false while the arena is unmapped). Arenas never overlap, so
 * a pointer is in the range of at most one device. */
bool xpu_arena_contains(const XpuDevice* dev, const void* ptr);
/* Under dev->mu, for a pointer for which xpu_arena_contains is true: checks the range as
 * xpu_check_device_range does and, when it is valid, takes a reference to dev's mapping for
 * the caller (*pin), to be dropped with xpu_mapping_unref when the copy is done. */
bool xpu_pin_device_range(XpuDevice* dev, const void* ptr, uint64_t size, const char* fn,
                          const char* role, TF_Status* status, XpuMapping** pin);
/* Finds the device of dev's platform, other than `dev`, whose arena holds `src`, checks that
 * [src, src + size) lies inside one of its live allocations and pins its mapping (*pin).
 * `role` names the pointer in messages ("device source"). Sets INVALID_ARGUMENT (no such
 * device, or not inside a live allocation) or OUT_OF_RANGE and returns false on failure.
 * Takes the registry lock, then each candidate's mu in turn: the caller must hold no device
 * lock (xpu_plugin.c). */
bool xpu_peer_pin_range(XpuDevice* dev, const void* src, uint64_t size, const char* fn,
                        const char* role, TF_Status* status, XpuMapping** pin);
/* Reads the opaque pointer of a host-filled SP_DeviceMemoryBase, checking its struct_size. */
bool xpu_memory_base_pointer(const SP_DeviceMemoryBase* mem, const char* fn, const char* role,
                             TF_Status* status, void** out);
/* Counts a deallocation of memory the plugin does not own (see XPU_InvalidFreeCount). */
void xpu_count_invalid_free(void);

/* ---- streams, events, timers (xpu_stream.c) ---------------------------------------------- */

/* Fills the stream, event, timer and asynchronous-copy slots of the executor. */
void xpu_stream_fill_executor(SP_StreamExecutor* se);
void xpu_stream_fill_timer_fns(SP_TimerFns* fns);
/* Drains and joins every stream the host left behind, frees its events and timers. */
void xpu_stream_teardown_device(XpuDevice* dev);
/* True when the calling thread is a stream worker of `dev` (i.e. inside a host callback). */
bool xpu_stream_on_worker_of(const XpuDevice* dev);
/* Counts the live streams, events and timers of `dev` into the arguments. */
void xpu_stream_live_handles(XpuDevice* dev, int64_t* streams, int64_t* events,
                             int64_t* timers);

/* Work a kernel enqueues (xpu_kernels*.c): the worker calls fn(arg, message, message_size)
 * without holding any lock. It returns TF_OK, or an error code after writing a message (which
 * names the op) into `message`; the stream then takes that error, as for any failed
 * operation. */
typedef TF_Code (*XpuStreamFn)(void* arg, char* message, size_t message_size);

/* A device buffer a kernel will touch, checked when the work is enqueued. */
typedef struct XpuDeviceRange {
  const void* ptr;
  uint64_t size; /* bytes; 0-byte ranges are not checked */
  const char* role; /* names the argument in messages ("x", "output 0") */
} XpuDeviceRange;

/* Enqueues fn(arg) on `stream`, a handle that need not be trusted (kernels get it from the
 * host through TF_GetStream): it must be a live stream of a live XPU device, else
 * INVALID_ARGUMENT. Every range must lie inside a live allocation of that device
 * (INVALID_ARGUMENT / OUT_OF_RANGE as for copies). `name` names the operation in messages
 * (the op: "MatMul") and is the op type the profiler shows; [node, node + node_len) is the
 * kernel's node name (TF_GetOpKernelName; `node` may be NULL), copied into the queued work
 * while a profiling session runs. The stream takes ownership of `arg` whatever happens: it is
 * released with free_arg (free() when NULL) after fn ran, when fn is skipped because the
 * stream has already failed, or at once when enqueueing fails. With fn == NULL the stream and
 * ranges are only checked and nothing is enqueued. With `wait`, returns once the stream has
 * run the work (false with the stream's error if it failed); otherwise never blocks on the
 * stream. */
bool xpu_stream_enqueue_fn(SP_Stream stream, const char* name, const char* node,
                           size_t node_len, uint64_t launch, XpuStreamFn fn, void* arg,
                           void (*free_arg)(void*),
                           const XpuDeviceRange* ranges, size_t range_count, bool wait,
                           TF_Status* status);
/* Fills PLUGGABLE_StreamNamesExt.set_stream_name (see pluggable/plugin_ext.h). */
void xpu_stream_set_name(const SP_Device* device, SP_Stream stream, const char* name);

/* ---- the profiler (xpu_profiler.c) ------------------------------------------------------ */

/* What a profiled stream operation was. */
typedef enum XpuProfKind {
  XPU_PROF_KERNEL,
  XPU_PROF_MEMCPY_H2D,
  XPU_PROF_MEMCPY_D2H,
  XPU_PROF_MEMCPY_D2D,
  XPU_PROF_MEMSET,
  XPU_PROF_HOST_CALLBACK,
  XPU_PROF_RECORD_EVENT,
  XPU_PROF_WAIT_EVENT,
  XPU_PROF_KIND_COUNT
} XpuProfKind;

/* One stream's event buffer. Only the stream's worker appends to it, and only while a session
 * runs; it outlives its stream until the session's data has been taken (xpu_profiler.c). */
typedef struct XpuProfStream XpuProfStream;

/* Set while a profiling session runs (xpu_profiler.c writes it under its lock). */
extern atomic_bool xpu_prof_session;
/* True while a profiling session runs. One relaxed atomic load: the whole cost of the
 * profiler on the hot path when no session runs. */
static inline bool xpu_prof_active(void) {
  return atomic_load_explicit(&xpu_prof_session, memory_order_relaxed);
}
/* CLOCK_REALTIME in nanoseconds, the profiler's clock (TensorFlow's profiler uses it too). */
uint64_t xpu_prof_now_ns(void);
/* A buffer for stream `stream_id` of device `ordinal`, not yet listed; NULL when out of memory
 * (the stream then goes unprofiled). List it with xpu_prof_stream_publish once the stream
 * exists, and hand it back with xpu_prof_stream_release when the stream is destroyed (its
 * worker joined). */
XpuProfStream* xpu_prof_stream_new(int ordinal, uint64_t stream_id);
void xpu_prof_stream_publish(XpuProfStream* b);
void xpu_prof_stream_release(XpuProfStream* b);
/* Replaces the stream's name (copied, at most XPU_PROF_MAX_NAME bytes kept). */
void xpu_prof_stream_set_name(XpuProfStream* b, const char* name);
#define XPU_PROF_MAX_NAME 255
/* A heap copy of [text, text + len) (at most XPU_PROF_MAX_NAME bytes), for a kernel's node
 * name; NULL when out of memory. Freed with xpu_prof_free_name unless handed to
 * xpu_prof_record, which takes it. */
char* xpu_prof_copy_name(const char* text, size_t len);
void xpu_prof_free_name(char* name);
/* Called by `b`'s worker after an operation: appends one event if a session is running
 * (else drops it). Takes ownership of `name` (may be NULL). `op_type`, for kernels, is a
 * string that lives as long as the plugin. */
void xpu_prof_record(XpuProfStream* b, XpuProfKind kind, uint64_t start_ns, uint64_t end_ns,
                     uint64_t bytes, const char* op_type, char* name, uint64_t correlation_id);
/* The host's correlation id of the op launch `ctx` belongs to (PLUGGABLE_ProfilerContextExt,
 * see pluggable/plugin_ext.h), or 0 when the host gave none (TensorFlow) or no session runs. */
uint64_t xpu_prof_correlation_id(struct TF_OpKernelContext* ctx);

/* Like xpu_stream_enqueue_fn, but the work is a struct of `work_size` bytes that the stream
 * copies into a buffer of the operation record; both are recycled per stream, so a steady
 * stream of kernels allocates nothing. fn gets the copy. `cleanup` (may be NULL) releases
 * what the work owns (never the struct itself): it is called on the copy after fn ran or was
 * skipped, or on `work` itself when enqueueing fails. */
bool xpu_stream_enqueue_work(SP_Stream stream, const char* name, const char* node,
                             size_t node_len, uint64_t launch, XpuStreamFn fn, const void* work,
                             size_t work_size, void (*cleanup)(void*),
                             const XpuDeviceRange* ranges, size_t range_count, bool wait,
                             TF_Status* status);

/* ---- the kernels' helper-thread pool (xpu_kernels_pool.c) ------------------------------- */

/* Parses XPU_KERNEL_THREADS text (1..256); false with a reason in err when invalid. */
bool xpu_parse_kernel_threads(const char* text, int* out, char* err, size_t err_size);
/* Sets how many threads work on one kernel, the stream worker included (0: the number of
 * online CPUs). Takes effect the next time the pool starts its helpers. */
void xpu_pool_configure(int threads);
/* Element-wise kernels over fewer elements than this run on the stream worker alone
 * (XPU_ELEMENTWISE_SPLIT; default XPU_ELEMENTWISE_SPLIT_DEFAULT, see xpu_kernels_pool.c). */
#define XPU_ELEMENTWISE_SPLIT_DEFAULT ((int64_t)1 << 16)
/* Parses XPU_ELEMENTWISE_SPLIT text (0..2^62 elements); false with a reason in err. */
bool xpu_parse_elementwise_split(const char* text, int64_t* out, char* err, size_t err_size);
void xpu_pool_configure_elementwise_split(int64_t elements);
int64_t xpu_pool_elementwise_split(void);
/* The pool lives while streams do: create_stream retains it, destroy_stream releases it, and
 * the last release joins the helpers (started lazily by the first parallel job). */
void xpu_pool_retain(void);
void xpu_pool_release(void);
/* Runs fn(ctx, t) for every t in [0, task_count), on the calling thread and the pool's
 * helpers, and returns when all have finished. Tasks are claimed in increasing order; with
 * one task, or a pool of one thread, everything runs inline. */
void xpu_parallel_for(int64_t task_count, void (*fn)(void* ctx, int64_t task), void* ctx);
/* Wakes the sleeping helpers for a job a stream worker is about to publish, `work_ns` from
 * now at the latest: they spin for it (at most XPU_POOL_SPIN_NS) instead of waiting to be
 * woken when it comes, so the helpers' wake-up overlaps the worker's. Called on the
 * enqueueing thread by kernels that know their work will be split. */
void xpu_pool_expect_job(uint64_t work_ns);
/* How many threads a parallel job may run on, the caller included (XPU_KERNEL_THREADS or the
 * number of online CPUs). A kernel whose results do not depend on how its work is cut (the
 * GEMM's tiles of C) may size its tasks by it. */
int xpu_pool_threads(void);

/* ---- fault injection and test controls (xpu_faults.c) ----------------------------------- */

typedef enum XpuFaultKind {
  XPU_FAULT_ALLOCATE,
  XPU_FAULT_MEMCPY_HTOD,
  XPU_FAULT_MEMCPY_DTOH,
  XPU_FAULT_MEMCPY_DTOD,
  XPU_FAULT_MEMSET,
  XPU_FAULT_CREATE_STREAM,
  XPU_FAULT_CREATE_EVENT,
  XPU_FAULT_RECORD_EVENT,
  XPU_FAULT_HOST_CALLBACK,
  XPU_FAULT_STREAM,
  XPU_FAULT_CREATE_TIMER,
  XPU_FAULT_KERNEL,
  XPU_FAULT_PROFILER_START,
  XPU_FAULT_PROFILER_COLLECT,
  XPU_FAULT_KIND_COUNT
} XpuFaultKind;

typedef struct XpuFaultSpec XpuFaultSpec;

/* Parses a fault spec ("allocate:2,memset"). `source` names it in errors ("XPU_FAIL"). On
 * success returns true and sets *out (NULL for an empty spec); on failure writes the reason
 * into err and returns false. */
bool xpu_faults_parse(const char* text, const char* source, XpuFaultSpec** out, char* err,
                      size_t err_size);
void xpu_faults_free(XpuFaultSpec* spec);
/* Replaces the active spec with `spec` (taking ownership; NULL clears) and resets counters. */
void xpu_faults_install(XpuFaultSpec* spec);
/* Counts one call of `kind`; returns its 1-based number when the spec says it must fail,
 * 0 otherwise. */
uint64_t xpu_fault_hit(XpuFaultKind kind);
/* Sets INTERNAL "injected fault" on `status` for call `call` of `kind` made by `fn`. */
void xpu_fault_status(TF_Status* status, XpuFaultKind kind, uint64_t call, const char* fn);
const char* xpu_fault_name(XpuFaultKind kind);

/* Parses XPU_STREAM_DELAY_US text; false with a reason in err when invalid. */
/* A whole number from 0 to `max` (decimal digits only) in `text` into *out; false otherwise. */
bool xpu_parse_whole(const char* text, uint64_t max, uint64_t* out);
bool xpu_parse_stream_delay(const char* text, uint64_t* out, char* err, size_t err_size);
uint64_t xpu_stream_delay_us(void);
/* Operations of at most this many bytes, enqueued on an idle stream, run on the caller's
 * thread (xpu_stream.c: submit); 0 runs everything on the workers. */
bool xpu_parse_inline_bytes(const char* text, uint64_t* out, char* err, size_t err_size);
uint64_t xpu_inline_max_bytes(void);
/* Whether XPU_SetLaunchBlocking made every kernel's compute() wait for its work. */
bool xpu_launch_blocking_forced(void);

#pragma GCC visibility pop

#endif /* XPU_INTERNAL_H_ */
