/* xpu_kernels_training.c: the XPU's resource-variable kernels, written exactly as a
 * TensorFlow plugin writes them, through tensorflow/c/kernels_experimental.h (reached through
 * the helpers of xpu_kernels_api.c): AssignVariableOp (TF_AssignVariable), AssignAddVariableOp
 * and AssignSubVariableOp (TF_AssignUpdateVariable), and the optimizers
 * ResourceApplyGradientDescent, ResourceApplyMomentum, ResourceApplyKerasMomentum,
 * ResourceApplyAdam, ResourceApplyRMSProp, ResourceApplyCenteredRMSProp and
 * ResourceApplyAdagradV2 (TF_MaybeLockVariableInputMutexesInOrder + TF_GetInputTensorFromVariable, updating the
 * variables in place).
 *
 * Every update is queued on the kernel's stream, so it is ordered with the kernels that read
 * or write the variable before and after it: with an asynchronous device, a host-side update
 * (TensorFlow's own kernels for a device without these) would race with the stream. The
 * resource inputs are host-memory handles the kernels never read; the scalar hyper-parameters
 * (learning rate, momentum, beta powers, ...) live on the device and are read when the work
 * runs. VarHandleOp and ReadVariableOp are not registered: TensorFlow provides them for every
 * device, and so does pluggable.
 */
#include "xpu_kernels.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the callbacks: copy and element-wise update on the stream -------------------------- */

/* The stream work of a copy or an update: dst (op)= src over `count` elements. */
typedef struct VarWork {
  TF_DataType dtype;
  int op; /* -1 copy, 0 add, 1 subtract */
  void* dst;
  const void* src;
  int64_t count;
  size_t bytes;
} VarWork;

#define VAR_UPDATE(NAME, T, ADD, SUB)                                            \
  static void NAME(T* restrict d, const T* restrict s, int64_t n, int op) {      \
    if (op == 0) {                                                               \
      for (int64_t i = 0; i < n; i++) d[i] = ADD(d[i], s[i]);                    \
    } else {                                                                     \
      for (int64_t i = 0; i < n; i++) d[i] = SUB(d[i], s[i]);                    \
    }                                                                            \
  }
#define F_ADD(a, b) ((a) + (b))
#define F_SUB(a, b) ((a) - (b))
#define W32_ADD(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define W32_SUB(a, b) ((int32_t)((uint32_t)(a) - (uint32_t)(b)))
#define W64_ADD(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
#define W64_SUB(a, b) ((int64_t)((uint64_t)(a) - (uint64_t)(b)))
VAR_UPDATE(update_f32, float, F_ADD, F_SUB)
VAR_UPDATE(update_f64, double, F_ADD, F_SUB)
VAR_UPDATE(update_i32, int32_t, W32_ADD, W32_SUB)
VAR_UPDATE(update_i64, int64_t, W64_ADD, W64_SUB)

/* Stream work of the callbacks. */
static TF_Code var_work(void* arg, char* message, size_t size) {
  (void)message;
  (void)size;
  VarWork* w = arg;
  if (w->op < 0) {
    memmove(w->dst, w->src, w->bytes);
    return TF_OK;
  }
  switch (w->dtype) {
    case TF_FLOAT: update_f32(w->dst, w->src, w->count, w->op); break;
    case TF_DOUBLE: update_f64(w->dst, w->src, w->count, w->op); break;
    case TF_INT32: update_i32(w->dst, w->src, w->count, w->op); break;
    default: update_i64(w->dst, w->src, w->count, w->op); break;
  }
  return TF_OK;
}

