/* TF_Status: the status object plugins fill to report success or failure.
 *
 * The host owns every TF_Status it hands to a plugin. A status carries a code, a message and
 * an ordered list of key/value payloads. All functions accept NULL where TensorFlow's do not
 * crash on it either, so a careless plugin cannot take the process down through this API.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
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
};

/* Writes refused because they came to a sealed status: a plugin that kept the TF_Status* of
 * a call and wrote it after that call returned. The last refused write's code and message. */
static atomic_ullong late_writes;
static pthread_mutex_t late_mu = PTHREAD_MUTEX_INITIALIZER;
static TF_Code late_code;
static char late_message[512];

/* Refuses a write to a sealed status; true when refused. */
static bool refused(TF_Status* s, TF_Code code, const char* msg) {
  if (!s->sealed) return false;
  if (code != TF_OK) {
    pthread_mutex_lock(&late_mu);
    late_code = code;
    snprintf(late_message, sizeof late_message, "%s", msg != NULL ? msg : "");
    pthread_mutex_unlock(&late_mu);
    atomic_fetch_add(&late_writes, 1);
  }
  return true;
}

void pluggable_SealStatus(TF_Status* s) {
  if (s == NULL) return;
  s->sealed = 0;
  TF_SetStatus(s, TF_OK, NULL);
  s->sealed = 1;
}

void pluggable_LendStatus(TF_Status* s) {
  if (s != NULL) s->sealed = 0;
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
  }
  return s;
}

void TF_DeleteStatus(TF_Status* s) {
  if (s == NULL) return;
  clear_payloads(s);
  free(s->message);
  pg_pool_free(PG_POOL_STATUS, s);
}

void TF_SetStatus(TF_Status* s, TF_Code code, const char* msg) {
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
  if (s == NULL || key == NULL || s->code == TF_OK) return;
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

TF_Code TF_GetCode(const TF_Status* s) { return s == NULL ? TF_OK : s->code; }

const char* TF_Message(const TF_Status* s) {
  if (s == NULL || s->message == NULL) return kEmpty;
  return s->message;
}

void pluggable_ResetStatus(TF_Status* s) {
  if (s == NULL) return;
  TF_SetStatus(s, TF_OK, NULL);
}
