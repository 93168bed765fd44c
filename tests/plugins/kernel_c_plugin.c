/* Kernels in C for the kernel API tests, on the device of tests/plugins/test_plugin.c.
 *
 * The platform is test_plugin.c's (included below: build with PLATFORM_NAME and DEVICE_TYPE,
 * e.g. -DPLATFORM_NAME=KC_DEV -DDEVICE_TYPE=KC). Its device memory is malloc'd host memory,
 * so these kernels compute on the host, in compute_func. TF_InitKernel registers, for
 * DEVICE_TYPE:
 *
 *   Unimplemented    attr which: string. Allocates its output, then calls the unimplemented
 *                    function `which` names (config_proto, function_library, graph_def_version,
 *                    rendezvous, input_range, deferred_ops, requested_input, container)
 *                    and reports failure: the run fails with TF_UNIMPLEMENTED.
 *   UnimplementedAttr  create_func calls TF_OpKernelConstruction_GetAttrTensor (attr
 *                    which: string picks GetAttrTensor, GetAttrFunction or GetNodeDef).
 *   Prio             two kernels, priority 1 (fills 1.0) and 5 (fills 5.0).
 *   Typed            T in {float, double} (two TypeConstraint calls), U in {int32}: a copy.
 *   Labelled         label "special": a copy.
 *   HostArgs         inputs x (device), shape (host: HostMemory("shape")); output count
 *                    (host: HostMemory("count")), int64[4] = {is host: input 0, input 1,
 *                    output 0; sum of shape's int64 values}.
 *   Fails            allocates its output, then TF_OpKernelContext_Failure(FAILED_PRECONDITION).
 *   Forgets          two outputs; sets only output 0.
 *   UsesTemp         y = x + 1 through a device temporary and a host one.
 *   Forward          TF_ForwardInputOrAllocateOutput(candidates {0}): y = 2 x.
 *   Identity         TF_SetOutput(0, input 0): the output aliases the input.
 *   BitcastToInt     output (int32) = input (float) bitcast: aliases the input.
 *   Cached           keeps a device tensor of 7.0s between runs and sets it as the output.
 *   Wraps            TF_NewTensor over its own malloc'd memory (3.0s), set as the output.
 *   BadAlloc         attr mode: int; TF_AllocateOutput with a wrong len (0), a wrong dtype
 *                    (1), a negative dimension (2), an output index out of range (3).
 *   Async            TF_NewAsyncKernelBuilder.
 *   Attrs            create_func reads attributes of every kind into a report.
 *   Introspect       two inputs; reports what the context says into a report.
 *
 *   Neg              with WITH_NEG only: TensorFlow's Neg for T = float (y = -x), a kernel of
 *                    an op that pluggable's library defines, for the conformance suite;
 *                    BUG_NEG makes it forget the sign.
 *   Shape            with WITH_SHAPE only: TensorFlow's Shape for out_type int32 and int64,
 *                    the output registered in host memory (HostMemory("output"), as
 *                    TensorFlow's own) and written during compute(); SHAPE_ON_DEVICE
 *                    registers it without, as a kernel TensorFlow refuses.
 *                    KC_ShapeOutputOnHost() says whether the last run's output was in host
 *                    memory (TF_IsHostMemoryOutput; -1 before a run).
 *                    BUG_SHAPE_LENGTH makes its output one element too long (a zero).
 *   Relu, ReluGrad   with WITH_RELU only: TensorFlow's Relu and its gradient kernel for
 *                    T = float, for the conformance suite's gradient tier; BUG_RELU_GRAD
 *                    makes ReluGrad pass half the gradient where the features are negative
 *                    (a leaky slope the forward kernel does not have).
 *
 * Variants for registration errors (each adds to the above):
 *   REJECTED         also registers "ForNope" for device type "NOPE" and "ForCpu" for "CPU".
 *   DUPLICATE        registers "Dup" twice, identically (both accepted, as TensorFlow does).
 *   MALFORMED        a builder without compute_func, a label set twice, a serialized
 *                    KernelDef, a NULL builder, an invalid type constraint.
 *   NO_KERNELS       TF_InitKernel registers nothing at all.
 */
#include "test_plugin.c"

#include <stdarg.h>
#include <stdio.h>

#include "tensorflow/c/kernels.h"
#include "tensorflow/c/tf_tensor.h"

#define KERNEL_DEVICE STRINGIFY(DEVICE_TYPE)

static char report[2048];     /* Attrs and Introspect write here */
static int64_t deallocations; /* Wraps' deallocator calls */
static int64_t kernels_alive;
static int registration_codes[8];
static int num_registration_codes;

const char* kc_report(void) { return report; }
int64_t kc_deallocations(void) { return deallocations; }
int64_t kc_kernels_alive(void) { return kernels_alive; }
int kc_registration_code(int i) { return i < num_registration_codes ? registration_codes[i] : -1; }

#define FAIL_IF(ctx, status)                  \
  if (TF_GetCode(status) != TF_OK) {          \
    TF_OpKernelContext_Failure(ctx, status);  \
    TF_DeleteStatus(status);                  \
    return;                                   \
  }

/* Output 0 with the shape and expected type of input 0; NULL after reporting failure. */
static TF_Tensor* output_like_input(TF_OpKernelContext* ctx, TF_Tensor** input, TF_Status* s) {
  TF_GetInput(ctx, 0, input, s);
  if (TF_GetCode(s) != TF_OK) return NULL;
  int64_t dims[8];
  int n = TF_NumDims(*input);
  for (int i = 0; i < n && i < 8; i++) dims[i] = TF_Dim(*input, i);
  TF_DataType type = TF_ExpectedOutputDataType(ctx, 0);
  return TF_AllocateOutput(ctx, 0, type, dims, n,
                           (size_t)TF_TensorElementCount(*input) * TF_DataTypeSize(type), s);
}

