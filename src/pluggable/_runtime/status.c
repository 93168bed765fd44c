/* TF_Status: the status object plugins fill to report success or failure.
 *
 * The host owns every TF_Status it hands to a plugin. A status carries a code, a message and
 * an ordered list of key/value payloads. All functions accept NULL where TensorFlow's do not
 * crash on it either, so a careless plugin cannot take the process down through this API.
 *
 * Lent statuses. The host reuses its statuses from call to call, and a plugin may keep the
 * TF_Status* of a call and write it after the call returned. So what a plugin is handed for
 * one call (pluggable_LendStatus) is not the status's address but a ticket naming the status
 * and the lending: a slot of a table and that slot's generation, in a value no pointer has
 * (bit 62 set, bits 63 and 48-61 of a user-space address are 0 on the 64-bit systems Linux
 * runs on). The TF_* functions here turn a ticket back into its status while the lending
 * lasts, at the cost of one comparison for a plain pointer; pluggable_SealStatus ends the
 * lending by moving the slot to its next generation, after which the ticket names nothing: a
 * write through it is refused and counted (pluggable_LateStatusWrites), however many calls
 * later it comes, and the status serves the next call at once. A plugin never dereferences a
 * TF_Status* (the type is opaque), so a ticket is as good as a pointer to it. Where pointers
 * have 32 bits, or when every slot is taken, the address itself is lent and sealing only
 * holds until the status serves another call.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_internal.h"
#include "tensorflow/c/tf_status.h"

typedef struct Payload {
  char* key;
  char* value;
  struct Payload* next;
} Payload;

struct TSL_Status {
  TF_Code code;
  char* message;     /* NULL means "" */
  Payload* payloads; /* in insertion order */
  int sealed;        /* between two calls (pluggable_SealStatus): writes are refused */
  int slot;          /* its slot of the lending table, or -1 before the first lending */
};

#if UINTPTR_MAX > 0xFFFFFFFFu
#define PG_TICKETS 1
#define PG_TICKET_TAG ((uintptr_t)1 << 62)
#define PG_SLOT_BITS 14
#define PG_SLOTS ((size_t)1 << PG_SLOT_BITS)
#define PG_GENERATION_MASK (((uintptr_t)1 << (62 - PG_SLOT_BITS)) - 1)

typedef struct LendingSlot {
  TF_Status* _Atomic status;         /* NULL while free */
  atomic_uint_fast64_t generation;   /* of the lending in force; moved on when it ends */
} LendingSlot;
static LendingSlot slots[PG_SLOTS];
static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;
static size_t slots_used; /* slots ever handed out: the free ones are below, with NULL */
static int free_slots[PG_SLOTS];
static size_t free_count;

static inline bool is_ticket(const TF_Status* s) {
  return ((uintptr_t)s >> 62) == 1;
}

/* The status a ticket names while its lending lasts; NULL for a ticket whose lending ended. */
static TF_Status* ticket_status(const TF_Status* s) {
  uintptr_t v = (uintptr_t)s;
  size_t slot = v & (PG_SLOTS - 1);
  uint64_t generation = (v >> PG_SLOT_BITS) & PG_GENERATION_MASK;
  if ((atomic_load_explicit(&slots[slot].generation, memory_order_acquire) &
       PG_GENERATION_MASK) != generation) {
    return NULL;
  }
  return atomic_load_explicit(&slots[slot].status, memory_order_acquire);
}

/* A slot for `s`, or -1 when every slot is taken. */
static int take_slot(TF_Status* s) {
  int slot = -1;
  pthread_mutex_lock(&slots_mu);
  if (free_count > 0) {
    slot = free_slots[--free_count];
  } else if (slots_used < PG_SLOTS) {
    slot = (int)slots_used++;
  }
  if (slot >= 0) atomic_store(&slots[slot].status, s);
  pthread_mutex_unlock(&slots_mu);
  return slot;
}

/* Ends the lending of the slot for good and frees it (its generation moves on first). */
static void give_back_slot(int slot) {
  atomic_fetch_add(&slots[slot].generation, 1);
  pthread_mutex_lock(&slots_mu);
  atomic_store(&slots[slot].status, NULL);
  free_slots[free_count++] = slot;
  pthread_mutex_unlock(&slots_mu);
}
#else
static inline bool is_ticket(const TF_Status* s) {
  (void)s;
  return false;
}
static TF_Status* ticket_status(const TF_Status* s) { return (TF_Status*)s; }
#endif

/* The status `s` stands for: itself, or the one its ticket names (NULL once that lending
 * ended). */
static inline TF_Status* resolve(const TF_Status* s) {
  return is_ticket(s) ? ticket_status(s) : (TF_Status*)s;
}

