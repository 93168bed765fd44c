/* kernels.c: TensorFlow's kernel C API (tensorflow/c/kernels.h) on the host side.
 *
 * Registration. TF_NewKernelBuilder and its TF_KernelBuilder_* setters fill a builder;
 * TF_RegisterKernelBuilder takes it over (as TensorFlow does, also when registration fails)
 * and appends a registration to a process-wide registry, attributed to the plugin whose
 * TF_InitKernel is running (pluggable_BeginKernelRegistration). Misuse of a builder (NULL
 * names, no compute function, a label set twice) is remembered and reported by the
 * registration's status, where TensorFlow would crash.
 *
 * Kernel instances. pluggable_KernelCreate copies the node name and attributes into a
 * PG_Kernel and calls create_func with a TF_OpKernelConstruction over them; the attribute
 * getters follow TensorFlow's rules (a missing attribute or one of another type is
 * TF_INVALID_ARGUMENT naming it; list getters fill at most max_vals values; an empty list
 * passes any list getter).
 *
 * Runs. pluggable_KernelRun builds a TF_OpKernelContext on the stack over the host's flat
 * request (runtime_internal.h), calls compute_func, and turns the outputs the kernel set
 * into owned memory, aliases of inputs or empty outputs. Inputs are borrowed: a TF_Tensor
 * from TF_GetInput wraps the host's memory with a buffer that frees nothing. Outputs and
 * temporaries come from the run's BFC allocator (host-memory ones from aligned host
 * memory); what the kernel frees goes back at once, which TensorFlow's stream-ordered rule
 * makes safe (see tensor.c).
 *
 * The functions of kernels.h this runtime cannot honour (serialized protos, attribute
 * tensors and functions, rendezvous, deferred ops, asynchronous kernels) are in
 * kernel_stubs.c; each fails with TF_UNIMPLEMENTED naming itself.
 */
#define _POSIX_C_SOURCE 200809L
#include "watchdog.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_internal.h"
#include "runtime_internal.h"
#include "tensor_internal.h"
#include "tensorflow/c/kernels.h"
#include "tensorflow/c/tf_tstring.h"

/* ---- small helpers ---------------------------------------------------------------------- */

static char* pg_strdup(const char* s) {
  if (s == NULL) return NULL;
  size_t n = strlen(s) + 1;
  char* out = malloc(n);
  if (out != NULL) memcpy(out, s, n);
  return out;
}

static char* pg_strndup(const char* s, size_t n) {
  char* out = malloc(n + 1);
  if (out == NULL) return NULL;
  if (n) memcpy(out, s, n);
  out[n] = '\0';
  return out;
}

static void set_statusf(TF_Status* status, TF_Code code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_statusf(TF_Status* status, TF_Code code, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  TF_SetStatus(status, code, buf);
}

static const char* dtype_name(TF_DataType dt) {
  switch (dt) {
    case TF_FLOAT: return "float";
    case TF_DOUBLE: return "double";
    case TF_INT32: return "int32";
    case TF_UINT8: return "uint8";
    case TF_INT16: return "int16";
    case TF_INT8: return "int8";
    case TF_STRING: return "string";
    case TF_COMPLEX64: return "complex64";
    case TF_INT64: return "int64";
    case TF_BOOL: return "bool";
    case TF_QINT8: return "qint8";
    case TF_QUINT8: return "quint8";
    case TF_QINT32: return "qint32";
    case TF_BFLOAT16: return "bfloat16";
    case TF_QINT16: return "qint16";
    case TF_QUINT16: return "quint16";
    case TF_UINT16: return "uint16";
    case TF_COMPLEX128: return "complex128";
    case TF_HALF: return "half";
    case TF_RESOURCE: return "resource";
    case TF_VARIANT: return "variant";
    case TF_UINT32: return "uint32";
    case TF_UINT64: return "uint64";
    case TF_FLOAT8_E5M2: return "float8_e5m2";
    case TF_FLOAT8_E4M3FN: return "float8_e4m3fn";
    case TF_FLOAT8_E4M3FNUZ: return "float8_e4m3fnuz";
    case TF_FLOAT8_E4M3B11FNUZ: return "float8_e4m3b11fnuz";
    case TF_FLOAT8_E5M2FNUZ: return "float8_e5m2fnuz";
    case TF_INT4: return "int4";
    case TF_UINT4: return "uint4";
    case TF_INT2: return "int2";
    case TF_UINT2: return "uint2";
    case TF_FLOAT4_E2M1FN: return "float4_e2m1fn";
  }
  return "unknown type";
}

static bool dtype_is_known(int64_t dt) { return dt >= TF_FLOAT && dt <= TF_FLOAT4_E2M1FN; }

/* ---- builders --------------------------------------------------------------------------- */

typedef struct PG_Constraint {
  char* attr;
  TF_DataType* types;
  int32_t num_types;
} PG_Constraint;

struct TF_KernelBuilder {
  char* op;
  char* device_type;
  char* label; /* NULL until TF_KernelBuilder_Label */
  int32_t priority;
  void* (*create)(TF_OpKernelConstruction*);
  void (*compute)(void*, TF_OpKernelContext*);
  void (*compute_async)(void*, TF_OpKernelContext*, TF_AsyncOpKernelDoneCallback*);
  void (*destroy)(void*);
  PG_Constraint* constraints;
  int32_t num_constraints;
  char** host_memory;
  int32_t num_host_memory;
  TF_Code error_code; /* the first misuse, reported by TF_RegisterKernelBuilder */
  char error[256];
};

static void builder_error(TF_KernelBuilder* b, TF_Code code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void builder_error(TF_KernelBuilder* b, TF_Code code, const char* fmt, ...) {
  if (b->error_code != TF_OK) return;
  b->error_code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->error, sizeof b->error, fmt, ap);
  va_end(ap);
}

static TF_KernelBuilder* new_builder(const char* op_name, const char* device_name,
                                     const char* caller) {
  TF_KernelBuilder* b = calloc(1, sizeof *b);
  if (b == NULL) return NULL;
  b->op = pg_strdup(op_name != NULL ? op_name : "");
  b->device_type = pg_strdup(device_name != NULL ? device_name : "");
  if (b->op == NULL || b->device_type == NULL) {
    free(b->op);
    free(b->device_type);
    free(b);
    return NULL;
  }
  if (op_name == NULL || op_name[0] == '\0') {
    builder_error(b, TF_INVALID_ARGUMENT, "%s: op_name is NULL or empty", caller);
  } else if (device_name == NULL || device_name[0] == '\0') {
    builder_error(b, TF_INVALID_ARGUMENT, "%s: device_name is NULL or empty for op '%s'",
                  caller, op_name);
  }
  return b;
}

TF_KernelBuilder* TF_NewKernelBuilder(const char* op_name, const char* device_name,
                                      void* (*create_func)(TF_OpKernelConstruction*),
                                      void (*compute_func)(void*, TF_OpKernelContext*),
                                      void (*delete_func)(void*)) {
  TF_KernelBuilder* b = new_builder(op_name, device_name, "TF_NewKernelBuilder");
  if (b == NULL) return NULL;
  b->create = create_func;
  b->compute = compute_func;
  b->destroy = delete_func;
  if (compute_func == NULL) {
    builder_error(b, TF_INVALID_ARGUMENT, "TF_NewKernelBuilder: compute_func is NULL for op '%s'",
                  b->op);
  }
  return b;
}

TF_KernelBuilder* TF_NewAsyncKernelBuilder(
    const char* op_name, const char* device_name, void* (*create_func)(TF_OpKernelConstruction*),
    void (*compute_async_func)(void*, TF_OpKernelContext*, TF_AsyncOpKernelDoneCallback* done),
    void (*delete_func)(void*)) {
  TF_KernelBuilder* b = new_builder(op_name, device_name, "TF_NewAsyncKernelBuilder");
  if (b == NULL) return NULL;
  b->create = create_func;
  b->compute_async = compute_async_func;
  b->destroy = delete_func;
  if (compute_async_func == NULL) {
    builder_error(b, TF_INVALID_ARGUMENT,
                  "TF_NewAsyncKernelBuilder: compute_async_func is NULL for op '%s'", b->op);
  }
  return b;
}

void TF_DeleteKernelBuilder(TF_KernelBuilder* b) {
  if (b == NULL) return;
  for (int32_t i = 0; i < b->num_constraints; i++) {
    free(b->constraints[i].attr);
    free(b->constraints[i].types);
  }
  free(b->constraints);
  for (int32_t i = 0; i < b->num_host_memory; i++) free(b->host_memory[i]);
  free(b->host_memory);
  free(b->label);
  free(b->op);
  free(b->device_type);
  free(b);
}

void TF_KernelBuilder_TypeConstraint(TF_KernelBuilder* b, const char* attr_name,
                                     TF_DataType type, TF_Status* status) {
  if (b == NULL || attr_name == NULL || attr_name[0] == '\0') {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "TF_KernelBuilder_TypeConstraint: the builder or attr_name is NULL or empty");
    return;
  }
  if (!dtype_is_known(type)) {
    /* TensorFlow's words and code for a value it has no type for. */
    set_statusf(status, TF_UNIMPLEMENTED, "Unexpected type %d for attr '%s' of op '%s'",
                (int)type, attr_name, b->op);
    return;
  }
  /* Several calls for one attribute add allowed types to one constraint. */
  PG_Constraint* c = NULL;
  for (int32_t i = 0; i < b->num_constraints; i++) {
    if (strcmp(b->constraints[i].attr, attr_name) == 0) c = &b->constraints[i];
  }
  if (c == NULL) {
    PG_Constraint* grown =
        realloc(b->constraints, sizeof *grown * (size_t)(b->num_constraints + 1));
    if (grown == NULL) goto oom;
    b->constraints = grown;
    c = &grown[b->num_constraints];
    c->attr = pg_strdup(attr_name);
    c->types = NULL;
    c->num_types = 0;
    if (c->attr == NULL) goto oom;
    b->num_constraints++;
  }
  for (int32_t i = 0; i < c->num_types; i++) {
    if (c->types[i] == type) {
      TF_SetStatus(status, TF_OK, "");
      return;
    }
  }
  TF_DataType* types = realloc(c->types, sizeof *types * (size_t)(c->num_types + 1));
  if (types == NULL) goto oom;
  c->types = types;
  c->types[c->num_types++] = type;
  TF_SetStatus(status, TF_OK, "");
  return;
oom:
  TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "TF_KernelBuilder_TypeConstraint: out of memory");
}

