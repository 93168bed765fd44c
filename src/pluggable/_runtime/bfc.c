/* bfc.c: the BFC ("best-fit with coalescing") allocator of the host runtime library.
 *
 * What it does. A device's memory is expensive to obtain (a plugin's allocate may map memory,
 * synchronise, or talk to a driver), so, like TensorFlow's PluggableDevice, the host asks the
 * plugin for a few large *regions* and carves tensors out of them itself. A region comes from
 * a sub-allocator: kind 0 is device memory from SP_StreamExecutor.allocate/deallocate, kind 1
 * pinned host memory from host_memory_allocate/host_memory_deallocate. The allocator never
 * reserves more than its memory limit in total.
 *
 * Why in C. Plugin kernels allocate their outputs (TF_AllocateOutput) inside this library,
 * from C, without going through Python; and the Python-side allocate + free pair must stay
 * around a microsecond, which rules out a Python data structure.
 *
 * The model is TensorFlow's BFCAllocator:
 *   Chunks  every region is tiled exactly by chunks, doubly linked in address order. A chunk
 *       is in use or free; its size is a multiple of 256 bytes and it starts 256-aligned.
 *   Bins  free chunks sit in size classes: bin i holds sizes in [256 << i, 256 << (i + 1)),
 *       56 bins cover every 64-bit size. Each bin is a treap keyed by (size, address), so
 *       the best fit inside a bin (smallest size >= the request, lowest address on ties) is
 *       O(log n); a bitmap of non-empty bins finds the next larger bin in O(1). Every chunk of
 *       a larger bin is larger than every chunk of a smaller one, so this is global best fit.
 *   Split  the chosen chunk is split whenever the remainder is at least 256 bytes (always,
 *       since sizes are multiples of 256): an in-use chunk is its request rounded up to 256.
 *       TensorFlow keeps chunks up to twice the request whole, trading up to half a chunk of
 *       internal waste for fewer splits; here the remainder stays free and coalesces back.
 *   Coalesce  a freed chunk merges with both address neighbours when they are free, so no
 *       two adjacent chunks are ever both free.
 *   Lookup  in-use chunks are kept in an open-addressing hash table keyed by address
 *       (pointer -> chunk in O(1)); an address that is not there was not given out.
 *   Growth  with allow_growth the first region is max(2 MiB, request) and each further
 *       region max(twice the previous one, request), capped at what is left of the limit.
 *       Without growth a region takes everything left of the limit (the first allocation
 *       reserves the whole limit as one region). If the sub-allocator refuses a region larger
 *       than the request, smaller ones are tried, halving down to the request.
 *   Out of memory  when no free chunk fits and no region can be added, every completely free
 *       region is returned to the sub-allocator and, if that released anything, the
 *       allocation is tried once more; then NULL.
 *   Size 0  pluggable_BFCAllocate(b, 0) returns NULL and changes nothing: callers treat an
 *       empty allocation specially (the Python wrapper returns address 0).
 *   Statistics  bytes_in_use counts chunk sizes (requests rounded up to 256), as TensorFlow's
 *       does; num_allocs counts every successful allocation since creation.
 *   Threads  one mutex per allocator guards everything, including the sub-allocator calls.
 *
 * A region's base is the plugin's opaque value, used as an address (TensorFlow does the
 * same): chunk addresses are base + offset. A base that is not 256-aligned is aligned up and
 * the region's usable size shrinks accordingly.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_internal.h"
#include "tensorflow/c/experimental/stream_executor/stream_executor.h"
#include "tensorflow/c/tf_status.h"

#define BFC_ALIGN 256u
#define BFC_MIN_BIN_SHIFT 8 /* log2(BFC_ALIGN) */
#define BFC_NUM_BINS 56     /* bin 55 holds sizes >= 2^63 */
#define BFC_INITIAL_REGION ((uint64_t)2 << 20)
#define BFC_CHUNKS_PER_BLOCK 256
/* Room behind a struct handed to a plugin to fill, for a plugin built with a longer layout
 * (the same slack the Python host gives, validation._SLACK_BYTES). */
#define BFC_PLUGIN_SLACK 512

typedef struct Region Region;

typedef struct Chunk {
  uint64_t ptr;           /* address of the first byte */
  uint64_t size;          /* bytes, a multiple of BFC_ALIGN */
  uint64_t requested;     /* bytes asked for when in use; 0 when free */
  struct Chunk* prev;     /* address neighbours inside the region, NULL at its ends */
  struct Chunk* next;     /* also the free-list link of the chunk pool */
  struct Chunk* left;     /* treap children while the chunk is free */
  struct Chunk* right;
  Region* region;
  uint32_t priority;      /* treap heap priority */
  int32_t in_use;
} Chunk;

struct Region {
  uint64_t base;          /* first usable byte, 256-aligned */
  uint64_t usable;        /* bytes the chunks tile, a multiple of BFC_ALIGN */
  uint64_t reserved;      /* bytes asked of the sub-allocator (counted in bytes_reserved) */
  Chunk* first;
  SP_DeviceMemoryBase mem;  /* kind 0: exactly what allocate filled in */
  void* host;               /* kind 1: what host_memory_allocate returned */
};

typedef struct Bin {
  Chunk* root;            /* treap of free chunks ordered by (size, ptr) */
  uint64_t free_count, free_bytes;
  uint64_t used_count, used_bytes; /* in-use chunks of this size class, for describe */
} Bin;

typedef struct ChunkBlock {
  struct ChunkBlock* next;
  Chunk chunks[BFC_CHUNKS_PER_BLOCK];
} ChunkBlock;

typedef struct PtrMap {
  Chunk** slots;          /* NULL = empty; linear probing, backward-shift deletion */
  size_t capacity;        /* a power of two */
  size_t count;
  unsigned shift;         /* 64 - log2(capacity) */
} PtrMap;

struct PG_BFC;

/* A source of regions. `alloc` fills the region's base/reserved and its handle fields. */
typedef struct SubAllocator {
  const char* what;
  bool (*alloc)(struct PG_BFC* b, uint64_t bytes, Region* r);
  void (*free)(struct PG_BFC* b, Region* r);
} SubAllocator;

struct PG_BFC {
  pthread_mutex_t mu;
  const SubAllocator* sub;
  int kind;
  const SP_Device* device;
  const SP_StreamExecutor* se;
  char* name;
  uint64_t limit;
  bool allow_growth;
  bool exact; /* PG_BFC_EXACT: no pooling */
  uint64_t last_region_target;  /* uncapped size asked for the last grown region; 0 at first */

  Region** regions;       /* sorted by base */
  size_t num_regions, regions_capacity;

  Bin bins[BFC_NUM_BINS];
  uint64_t nonempty;      /* bit i set when bins[i] holds a free chunk */