/* ---- per-kernel state: a string attribute ------------------------------------------------ */
typedef struct WhichKernel {
  char which[64];
  TF_Tensor* cached; /* Cached */
  int64_t mode;      /* BadAlloc */
} WhichKernel;

static void* create_which(TF_OpKernelConstruction* ctx) {
  WhichKernel* k = calloc(1, sizeof *k);
  kernels_alive++;
  TF_Status* s = TF_NewStatus();
  if (TF_OpKernelConstruction_HasAttr(ctx, "which", s)) {
    int32_t list_size, total_size;
    TF_OpKernelConstruction_GetAttrSize(ctx, "which", &list_size, &total_size, s);
    if (TF_GetCode(s) == TF_OK && total_size >= 0 && total_size < 64) {
      TF_OpKernelConstruction_GetAttrString(ctx, "which", k->which, (size_t)total_size, s);
    }
  }
  if (TF_GetCode(s) == TF_OK && TF_OpKernelConstruction_HasAttr(ctx, "mode", s)) {
    TF_OpKernelConstruction_GetAttrInt64(ctx, "mode", &k->mode, s);
  }
  if (TF_GetCode(s) != TF_OK) TF_OpKernelConstruction_Failure(ctx, s);
  TF_DeleteStatus(s);
  return k;
}

static void delete_which(void* instance) {
  WhichKernel* k = instance;
  if (k == NULL) return;
  TF_DeleteTensor(k->cached);
  free(k);
  kernels_alive--;
}

/* ---- Unimplemented ------------------------------------------------------------------------ */
static void compute_unimplemented(void* instance, TF_OpKernelContext* ctx) {
  WhichKernel* k = instance;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* x = NULL;
  TF_Tensor* y = output_like_input(ctx, &x, s);
  TF_DeleteTensor(x);
  TF_DeleteTensor(y);
  FAIL_IF(ctx, s);
  TF_Buffer* buffer = TF_NewBuffer();
  const char* w = k->which;
  if (strcmp(w, "config_proto") == 0) {
    TF_GetSerializedConfigProto(ctx, buffer, s);
  } else if (strcmp(w, "function_library") == 0) {
    TF_GetSerializedFunctionDefLibrary(ctx, buffer, s);
  } else if (strcmp(w, "resource_handle") == 0) {
    TF_GetSerializedResourceHandleProto(ctx, 0, buffer, s);
  } else if (strcmp(w, "graph_def_version") == 0) {
    (void)TF_GetGraphDefVersion(ctx);
  } else if (strcmp(w, "rendezvous") == 0) {
    (void)TF_GetRendezvous(ctx);
  } else if (strcmp(w, "requested_input") == 0) {
    (void)TF_GetOpKernelRequestedInput(ctx, 0);
  } else if (strcmp(w, "container") == 0) {
    (void)TF_GetResourceMgrDefaultContainerName(ctx);
  } else if (strcmp(w, "deferred_ops") == 0) {
    TF_IncNumDeferredOps(ctx);
    TF_DecNumDeferredOps(ctx);
  } else if (strcmp(w, "input_range") == 0) {
    TF_InputRange_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = TF_InputRange_Args_STRUCT_SIZE;
    args.status = s;
    TF_InputRange(ctx, "x", &args);
  }
  TF_DeleteBuffer(buffer);
  FAIL_IF(ctx, s);
  TF_DeleteStatus(s);
}

static void* create_unimplemented_attr(TF_OpKernelConstruction* ctx) {
  WhichKernel* k = create_which(ctx);
  TF_Status* s = TF_NewStatus();
  if (strcmp(k->which, "function") == 0) {
    TF_Buffer* b = TF_OpKernelConstruction_GetAttrFunction(ctx, "f", s);
    TF_DeleteBuffer(b);
  } else if (strcmp(k->which, "node_def") == 0) {
    TF_Buffer* b = TF_OpKernelConstruction_GetNodeDef(ctx, s);
    TF_DeleteBuffer(b);
  } else {
    TF_Tensor* t = (TF_Tensor*)1;
    TF_OpKernelConstruction_GetAttrTensor(ctx, "value", &t, s);
    if (t != NULL) TF_SetStatus(s, TF_INTERNAL, "GetAttrTensor left *val set");
  }
  if (TF_GetCode(s) != TF_OK) TF_OpKernelConstruction_Failure(ctx, s);
  TF_DeleteStatus(s);
  return k;
}

static void compute_nothing(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  (void)ctx;
}

/* ---- fills and copies --------------------------------------------------------------------- */
static void fill(TF_OpKernelContext* ctx, float value) {
  TF_Status* s = TF_NewStatus();
  TF_Tensor* x = NULL;
  TF_Tensor* y = output_like_input(ctx, &x, s);
  if (y != NULL) {
    float* out = TF_TensorData(y);
    for (int64_t i = 0; i < TF_TensorElementCount(y); i++) out[i] = value;
  }
  TF_DeleteTensor(x);
  TF_DeleteTensor(y);
  FAIL_IF(ctx, s);
  TF_DeleteStatus(s);
}

static void compute_prio_low(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  fill(ctx, 1.0f);
}

static void compute_prio_high(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  fill(ctx, 5.0f);
}

static void compute_copy(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* x = NULL;
  TF_Tensor* y = output_like_input(ctx, &x, s);
  if (y != NULL && TF_TensorByteSize(y)) {
    memcpy(TF_TensorData(y), TF_TensorData(x), TF_TensorByteSize(y));
  }
  TF_DeleteTensor(x);
  TF_DeleteTensor(y);
  FAIL_IF(ctx, s);
  TF_DeleteStatus(s);
}

