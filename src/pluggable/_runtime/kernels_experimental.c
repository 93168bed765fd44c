/* kernels_experimental.c: resource variables, and tensorflow/c/kernels_experimental.h on the
 * host side.
 *
 * A PG_Variable (runtime_internal.h) is what TensorFlow calls a Var: a dtype, a mutex and a
 * value tensor. Kernels find it through a DT_RESOURCE input, whose bytes (host memory, laid
 * down by the host) hold the PG_Variable pointer; a magic word guards against anything else.
 * The value's memory comes from the BFC allocator of the device the variable was made for,
 * the allocator kernel outputs come from; a kernel of another device is refused.
 *
 * Ordering. The runtime never touches device bytes itself: copies and updates are the
 * plugin's callbacks, which enqueue them on the kernel's stream (the device's compute
 * stream), so they are ordered with every kernel before and after. Replacing a value frees
 * the old memory at once, which the stream-ordered rule makes safe (tensor.c).
 *
 * Differences from TensorFlow: there are no reference variables, temporary variables or
 * variant tensors (their functions set TF_UNIMPLEMENTED naming themselves), no named inputs
 * (TF_GetInputByName) and no shape attributes (TF_OpKernelConstruction_GetAttrTensorShape);
 * `sparse` (copy-on-read for sparse updates) changes nothing, since the host never shares a
 * value's memory with a tensor: reads copy it.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_internal.h"
#include "runtime_internal.h"
#include "tensor_internal.h"
#include "tensorflow/c/kernels_experimental.h"

#define PG_VARIABLE_MAGIC 0x5641524941424C45ull /* "VARIABLE" */

struct PG_Variable {
  uint64_t magic;
  pthread_mutex_t mu;
  TF_DataType dtype;
  PG_BFC* bfc;
  int device_id;
  TF_Tensor* value; /* NULL until initialized */
  char name[128];
};

#define UNIMPLEMENTED(status, name) \
  TF_SetStatus((status), TF_UNIMPLEMENTED, name " is not implemented by pluggable")

/* ---- the host's side ------------------------------------------------------------------- */

PG_Variable* pluggable_VariableNew(const char* name, TF_DataType dtype, PG_BFC* bfc,
                                   int device_id) {
  PG_Variable* var = calloc(1, sizeof *var);
  if (var == NULL) return NULL;
  var->magic = PG_VARIABLE_MAGIC;
  pthread_mutex_init(&var->mu, NULL);
  var->dtype = dtype;
  var->bfc = bfc;
  var->device_id = device_id;
  snprintf(var->name, sizeof var->name, "%s", name != NULL && *name ? name : "Variable");
  return var;
}

void pluggable_VariableDelete(PG_Variable* var, int release_memory) {
  if (var == NULL) return;
  if (var->value != NULL) {
    if (!release_memory && pg_buffer_unique(var->value->buf)) {
      pg_buffer_release_struct(var->value->buf);
      var->value->buf = NULL;
      pg_tensor_clear(var->value);
      free(var->value);
    } else {
      TF_DeleteTensor(var->value);
    }
  }
  var->magic = 0;
  pthread_mutex_destroy(&var->mu);
  free(var);
}

void pluggable_VariableLock(PG_Variable* var) {
  if (var != NULL) pthread_mutex_lock(&var->mu);
}

void pluggable_VariableUnlock(PG_Variable* var) {
  if (var != NULL) pthread_mutex_unlock(&var->mu);
}

int pluggable_VariableInfo(PG_Variable* var, int64_t* dims, int capacity, void** data,
                           uint64_t* nbytes) {
  if (var == NULL || var->value == NULL) return -1;
  TF_Tensor* t = var->value;
  for (int i = 0; i < t->num_dims && i < capacity; i++) dims[i] = t->dims[i];
  if (data != NULL) *data = t->buf->data;
  if (nbytes != NULL) *nbytes = t->buf->len;
  return t->num_dims;
}

int pluggable_VariableShape(PG_Variable* var, int64_t* dims, int capacity) {
  if (var == NULL) return -1;
  pthread_mutex_lock(&var->mu);
  int rank = pluggable_VariableInfo(var, dims, capacity, NULL, NULL);
  pthread_mutex_unlock(&var->mu);
  return rank;
}

/* A new value tensor of the variable's dtype and shape `dims`, unset, in the variable's
 * memory; NULL with a status on failure. */