  PtrMap map;             /* in-use chunks by address */
  Chunk* spare;           /* pool of unused Chunk structs */
  ChunkBlock* blocks;
  uint32_t rng;

  /* statistics */
  int64_t num_allocs, live_allocs, bytes_in_use, peak_bytes_in_use, largest_alloc_size;
  int64_t bytes_reserved, peak_bytes_reserved;
  uint64_t failed_allocs, sub_failures, last_sub_failure_bytes;
  char refusal[480]; /* why the last region the plugin handed out was refused; "" if none */
};

/* ---- small helpers ---------------------------------------------------------------------- */

/* Rounds `n` up to the allocation granularity; the caller checked it cannot overflow. */
static uint64_t round_up(uint64_t n) { return (n + BFC_ALIGN - 1) & ~(uint64_t)(BFC_ALIGN - 1); }

/* The size class of a chunk of `size` >= 256 bytes. */
static int bin_for(uint64_t size) { return 63 - __builtin_clzll(size) - BFC_MIN_BIN_SHIFT; }

/* A 32-bit pseudo-random number (xorshift) for treap priorities. */
static uint32_t next_random(struct PG_BFC* b) {
  uint32_t x = b->rng;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  b->rng = x;
  return x;
}

/* Writes `bytes` as "12.5 MiB" (or "768 B") into out. */
static void human_bytes(uint64_t bytes, char out[32]) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) {
    snprintf(out, 32, "%" PRIu64 " B", bytes);
    return;
  }
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    u++;
  }
  snprintf(out, 32, "%.1f %s", v, units[u]);
}

/* ---- chunk pool ------------------------------------------------------------------------- */

/* A zeroed Chunk from the pool, or NULL when the host is out of memory. */
static Chunk* chunk_new(struct PG_BFC* b) {
  if (b->spare == NULL) {
    ChunkBlock* block = malloc(sizeof(ChunkBlock));
    if (block == NULL) return NULL;
    block->next = b->blocks;
    b->blocks = block;
    for (int i = BFC_CHUNKS_PER_BLOCK - 1; i >= 0; i--) {
      block->chunks[i].next = b->spare;
      b->spare = &block->chunks[i];
    }
  }
  Chunk* c = b->spare;
  b->spare = c->next;
  memset(c, 0, sizeof *c);
  return c;
}

/* Returns a Chunk struct to the pool. */
static void chunk_release(struct PG_BFC* b, Chunk* c) {
  c->next = b->spare;
  b->spare = c;
}

/* ---- treaps of free chunks -------------------------------------------------------------- */

/* Orders chunks by (size, address). */
static bool key_less(const Chunk* a, const Chunk* b) {
  return a->size < b->size || (a->size == b->size && a->ptr < b->ptr);
}

/* Joins two treaps where every key of `a` is below every key of `b`. */
static Chunk* treap_merge(Chunk* a, Chunk* b) {
  if (a == NULL) return b;
  if (b == NULL) return a;
  if (a->priority > b->priority) {
    a->right = treap_merge(a->right, b);
    return a;
  }
  b->left = treap_merge(a, b->left);
  return b;
}

/* Splits `t` into keys below `key` (*l) and the rest (*r). */
static void treap_split(Chunk* t, const Chunk* key, Chunk** l, Chunk** r) {
  if (t == NULL) {
    *l = *r = NULL;
  } else if (key_less(t, key)) {
    treap_split(t->right, key, &t->right, r);
    *l = t;
  } else {
    treap_split(t->left, key, l, &t->left);
    *r = t;
  }
}

/* Inserts `n` (not yet in any treap) into the treap at *root. */
static void treap_insert(Chunk** root, Chunk* n) {
  Chunk** link = root;
  while (*link != NULL && (*link)->priority >= n->priority) {
    link = key_less(n, *link) ? &(*link)->left : &(*link)->right;
  }
  treap_split(*link, n, &n->left, &n->right);
  *link = n;
}

/* Removes `n`, which is in the treap at *root. */
static void treap_erase(Chunk** root, Chunk* n) {
  Chunk** link = root;
  while (*link != n) link = key_less(n, *link) ? &(*link)->left : &(*link)->right;
  *link = treap_merge(n->left, n->right);
  n->left = n->right = NULL;
}

/* The smallest chunk of at least `size` bytes (lowest address among equals), or NULL. */
static Chunk* treap_lower_bound(Chunk* t, uint64_t size) {
  Chunk* best = NULL;
  while (t != NULL) {
    if (t->size >= size) {
      best = t;
      t = t->left;
    } else {
      t = t->right;
    }
  }
  return best;
}

/* The smallest chunk of a non-empty treap. */
static Chunk* treap_min(Chunk* t) {
  while (t->left != NULL) t = t->left;
  return t;
}

/* The largest chunk of a non-empty treap. */
static Chunk* treap_max(Chunk* t) {
  while (t->right != NULL) t = t->right;
  return t;
}

/* True when the treap at `t` holds exactly the node `n` (searched by key). */
static bool treap_contains(const Chunk* t, const Chunk* n) {
  while (t != NULL && t != n) t = key_less(n, t) ? t->left : t->right;
  return t == n;
}

/* ---- bins ------------------------------------------------------------------------------- */

/* Files a free chunk under its size class. */
static void bin_insert(struct PG_BFC* b, Chunk* c) {
  int i = bin_for(c->size);
  c->priority = next_random(b);
  c->left = c->right = NULL;
  treap_insert(&b->bins[i].root, c);
  b->bins[i].free_count++;
  b->bins[i].free_bytes += c->size;
  b->nonempty |= (uint64_t)1 << i;
}

/* Takes a free chunk out of its size class. */
static void bin_remove(struct PG_BFC* b, Chunk* c) {
  int i = bin_for(c->size);
  treap_erase(&b->bins[i].root, c);
  b->bins[i].free_count--;
  b->bins[i].free_bytes -= c->size;
  if (b->bins[i].root == NULL) b->nonempty &= ~((uint64_t)1 << i);
}

/* The best-fitting free chunk of at least `rounded` bytes, still in its bin; NULL if none. */
static Chunk* find_fit(struct PG_BFC* b, uint64_t rounded) {
  int i = bin_for(rounded);
  Chunk* c = treap_lower_bound(b->bins[i].root, rounded);
  if (c != NULL) return c;
  uint64_t larger = i + 1 < 64 ? b->nonempty & ~(((uint64_t)2 << i) - 1) : 0;
  if (larger == 0) return NULL;
  return treap_min(b->bins[__builtin_ctzll(larger)].root);
}

