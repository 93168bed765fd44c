/* A plugin with no device: it exports TF_InitKernel and TF_InitGraph and no SE_InitPlugin,
 * as Intel's CPU extension (libitex_cpu.so) does. TensorFlow loads such a library with
 * load_pluggable_device_library and runs its CPU kernels; so must pluggable.
 *
 * TF_InitKernel registers, for device type "CPU":
 *   LibScale      a new op (tensorflow/c/ops.h): x: T -> y: T, T in {float, double},
 *                 scale: float = 2.0; its kernel (T = float) computes y = scale * x.
 *   Neg           TensorFlow's Neg for T = float, at priority NEG_PRIORITY (default 1): y = -x;
 *                 kernel_library_neg_runs() counts its runs.
 *   LibStream     a new op x: float -> y: float whose kernel asks for the stream
 *                 (TF_GetStream) and fails with the status it got.
 *   LibForward    a new op x: float -> y: float whose kernel sets the output to its input.
 * With DEVICE_KERNELS=TYPE, also Neg for device type TYPE ("LibNegDevice", y = -10 x): the
 * device of tests/plugins/test_plugin.c keeps device memory in host memory.
 *
 * TF_InitGraph registers a graph optimizer for "CPU" that returns the graph unchanged.
 *
 * Variants: GRAPH_ONLY exports TF_InitGraph alone; NO_ENTRY_POINTS exports none.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorflow/c/experimental/grappler/grappler.h"
#include "tensorflow/c/kernels.h"
#include "tensorflow/c/ops.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"

#define EXPORT __attribute__((visibility("default")))
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

#ifndef NEG_PRIORITY
#define NEG_PRIORITY 1
#endif

static int64_t neg_runs;

/* How many times the CPU kernel of Neg ran. */
EXPORT int64_t kernel_library_neg_runs(void) { return neg_runs; }

