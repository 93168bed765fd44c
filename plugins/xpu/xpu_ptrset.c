/* xpu_ptrset.c: a hash set of pointers, used as the registry of live handles.
 *
 * Every handle the host passes back (SP_Stream, SP_Event, SP_Timer, device handles, host
 * allocations) is looked up here before the plugin dereferences it, so a foreign or destroyed
 * handle becomes an error status instead of a crash. Open addressing with linear probing and
 * backward-shift deletion (no tombstones); the table is kept at most half full. Callers hold
 * the lock that guards the set.
 */
#include "xpu_internal.h"

#include <stdlib.h>
#include <string.h>

enum { kInitialCapacity = 16 };

/* Mixes the pointer bits so that aligned pointers spread over the table (Fibonacci hashing). */
static size_t slot_of(const XpuPtrSet* set, const void* p) {
  uint64_t h = (uint64_t)(uintptr_t)p * UINT64_C(0x9E3779B97F4A7C15);
  return (size_t)(h >> 32) & (set->capacity - 1);
}

/* Rebuilds the table with `capacity` slots (a power of two); false when out of memory. */
static bool rehash(XpuPtrSet* set, size_t capacity) {
  void** slots = calloc(capacity, sizeof(void*));
  if (slots == NULL) return false;
  void** old = set->slots;
  size_t old_capacity = set->capacity;
  set->slots = slots;
  set->capacity = capacity;
  for (size_t i = 0; i < old_capacity; i++) {
    if (old[i] == NULL) continue;
    size_t j = slot_of(set, old[i]);
    while (slots[j] != NULL) j = (j + 1) & (capacity - 1);
    slots[j] = old[i];
  }
  free(old);
  return true;
}

/* Returns the slot holding `p`, or the empty slot where the probe for it ended. */
static size_t probe(const XpuPtrSet* set, const void* p) {
  size_t i = slot_of(set, p);
  while (set->slots[i] != NULL && set->slots[i] != p) i = (i + 1) & (set->capacity - 1);
  return i;
}

bool xpu_ptrset_insert(XpuPtrSet* set, void* p) {
  if (p == NULL) return false;
  if ((set->count + 1) * 2 > set->capacity) {
    size_t capacity = set->capacity == 0 ? kInitialCapacity : set->capacity * 2;
    if (!rehash(set, capacity)) return false;
  }
  size_t i = probe(set, p);
  if (set->slots[i] == NULL) {
    set->slots[i] = p;
    set->count++;
  }
  return true;
}

bool xpu_ptrset_contains(const XpuPtrSet* set, const void* p) {
  if (p == NULL || set->count == 0) return false;
  return set->slots[probe(set, p)] == p;
}

bool xpu_ptrset_remove(XpuPtrSet* set, const void* p) {
  if (p == NULL || set->count == 0) return false;
  size_t hole = probe(set, p);
  if (set->slots[hole] != p) return false;
  set->slots[hole] = NULL;
  set->count--;
  /* Shift later members of the probe run back so no lookup stops early at the new hole. */
  size_t mask = set->capacity - 1;
  for (size_t i = (hole + 1) & mask; set->slots[i] != NULL; i = (i + 1) & mask) {
    size_t home = slot_of(set, set->slots[i]);
    /* Move the member if its home slot is not in the cyclic range (hole, i]. */
    bool home_after_hole = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
    if (!home_after_hole) {
      set->slots[hole] = set->slots[i];
      set->slots[i] = NULL;
      hole = i;
    }
  }
  if (set->count == 0) xpu_ptrset_clear(set);
  return true;
}

void** xpu_ptrset_snapshot(const XpuPtrSet* set, size_t* count) {
  *count = 0;
  if (set->count == 0) return NULL;
  void** out = malloc(set->count * sizeof(void*));
  if (out == NULL) return NULL;
  for (size_t i = 0; i < set->capacity; i++) {
    if (set->slots[i] != NULL) out[(*count)++] = set->slots[i];
  }
  return out;
}

void xpu_ptrset_clear(XpuPtrSet* set) {
  free(set->slots);
  memset(set, 0, sizeof *set);
}