static TF_Tensor* new_value(PG_Variable* var, const int64_t* dims, int num_dims,
                            TF_Status* status) {
  char err[160];
  int64_t elements = pg_shape_elements(dims, num_dims, err, sizeof err);
  if (elements < 0) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, err);
    return NULL;
  }
  size_t size = TF_DataTypeSize(var->dtype);
  if (size == 0) {
    TF_SetStatus(status, TF_UNIMPLEMENTED,
                 "variables of this type are not implemented by pluggable");
    return NULL;
  }
  uint64_t bytes = (uint64_t)elements * size;
  void* data = NULL;
  if (bytes > 0) {
    data = var->bfc != NULL ? pluggable_BFCAllocate(var->bfc, bytes) : pg_host_alloc(bytes);
    if (data == NULL) {
      char message[256];
      snprintf(message, sizeof message,
               "out of %s memory allocating %" PRIu64 " bytes for variable '%s'",
               var->bfc != NULL ? "device" : "host", bytes, var->name);
      TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, message);
      return NULL;
    }
  }
  PG_Buffer* buf = pg_buffer_new(var->bfc != NULL ? PG_MEM_BFC : PG_MEM_HOST, data, bytes);
  if (buf == NULL) {
    if (var->bfc != NULL) pluggable_BFCDeallocate(var->bfc, data);
    else free(data);
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of host memory");
    return NULL;
  }
  buf->bfc = var->bfc;
  buf->host_memory = var->bfc == NULL;
  TF_Tensor* t = pg_tensor_new(var->dtype, dims, num_dims, buf);
  if (t == NULL) TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of host memory");
  return t;
}

/* Makes `t` the value, dropping the previous one. */
static void replace_value(PG_Variable* var, TF_Tensor* t) {
  if (var->value != NULL) TF_DeleteTensor(var->value);
  var->value = t;
}

void* pluggable_VariableAllocate(PG_Variable* var, const int64_t* dims, int num_dims,
                                 TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
  if (var == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "pluggable_VariableAllocate: no variable");
    return NULL;
  }
  TF_Tensor* t = new_value(var, dims, num_dims, status);
  if (t == NULL) return NULL;
  replace_value(var, t);
  return t->buf->data;
}

/* ---- kernels' side ----------------------------------------------------------------------- */

/* The variable of input `index` of a running kernel, checked; NULL with a status naming the
 * calling function `what` otherwise. */
static PG_Variable* input_variable(TF_OpKernelContext* ctx, int index, const char* what,
                                   TF_Status* status) {
  char message[300];
  const void* data;
  TF_DataType dtype;
  bool host_memory;
  if (ctx == NULL || !pg_context_input(ctx, index, &data, &dtype, &host_memory)) {
    snprintf(message, sizeof message, "%s: input %d is out of range", what, index);
    TF_SetStatus(status, TF_OUT_OF_RANGE, message);
    return NULL;
  }
  PG_Variable* var = NULL;
  if (dtype == TF_RESOURCE && host_memory && data != NULL) memcpy(&var, data, sizeof var);
  if (var == NULL || var->magic != PG_VARIABLE_MAGIC) {
    snprintf(message, sizeof message,
             "%s: input %d is not a resource variable (a DT_RESOURCE input made by "
             "VarHandleOp)", what, index);
    TF_SetStatus(status, TF_INVALID_ARGUMENT, message);
    return NULL;
  }
  if (var->bfc != pg_context_allocator(ctx)) {
    snprintf(message, sizeof message,
             "%s: variable '%s' lives on %s %d, not on the device this kernel runs on (%d)",
             what, var->name, var->bfc != NULL ? "device" : "the CPU", var->device_id,
             pg_context_device_id(ctx));
    TF_SetStatus(status, TF_INVALID_ARGUMENT, message);
    return NULL;
  }
  return var;
}

static const char* shape_text(const TF_Tensor* t, char* buf, size_t n) {
  size_t used = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < t->num_dims && used < n; i++) {
    used += (size_t)snprintf(buf + used, n - used, i ? ", %" PRId64 : "%" PRId64, t->dims[i]);
  }
  if (used < n) snprintf(buf + used, n - used, "]");
  return buf;
}

static bool same_shape(const TF_Tensor* a, const TF_Tensor* b) {
  if (a->num_dims != b->num_dims) return false;
  for (int i = 0; i < a->num_dims; i++) {
    if (a->dims[i] != b->dims[i]) return false;
  }
  return true;
}

static const char* type_text(TF_DataType dt, char* buf, size_t n) {
  snprintf(buf, n, "type code %d", (int)dt);
  return buf;
}

