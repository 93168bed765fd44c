/* xpu_memory.c: device memory (one arena per device), host and unified memory, statistics,
 * pointer validation and the synchronous copies.
 *
 * The arena is XPU_MEMORY_BYTES of address space reserved with mmap(MAP_NORESERVE) at the
 * device's first allocation, so an idle device costs nothing and untouched pages never become
 * resident. Inside it a best-fit allocator hands out 256-byte-aligned blocks: the arena is
 * tiled by a sorted array of blocks (free or used); allocation splits the smallest free block
 * that fits, deallocation merges a block with free neighbours. Lookups of "which allocation
 * holds this address" are binary searches over that array, so every pointer the host passes is
 * checked against the live allocations of the device it is used with, or, for the source of
 * a peer copy (PLUGGABLE_PLATFORM_PEER_DTOD), of the peer device whose arena holds it.
 *
 * The mapping itself (XpuMapping) is reference-counted: the device holds one reference and
 * every peer copy reading from the arena holds one while it is queued or running, so the
 * last of them unmaps it. Fresh arena pages cost a page fault at their first touch
 * (MAP_NORESERVE reserves address space only); transparent huge pages were tried and made
 * first touches several times slower on the test machine, so they are not requested.
 *
 * Unified memory is carved from the same arena (kind XPU_BLOCK_UNIFIED): arena memory is
 * ordinary process memory, so the host can read and write it directly and the device can use
 * it in copies, which is what unified memory means. Host memory (host_memory_allocate) is
 * page-aligned posix_memalign memory, tracked so foreign frees are detected.
 *
 * All functions that touch an arena run under XpuDevice.mu; the bytes are copied after the
 * lock is dropped, so a copy never blocks other callers.
 */
#include "xpu_internal.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MAP_NORESERVE
#define MAP_NORESERVE 0
#endif

/* ---- the arena allocator ---------------------------------------------------------------- */

void xpu_memory_init_device(XpuDevice* dev, uint64_t arena_bytes) {
  memset(&dev->arena, 0, sizeof dev->arena);
  dev->arena.size = arena_bytes;
  dev->arena.next_id = 1;
}

void xpu_mapping_unref(XpuMapping* m) {
  if (m == NULL || atomic_fetch_sub(&m->refs, 1) != 1) return;
  munmap(m->base, m->size);
  free(m);
}

/* Reserves the arena's address space on first use; false if the system refuses. */
static bool arena_map(XpuArena* arena) {
  if (arena->base != NULL) return true;
  XpuBlock* blocks = malloc(16 * sizeof(XpuBlock));
  XpuMapping* mapping = malloc(sizeof *mapping);
  void* base = blocks == NULL || mapping == NULL
                   ? MAP_FAILED
                   : mmap(NULL, (size_t)arena->size, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    free(blocks);
    free(mapping);
    return false;
  }
  mapping->base = base;
  mapping->size = (size_t)arena->size;
  atomic_init(&mapping->refs, 1); /* the device's own reference */
  arena->base = base;
  arena->mapping = mapping;
  arena->blocks = blocks;
  arena->block_capacity = 16;
  arena->block_count = 1;
  arena->blocks[0] = (XpuBlock){.offset = 0, .size = arena->size, .kind = XPU_BLOCK_FREE};
  return true;
}

/* Makes room for one more block; false when out of memory. */
static bool arena_reserve_block(XpuArena* arena) {
  if (arena->block_count < arena->block_capacity) return true;
  size_t capacity = arena->block_capacity * 2;
  XpuBlock* grown = realloc(arena->blocks, capacity * sizeof(XpuBlock));
  if (grown == NULL) return false;
  arena->blocks = grown;
  arena->block_capacity = capacity;
  return true;
}

/* Index of the block containing arena offset `offset` (which must be inside the arena). */
static size_t arena_block_index(const XpuArena* arena, uint64_t offset) {
  size_t lo = 0, hi = arena->block_count; /* invariant: blocks[lo].offset <= offset */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (arena->blocks[mid].offset <= offset) lo = mid; else hi = mid;
  }
  return lo;
}

