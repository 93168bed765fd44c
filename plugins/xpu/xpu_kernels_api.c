/* xpu_kernels_api.c: the XPU kernels' side of TensorFlow's kernel C API, and the only file of
 * the plugin that includes tensorflow/c/kernels.h (README.md, "Build", says why): every other
 * kernel file reaches the kernel API through the helpers here.
 *
 * Holds:
 *   registration        xpu_register_defs: a table of XpuKernelDef into kernel builders
 *                       (TF_NewKernelBuilder, type constraints, host-memory arguments)
 *   create() helpers    xpu_construction_fail, the attribute readers (xpu_attr_*),
 *                       xpu_kernel_new, xpu_kernel_delete
 *   compute() helpers   xpu_compute_begin, xpu_compute_begin_list, xpu_compute_end, xpu_fail;
 *                       inputs (xpu_check_dtype, xpu_host_ints), outputs (xpu_reserve_outputs,
 *                       xpu_alloc_output, xpu_forward_input), and work queued on the kernel's
 *                       stream (xpu_compute_enqueue, _work, _work_extra), which waits for it
 *                       when kernels are launch blocking (g_launch_blocking)
 *   resource variables  the functions of kernels_experimental.h, weak references:
 *                       xpu_host_has_variable_api, xpu_var_*, xpu_context_failure,
 *                       xpu_enqueue_on_context
 *
 * Kernels use nothing but TensorFlow's kernel C API (tensorflow/c/kernels.h, tf_tensor.h):
 * the host provides those functions when it loads the plugin, as TensorFlow would. The
 * kernels themselves live in the other xpu_kernels_*.c files, registered by TF_InitKernel
 * (xpu_kernels_register.c); README.md lists them with their types and semantics.
 */
#include "xpu_kernels.h"

#include "tensorflow/c/kernels.h"
#include "tensorflow/c/kernels_experimental.h" /* resource variables; includes kernels.h */

/* TensorFlow 2.21's packages do not export the functions of kernels_experimental.h from any
 * of their libraries (only pluggable's runtime does), and TensorFlow loads plugins with every
 * symbol bound at once: weak references let the plugin load there; the variable kernels are
 * registered only when the host provides the functions (xpu_host_has_variable_api). */
#pragma weak TF_AssignVariable
#pragma weak TF_AssignUpdateVariable
#pragma weak TF_MaybeLockVariableInputMutexesInOrder
#pragma weak TF_GetInputTensorFromVariable
#pragma weak TF_ReleaseVariableInputLockHolder

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- registration ----------------------------------------------------------------------- */

/* Registers one builder for `def` with the given type constraints. */
static void register_one(const XpuKernelDef* def, TF_DataType t1, TF_DataType t2,
                         TF_Status* status) {
  TF_KernelBuilder* b = TF_NewKernelBuilder(def->op, XPU_DEVICE_TYPE, def->create, def->compute,
                                            xpu_kernel_delete);
  if (b == NULL) return;
  char name[128];
  if (def->type_attr2 != NULL) {
    snprintf(name, sizeof name, "XPU:%s:%s:%s", def->op, xpu_dtype_name(t1), xpu_dtype_name(t2));
  } else if (def->type_attr != NULL) {
    snprintf(name, sizeof name, "XPU:%s:%s", def->op, xpu_dtype_name(t1));
  } else {
    snprintf(name, sizeof name, "XPU:%s", def->op);
  }
  TF_SetStatus(status, TF_OK, "");
  if (def->type_attr != NULL) TF_KernelBuilder_TypeConstraint(b, def->type_attr, t1, status);
  if (TF_GetCode(status) == TF_OK && def->type_attr2 != NULL) {
    TF_KernelBuilder_TypeConstraint(b, def->type_attr2, t2, status);
  }
  if (TF_GetCode(status) != TF_OK) {
    TF_DeleteKernelBuilder(b);
    return;
  }
  for (int i = 0; i < XPU_MAX_HOST_MEMORY_ARGS && def->host_memory[i] != NULL; i++) {
    TF_KernelBuilder_HostMemory(b, def->host_memory[i]);
  }
  /* TF_InitKernel cannot report anything: a refused registration leaves the op without an
   * XPU kernel, which the host reports when the op is used. */
  TF_RegisterKernelBuilder(name, b, status);
}