/* ---- HostArgs ----------------------------------------------------------------------------- */
static void compute_host_args(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  TF_Status* s = TF_NewStatus();
  int64_t values[4];
  values[0] = TF_IsHostMemoryInput(ctx, 0, s);
  FAIL_IF(ctx, s);
  values[1] = TF_IsHostMemoryInput(ctx, 1, s);
  FAIL_IF(ctx, s);
  values[2] = TF_IsHostMemoryOutput(ctx, 0, s);
  FAIL_IF(ctx, s);
  TF_Tensor* shape = NULL;
  TF_GetInput(ctx, 1, &shape, s);
  FAIL_IF(ctx, s);
  values[3] = 0;
  const int64_t* data = TF_TensorData(shape);
  for (int64_t i = 0; i < TF_TensorElementCount(shape); i++) values[3] += data[i];
  TF_DeleteTensor(shape);
  int64_t dims[1] = {4};
  TF_Tensor* y = TF_AllocateOutput(ctx, 0, TF_INT64, dims, 1, sizeof values, s);
  FAIL_IF(ctx, s);
  memcpy(TF_TensorData(y), values, sizeof values);
  TF_DeleteTensor(y);
  TF_DeleteStatus(s);
}

/* ---- failures ----------------------------------------------------------------------------- */
static void compute_fails(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* x = NULL;
  TF_Tensor* y = output_like_input(ctx, &x, s);
  TF_DeleteTensor(x);
  TF_DeleteTensor(y);
  FAIL_IF(ctx, s);
  TF_SetStatus(s, TF_FAILED_PRECONDITION, "the kernel says no");
  TF_OpKernelContext_Failure(ctx, s);
  /* The first failure wins. */
  TF_SetStatus(s, TF_INTERNAL, "a second failure");
  TF_OpKernelContext_Failure(ctx, s);
  TF_DeleteStatus(s);
}

static void compute_forgets(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* x = NULL;
  TF_Tensor* y = output_like_input(ctx, &x, s);
  TF_DeleteTensor(x);
  TF_DeleteTensor(y);
  FAIL_IF(ctx, s);
  TF_DeleteStatus(s);
}

static void compute_bad_alloc(void* instance, TF_OpKernelContext* ctx) {
  WhichKernel* k = instance;
  TF_Status* s = TF_NewStatus();
  int64_t dims[2] = {2, 3};
  TF_Tensor* y = NULL;
  switch (k->mode) {
    case 0: y = TF_AllocateOutput(ctx, 0, TF_FLOAT, dims, 2, 7, s); break;
    case 1: y = TF_AllocateOutput(ctx, 0, TF_DOUBLE, dims, 2, 48, s); break;
    case 2: dims[1] = -3; y = TF_AllocateOutput(ctx, 0, TF_FLOAT, dims, 2, 24, s); break;
    default: y = TF_AllocateOutput(ctx, 5, TF_FLOAT, dims, 2, 24, s); break;
  }
  if (y != NULL) TF_SetStatus(s, TF_INTERNAL, "TF_AllocateOutput accepted a bad request");
  TF_DeleteTensor(y);
  FAIL_IF(ctx, s);
  TF_DeleteStatus(s);
}

/* ---- temporaries and forwarding --------------------------------------------------------------- */
static void compute_uses_temp(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* x = NULL;
  TF_GetInput(ctx, 0, &x, s);
  FAIL_IF(ctx, s);
  int64_t n = TF_TensorElementCount(x);
  int64_t dims[1] = {n};
  TF_AllocatorAttributes on_device = {TF_ALLOCATOR_ATTRIBUTES_STRUCT_SIZE, 0};
  TF_AllocatorAttributes on_host = {TF_ALLOCATOR_ATTRIBUTES_STRUCT_SIZE, 1};
  TF_AllocatorAttributes unsized = {0, 1};
  TF_Tensor* device_temp = TF_AllocateTemp(ctx, TF_FLOAT, dims, 1, &on_device, s);
  TF_Tensor* host_temp = NULL;
  if (TF_GetCode(s) == TF_OK) host_temp = TF_AllocateTemp(ctx, TF_FLOAT, dims, 1, &on_host, s);
  if (TF_GetCode(s) == TF_OK) {
    /* struct_size 0 is refused, as in TensorFlow */
    TF_Tensor* bad = TF_AllocateTemp(ctx, TF_FLOAT, dims, 1, &unsized, s);
    if (bad != NULL || TF_GetCode(s) != TF_INVALID_ARGUMENT) {
      TF_SetStatus(s, TF_INTERNAL, "TF_AllocateTemp accepted struct_size 0");
    } else {
      TF_SetStatus(s, TF_OK, "");
    }
    TF_DeleteTensor(bad);
  }
  if (TF_GetCode(s) == TF_OK && (TF_TensorByteSize(device_temp) != (size_t)n * 4 ||
                                 !TF_TensorIsAligned(device_temp) ||
                                 !TF_TensorIsAligned(host_temp))) {
    TF_SetStatus(s, TF_INTERNAL, "a temporary has the wrong size or alignment");
  }
  if (TF_GetCode(s) == TF_OK) {
    const float* in = TF_TensorData(x);
    float* dev = TF_TensorData(device_temp);
    float* host = TF_TensorData(host_temp);
    for (int64_t i = 0; i < n; i++) dev[i] = in[i];
    for (int64_t i = 0; i < n; i++) host[i] = dev[i] + 1.0f;
    TF_Tensor* y = TF_AllocateOutput(ctx, 0, TF_FLOAT, dims, 1, (size_t)n * 4, s);
    if (y != NULL) memcpy(TF_TensorData(y), host, (size_t)n * 4);
    TF_DeleteTensor(y);
  }
  TF_DeleteTensor(device_temp);
  TF_DeleteTensor(host_temp);
  TF_DeleteTensor(x);
  FAIL_IF(ctx, s);
  TF_DeleteStatus(s);
}