/* The used block that contains `ptr`, or NULL if `ptr` is not inside a live allocation. */
static const XpuBlock* arena_find(const XpuArena* arena, const void* ptr) {
  if (arena->base == NULL || ptr == NULL) return NULL;
  uintptr_t base = (uintptr_t)arena->base;
  uintptr_t p = (uintptr_t)ptr;
  if (p < base || p - base >= arena->size) return NULL;
  const XpuBlock* block = &arena->blocks[arena_block_index(arena, p - base)];
  return block->kind == XPU_BLOCK_FREE ? NULL : block;
}

/* Allocates `size` bytes of `kind` from the arena; NULL when it cannot. */
static void* arena_alloc(XpuArena* arena, uint64_t size, int kind, uint64_t* id) {
  if (size == 0 || size > arena->size) return NULL;
  uint64_t need = (size + XPU_ALIGNMENT - 1) & ~(XPU_ALIGNMENT - 1);
  if (!arena_map(arena)) return NULL;
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < arena->block_count; i++) {
    const XpuBlock* b = &arena->blocks[i];
    if (b->kind == XPU_BLOCK_FREE && b->size >= need &&
        (best == SIZE_MAX || b->size < arena->blocks[best].size)) {
      best = i;
      if (b->size == need) break;
    }
  }
  if (best == SIZE_MAX) return NULL;
  if (arena->blocks[best].size > need) {
    if (!arena_reserve_block(arena)) return NULL;
    XpuBlock* b = &arena->blocks[best];
    memmove(b + 2, b + 1, (arena->block_count - best - 1) * sizeof(XpuBlock));
    b[1] = (XpuBlock){.offset = b->offset + need, .size = b->size - need, .kind = XPU_BLOCK_FREE};
    b->size = need;
    arena->block_count++;
  }
  XpuBlock* b = &arena->blocks[best];
  b->kind = kind;
  b->requested = size;
  b->id = arena->next_id++;
  *id = b->id;
  arena->num_allocs++;
  arena->bytes_in_use += (int64_t)need;
  if (arena->bytes_in_use > arena->peak_bytes_in_use) arena->peak_bytes_in_use = arena->bytes_in_use;
  if ((int64_t)need > arena->largest_alloc_size) arena->largest_alloc_size = (int64_t)need;
  if (kind == XPU_BLOCK_DEVICE) arena->live_device_blocks++; else arena->live_unified_blocks++;
  return arena->base + b->offset;
}

/* Frees the `kind` block that starts at `ptr`; false if there is no such block. */
static bool arena_free(XpuArena* arena, void* ptr, int kind) {
  const XpuBlock* found = arena_find(arena, ptr);
  if (found == NULL || found->kind != kind || arena->base + found->offset != ptr) return false;
  size_t i = (size_t)(found - arena->blocks);
  XpuBlock* b = &arena->blocks[i];
  arena->bytes_in_use -= (int64_t)b->size;
  if (kind == XPU_BLOCK_DEVICE) arena->live_device_blocks--; else arena->live_unified_blocks--;
  *b = (XpuBlock){.offset = b->offset, .size = b->size, .kind = XPU_BLOCK_FREE};
  if (i + 1 < arena->block_count && b[1].kind == XPU_BLOCK_FREE) {
    b->size += b[1].size;
    memmove(b + 1, b + 2, (arena->block_count - i - 2) * sizeof(XpuBlock));
    arena->block_count--;
  }
  if (i > 0 && b[-1].kind == XPU_BLOCK_FREE) {
    b[-1].size += b->size;
    memmove(b, b + 1, (arena->block_count - i - 1) * sizeof(XpuBlock));
    arena->block_count--;
  }
  return true;
}

/* The size of the largest free block (the whole arena before it is mapped). */
static uint64_t arena_largest_free(const XpuArena* arena) {
  if (arena->base == NULL) return arena->size;
  uint64_t largest = 0;
  for (size_t i = 0; i < arena->block_count; i++) {
    const XpuBlock* b = &arena->blocks[i];
    if (b->kind == XPU_BLOCK_FREE && b->size > largest) largest = b->size;
  }
  return largest;
}