/* The size of the largest free chunk, 0 when there is none. */
static uint64_t largest_free(const struct PG_BFC* b) {
  if (b->nonempty == 0) return 0;
  return treap_max(b->bins[63 - __builtin_clzll(b->nonempty)].root)->size;
}

/* ---- address -> in-use chunk ------------------------------------------------------------ */

/* The home slot of `ptr` (Fibonacci hashing of the 256-byte granule). */
static size_t map_home(const PtrMap* m, uint64_t ptr) {
  return (size_t)(((ptr >> BFC_MIN_BIN_SHIFT) * UINT64_C(0x9E3779B97F4A7C15)) >> m->shift);
}

/* Places `c` in `m`, which has a free slot. */
static void map_put(PtrMap* m, Chunk* c) {
  size_t mask = m->capacity - 1, i = map_home(m, c->ptr);
  while (m->slots[i] != NULL) i = (i + 1) & mask;
  m->slots[i] = c;
  m->count++;
}

/* Makes sure one more entry fits at load factor <= 1/2; false when out of host memory. */
static bool map_reserve(PtrMap* m) {
  if ((m->count + 1) * 2 <= m->capacity) return true;
  size_t capacity = m->capacity ? m->capacity * 2 : 64;
  Chunk** slots = calloc(capacity, sizeof(Chunk*));
  if (slots == NULL) return false;
  PtrMap grown = {slots, capacity, 0, 64 - (unsigned)__builtin_ctzll(capacity)};
  for (size_t i = 0; i < m->capacity; i++) {
    if (m->slots[i] != NULL) map_put(&grown, m->slots[i]);
  }
  free(m->slots);
  *m = grown;
  return true;
}

/* The slot holding the chunk at `ptr`, or SIZE_MAX. */
static size_t map_find(const PtrMap* m, uint64_t ptr) {
  if (m->capacity == 0) return SIZE_MAX;
  size_t mask = m->capacity - 1;
  for (size_t i = map_home(m, ptr);; i = (i + 1) & mask) {
    if (m->slots[i] == NULL) return SIZE_MAX;
    if (m->slots[i]->ptr == ptr) return i;
  }
}

/* Empties slot `i`, shifting later entries of its probe run back so lookups stay correct. */
static void map_erase_at(PtrMap* m, size_t i) {
  size_t mask = m->capacity - 1;
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (m->slots[j] == NULL) break;
    size_t home = map_home(m, m->slots[j]->ptr);
    /* Move slots[j] into the hole at i unless its home lies cyclically in (i, j]. */
    bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (!stays) {
      m->slots[i] = m->slots[j];
      i = j;
    }
  }
  m->slots[i] = NULL;
  m->count--;
}

/* ---- the platform's live device memory ----------------------------------------------------
 * Every region a plugin's allocate handed out and the host holds, on every device of every
 * platform, in one array sorted by (platform, start): a new region that overlaps a live one
 * of its platform is refused (a dishonest allocator would otherwise give two tensors the same
 * bytes). A platform is told apart by its allocate function: the devices of one plugin share
 * it. Regions are rare (BFC pooling), so a sorted array with binary search is enough; with
 * use_bfc_allocator = 0 each allocation is a region and the cost is O(log n) plus a move. */
typedef struct LiveRange {
  uintptr_t platform;
  uint64_t start, end; /* [start, end) */
} LiveRange;

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static LiveRange* live_ranges;
static size_t live_count, live_capacity;