/* Writes refused because they came to a sealed status: a plugin that kept the TF_Status* of
 * a call and wrote it after that call returned. The last refused write's code and message. */
static atomic_ullong late_writes;
static pthread_mutex_t late_mu = PTHREAD_MUTEX_INITIALIZER;
static TF_Code late_code;
static char late_message[512];

/* Counts a refused write (an error one: writing OK to a status changes nothing to blame). */
static void count_late_write(TF_Code code, const char* msg) {
  if (code == TF_OK) return;
  pthread_mutex_lock(&late_mu);
  late_code = code;
  snprintf(late_message, sizeof late_message, "%s", msg != NULL ? msg : "");
  pthread_mutex_unlock(&late_mu);
  atomic_fetch_add(&late_writes, 1);
}

/* Refuses a write to a sealed status; true when refused. */
static bool refused(TF_Status* s, TF_Code code, const char* msg) {
  if (!s->sealed) return false;
  count_late_write(code, msg);
  return true;
}

void pluggable_SealStatus(TF_Status* s) {
  s = is_ticket(s) ? ticket_status(s) : s;
  if (s == NULL) return;
#ifdef PG_TICKETS
  /* The lending ends: its ticket names nothing from now on. */
  if (s->slot >= 0) atomic_fetch_add_explicit(&slots[s->slot].generation, 1, memory_order_release);
#endif
  s->sealed = 0;
  TF_SetStatus(s, TF_OK, NULL);
  s->sealed = 1;
}

TF_Status* pluggable_LendStatus(TF_Status* s) {
  s = is_ticket(s) ? ticket_status(s) : s;
  if (s == NULL) return NULL;
  s->sealed = 0;
#ifdef PG_TICKETS
  if (s->slot < 0) s->slot = take_slot(s);
  if (s->slot >= 0) {
    uint64_t generation = atomic_load_explicit(&slots[s->slot].generation, memory_order_relaxed);
    return (TF_Status*)(PG_TICKET_TAG | ((uintptr_t)(generation & PG_GENERATION_MASK)
                                         << PG_SLOT_BITS) | (uintptr_t)s->slot);
  }
#endif
  return s;
}

unsigned long long pluggable_LateStatusWrites(int* code, char* message, size_t n) {
  pthread_mutex_lock(&late_mu);
  if (code != NULL) *code = (int)late_code;
  if (message != NULL && n > 0) snprintf(message, n, "%s", late_message);
  pthread_mutex_unlock(&late_mu);
  return atomic_load(&late_writes);
}

static const char kEmpty[] = "";

/* Copies a C string; NULL becomes NULL so callers can tell "no message" apart. */
static char* copy_string(const char* s) {
  if (s == NULL) return NULL;
  size_t n = strlen(s) + 1;
  char* out = malloc(n);
  if (out != NULL) memcpy(out, s, n);
  return out;
}

/* Drops every payload of `s`. */
static void clear_payloads(TF_Status* s) {
  Payload* p = s->payloads;
  while (p != NULL) {
    Payload* next = p->next;
    free(p->key);
    free(p->value);
    free(p);
    p = next;
  }
  s->payloads = NULL;
}

TF_Status* TF_NewStatus(void) {
  TF_Status* s = pg_pool_alloc(PG_POOL_STATUS, sizeof(TF_Status));
  if (s != NULL) {
    s->code = TF_OK;
    s->message = NULL;
    s->payloads = NULL;
    s->sealed = 0;
    s->slot = -1;
  }
  return s;
}

void TF_DeleteStatus(TF_Status* s) {
  if (s == NULL || is_ticket(s)) return; /* a lent status is the host's to delete */
#ifdef PG_TICKETS
  if (s->slot >= 0) give_back_slot(s->slot);
#endif
  clear_payloads(s);
  free(s->message);
  pg_pool_free(PG_POOL_STATUS, s);
}

void TF_SetStatus(TF_Status* s, TF_Code code, const char* msg) {
  if (is_ticket(s)) {
    TF_Status* lent = ticket_status(s);
    if (lent == NULL) {  /* its lending ended: a write after the call returned */
      count_late_write(code, msg);
      return;
    }
    s = lent;
  }
  if (s == NULL || refused(s, code, msg)) return;
  if (code == TF_OK && s->code == TF_OK && s->message == NULL && s->payloads == NULL) return;
  free(s->message);
  s->message = NULL;
  s->code = code;
  /* An OK status carries neither message nor payloads, as in TensorFlow. */
  if (code == TF_OK) {
    clear_payloads(s);
    return;
  }
  s->message = copy_string(msg);
}