void xpu_memory_teardown_device(XpuDevice* dev) {
  size_t n = 0;
  void** leaked = xpu_ptrset_snapshot(&dev->host_allocs, &n);
  for (size_t i = 0; i < n; i++) free(leaked[i]);
  free(leaked);
  xpu_ptrset_clear(&dev->host_allocs);
  /* Unmaps the arena now, or when the last queued peer copy reading from it is done. */
  xpu_mapping_unref(dev->arena.mapping);
  free(dev->arena.blocks);
  memset(&dev->arena, 0, sizeof dev->arena);
}

/* ---- validation ------------------------------------------------------------------------- */

bool xpu_check_device_range(XpuDevice* dev, const void* ptr, uint64_t size, const char* fn,
                            const char* role, TF_Status* status) {
  if (ptr == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: %s pointer is NULL", fn, role);
    return false;
  }
  const XpuBlock* b = arena_find(&dev->arena, ptr);
  uint64_t into = b == NULL ? 0 : (uint64_t)((uintptr_t)ptr - (uintptr_t)(dev->arena.base + b->offset));
  if (b == NULL || into >= b->requested) {
    xpu_status(status, TF_INVALID_ARGUMENT,
               "%s: %s %p is not inside a live allocation of XPU device %d", fn, role, ptr,
               dev->ordinal);
    return false;
  }
  if (size > b->requested - into) {
    xpu_status(status, TF_OUT_OF_RANGE,
               "%s: %" PRIu64 " bytes at %s %p run past the end of its allocation (%" PRIu64
               " bytes left of a %" PRIu64 "-byte allocation on XPU device %d)",
               fn, size, role, ptr, b->requested - into, b->requested, dev->ordinal);
    return false;
  }
  return true;
}

bool xpu_arena_contains(const XpuDevice* dev, const void* ptr) {
  uintptr_t base = (uintptr_t)dev->arena.base;
  return base != 0 && (uintptr_t)ptr >= base && (uintptr_t)ptr - base < dev->arena.size;
}

bool xpu_pin_device_range(XpuDevice* dev, const void* ptr, uint64_t size, const char* fn,
                          const char* role, TF_Status* status, XpuMapping** pin) {
  if (!xpu_check_device_range(dev, ptr, size, fn, role, status)) return false;
  /* The device holds a reference until destroy_device, so the count is at least 1 here. */
  atomic_fetch_add(&dev->arena.mapping->refs, 1);
  *pin = dev->arena.mapping;
  return true;
}

bool xpu_memory_base_pointer(const SP_DeviceMemoryBase* mem, const char* fn, const char* role,
                             TF_Status* status, void** out) {
  if (mem == NULL) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: %s SP_DeviceMemoryBase is NULL", fn, role);
    return false;
  }
  if (!XPU_FITS(mem, SP_DeviceMemoryBase, opaque)) {
    xpu_check_size(status, fn, "SP_DeviceMemoryBase", mem->struct_size,
                   TF_OFFSET_OF_END(SP_DeviceMemoryBase, opaque));
    return false;
  }
  *out = mem->opaque;
  return true;
}

/* ---- allocation callbacks --------------------------------------------------------------- */

/* SP_StreamExecutor.allocate: best-fit from the device arena; failure leaves opaque NULL. */
static void xpu_allocate(const SP_Device* device, uint64_t size, int64_t memory_space,
                         SP_DeviceMemoryBase* mem) {
  if (mem == NULL || !XPU_FITS(mem, SP_DeviceMemoryBase, opaque)) return;
  mem->opaque = NULL;
  if (XPU_FITS(mem, SP_DeviceMemoryBase, size)) mem->size = 0;
  if (XPU_FITS(mem, SP_DeviceMemoryBase, payload)) mem->payload = 0;
  if (mem->struct_size > SP_DEVICE_MEMORY_BASE_STRUCT_SIZE) {
    mem->struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE;
  }
  XpuDevice* dev = xpu_device_get(device, "allocate", NULL);
  if (dev == NULL || size == 0 || memory_space != 0) return;
  if (xpu_fault_hit(XPU_FAULT_ALLOCATE) != 0) return;
  uint64_t id = 0;
  pthread_mutex_lock(&dev->mu);
  void* p = arena_alloc(&dev->arena, size, XPU_BLOCK_DEVICE, &id);
  pthread_mutex_unlock(&dev->mu);
  if (p == NULL) return;
  mem->opaque = p;
  if (XPU_FITS(mem, SP_DeviceMemoryBase, size)) mem->size = size;
  if (XPU_FITS(mem, SP_DeviceMemoryBase, payload)) mem->payload = id;
}