/* The index of the first range of `platform` whose (platform, start) is >= (platform, start). */
static size_t live_lower_bound(uintptr_t platform, uint64_t start) {
  size_t lo = 0, hi = live_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const LiveRange* r = &live_ranges[mid];
    if (r->platform < platform || (r->platform == platform && r->start < start)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/* Adds [start, end) for `platform` unless it overlaps a live range of it: then returns false
 * and writes the range it overlaps to `*other`. Also false (other->end == 0) when out of host
 * memory. */
static bool live_claim(uintptr_t platform, uint64_t start, uint64_t end, LiveRange* other) {
  bool ok = false;
  other->end = 0;
  pthread_mutex_lock(&live_mu);
  size_t at = live_lower_bound(platform, start);
  if (at > 0 && live_ranges[at - 1].platform == platform && live_ranges[at - 1].end > start) {
    *other = live_ranges[at - 1];
  } else if (at < live_count && live_ranges[at].platform == platform &&
             live_ranges[at].start < end) {
    *other = live_ranges[at];
  } else {
    if (live_count == live_capacity) {
      size_t capacity = live_capacity ? live_capacity * 2 : 64;
      LiveRange* grown = realloc(live_ranges, capacity * sizeof *grown);
      if (grown == NULL) goto done;
      live_ranges = grown;
      live_capacity = capacity;
    }
    memmove(&live_ranges[at + 1], &live_ranges[at], (live_count - at) * sizeof *live_ranges);
    live_ranges[at] = (LiveRange){platform, start, end};
    live_count++;
    ok = true;
  }
done:
  pthread_mutex_unlock(&live_mu);
  return ok;
}

/* Forgets the live range of `platform` that starts at `start`. */
static void live_release(uintptr_t platform, uint64_t start) {
  pthread_mutex_lock(&live_mu);
  size_t at = live_lower_bound(platform, start);
  if (at < live_count && live_ranges[at].platform == platform && live_ranges[at].start == start) {
    memmove(&live_ranges[at], &live_ranges[at + 1], (live_count - at - 1) * sizeof *live_ranges);
    live_count--;
  }
  pthread_mutex_unlock(&live_mu);
}

/* A platform's key: its allocate function (the devices of one plugin share it). */
static uintptr_t allocate_key(void (*allocate)(const SP_Device*, uint64_t, int64_t,
                                               SP_DeviceMemoryBase*)) {
  uintptr_t key;
  memcpy(&key, &allocate, sizeof key < sizeof allocate ? sizeof key : sizeof allocate);
  return key;
}

static uintptr_t platform_key(const SP_StreamExecutor* se) { return allocate_key(se->allocate); }

/* The key of a platform's host-addressable memory (host_memory_allocate's blocks and
 * unified_memory_allocate's, checked against each other): the first of those functions it
 * has, the same for every device of the plugin. */
static uintptr_t host_key(const SP_StreamExecutor* se) {
  void* (*fn)(const SP_Device*, uint64_t) =
      se->host_memory_allocate != NULL ? se->host_memory_allocate : se->unified_memory_allocate;
  uintptr_t key;
  memcpy(&key, &fn, sizeof key < sizeof fn ? sizeof key : sizeof fn);
  return key;
}

/* The alignment a plugin's device memory must have: what malloc guarantees. */
#define DEVICE_MEMORY_ALIGN 16u

/* Checks what allocate filled in for a request of `bytes`: the size as asked, the alignment,
 * no overlap with live memory of the platform (then claimed). On a refusal writes why into
 * b->refusal and returns false; `give_back` says whether the block may go back to the plugin
 * (not when it overlaps live memory: freeing it could free that memory too). */
static bool check_block(uintptr_t key, const SP_DeviceMemoryBase* mem, uint64_t bytes,
                        bool* give_back, char* why, size_t why_size);
/* The checks of a block at `base` that `call` returned for `bytes` (`reported`: the size it
 * reported, 0 when it reports none). */
static bool check_range(uintptr_t key, const char* call, uint64_t base, uint64_t reported,
                        uint64_t bytes, bool* give_back, char* why, size_t why_size);

static bool check_region(struct PG_BFC* b, const SP_DeviceMemoryBase* mem, uint64_t bytes,
                         bool* give_back) {
  return check_block(platform_key(b->se), mem, bytes, give_back, b->refusal,
                     sizeof b->refusal);
}

int pluggable_ClaimDeviceMemory(const void* allocate_fn, const SP_DeviceMemoryBase* mem,
                                uint64_t bytes, char* why, size_t n) {
  bool give_back;
  if (check_block((uintptr_t)allocate_fn, mem, bytes, &give_back, why, n)) return 1;
  return give_back ? 0 : -1;
}

int pluggable_ClaimHostMemory(const void* key, const char* call, const void* address,
                              uint64_t bytes, char* why, size_t n) {
  bool give_back;
  if (check_range((uintptr_t)key, call != NULL ? call : "host memory allocation",
                  (uint64_t)(uintptr_t)address, 0, bytes, &give_back, why, n)) {
    return 1;
  }
  return give_back ? 0 : -1;
}

void pluggable_ReleaseHostMemory(const void* key, const void* address) {
  live_release((uintptr_t)key, (uint64_t)(uintptr_t)address);
}

void pluggable_ReleaseDeviceMemory(const void* allocate_fn, const void* opaque) {
  live_release((uintptr_t)allocate_fn, (uint64_t)(uintptr_t)opaque);
}

static bool check_block(uintptr_t key, const SP_DeviceMemoryBase* mem, uint64_t bytes,
                        bool* give_back, char* why, size_t why_size) {
  uint64_t reported =
      mem->struct_size >= TF_OFFSET_OF_END(SP_DeviceMemoryBase, size) ? mem->size : 0;
  return check_range(key, "SP_StreamExecutor.allocate", (uint64_t)(uintptr_t)mem->opaque,
                     reported, bytes, give_back, why, why_size);
}

static bool check_range(uintptr_t key, const char* call, uint64_t base, uint64_t reported,
                        uint64_t bytes, bool* give_back, char* why, size_t why_size) {
  *give_back = true;
  if (reported != 0 && reported < bytes) {
    snprintf(why, why_size,
             "%s was asked for %" PRIu64 " bytes and reported a block of %" PRIu64 " bytes at "
             "0x%" PRIx64 "; the block was refused", call, bytes, reported, base);
    return false;
  }
  if (base % DEVICE_MEMORY_ALIGN != 0) {
    snprintf(why, why_size,
             "%s returned 0x%" PRIx64 ", which is not %u-byte aligned (memory a plugin hands "
             "out must be at least as aligned as malloc's); the block was refused", call, base,
             DEVICE_MEMORY_ALIGN);
    return false;
  }
  if (base > UINT64_MAX - bytes) {
    snprintf(why, why_size,
             "%s returned 0x%" PRIx64 ", where %" PRIu64 " bytes do not fit below the top of "
             "the address space; the block was refused", call, base, bytes);
    return false;
  }
  LiveRange other;
  if (!live_claim(key, base, base + bytes, &other)) {
    if (other.end == 0) {
      snprintf(why, why_size, "out of host memory tracking device memory");
      return false;
    }
    *give_back = false;
    snprintf(why, why_size,
             "%s returned [0x%" PRIx64 ", 0x%" PRIx64 ") for %" PRIu64 " bytes, which overlaps "
             "memory it handed out before and that is still in use ([0x%" PRIx64 ", 0x%" PRIx64
             "), on this or another device of the platform); the block was refused and is not "
             "used", call, base, base + bytes, bytes, other.start, other.end);
    return false;
  }
  return true;
}

/* ---- sub-allocators --------------------------------------------------------------------- */

/* Kind 0: a region of device memory from SP_StreamExecutor.allocate (memory space 0). */
static bool device_region_alloc(struct PG_BFC* b, uint64_t bytes, Region* r) {
  union {
    SP_DeviceMemoryBase mem;
    unsigned char room[sizeof(SP_DeviceMemoryBase) + BFC_PLUGIN_SLACK];
  } filled;
  memset(&filled, 0, sizeof filled);
  filled.mem.struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE;
  b->se->allocate(b->device, bytes, 0, &filled.mem);
  if (filled.mem.opaque == NULL) return false;
  bool give_back;
  if (!check_region(b, &filled.mem, bytes, &give_back)) {
    if (give_back) b->se->deallocate(b->device, &filled.mem);
    return false;
  }
  r->mem = filled.mem;
  r->base = (uint64_t)(uintptr_t)filled.mem.opaque;
  r->reserved = bytes;
  return true;
}

/* Kind 0: gives a region back to SP_StreamExecutor.deallocate as allocate filled it. */
static void device_region_free(struct PG_BFC* b, Region* r) {
  union {
    SP_DeviceMemoryBase mem;
    unsigned char room[sizeof(SP_DeviceMemoryBase) + BFC_PLUGIN_SLACK];
  } handed;
  memset(&handed, 0, sizeof handed);
  handed.mem = r->mem;
  live_release(platform_key(b->se), (uint64_t)(uintptr_t)r->mem.opaque);
  b->se->deallocate(b->device, &handed.mem);
}

/* Kind 1: a region of pinned host memory from SP_StreamExecutor.host_memory_allocate. */
static bool host_region_alloc(struct PG_BFC* b, uint64_t bytes, Region* r) {
  void* p = b->se->host_memory_allocate(b->device, bytes);
  if (p == NULL) return false;
  bool give_back;
  if (!check_range(host_key(b->se), "SP_StreamExecutor.host_memory_allocate",
                   (uint64_t)(uintptr_t)p, 0, bytes, &give_back, b->refusal,
                   sizeof b->refusal)) {
    if (give_back) b->se->host_memory_deallocate(b->device, p);
    return false;
  }
  r->host = p;
  r->base = (uint64_t)(uintptr_t)p;
  r->reserved = bytes;
  return true;
}

/* Kind 1: returns a region to SP_StreamExecutor.host_memory_deallocate. */
static void host_region_free(struct PG_BFC* b, Region* r) {
  live_release(host_key(b->se), (uint64_t)(uintptr_t)r->host);
  b->se->host_memory_deallocate(b->device, r->host);
}

static const SubAllocator kDeviceSubAllocator = {
    "device memory (SP_StreamExecutor.allocate)", device_region_alloc, device_region_free};
static const SubAllocator kHostSubAllocator = {
    "pinned host memory (SP_StreamExecutor.host_memory_allocate)", host_region_alloc,
    host_region_free};

/* ---- regions ---------------------------------------------------------------------------- */

/* Asks the sub-allocator for `bytes`, then smaller sizes down to `minimum` if it refuses;
 * returns the size obtained or 0. Aligns the region's usable part. */
static uint64_t region_obtain(struct PG_BFC* b, uint64_t bytes, uint64_t minimum, Region* r) {
  for (;;) {
    if (b->sub->alloc(b, bytes, r)) {
      uint64_t aligned = round_up(r->base);
      uint64_t skip = aligned - r->base;
      uint64_t usable = skip < bytes ? (bytes - skip) & ~(uint64_t)(BFC_ALIGN - 1) : 0;
      if (usable >= minimum) {
        /* PG_BFC_EXACT: a region serves its one allocation; alignment slack serves none */
        if (b->exact) usable = minimum;
        r->base = aligned;
        r->usable = usable;
        return bytes;
      }
      b->sub->free(b, r); /* misaligned so badly that the request no longer fits */
    }
    b->sub_failures++;
    b->last_sub_failure_bytes = bytes;
    if (bytes <= minimum) return 0;
    uint64_t half = round_up(bytes / 2);
    bytes = half > minimum ? half : minimum;
  }
}

/* Adds a region big enough for a chunk of `rounded` bytes; false if the limit or the
 * sub-allocator does not allow one. */
static bool extend(struct PG_BFC* b, uint64_t rounded) {
  uint64_t available = b->limit - (uint64_t)b->bytes_reserved;
  if (rounded > available) return false;
  uint64_t target = available;
  if (b->exact) {
    target = rounded; /* a region per allocation, of its own size */
  } else if (b->allow_growth) {
    target = b->last_region_target == 0 ? BFC_INITIAL_REGION
             : b->last_region_target > UINT64_MAX / 2 ? UINT64_MAX - BFC_ALIGN + 1
                                                      : b->last_region_target * 2;
    if (target < rounded) target = rounded;
  }
  uint64_t want = target < available ? target : available;

  /* Everything that can fail on the host side first, so a region is never half-made. */
  if (b->num_regions == b->regions_capacity) {
    size_t capacity = b->regions_capacity ? b->regions_capacity * 2 : 8;
    Region** grown = realloc(b->regions, capacity * sizeof(Region*));
    if (grown == NULL) return false;
    b->regions = grown;
    b->regions_capacity = capacity;
  }
  Region* r = calloc(1, sizeof(Region));
  Chunk* c = chunk_new(b);
  if (r == NULL || c == NULL) {
    free(r);
    if (c != NULL) chunk_release(b, c);
    return false;
  }
  /* PG_BFC_EXACT: the size asked for first; 256 bytes more when the memory came back
   * misaligned (a plugin whose allocate is malloc's alignment). */
  if (region_obtain(b, want, rounded, r) == 0 &&
      !(b->exact && available - want >= BFC_ALIGN &&
        region_obtain(b, want + BFC_ALIGN, rounded, r) != 0)) {
    free(r);
    chunk_release(b, c);
    return false;
  }
  if (b->allow_growth && !b->exact) b->last_region_target = target;

  size_t at = b->num_regions; /* keep the array sorted by base */
  while (at > 0 && b->regions[at - 1]->base > r->base) at--;
  memmove(&b->regions[at + 1], &b->regions[at], (b->num_regions - at) * sizeof(Region*));
  b->regions[at] = r;
  b->num_regions++;
  b->bytes_reserved += (int64_t)r->reserved;
  if (b->bytes_reserved > b->peak_bytes_reserved) b->peak_bytes_reserved = b->bytes_reserved;

  c->ptr = r->base;
  c->size = r->usable;
  c->region = r;
  r->first = c;
  bin_insert(b, c);
  return true;
}

/* Returns every region that is one free chunk to the sub-allocator; the bytes released. */
static uint64_t release_free_regions(struct PG_BFC* b) {
  uint64_t released = 0;
  for (size_t i = b->num_regions; i-- > 0;) {
    Region* r = b->regions[i];
    Chunk* c = r->first;
    if (c->in_use || c->next != NULL) continue;
    bin_remove(b, c);
    chunk_release(b, c);
    b->sub->free(b, r);
    b->bytes_reserved -= (int64_t)r->reserved;
    released += r->reserved;
    memmove(&b->regions[i], &b->regions[i + 1], (b->num_regions - i - 1) * sizeof(Region*));
    b->num_regions--;
    free(r);
  }
  return released;
}

/* ---- allocate and free ------------------------------------------------------------------ */

/* Marks the free chunk `c` (still in its bin) in use for `size` bytes, splitting off the
 * remainder; returns its address. */
static void* use_chunk(struct PG_BFC* b, Chunk* c, uint64_t size, uint64_t rounded) {
  bin_remove(b, c);
  if (c->size - rounded >= BFC_ALIGN) {
    Chunk* rest = chunk_new(b);
    if (rest != NULL) { /* without host memory for the struct, the whole chunk is used */
      rest->ptr = c->ptr + rounded;
      rest->size = c->size - rounded;
      rest->region = c->region;
      rest->prev = c;
      rest->next = c->next;
      if (c->next != NULL) c->next->prev = rest;
      c->next = rest;
      c->size = rounded;
      bin_insert(b, rest);
    }
  }
  c->in_use = 1;
  c->requested = size;
  map_put(&b->map, c);
  int i = bin_for(c->size);
  b->bins[i].used_count++;
  b->bins[i].used_bytes += c->size;
  b->num_allocs++;
  b->live_allocs++;
  b->bytes_in_use += (int64_t)c->size;
  if (b->bytes_in_use > b->peak_bytes_in_use) b->peak_bytes_in_use = b->bytes_in_use;
  if ((int64_t)c->size > b->largest_alloc_size) b->largest_alloc_size = (int64_t)c->size;
  return (void*)(uintptr_t)c->ptr;
}

/* One attempt at allocating: an existing free chunk, else a new region. */
static void* try_allocate(struct PG_BFC* b, uint64_t size, uint64_t rounded) {
  if (rounded > b->limit || !map_reserve(&b->map)) return NULL;
  Chunk* c = find_fit(b, rounded);
  if (c == NULL) {
    if (!extend(b, rounded)) return NULL;
    c = find_fit(b, rounded);
    if (c == NULL) return NULL;
  }
  return use_chunk(b, c, size, rounded);
}

/* Frees the in-use chunk `c` and merges it with free neighbours; returns the free chunk
 * that holds it now. */
static Chunk* free_chunk(struct PG_BFC* b, Chunk* c) {
  int i = bin_for(c->size);
  b->bins[i].used_count--;
  b->bins[i].used_bytes -= c->size;
  b->live_allocs--;
  b->bytes_in_use -= (int64_t)c->size;
  c->in_use = 0;
  c->requested = 0;
  Chunk* next = c->next;
  if (next != NULL && !next->in_use) {
    bin_remove(b, next);
    c->size += next->size;
    c->next = next->next;
    if (next->next != NULL) next->next->prev = c;
    chunk_release(b, next);
  }
  Chunk* prev = c->prev;
  if (prev != NULL && !prev->in_use) {
    bin_remove(b, prev);
    prev->size += c->size;
    prev->next = c->next;
    if (c->next != NULL) c->next->prev = prev;
    chunk_release(b, c);
    c = prev;
  }
  bin_insert(b, c);
  return c;
}

/* Gives the region of the free chunk `c` back to the sub-allocator when `c` is all of it
 * (PG_BFC_EXACT's free). */
static void release_region_of(struct PG_BFC* b, Chunk* c) {
  if (c->in_use || c->prev != NULL || c->next != NULL) return;
  Region* r = c->region;
  size_t lo = 0, hi = b->num_regions; /* regions are sorted by base */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (b->regions[mid]->base < r->base) lo = mid + 1; else hi = mid;
  }
  if (lo == b->num_regions || b->regions[lo] != r) return;
  bin_remove(b, c);
  chunk_release(b, c);
  b->sub->free(b, r);
  b->bytes_reserved -= (int64_t)r->reserved;
  memmove(&b->regions[lo], &b->regions[lo + 1], (b->num_regions - lo - 1) * sizeof(Region*));
  b->num_regions--;
  free(r);
}

/* ---- exported API ----------------------------------------------------------------------- */

PG_BFC* pluggable_BFCNew(int kind, const SP_Device* device, const SP_StreamExecutor* se,
                         uint64_t memory_limit, int allow_growth, const char* name,
                         TF_Status* status) {
  const SubAllocator* sub = NULL;
  const char* problem = NULL;
  uint64_t limit = memory_limit & ~(uint64_t)(BFC_ALIGN - 1);
  bool exact = (kind & PG_BFC_EXACT) != 0;
  kind &= ~PG_BFC_EXACT;
  if (kind == PG_BFC_DEVICE) {
    sub = &kDeviceSubAllocator;
  } else if (kind == PG_BFC_HOST) {
    sub = &kHostSubAllocator;
  } else {
    problem = "kind must be 0 (device memory) or 1 (pinned host memory)";
  }
  if (problem == NULL && (device == NULL || se == NULL)) {
    problem = "the SP_Device and the SP_StreamExecutor must not be NULL";
  } else if (problem == NULL && kind == PG_BFC_DEVICE && (!se->allocate || !se->deallocate)) {
    problem = "SP_StreamExecutor.allocate and deallocate must be set";
  } else if (problem == NULL && kind == PG_BFC_HOST &&
             (!se->host_memory_allocate || !se->host_memory_deallocate)) {
    problem = "a pinned host pool needs SP_StreamExecutor.host_memory_allocate and "
              "host_memory_deallocate, which this plugin does not set";
  } else if (problem == NULL && limit == 0) {
    problem = "memory_limit must be at least 256 bytes";
  }
  if (problem != NULL) {
    char message[320];
    snprintf(message, sizeof message, "pluggable_BFCNew(%s): %s", name ? name : "BFC",
             problem);
    TF_SetStatus(status, TF_INVALID_ARGUMENT, message);
    return NULL;
  }
  struct PG_BFC* b = calloc(1, sizeof *b);
  const char* label = name != NULL ? name : "BFC";
  char* copy = malloc(strlen(label) + 1);
  if (b == NULL || copy == NULL || pthread_mutex_init(&b->mu, NULL) != 0) {
    free(b);
    free(copy);
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "pluggable_BFCNew: out of host memory");
    return NULL;
  }
  strcpy(copy, label);
  b->name = copy;
  b->sub = sub;
  b->kind = kind;
  b->device = device;
  b->se = se;
  b->limit = limit;
  b->allow_growth = allow_growth != 0;
  b->exact = exact;
  b->rng = 0x9E3779B9u;
  TF_SetStatus(status, TF_OK, "");
  return b;
}