/* Queues dst (op)= src; reports a failure through the context. */
static void queue_var_work(TF_OpKernelContext* ctx, const char* op_name, TF_Tensor* dst,
                           TF_Tensor* src, int op) {
  TF_Status* status = TF_NewStatus();
  if (status == NULL) return;
  size_t bytes = TF_TensorByteSize(src);
  if (bytes > TF_TensorByteSize(dst)) bytes = TF_TensorByteSize(dst);
  if (bytes > 0) {
    TF_DataType dt = TF_TensorType(dst);
    VarWork w = {.dtype = dt, .op = op, .dst = TF_TensorData(dst), .src = TF_TensorData(src),
                 .count = (int64_t)(bytes / (xpu_dtype_size(dt) ? xpu_dtype_size(dt) : 1)),
                 .bytes = bytes};
    XpuDeviceRange ranges[2] = {{w.dst, bytes, "variable"}, {w.src, bytes, "value"}};
    xpu_enqueue_on_context(ctx, op_name, var_work, &w, sizeof w, ranges, 2, status);
  }
  TF_DeleteStatus(status);
}

/* copyFunc: dest = source, on the stream. */
static void copy_tensor(TF_OpKernelContext* ctx, TF_Tensor* source, TF_Tensor* dest) {
  queue_var_work(ctx, "variable copy", dest, source, -1);
}

/* updateFunc of AssignAddVariableOp / AssignSubVariableOp: tensor op= value, on the stream. */
static void update_tensor(TF_OpKernelContext* ctx, TF_Tensor* tensor, TF_Tensor* value, int op) {
  queue_var_work(ctx, op == 0 ? "AssignAddVariableOp" : "AssignSubVariableOp", tensor, value,
                 op == 0 ? 0 : 1);
}

/* Fails compute() with the status a variable function left. */
static bool fail_with(XpuCompute* c, TF_Status* status) {
  TF_Code code = TF_GetCode(status);
  return xpu_fail(c, code != TF_OK ? code : TF_INTERNAL, "%s", TF_Message(status));
}

/* ---- AssignVariableOp, AssignAddVariableOp, AssignSubVariableOp ------------------------- */

/* The state of the assignment kernels. */
typedef struct AssignKernel {
  XpuKernelBase base; /* dtype: the "dtype" attribute; code: -1 assign, 0 add, 1 subtract */
  bool validate_shape;
} AssignKernel;

static void* assign_create(TF_OpKernelConstruction* k, const char* op, int code) {
  AssignKernel* a = xpu_kernel_new(k, sizeof *a, op, code, "dtype");
  if (a != NULL && code < 0 &&
      !xpu_attr_bool(k, op, "validate_shape", false, &a->validate_shape)) {
    free(a);
    return NULL;
  }
  return a;
}

static void* create_AssignVariableOp(TF_OpKernelConstruction* k) {
  return assign_create(k, "AssignVariableOp", -1);
}
static void* create_AssignAddVariableOp(TF_OpKernelConstruction* k) {
  return assign_create(k, "AssignAddVariableOp", 0);
}
static void* create_AssignSubVariableOp(TF_OpKernelConstruction* k) {
  return assign_create(k, "AssignSubVariableOp", 1);
}

static const char* const kAssignNames[] = {"resource", "value", NULL};

/* compute() of the three: the host's variable functions check the variable (dtype, shape,
 * initialised) and call back copy_tensor / update_tensor, which queue the work. */
static void assign_compute(void* kernel, TF_OpKernelContext* ctx) {
  AssignKernel* k = kernel;
  XpuCompute c;
  if (xpu_compute_begin(&c, ctx, k->base.op, kAssignNames, 1u << 0) &&
      xpu_check_dtype(&c, 1, k->base.dtype)) {
    bool ok = k->base.code < 0
                  ? xpu_var_assign(ctx, 0, 1, k->validate_shape, copy_tensor, c.status)
                  : xpu_var_update(ctx, 0, 1, k->base.code, copy_tensor, update_tensor,
                                   c.status);
    if (!ok) fail_with(&c, c.status);
  }
  xpu_compute_end(&c);
}

/* ---- the optimizers --------------------------------------------------------------------- */