void TF_KernelBuilder_HostMemory(TF_KernelBuilder* b, const char* arg_name) {
  if (b == NULL) return;
  if (arg_name == NULL || arg_name[0] == '\0') {
    builder_error(b, TF_INVALID_ARGUMENT,
                  "TF_KernelBuilder_HostMemory: arg_name is NULL or empty for op '%s'", b->op);
    return;
  }
  for (int32_t i = 0; i < b->num_host_memory; i++) {
    if (strcmp(b->host_memory[i], arg_name) == 0) return;
  }
  char** grown = realloc(b->host_memory, sizeof *grown * (size_t)(b->num_host_memory + 1));
  char* copy = pg_strdup(arg_name);
  if (grown != NULL) b->host_memory = grown;
  if (grown == NULL || copy == NULL) {
    free(copy);
    builder_error(b, TF_RESOURCE_EXHAUSTED, "TF_KernelBuilder_HostMemory: out of memory");
    return;
  }
  b->host_memory[b->num_host_memory++] = copy;
}

void TF_KernelBuilder_Priority(TF_KernelBuilder* b, int32_t priority_number) {
  if (b != NULL) b->priority = priority_number;
}

void TF_KernelBuilder_Label(TF_KernelBuilder* b, const char* label) {
  if (b == NULL) return;
  if (label == NULL) {
    builder_error(b, TF_INVALID_ARGUMENT, "TF_KernelBuilder_Label: label is NULL for op '%s'",
                  b->op);
    return;
  }
  if (b->label != NULL) {
    /* TensorFlow CHECK-fails here. */
    builder_error(b, TF_INVALID_ARGUMENT,
                  "TF_KernelBuilder_Label: the label of a kernel for op '%s' was set twice "
                  "('%s', then '%s')", b->op, b->label, label);
    return;
  }
  b->label = pg_strdup(label);
  if (b->label == NULL) builder_error(b, TF_RESOURCE_EXHAUSTED, "TF_KernelBuilder_Label: out of memory");
}

/* ---- the registry ----------------------------------------------------------------------- */

typedef struct PG_Registration {
  int64_t id;
  TF_KernelBuilder* b; /* adopted; never NULL */
  char* kernel_name;
  char* source;
  int enabled;
  atomic_int stuck; /* its plugin was found stuck in a kernel's compute: never run again */
  TF_Code error_code;
  char* error_message;
  /* PG_KernelInfo's arrays, made once. */
  const char** constraint_attrs;
  int32_t* constraint_num_types;
  const TF_DataType** constraint_types;
} PG_Registration;

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static PG_Registration** registry;
static int64_t registry_count, registry_capacity;
static char* session_source;  /* NULL outside a session */
static int64_t session_start;
static const char kEmpty[] = "";

/* Plugins with a call abandoned inside them, and what got stuck: a short list (a process
 * meets few stuck plugins), read only on the paths that refuse them. */
typedef struct PG_StuckPlugin {
  char* source;
  char* reason;
  struct PG_StuckPlugin* next;
} PG_StuckPlugin;
static PG_StuckPlugin* stuck_plugins; /* guarded by registry_mu; entries never go away */

/* Marks every kernel of the plugin `source` stuck and keeps `reason` (the first one). */
static void mark_plugin_stuck(const char* source, const char* reason);
/* Copies the reason the plugin `source` is stuck into buf; 0 when it is not stuck. */
static size_t stuck_reason(const char* source, char* buf, size_t n);

/* The registration `id`, or NULL; registrations never move or go away. */

static PG_Registration* registration_get(int64_t id) {
  pthread_mutex_lock(&registry_mu);
  PG_Registration* r = id >= 0 && id < registry_count ? registry[id] : NULL;
  pthread_mutex_unlock(&registry_mu);
  return r;
}

static void registration_free(PG_Registration* r) {
  if (r == NULL) return;
  TF_DeleteKernelBuilder(r->b);
  free(r->kernel_name);
  free(r->source);
  free(r->error_message);
  free(r->constraint_attrs);
  free(r->constraint_num_types);
  free(r->constraint_types);
  free(r);
}

/* Appends a registration for builder `b` (adopted; NULL allowed) and returns its status. */
static void register_builder(const char* kernel_name, TF_KernelBuilder* b, TF_Code code,
                             const char* message, TF_Status* status) {
  PG_Registration* r = calloc(1, sizeof *r);
  if (r == NULL) goto oom;
  if (b == NULL) {
    b = new_builder("", "", "TF_RegisterKernelBuilder");
    if (b == NULL) goto oom;
    b->error_code = TF_OK; /* not "op_name is empty": the builder itself is missing */
    builder_error(b, TF_INVALID_ARGUMENT, "TF_RegisterKernelBuilder: the builder is NULL");
  }
  r->b = b;
  b = NULL;
  r->kernel_name = pg_strdup(kernel_name != NULL ? kernel_name : "");
  int32_t n = r->b->num_constraints;
  r->constraint_attrs = calloc((size_t)n + 1, sizeof *r->constraint_attrs);
  r->constraint_num_types = calloc((size_t)n + 1, sizeof *r->constraint_num_types);
  r->constraint_types = calloc((size_t)n + 1, sizeof *r->constraint_types);
  if (r->kernel_name == NULL || r->constraint_attrs == NULL || r->constraint_num_types == NULL ||
      r->constraint_types == NULL) {
    goto oom;
  }
  for (int32_t i = 0; i < n; i++) {
    r->constraint_attrs[i] = r->b->constraints[i].attr;
    r->constraint_num_types[i] = r->b->constraints[i].num_types;
    r->constraint_types[i] = r->b->constraints[i].types;
  }

  char err[1024];
  err[0] = '\0';
  if (code == TF_OK && r->b->error_code != TF_OK) {
    code = r->b->error_code;
    snprintf(err, sizeof err, "%s", r->b->error);
  } else if (code == TF_OK && (kernel_name == NULL || kernel_name[0] == '\0')) {
    code = TF_INVALID_ARGUMENT;
    snprintf(err, sizeof err, "TF_RegisterKernelBuilder: kernel_name is NULL or empty for op '%s'",
             r->b->op);
  } else if (code != TF_OK) {
    snprintf(err, sizeof err, "%s", message);
  }

  pthread_mutex_lock(&registry_mu);
  r->source = pg_strdup(session_source != NULL ? session_source : "");
  /* A registration equal to an earlier one is kept, as TensorFlow keeps it: its registry
   * holds any number of kernels per (op, device type, label), and only a lookup that two of
   * them match at one priority fails (eager/dispatch.py decides that). */
  r->error_code = code;
  r->error_message = pg_strdup(err);
  r->enabled = code == TF_OK;
  bool stored = false;
  if (r->source != NULL && r->error_message != NULL) {
    if (registry_count == registry_capacity) {
      int64_t capacity = registry_capacity ? registry_capacity * 2 : 64;
      PG_Registration** grown = realloc(registry, sizeof *grown * (size_t)capacity);
      if (grown != NULL) {
        registry = grown;
        registry_capacity = capacity;
      }
    }
    if (registry_count < registry_capacity) {
      r->id = registry_count;
      registry[registry_count++] = r;
      stored = true;
    }
  }
  pthread_mutex_unlock(&registry_mu);
  if (!stored) goto oom;
  if (code == TF_OK) TF_SetStatus(status, TF_OK, "");
  else TF_SetStatus(status, code, err);
  return;
oom:
  registration_free(r);
  TF_DeleteKernelBuilder(b);
  TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "TF_RegisterKernelBuilder: out of host memory");
}

void TF_RegisterKernelBuilder(const char* kernel_name, TF_KernelBuilder* builder,
                              TF_Status* status) {
  register_builder(kernel_name, builder, TF_OK, NULL, status);
}

void TF_RegisterKernelBuilderWithKernelDef(const char* serialized_kernel_def, const char* name,
                                           TF_KernelBuilder* builder, TF_Status* status) {
  if (serialized_kernel_def == NULL) {
    register_builder(name, builder, TF_OK, NULL, status);
    return;
  }
  /* A KernelDef would need a protobuf parser; the builder is taken over (and kept, failed)
   * all the same, so the host can say which kernel was lost. */
  register_builder(name, builder, TF_UNIMPLEMENTED,
                   "TF_RegisterKernelBuilderWithKernelDef with a serialized KernelDef is not "
                   "implemented by pluggable; register with TF_RegisterKernelBuilder",
                   status);
}

void pluggable_BeginKernelRegistration(const char* source) {
  char* copy = pg_strdup(source != NULL ? source : "");
  pthread_mutex_lock(&registry_mu);
  free(session_source);
  session_source = copy;
  session_start = registry_count;
  pthread_mutex_unlock(&registry_mu);
}

int64_t pluggable_EndKernelRegistration(void) {
  pthread_mutex_lock(&registry_mu);
  int64_t made = session_source != NULL ? registry_count - session_start : 0;
  free(session_source);
  session_source = NULL;
  pthread_mutex_unlock(&registry_mu);
  return made;
}

int64_t pluggable_KernelRegistrationCount(void) {
  pthread_mutex_lock(&registry_mu);
  int64_t n = registry_count;
  pthread_mutex_unlock(&registry_mu);
  return n;
}

int pluggable_KernelRegistrationInfo(int64_t id, PG_KernelInfo* info) {
  PG_Registration* r = registration_get(id);
  if (r == NULL || info == NULL) return -1;
  PG_KernelInfo full;
  full.struct_size = PG_KERNEL_INFO_STRUCT_SIZE;
  full.op = r->b->op;
  full.device_type = r->b->device_type;
  full.kernel_name = r->kernel_name;
  full.label = r->b->label != NULL ? r->b->label : kEmpty;
  full.source = r->source;
  full.priority = r->b->priority;
  full.is_async = r->b->compute_async != NULL;
  pthread_mutex_lock(&registry_mu);
  full.enabled = r->enabled;
  pthread_mutex_unlock(&registry_mu);
  full.error_code = r->error_code;
  full.error_message = r->error_message;
  full.num_constraints = r->b->num_constraints;
  full.constraint_attrs = r->constraint_attrs;
  full.constraint_num_types = r->constraint_num_types;
  full.constraint_types = r->constraint_types;
  full.num_host_memory_args = r->b->num_host_memory;
  full.host_memory_args = (const char* const*)r->b->host_memory;
  size_t size = info->struct_size < sizeof full ? info->struct_size : sizeof full;
  if (size > sizeof info->struct_size) {
    memcpy((char*)info + sizeof info->struct_size, (char*)&full + sizeof full.struct_size,
           size - sizeof info->struct_size);
  }
  return 0;
}

/* Writes (with `buffer`) or measures (without) the keys of registrations start .. end - 1;
 * returns their bytes. Called with registry_mu held. */