int64_t pluggable_BFCDelete(PG_BFC* b, int return_regions) {
  if (b == NULL) return 0;
  int64_t live = b->live_allocs;
  for (size_t i = 0; i < b->num_regions; i++) {
    if (return_regions) {
      b->sub->free(b, b->regions[i]);
    } else if (b->kind == PG_BFC_DEVICE) {
      live_release(platform_key(b->se), (uint64_t)(uintptr_t)b->regions[i]->mem.opaque);
    }
    free(b->regions[i]);
  }
  free(b->regions);
  while (b->blocks != NULL) {
    ChunkBlock* next = b->blocks->next;
    free(b->blocks);
    b->blocks = next;
  }
  free(b->map.slots);
  free(b->name);
  pthread_mutex_destroy(&b->mu);
  free(b);
  return live;
}

size_t pluggable_BFCRefusal(PG_BFC* b, char* buf, size_t n) {
  if (b == NULL || n == 0) return 0;
  pthread_mutex_lock(&b->mu);
  size_t length = strlen(b->refusal);
  snprintf(buf, n, "%s", b->refusal);
  pthread_mutex_unlock(&b->mu);
  return length;
}

void* pluggable_BFCAllocate(PG_BFC* b, uint64_t size) {
  if (b == NULL || size == 0 || size > UINT64_MAX - (BFC_ALIGN - 1)) return NULL;
  uint64_t rounded = round_up(size);
  pthread_mutex_lock(&b->mu);
  b->refusal[0] = '\0';
  void* p = try_allocate(b, size, rounded);
  if (p == NULL && rounded <= b->limit && release_free_regions(b) > 0) {
    p = try_allocate(b, size, rounded);
  }
  if (p == NULL) b->failed_allocs++;
  pthread_mutex_unlock(&b->mu);
  return p;
}