void xpu_register_defs(const XpuKernelDef* defs, size_t count) {
  TF_Status* status = TF_NewStatus();
  if (status == NULL) return;
  for (size_t d = 0; d < count; d++) {
    const XpuKernelDef* def = &defs[d];
    if (def->type_attr == NULL) {
      register_one(def, 0, 0, status);
      continue;
    }
    for (const TF_DataType* t1 = def->types; *t1 != 0; t1++) {
      if (def->type_attr2 == NULL) {
        register_one(def, *t1, 0, status);
        continue;
      }
      for (const TF_DataType* t2 = def->types2; *t2 != 0; t2++) register_one(def, *t1, *t2, status);
    }
  }
  TF_DeleteStatus(status);
}

/* ---- create() helpers ------------------------------------------------------------------- */

void* xpu_construction_fail(TF_OpKernelConstruction* k, const char* fmt, ...) {
  char message[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof message, fmt, args);
  va_end(args);
  TF_Status* status = TF_NewStatus();
  if (status != NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, message);
    TF_OpKernelConstruction_Failure(k, status);
    TF_DeleteStatus(status);
  }
  return NULL;
}

/* True when the node has attribute `name` (false too when the host cannot tell). */
static bool has_attr(TF_OpKernelConstruction* k, const char* name, TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
  bool has = TF_OpKernelConstruction_HasAttr(k, name, status);
  return has && TF_GetCode(status) == TF_OK;
}

bool xpu_attr_type(TF_OpKernelConstruction* k, const char* op, const char* name,
                   TF_DataType* dt) {
  TF_Status* status = TF_NewStatus();
  if (status == NULL) return xpu_construction_fail(k, "%s: out of host memory", op) != NULL;
  TF_OpKernelConstruction_GetAttrType(k, name, dt, status);
  bool ok = TF_GetCode(status) == TF_OK;
  if (!ok) xpu_construction_fail(k, "%s: attribute '%s': %s", op, name, TF_Message(status));
  TF_DeleteStatus(status);
  return ok;
}

bool xpu_attr_type_or(TF_OpKernelConstruction* k, const char* op, const char* name,
                      TF_DataType dflt, TF_DataType* dt) {
  TF_Status* status = TF_NewStatus();
  if (status == NULL) return xpu_construction_fail(k, "%s: out of host memory", op) != NULL;
  bool has = has_attr(k, name, status);
  TF_DeleteStatus(status);
  *dt = dflt;
  return !has || xpu_attr_type(k, op, name, dt);
}

bool xpu_attr_bool(TF_OpKernelConstruction* k, const char* op, const char* name, bool dflt,
                   bool* out) {
  TF_Status* status = TF_NewStatus();
  if (status == NULL) return xpu_construction_fail(k, "%s: out of host memory", op) != NULL;
  bool ok = true;
  *out = dflt;
  if (has_attr(k, name, status)) {
    TF_Bool v = 0;
    TF_OpKernelConstruction_GetAttrBool(k, name, &v, status);
    ok = TF_GetCode(status) == TF_OK;
    if (ok) *out = v != 0;
    else xpu_construction_fail(k, "%s: attribute '%s': %s", op, name, TF_Message(status));
  }
  TF_DeleteStatus(status);
  return ok;
}

bool xpu_attr_int(TF_OpKernelConstruction* k, const char* op, const char* name, int64_t dflt,
                  int64_t* out) {
  TF_Status* status = TF_NewStatus();
  if (status == NULL) return xpu_construction_fail(k, "%s: out of host memory", op) != NULL;
  bool ok = true;
  *out = dflt;
  if (has_attr(k, name, status)) {
    int64_t v = 0;
    TF_OpKernelConstruction_GetAttrInt64(k, name, &v, status);
    ok = TF_GetCode(status) == TF_OK;
    if (ok) *out = v;
    else xpu_construction_fail(k, "%s: attribute '%s': %s", op, name, TF_Message(status));
  }
  TF_DeleteStatus(status);
  return ok;
}