/* Gives the variable a value of its own when its memory is shared (a kernel kept a tensor
 * from TF_GetInputTensorFromVariable): copy-on-write, as TensorFlow does. */
static bool unshare(TF_OpKernelContext* ctx, PG_Variable* var,
                    void (*copyFunc)(TF_OpKernelContext*, TF_Tensor*, TF_Tensor*),
                    TF_Status* status) {
  if (pg_buffer_unique(var->value->buf)) return true;
  if (copyFunc == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "the variable's memory is shared and copyFunc is NULL");
    return false;
  }
  TF_Tensor* fresh = new_value(var, var->value->dims, var->value->num_dims, status);
  if (fresh == NULL) return false;
  copyFunc(ctx, var->value, fresh);
  replace_value(var, fresh);
  return true;
}

void TF_AssignVariable(TF_OpKernelContext* ctx, int input_index, int value_index,
                       bool validate_shape,
                       void (*copyFunc)(TF_OpKernelContext* ctx, TF_Tensor* source,
                                        TF_Tensor* dest),
                       TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
  PG_Variable* var = input_variable(ctx, input_index, "TF_AssignVariable", status);
  if (var == NULL) return;
  if (copyFunc == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "TF_AssignVariable: copyFunc is NULL");
    return;
  }
  TF_Tensor* value = NULL;
  TF_GetInput(ctx, value_index, &value, status);
  if (TF_GetCode(status) != TF_OK) return;
  char message[512], a[64], b[64];
  pthread_mutex_lock(&var->mu);
  if (value->dtype != var->dtype) {
    snprintf(message, sizeof message,
             "TF_AssignVariable: variable '%s' holds %s, the value is %s; assign a value of "
             "the variable's type", var->name, type_text(var->dtype, a, sizeof a),
             type_text(value->dtype, b, sizeof b));
    TF_SetStatus(status, TF_INVALID_ARGUMENT, message);
  } else if (var->value != NULL && same_shape(var->value, value) &&
             pg_buffer_unique(var->value->buf)) {
    copyFunc(ctx, value, var->value); /* in place */
  } else if (validate_shape && var->value != NULL && !same_shape(var->value, value)) {
    char sa[128], sb[128];
    snprintf(message, sizeof message,
             "TF_AssignVariable: variable '%s' has shape %s and the value %s; with "
             "validate_shape the shape cannot change", var->name,
             shape_text(var->value, sa, sizeof sa), shape_text(value, sb, sizeof sb));
    TF_SetStatus(status, TF_INVALID_ARGUMENT, message);
  } else {
    TF_Tensor* fresh = new_value(var, value->dims, value->num_dims, status);
    if (fresh != NULL) {
      copyFunc(ctx, value, fresh);
      replace_value(var, fresh);
    }
  }
  pthread_mutex_unlock(&var->mu);
  TF_DeleteTensor(value);
}

void TF_AssignUpdateVariable(TF_OpKernelContext* ctx, int input_index, int value_index, int Op,
                             int isVariantType,
                             void (*copyFunc)(TF_OpKernelContext* ctx, TF_Tensor* source,
                                              TF_Tensor* dest),
                             void (*updateFunc)(TF_OpKernelContext* ctx, TF_Tensor* tensor,
                                                TF_Tensor* value, int Op),
                             TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
  if (isVariantType) {
    TF_SetStatus(status, TF_UNIMPLEMENTED,
                 "TF_AssignUpdateVariable: variant variables are not implemented by pluggable");
    return;
  }
  PG_Variable* var = input_variable(ctx, input_index, "TF_AssignUpdateVariable", status);
  if (var == NULL) return;
  if (updateFunc == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "TF_AssignUpdateVariable: updateFunc is NULL");
    return;
  }
  TF_Tensor* value = NULL;
  TF_GetInput(ctx, value_index, &value, status);
  if (TF_GetCode(status) != TF_OK) return;
  char message[512], a[128], b[128];
  pthread_mutex_lock(&var->mu);
  if (var->value == NULL) {
    snprintf(message, sizeof message,
             "TF_AssignUpdateVariable: variable '%s' is uninitialized; assign it a value first",
             var->name);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, message);
  } else if (value->dtype != var->dtype) {
    snprintf(message, sizeof message,
             "TF_AssignUpdateVariable: variable '%s' holds %s, the value is %s", var->name,
             type_text(var->dtype, a, sizeof a), type_text(value->dtype, b, sizeof b));
    TF_SetStatus(status, TF_INVALID_ARGUMENT, message);
  } else if (!same_shape(var->value, value)) {
    snprintf(message, sizeof message,
             "TF_AssignUpdateVariable: cannot update variable '%s' of shape %s with a value "
             "of shape %s; the shapes must be equal", var->name,
             shape_text(var->value, a, sizeof a), shape_text(value, b, sizeof b));
    TF_SetStatus(status, TF_INVALID_ARGUMENT, message);
  } else if (unshare(ctx, var, copyFunc, status)) {
    updateFunc(ctx, var->value, value, Op);
  }
  pthread_mutex_unlock(&var->mu);
  TF_DeleteTensor(value);
}

