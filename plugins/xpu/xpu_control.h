/* xpu_control.h: test controls exported by the XPU reference plugin (libxpu_plugin.so).
 *
 * These are plain C symbols of the plugin, outside TensorFlow's API. A test process loads the
 * plugin once, so the environment variables read by SE_InitPlugin (XPU_FAIL,
 * XPU_STREAM_DELAY_US) cannot change between tests; these functions change the same settings
 * at run time. They are thread-safe and may be called before or after SE_InitPlugin. A host
 * finds them with dlsym; TensorFlow never calls them.
 */
#ifndef XPU_CONTROL_H_
#define XPU_CONTROL_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define XPU_CONTROL_EXPORT __attribute__((visibility("default")))
#else
#define XPU_CONTROL_EXPORT
#endif

/* Replaces the fault-injection spec and resets every per-kind call counter. The syntax is
 * XPU_FAIL's: comma-separated entries, `kind:N` fails the N-th call (1-based) of that kind,
 * `kind` alone fails every call. Kinds: allocate, memcpy_htod, memcpy_dtoh, memcpy_dtod,
 * memset, create_stream, create_event, record_event, host_callback, stream, create_timer,
 * kernel, profiler_start, profiler_collect. NULL or "" clears all faults. Returns 0, or -1
 * for a malformed spec, in which case nothing changes and XPU_LastControlError() says why. */
XPU_CONTROL_EXPORT int XPU_SetFaults(const char* spec);

/* The reason the calling thread's last failed control call failed, or "" if none did. The
 * text stays valid until this thread's next control call. */
XPU_CONTROL_EXPORT const char* XPU_LastControlError(void);

/* Makes every stream worker sleep `us` microseconds before each operation it runs
 * (XPU_STREAM_DELAY_US at run time). 0 disables the delay. Values above 60 s are clamped. */
XPU_CONTROL_EXPORT void XPU_SetStreamDelayUs(uint64_t us);

/* Operations of at most `bytes` bytes (a copy's size, a kernel's inputs and outputs) enqueued
 * on an idle stream run at once on the calling thread (XPU_INLINE_BYTES at run time; 64 KiB
 * by default). 0 runs every operation on the stream's worker. Values above 1 GiB are
 * clamped. */
XPU_CONTROL_EXPORT void XPU_SetInlineBytes(uint64_t bytes);

/* Nonzero: every kernel's compute() waits until the work it enqueued has run, behind all the
 * work queued on its stream before it (host callbacks included), as on a host without the
 * variable functions (TensorFlow), where the plugin does so by itself. 0: the mode the
 * plugin chose when it was loaded. */
XPU_CONTROL_EXPORT void XPU_SetLaunchBlocking(int blocking);

/* How many deallocations (deallocate, unified_memory_deallocate, host_memory_deallocate) of
 * memory the plugin did not hand out, or had already taken back, were ignored since the
 * plugin was loaded. */
XPU_CONTROL_EXPORT uint64_t XPU_InvalidFreeCount(void);

/* How many stream operation records the plugin has taken from the C library since it was
 * loaded (all streams, all devices). Streams recycle finished records, so in a steady stream
 * of work this stops growing. */
XPU_CONTROL_EXPORT uint64_t XPU_OpRecordAllocations(void);

/* How many tasks kernels have split their work into since the plugin was loaded (all
 * devices): a kernel that runs as one piece adds nothing, one split into n tasks for the
 * helper threads adds n, whether or not a helper ran any of them. Tests read it around a
 * kernel to see whether and how it was split. */
XPU_CONTROL_EXPORT uint64_t XPU_SplitTaskCount(void);
/* How many times a helper thread that joined a split kernel on a CPU another of its threads
 * had taken moved to a free CPU (plugins/xpu/README.md, "Threads"). Helper threads are named
 * "xpu-pool". */
XPU_CONTROL_EXPORT uint64_t XPU_PoolMoveCount(void);
/* Sets how many events the profiler keeps per stream and session (default 262144) for
 * sessions started afterwards; later events are dropped and counted in the XSpace. 0 restores
 * the default. */
XPU_CONTROL_EXPORT void XPU_SetProfilerMaxEvents(uint64_t max_events);

/* How many heap blocks the profiler holds now: stream buffers, their event chunks, copied
 * names, and the data of a stopped session not yet collected. Leak tests compare it before
 * and after start/stop/collect cycles. */
XPU_CONTROL_EXPORT int64_t XPU_ProfilerHeapBlocks(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* XPU_CONTROL_H_ */