int pluggable_BFCDeallocate(PG_BFC* b, void* ptr) {
  if (ptr == NULL) return 0;
  if (b == NULL) return 1;
  pthread_mutex_lock(&b->mu);
  size_t slot = map_find(&b->map, (uint64_t)(uintptr_t)ptr);
  if (slot == SIZE_MAX) {
    pthread_mutex_unlock(&b->mu);
    return 1;
  }
  Chunk* c = b->map.slots[slot];
  map_erase_at(&b->map, slot);
  Chunk* freed = free_chunk(b, c);
  if (b->exact) release_region_of(b, freed);
  pthread_mutex_unlock(&b->mu);
  return 0;
}

uint64_t pluggable_BFCAllocatedSize(PG_BFC* b, const void* ptr) {
  if (b == NULL || ptr == NULL) return 0;
  pthread_mutex_lock(&b->mu);
  size_t slot = map_find(&b->map, (uint64_t)(uintptr_t)ptr);
  uint64_t size = slot == SIZE_MAX ? 0 : b->map.slots[slot]->size;
  pthread_mutex_unlock(&b->mu);
  return size;
}

/* True when `field` of `stats` ends within the struct_size the caller set. */
#define STATS_HAS(stats, field) \
  ((stats)->struct_size >= TF_OFFSET_OF_END(SP_AllocatorStats, field))

