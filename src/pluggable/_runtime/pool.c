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
} PG_PoolCache;

/* The calling thread's cache, made at its first free and freed when it exits. Only this
 * pointer is thread-local, in the initial-exec model: reading it is one load relative to the
 * thread pointer, where the default model for a shared library calls __tls_get_addr (about
 * 20 instructions, and a run allocates and frees about ten of these objects). Eight bytes of
 * static TLS fit in the space the dynamic loader keeps for libraries opened with dlopen. */
static __thread PG_PoolCache* cache __attribute__((tls_model("initial-exec")));
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static int exit_key_made;

static void free_cache(void* arg) {
  PG_PoolCache* c = arg;
  for (int k = 0; k < PG_POOL_KINDS; k++) {
    while (c->count[k] > 0) free(c->items[k][--c->count[k]]);
  }
  free(c);
  cache = NULL;
}

static void make_exit_key(void) { exit_key_made = pthread_key_create(&exit_key, free_cache) == 0; }

/* The calling thread's cache, made now if it has none; NULL when it cannot have one (then
 * nothing is kept: without the thread-exit destructor the cache would leak). */
static PG_PoolCache* new_cache(void) {
  if (PG_POOL_DEPTH == 0 || pthread_once(&exit_key_once, make_exit_key) != 0 || !exit_key_made)
    return NULL;
  PG_PoolCache* c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  if (pthread_setspecific(exit_key, c) != 0) {
    free(c);
    return NULL;
  }
  cache = c;
  return c;
}

void* pg_pool_alloc(PG_PoolKind kind, size_t size) {
  PG_PoolCache* c = cache;
  if (c != NULL && c->count[kind] > 0) return c->items[kind][--c->count[kind]];
  return malloc(size);
}

void pg_pool_free(PG_PoolKind kind, void* p) {
  if (p == NULL) return;
  PG_PoolCache* c = cache;
  if (c == NULL) c = new_cache();
  if (c != NULL && c->count[kind] < PG_POOL_DEPTH) {
    c->items[kind][c->count[kind]++] = p;
    return;
  }
  free(p);
}