bool xpu_attr_string(TF_OpKernelConstruction* k, const char* op, const char* name,
                     const char* dflt, char* buf, size_t size) {
  TF_Status* status = TF_NewStatus();
  if (status == NULL) return xpu_construction_fail(k, "%s: out of host memory", op) != NULL;
  bool ok = true;
  snprintf(buf, size, "%s", dflt);
  if (has_attr(k, name, status)) {
    int32_t list_size = 0, total_size = 0;
    TF_OpKernelConstruction_GetAttrSize(k, name, &list_size, &total_size, status);
    ok = TF_GetCode(status) == TF_OK;
    if (ok && (total_size < 0 || (size_t)total_size >= size)) {
      xpu_construction_fail(k, "%s: attribute '%s' is too long (%d bytes)", op, name,
                            (int)total_size);
      TF_DeleteStatus(status);
      return false;
    }
    if (ok) TF_OpKernelConstruction_GetAttrString(k, name, buf, (size_t)total_size, status);
    ok = ok && TF_GetCode(status) == TF_OK;
    if (ok) buf[total_size] = '\0';
    else xpu_construction_fail(k, "%s: attribute '%s': %s", op, name, TF_Message(status));
  }
  TF_DeleteStatus(status);
  return ok;
}

bool xpu_attr_ints(TF_OpKernelConstruction* k, const char* op, const char* name, int64_t* vals,
                   int max, int* n) {
  TF_Status* status = TF_NewStatus();
  if (status == NULL) return xpu_construction_fail(k, "%s: out of host memory", op) != NULL;
  bool ok = true;
  *n = -1;
  if (has_attr(k, name, status)) {
    int32_t list_size = 0, total_size = 0;
    TF_OpKernelConstruction_GetAttrSize(k, name, &list_size, &total_size, status);
    ok = TF_GetCode(status) == TF_OK;
    if (ok && (list_size < 0 || list_size > max)) {
      xpu_construction_fail(k, "%s: attribute '%s' must be a list of at most %d ints", op, name,
                            max);
      TF_DeleteStatus(status);
      return false;
    }
    if (ok && list_size > 0) TF_OpKernelConstruction_GetAttrInt64List(k, name, vals, max, status);
    ok = ok && TF_GetCode(status) == TF_OK;
    if (ok) *n = list_size;
    else xpu_construction_fail(k, "%s: attribute '%s': %s", op, name, TF_Message(status));
  }
  TF_DeleteStatus(status);
  return ok;
}

void* xpu_kernel_new(TF_OpKernelConstruction* k, size_t size, const char* op, int code,
                     const char* type_attr) {
  XpuKernelBase* base = calloc(1, size);
  if (base == NULL) return xpu_construction_fail(k, "%s: out of host memory", op);
  base->op = op;
  base->code = code;
  if (type_attr != NULL && !xpu_attr_type(k, op, type_attr, &base->dtype)) {
    free(base);
    return NULL;
  }
  return base;
}

void xpu_kernel_delete(void* kernel) { free(kernel); }

/* ---- compute() helpers ------------------------------------------------------------------ */

bool xpu_fail(XpuCompute* c, TF_Code code, const char* fmt, ...) {
  char reason[896];
  va_list args;
  va_start(args, fmt);
  vsnprintf(reason, sizeof reason, fmt, args);
  va_end(args);
  if (!c->failed && c->status != NULL) {
    char message[1024];
    snprintf(message, sizeof message, "%s: %s", c->op, reason);
    TF_SetStatus(c->status, code, message);
    TF_OpKernelContext_Failure(c->ctx, c->status);
  }
  c->failed = true;
  return false;
}

/* The name of input i for messages. */
static const char* input_name(const XpuCompute* c, int i) {
  if (i < c->list_count) return c->list_name;
  int j = i - c->list_count;
  return c->in_name != NULL && i < c->input_count ? c->in_name[j] : "input";
}