static int64_t registration_keys(int64_t start, int64_t end, char* buffer) {
  int64_t at = 0;
  for (int64_t i = start; i < end; i++) {
    const PG_Registration* r = registry[i];
    char code[16], enabled[4];
    snprintf(code, sizeof code, "%d", (int)r->error_code);
    snprintf(enabled, sizeof enabled, "%d", r->enabled ? 1 : 0);
    const char* keys[5] = {r->b->op, r->b->device_type, r->source, code, enabled};
    for (int k = 0; k < 5; k++) {
      size_t n = strlen(keys[k]) + 1;
      if (buffer != NULL) memcpy(buffer + at, keys[k], n);
      at += (int64_t)n;
    }
  }
  return at;
}

int64_t pluggable_KernelRegistrationKeys(int64_t start, int64_t end, char* buffer,
                                         int64_t capacity) {
  pthread_mutex_lock(&registry_mu);
  int64_t size = -1;
  if (start >= 0 && start <= end && end <= registry_count) {
    size = registration_keys(start, end, NULL);
    if (buffer != NULL && size <= capacity) registration_keys(start, end, buffer);
  }
  pthread_mutex_unlock(&registry_mu);
  return size;
}

int pluggable_KernelRegistrationSetEnabled(int64_t id, int enabled) {
  PG_Registration* r = registration_get(id);
  if (r == NULL || (enabled && r->error_code != TF_OK)) return -1;
  pthread_mutex_lock(&registry_mu);
  r->enabled = enabled != 0;
  pthread_mutex_unlock(&registry_mu);
  return 0;
}

/* ---- kernel instances and TF_OpKernelConstruction -------------------------------------- */

typedef struct PG_AttrValue {
  char* name;
  int32_t kind;
  bool is_list;
  int64_t count;
  void* values;     /* int64_t / float / TF_Bool / TF_DataType / char* [count] */
  size_t* lengths;  /* strings */
  int64_t total_bytes; /* strings: sum of lengths */
} PG_AttrValue;

struct PG_Kernel {
  PG_Registration* reg;
  char* node_name;
  PG_AttrValue* attrs;
  int32_t num_attrs;
  void* instance;
};

struct TF_OpKernelConstruction {
  PG_Kernel* kernel;
  TF_Code code;
  char message[1024];
};

static const char* const kKindNames[] = {"int", "float", "bool", "type", "string"};

static void free_attrs(PG_AttrValue* attrs, int32_t n) {
  if (attrs == NULL) return;
  for (int32_t i = 0; i < n; i++) {
    if (attrs[i].kind == PG_ATTR_STRING && attrs[i].values != NULL) {
      char** strings = attrs[i].values;
      for (int64_t j = 0; j < attrs[i].count; j++) free(strings[j]);
    }
    free(attrs[i].values);
    free(attrs[i].lengths);
    free(attrs[i].name);
  }
  free(attrs);
}

static void kernel_free(PG_Kernel* k) {
  free_attrs(k->attrs, k->num_attrs);
  free(k->node_name);
  free(k);
}

/* Copies attribute `in` into `out`; false with a status on bad input. */
static bool copy_attr(const PG_Attr* in, PG_AttrValue* out, TF_Status* status) {
  if (in->name == NULL || in->name[0] == '\0') {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "an attribute has no name");
    return false;
  }
  if (in->kind < PG_ATTR_INT || in->kind > PG_ATTR_STRING || in->count < 0 ||
      (!in->is_list && in->count != 1) || in->count > (int64_t)1 << 40 ||
      (in->count > 0 && in->values == NULL) ||
      (in->kind == PG_ATTR_STRING && in->count > 0 && in->lengths == NULL)) {
    set_statusf(status, TF_INVALID_ARGUMENT, "attribute '%s' is malformed (kind %d, count %" PRId64
                ")", in->name, (int)in->kind, in->count);
    return false;
  }
  out->name = pg_strdup(in->name);
  out->kind = in->kind;
  out->is_list = in->is_list != 0;
  out->count = in->count;
  size_t n = (size_t)in->count;
  size_t elem = in->kind == PG_ATTR_INT ? sizeof(int64_t)
              : in->kind == PG_ATTR_FLOAT ? sizeof(float)
              : in->kind == PG_ATTR_BOOL ? sizeof(TF_Bool)
              : in->kind == PG_ATTR_TYPE ? sizeof(TF_DataType)
              : sizeof(char*);
  out->values = calloc(n ? n : 1, elem);
  if (out->name == NULL || out->values == NULL) goto oom;
  switch (in->kind) {
    case PG_ATTR_INT: case PG_ATTR_FLOAT: case PG_ATTR_BOOL:
      if (n) memcpy(out->values, in->values, n * elem);
      break;
    case PG_ATTR_TYPE: {
      const int32_t* src = in->values;
      TF_DataType* dst = out->values;
      for (size_t i = 0; i < n; i++) dst[i] = (TF_DataType)src[i];
      break;
    }
    case PG_ATTR_STRING: {
      const char* const* src = in->values;
      char** dst = out->values;
      out->lengths = calloc(n ? n : 1, sizeof(size_t));
      if (out->lengths == NULL) goto oom;
      for (size_t i = 0; i < n; i++) {
        if (src[i] == NULL && in->lengths[i] > 0) {
          set_statusf(status, TF_INVALID_ARGUMENT, "attribute '%s': string %zu is NULL",
                      in->name, i);
          return false;
        }
        dst[i] = pg_strndup(src[i] != NULL ? src[i] : "", (size_t)in->lengths[i]);
        if (dst[i] == NULL) goto oom;
        out->lengths[i] = (size_t)in->lengths[i];
        out->total_bytes += (int64_t)in->lengths[i];
      }
      break;
    }
  }
  return true;
oom:
  TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of host memory copying attributes");
  return false;
}

PG_Kernel* pluggable_KernelCreate(int64_t id, const char* node_name, const PG_Attr* attrs,
                                  int32_t num_attrs, TF_Status* status) {
  PG_Registration* r = registration_get(id);
  if (r == NULL) {
    set_statusf(status, TF_INVALID_ARGUMENT, "no kernel registration has id %" PRId64, id);
    return NULL;
  }
  pthread_mutex_lock(&registry_mu);
  int enabled = r->enabled;
  pthread_mutex_unlock(&registry_mu);
  if (atomic_load(&r->stuck)) {
    char reason[512];
    if (stuck_reason(r->source, reason, sizeof reason) == 0) {
      snprintf(reason, sizeof reason, "a call was abandoned inside it");
    }
    set_statusf(status, TF_UNAVAILABLE,
                "kernel '%s' for op '%s' is not created: its plugin (%s) is unusable in this "
                "process because %s; restart the process to use it again", r->kernel_name,
                r->b->op, r->source ? r->source : "?", reason);
    return NULL;
  }
  if (!enabled) {
    set_statusf(status, TF_FAILED_PRECONDITION,
                "kernel '%s' for op '%s' on %s is %s", r->kernel_name, r->b->op,
                r->b->device_type, r->error_code == TF_OK ? "disabled" : "a failed registration");
    return NULL;
  }
  if (num_attrs < 0 || (num_attrs > 0 && attrs == NULL)) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "pluggable_KernelCreate: bad attribute array");
    return NULL;
  }
  PG_Kernel* k = calloc(1, sizeof *k);
  if (k == NULL) goto oom;
  k->reg = r;
  k->node_name = pg_strdup(node_name != NULL ? node_name : "");
  k->attrs = calloc((size_t)num_attrs + 1, sizeof *k->attrs);
  if (k->node_name == NULL || k->attrs == NULL) goto oom;
  for (int32_t i = 0; i < num_attrs; i++) {
    k->num_attrs = i + 1;
    if (!copy_attr(&attrs[i], &k->attrs[i], status)) {
      kernel_free(k);
      return NULL;
    }
    for (int32_t j = 0; j < i; j++) {
      if (strcmp(k->attrs[j].name, k->attrs[i].name) == 0) {
        set_statusf(status, TF_INVALID_ARGUMENT, "attribute '%s' is given twice",
                    k->attrs[i].name);
        kernel_free(k);
        return NULL;
      }
    }
  }
  TF_OpKernelConstruction ctx;
  ctx.kernel = k;
  ctx.code = TF_OK;
  ctx.message[0] = '\0';
  k->instance = r->b->create != NULL ? r->b->create(&ctx) : NULL;
  if (ctx.code != TF_OK) {
    /* TensorFlow destroys the half-made kernel, and with it calls delete_func. */
    if (r->b->destroy != NULL) r->b->destroy(k->instance);
    TF_SetStatus(status, ctx.code, ctx.message);
    kernel_free(k);
    return NULL;
  }
  TF_SetStatus(status, TF_OK, "");
  return k;
oom:
  if (k != NULL) kernel_free(k);
  TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "pluggable_KernelCreate: out of host memory");
  return NULL;
}

void pluggable_KernelDelete(PG_Kernel* k) {
  if (k == NULL) return;
  /* Not into a plugin found stuck: its instance is left to the operating system. */
  if (k->reg->b->destroy != NULL && !atomic_load(&k->reg->stuck)) {
    k->reg->b->destroy(k->instance);
  }
  kernel_free(k);
}

/* The attribute `name`, or NULL with TensorFlow's status for a missing one. */
static const PG_AttrValue* find_attr(TF_OpKernelConstruction* ctx, const char* name,
                                     TF_Status* status) {
  if (ctx == NULL || name == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "attribute getter: ctx or attr_name is NULL");
    return NULL;
  }
  for (int32_t i = 0; i < ctx->kernel->num_attrs; i++) {
    if (strcmp(ctx->kernel->attrs[i].name, name) == 0) return &ctx->kernel->attrs[i];
  }
  set_statusf(status, TF_INVALID_ARGUMENT, "Operation '%s' has no attr named '%s'.",
              ctx->kernel->node_name, name);
  return NULL;
}

/* The scalar attribute `name` of kind `kind`, or NULL with an INVALID_ARGUMENT status. */
static const PG_AttrValue* scalar_attr(TF_OpKernelConstruction* ctx, const char* name,
                                       int32_t kind, TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
  const PG_AttrValue* a = find_attr(ctx, name, status);
  if (a == NULL) return NULL;
  if (a->is_list || a->kind != kind) {
    set_statusf(status, TF_INVALID_ARGUMENT,
                "AttrValue had value with type '%s%s%s' when '%s' expected, for attr '%s' of "
                "operation '%s'", a->is_list ? "list(" : "", kKindNames[a->kind],
                a->is_list ? ")" : "", kKindNames[kind], name, ctx->kernel->node_name);
    return NULL;
  }
  return a;
}