/* SP_StreamExecutor.deallocate: returns a block to the arena; unknown pointers are counted. */
static void xpu_deallocate(const SP_Device* device, SP_DeviceMemoryBase* mem) {
  if (mem == NULL || !XPU_FITS(mem, SP_DeviceMemoryBase, opaque) || mem->opaque == NULL) return;
  XpuDevice* dev = xpu_device_get(device, "deallocate", NULL);
  if (dev == NULL) {
    xpu_count_invalid_free();
    return;
  }
  pthread_mutex_lock(&dev->mu);
  bool freed = arena_free(&dev->arena, mem->opaque, XPU_BLOCK_DEVICE);
  pthread_mutex_unlock(&dev->mu);
  if (!freed) xpu_count_invalid_free();
}

/* SP_StreamExecutor.host_memory_allocate: page-aligned host memory, tracked per device. */
static void* xpu_host_memory_allocate(const SP_Device* device, uint64_t size) {
  XpuDevice* dev = xpu_device_get(device, "host_memory_allocate", NULL);
  if (dev == NULL || size == 0 || size > SIZE_MAX) return NULL;
  long page = sysconf(_SC_PAGESIZE);
  void* p = NULL;
  if (posix_memalign(&p, page > 0 ? (size_t)page : 4096, (size_t)size) != 0) return NULL;
  pthread_mutex_lock(&dev->mu);
  bool registered = xpu_ptrset_insert(&dev->host_allocs, p);
  pthread_mutex_unlock(&dev->mu);
  if (!registered) {
    free(p);
    return NULL;
  }
  return p;
}

/* SP_StreamExecutor.host_memory_deallocate: frees tracked host memory, ignores anything else. */
static void xpu_host_memory_deallocate(const SP_Device* device, void* mem) {
  if (mem == NULL) return;
  XpuDevice* dev = xpu_device_get(device, "host_memory_deallocate", NULL);
  bool known = false;
  if (dev != NULL) {
    pthread_mutex_lock(&dev->mu);
    known = xpu_ptrset_remove(&dev->host_allocs, mem);
    pthread_mutex_unlock(&dev->mu);
  }
  if (known) free(mem); else xpu_count_invalid_free();
}

/* SP_StreamExecutor.unified_memory_allocate: arena memory the host may also touch. */
static void* xpu_unified_memory_allocate(const SP_Device* device, uint64_t bytes) {
  XpuDevice* dev = xpu_device_get(device, "unified_memory_allocate", NULL);
  if (dev == NULL || bytes == 0) return NULL;
  uint64_t id = 0;
  pthread_mutex_lock(&dev->mu);
  void* p = arena_alloc(&dev->arena, bytes, XPU_BLOCK_UNIFIED, &id);
  pthread_mutex_unlock(&dev->mu);
  return p;
}

/* SP_StreamExecutor.unified_memory_deallocate: returns a unified block to the arena. */
static void xpu_unified_memory_deallocate(const SP_Device* device, void* location) {
  if (location == NULL) return;
  XpuDevice* dev = xpu_device_get(device, "unified_memory_deallocate", NULL);
  bool freed = false;
  if (dev != NULL) {
    pthread_mutex_lock(&dev->mu);
    freed = arena_free(&dev->arena, location, XPU_BLOCK_UNIFIED);
    pthread_mutex_unlock(&dev->mu);
  }
  if (!freed) xpu_count_invalid_free();
}