/* Reads a tensor's shape into *s; false when its rank is beyond XPU_MAX_RANK. */
static bool read_shape(const TF_Tensor* t, XpuShape* s) {
  int rank = TF_NumDims(t);
  if (rank < 0 || rank > XPU_MAX_RANK) return false;
  s->rank = rank;
  s->count = 1;
  for (int d = 0; d < rank; d++) {
    s->dims[d] = TF_Dim(t, d);
    s->count *= s->dims[d];
  }
  return true;
}

/* Clears *c and counts the `kernel` fault kind; false (after failing) when compute() must
 * stop. */
static bool compute_open(XpuCompute* c, TF_OpKernelContext* ctx, const char* op) {
  /* Field by field: the inline shapes are large (XPU_MAX_RANK dims each) and are written by
   * fetch_inputs before they are read, so clearing the whole struct would cost more than a
   * small kernel's work. */
  c->input_count = c->list_count = c->output_count = 0;
  c->in_name = NULL;
  c->list_name = NULL;
  c->failed = false;
  memset(c->in_inline, 0, sizeof c->in_inline);
  memset(c->in_host_inline, 0, sizeof c->in_host_inline);
  memset(c->out_inline, 0, sizeof c->out_inline);
  for (int i = 0; i < XPU_INLINE_KERNEL_INPUTS; i++) {
    c->in_shape_inline[i].rank = 0;
    c->in_shape_inline[i].count = 0;
  }
  c->ctx = ctx;
  c->op = op;
  c->in = c->in_inline;
  c->in_shape = c->in_shape_inline;
  c->in_host = c->in_host_inline;
  c->out = c->out_inline;
  c->output_capacity = XPU_INLINE_KERNEL_OUTPUTS;
  c->status = TF_NewStatus();
  if (c->status == NULL) {
    c->failed = true;
    return false;
  }
  uint64_t call = xpu_fault_hit(XPU_FAULT_KERNEL);
  if (call != 0) {
    xpu_fault_status(c->status, XPU_FAULT_KERNEL, call, op);
    TF_OpKernelContext_Failure(ctx, c->status);
    c->failed = true;
    return false;
  }
  return true;
}

/* Fetches `count` inputs (host_mask: which are in host memory) and their shapes. */
static bool fetch_inputs(XpuCompute* c, int count, const bool* host) {
  if (count > XPU_INLINE_KERNEL_INPUTS) {
    c->in = calloc((size_t)count, sizeof *c->in);
    c->in_shape = calloc((size_t)count, sizeof *c->in_shape);
    c->in_host = calloc((size_t)count, sizeof *c->in_host);
    if (c->in == NULL || c->in_shape == NULL || c->in_host == NULL) {
      return xpu_fail(c, TF_RESOURCE_EXHAUSTED, "out of host memory for %d inputs", count);
    }
  }
  for (int i = 0; i < count; i++) {
    TF_GetInput(c->ctx, i, &c->in[i], c->status);
    if (TF_GetCode(c->status) != TF_OK || c->in[i] == NULL) {
      c->in[i] = NULL;
      return xpu_fail(c, TF_GetCode(c->status) != TF_OK ? TF_GetCode(c->status) : TF_INTERNAL,
                      "cannot read input %d ('%s'): %s", i, input_name(c, i),
                      TF_Message(c->status));
    }
    c->input_count = i + 1;
    c->in_host[i] = host[i];
    if (!read_shape(c->in[i], &c->in_shape[i])) {
      return xpu_fail(c, TF_INVALID_ARGUMENT, "'%s' has rank %d; XPU kernels support up to %d",
                      input_name(c, i), TF_NumDims(c->in[i]), XPU_MAX_RANK);
    }
    if (c->in_shape[i].count > 0 && TF_TensorData(c->in[i]) == NULL) {
      return xpu_fail(c, TF_INVALID_ARGUMENT, "'%s' has no data", input_name(c, i));
    }
  }
  return true;
}