static void compute_forward(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* x = NULL;
  TF_GetInput(ctx, 0, &x, s);
  FAIL_IF(ctx, s);
  int64_t dims[8];
  int n = TF_NumDims(x);
  for (int i = 0; i < n && i < 8; i++) dims[i] = TF_Dim(x, i);
  int candidates[1] = {0};
  int forwarded = 99;
  TF_Tensor* y = TF_ForwardInputOrAllocateOutput(ctx, candidates, 1, 0, dims, n, &forwarded, s);
  if (y != NULL && forwarded == -1) {
    const float* in = TF_TensorData(x);
    float* out = TF_TensorData(y);
    for (int64_t i = 0; i < TF_TensorElementCount(x); i++) out[i] = 2.0f * in[i];
  } else if (TF_GetCode(s) == TF_OK) {
    TF_SetStatus(s, TF_INTERNAL, "forwarded_input is not -1");
  }
  TF_DeleteTensor(y);
  TF_DeleteTensor(x);
  FAIL_IF(ctx, s);
  TF_DeleteStatus(s);
}

/* ---- aliases, kept and foreign tensors -------------------------------------------------------- */
static void compute_identity(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* x = NULL;
  TF_GetInput(ctx, 0, &x, s);
  FAIL_IF(ctx, s);
  TF_SetOutput(ctx, 0, x, s);
  TF_DeleteTensor(x);
  FAIL_IF(ctx, s);
  TF_DeleteStatus(s);
}

#ifdef WITH_NEG
static void compute_neg(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* x = NULL;
  TF_GetInput(ctx, 0, &x, s);
  FAIL_IF(ctx, s);
  int64_t dims[8];
  int n = TF_NumDims(x);
  for (int i = 0; i < n && i < 8; i++) dims[i] = TF_Dim(x, i);
  int64_t count = TF_TensorElementCount(x);
  TF_Tensor* y = TF_AllocateOutput(ctx, 0, TF_FLOAT, dims, n, (size_t)count * sizeof(float), s);
  if (TF_GetCode(s) == TF_OK) {
    const float* in = TF_TensorData(x);
    float* out = TF_TensorData(y);
#ifdef BUG_NEG
    for (int64_t i = 0; i < count; i++) out[i] = in[i];
#else
    for (int64_t i = 0; i < count; i++) out[i] = -in[i];
#endif
  }
  TF_DeleteTensor(x);
  TF_DeleteTensor(y);
  FAIL_IF(ctx, s);
  TF_DeleteStatus(s);
}
#endif

#ifdef WITH_RANDOM
/* ---- RandomUniform and StatelessRandomUniform (float32 from an int32 shape) ---------------
 * Numbers in [0, 1) from a 64-bit mix of a key and the element's index: the stateful kernel
 * keys on a counter it advances per call, the stateless one on its seed input. BUG_RANDOM
 * draws from [0, 2); BUG_STATELESS keys the stateless kernel on the counter too. */
static uint64_t random_calls = 0;

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

static void fill_uniform(TF_OpKernelContext* ctx, uint64_t key) {
  TF_Status* s = TF_NewStatus();
  TF_Tensor* shape = NULL;
  TF_GetInput(ctx, 0, &shape, s);
  FAIL_IF(ctx, s);
  int64_t dims[8];
  int n = (int)TF_TensorElementCount(shape);
  const int32_t* given = TF_TensorData(shape);
  int64_t count = 1;
  for (int i = 0; i < n && i < 8; i++) count *= dims[i] = given[i];
  TF_DeleteTensor(shape);
  TF_Tensor* y = TF_AllocateOutput(ctx, 0, TF_FLOAT, dims, n, (size_t)count * sizeof(float), s);
  if (TF_GetCode(s) == TF_OK) {
    float* out = TF_TensorData(y);
    for (int64_t i = 0; i < count; i++) {
      out[i] = (float)(mix64(key * 0x9e3779b97f4a7c15ULL + (uint64_t)i) >> 40) / 16777216.0f;
#ifdef BUG_RANDOM
      out[i] *= 2.0f;
#endif
    }
  }
  TF_DeleteTensor(y);
  FAIL_IF(ctx, s);
  TF_DeleteStatus(s);
}

static void compute_random_uniform(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  fill_uniform(ctx, ++random_calls);
}

static void compute_stateless_uniform(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* seed = NULL;
  TF_GetInput(ctx, 1, &seed, s);
  FAIL_IF(ctx, s);
  const int64_t* pair = TF_TensorData(seed);
  uint64_t key = mix64((uint64_t)pair[0]) ^ (uint64_t)pair[1];
  TF_DeleteTensor(seed);
  TF_DeleteStatus(s);
#ifdef BUG_STATELESS
  key = ++random_calls;
#endif
  fill_uniform(ctx, key);
}
#endif

#ifdef WITH_RELU
/* Output 0, float, shaped like input `like`; NULL after reporting failure. */
static TF_Tensor* float_output_like(TF_OpKernelContext* ctx, TF_Tensor* like, TF_Status* s) {
  int64_t dims[8];
  int n = TF_NumDims(like);
  for (int i = 0; i < n && i < 8; i++) dims[i] = TF_Dim(like, i);
  return TF_AllocateOutput(ctx, 0, TF_FLOAT, dims, n,
                           (size_t)TF_TensorElementCount(like) * sizeof(float), s);
}

static void compute_relu(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* x = NULL;
  TF_GetInput(ctx, 0, &x, s);
  FAIL_IF(ctx, s);
  TF_Tensor* y = float_output_like(ctx, x, s);
  if (TF_GetCode(s) == TF_OK) {
    const float* in = TF_TensorData(x);
    float* out = TF_TensorData(y);
    for (int64_t i = 0; i < TF_TensorElementCount(x); i++) out[i] = in[i] > 0 ? in[i] : 0;
  }
  TF_DeleteTensor(x);
  TF_DeleteTensor(y);
  FAIL_IF(ctx, s);
  TF_DeleteStatus(s);
}