#if !defined(GRAPH_ONLY) && !defined(NO_ENTRY_POINTS)
/* y = scale * x for a float tensor. */
static void scaled(TF_OpKernelContext* ctx, float scale) {
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

/* LibScale's instance: the scale attribute, read at construction. */
static void* create_scale(TF_OpKernelConstruction* ctx) {
  float* scale = malloc(sizeof *scale);
  TF_Status* s = TF_NewStatus();
  TF_OpKernelConstruction_GetAttrFloat(ctx, "scale", scale, s);
  if (TF_GetCode(s) != TF_OK) TF_OpKernelConstruction_Failure(ctx, s);
  TF_DeleteStatus(s);
  return scale;
}

static void compute_scale(void* instance, TF_OpKernelContext* ctx) {
  scaled(ctx, *(const float*)instance);
}

static void delete_scale(void* instance) { free(instance); }

static void compute_neg(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  neg_runs++;
  scaled(ctx, -1.0f);
}

#ifdef DEVICE_KERNELS
static void compute_neg_device(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  scaled(ctx, -10.0f);
}
#endif

/* Fails with what TF_GetStream says: on the CPU, that there is no stream. */
static void compute_stream(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  TF_Status* s = TF_NewStatus();
  SP_Stream stream = TF_GetStream(ctx, s);
  if (TF_GetCode(s) == TF_OK) {
    TF_SetStatus(s, TF_INTERNAL, stream == NULL ? "TF_GetStream gave no stream and no error"
                                                : "TF_GetStream gave a stream on the CPU");
  }
  TF_OpKernelContext_Failure(ctx, s);
  TF_DeleteStatus(s);
}

static void compute_forward(void* instance, TF_OpKernelContext* ctx) {
  (void)instance;
  TF_Status* s = TF_NewStatus();
  TF_Tensor* x = NULL;
  TF_GetInput(ctx, 0, &x, s);
  if (TF_GetCode(s) == TF_OK) TF_SetOutput(ctx, 0, x, s);
  TF_DeleteTensor(x);
  if (TF_GetCode(s) != TF_OK) TF_OpKernelContext_Failure(ctx, s);
  TF_DeleteStatus(s);
}

static void define_op(const char* name, const char* const* attrs, const char* input,
                      const char* output) {
  TF_Status* s = TF_NewStatus();
  TF_OpDefinitionBuilder* b = TF_NewOpDefinitionBuilder(name);
  for (; *attrs != NULL; attrs++) TF_OpDefinitionBuilderAddAttr(b, *attrs);
  TF_OpDefinitionBuilderAddInput(b, input);
  TF_OpDefinitionBuilderAddOutput(b, output);
  TF_RegisterOpDefinition(b, s);
  if (TF_GetCode(s) != TF_OK) fprintf(stderr, "%s: %s\n", name, TF_Message(s));
  TF_DeleteStatus(s);
}

static void define_kernel(const char* op, const char* name, const char* device,
                          void* (*create)(TF_OpKernelConstruction*),
                          void (*compute)(void*, TF_OpKernelContext*), void (*destroy)(void*),
                          int32_t priority, int typed) {
  TF_Status* s = TF_NewStatus();
  TF_KernelBuilder* b = TF_NewKernelBuilder(op, device, create, compute, destroy);
  if (typed) TF_KernelBuilder_TypeConstraint(b, "T", TF_FLOAT, s);
  if (priority != 0) TF_KernelBuilder_Priority(b, priority);
  TF_RegisterKernelBuilder(name, b, s);
  if (TF_GetCode(s) != TF_OK) fprintf(stderr, "%s: %s\n", name, TF_Message(s));
  TF_DeleteStatus(s);
}

EXPORT void TF_InitKernel(void) {
  static const char* const scale_attrs[] = {"T: {float, double}", "scale: float = 2.0", NULL};
  static const char* const no_attrs[] = {NULL};
  define_op("LibScale", scale_attrs, "x: T", "y: T");
  define_op("LibStream", no_attrs, "x: float", "y: float");
  define_op("LibForward", no_attrs, "x: float", "y: float");
  define_kernel("LibScale", "LibScaleCpu", "CPU", create_scale, compute_scale, delete_scale, 0,
                1);
  define_kernel("Neg", "LibNegCpu", "CPU", NULL, compute_neg, NULL, NEG_PRIORITY, 1);
  define_kernel("LibStream", "LibStreamCpu", "CPU", NULL, compute_stream, NULL, 0, 0);
  define_kernel("LibForward", "LibForwardCpu", "CPU", NULL, compute_forward, NULL, 0, 0);
#ifdef DEVICE_KERNELS
  define_kernel("Neg", "LibNegDevice", STRINGIFY(DEVICE_KERNELS), NULL, compute_neg_device,
                NULL, 0, 1);
#endif
}
#endif

#ifndef NO_ENTRY_POINTS
/* Hands the graph back unchanged. */
static void free_graph(void* data, size_t length) {
  (void)length;
  free(data);
}

static void optimize(void* optimizer, const TF_Buffer* graph,
                     const TF_GrapplerItem* item, TF_Buffer* optimized, TF_Status* status) {
  (void)optimizer;
  (void)item;
  void* copy = malloc(graph->length ? graph->length : 1);
  if (copy == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory copying the graph");
    return;
  }
  if (graph->length) memcpy(copy, graph->data, graph->length);
  optimized->data = copy;
  optimized->length = graph->length;
  optimized->data_deallocator = free_graph;
  TF_SetStatus(status, TF_OK, "");
}

EXPORT void TF_InitGraph(TP_OptimizerRegistrationParams* params, TF_Status* status) {
  params->device_type = "CPU";
  params->optimizer_configs->struct_size = TP_OPTIMIZER_CONFIGS_STRUCT_SIZE;
  params->optimizer_configs->remapping = TF_TriState_Off;
  params->optimizer->struct_size = TP_OPTIMIZER_STRUCT_SIZE;
  params->optimizer->optimize_func = optimize;
  TF_SetStatus(status, TF_OK, "");
}
#endif