bool xpu_compute_begin(XpuCompute* c, TF_OpKernelContext* ctx, const char* op,
                       const char* const* names, unsigned host_mask) {
  if (!compute_open(c, ctx, op)) return false;
  c->in_name = names;
  int want = 0;
  while (names != NULL && names[want] != NULL) want++;
  int have = TF_NumInputs(ctx);
  if (have != want || want > XPU_MAX_NAMED_INPUTS) {
    return xpu_fail(c, TF_INVALID_ARGUMENT, "expected %d inputs, got %d", want, have);
  }
  bool host[XPU_MAX_NAMED_INPUTS];
  for (int i = 0; i < want; i++) host[i] = (host_mask >> i) & 1u;
  return fetch_inputs(c, want, host);
}

bool xpu_compute_begin_list(XpuCompute* c, TF_OpKernelContext* ctx, const char* op,
                            const char* list_name, int min_list, const char* const* tail,
                            unsigned tail_host_mask) {
  if (!compute_open(c, ctx, op)) return false;
  int tail_count = 0;
  while (tail != NULL && tail[tail_count] != NULL) tail_count++;
  int have = TF_NumInputs(ctx);
  int n = have - tail_count;
  c->in_name = tail;
  c->list_name = list_name;
  if (n < min_list) {
    return xpu_fail(c, TF_INVALID_ARGUMENT, "expected at least %d '%s' tensors and %d more "
                    "inputs, got %d inputs in all", min_list, list_name, tail_count, have);
  }
  if (have > XPU_MAX_KERNEL_ARGS) {
    return xpu_fail(c, TF_INVALID_ARGUMENT, "%d inputs; the XPU kernels take at most %d",
                    have, XPU_MAX_KERNEL_ARGS);
  }
  c->list_count = n;
  bool* host = calloc((size_t)have, sizeof *host);
  if (host == NULL) return xpu_fail(c, TF_RESOURCE_EXHAUSTED, "out of host memory");
  for (int i = 0; i < tail_count; i++) host[n + i] = (tail_host_mask >> i) & 1u;
  bool ok = fetch_inputs(c, have, host);
  free(host);
  return ok;
}

bool xpu_reserve_outputs(XpuCompute* c, int count) {
  if (count <= c->output_capacity) return true;
  if (count > XPU_MAX_KERNEL_ARGS) {
    return xpu_fail(c, TF_INVALID_ARGUMENT, "%d outputs; the XPU kernels make at most %d",
                    count, XPU_MAX_KERNEL_ARGS);
  }
  TF_Tensor** out = calloc((size_t)count, sizeof *out);
  if (out == NULL) return xpu_fail(c, TF_RESOURCE_EXHAUSTED, "out of host memory");
  memcpy(out, c->out, (size_t)c->output_capacity * sizeof *out);
  if (c->out != c->out_inline) free(c->out);
  c->out = out;
  c->output_capacity = count;
  return true;
}

void xpu_compute_end(XpuCompute* c) {
  for (int i = 0; c->in != NULL && i < c->input_count; i++) {
    if (c->in[i] != NULL) TF_DeleteTensor(c->in[i]);
  }
  for (int i = 0; c->out != NULL && i < c->output_count; i++) {
    if (c->out[i] != NULL) TF_DeleteTensor(c->out[i]);
  }
  if (c->in != c->in_inline) free(c->in);
  if (c->in_shape != c->in_shape_inline) free(c->in_shape);
  if (c->in_host != c->in_host_inline) free(c->in_host);
  if (c->out != c->out_inline) free(c->out);
  if (c->status != NULL) TF_DeleteStatus(c->status);
  /* A second end finds nothing to release. */
  c->in = c->out = NULL;
  c->in_shape = NULL;
  c->in_host = NULL;
  c->status = NULL;
  c->input_count = c->output_count = 0;
}

bool xpu_check_dtype(XpuCompute* c, int i, TF_DataType want) {
  TF_DataType got = TF_TensorType(c->in[i]);
  if (got == want) return true;
  return xpu_fail(c, TF_INVALID_ARGUMENT, "'%s' has type %s, expected %s", input_name(c, i),
                  xpu_dtype_name(got), xpu_dtype_name(want));
}