/* The list attribute `name` of kind `kind` (an empty list of any kind will do). */
static const PG_AttrValue* list_attr(TF_OpKernelConstruction* ctx, const char* name,
                                     int32_t kind, TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
  const PG_AttrValue* a = find_attr(ctx, name, status);
  if (a == NULL) return NULL;
  if (!a->is_list) {
    set_statusf(status, TF_INVALID_ARGUMENT, "Value for '%s' is not a list (it is a %s) in "
                "operation '%s'.", name, kKindNames[a->kind], ctx->kernel->node_name);
    return NULL;
  }
  if (a->count > 0 && a->kind != kind) {
    set_statusf(status, TF_INVALID_ARGUMENT,
                "AttrValue had value with type 'list(%s)' when 'list(%s)' expected, for attr "
                "'%s' of operation '%s'", kKindNames[a->kind], kKindNames[kind], name,
                ctx->kernel->node_name);
    return NULL;
  }
  return a;
}

static int64_t list_len(const PG_AttrValue* a, int max_vals) {
  return max_vals < 0 ? 0 : (a->count < max_vals ? a->count : max_vals);
}

void TF_OpKernelConstruction_GetAttrSize(TF_OpKernelConstruction* ctx, const char* attr_name,
                                         int32_t* list_size, int32_t* total_size,
                                         TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
  const PG_AttrValue* a = find_attr(ctx, attr_name, status);
  if (a == NULL) {
    if (list_size) *list_size = -1;
    if (total_size) *total_size = -1;
    return;
  }
  int32_t list = -1, total = -1;
  if (a->is_list) {
    list = (int32_t)a->count;
    /* TensorFlow gives a string list's bytes only when it is not empty. */
    if (a->kind == PG_ATTR_STRING && a->count > 0) total = (int32_t)a->total_bytes;
  } else if (a->kind == PG_ATTR_STRING) {
    total = (int32_t)a->total_bytes;
  }
  if (list_size) *list_size = list;
  if (total_size) *total_size = total;
}

void TF_OpKernelConstruction_GetAttrType(TF_OpKernelConstruction* ctx, const char* attr_name,
                                         TF_DataType* val, TF_Status* status) {
  const PG_AttrValue* a = scalar_attr(ctx, attr_name, PG_ATTR_TYPE, status);
  if (a != NULL && val != NULL) *val = ((const TF_DataType*)a->values)[0];
}

void TF_OpKernelConstruction_GetAttrInt32(TF_OpKernelConstruction* ctx, const char* attr_name,
                                          int32_t* val, TF_Status* status) {
  const PG_AttrValue* a = scalar_attr(ctx, attr_name, PG_ATTR_INT, status);
  if (a == NULL) return;
  int64_t v = ((const int64_t*)a->values)[0];
  if (v < INT32_MIN || v > INT32_MAX) {
    set_statusf(status, TF_INVALID_ARGUMENT, "Attr %s has value %" PRId64
                " out of range for an int32", attr_name, v);
    return;
  }
  if (val != NULL) *val = (int32_t)v;
}

void TF_OpKernelConstruction_GetAttrInt64(TF_OpKernelConstruction* ctx, const char* attr_name,
                                          int64_t* val, TF_Status* status) {
  const PG_AttrValue* a = scalar_attr(ctx, attr_name, PG_ATTR_INT, status);
  if (a != NULL && val != NULL) *val = ((const int64_t*)a->values)[0];
}

void TF_OpKernelConstruction_GetAttrFloat(TF_OpKernelConstruction* ctx, const char* attr_name,
                                          float* val, TF_Status* status) {
  const PG_AttrValue* a = scalar_attr(ctx, attr_name, PG_ATTR_FLOAT, status);
  if (a != NULL && val != NULL) *val = ((const float*)a->values)[0];
}

void TF_OpKernelConstruction_GetAttrBool(TF_OpKernelConstruction* ctx, const char* attr_name,
                                         TF_Bool* val, TF_Status* status) {
  const PG_AttrValue* a = scalar_attr(ctx, attr_name, PG_ATTR_BOOL, status);
  if (a != NULL && val != NULL) *val = ((const TF_Bool*)a->values)[0];
}

void TF_OpKernelConstruction_GetAttrString(TF_OpKernelConstruction* ctx, const char* attr_name,
                                           char* val, size_t max_length, TF_Status* status) {
  const PG_AttrValue* a = scalar_attr(ctx, attr_name, PG_ATTR_STRING, status);
  if (a == NULL || max_length == 0 || val == NULL) return;
  size_t n = a->lengths[0] < max_length ? a->lengths[0] : max_length;
  memcpy(val, ((char* const*)a->values)[0], n);
}

void TF_OpKernelConstruction_GetAttrTypeList(TF_OpKernelConstruction* ctx,
                                             const char* attr_name, TF_DataType* vals,
                                             int max_vals, TF_Status* status) {
  const PG_AttrValue* a = list_attr(ctx, attr_name, PG_ATTR_TYPE, status);
  if (a == NULL) return;
  int64_t n = list_len(a, max_vals);
  for (int64_t i = 0; i < n; i++) vals[i] = ((const TF_DataType*)a->values)[i];
}

void TF_OpKernelConstruction_GetAttrInt32List(TF_OpKernelConstruction* ctx,
                                              const char* attr_name, int32_t* vals,
                                              int max_vals, TF_Status* status) {
  const PG_AttrValue* a = list_attr(ctx, attr_name, PG_ATTR_INT, status);
  if (a == NULL) return;
  int64_t n = list_len(a, max_vals);
  /* TensorFlow narrows list values without a range check. */
  for (int64_t i = 0; i < n; i++) vals[i] = (int32_t)((const int64_t*)a->values)[i];
}

void TF_OpKernelConstruction_GetAttrInt64List(TF_OpKernelConstruction* ctx,
                                              const char* attr_name, int64_t* vals,
                                              int max_vals, TF_Status* status) {
  const PG_AttrValue* a = list_attr(ctx, attr_name, PG_ATTR_INT, status);
  if (a == NULL) return;
  int64_t n = list_len(a, max_vals);
  if (n > 0) memcpy(vals, a->values, sizeof(int64_t) * (size_t)n);
}

void TF_OpKernelConstruction_GetAttrFloatList(TF_OpKernelConstruction* ctx,
                                              const char* attr_name, float* vals,
                                              int max_vals, TF_Status* status) {
  const PG_AttrValue* a = list_attr(ctx, attr_name, PG_ATTR_FLOAT, status);
  if (a == NULL) return;
  int64_t n = list_len(a, max_vals);
  if (n > 0) memcpy(vals, a->values, sizeof(float) * (size_t)n);
}

void TF_OpKernelConstruction_GetAttrBoolList(TF_OpKernelConstruction* ctx,
                                             const char* attr_name, TF_Bool* vals,
                                             int max_vals, TF_Status* status) {
  const PG_AttrValue* a = list_attr(ctx, attr_name, PG_ATTR_BOOL, status);
  if (a == NULL) return;
  int64_t n = list_len(a, max_vals);
  if (n > 0) memcpy(vals, a->values, sizeof(TF_Bool) * (size_t)n);
}

void TF_OpKernelConstruction_GetAttrStringList(TF_OpKernelConstruction* ctx,
                                               const char* attr_name, char** values,
                                               size_t* lengths, int max_values, void* storage,
                                               size_t storage_size, TF_Status* status) {
  const PG_AttrValue* a = list_attr(ctx, attr_name, PG_ATTR_STRING, status);
  if (a == NULL) return;
  int64_t n = list_len(a, max_values);
  char* p = storage;
  size_t used = 0;
  for (int64_t i = 0; i < n; i++) {
    size_t len = a->lengths[i];
    values[i] = p + used;
    lengths[i] = len;
    if (len > storage_size - used) {
      TF_SetStatus(status, TF_INVALID_ARGUMENT,
                   "Not enough storage to hold the requested list of strings");
      return;
    }
    memcpy(p + used, ((char* const*)a->values)[i], len);
    used += len;
  }
}

bool TF_OpKernelConstruction_HasAttr(TF_OpKernelConstruction* ctx, const char* attr_name,
                                     TF_Status* status) {
  (void)status;
  if (ctx == NULL || attr_name == NULL) return false;
  for (int32_t i = 0; i < ctx->kernel->num_attrs; i++) {
    if (strcmp(ctx->kernel->attrs[i].name, attr_name) == 0) return true;
  }
  return false;
}

TF_StringView TF_OpKernelConstruction_GetName(TF_OpKernelConstruction* ctx) {
  TF_StringView view = {kEmpty, 0};
  if (ctx != NULL) {
    view.data = ctx->kernel->node_name;
    view.len = strlen(ctx->kernel->node_name);
  }
  return view;
}

void TF_OpKernelConstruction_Failure(TF_OpKernelConstruction* ctx, TF_Status* status) {
  if (ctx == NULL || TF_GetCode(status) == TF_OK || ctx->code != TF_OK) return;
  ctx->code = TF_GetCode(status);
  snprintf(ctx->message, sizeof ctx->message, "%s", TF_Message(status));
}

/* ---- TF_OpKernelContext ----------------------------------------------------------------- */

typedef struct PG_InputSlot {
  void* data;
  uint64_t nbytes;
  TF_DataType dtype;
  bool host_memory;
  int num_dims;
  const int64_t* dims; /* into the request */
  /* Made by the first TF_GetInput (a kernel may call it from several threads at once); the
   * context holds one reference. */
  _Atomic(PG_Buffer*) buf;
} PG_InputSlot;

typedef struct PG_OutputSlot {
  TF_DataType expected;
  bool host_memory;
  bool set;
  TF_Tensor t; /* the output as set: dtype, shape and a buffer reference */
} PG_OutputSlot;

struct TF_OpKernelContext {
  PG_Kernel* kernel;
  const SP_Device* device;
  const SP_StreamExecutor* se;
  SP_Stream stream;
  PG_BFC* bfc;
  int device_id;
  int64_t step_id;
  uint64_t correlation_id; /* PG_RUN_CORRELATION_ID */
  uint64_t serial; /* tells this run's input buffers from earlier runs' */
  int num_inputs, num_outputs;
  PG_InputSlot* inputs;
  PG_OutputSlot* outputs;
  TF_Code code; /* the first failure */
  char message[1024];
  char device_name[128]; /* TF_GetDeviceName, made on first use */
  int allocating_output; /* the output TF_AllocateOutput is allocating, for its guard */
};

static atomic_uint_fast64_t run_serial;

void pg_context_fail(TF_OpKernelContext* ctx, TF_Code code, const char* fmt, ...) {
  if (ctx == NULL || code == TF_OK || ctx->code != TF_OK) return;
  ctx->code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->message, sizeof ctx->message, fmt, ap);
  va_end(ap);
}

