/* Per-thread caches of the runtime's small fixed-size objects: the TF_Tensor, PG_Buffer and
 * TF_Status structs that every kernel run makes and drops (the inputs' and outputs' tensors,
 * the plugin's status). A thread keeps up to PG_POOL_DEPTH freed objects of each kind and
 * hands them out again, so a steady stream of runs allocates nothing. An object freed on
 * another thread than it was made on goes to that thread's cache, or to free() when it is
 * full; a thread's cache is freed when the thread exits.
 *
 * Under AddressSanitizer the caches are off, so that a use after free is still caught. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define PG_POOL_DEPTH 0
#else
#define PG_POOL_DEPTH 16
#endif

typedef struct PG_PoolCache {
  int count[PG_POOL_KINDS];
  void* items[PG_POOL_KINDS][PG_POOL_DEPTH > 0 ? PG_POOL_DEPTH : 1];
  int registered; /* the thread-exit destructor knows this cache */
} PG_PoolCache;

static _Thread_local PG_PoolCache cache;
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

static void free_cache(void* arg) {
  PG_PoolCache* c = arg;
  for (int k = 0; k < PG_POOL_KINDS; k++) {
    while (c->count[k] > 0) free(c->items[k][--c->count[k]]);
  }
}

static void make_exit_key(void) { (void)pthread_key_create(&exit_key, free_cache); }

void* pg_pool_alloc(PG_PoolKind kind, size_t size) {
  if (cache.count[kind] > 0) return cache.items[kind][--cache.count[kind]];
  return malloc(size);
}

void pg_pool_free(PG_PoolKind kind, void* p) {
  if (p == NULL) return;
  if (cache.count[kind] < PG_POOL_DEPTH) {
    if (!cache.registered) {
      /* Without the destructor the cache would leak when the thread ends: keep nothing. */
      if (pthread_once(&exit_key_once, make_exit_key) != 0 ||
          pthread_setspecific(exit_key, &cache) != 0) {
        free(p);
        return;
      }
      cache.registered = 1;
    }
    cache.items[kind][cache.count[kind]++] = p;
    return;
  }
  free(p);
}