void pluggable_BFCGetStats(PG_BFC* b, SP_AllocatorStats* stats) {
  if (b == NULL || stats == NULL) return;
  pthread_mutex_lock(&b->mu);
  if (STATS_HAS(stats, num_allocs)) stats->num_allocs = b->num_allocs;
  if (STATS_HAS(stats, bytes_in_use)) stats->bytes_in_use = b->bytes_in_use;
  if (STATS_HAS(stats, peak_bytes_in_use)) stats->peak_bytes_in_use = b->peak_bytes_in_use;
  if (STATS_HAS(stats, largest_alloc_size)) stats->largest_alloc_size = b->largest_alloc_size;
  if (STATS_HAS(stats, has_bytes_limit)) stats->has_bytes_limit = 1;
  if (STATS_HAS(stats, bytes_limit)) stats->bytes_limit = (int64_t)b->limit;
  if (STATS_HAS(stats, bytes_reserved)) stats->bytes_reserved = b->bytes_reserved;
  if (STATS_HAS(stats, peak_bytes_reserved)) stats->peak_bytes_reserved = b->peak_bytes_reserved;
  if (STATS_HAS(stats, has_bytes_reservable_limit)) stats->has_bytes_reservable_limit = 1;
  if (STATS_HAS(stats, bytes_reservable_limit)) {
    stats->bytes_reservable_limit = (int64_t)b->limit;
  }
  if (STATS_HAS(stats, largest_free_block_bytes)) {
    stats->largest_free_block_bytes = (int64_t)largest_free(b);
  }
  pthread_mutex_unlock(&b->mu);
}

void pluggable_BFCResetPeak(PG_BFC* b) {
  if (b == NULL) return;
  pthread_mutex_lock(&b->mu);
  b->peak_bytes_in_use = b->bytes_in_use;
  b->peak_bytes_reserved = b->bytes_reserved;
  pthread_mutex_unlock(&b->mu);
}

uint64_t pluggable_BFCReleaseFreeRegions(PG_BFC* b) {
  if (b == NULL) return 0;
  pthread_mutex_lock(&b->mu);
  uint64_t released = release_free_regions(b);
  pthread_mutex_unlock(&b->mu);
  return released;
}

/* snprintf into a growing text: keeps counting the length once the buffer is full. */
typedef struct Text {
  char* buf;
  size_t cap;
  size_t len;
} Text;