void TF_OpKernelContext_Failure(TF_OpKernelContext* ctx, TF_Status* status) {
  if (ctx == NULL || TF_GetCode(status) == TF_OK) return;
  pg_context_fail(ctx, TF_GetCode(status), "%s", TF_Message(status));
}

SP_Stream TF_GetStream(TF_OpKernelContext* ctx, TF_Status* status) {
  if (ctx == NULL) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "TF_GetStream: ctx is NULL");
    return NULL;
  }
  if (ctx->device == NULL) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION,
                 "TF_GetStream: kernels on the CPU device have no stream (they run on the "
                 "calling thread, in host memory)");
    return NULL;
  }
  TF_SetStatus(status, TF_OK, "");
  return ctx->stream;
}

bool pg_context_input(TF_OpKernelContext* ctx, int i, const void** data, TF_DataType* dtype,
                      bool* host_memory) {
  if (ctx == NULL || i < 0 || i >= ctx->num_inputs) return false;
  *data = ctx->inputs[i].data;
  *dtype = ctx->inputs[i].dtype;
  *host_memory = ctx->inputs[i].host_memory;
  return true;
}

PG_BFC* pg_context_allocator(TF_OpKernelContext* ctx) { return ctx == NULL ? NULL : ctx->bfc; }

int pg_context_device_id(TF_OpKernelContext* ctx) { return ctx == NULL ? -1 : ctx->device_id; }

int TF_NumInputs(TF_OpKernelContext* ctx) { return ctx == NULL ? 0 : ctx->num_inputs; }

int TF_NumOutputs(TF_OpKernelContext* ctx) { return ctx == NULL ? 0 : ctx->num_outputs; }

void TF_GetInput(TF_OpKernelContext* ctx, int i, TF_Tensor** tensor, TF_Status* status) {
  if (ctx == NULL || tensor == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "TF_GetInput: ctx or tensor is NULL");
    return;
  }
  if (i < 0 || i >= ctx->num_inputs) {
    TF_SetStatus(status, TF_OUT_OF_RANGE, "input index out of range");
    return;
  }
  PG_InputSlot* in = &ctx->inputs[i];
  PG_Buffer* buf = atomic_load_explicit(&in->buf, memory_order_acquire);
  if (buf == NULL) {
    /* On the heap, not in the context: a tensor the kernel keeps past the run must not
     * point into this stack frame. It frees nothing but itself. */
    PG_Buffer* made = pg_buffer_new(PG_MEM_BORROWED, in->data, in->nbytes);
    if (made == NULL) goto oom;
    made->host_memory = in->host_memory;
    made->run_serial = ctx->serial;
    made->input_index = i;
    if (atomic_compare_exchange_strong_explicit(&in->buf, &buf, made, memory_order_acq_rel,
                                                memory_order_acquire)) {
      buf = made;
    } else {
      pg_buffer_unref(made); /* another thread made it first: `buf` is theirs */
    }
  }
  pg_buffer_ref(buf);
  TF_Tensor* t = pg_tensor_new(in->dtype, in->dims, in->num_dims, buf);
  if (t == NULL) goto oom;
  *tensor = t;
  TF_SetStatus(status, TF_OK, "");
  return;
oom:
  TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "TF_GetInput: out of host memory");
}

TF_DataType TF_InputDatatype(TF_OpKernelContext* ctx, int index) {
  if (ctx == NULL) return (TF_DataType)0;
  if (index < 0 || index >= ctx->num_inputs) {
    pg_context_fail(ctx, TF_OUT_OF_RANGE, "TF_InputDatatype: input index %d out of range "
                    "(the kernel has %d inputs)", index, ctx->num_inputs);
    return (TF_DataType)0;
  }
  return ctx->inputs[index].dtype;
}

TF_DataType TF_ExpectedOutputDataType(TF_OpKernelContext* ctx, int i) {
  if (ctx == NULL) return (TF_DataType)0;
  if (i < 0 || i >= ctx->num_outputs) {
    pg_context_fail(ctx, TF_OUT_OF_RANGE, "TF_ExpectedOutputDataType: output index %d out of "
                    "range (the kernel has %d outputs)", i, ctx->num_outputs);
    return (TF_DataType)0;
  }
  return ctx->outputs[i].expected;
}

bool TF_IsHostMemoryInput(TF_OpKernelContext* ctx, int i, TF_Status* status) {
  if (ctx == NULL || i < 0 || i >= ctx->num_inputs) {
    TF_SetStatus(status, TF_OUT_OF_RANGE, "input index out of range");
    return false;
  }
  TF_SetStatus(status, TF_OK, "");
  return ctx->inputs[i].host_memory;
}

bool TF_IsHostMemoryOutput(TF_OpKernelContext* ctx, int i, TF_Status* status) {
  if (ctx == NULL || i < 0 || i >= ctx->num_outputs) {
    TF_SetStatus(status, TF_OUT_OF_RANGE, "output index out of range");
    return false;
  }
  TF_SetStatus(status, TF_OK, "");
  return ctx->outputs[i].host_memory;
}

int64_t TF_StepId(TF_OpKernelContext* ctx) { return ctx == NULL ? 0 : ctx->step_id; }

int64_t TF_GetStepId(TF_OpKernelContext* ctx) { return ctx == NULL ? 0 : ctx->step_id; }

uint64_t pluggable_KernelCorrelationId(struct TF_OpKernelContext* ctx) {
  return ctx == NULL ? 0 : ctx->correlation_id;
}

/* Eager execution has no control-flow frames: TensorFlow reports frame 0, iteration 0. */
uint64_t TF_GetFrameId(TF_OpKernelContext* ctx) {
  (void)ctx;
  return 0;
}

int64_t TF_GetIterId(TF_OpKernelContext* ctx) {
  (void)ctx;
  return 0;
}

int TF_GetDeviceId(TF_OpKernelContext* ctx) { return ctx == NULL ? -1 : ctx->device_id; }

TF_StringView TF_GetDeviceName(TF_OpKernelContext* ctx) {
  TF_StringView view = {kEmpty, 0};
  if (ctx == NULL) return view;
  if (ctx->device_name[0] == '\0') {
    snprintf(ctx->device_name, sizeof ctx->device_name,
             "/job:localhost/replica:0/task:0/device:%s:%d", ctx->kernel->reg->b->device_type,
             ctx->device_id);
  }
  view.data = ctx->device_name;
  view.len = strlen(ctx->device_name);
  return view;
}

TF_StringView TF_GetOpKernelName(TF_OpKernelContext* ctx) {
  TF_StringView view = {kEmpty, 0};
  if (ctx != NULL) {
    view.data = ctx->kernel->node_name;
    view.len = strlen(ctx->kernel->node_name);
  }
  return view;
}

/* Sets output `index` to (dtype, dims, buf), adopting the caller's reference to `buf`. */
static bool set_output(TF_OpKernelContext* ctx, int index, TF_DataType dtype,
                       const int64_t* dims, int num_dims, PG_Buffer* buf) {
  PG_OutputSlot* o = &ctx->outputs[index];
  TF_Tensor fresh = {dtype, 0, NULL, {0}, buf};
  fresh.dims = fresh.inline_dims;
  if (!pg_tensor_set_dims(&fresh, dims, num_dims)) {
    pg_buffer_unref(buf);
    return false;
  }
  if (o->set) pg_tensor_clear(&o->t);
  o->t = fresh;
  if (o->t.dims == fresh.inline_dims) o->t.dims = o->t.inline_dims;
  o->set = true;
  return true;
}

/* New memory for a tensor of `dtype` and shape `dims` in host or device memory, as a buffer
 * with one reference. NULL with a status on failure; `what` names the call. */
/* ---- guard bytes (the synchronise-after-every-op mode) -----------------------------------
 * With guards on, every buffer the host allocates in device memory for a kernel (outputs of
 * TF_AllocateOutput and TF_ForwardInputOrAllocateOutput, temporaries of TF_AllocateTemp, and
 * so whatever TF_SetOutput makes an output of one) is allocated PG_GUARD_BYTES longer and the
 * plugin's sync_memcpy_htod fills the extra bytes with a pattern; after the op's device work
 * is done the host reads them back (pluggable_CheckOutputGuards): a kernel that wrote past the
 * end of a buffer changed them. The buffers of the thread's last run are checked. A guarded
 * temporary is held (a reference) until its guard is checked or the thread's next run: the
 * kernel deletes it before its device work is done, and memory given back to the allocator
 * meanwhile could be handed out again over the guard. */
#define PG_GUARD_BYTES 64
#define PG_GUARD_PATTERN 0xA5
#define PG_GUARDED_MAX 16
static atomic_int output_guards;

typedef struct GuardedOutput {
  uint64_t address, bytes;
  const SP_Device* device;
  const SP_StreamExecutor* se;
  const PG_Kernel* kernel;
  int index;     /* the output, or -1 for a temporary */
  int temporary; /* which TF_AllocateTemp of the run (from 0), for a temporary */
  PG_Buffer* held; /* a temporary's reference, until the check */
} GuardedOutput;
static _Thread_local GuardedOutput guarded[PG_GUARDED_MAX];
static _Thread_local int guarded_count;
static _Thread_local int guarded_temporaries; /* TF_AllocateTemp calls of the run so far */

/* Forgets the guards of the thread's last run, giving back the temporaries they held. */
static void release_guards(void) {
  for (int i = 0; i < guarded_count; i++) {
    if (guarded[i].held != NULL) pg_buffer_unref(guarded[i].held);
    guarded[i].held = NULL;
  }
  guarded_count = 0;
  guarded_temporaries = 0;
}

void pluggable_SetOutputGuards(int on) { atomic_store(&output_guards, on != 0); }

/* The SP_DeviceMemoryBase of `bytes` at `address`, for the plugin's copies. */
static SP_DeviceMemoryBase guard_memory(uint64_t address, uint64_t bytes) {
  SP_DeviceMemoryBase m;
  memset(&m, 0, sizeof m);
  m.struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE;
  m.opaque = (void*)(uintptr_t)address;
  m.size = bytes;
  return m;
}