/* SP_StreamExecutor.get_allocator_stats: the arena's counters, written up to struct_size. */
static TF_Bool xpu_get_allocator_stats(const SP_Device* device, SP_AllocatorStats* stats) {
  /* The four basic counters are the least a host can ask for; later fields are optional. */
  if (stats == NULL || !XPU_FITS(stats, SP_AllocatorStats, largest_alloc_size)) return 0;
  XpuDevice* dev = xpu_device_get(device, "get_allocator_stats", NULL);
  if (dev == NULL) return 0;
  pthread_mutex_lock(&dev->mu);
  const XpuArena* a = &dev->arena;
  int64_t reserved = a->base != NULL ? (int64_t)a->size : 0;
  stats->num_allocs = a->num_allocs;
  stats->bytes_in_use = a->bytes_in_use;
  stats->peak_bytes_in_use = a->peak_bytes_in_use;
  stats->largest_alloc_size = a->largest_alloc_size;
  if (XPU_FITS(stats, SP_AllocatorStats, has_bytes_limit)) stats->has_bytes_limit = 1;
  if (XPU_FITS(stats, SP_AllocatorStats, bytes_limit)) stats->bytes_limit = (int64_t)a->size;
  if (XPU_FITS(stats, SP_AllocatorStats, bytes_reserved)) stats->bytes_reserved = reserved;
  if (XPU_FITS(stats, SP_AllocatorStats, peak_bytes_reserved)) stats->peak_bytes_reserved = reserved;
  if (XPU_FITS(stats, SP_AllocatorStats, has_bytes_reservable_limit)) {
    stats->has_bytes_reservable_limit = 1;
  }
  if (XPU_FITS(stats, SP_AllocatorStats, bytes_reservable_limit)) {
    stats->bytes_reservable_limit = (int64_t)a->size;
  }
  if (XPU_FITS(stats, SP_AllocatorStats, largest_free_block_bytes)) {
    stats->largest_free_block_bytes = (int64_t)arena_largest_free(a);
  }
  pthread_mutex_unlock(&dev->mu);
  if (stats->struct_size > SP_ALLOCATORSTATS_STRUCT_SIZE) {
    stats->struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE;
  }
  return 1;
}

/* SP_StreamExecutor.device_memory_usage: free and total bytes of the arena. */
static TF_Bool xpu_device_memory_usage(const SP_Device* device, int64_t* free_bytes,
                                       int64_t* total_bytes) {
  XpuDevice* dev = xpu_device_get(device, "device_memory_usage", NULL);
  if (dev == NULL || free_bytes == NULL || total_bytes == NULL) return 0;
  pthread_mutex_lock(&dev->mu);
  *total_bytes = (int64_t)dev->arena.size;
  *free_bytes = (int64_t)dev->arena.size - dev->arena.bytes_in_use;
  pthread_mutex_unlock(&dev->mu);
  return 1;
}

/* ---- synchronous copies ----------------------------------------------------------------- */

/* Validates one synchronous copy under the device lock and runs the fault check; the caller
 * copies afterwards without the lock. `*_on_device` false marks a host pointer. With
 * `src_peer`, a device source outside dev's arena is looked up among the peer devices of its
 * platform (PLUGGABLE_PLATFORM_PEER_DTOD) and its mapping pinned into *pin, which the caller
 * drops once it has copied. */
static bool check_sync_copy(XpuDevice* dev, const char* fn, XpuFaultKind kind, void* dst,
                            bool dst_on_device, const void* src, bool src_on_device,
                            bool src_peer, uint64_t size, TF_Status* status, XpuMapping** pin) {
  *pin = NULL;
  if ((!dst_on_device && dst == NULL) || (!src_on_device && src == NULL)) {
    xpu_status(status, TF_INVALID_ARGUMENT, "%s: host %s pointer is NULL for a %" PRIu64
               "-byte copy", fn, dst_on_device ? "source" : "destination", size);
    return false;
  }
  pthread_mutex_lock(&dev->mu);
  bool ok = !dst_on_device ||
            xpu_check_device_range(dev, dst, size, fn, "device destination", status);
  bool peer = ok && src_on_device && src_peer && src != NULL && !xpu_arena_contains(dev, src);
  if (ok && src_on_device && !peer) {
    ok = xpu_check_device_range(dev, src, size, fn, "device source", status);
  }
  pthread_mutex_unlock(&dev->mu);
  /* The destination was checked above; like every copy, the bytes move after the check. */
  if (peer) ok = xpu_peer_pin_range(dev, src, size, fn, "device source", status, pin);
  if (!ok) return false;
  uint64_t call = xpu_fault_hit(kind);
  if (call != 0) {
    xpu_fault_status(status, kind, call, fn);
    xpu_mapping_unref(*pin);
    *pin = NULL;
    return false;
  }
  return true;
}

