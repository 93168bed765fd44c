/* Declarations shared by the host runtime library's translation units, and the few functions
 * the Python host calls that are not part of TensorFlow's API. Plugins never see these. */
#ifndef PLUGGABLE_RUNTIME_INTERNAL_H_
#define PLUGGABLE_RUNTIME_INTERNAL_H_

#include "tensorflow/c/tf_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Makes `s` OK again, dropping its message and payloads, so one status serves many calls. */
TF_CAPI_EXPORT void pluggable_ResetStatus(TF_Status* s);

/* ---- BFC allocator (bfc.c) ---------------------------------------------------------------
 * A best-fit-with-coalescing allocator over regions from a plugin's SP_StreamExecutor, as
 * TensorFlow's PluggableDevice uses; bfc.c's header comment describes the algorithm. Every
 * function accepts a NULL allocator (and does nothing, or reports failure). The SP_Device
 * and SP_StreamExecutor given to pluggable_BFCNew must outlive the allocator. */
#include "tensorflow/c/experimental/stream_executor/stream_executor.h"

typedef struct PG_BFC PG_BFC;

/* Where regions come from: SP_StreamExecutor.allocate (device memory, memory space 0) or
 * host_memory_allocate (pinned host memory). */
enum { PG_BFC_DEVICE = 0, PG_BFC_HOST = 1 };

/* One chunk, as pluggable_BFCSnapshot reports it; `region` indexes regions by address. */
typedef struct PG_BFCChunkInfo {
  uint64_t address;
  uint64_t size;      /* bytes, a multiple of 256 */
  uint64_t requested; /* bytes asked for; 0 when free */
  int32_t in_use;
  int32_t region;
} PG_BFCChunkInfo;

/* A new allocator reserving at most `memory_limit` bytes (rounded down to 256). NULL with an
 * INVALID_ARGUMENT `status` for a bad kind, NULL pointers, missing callbacks or a limit under
 * 256 bytes. `name` (copied) labels descriptions and messages. */
TF_CAPI_EXPORT PG_BFC* pluggable_BFCNew(int kind, const SP_Device* device,
                                        const SP_StreamExecutor* se, uint64_t memory_limit,
                                        int allow_growth, const char* name, TF_Status* status);
/* Frees the allocator. With `return_regions`, gives every region back to the sub-allocator
 * (pass 0 once the device is destroyed: the plugin already took its memory back). Returns
 * the number of allocations still live, whose memory is gone with their regions. */
TF_CAPI_EXPORT int64_t pluggable_BFCDelete(PG_BFC* bfc, int return_regions);
/* `size` bytes, 256-aligned; NULL when out of memory, and for size 0 (treat 0 specially). */
TF_CAPI_EXPORT void* pluggable_BFCAllocate(PG_BFC* bfc, uint64_t size);
/* 0 when `ptr` was a live allocation (NULL is a no-op), nonzero (and nothing changes) for
 * any other pointer. */
TF_CAPI_EXPORT int pluggable_BFCDeallocate(PG_BFC* bfc, void* ptr);
/* The chunk size (request rounded up to 256) of a live allocation, 0 for anything else. */
TF_CAPI_EXPORT uint64_t pluggable_BFCAllocatedSize(PG_BFC* bfc, const void* ptr);
/* Fills the fields of `stats` that end within stats->struct_size. */
TF_CAPI_EXPORT void pluggable_BFCGetStats(PG_BFC* bfc, SP_AllocatorStats* stats);
/* peak_bytes_in_use = bytes_in_use, peak_bytes_reserved = bytes_reserved. */
TF_CAPI_EXPORT void pluggable_BFCResetPeak(PG_BFC* bfc);
/* Returns every completely free region to the sub-allocator; the bytes released. */
TF_CAPI_EXPORT uint64_t pluggable_BFCReleaseFreeRegions(PG_BFC* bfc);
/* A human summary (limit, use, regions, largest free chunk, chunks per non-empty size
 * class) into buf; returns the length it needs, like snprintf. */
TF_CAPI_EXPORT size_t pluggable_BFCDescribe(PG_BFC* bfc, char* buf, size_t n);
/* 0 when every invariant holds; otherwise 1 and the first violation in `err`. */
TF_CAPI_EXPORT int pluggable_BFCCheck(PG_BFC* bfc, char* err, size_t n);
/* Writes up to `capacity` chunks (regions by address, chunks by address) into `out`;
 * returns how many there are. */
TF_CAPI_EXPORT size_t pluggable_BFCSnapshot(PG_BFC* bfc, PG_BFCChunkInfo* out,
                                            size_t capacity);

#ifdef __cplusplus
}
#endif

#endif