/* Fills the guard after a new output of `bytes` at `data`; false when the plugin cannot. */
static bool guard_output(TF_OpKernelContext* ctx, void* data, uint64_t bytes, int index) {
  if (ctx->se == NULL || ctx->se->sync_memcpy_htod == NULL || ctx->se->sync_memcpy_dtoh == NULL)
    return false;
  unsigned char pattern[PG_GUARD_BYTES];
  memset(pattern, PG_GUARD_PATTERN, sizeof pattern);
  SP_DeviceMemoryBase m = guard_memory((uint64_t)(uintptr_t)data + bytes, PG_GUARD_BYTES);
  TF_Status* s = TF_NewStatus();
  ctx->se->sync_memcpy_htod(ctx->device, &m, pattern, PG_GUARD_BYTES, s);
  bool ok = TF_GetCode(s) == TF_OK;
  TF_DeleteStatus(s);
  if (ok && guarded_count < PG_GUARDED_MAX) {
    guarded[guarded_count++] =
        (GuardedOutput){(uint64_t)(uintptr_t)data, bytes, ctx->device, ctx->se, ctx->kernel,
                        index, index < 0 ? guarded_temporaries : 0, NULL};
  }
  return ok;
}

/* Holds the temporary `buf` whose guard guard_output just recorded at `data`. */
static void hold_guarded(void* data, PG_Buffer* buf) {
  if (guarded_count > 0 && guarded[guarded_count - 1].address == (uint64_t)(uintptr_t)data &&
      guarded[guarded_count - 1].index < 0 && guarded[guarded_count - 1].held == NULL) {
    pg_buffer_ref(buf);
    guarded[guarded_count - 1].held = buf;
  }
}

size_t pluggable_CheckOutputGuards(char* report, size_t n) {
  size_t length = 0;
  if (n > 0) report[0] = '\0';
  for (int i = 0; i < guarded_count; i++) {
    const GuardedOutput* g = &guarded[i];
    unsigned char seen[PG_GUARD_BYTES];
    SP_DeviceMemoryBase m = guard_memory(g->address + g->bytes, PG_GUARD_BYTES);
    TF_Status* s = TF_NewStatus();
    g->se->sync_memcpy_dtoh(g->device, seen, &m, PG_GUARD_BYTES, s);
    bool read = TF_GetCode(s) == TF_OK;
    TF_DeleteStatus(s);
    int last = -1;
    for (int j = 0; read && j < PG_GUARD_BYTES; j++) {
      if (seen[j] != PG_GUARD_PATTERN) last = j;
    }
    if (last >= 0 && length < n) {
      char what[64];
      if (g->index >= 0) snprintf(what, sizeof what, "output %d", g->index);
      else snprintf(what, sizeof what, "temporary %d (TF_AllocateTemp)", g->temporary);
      int wrote = snprintf(report + length, n - length,
                           "%skernel '%s' (op %s) wrote past the end of its %s (%" PRIu64
                           " bytes): at least %d of the %d guard bytes after it were changed",
                           length ? "; " : "", g->kernel->reg->kernel_name,
                           g->kernel->reg->b->op, what, g->bytes, last + 1, PG_GUARD_BYTES);
      if (wrote > 0) length += (size_t)wrote;
    }
  }
  release_guards();
  return length < n ? length : n;
}

static PG_Buffer* allocate_buffer(TF_OpKernelContext* ctx, TF_DataType dtype,
                                  const int64_t* dims, int num_dims, bool host_memory,
                                  const char* what, TF_Status* status) {
  char err[160];
  int64_t elements = pg_shape_elements(dims, num_dims, err, sizeof err);
  if (elements < 0) {
    set_statusf(status, TF_INVALID_ARGUMENT, "%s: %s", what, err);
    return NULL;
  }
  size_t size = TF_DataTypeSize(dtype);
  bool strings = dtype == TF_STRING;
  if (strings) {
    /* TF_TString elements, in host memory as TensorFlow keeps them, initialised empty; for
     * temporaries only: pluggable's tensors have no string dtype to hand an output over. */
    if (strcmp(what, "TF_AllocateTemp") != 0) {
      set_statusf(status, TF_UNIMPLEMENTED,
                  "%s: string outputs are not implemented by pluggable (its tensors have no "
                  "string type); string temporaries are (TF_AllocateTemp)", what);
      return NULL;
    }
    size = sizeof(TF_TString);
    host_memory = true;
  }
  if (size == 0) {
    set_statusf(status, dtype_is_known(dtype) ? TF_UNIMPLEMENTED : TF_INVALID_ARGUMENT,
                "%s: tensors of type %s (%d) are not implemented by pluggable", what,
                dtype_name(dtype), (int)dtype);
    return NULL;
  }
  if ((uint64_t)elements > (UINT64_MAX >> 1) / size) {
    set_statusf(status, TF_INVALID_ARGUMENT, "%s: the tensor is larger than 2^63 bytes", what);
    return NULL;
  }
  uint64_t bytes = (uint64_t)elements * size;
  if (ctx->device == NULL) host_memory = true; /* on the CPU all memory is host memory */
  void* data = NULL;
  bool guard = false, temporary = false;
  if (bytes > 0) {
    if (host_memory) {
      data = pg_host_alloc(bytes);
    } else if (ctx->bfc == NULL) {
      set_statusf(status, TF_FAILED_PRECONDITION,
                  "%s: the host gave this run no device allocator", what);
      return NULL;
    } else {
      guard = atomic_load_explicit(&output_guards, memory_order_relaxed) &&
              bytes <= UINT64_MAX - PG_GUARD_BYTES;
      data = pluggable_BFCAllocate(ctx->bfc, guard ? bytes + PG_GUARD_BYTES : bytes);
      temporary = strcmp(what, "TF_AllocateTemp") == 0;
      guard = data != NULL && guard &&
              guard_output(ctx, data, bytes, temporary ? -1 : ctx->allocating_output);
    }
    char refusal[480];
    if (data == NULL && !host_memory &&
        pluggable_BFCRefusal(ctx->bfc, refusal, sizeof refusal) > 0) {
      set_statusf(status, TF_INTERNAL, "%s: allocating %" PRIu64 " bytes on device %s:%d: %s",
                  what, bytes, ctx->kernel->reg->b->device_type, ctx->device_id, refusal);
      return NULL;
    }
    if (data == NULL) {
      set_statusf(status, TF_RESOURCE_EXHAUSTED,
                  "%s: out of %s memory allocating %" PRIu64 " bytes on device %s:%d", what,
                  host_memory ? "host" : "device", bytes, ctx->kernel->reg->b->device_type,
                  ctx->device_id);
      return NULL;
    }
  }
  PG_Buffer* buf = pg_buffer_new(host_memory ? PG_MEM_HOST : PG_MEM_BFC, data, bytes);
  if (buf == NULL) {
    if (host_memory) free(data);
    else pluggable_BFCDeallocate(ctx->bfc, data);
    set_statusf(status, TF_RESOURCE_EXHAUSTED, "%s: out of host memory", what);
    return NULL;
  }
  buf->bfc = host_memory ? NULL : ctx->bfc;
  if (guard && temporary) hold_guarded(data, buf);
  if (strings && bytes > 0) {
    memset(data, 0, bytes); /* TF_StringInit of every element */
    buf->tstrings = elements;
  }
  return buf;
}

/* Allocates output `index` with the expected type, returning the kernel's handle on it. */
static TF_Tensor* allocate_output(TF_OpKernelContext* ctx, int index, const int64_t* dims,
                                  int num_dims, const char* what, TF_Status* status) {
  PG_OutputSlot* o = &ctx->outputs[index];
  ctx->allocating_output = index;
  PG_Buffer* buf = allocate_buffer(ctx, o->expected, dims, num_dims, o->host_memory, what,
                                   status);
  if (buf == NULL) return NULL;
  pg_buffer_ref(buf); /* one for the output, one for the returned tensor */
  TF_Tensor* t = pg_tensor_new(o->expected, dims, num_dims, buf);
  if (t == NULL || !set_output(ctx, index, o->expected, dims, num_dims, buf)) {
    if (t == NULL) pg_buffer_unref(buf);
    else TF_DeleteTensor(t);
    set_statusf(status, TF_RESOURCE_EXHAUSTED, "%s: out of host memory", what);
    return NULL;
  }
  TF_SetStatus(status, TF_OK, "");
  return t;
}

TF_Tensor* TF_AllocateOutput(TF_OpKernelContext* ctx, int index, TF_DataType dtype,
                             const int64_t* dims, int num_dims, size_t len, TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
  if (ctx == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "TF_AllocateOutput: ctx is NULL");
    return NULL;
  }
  if (index < 0 || index >= ctx->num_outputs) {
    TF_SetStatus(status, TF_OUT_OF_RANGE, "output index out of range");
    return NULL;
  }
  TF_DataType expected = ctx->outputs[index].expected;
  if (dtype != expected) {
    set_statusf(status, TF_INVALID_ARGUMENT,
                "TF_AllocateOutput: output %d must be of type %s, not %s", index,
                dtype_name(expected), dtype_name(dtype));
    return NULL;
  }
  char err[160];
  int64_t elements = pg_shape_elements(dims, num_dims, err, sizeof err);
  if (elements < 0) {
    set_statusf(status, TF_INVALID_ARGUMENT, "TF_AllocateOutput: output %d: %s", index, err);
    return NULL;
  }
  size_t size = TF_DataTypeSize(dtype);
  if (size != 0 && (uint64_t)elements <= UINT64_MAX / size && (uint64_t)elements * size != len) {
    set_statusf(status, TF_INVALID_ARGUMENT,
                "TF_AllocateOutput: output %d: len is %zu bytes, but %" PRId64
                " elements of type %s take %" PRIu64, index, len, elements, dtype_name(dtype),
                (uint64_t)elements * size);
    return NULL;
  }
  return allocate_output(ctx, index, dims, num_dims, "TF_AllocateOutput", status);
}

TF_Tensor* TF_ForwardInputOrAllocateOutput(TF_OpKernelContext* ctx,
                                           const int* candidate_input_indices,
                                           int num_candidate_input_indices, int output_index,
                                           const int64_t* output_dims, int output_num_dims,
                                           int* forwarded_input, TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
  if (forwarded_input != NULL) *forwarded_input = -1;
  if (ctx == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "TF_ForwardInputOrAllocateOutput: ctx is NULL");
    return NULL;
  }
  if (output_index < 0 || output_index >= ctx->num_outputs) {
    TF_SetStatus(status, TF_OUT_OF_RANGE, "output index out of range");
    return NULL;
  }
  for (int i = 0; i < num_candidate_input_indices; i++) {
    int c = candidate_input_indices != NULL ? candidate_input_indices[i] : -1;
    if (c < 0 || c >= ctx->num_inputs) {
      set_statusf(status, TF_OUT_OF_RANGE,
                  "TF_ForwardInputOrAllocateOutput: candidate input %d is out of range (the "
                  "kernel has %d inputs)", c, ctx->num_inputs);
      return NULL;
    }
  }
  /* Forwarding needs to know that nothing else uses the input; the host lends inputs, so it
   * never forwards: always a fresh output, which is what TensorFlow does when it cannot. */
  return allocate_output(ctx, output_index, output_dims, output_num_dims,
                         "TF_ForwardInputOrAllocateOutput", status);
}