bool xpu_alloc_output(XpuCompute* c, int i, TF_DataType dt, const XpuShape* shape) {
  if (!xpu_reserve_outputs(c, i + 1)) return false;
  size_t bytes = (size_t)shape->count * xpu_dtype_size(dt);
  TF_SetStatus(c->status, TF_OK, "");
  TF_Tensor* t = TF_AllocateOutput(c->ctx, i, dt, shape->dims, shape->rank, bytes, c->status);
  if (TF_GetCode(c->status) != TF_OK || t == NULL) {
    if (t != NULL) TF_DeleteTensor(t);
    return xpu_fail(c, TF_GetCode(c->status) != TF_OK ? TF_GetCode(c->status)
                                                        : TF_RESOURCE_EXHAUSTED,
                    "cannot allocate output %d (%zu bytes): %s", i, bytes, TF_Message(c->status));
  }
  c->out[i] = t;
  if (i >= c->output_count) c->output_count = i + 1;
  if (bytes > 0 && TF_TensorData(t) == NULL) {
    return xpu_fail(c, TF_INTERNAL, "output %d has no data", i);
  }
  return true;
}

bool xpu_alloc_output_in_place(XpuCompute* c, int i, TF_DataType dt, const XpuShape* shape,
                               const int* candidates, int candidate_count) {
  if (candidate_count == 0) return xpu_alloc_output(c, i, dt, shape);
  if (!xpu_reserve_outputs(c, i + 1)) return false;
  size_t bytes = (size_t)shape->count * xpu_dtype_size(dt);
  TF_SetStatus(c->status, TF_OK, "");
  int forwarded = -1;
  TF_Tensor* t = TF_ForwardInputOrAllocateOutput(c->ctx, candidates, candidate_count, i,
                                                 shape->dims, shape->rank, &forwarded,
                                                 c->status);
  if (TF_GetCode(c->status) != TF_OK || t == NULL) {
    if (t != NULL) TF_DeleteTensor(t);
    return xpu_fail(c, TF_GetCode(c->status) != TF_OK ? TF_GetCode(c->status)
                                                        : TF_RESOURCE_EXHAUSTED,
                    "cannot allocate or forward output %d (%zu bytes): %s", i, bytes,
                    TF_Message(c->status));
  }
  c->out[i] = t;
  if (i >= c->output_count) c->output_count = i + 1;
  if (bytes > 0 && TF_TensorData(t) == NULL) {
    return xpu_fail(c, TF_INTERNAL, "output %d has no data", i);
  }
  return true;
}

bool xpu_forward_input(XpuCompute* c, int input, int output) {
  TF_SetStatus(c->status, TF_OK, "");
  TF_SetOutput(c->ctx, output, c->in[input], c->status);
  if (TF_GetCode(c->status) == TF_OK) return true;
  return xpu_fail(c, TF_GetCode(c->status), "cannot set output %d: %s", output,
                  TF_Message(c->status));
}

bool xpu_host_ints(XpuCompute* c, int i, int64_t* vals, int max, int* n) {
  const TF_Tensor* t = c->in[i];
  TF_DataType dt = TF_TensorType(t);
  const XpuShape* s = &c->in_shape[i];
  if (dt != TF_INT32 && dt != TF_INT64) {
    return xpu_fail(c, TF_INVALID_ARGUMENT, "'%s' must be int32 or int64, not %s",
                    input_name(c, i), xpu_dtype_name(dt));
  }
  if (s->rank > 1) {
    return xpu_fail(c, TF_INVALID_ARGUMENT, "'%s' must be a scalar or a vector, not rank %d",
                    input_name(c, i), s->rank);
  }
  if (s->count > max) {
    return xpu_fail(c, TF_INVALID_ARGUMENT, "'%s' has %" PRId64 " elements; at most %d allowed",
                    input_name(c, i), s->count, max);
  }
  const void* data = TF_TensorData(t);
  for (int64_t k = 0; k < s->count; k++) {
    vals[k] = dt == TF_INT32 ? ((const int32_t*)data)[k] : ((const int64_t*)data)[k];
  }
  *n = (int)s->count;
  return true;
}