enum {
  APPLY_SGD,
  APPLY_MOMENTUM,
  APPLY_ADAM,
  APPLY_KERAS_MOMENTUM,
  APPLY_RMSPROP,
  APPLY_CENTERED_RMSPROP,
  APPLY_ADAGRAD_V2,
  APPLY_KINDS
};

/* The state of the ResourceApply* kernels. */
typedef struct ApplyKernel {
  XpuKernelBase base; /* code: APPLY_* */
  bool use_locking, use_nesterov, update_slots;
} ApplyKernel;

static void* apply_create(TF_OpKernelConstruction* k, const char* op, int code) {
  ApplyKernel* a = xpu_kernel_new(k, sizeof *a, op, code, "T");
  if (a != NULL && (!xpu_attr_bool(k, op, "use_locking", false, &a->use_locking) ||
                    !xpu_attr_bool(k, op, "use_nesterov", false, &a->use_nesterov) ||
                    !xpu_attr_bool(k, op, "update_slots", true, &a->update_slots))) {
    free(a);
    return NULL;
  }
  return a;
}

static void* create_ResourceApplyGradientDescent(TF_OpKernelConstruction* k) {
  return apply_create(k, "ResourceApplyGradientDescent", APPLY_SGD);
}
static void* create_ResourceApplyMomentum(TF_OpKernelConstruction* k) {
  return apply_create(k, "ResourceApplyMomentum", APPLY_MOMENTUM);
}
static void* create_ResourceApplyAdam(TF_OpKernelConstruction* k) {
  return apply_create(k, "ResourceApplyAdam", APPLY_ADAM);
}
static void* create_ResourceApplyKerasMomentum(TF_OpKernelConstruction* k) {
  return apply_create(k, "ResourceApplyKerasMomentum", APPLY_KERAS_MOMENTUM);
}
static void* create_ResourceApplyRMSProp(TF_OpKernelConstruction* k) {
  return apply_create(k, "ResourceApplyRMSProp", APPLY_RMSPROP);
}
static void* create_ResourceApplyCenteredRMSProp(TF_OpKernelConstruction* k) {
  return apply_create(k, "ResourceApplyCenteredRMSProp", APPLY_CENTERED_RMSPROP);
}
static void* create_ResourceApplyAdagradV2(TF_OpKernelConstruction* k) {
  return apply_create(k, "ResourceApplyAdagradV2", APPLY_ADAGRAD_V2);
}

#define MAX_APPLY_VARS 4
#define MAX_APPLY_SCALARS 6

/* The stream work of an optimizer step: the variables' buffers, the device scalars (read when
 * the work runs) and the gradient. */
typedef struct ApplyWork {
  TF_DataType dtype;
  int code;
  bool nesterov, update_slots;
  void* var[MAX_APPLY_VARS];
  const void* scalar[MAX_APPLY_SCALARS];
  const void* grad;
  int64_t count;
} ApplyWork;

/* Defines the optimizer steps for float type T with square root SQRT, as TensorFlow's
 * training functors compute them, over elements [begin, end). */