/* ReluGrad(gradients, features): the gradients where the features are positive. */
static void compute_relu_grad(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  TF_Status* s = TF_NewStatus();
  TF_Tensor *g = NULL, *x = NULL;
  TF_GetInput(ctx, 0, &g, s);
  if (TF_GetCode(s) == TF_OK) TF_GetInput(ctx, 1, &x, s);
  TF_Tensor* y = TF_GetCode(s) == TF_OK ? float_output_like(ctx, g, s) : NULL;
  if (TF_GetCode(s) == TF_OK) {
    const float* grad = TF_TensorData(g);
    const float* features = TF_TensorData(x);
    float* out = TF_TensorData(y);
    for (int64_t i = 0; i < TF_TensorElementCount(g); i++) {
#ifdef BUG_RELU_GRAD
      out[i] = features[i] > 0 ? grad[i] : 0.5f * grad[i];
#else
      out[i] = features[i] > 0 ? grad[i] : 0;
#endif
    }
  }
  TF_DeleteTensor(g);
  TF_DeleteTensor(x);
  TF_DeleteTensor(y);
  FAIL_IF(ctx, s);
  TF_DeleteStatus(s);
}
#endif

static void compute_bitcast(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* x = NULL;
  TF_GetInput(ctx, 0, &x, s);
  FAIL_IF(ctx, s);
  int64_t dims[8];
  int n = TF_NumDims(x);
  for (int i = 0; i < n && i < 8; i++) dims[i] = TF_Dim(x, i);
  TF_Tensor* as_int = TF_AllocateTensor(TF_INT32, dims, n, TF_TensorByteSize(x));
  TF_TensorBitcastFrom(x, TF_INT32, as_int, dims, n, s);
  if (TF_GetCode(s) == TF_OK && TF_TensorData(as_int) != TF_TensorData(x)) {
    TF_SetStatus(s, TF_INTERNAL, "the bitcast tensor does not share the input's data");
  }
  if (TF_GetCode(s) == TF_OK) TF_SetOutput(ctx, 0, as_int, s);
  TF_DeleteTensor(as_int);
  TF_DeleteTensor(x);
  FAIL_IF(ctx, s);
  TF_DeleteStatus(s);
}

static void compute_cached(void* instance, TF_OpKernelContext* ctx) {
  WhichKernel* k = instance;
  TF_Status* s = TF_NewStatus();
  if (k->cached == NULL) {
    int64_t dims[1] = {4};
    k->cached = TF_AllocateTemp(ctx, TF_FLOAT, dims, 1, NULL, s);
    FAIL_IF(ctx, s);
    float* data = TF_TensorData(k->cached);
    for (int i = 0; i < 4; i++) data[i] = 7.0f;
  }
  TF_SetOutput(ctx, 0, k->cached, s);
  FAIL_IF(ctx, s);
  TF_DeleteStatus(s);
}

static void free_wrapped(void* data, size_t len, void* arg) {
  (void)len;
  (void)arg;
  deallocations++;
  free(data);
}

static void compute_wraps(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  TF_Status* s = TF_NewStatus();
  float* data = malloc(3 * sizeof(float));
  for (int i = 0; i < 3; i++) data[i] = 3.0f;
  int64_t dims[1] = {3};
  TF_Tensor* t = TF_NewTensor(TF_FLOAT, dims, 1, data, 3 * sizeof(float), free_wrapped, NULL);
  TF_SetOutput(ctx, 0, t, s);
  TF_DeleteTensor(t);
  FAIL_IF(ctx, s);
  TF_DeleteStatus(s);
}

/* ---- Async --------------------------------------------------------------------------------- */
static void compute_async(void* instance, TF_OpKernelContext* ctx, TF_AsyncOpKernelDoneCallback* done) {
  (void)instance;
  (void)ctx;
  TF_RunAsyncOpKernelDoneCallback(done);
}