/* g_launch_blocking, or what a test set with XPU_SetLaunchBlocking. */
static bool launch_blocking(void) { return g_launch_blocking || xpu_launch_blocking_forced(); }

/* xpu_compute_enqueue (a heap `arg`), xpu_compute_enqueue_work (a `work` struct copied) and
 * xpu_compute_enqueue_work_extra (the same, with device ranges besides the kernel's inputs
 * and outputs). */
static bool compute_enqueue(XpuCompute* c, XpuStreamFn fn, void* arg, void (*free_arg)(void*),
                            const void* work, size_t work_size, const XpuDeviceRange* extra,
                            size_t extra_count) {
  TF_SetStatus(c->status, TF_OK, "");
  SP_Stream stream = TF_GetStream(c->ctx, c->status);
  if (TF_GetCode(c->status) != TF_OK || stream == NULL) {
    if (arg != NULL) {
      if (free_arg != NULL) free_arg(arg);
      else free(arg);
    }
    return xpu_fail(c, TF_INVALID_ARGUMENT, "no XPU stream for the kernel: %s",
                    TF_GetCode(c->status) != TF_OK ? TF_Message(c->status)
                                                   : "TF_GetStream returned NULL");
  }
  static const char* const kOutputRoles[] = {"output 0", "output 1", "output 2", "output"};
  XpuDeviceRange inline_ranges[XPU_INLINE_KERNEL_INPUTS + XPU_INLINE_KERNEL_OUTPUTS];
  XpuDeviceRange* ranges = inline_ranges;
  size_t capacity = (size_t)c->input_count + (size_t)c->output_count + extra_count;
  if (capacity > sizeof inline_ranges / sizeof inline_ranges[0]) {
    ranges = malloc(capacity * sizeof *ranges);
    if (ranges == NULL) {
      if (arg != NULL) {
        if (free_arg != NULL) free_arg(arg);
        else free(arg);
      }
      return xpu_fail(c, TF_RESOURCE_EXHAUSTED, "out of host memory");
    }
  }
  size_t n = 0;
  for (int i = 0; i < c->input_count; i++) {
    if (c->in_host[i]) continue;
    ranges[n++] = (XpuDeviceRange){TF_TensorData(c->in[i]), TF_TensorByteSize(c->in[i]),
                                   input_name(c, i)};
  }
  for (int i = 0; i < c->output_count; i++) {
    if (c->out[i] == NULL) continue;
    ranges[n++] = (XpuDeviceRange){TF_TensorData(c->out[i]), TF_TensorByteSize(c->out[i]),
                                   kOutputRoles[i < 3 ? i : 3]};
  }
  for (size_t i = 0; i < extra_count; i++) ranges[n++] = extra[i];
  /* The node name only matters to a running profiling session. */
  TF_StringView node = {NULL, 0};
  uint64_t launch = 0;
  if (xpu_prof_active()) {
    node = TF_GetOpKernelName(c->ctx);
    launch = xpu_prof_correlation_id(c->ctx);
  }
  bool ok = work != NULL
                ? xpu_stream_enqueue_work(stream, c->op, node.data, node.len, launch, fn, work,
                                          work_size, NULL, ranges, n, launch_blocking(),
                                          c->status)
                : xpu_stream_enqueue_fn(stream, c->op, node.data, node.len, launch, fn, arg,
                                        free_arg, ranges, n, launch_blocking(), c->status);
  if (ranges != inline_ranges) free(ranges);
  if (!ok) {
    c->failed = true;
    TF_OpKernelContext_Failure(c->ctx, c->status);
    return false;
  }
  return true;
}

bool xpu_compute_enqueue(XpuCompute* c, XpuStreamFn fn, void* arg, void (*free_arg)(void*)) {
  return compute_enqueue(c, fn, arg, free_arg, NULL, 0, NULL, 0);
}