TF_Tensor* TF_AllocateTemp(TF_OpKernelContext* ctx, TF_DataType dtype, const int64_t* dims,
                           int num_dims, TF_AllocatorAttributes* alloc_attrs,
                           TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
  if (ctx == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "TF_AllocateTemp: ctx is NULL");
    return NULL;
  }
  if (alloc_attrs != NULL && alloc_attrs->struct_size == 0) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "TF_AllocatorAttributes struct size member must be set to "
                 "TF_ALLOCATOR_ATTRIBUTES_STRUCT_SIZE");
    return NULL;
  }
  bool on_host = alloc_attrs != NULL &&
                 alloc_attrs->struct_size >= TF_ALLOCATOR_ATTRIBUTES_STRUCT_SIZE &&
                 alloc_attrs->on_host;
  PG_Buffer* buf = allocate_buffer(ctx, dtype, dims, num_dims, on_host, "TF_AllocateTemp",
                                   status);
  guarded_temporaries++; /* temporaries are named by their order in the run */
  if (buf == NULL) return NULL;
  TF_Tensor* t = pg_tensor_new(dtype, dims, num_dims, buf);
  if (t == NULL) TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "TF_AllocateTemp: out of host memory");
  return t;
}

void TF_SetOutput(TF_OpKernelContext* ctx, int i, const TF_Tensor* tensor, TF_Status* status) {
  if (ctx == NULL || tensor == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "TF_SetOutput: ctx or tensor is NULL");
    return;
  }
  if (i < 0 || i >= ctx->num_outputs) {
    TF_SetStatus(status, TF_OUT_OF_RANGE, "output index out of range");
    return;
  }
  PG_OutputSlot* o = &ctx->outputs[i];
  if (tensor->dtype != o->expected) {
    set_statusf(status, TF_INVALID_ARGUMENT, "TF_SetOutput: output %d must be of type %s, not %s",
                i, dtype_name(o->expected), dtype_name(tensor->dtype));
    return;
  }
  PG_Buffer* buf = tensor->buf;
  bool known_place = buf->kind != PG_MEM_EXTERNAL;
  if (known_place && buf->data != NULL && buf->host_memory != o->host_memory) {
    set_statusf(status, TF_INVALID_ARGUMENT,
                "TF_SetOutput: output %d is in %s memory, but the tensor is in %s memory", i,
                o->host_memory ? "host" : "device", buf->host_memory ? "host" : "device");
    return;
  }
  pg_buffer_ref(buf);
  if (!set_output(ctx, i, tensor->dtype, tensor->dims, tensor->num_dims, buf)) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "TF_SetOutput: out of host memory");
    return;
  }
  TF_SetStatus(status, TF_OK, "");
}

TF_Tensor* TF_GetMutableOutput(TF_OpKernelContext* ctx, int i, TF_Status* status) {
  if (ctx == NULL || i < 0 || i >= ctx->num_outputs) {
    TF_SetStatus(status, TF_OUT_OF_RANGE, "output index out of range");
    return NULL;
  }
  PG_OutputSlot* o = &ctx->outputs[i];
  if (!o->set) {
    set_statusf(status, TF_FAILED_PRECONDITION,
                "TF_GetMutableOutput: output %d has not been set yet", i);
    return NULL;
  }
  pg_buffer_ref(o->t.buf);
  TF_Tensor* t = pg_tensor_new(o->t.dtype, o->t.dims, o->t.num_dims, o->t.buf);
  if (t == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "TF_GetMutableOutput: out of host memory");
    return NULL;
  }
  TF_SetStatus(status, TF_OK, "");
  return t;
}

/* ---- pluggable_KernelRun ---------------------------------------------------------------- */

/* Copies `bytes` from `src` into `dst` (both in the output's memory space): a device copy is
 * enqueued on the run's stream, so it follows the kernel's work on it. */
static bool copy_output(TF_OpKernelContext* ctx, void* dst, const PG_Buffer* src, bool host,
                        uint64_t bytes, TF_Status* status) {
  if (host || src->host_memory) {
    /* Host memory written by the kernel on the host during compute: ready now. A device
     * output cannot come from host memory (TF_SetOutput refuses it). */
    memcpy(dst, src->data, bytes);
    return true;
  }
  if (ctx->se == NULL || ctx->se->memcpy_dtod == NULL) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION,
                 "the host gave this run no SP_StreamExecutor to copy an output with");
    return false;
  }
  SP_DeviceMemoryBase d, s;
  memset(&d, 0, sizeof d);
  memset(&s, 0, sizeof s);
  d.struct_size = s.struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE;
  d.opaque = dst;
  d.size = s.size = bytes;
  s.opaque = src->data;
  ctx->se->memcpy_dtod(ctx->device, ctx->stream, &d, &s, bytes, status);
  return TF_GetCode(status) == TF_OK;
}

/* Frees an owned output that will not be handed over after all. */
static void free_owned(TF_OpKernelContext* ctx, const int64_t* rec) {
  void* data = (void*)(intptr_t)rec[PG_OUT_ADDRESS];
  if (!(rec[PG_OUT_FLAGS] & PG_OUT_OWNED) || data == NULL) return;
  if (rec[PG_OUT_FLAGS] & PG_OUT_HOST_MEMORY) free(data);
  else pluggable_BFCDeallocate(ctx->bfc, data);
}

/* Turns output `i` into the record at `rec`: takes over, aliases or copies its memory. */
static bool resolve_output(TF_OpKernelContext* ctx, int i, int64_t* rec, TF_Status* status) {
  PG_OutputSlot* o = &ctx->outputs[i];
  const char* kernel = ctx->kernel->reg->kernel_name;
  if (!o->set) {
    set_statusf(status, TF_INTERNAL,
                "kernel '%s' did not set output %d (of %d); a kernel must set every output "
                "with TF_AllocateOutput, TF_ForwardInputOrAllocateOutput or TF_SetOutput",
                kernel, i, ctx->num_outputs);
    return false;
  }
  PG_Buffer* buf = o->t.buf;
  int64_t elements = TF_TensorElementCount(&o->t);
  rec[PG_OUT_ADDRESS] = 0;
  rec[PG_OUT_NBYTES] = 0;
  rec[PG_OUT_DTYPE] = o->t.dtype;
  rec[PG_OUT_FLAGS] = o->host_memory ? PG_OUT_HOST_MEMORY : 0;
  rec[PG_OUT_ALIASED_INPUT] = -1;
  rec[PG_OUT_NUM_DIMS] = o->t.num_dims;
  if (o->t.num_dims > 0) {
    memcpy(rec + PG_OUT_HEADER_WORDS, o->t.dims, sizeof(int64_t) * (size_t)o->t.num_dims);
  }
  if (elements == 0 || buf->data == NULL || buf->len == 0) return true; /* empty */
  uint64_t bytes = buf->len;
  if (buf->kind == PG_MEM_BORROWED) {
    if (buf->run_serial != ctx->serial) {
      set_statusf(status, TF_INVALID_ARGUMENT,
                  "kernel '%s' set output %d to a tensor over an input of an earlier run", kernel,
                  i);
      return false;
    }
    rec[PG_OUT_ADDRESS] = (int64_t)(intptr_t)buf->data;
    rec[PG_OUT_NBYTES] = (int64_t)bytes;
    rec[PG_OUT_ALIASED_INPUT] = buf->input_index;
    return true;
  }
  if (buf->kind == PG_MEM_BFC && buf->bfc != ctx->bfc) {
    set_statusf(status, TF_INVALID_ARGUMENT,
                "kernel '%s' set output %d to memory of another allocator (another device)",
                kernel, i);
    return false;
  }
  bool own_kind = (buf->kind == PG_MEM_BFC && !o->host_memory) ||
                  (buf->kind == PG_MEM_HOST && o->host_memory);
  if (own_kind && pg_buffer_unique(buf)) {
    /* The usual case: memory from TF_AllocateOutput that only the output holds. */
    rec[PG_OUT_ADDRESS] = (int64_t)(intptr_t)buf->data;
    rec[PG_OUT_NBYTES] = (int64_t)bytes;
    rec[PG_OUT_FLAGS] |= PG_OUT_OWNED;
    pg_buffer_release_struct(buf);
    o->t.buf = NULL;
    pg_tensor_clear(&o->t);
    o->set = false;
    return true;
  }
  /* Shared with a tensor the kernel keeps, or the kernel's own memory (TF_NewTensor): the
   * caller gets a copy of its own. */
  void* data = o->host_memory ? pg_host_alloc(bytes)
               : ctx->bfc != NULL ? pluggable_BFCAllocate(ctx->bfc, bytes) : NULL;
  if (data == NULL) {
    set_statusf(status, TF_RESOURCE_EXHAUSTED,
                "out of %s memory copying output %d of kernel '%s' (%" PRIu64 " bytes)",
                o->host_memory ? "host" : "device", i, kernel, bytes);
    return false;
  }
  rec[PG_OUT_ADDRESS] = (int64_t)(intptr_t)data;
  rec[PG_OUT_NBYTES] = (int64_t)bytes;
  rec[PG_OUT_FLAGS] |= PG_OUT_OWNED;
  if (!copy_output(ctx, data, buf, o->host_memory, bytes, status)) {
    char message[900];
    snprintf(message, sizeof message, "%s", TF_Message(status));
    set_statusf(status, TF_GetCode(status), "copying output %d of kernel '%s' failed: %s", i,
                kernel, message);
    free_owned(ctx, rec);
    return false;
  }
  return true;
}