#define APPLY(S, T, SQRT)                                                                    \
  static void apply_##S(const ApplyWork* w, int64_t begin, int64_t end) {                    \
    T* restrict var = w->var[0];                                                             \
    const T* restrict g = w->grad;                                                           \
    if (w->code == APPLY_SGD) {                                                              \
      const T alpha = *(const T*)w->scalar[0];                                               \
      for (int64_t i = begin; i < end; i++) var[i] -= alpha * g[i];                          \
    } else if (w->code == APPLY_MOMENTUM) {                                                  \
      T* restrict accum = w->var[1];                                                         \
      const T lr = *(const T*)w->scalar[0], mom = *(const T*)w->scalar[1];                   \
      for (int64_t i = begin; i < end; i++) {                                                \
        accum[i] = accum[i] * mom + g[i];                                                    \
        var[i] -= w->nesterov ? g[i] * lr + accum[i] * mom * lr : lr * accum[i];             \
      }                                                                                      \
    } else if (w->code == APPLY_KERAS_MOMENTUM) {                                            \
      T* restrict accum = w->var[1];                                                         \
      const T lr = *(const T*)w->scalar[0], mom = *(const T*)w->scalar[1];                   \
      for (int64_t i = begin; i < end; i++) {                                                \
        accum[i] = accum[i] * mom - lr * g[i];                                               \
        var[i] += w->nesterov ? accum[i] * mom - lr * g[i] : accum[i];                       \
      }                                                                                      \
    } else if (w->code == APPLY_RMSPROP || w->code == APPLY_CENTERED_RMSPROP) {              \
      const bool centered = w->code == APPLY_CENTERED_RMSPROP;                               \
      T* restrict mg = centered ? w->var[1] : NULL;                                          \
      T* restrict ms = w->var[centered ? 2 : 1];                                             \
      T* restrict mom = w->var[centered ? 3 : 2];                                            \
      const T lr = *(const T*)w->scalar[0], rho = *(const T*)w->scalar[1];                   \
      const T momentum = *(const T*)w->scalar[2], eps = *(const T*)w->scalar[3];             \
      for (int64_t i = begin; i < end; i++) {                                                \
        ms[i] = ms[i] * rho + g[i] * g[i] * ((T)1 - rho);                                    \
        T denominator = ms[i] + eps;                                                         \
        if (centered) {                                                                      \
          mg[i] = mg[i] * rho + g[i] * ((T)1 - rho);                                         \
          denominator = ms[i] - mg[i] * mg[i] + eps;                                         \
        }                                                                                    \
        mom[i] = mom[i] * momentum + lr * g[i] / SQRT(denominator);                          \
        var[i] -= mom[i];                                                                    \
      }                                                                                      \
    } else if (w->code == APPLY_ADAGRAD_V2) {                                                \
      T* restrict accum = w->var[1];                                                         \
      const T lr = *(const T*)w->scalar[0], eps = *(const T*)w->scalar[1];                   \
      for (int64_t i = begin; i < end; i++) {                                                \
        if (w->update_slots) accum[i] += g[i] * g[i];                                        \
        var[i] -= lr * g[i] / (SQRT(accum[i]) + eps);                                        \
      }                                                                                      \
    } else {                                                                                 \
      T* restrict m = w->var[1];                                                             \
      T* restrict v = w->var[2];                                                             \
      const T b1p = *(const T*)w->scalar[0], b2p = *(const T*)w->scalar[1];                  \
      const T lr = *(const T*)w->scalar[2], b1 = *(const T*)w->scalar[3];                    \
      const T b2 = *(const T*)w->scalar[4], eps = *(const T*)w->scalar[5];                   \
      const T lr_t = lr * SQRT((T)1 - b2p) / ((T)1 - b1p);                                   \
      for (int64_t i = begin; i < end; i++) {                                                \
        m[i] = m[i] + (g[i] - m[i]) * ((T)1 - b1);                                           \
        v[i] = v[i] + (g[i] * g[i] - v[i]) * ((T)1 - b2);                                    \
        T step = w->nesterov ? (m[i] * b1 + ((T)1 - b1) * g[i]) * lr_t : m[i] * lr_t;        \
        var[i] -= step / (SQRT(v[i]) + eps);                                                 \
      }                                                                                      \
    }                                                                                        \
  }
APPLY(f32, float, sqrtf)
APPLY(f64, double, sqrt)

static void apply_task(void* ctx, int64_t begin, int64_t end) {
  const ApplyWork* w = ctx;
  if (w->dtype == TF_FLOAT) apply_f32(w, begin, end);
  else apply_f64(w, begin, end);
}

/* Element-wise, so split across the pool's threads as the element-wise kernels are. */
static TF_Code apply_work(void* arg, char* message, size_t size) {
  (void)message;
  (void)size;
  ApplyWork* w = arg;
  xpu_parallel_elements(w->count, apply_task, w);
  return TF_OK;
}