bool xpu_compute_enqueue_work_extra(XpuCompute* c, XpuStreamFn fn, const void* work,
                                    size_t size, const XpuDeviceRange* extra,
                                    size_t extra_count) {
  return compute_enqueue(c, fn, NULL, NULL, work, size, extra, extra_count);
}

bool xpu_compute_enqueue_work(XpuCompute* c, XpuStreamFn fn, const void* work, size_t size) {
  return compute_enqueue(c, fn, NULL, NULL, work, size, NULL, 0);
}

/* ---- resource variables (tensorflow/c/kernels_experimental.h) --------------------------- */

bool xpu_host_has_variable_api(void) {
  return TF_AssignVariable != NULL && TF_AssignUpdateVariable != NULL &&
         TF_MaybeLockVariableInputMutexesInOrder != NULL &&
         TF_GetInputTensorFromVariable != NULL && TF_ReleaseVariableInputLockHolder != NULL;
}

bool xpu_var_assign(TF_OpKernelContext* ctx, int input, int value, bool validate_shape,
                    XpuVarCopyFn copy, TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
  TF_AssignVariable(ctx, input, value, validate_shape, copy, status);
  return TF_GetCode(status) == TF_OK;
}

bool xpu_var_update(TF_OpKernelContext* ctx, int input, int value, int op, XpuVarCopyFn copy,
                    XpuVarUpdateFn update, TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
  TF_AssignUpdateVariable(ctx, input, value, op, 0, copy, update, status);
  return TF_GetCode(status) == TF_OK;
}

bool xpu_var_lock(TF_OpKernelContext* ctx, bool do_lock, const int* inputs, size_t count,
                  XpuVarCopyFn copy, TF_VariableInputLockHolder** holder, TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
  *holder = NULL;
  TF_MaybeLockVariableInputMutexesInOrder(ctx, do_lock, false, inputs, count, copy, holder,
                                          status);
  return TF_GetCode(status) == TF_OK;
}

void xpu_var_unlock(TF_VariableInputLockHolder* holder) {
  if (holder != NULL) TF_ReleaseVariableInputLockHolder(holder);
}

bool xpu_var_tensor(TF_OpKernelContext* ctx, int input, bool lock_held, XpuVarCopyFn copy,
                    TF_Tensor** out, TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
  *out = NULL;
  TF_GetInputTensorFromVariable(ctx, input, lock_held, false, false, copy, out, status);
  if (TF_GetCode(status) == TF_OK && *out == NULL) {
    TF_SetStatus(status, TF_INTERNAL, "TF_GetInputTensorFromVariable gave no tensor");
  }
  return TF_GetCode(status) == TF_OK;
}

void xpu_context_failure(TF_OpKernelContext* ctx, TF_Status* status) {
  TF_OpKernelContext_Failure(ctx, status);
}

bool xpu_enqueue_on_context(TF_OpKernelContext* ctx, const char* op, XpuStreamFn fn,
                            const void* work, size_t size, const XpuDeviceRange* ranges,
                            size_t count, TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
  SP_Stream stream = TF_GetStream(ctx, status);
  bool ok = false;
  if (TF_GetCode(status) != TF_OK || stream == NULL) {
    char message[512];
    snprintf(message, sizeof message, "%s: no XPU stream for the kernel: %s", op,
             TF_GetCode(status) != TF_OK ? TF_Message(status) : "TF_GetStream returned NULL");
    TF_SetStatus(status, TF_INVALID_ARGUMENT, message);
  } else {
    /* As a kernel's own work: the node and the host's launch, for a profiling session. */
    TF_StringView node = {NULL, 0};
    uint64_t launch = 0;
    if (xpu_prof_active()) {
      node = TF_GetOpKernelName(ctx);
      launch = xpu_prof_correlation_id(ctx);
    }
    ok = xpu_stream_enqueue_work(stream, op, node.data, node.len, launch, fn, work, size, NULL,
                                 ranges, count, launch_blocking(), status);
  }
  if (!ok) TF_OpKernelContext_Failure(ctx, status);
  return ok;
}