/* The variables a kernel locked, in the order they were locked. */
struct TF_VariableInputLockHolder {
  int count;
  PG_Variable* vars[];
};

static int by_address(const void* a, const void* b) {
  uintptr_t x = (uintptr_t)*(PG_Variable* const*)a, y = (uintptr_t)*(PG_Variable* const*)b;
  return x < y ? -1 : x > y;
}

void TF_MaybeLockVariableInputMutexesInOrder(
    TF_OpKernelContext* ctx, bool do_lock, bool sparse, const int* const inputs, size_t len,
    void (*copyFunc)(TF_OpKernelContext* ctx, TF_Tensor* source, TF_Tensor* dest),
    TF_VariableInputLockHolder** lockHolder, TF_Status* status) {
  (void)sparse;
  (void)copyFunc;
  TF_SetStatus(status, TF_OK, "");
  if (lockHolder == NULL || (inputs == NULL && len > 0)) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "TF_MaybeLockVariableInputMutexesInOrder: lockHolder or inputs is NULL");
    return;
  }
  *lockHolder = NULL;
  TF_VariableInputLockHolder* h = malloc(sizeof *h + sizeof(PG_Variable*) * (len ? len : 1));
  if (h == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of host memory");
    return;
  }
  h->count = 0;
  for (size_t i = 0; do_lock && i < len; i++) {
    const void* data;
    TF_DataType dtype;
    bool host_memory;
    if (!pg_context_input(ctx, inputs[i], &data, &dtype, &host_memory)) {
      char message[160];
      snprintf(message, sizeof message,
               "TF_MaybeLockVariableInputMutexesInOrder: input %d is out of range", inputs[i]);
      TF_SetStatus(status, TF_OUT_OF_RANGE, message);
      free(h);
      return;
    }
    if (dtype != TF_RESOURCE) continue; /* TensorFlow skips inputs that are not variables */
    PG_Variable* var = input_variable(ctx, inputs[i], "TF_MaybeLockVariableInputMutexesInOrder",
                                      status);
    if (var == NULL) {
      free(h);
      return;
    }
    h->vars[h->count++] = var;
  }
  /* One order for every kernel, each variable once: no deadlock, no self-deadlock. */
  qsort(h->vars, (size_t)h->count, sizeof h->vars[0], by_address);
  int unique = 0;
  for (int i = 0; i < h->count; i++) {
    if (unique == 0 || h->vars[unique - 1] != h->vars[i]) h->vars[unique++] = h->vars[i];
  }
  h->count = unique;
  for (int i = 0; i < h->count; i++) pthread_mutex_lock(&h->vars[i]->mu);
  *lockHolder = h;
}

void TF_ReleaseVariableInputLockHolder(TF_VariableInputLockHolder* lockHolder) {
  if (lockHolder == NULL) return;
  for (int i = lockHolder->count - 1; i >= 0; i--) pthread_mutex_unlock(&lockHolder->vars[i]->mu);
  free(lockHolder);
}

void TF_GetInputTensorFromVariable(TF_OpKernelContext* ctx, int input, bool lock_held,
                                   bool isVariantType, bool sparse,
                                   void (*copyFunc)(TF_OpKernelContext* ctx, TF_Tensor* source,
                                                    TF_Tensor* dest),
                                   TF_Tensor** out, TF_Status* status) {
  (void)sparse;
  TF_SetStatus(status, TF_OK, "");
  if (out == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "TF_GetInputTensorFromVariable: out is NULL");
    return;
  }
  *out = NULL;
  if (isVariantType) {
    TF_SetStatus(status, TF_UNIMPLEMENTED,
                 "TF_GetInputTensorFromVariable: variant variables are not implemented by "
                 "pluggable");
    return;
  }
  PG_Variable* var = input_variable(ctx, input, "TF_GetInputTensorFromVariable", status);
  if (var == NULL) return;
  if (!lock_held) pthread_mutex_lock(&var->mu);
  if (var->value == NULL) {
    char message[256];
    snprintf(message, sizeof message,
             "TF_GetInputTensorFromVariable: variable '%s' is uninitialized; assign it a "
             "value first", var->name);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, message);
  } else if (unshare(ctx, var, copyFunc, status)) {
    TF_Tensor* v = var->value;
    pg_buffer_ref(v->buf);
    *out = pg_tensor_new(v->dtype, v->dims, v->num_dims, v->buf);
    if (*out == NULL) TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of host memory");
  }
  if (!lock_held) pthread_mutex_unlock(&var->mu);
}