/* Inputs of each optimizer: the variables first, then the others; which are scalars. */
static const char* const kSgdNames[] = {"var", "alpha", "delta", NULL};
static const char* const kMomentumNames[] = {"var", "accum", "lr", "grad", "momentum", NULL};
static const char* const kAdamNames[] = {"var", "m", "v", "beta1_power", "beta2_power", "lr",
                                         "beta1", "beta2", "epsilon", "grad", NULL};
static const char* const kRmsPropNames[] = {"var", "ms",      "mom",     "lr", "rho",
                                            "momentum", "epsilon", "grad", NULL};
static const char* const kCenteredRmsPropNames[] = {"var", "mg",       "ms",      "mom",  "lr",
                                                    "rho", "momentum", "epsilon", "grad", NULL};
static const char* const kAdagradNames[] = {"var", "accum", "lr", "epsilon", "grad", NULL};

/* Per APPLY_* code: the input names, how many are variables, where the gradient is and which
 * inputs are scalars (-1 ends the list). */
static const char* const* const kApplyNames[APPLY_KINDS] = {
    kSgdNames,     kMomentumNames,        kAdamNames,   kMomentumNames,
    kRmsPropNames, kCenteredRmsPropNames, kAdagradNames};
static const int kApplyVars[APPLY_KINDS] = {1, 2, 3, 2, 3, 4, 2};
static const int kApplyGrad[APPLY_KINDS] = {2, 3, 9, 3, 7, 8, 4};
static const int kApplyScalars[APPLY_KINDS][MAX_APPLY_SCALARS + 1] = {
    {1, -1}, {2, 4, -1}, {3, 4, 5, 6, 7, 8, -1}, {2, 4, -1},
    {3, 4, 5, 6, -1}, {4, 5, 6, 7, -1}, {2, 3, -1}};

/* compute() of the optimizers: locks the variables (use_locking), takes their tensors, checks
 * dtypes and shapes, and queues the in-place step. */