/* ---- Attrs --------------------------------------------------------------------------------- */
static int append(size_t* at, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static int append(size_t* at, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(report + *at, sizeof report - *at, fmt, ap);
  va_end(ap);
  if (n > 0) *at += (size_t)n < sizeof report - *at ? (size_t)n : sizeof report - *at - 1;
  return n;
}

static void* create_attrs(TF_OpKernelConstruction* ctx) {
  TF_Status* s = TF_NewStatus();
  size_t at = 0;
  report[0] = '\0';
  int32_t list_size, total_size;

  TF_Bool b = 0;
  TF_OpKernelConstruction_GetAttrBool(ctx, "b", &b, s);
  append(&at, "b=%d/%d", (int)b, TF_GetCode(s));

  char str[32] = {0};
  TF_OpKernelConstruction_GetAttrSize(ctx, "s", &list_size, &total_size, s);
  TF_OpKernelConstruction_GetAttrString(ctx, "s", str, sizeof str - 1, s);
  append(&at, " s=%s(%d,%d)/%d", str, list_size, total_size, TF_GetCode(s));

  float f = 0;
  TF_OpKernelConstruction_GetAttrFloat(ctx, "f", &f, s);
  append(&at, " f=%g/%d", (double)f, TF_GetCode(s));

  int64_t i64 = 0;
  int32_t i32 = 0;
  TF_OpKernelConstruction_GetAttrInt64(ctx, "i", &i64, s);
  append(&at, " i=%lld/%d", (long long)i64, TF_GetCode(s));
  TF_OpKernelConstruction_GetAttrInt32(ctx, "i", &i32, s);
  append(&at, " i32=%d/%d", (int)i32, TF_GetCode(s));
  TF_OpKernelConstruction_GetAttrInt32(ctx, "big", &i32, s);
  append(&at, " big=%d:%s", TF_GetCode(s), TF_Message(s));

  TF_DataType t = 0;
  TF_OpKernelConstruction_GetAttrType(ctx, "t", &t, s);
  append(&at, " t=%d/%d", (int)t, TF_GetCode(s));

  TF_DataType types[4] = {0};
  TF_OpKernelConstruction_GetAttrSize(ctx, "tl", &list_size, &total_size, s);
  TF_OpKernelConstruction_GetAttrTypeList(ctx, "tl", types, 4, s);
  append(&at, " tl=%d,%d(%d,%d)/%d", (int)types[0], (int)types[1], list_size, total_size,
         TF_GetCode(s));

  float floats[4] = {0};
  TF_OpKernelConstruction_GetAttrFloatList(ctx, "fl", floats, 4, s);
  append(&at, " fl=%g,%g/%d", (double)floats[0], (double)floats[1], TF_GetCode(s));

  TF_Bool bools[4] = {0};
  TF_OpKernelConstruction_GetAttrBoolList(ctx, "bl", bools, 4, s);
  append(&at, " bl=%d,%d,%d/%d", bools[0], bools[1], bools[2], TF_GetCode(s));

  int32_t ints[4] = {0};
  TF_OpKernelConstruction_GetAttrInt32List(ctx, "il", ints, 2, s); /* max_vals 2 of 3 */
  append(&at, " il=%d,%d,%d/%d", ints[0], ints[1], ints[2], TF_GetCode(s));

  char* values[4] = {0};
  size_t lengths[4] = {0};
  char storage[16];
  TF_OpKernelConstruction_GetAttrSize(ctx, "sl", &list_size, &total_size, s);
  TF_OpKernelConstruction_GetAttrStringList(ctx, "sl", values, lengths, 4, storage,
                                            sizeof storage, s);
  append(&at, " sl=%.*s,%.*s(%d,%d)/%d", (int)lengths[0], values[0] ? values[0] : "",
         (int)lengths[1], values[1] ? values[1] : "", list_size, total_size, TF_GetCode(s));
  TF_OpKernelConstruction_GetAttrStringList(ctx, "sl", values, lengths, 4, storage, 3, s);
  append(&at, " sl_small=%d", TF_GetCode(s));

  TF_OpKernelConstruction_GetAttrSize(ctx, "empty", &list_size, &total_size, s);
  TF_OpKernelConstruction_GetAttrTypeList(ctx, "empty", types, 4, s);
  append(&at, " empty=(%d,%d)/%d", list_size, total_size, TF_GetCode(s));

  TF_OpKernelConstruction_GetAttrSize(ctx, "f", &list_size, &total_size, s);
  append(&at, " fsize=(%d,%d)", list_size, total_size);

  TF_OpKernelConstruction_GetAttrFloat(ctx, "i", &f, s);
  append(&at, " wrong=%d:%s", TF_GetCode(s), TF_Message(s));
  TF_OpKernelConstruction_GetAttrInt64List(ctx, "i", &i64, 1, s);
  append(&at, " notlist=%d:%s", TF_GetCode(s), TF_Message(s));
  TF_OpKernelConstruction_GetAttrFloatList(ctx, "il", floats, 4, s);
  append(&at, " wronglist=%d", TF_GetCode(s));
  TF_OpKernelConstruction_GetAttrSize(ctx, "missing", &list_size, &total_size, s);
  append(&at, " missing=%d,%d,%d:%s", list_size, total_size, TF_GetCode(s), TF_Message(s));

  TF_SetStatus(s, TF_OK, "");
  append(&at, " has=%d%d", TF_OpKernelConstruction_HasAttr(ctx, "b", s),
         TF_OpKernelConstruction_HasAttr(ctx, "missing", s));
  TF_StringView name = TF_OpKernelConstruction_GetName(ctx);
  append(&at, " name=%.*s", (int)name.len, name.data);
  TF_DeleteStatus(s);
  kernels_alive++;
  return calloc(1, sizeof(WhichKernel));
}

/* ---- Introspect ------------------------------------------------------------------------------ */
static void compute_introspect(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  TF_Status* s = TF_NewStatus();
  size_t at = 0;
  report[0] = '\0';
  SP_Stream stream = TF_GetStream(ctx, s);
  append(&at, "stream=%p/%d", (void*)stream, TF_GetCode(s));
  append(&at, " inputs=%d outputs=%d", TF_NumInputs(ctx), TF_NumOutputs(ctx));
  append(&at, " types=%d,%d out=%d", (int)TF_InputDatatype(ctx, 0), (int)TF_InputDatatype(ctx, 1),
         (int)TF_ExpectedOutputDataType(ctx, 0));
  append(&at, " step=%lld/%lld", (long long)TF_StepId(ctx), (long long)TF_GetStepId(ctx));
  append(&at, " frame=%llu iter=%lld", (unsigned long long)TF_GetFrameId(ctx),
         (long long)TF_GetIterId(ctx));
  append(&at, " device_id=%d", TF_GetDeviceId(ctx));
  TF_StringView device = TF_GetDeviceName(ctx);
  append(&at, " device=%.*s", (int)device.len, device.data);
  TF_StringView name = TF_GetOpKernelName(ctx);
  append(&at, " name=%.*s", (int)name.len, name.data);
  TF_Tensor* t = NULL;
  TF_GetInput(ctx, 2, &t, s);
  append(&at, " input2=%d", TF_GetCode(s));
  t = TF_GetMutableOutput(ctx, 0, s);
  append(&at, " unset=%d", TF_GetCode(s));
  TF_Tensor* x = NULL;
  TF_GetInput(ctx, 0, &x, s);
  int64_t dims[1] = {TF_TensorElementCount(x)};
  TF_Tensor* y = TF_AllocateOutput(ctx, 0, TF_FLOAT, dims, 1, (size_t)dims[0] * 4, s);
  if (y != NULL) memcpy(TF_TensorData(y), TF_TensorData(x), (size_t)dims[0] * 4);
  t = TF_GetMutableOutput(ctx, 0, s);
  append(&at, " mutable=%d,%d", TF_GetCode(s), t != NULL && TF_TensorData(t) == TF_TensorData(y));
  TF_DeleteTensor(t);
  TF_SetOutput(ctx, 3, x, s);
  append(&at, " setoob=%d", TF_GetCode(s));
  TF_SetOutput(ctx, 0, x, s); /* replaces output 0 with an alias of input 0 */
  append(&at, " alias=%d", TF_GetCode(s));
  TF_Tensor* as_ints = TF_AllocateTensor(TF_INT32, dims, 1, (size_t)dims[0] * 4);
  TF_SetOutput(ctx, 0, as_ints, s);
  append(&at, " wrongtype=%d", TF_GetCode(s));
  TF_DeleteTensor(as_ints);
  TF_DeleteTensor(x);
  TF_DeleteTensor(y);
  TF_DeleteStatus(s);
}

#ifdef WITH_SHAPE
static int shape_output_on_host = -1;

/* Shape: the input's dims (int32 or int64, the instance's out_type), written with the CPU
 * into the output the runtime gives. */
static void compute_shape(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* x = NULL;
  TF_GetInput(ctx, 0, &x, s);
  FAIL_IF(ctx, s);
  int64_t rank = TF_NumDims(x);
#ifdef BUG_SHAPE_LENGTH
  int64_t length = rank + 1;
#else
  int64_t length = rank;
#endif
  TF_DataType dt = TF_ExpectedOutputDataType(ctx, 0);
  size_t width = dt == TF_INT64 ? 8 : 4;
  TF_Tensor* y = TF_AllocateOutput(ctx, 0, dt, &length, 1, (size_t)length * width, s);
  if (TF_GetCode(s) == TF_OK) {
    shape_output_on_host = TF_IsHostMemoryOutput(ctx, 0, s);
    char* out = TF_TensorData(y);
    for (int64_t i = 0; i < length; i++) {
      int64_t d = i < rank ? TF_Dim(x, (int)i) : 0;
      int32_t narrow = (int32_t)d;
      memcpy(out + i * (int64_t)width, width == 8 ? (const void*)&d : (const void*)&narrow,
             width);
    }
  }
  TF_DeleteTensor(x);
  TF_DeleteTensor(y);
  FAIL_IF(ctx, s);
  TF_DeleteStatus(s);
}

int KC_ShapeOutputOnHost(void) { return shape_output_on_host; }
#endif

/* ---- registration ----------------------------------------------------------------------------- */
static void record(TF_Status* s) {
  if (num_registration_codes < 8) registration_codes[num_registration_codes++] = TF_GetCode(s);
}

static void add(const char* op, const char* name, const char* device,
                void* (*create)(TF_OpKernelConstruction*),
                void (*compute)(void*, TF_OpKernelContext*), void (*del)(void*),
                int32_t priority, const char* label, const char* host_memory) {
  TF_Status* s = TF_NewStatus();
  TF_KernelBuilder* b = TF_NewKernelBuilder(op, device, create, compute, del);
  if (priority) TF_KernelBuilder_Priority(b, priority);
  if (label) TF_KernelBuilder_Label(b, label);
  if (host_memory) TF_KernelBuilder_HostMemory(b, host_memory);
  TF_RegisterKernelBuilder(name, b, s);
  TF_DeleteStatus(s);
}

void TF_InitKernel(void) {
#ifdef NO_KERNELS
  if (num_registration_codes >= 0) return; /* registers nothing at all */
#endif
  const char* d = KERNEL_DEVICE;
  TF_Status* s = TF_NewStatus();
  add("Unimplemented", "UnimplementedKernel", d, create_which, compute_unimplemented,
      delete_which, 0, NULL, NULL);
  add("UnimplementedAttr", "UnimplementedAttrKernel", d, create_unimplemented_attr,
      compute_nothing, delete_which, 0, NULL, NULL);
  add("Prio", "PrioLow", d, NULL, compute_prio_low, NULL, 1, NULL, NULL);
  add("Prio", "PrioHigh", d, NULL, compute_prio_high, NULL, 5, NULL, NULL);

  TF_KernelBuilder* typed = TF_NewKernelBuilder("Typed", d, NULL, compute_copy, NULL);
  TF_KernelBuilder_TypeConstraint(typed, "T", TF_FLOAT, s);
  TF_KernelBuilder_TypeConstraint(typed, "T", TF_DOUBLE, s);
  TF_KernelBuilder_TypeConstraint(typed, "U", TF_INT32, s);
  TF_RegisterKernelBuilder("TypedKernel", typed, s);

  add("Labelled", "LabelledKernel", d, NULL, compute_copy, NULL, 0, "special", NULL);
  TF_KernelBuilder* host = TF_NewKernelBuilder("HostArgs", d, NULL, compute_host_args, NULL);
  TF_KernelBuilder_HostMemory(host, "shape");
  TF_KernelBuilder_HostMemory(host, "count");
  TF_KernelBuilder_HostMemory(host, "shape"); /* twice: kept once */
  TF_RegisterKernelBuilder("HostArgsKernel", host, s);

  add("Fails", "FailsKernel", d, NULL, compute_fails, NULL, 0, NULL, NULL);
  add("Forgets", "ForgetsKernel", d, NULL, compute_forgets, NULL, 0, NULL, NULL);
  add("UsesTemp", "UsesTempKernel", d, NULL, compute_uses_temp, NULL, 0, NULL, NULL);
  add("Forward", "ForwardKernel", d, NULL, compute_forward, NULL, 0, NULL, NULL);
  add("Identity", "IdentityKernel", d, NULL, compute_identity, NULL, 0, NULL, NULL);
  add("BitcastToInt", "BitcastKernel", d, NULL, compute_bitcast, NULL, 0, NULL, NULL);
  add("Cached", "CachedKernel", d, create_which, compute_cached, delete_which, 0, NULL, NULL);
  add("Wraps", "WrapsKernel", d, NULL, compute_wraps, NULL, 0, NULL, NULL);
  add("BadAlloc", "BadAllocKernel", d, create_which, compute_bad_alloc, delete_which, 0, NULL,
      NULL);
  add("Attrs", "AttrsKernel", d, create_attrs, compute_nothing, delete_which, 0, NULL, NULL);
  add("Introspect", "IntrospectKernel", d, NULL, compute_introspect, NULL, 0, NULL, NULL);

#ifdef WITH_NEG
  TF_KernelBuilder* neg = TF_NewKernelBuilder("Neg", d, NULL, compute_neg, NULL);
  TF_KernelBuilder_TypeConstraint(neg, "T", TF_FLOAT, s);
  TF_RegisterKernelBuilder("NegKernel", neg, s);
#endif

#ifdef WITH_RANDOM
  TF_KernelBuilder* uniform = TF_NewKernelBuilder("RandomUniform", d, NULL,
                                                  compute_random_uniform, NULL);
  TF_KernelBuilder_TypeConstraint(uniform, "dtype", TF_FLOAT, s);
  TF_KernelBuilder_TypeConstraint(uniform, "T", TF_INT32, s);
  TF_KernelBuilder_HostMemory(uniform, "shape");
  TF_RegisterKernelBuilder("RandomUniformKernel", uniform, s);
  TF_KernelBuilder* stateless = TF_NewKernelBuilder("StatelessRandomUniform", d, NULL,
                                                    compute_stateless_uniform, NULL);
  TF_KernelBuilder_TypeConstraint(stateless, "dtype", TF_FLOAT, s);
  TF_KernelBuilder_TypeConstraint(stateless, "T", TF_INT32, s);
  TF_KernelBuilder_TypeConstraint(stateless, "Tseed", TF_INT64, s);
  TF_KernelBuilder_HostMemory(stateless, "shape");
  TF_KernelBuilder_HostMemory(stateless, "seed");
  TF_RegisterKernelBuilder("StatelessRandomUniformKernel", stateless, s);
#endif

#ifdef WITH_SHAPE
  const TF_DataType shape_types[2] = {TF_INT32, TF_INT64};
  for (int i = 0; i < 2; i++) {
    TF_KernelBuilder* shape = TF_NewKernelBuilder("Shape", d, NULL, compute_shape, NULL);
    TF_KernelBuilder_TypeConstraint(shape, "out_type", shape_types[i], s);
#ifndef SHAPE_ON_DEVICE
    TF_KernelBuilder_HostMemory(shape, "output");
#endif
    TF_RegisterKernelBuilder(i == 0 ? "ShapeKernel32" : "ShapeKernel64", shape, s);
  }
#endif

#ifdef WITH_RELU
  TF_KernelBuilder* relu = TF_NewKernelBuilder("Relu", d, NULL, compute_relu, NULL);
  TF_KernelBuilder_TypeConstraint(relu, "T", TF_FLOAT, s);
  TF_RegisterKernelBuilder("ReluKernel", relu, s);
  TF_KernelBuilder* relu_grad = TF_NewKernelBuilder("ReluGrad", d, NULL, compute_relu_grad, NULL);
  TF_KernelBuilder_TypeConstraint(relu_grad, "T", TF_FLOAT, s);
  TF_RegisterKernelBuilder("ReluGradKernel", relu_grad, s);
#endif

  TF_KernelBuilder* async = TF_NewAsyncKernelBuilder("Async", d, NULL, compute_async, NULL);
  TF_RegisterKernelBuilder("AsyncKernel", async, s);
  record(s);

#ifdef REJECTED
  add("ForNope", "ForNopeKernel", "NOPE", NULL, compute_copy, NULL, 0, NULL, NULL);
  add("ForCpu", "ForCpuKernel", "CPU", NULL, compute_copy, NULL, 0, NULL, NULL);
#endif
#ifdef DUPLICATE
  for (int i = 0; i < 2; i++) {
    TF_KernelBuilder* dup = TF_NewKernelBuilder("Dup", d, NULL, compute_copy, NULL);
    TF_KernelBuilder_TypeConstraint(dup, "T", TF_FLOAT, s);
    TF_RegisterKernelBuilder(i == 0 ? "DupFirst" : "DupSecond", dup, s);
    record(s);
  }
#endif
#ifdef MALFORMED
  TF_KernelBuilder* no_compute = TF_NewKernelBuilder("NoCompute", d, NULL, NULL, NULL);
  TF_RegisterKernelBuilder("NoComputeKernel", no_compute, s);
  record(s);
  TF_KernelBuilder* two_labels = TF_NewKernelBuilder("TwoLabels", d, NULL, compute_copy, NULL);
  TF_KernelBuilder_Label(two_labels, "one");
  TF_KernelBuilder_Label(two_labels, "two");
  TF_RegisterKernelBuilder("TwoLabelsKernel", two_labels, s);
  record(s);
  TF_KernelBuilder* with_def = TF_NewKernelBuilder("WithDef", d, NULL, compute_copy, NULL);
  TF_RegisterKernelBuilderWithKernelDef("\x0a\x07WithDef", "WithDefKernel", with_def, s);
  record(s);
  TF_RegisterKernelBuilder("NullBuilder", NULL, s);
  record(s);
  TF_KernelBuilder* bad_type = TF_NewKernelBuilder("BadType", d, NULL, compute_copy, NULL);
  TF_KernelBuilder_TypeConstraint(bad_type, "T", (TF_DataType)999, s);
  record(s);
  TF_DeleteKernelBuilder(bad_type);
#endif
  TF_DeleteStatus(s);
}