/* Appends printf-style text to `t`. */
static void text_add(Text* t, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(Text* t, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char* at = t->len < t->cap ? t->buf + t->len : NULL;
  size_t room = t->len < t->cap ? t->cap - t->len : 0;
  int n = vsnprintf(at, room, fmt, args);
  va_end(args);
  if (n > 0) t->len += (size_t)n;
}

size_t pluggable_BFCDescribe(PG_BFC* b, char* buf, size_t n) {
  Text t = {buf, buf != NULL ? n : 0, 0};
  if (t.cap > 0) buf[0] = '\0';
  if (b == NULL) return 0;
  char h1[32], h2[32], h3[32], h4[32], h5[32];
  pthread_mutex_lock(&b->mu);
  uint64_t reserved = (uint64_t)b->bytes_reserved;
  human_bytes(b->limit, h1);
  human_bytes((uint64_t)b->bytes_in_use, h2);
  human_bytes(reserved, h3);
  human_bytes(b->limit - reserved, h4);
  human_bytes(largest_free(b), h5);
  text_add(&t,
           "BFC allocator '%s' over %s, %s:\n"
           "  limit %s (%" PRIu64 " bytes); in use %s (%" PRId64 " bytes) in %" PRId64
           " allocation(s); reserved %s (%" PRIu64 " bytes) in %zu region(s), %s unreserved; "
           "largest free chunk %s (%" PRIu64 " bytes)\n",
           b->name, b->sub->what, b->allow_growth ? "growing" : "not growing", h1, b->limit,
           h2, b->bytes_in_use, b->live_allocs, h3, reserved, b->num_regions, h4, h5,
           largest_free(b));
  human_bytes((uint64_t)b->peak_bytes_in_use, h1);
  human_bytes((uint64_t)b->peak_bytes_reserved, h2);
  text_add(&t, "  peak in use %s, peak reserved %s; %" PRIu64 " failed allocation(s)", h1, h2,
           b->failed_allocs);
  if (b->sub_failures > 0) {
    human_bytes(b->last_sub_failure_bytes, h3);
    text_add(&t, "; the plugin refused %" PRIu64 " region request(s), the last one of %s",
             b->sub_failures, h3);
  }
  text_add(&t, "\n");
  bool any = false;
  for (int i = 0; i < BFC_NUM_BINS; i++) {
    const Bin* bin = &b->bins[i];
    if (bin->free_count == 0 && bin->used_count == 0) continue;
    if (!any) text_add(&t, "  chunks by size class:\n");
    any = true;
    human_bytes((uint64_t)BFC_ALIGN << i, h1);
    if (i + 1 < BFC_NUM_BINS) {
      human_bytes((uint64_t)BFC_ALIGN << (i + 1), h2);
    } else {
      strcpy(h2, "...");
    }
    human_bytes(bin->free_bytes, h3);
    human_bytes(bin->used_bytes, h4);
    text_add(&t,
             "    [%s, %s): in use %" PRIu64 " (%s), free %" PRIu64 " (%s)\n", h1, h2,
             bin->used_count, h4, bin->free_count, h3);
  }
  if (!any) text_add(&t, "  no chunks: nothing is reserved\n");
  pthread_mutex_unlock(&b->mu);
  return t.len;
}

/* Checks one bin's treap: key order, heap order, membership; counts its nodes and bytes. */
static const char* check_treap(const struct PG_BFC* b, const Chunk* t, int bin,
                               const Chunk* lo, const Chunk* hi, uint64_t* count,
                               uint64_t* bytes, uint64_t* bad) {
  if (t == NULL) return NULL;
  *bad = t->ptr;
  if (t->in_use) return "an in-use chunk is in a free bin";
  if (bin_for(t->size) != bin) return "a free chunk is in the wrong bin";
  if ((lo != NULL && !key_less(lo, t)) || (hi != NULL && !key_less(t, hi))) {
    return "a bin's tree is out of (size, address) order";
  }
  if ((t->left != NULL && t->left->priority > t->priority) ||
      (t->right != NULL && t->right->priority > t->priority)) {
    return "a bin's tree breaks its heap order";
  }
  bool known = false;
  for (size_t i = 0; i < b->num_regions && !known; i++) known = b->regions[i] == t->region;
  if (!known) return "a free chunk belongs to no live region";
  (*count)++;
  *bytes += t->size;
  const char* err = check_treap(b, t->left, bin, lo, t, count, bytes, bad);
  return err != NULL ? err : check_treap(b, t->right, bin, t, hi, count, bytes, bad);
}

/* The first broken invariant, or NULL; *bad is the address involved. */
static const char* check_locked(const struct PG_BFC* b, uint64_t* bad) {
  uint64_t reserved = 0, in_use = 0, live = 0, free_chunks = 0;
  uint64_t used_count[BFC_NUM_BINS] = {0}, used_bytes[BFC_NUM_BINS] = {0};
  *bad = 0;
  for (size_t i = 0; i < b->num_regions; i++) {
    const Region* r = b->regions[i];
    *bad = r->base;
    if (r->base % BFC_ALIGN || r->usable % BFC_ALIGN || r->usable == 0) {
      return "a region is not 256-aligned or is empty";
    }
    if (r->usable > r->reserved) return "a region uses more than it reserved";
    if (i > 0 && b->regions[i - 1]->base + b->regions[i - 1]->usable > r->base) {
      return "regions overlap or are out of order";
    }
    reserved += r->reserved;
    uint64_t expect = r->base;
    const Chunk* prev = NULL;
    for (const Chunk* c = r->first; c != NULL; prev = c, c = c->next) {
      *bad = c->ptr;
      if (c->region != r) return "a chunk points to another region";
      if (c->prev != prev) return "a chunk's prev link is wrong";
      if (c->ptr != expect) return "chunks leave a gap or overlap inside a region";
      if (c->size == 0 || c->size % BFC_ALIGN) return "a chunk size is not a multiple of 256";
      if (c->size > r->base + r->usable - c->ptr) return "a chunk runs past its region";
      expect = c->ptr + c->size;
      if (c->in_use) {
        if (c->requested == 0 || c->requested > c->size || c->size - c->requested >= BFC_ALIGN) {
          return "an in-use chunk's size is not its request rounded up to 256";
        }
        size_t slot = map_find(&b->map, c->ptr);
        if (slot == SIZE_MAX || b->map.slots[slot] != c) {
          return "an in-use chunk is missing from the address table";
        }
        live++;
        in_use += c->size;
        used_count[bin_for(c->size)]++;
        used_bytes[bin_for(c->size)] += c->size;
      } else {
        if (c->requested != 0) return "a free chunk records a request";
        if (prev != NULL && !prev->in_use) return "two adjacent chunks are both free";
        if (!treap_contains(b->bins[bin_for(c->size)].root, c)) {
          return "a free chunk is not in the bin of its size";
        }
        free_chunks++;
      }
    }
    *bad = r->base;
    if (expect != r->base + r->usable) return "chunks do not cover their region to its end";
  }
  uint64_t in_bins = 0;
  for (int i = 0; i < BFC_NUM_BINS; i++) {
    const Bin* bin = &b->bins[i];
    uint64_t count = 0, bytes = 0;
    const char* err = check_treap(b, bin->root, i, NULL, NULL, &count, &bytes, bad);
    if (err != NULL) return err;
    *bad = (uint64_t)i;
    if (count != bin->free_count || bytes != bin->free_bytes) {
      return "a bin's free count or bytes disagree with its chunks";
    }
    if (((b->nonempty >> i) & 1) != (bin->root != NULL)) {
      return "the non-empty-bin bitmap disagrees with a bin";
    }
    if (used_count[i] != bin->used_count || used_bytes[i] != bin->used_bytes) {
      return "a bin's in-use count or bytes disagree with the chunks";
    }
    in_bins += count;
  }
  *bad = 0;
  if ((b->nonempty >> BFC_NUM_BINS) != 0) return "the bitmap marks a bin that does not exist";
  if (in_bins != free_chunks) return "a bin holds a chunk that is not in any region";
  if (b->map.count != live) return "the address table holds chunks that are not in use";
  if ((uint64_t)b->live_allocs != live) return "the live allocation count is wrong";
  if ((uint64_t)b->bytes_in_use != in_use) {
    return "bytes_in_use is not the sum of in-use chunk sizes";
  }
  if ((uint64_t)b->bytes_reserved != reserved) {
    return "bytes_reserved is not the sum of region sizes";
  }
  if (reserved > b->limit) return "bytes_reserved exceeds the memory limit";
  if (b->peak_bytes_in_use < b->bytes_in_use || b->peak_bytes_reserved < b->bytes_reserved) {
    return "a peak is below its current value";
  }
  if (b->largest_alloc_size > 0 && b->num_allocs == 0) return "largest_alloc_size without allocs";
  return NULL;
}

int pluggable_BFCCheck(PG_BFC* b, char* err, size_t n) {
  if (err != NULL && n > 0) err[0] = '\0';
  if (b == NULL) return 0;
  uint64_t bad = 0;
  pthread_mutex_lock(&b->mu);
  const char* problem = check_locked(b, &bad);
  pthread_mutex_unlock(&b->mu);
  if (problem == NULL) return 0;
  if (err != NULL && n > 0) {
    snprintf(err, n, "BFC allocator '%s': %s (at 0x%" PRIx64 ")", b->name, problem, bad);
  }
  return 1;
}

size_t pluggable_BFCSnapshot(PG_BFC* b, PG_BFCChunkInfo* out, size_t capacity) {
  if (b == NULL) return 0;
  size_t total = 0;
  pthread_mutex_lock(&b->mu);
  for (size_t i = 0; i < b->num_regions; i++) {
    for (const Chunk* c = b->regions[i]->first; c != NULL; c = c->next) {
      if (out != NULL && total < capacity) {
        out[total] = (PG_BFCChunkInfo){c->ptr, c->size, c->requested, c->in_use, (int32_t)i};
      }
      total++;
    }
  }
  pthread_mutex_unlock(&b->mu);
  return total;
}