void TF_SetPayload(TF_Status* s, const char* key, const char* value) {
  s = resolve(s);
  if (s == NULL || key == NULL || s->code == TF_OK || s->sealed) return;
  for (Payload* p = s->payloads; p != NULL; p = p->next) {
    if (strcmp(p->key, key) == 0) {
      char* copy = copy_string(value != NULL ? value : kEmpty);
      if (copy == NULL) return;
      free(p->value);
      p->value = copy;
      return;
    }
  }
  Payload* p = calloc(1, sizeof(Payload));
  if (p == NULL) return;
  p->key = copy_string(key);
  p->value = copy_string(value != NULL ? value : kEmpty);
  if (p->key == NULL || p->value == NULL) {
    free(p->key);
    free(p->value);
    free(p);
    return;
  }
  Payload** tail = &s->payloads;
  while (*tail != NULL) tail = &(*tail)->next;
  *tail = p;
}

void TF_ForEachPayload(const TF_Status* s, TF_PayloadVisitor visitor, void* capture) {
  s = resolve(s);
  if (s == NULL || visitor == NULL) return;
  for (const Payload* p = s->payloads; p != NULL; p = p->next) {
    visitor(p->key, p->value, capture);
  }
}

/* Maps an errno value to the TF_Code TensorFlow's IOError mapping gives it. */
static TF_Code code_from_errno(int error_code) {
  switch (error_code) {
    case 0: return TF_OK;
    case EINVAL: case ENAMETOOLONG: case E2BIG: case EDESTADDRREQ: case EDOM: case EFAULT:
    case EILSEQ: case ENOPROTOOPT: case ENOSTR: case ENOTSOCK: case ENOTTY: case EPROTOTYPE:
    case ESPIPE:
      return TF_INVALID_ARGUMENT;
    case ETIMEDOUT: case ETIME:
      return TF_DEADLINE_EXCEEDED;
    case ENODEV: case ENOENT: case ENXIO: case ESRCH:
      return TF_NOT_FOUND;
    case EEXIST: case EADDRNOTAVAIL: case EALREADY:
      return TF_ALREADY_EXISTS;
    case EPERM: case EACCES: case EROFS:
      return TF_PERMISSION_DENIED;
    case ENOTEMPTY: case EISDIR: case ENOTDIR: case EADDRINUSE: case EBADF: case EBUSY:
    case ECHILD: case EISCONN: case ENOTBLK: case ENOTCONN: case EPIPE: case ESHUTDOWN:
    case ETXTBSY:
      return TF_FAILED_PRECONDITION;
    case ENOSPC: case EMFILE: case EMLINK: case ENFILE: case ENOBUFS: case ENODATA:
    case ENOMEM: case ENOSR: case EUSERS:
      return TF_RESOURCE_EXHAUSTED;
    case EFBIG: case EOVERFLOW: case ERANGE:
      return TF_OUT_OF_RANGE;
    case ENOSYS: case ENOTSUP: case EAFNOSUPPORT: case EPFNOSUPPORT: case EPROTONOSUPPORT:
    case ESOCKTNOSUPPORT: case EXDEV:
      return TF_UNIMPLEMENTED;
    case EAGAIN: case ECONNREFUSED: case ECONNABORTED: case ECONNRESET: case EINTR:
    case EHOSTDOWN: case EHOSTUNREACH: case ENETDOWN: case ENETRESET: case ENETUNREACH:
    case ENOLCK: case ENOLINK: case ENONET:
      return TF_UNAVAILABLE;
    case EDEADLK: case ESTALE:
      return TF_ABORTED;
    case ECANCELED:
      return TF_CANCELLED;
    default:
      return TF_UNKNOWN;
  }
}

void TF_SetStatusFromIOError(TF_Status* s, int error_code, const char* context) {
  if (s == NULL) return;
  char buffer[512];
  snprintf(buffer, sizeof buffer, "%s%s%s", context != NULL ? context : "",
           context != NULL && context[0] != '\0' ? "; " : "", strerror(error_code));
  TF_SetStatus(s, code_from_errno(error_code), buffer);
}

/* A ticket whose lending ended reads as OK: nothing written through it counts. */
TF_Code TF_GetCode(const TF_Status* s) {
  s = resolve(s);
  return s == NULL ? TF_OK : s->code;
}

const char* TF_Message(const TF_Status* s) {
  s = resolve(s);
  if (s == NULL || s->message == NULL) return kEmpty;
  return s->message;
}

void pluggable_ResetStatus(TF_Status* s) {
  s = resolve(s);
  if (s == NULL) return;
  TF_SetStatus(s, TF_OK, NULL);
}
