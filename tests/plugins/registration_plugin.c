/* Kernel and op registrations TensorFlow accepts and pluggable must too, on the device of
 * tests/plugins/test_plugin.c (included: build with PLATFORM_NAME and DEVICE_TYPE). Device
 * memory is malloc'd host memory, so the kernels compute in compute_func.
 *
 * Each variant adds registrations to TF_InitKernel:
 *   NEG_TWICE        Neg (T = float) registered twice, identically: a call matches both.
 *   NEG_PRIORITY     Neg twice at priorities 1 ("NegLow": y = x) and 2 ("NegHigh": y = -x);
 *                    NEG_HIGH_FIRST registers the higher one first.
 *   NEG_SCALE=k      Neg (T = float) computing y = -k x ("NegScaled").
 *   KINDS            ops of ops.h with attributes of every kind and types of every family:
 *                      RegKinds     an attribute of each kind (shape, tensor, func, lists...),
 *                                   x: float -> y: float; a kernel;
 *                      RegScale     T: {float, qint8, quint8, qint32, qint16, quint16},
 *                                   factors: list(float) = [2.5], names: list(string),
 *                                   flags: list(bool), Tlist: list(type) = [DT_FLOAT];
 *                                   y = x * factors[0]; kernels for float and the quantized
 *                                   types;
 *                      RegQuantized x: qint8 -> y: float; a kernel (TypeConstraint none);
 *                      RegTypeList  xs: Tin (list(type)) -> y: float; a kernel.
 *   REFUSED=n        n kernels for device type "NOWHERE" and an op with a reference input.
 *   QUANTIZED_NEG    Neg for T = qint8 ("NegQuantized"), a type tensors here cannot hold.
 *   MANY=n           n ops RegMany0 .. RegMany<n-1> (x: float -> y: float), each with a
 *                    kernel computing y = -x: the registration cost of a large plugin.
 */
#include "test_plugin.c"

#include <stdio.h>

#include "tensorflow/c/kernels.h"
#include "tensorflow/c/ops.h"
#include "tensorflow/c/tf_tensor.h"

#define KERNEL_DEVICE STRINGIFY(DEVICE_TYPE)

/* y = scale * x for float tensors; scale comes from the kernel instance (a float*). */
static void scaled_copy(TF_OpKernelContext* ctx, float scale) {
  TF_Status* s = TF_NewStatus();
  TF_Tensor* x = NULL;
  TF_GetInput(ctx, 0, &x, s);
  if (TF_GetCode(s) == TF_OK) {
    int64_t dims[8];
    int n = TF_NumDims(x);
    for (int i = 0; i < n && i < 8; i++) dims[i] = TF_Dim(x, i);
    int64_t count = TF_TensorElementCount(x);
    TF_Tensor* y =
        TF_AllocateOutput(ctx, 0, TF_FLOAT, dims, n, (size_t)count * sizeof(float), s);
    if (TF_GetCode(s) == TF_OK) {
      const float* in = TF_TensorData(x);
      float* out = TF_TensorData(y);
      for (int64_t i = 0; i < count; i++) out[i] = scale * in[i];
    }
    TF_DeleteTensor(y);
  }
  TF_DeleteTensor(x);
  if (TF_GetCode(s) != TF_OK) TF_OpKernelContext_Failure(ctx, s);
  TF_DeleteStatus(s);
}

static void compute_neg(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  scaled_copy(ctx, -1.0f);
}

static void compute_same(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  scaled_copy(ctx, 1.0f);
}

static void register_kernel(const char* op, const char* name, const char* device,
                            void (*compute)(void*, TF_OpKernelContext*), int32_t priority,
                            const char* type_attr, const TF_DataType* types, int num_types) {
  TF_Status* s = TF_NewStatus();
  TF_KernelBuilder* b = TF_NewKernelBuilder(op, device, NULL, compute, NULL);
  for (int i = 0; i < num_types; i++) TF_KernelBuilder_TypeConstraint(b, type_attr, types[i], s);
  if (priority != 0) TF_KernelBuilder_Priority(b, priority);
  TF_RegisterKernelBuilder(name, b, s);
  if (TF_GetCode(s) != TF_OK) fprintf(stderr, "%s: %s\n", name, TF_Message(s));
  TF_DeleteStatus(s);
}

static const TF_DataType kFloat[] = {TF_FLOAT};

#ifdef NEG_SCALE
static void compute_neg_scaled(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  scaled_copy(ctx, -(float)(NEG_SCALE));
}
#endif

#if defined(KINDS) || defined(MANY)
static void register_op(const char* name, const char* const* attrs, const char* const* inputs,
                        const char* output) {
  TF_Status* s = TF_NewStatus();
  TF_OpDefinitionBuilder* b = TF_NewOpDefinitionBuilder(name);
  for (; *attrs != NULL; attrs++) TF_OpDefinitionBuilderAddAttr(b, *attrs);
  for (; *inputs != NULL; inputs++) TF_OpDefinitionBuilderAddInput(b, *inputs);
  TF_OpDefinitionBuilderAddOutput(b, output);
  TF_RegisterOpDefinition(b, s);
  if (TF_GetCode(s) != TF_OK) fprintf(stderr, "%s: %s\n", name, TF_Message(s));
  TF_DeleteStatus(s);
}
#endif

#ifdef KINDS
/* RegScale: factors[0] read at construction. */
static void* create_scale(TF_OpKernelConstruction* ctx) {
  float* factor = malloc(sizeof *factor);
  TF_Status* s = TF_NewStatus();
  float factors[4] = {0};
  TF_OpKernelConstruction_GetAttrFloatList(ctx, "factors", factors, 4, s);
  if (TF_GetCode(s) != TF_OK) TF_OpKernelConstruction_Failure(ctx, s);
  *factor = factors[0];
  TF_DeleteStatus(s);
  return factor;
}