int pluggable_KernelRun(const int64_t* request) {
  if (request == NULL) return TF_INVALID_ARGUMENT;
  PG_Kernel* kernel = (PG_Kernel*)(intptr_t)request[PG_RUN_KERNEL];
  int64_t* out = (int64_t*)(intptr_t)request[PG_RUN_OUT];
  int64_t out_capacity = request[PG_RUN_OUT_CAPACITY];
  TF_Status* status = (TF_Status*)(intptr_t)request[PG_RUN_STATUS];
  if (kernel == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "pluggable_KernelRun: no kernel");
    return TF_INVALID_ARGUMENT;
  }
  int64_t num_inputs = request[PG_RUN_NUM_INPUTS], num_outputs = request[PG_RUN_NUM_OUTPUTS];
  if (num_inputs < 0 || num_outputs < 0 || num_inputs > (1 << 20) || num_outputs > (1 << 20)) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "pluggable_KernelRun: bad input or output count");
    return TF_INVALID_ARGUMENT;
  }
  if (out_capacity < num_outputs * PG_OUT_HEADER_WORDS || (num_outputs > 0 && out == NULL)) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "pluggable_KernelRun: the output array is too small");
    return TF_INVALID_ARGUMENT;
  }
  const TF_KernelBuilder* b = kernel->reg->b;
  if (atomic_load_explicit(&kernel->reg->stuck, memory_order_relaxed)) {
    char reason[512];
    if (stuck_reason(kernel->reg->source, reason, sizeof reason) == 0) {
      snprintf(reason, sizeof reason, "a call was abandoned inside it");
    }
    set_statusf(status, TF_UNAVAILABLE,
                "kernel '%s' is refused without calling the plugin: its plugin (%s) is unusable "
                "in this process because %s; restart the process to use it again",
                kernel->reg->kernel_name, kernel->reg->source ? kernel->reg->source : "?",
                reason);
    return TF_UNAVAILABLE;
  }
  if (b->compute == NULL) {
    set_statusf(status, TF_UNIMPLEMENTED,
                "kernel '%s' is asynchronous (TF_NewAsyncKernelBuilder); running asynchronous "
                "kernels is not implemented by pluggable", kernel->reg->kernel_name);
    return TF_UNIMPLEMENTED;
  }

  PG_InputSlot inline_inputs[PG_RUN_INLINE_ARGS];
  PG_OutputSlot inline_outputs[PG_RUN_INLINE_ARGS];
  TF_OpKernelContext ctx;
  ctx.kernel = kernel;
  ctx.device = (const SP_Device*)(intptr_t)request[PG_RUN_DEVICE];
  ctx.se = (const SP_StreamExecutor*)(intptr_t)request[PG_RUN_STREAM_EXECUTOR];
  ctx.stream = (SP_Stream)(intptr_t)request[PG_RUN_STREAM];
  ctx.bfc = (PG_BFC*)(intptr_t)request[PG_RUN_ALLOCATOR];
  ctx.device_id = (int)request[PG_RUN_DEVICE_ID];
  ctx.step_id = request[PG_RUN_STEP_ID];
  ctx.correlation_id = (uint64_t)request[PG_RUN_CORRELATION_ID];
  ctx.serial = atomic_fetch_add_explicit(&run_serial, 1, memory_order_relaxed) + 1;
  ctx.num_inputs = (int)num_inputs;
  ctx.num_outputs = (int)num_outputs;
  ctx.code = TF_OK;
  ctx.message[0] = '\0';
  ctx.device_name[0] = '\0';
  ctx.allocating_output = -1;
  ctx.inputs = num_inputs <= PG_RUN_INLINE_ARGS ? inline_inputs
                                                : malloc(sizeof(PG_InputSlot) * (size_t)num_inputs);
  ctx.outputs = num_outputs <= PG_RUN_INLINE_ARGS
                    ? inline_outputs
                    : malloc(sizeof(PG_OutputSlot) * (size_t)num_outputs);
  int code = TF_OK;
  if (ctx.inputs == NULL || ctx.outputs == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "pluggable_KernelRun: out of host memory");
    code = TF_RESOURCE_EXHAUSTED;
    ctx.num_inputs = ctx.num_outputs = 0;
    goto done;
  }

  /* Parse the request. */
  const int64_t* w = request + PG_RUN_HEADER_WORDS;
  for (int i = 0; i < ctx.num_outputs; i++) {
    PG_OutputSlot* o = &ctx.outputs[i];
    o->expected = (TF_DataType)(w[i] & 0xFFFFFFFF);
    o->host_memory = (w[i] & PG_RUN_OUTPUT_HOST_MEMORY) != 0 || ctx.device == NULL;
    o->set = false;
    o->t.buf = NULL;
    o->t.num_dims = 0;
    o->t.dims = o->t.inline_dims;
  }
  w += ctx.num_outputs;
  for (int i = 0; i < ctx.num_inputs; i++) {
    PG_InputSlot* in = &ctx.inputs[i];
    in->data = (void*)(intptr_t)w[0];
    in->nbytes = (uint64_t)w[1];
    in->dtype = (TF_DataType)w[2];
    in->host_memory = w[3] != 0 || ctx.device == NULL;
    in->num_dims = (int)w[4];
    in->dims = w + 5;
    atomic_init(&in->buf, NULL);
    char err[160];
    int64_t elements = w[4] < 0 || w[4] > PG_MAX_DIMS ? -1
                       : pg_shape_elements(in->dims, in->num_dims, err, sizeof err);
    size_t size = TF_DataTypeSize(in->dtype);
    if (elements < 0 || !dtype_is_known(w[2]) ||
        (size > 0 && (uint64_t)elements * size != in->nbytes)) {
      set_statusf(status, TF_INVALID_ARGUMENT,
                  "pluggable_KernelRun: input %d is malformed (type %" PRId64 ", %" PRId64
                  " dimensions, %" PRIu64 " bytes)", i, w[2], w[4], in->nbytes);
      code = TF_INVALID_ARGUMENT;
      ctx.num_inputs = i;
      goto done;
    }
    w += 5 + in->num_dims;
  }

  release_guards(); /* the guards checked after a run are its own */
  PG_Watch* volatile watch = pg_watch_slot();
  if (watch != NULL && sigsetjmp(watch->env, 0) != 0) {
    /* The watchdog (deadline) or Ctrl-C abandoned the call where it was. */
    pg_watch_recover();
    int interrupted = atomic_load(&watch->escape) == PG_WATCH_INTERRUPTED;
    char reason[512];
    if (interrupted) {
      snprintf(reason, sizeof reason,
               "kernel '%s' (op %s) was interrupted (Ctrl-C) inside its compute",
               kernel->reg->kernel_name, b->op);
    } else {
      snprintf(reason, sizeof reason,
               "kernel '%s' (op %s) did not return from its compute within the deadline of %g s",
               kernel->reg->kernel_name, b->op, pg_watch_deadline());
    }
    mark_plugin_stuck(kernel->reg->source, reason);
    if (interrupted) {
      set_statusf(status, TF_CANCELLED,
                  "kernel '%s' (op %s) was interrupted (Ctrl-C) inside its compute; its plugin "
                  "(%s) is no longer used in this process, since the call was abandoned where "
                  "it was", kernel->reg->kernel_name, b->op,
                  kernel->reg->source ? kernel->reg->source : "?");
    } else {
      set_statusf(status, TF_DEADLINE_EXCEEDED,
                  "kernel '%s' (op %s) did not return from its compute within the deadline of "
                  "%g s; its plugin (%s) is marked stuck and no longer used in this process. "
                  "Give kernels longer with pluggable.config.set_deadline(seconds) or "
                  "PLUGGABLE_DEADLINE (0 turns the deadline off)", kernel->reg->kernel_name,
                  b->op, pg_watch_deadline(),
                  kernel->reg->source ? kernel->reg->source : "?");
    }
    code = TF_GetCode(status);
    /* What the kernel made is abandoned with it: outputs set are not handed out. */
    goto done;
  }
  if (watch != NULL) pg_watch_begin(watch);
  b->compute(kernel->instance, &ctx);
  if (watch != NULL) pg_watch_end(watch);

  if (ctx.code != TF_OK) {
    TF_SetStatus(status, ctx.code, ctx.message);
    code = ctx.code;
    goto done;
  }
  int64_t used = 0;
  int resolved = 0;
  for (int i = 0; i < ctx.num_outputs; i++) {
    int64_t need = PG_OUT_HEADER_WORDS + (ctx.outputs[i].set ? ctx.outputs[i].t.num_dims : 0);
    if (used + need > out_capacity) {
      TF_SetStatus(status, TF_INVALID_ARGUMENT, "pluggable_KernelRun: the output array is too small");
      code = TF_INVALID_ARGUMENT;
    } else if (!resolve_output(&ctx, i, out + used, status)) {
      code = TF_GetCode(status);
    }
    if (code != TF_OK) {
      /* Give back what earlier outputs took over. */
      int64_t at = 0;
      for (int j = 0; j < resolved; j++) {
        free_owned(&ctx, out + at);
        at += PG_OUT_HEADER_WORDS + out[at + PG_OUT_NUM_DIMS];
      }
      goto done;
    }
    used += PG_OUT_HEADER_WORDS + out[used + PG_OUT_NUM_DIMS];
    resolved++;
  }
  TF_SetStatus(status, TF_OK, "");

done:
  for (int i = 0; i < ctx.num_outputs; i++) {
    if (ctx.outputs[i].set) pg_tensor_clear(&ctx.outputs[i].t);
  }
  for (int i = 0; i < ctx.num_inputs; i++) pg_buffer_unref(atomic_load(&ctx.inputs[i].buf));
  if (ctx.inputs != inline_inputs) free(ctx.inputs);
  if (ctx.outputs != inline_outputs) free(ctx.outputs);
  return code;
}

static int same_source(const char* a, const char* b) {
  return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static void mark_plugin_stuck(const char* source, const char* reason) {
  pthread_mutex_lock(&registry_mu);
  PG_StuckPlugin* known = stuck_plugins;
  while (known != NULL && !same_source(known->source, source)) known = known->next;
  if (known == NULL) {
    PG_StuckPlugin* entry = calloc(1, sizeof *entry);
    if (entry != NULL) {
      entry->source = source != NULL ? pg_strdup(source) : NULL;
      entry->reason = pg_strdup(reason != NULL ? reason : "a call was abandoned inside it");
      entry->next = stuck_plugins;
      stuck_plugins = entry;
    }
  }
  for (int64_t i = 0; i < registry_count; i++) {
    PG_Registration* r = registry[i];
    if (r != NULL && same_source(r->source, source)) atomic_store(&r->stuck, 1);
  }
  pthread_mutex_unlock(&registry_mu);
}

static size_t stuck_reason(const char* source, char* buf, size_t n) {
  size_t length = 0;
  pthread_mutex_lock(&registry_mu);
  for (PG_StuckPlugin* p = stuck_plugins; p != NULL; p = p->next) {
    if (same_source(p->source, source) && p->reason != NULL) {
      length = strlen(p->reason);
      if (buf != NULL && n > 0) snprintf(buf, n, "%s", p->reason);
      break;
    }
  }
  pthread_mutex_unlock(&registry_mu);
  return length;
}

void pluggable_MarkPluginStuck(const char* source, const char* reason) {
  if (source != NULL) mark_plugin_stuck(source, reason);
}

size_t pluggable_PluginStuckReason(const char* source, char* buf, size_t n) {
  return source != NULL ? stuck_reason(source, buf, n) : 0;
}