bool TF_IsRefInput(TF_OpKernelContext* ctx, int i, TF_Status* status) {
  const void* data;
  TF_DataType dtype;
  bool host_memory;
  if (!pg_context_input(ctx, i, &data, &dtype, &host_memory)) {
    TF_SetStatus(status, TF_OUT_OF_RANGE, "TF_IsRefInput: input index out of range");
    return false;
  }
  TF_SetStatus(status, TF_OK, "");
  return false; /* pluggable has no reference tensors */
}

/* ---- what needs TensorFlow's graph runtime ---------------------------------------------- */

void TF_AssignRefVariable(TF_OpKernelContext* ctx, int input_ref_index, int output_ref_index,
                          int value_index, bool use_locking, bool validate_shape,
                          void (*copyFunc)(TF_OpKernelContext* ctx, TF_Tensor* source,
                                           TF_Tensor* dest),
                          TF_Status* status) {
  (void)ctx, (void)input_ref_index, (void)output_ref_index, (void)value_index;
  (void)use_locking, (void)validate_shape, (void)copyFunc;
  UNIMPLEMENTED(status, "TF_AssignRefVariable (reference variables)");
}

void TF_TemporaryVariable(TF_OpKernelContext* ctx, TF_DataType dtype, const int64_t* dims,
                          int num_dims, TF_StringView* var_name,
                          void (*plugin_allocator)(TF_OpKernelContext*, TF_Tensor*, TF_DataType,
                                                   const int64_t*, int, TF_Status*),
                          TF_Status* tf_status) {
  (void)ctx, (void)dtype, (void)dims, (void)num_dims, (void)var_name, (void)plugin_allocator;
  UNIMPLEMENTED(tf_status, "TF_TemporaryVariable");
}

void TF_DestroyTemporaryVariable(TF_OpKernelContext* ctx, const int index,
                                 TF_StringView* var_name, TF_Status* tf_status) {
  (void)ctx, (void)index, (void)var_name;
  UNIMPLEMENTED(tf_status, "TF_DestroyTemporaryVariable");
}

void TF_OpKernelContext_ForwardRefInputToRefOutput(TF_OpKernelContext* ctx,
                                                   int32_t input_index, int32_t output_index) {
  (void)input_index, (void)output_index;
  pg_context_fail(ctx, TF_UNIMPLEMENTED, PG_UNIMPLEMENTED_FMT,
                  "TF_OpKernelContext_ForwardRefInputToRefOutput (reference variables)");
}

void TF_GetInputByName(TF_OpKernelContext* ctx, const char* inputName, TF_Tensor** tensor,
                       TF_Status* status) {
  (void)ctx, (void)inputName;
  if (tensor != NULL) *tensor = NULL;
  UNIMPLEMENTED(status, "TF_GetInputByName (use TF_GetInput with the input's index)");
}

void TF_OpKernelConstruction_GetAttrTensorShape(TF_OpKernelConstruction* ctx,
                                                const char* attr_name, int64_t* dims,
                                                size_t num_dims, TF_Status* status) {
  (void)ctx, (void)attr_name, (void)dims, (void)num_dims;
  UNIMPLEMENTED(status, "TF_OpKernelConstruction_GetAttrTensorShape (shape attributes)");
}

void TF_AddNVariant(TF_OpKernelContext* ctx,
                    void (*binary_add_func)(TF_OpKernelContext* ctx, TF_Tensor* a, TF_Tensor* b,
                                            TF_Tensor* out),
                    TF_Status* status) {
  (void)ctx, (void)binary_add_func;
  UNIMPLEMENTED(status, "TF_AddNVariant (variant tensors)");
}

void TF_ZerosLikeVariant(TF_OpKernelContext* ctx,
                         void (*zeros_like_func)(TF_OpKernelContext* ctx, TF_Tensor* input,
                                                 TF_Tensor* out),
                         TF_Status* status) {
  (void)ctx, (void)zeros_like_func;
  UNIMPLEMENTED(status, "TF_ZerosLikeVariant (variant tensors)");
}