static void apply_compute(void* kernel, TF_OpKernelContext* ctx) {
  ApplyKernel* k = kernel;
  static const int kVarInputs[MAX_APPLY_VARS] = {0, 1, 2, 3};
  const char* const* names = kApplyNames[k->base.code];
  int vars = kApplyVars[k->base.code];
  const int* scalars = kApplyScalars[k->base.code];
  int grad = kApplyGrad[k->base.code];
  XpuCompute c;
  TF_Tensor* var[MAX_APPLY_VARS] = {NULL, NULL, NULL, NULL};
  TF_VariableInputLockHolder* holder = NULL;
  /* The resources are handles in host memory (bits 0..vars-1). */
  if (!xpu_compute_begin(&c, ctx, k->base.op, names, (1u << vars) - 1u)) {
    xpu_compute_end(&c);
    return;
  }
  bool ok = xpu_var_lock(ctx, k->use_locking, kVarInputs, (size_t)vars, copy_tensor, &holder,
                         c.status) || fail_with(&c, c.status);
  for (int i = 0; ok && i < vars; i++) {
    ok = xpu_var_tensor(ctx, i, k->use_locking, copy_tensor, &var[i], c.status) ||
         fail_with(&c, c.status);
  }
  for (int i = vars; ok && names[i] != NULL; i++) ok = xpu_check_dtype(&c, i, k->base.dtype);
  char a[128], b[128];
  XpuShape shapes[MAX_APPLY_VARS];
  for (int i = 0; ok && i < vars; i++) {
    TF_DataType dt = TF_TensorType(var[i]);
    shapes[i].rank = TF_NumDims(var[i]);
    shapes[i].count = 1;
    for (int d = 0; d < shapes[i].rank && d < XPU_MAX_RANK; d++) {
      shapes[i].dims[d] = TF_Dim(var[i], d);
      shapes[i].count *= shapes[i].dims[d];
    }
    if (dt != k->base.dtype) {
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "variable '%s' holds %s, but T is %s", names[i],
                    xpu_dtype_name(dt), xpu_dtype_name(k->base.dtype));
    } else if (shapes[i].rank > XPU_MAX_RANK) {
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "variable '%s' has rank %d", names[i],
                    shapes[i].rank);
    }
  }
  for (int i = 0; ok && i < vars; i++) {
    const XpuShape* want = i == 0 ? &c.in_shape[grad] : &shapes[0];
    bool same = shapes[i].rank == want->rank;
    for (int d = 0; same && d < want->rank; d++) same = shapes[i].dims[d] == want->dims[d];
    if (!same) {
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "'%s' %s and '%s' %s must have the same shape",
                    names[i], xpu_shape_str(&shapes[i], a, sizeof a), i == 0 ? "grad" : "var",
                    xpu_shape_str(want, b, sizeof b));
    }
  }
  for (int j = 0; ok && scalars[j] >= 0; j++) {
    int i = scalars[j];
    if (c.in_shape[i].rank != 0) {
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "'%s' must be a scalar, not %s", names[i],
                    xpu_shape_str(&c.in_shape[i], a, sizeof a));
    }
  }
  if (ok) {
    if (shapes[0].count == 0) {
      xpu_compute_enqueue(&c, NULL, NULL, NULL);
    } else {
      XpuDeviceRange ranges[MAX_APPLY_VARS];
      ApplyWork w = {.dtype = k->base.dtype, .code = k->base.code,
                     .nesterov = k->use_nesterov, .update_slots = k->update_slots,
                     .count = shapes[0].count,
                     .grad = xpu_data(c.in[grad])};
      for (int i = 0; i < vars; i++) {
        w.var[i] = TF_TensorData(var[i]);
        ranges[i] = (XpuDeviceRange){w.var[i], TF_TensorByteSize(var[i]), names[i]};
      }
      for (int j = 0; scalars[j] >= 0; j++) w.scalar[j] = xpu_data(c.in[scalars[j]]);
      xpu_compute_enqueue_work_extra(&c, apply_work, &w, sizeof w, ranges, (size_t)vars);
    }
  }
  for (int i = 0; i < vars; i++) {
    if (var[i] != NULL) TF_DeleteTensor(var[i]);
  }
  xpu_var_unlock(holder);
  xpu_compute_end(&c);
}

/* ---- registration ----------------------------------------------------------------------- */

static const TF_DataType kUpdateTypes[] = {TF_FLOAT, TF_DOUBLE, TF_INT32, TF_INT64, 0};

#define DEF(NAME, COMPUTE, ATTR, TYPES) \
  {#NAME, create_##NAME, COMPUTE, ATTR, TYPES, NULL, NULL, {NULL, NULL, NULL}}
static const XpuKernelDef kDefs[] = {
    DEF(AssignVariableOp, assign_compute, "dtype", xpu_types_FIXED),
    DEF(AssignAddVariableOp, assign_compute, "dtype", kUpdateTypes),
    DEF(AssignSubVariableOp, assign_compute, "dtype", kUpdateTypes),
    DEF(ResourceApplyGradientDescent, apply_compute, "T", xpu_types_F),
    DEF(ResourceApplyMomentum, apply_compute, "T", xpu_types_F),
    DEF(ResourceApplyAdam, apply_compute, "T", xpu_types_F),
    DEF(ResourceApplyKerasMomentum, apply_compute, "T", xpu_types_F),
    DEF(ResourceApplyRMSProp, apply_compute, "T", xpu_types_F),
    DEF(ResourceApplyCenteredRMSProp, apply_compute, "T", xpu_types_F),
    DEF(ResourceApplyAdagradV2, apply_compute, "T", xpu_types_F),
};

void xpu_register_variable_kernels(void) {
  xpu_register_defs(kDefs, sizeof kDefs / sizeof kDefs[0]);
}