static void compute_scale(void* instance, TF_OpKernelContext* ctx) {
  scaled_copy(ctx, *(const float*)instance);
}

static void delete_scale(void* instance) { free(instance); }
#endif

void TF_InitKernel(void) {
  const char* d = KERNEL_DEVICE;
#ifdef NEG_TWICE
  register_kernel("Neg", "NegOnce", d, compute_neg, 0, "T", kFloat, 1);
  register_kernel("Neg", "NegAgain", d, compute_neg, 0, "T", kFloat, 1);
#endif
#ifdef NEG_PRIORITY
#ifdef NEG_HIGH_FIRST
  register_kernel("Neg", "NegHigh", d, compute_neg, 2, "T", kFloat, 1);
  register_kernel("Neg", "NegLow", d, compute_same, 1, "T", kFloat, 1);
#else
  register_kernel("Neg", "NegLow", d, compute_same, 1, "T", kFloat, 1);
  register_kernel("Neg", "NegHigh", d, compute_neg, 2, "T", kFloat, 1);
#endif
#endif
#ifdef NEG_SCALE
  register_kernel("Neg", "NegScaled", d, compute_neg_scaled, 0, "T", kFloat, 1);
#endif
#ifdef KINDS
  {
    static const char* const kinds[] = {
        "s: string = 'a'", "i: int = 1", "f: float = 0.5", "b: bool = true",
        "t: type = DT_HALF", "sh: shape = [2, 3]", "te: tensor", "fn: func",
        "ls: list(string) = ['a', 'b']", "li: list(int) >= 1", "lf: list(float) = []",
        "lb: list(bool) = [true]", "lt: list(type) = [DT_QINT8, DT_BFLOAT16]",
        "lsh: list(shape) = [[1], [2, 3]]", "lte: list(tensor) = []", "lfn: list(func) = []",
        "n: numbertype = DT_QUINT8", "r: realnumbertype = DT_UINT16", "q: quantizedtype",
        "e: {realnumbertype, quantizedtype, string, variant, float8_e5m2, int4}", NULL};
    static const char* const x[] = {"x: float", NULL};
    register_op("RegKinds", kinds, x, "y: float");
    register_kernel("RegKinds", "RegKindsKernel", d, compute_same, 0, "t", kFloat, 0);
  }
  {
    static const char* const attrs[] = {
        "T: {float, qint8, quint8, qint32, qint16, quint16}", "factors: list(float) = [2.5]",
        "names: list(string) = ['a']", "flags: list(bool) = [true, false]",
        "Tlist: list(type) = [DT_FLOAT]", NULL};
    static const char* const x[] = {"x: T", NULL};
    static const TF_DataType quantized[] = {TF_QINT8, TF_QUINT8, TF_QINT32, TF_QINT16,
                                            TF_QUINT16};
    register_op("RegScale", attrs, x, "y: T");
    TF_Status* s = TF_NewStatus();
    TF_KernelBuilder* b =
        TF_NewKernelBuilder("RegScale", d, create_scale, compute_scale, delete_scale);
    TF_KernelBuilder_TypeConstraint(b, "T", TF_FLOAT, s);
    TF_RegisterKernelBuilder("RegScaleFloat", b, s);
    TF_DeleteStatus(s);
    register_kernel("RegScale", "RegScaleQuantized", d, compute_same, 0, "T", quantized, 5);
  }
  {
    static const char* const none[] = {NULL};
    static const char* const q[] = {"x: qint8", NULL};
    register_op("RegQuantized", none, q, "y: float");
    register_kernel("RegQuantized", "RegQuantizedKernel", d, compute_same, 0, "T", kFloat, 0);
    static const char* const tin[] = {"Tin: list(type)", NULL};
    static const char* const xs[] = {"xs: Tin", NULL};
    register_op("RegTypeList", tin, xs, "y: float");
    register_kernel("RegTypeList", "RegTypeListKernel", d, compute_same, 0, "T", kFloat, 0);
  }
#endif
#ifdef QUANTIZED_NEG
  {
    static const TF_DataType qint8[] = {TF_QINT8};
    register_kernel("Neg", "NegQuantized", d, compute_same, 0, "T", qint8, 1);
  }
#endif
#ifdef MANY
  for (int i = 0; i < (MANY); i++) {
    static const char* const none[] = {NULL};
    static const char* const x[] = {"x: float", NULL};
    char op[32], name[40];
    snprintf(op, sizeof op, "RegMany%d", i);
    snprintf(name, sizeof name, "RegManyKernel%d", i);
    register_op(op, none, x, "y: float");
    register_kernel(op, name, d, compute_neg, 0, "T", kFloat, 0);
  }
#endif
#ifdef REFUSED
  for (int i = 0; i < (REFUSED); i++) {
    char name[32];
    snprintf(name, sizeof name, "Nowhere%d", i);
    register_kernel("Neg", name, "NOWHERE", compute_neg, 0, "T", kFloat, 1);
  }
  {
    TF_Status* s = TF_NewStatus();
    TF_OpDefinitionBuilder* b = TF_NewOpDefinitionBuilder("RegWithRef");
    TF_OpDefinitionBuilderAddInput(b, "x: Ref(float)");
    TF_OpDefinitionBuilderAddOutput(b, "y: float");
    TF_RegisterOpDefinition(b, s);
    TF_DeleteStatus(s);
  }
#endif
  (void)d;
  (void)kFloat;
  (void)register_kernel;
  (void)compute_same;
  (void)compute_neg;
}