/* SP_StreamExecutor.sync_memcpy_dtoh: copies device memory to the host on the caller's thread. */
static void xpu_sync_memcpy_dtoh(const SP_Device* device, void* host_dst,
                                 const SP_DeviceMemoryBase* device_src, uint64_t size,
                                 TF_Status* status) {
  const char* fn = "sync_memcpy_dtoh";
  void* src = NULL;
  XpuDevice* dev = xpu_device_get(device, fn, status);
  if (dev == NULL || size == 0) return;
  if (!xpu_memory_base_pointer(device_src, fn, "source", status, &src)) return;
  XpuMapping* pin;
  if (!check_sync_copy(dev, fn, XPU_FAULT_MEMCPY_DTOH, host_dst, false, src, true, false, size,
                       status, &pin)) {
    return;
  }
  memcpy(host_dst, src, (size_t)size);
}

/* SP_StreamExecutor.sync_memcpy_htod: copies host memory to the device on the caller's thread. */
static void xpu_sync_memcpy_htod(const SP_Device* device, SP_DeviceMemoryBase* device_dst,
                                 const void* host_src, uint64_t size, TF_Status* status) {
  const char* fn = "sync_memcpy_htod";
  void* dst = NULL;
  XpuDevice* dev = xpu_device_get(device, fn, status);
  if (dev == NULL || size == 0) return;
  if (!xpu_memory_base_pointer(device_dst, fn, "destination", status, &dst)) return;
  XpuMapping* pin;
  if (!check_sync_copy(dev, fn, XPU_FAULT_MEMCPY_HTOD, dst, true, host_src, false, false, size,
                       status, &pin)) {
    return;
  }
  memcpy(dst, host_src, (size_t)size);
}

/* SP_StreamExecutor.sync_memcpy_dtod: copies into this device's memory from its own memory
 * (ranges may overlap) or from a peer device of the same platform (PLUGGABLE_PLATFORM_PEER_DTOD;
 * the source's mapping stays pinned while the bytes move). */
static void xpu_sync_memcpy_dtod(const SP_Device* device, SP_DeviceMemoryBase* device_dst,
                                 const SP_DeviceMemoryBase* device_src, uint64_t size,
                                 TF_Status* status) {
  const char* fn = "sync_memcpy_dtod";
  void* dst = NULL;
  void* src = NULL;
  XpuDevice* dev = xpu_device_get(device, fn, status);
  if (dev == NULL || size == 0) return;
  if (!xpu_memory_base_pointer(device_dst, fn, "destination", status, &dst) ||
      !xpu_memory_base_pointer(device_src, fn, "source", status, &src)) {
    return;
  }
  XpuMapping* pin;
  if (!check_sync_copy(dev, fn, XPU_FAULT_MEMCPY_DTOD, dst, true, src, true, true, size, status,
                       &pin)) {
    return;
  }
  memmove(dst, src, (size_t)size);
  xpu_mapping_unref(pin);
}

void xpu_memory_fill_executor(SP_StreamExecutor* se) {
  se->allocate = xpu_allocate;
  se->deallocate = xpu_deallocate;
  se->host_memory_allocate = xpu_host_memory_allocate;
  se->host_memory_deallocate = xpu_host_memory_deallocate;
  se->unified_memory_allocate = xpu_unified_memory_allocate;
  se->unified_memory_deallocate = xpu_unified_memory_deallocate;
  se->get_allocator_stats = xpu_get_allocator_stats;
  se->device_memory_usage = xpu_device_memory_usage;
  se->sync_memcpy_dtoh = xpu_sync_memcpy_dtoh;
  se->sync_memcpy_htod = xpu_sync_memcpy_htod;
  se->sync_memcpy_dtod = xpu_sync_memcpy_dtod;
}
