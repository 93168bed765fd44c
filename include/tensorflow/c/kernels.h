/* tensorflow/c/kernels.h: the kernel C API, through which a plugin registers kernels (device
 * implementations of ops) and through which those kernels reach their inputs, outputs,
 * attributes and device stream. Declarations match TensorFlow 2.21; see include/ABI.md.
 *
 * A plugin defines TF_InitKernel and registers its kernels there:
 *   builder = TF_NewKernelBuilder(op, device_type, create, compute, delete);
 *   TF_KernelBuilder_TypeConstraint(builder, "T", TF_FLOAT, status);
 *   TF_RegisterKernelBuilder(name, builder, status);
 * The host then calls create once per kernel instance, compute for every execution of it
 * and delete when the instance is dropped.
 *
 * Ownership: TF_OpKernelConstruction and TF_OpKernelContext are host objects, valid only
 * during the create or compute call that received them. Every TF_Tensor* and TF_Buffer* a
 * function here returns belongs to the caller (TF_DeleteTensor / TF_DeleteBuffer).
 * TF_StringView results point into host memory that lives as long as the kernel.
 *
 * TensorFlow's kernels.h gets some of its types from headers not shipped here (the
 * TSL platform header, the rendezvous C API); the types its declarations need are defined
 * below with TensorFlow's layouts.
 */
#ifndef TENSORFLOW_C_KERNELS_H_
#define TENSORFLOW_C_KERNELS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensorflow/c/c_api.h"
#include "tensorflow/c/c_api_macros.h"
#include "tensorflow/c/experimental/stream_executor/stream_executor.h"
#include "tensorflow/c/tf_buffer.h"
#include "tensorflow/c/tf_datatype.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- types from headers not shipped here --- */

/* From the rendezvous C API (tf_rendezvous_c_api.h), which TensorFlow leaves out of mobile
 * and slim builds. Guarded by that header's own include guard, so including TensorFlow's
 * copy as well is harmless. */
#if !defined(IS_MOBILE_PLATFORM) && !defined(IS_SLIM_BUILD)
#ifndef TENSORFLOW_CORE_COMMON_RUNTIME_NEXT_PLUGGABLE_DEVICE_C_TF_RENDEZVOUS_C_API_H_
#define TENSORFLOW_CORE_COMMON_RUNTIME_NEXT_PLUGGABLE_DEVICE_C_TF_RENDEZVOUS_C_API_H_

typedef struct TF_DeviceContext TF_DeviceContext;

typedef struct TFDevice_AllocatorAttributes {
  uint32_t value;
  int32_t scope_id;
} TFDevice_AllocatorAttributes;

typedef struct TFE_CancellationManager TFE_CancellationManager;

typedef struct TF_RendezvousArgsStruct {
  TF_DeviceContext* device_context;
  TFDevice_AllocatorAttributes alloc_attrs;
  TFE_CancellationManager* cancellation_manager;
} TF_RendezvousArgsStruct;

typedef struct TF_RendezvousParsedKey {
  char* full_key;
  uint32_t full_key_size;
} TF_RendezvousParsedKey;

typedef struct TF_RendezvousSend_Params {
  const TF_RendezvousParsedKey* key;
  const TF_RendezvousArgsStruct* args;
  TF_Tensor* tensor;
  bool is_dead;

  TF_Status* status; /* out */
} TF_RendezvousSend_Params;

typedef void (*TF_RendezvousSend_Function)(void*, TF_RendezvousSend_Params*);

typedef struct TF_RendezvousDoneCallback_Params {
  void* context;
  const TF_Status* status;
  const TF_Tensor* tensor;
  bool is_dead;
} TF_RendezvousDoneCallback_Params;

typedef void (*TF_RendezvousDoneCallback_Function)(
    void*, TF_RendezvousDoneCallback_Params*);

typedef struct TF_RendezvousDoneCallbackImpl {
  void* context;
  TF_RendezvousDoneCallback_Function callback;
} TF_RendezvousDoneCallbackImpl;

typedef struct TF_RendezvousAsyncRecv_Params {
  void* context;
  const TF_RendezvousParsedKey* key;
  const TF_RendezvousArgsStruct* args;
  TF_RendezvousDoneCallbackImpl on_done;
} TF_RendezvousAsyncRecv_Params;

typedef void (*TF_RendezvousAsyncRecv_Function)(void*,
                                                TF_RendezvousAsyncRecv_Params*);

typedef void (*TF_RendezvousStartAbort_Function)(void* context,
                                                 const TF_Status*);

/* A rendezvous (tensor exchange point) and its operations; `rendezvous` is passed back as
 * the first argument of each. */
typedef struct TF_RendezvousThunk {
  void* rendezvous;
  TF_RendezvousSend_Function send_func;
  TF_RendezvousAsyncRecv_Function async_recv_func;
  TF_RendezvousStartAbort_Function start_abort_func;
} TF_RendezvousThunk;

#endif /* TENSORFLOW_CORE_..._TF_RENDEZVOUS_C_API_H_ */
#endif /* !IS_MOBILE_PLATFORM && !IS_SLIM_BUILD */

/* --- kernel registration --- */

/* Opaque host objects. (TF_Tensor comes from tf_tensor.h.) */
typedef struct TF_KernelBuilder TF_KernelBuilder;
typedef struct TF_OpKernelConstruction TF_OpKernelConstruction;
typedef struct TF_OpKernelContext TF_OpKernelContext;
typedef struct TF_AsyncOpKernelDoneCallback TF_AsyncOpKernelDoneCallback;

/* Tells the host an asynchronous kernel's compute_async_func has finished; call exactly once
 * per compute_async_func call, from any thread. */
TF_CAPI_EXPORT extern void TF_RunAsyncOpKernelDoneCallback(
    TF_AsyncOpKernelDoneCallback*);

/* The plugin's kernel entry point (defined by the plugin): registers all its kernels. */
void TF_InitKernel(void);

/* A builder for a kernel of op `op_name` on device type `device_name` (e.g. "XPU").
 *   create_func   [optional] called once per kernel instance; its result is the instance
 *                 pointer handed to compute_func and delete_func (NULL without create_func).
 *   compute_func  runs one execution; report failure with TF_OpKernelContext_Failure.
 *   delete_func   [optional] frees the instance pointer.
 * Hand the builder to TF_RegisterKernelBuilder, or free it with TF_DeleteKernelBuilder. */
TF_CAPI_EXPORT extern TF_KernelBuilder* TF_NewKernelBuilder(
    const char* op_name, const char* device_name,
    void* (*create_func)(TF_OpKernelConstruction*),
    void (*compute_func)(void*, TF_OpKernelContext*),
    void (*delete_func)(void*));

/* As TF_NewKernelBuilder, for a kernel that finishes later: compute_async_func must call
 * TF_RunAsyncOpKernelDoneCallback(done) once its work is complete. */
TF_CAPI_EXPORT extern TF_KernelBuilder* TF_NewAsyncKernelBuilder(
    const char* op_name, const char* device_name,
    void* (*create_func)(TF_OpKernelConstruction*),
    void (*compute_async_func)(void*, TF_OpKernelContext*,
                               TF_AsyncOpKernelDoneCallback* done),
    void (*delete_func)(void*));

/* Restricts type attribute `attr_name` to `type`; may be called for several attributes. */
TF_CAPI_EXPORT extern void TF_KernelBuilder_TypeConstraint(
    TF_KernelBuilder* kernel_builder, const char* attr_name, TF_DataType type,
    TF_Status* status);

/* Input or output `arg_name` lives in host memory rather than device memory. */
TF_CAPI_EXPORT extern void TF_KernelBuilder_HostMemory(
    TF_KernelBuilder* kernel_builder, const char* arg_name);

/* Among kernels that match, the highest priority wins. */
TF_CAPI_EXPORT extern void TF_KernelBuilder_Priority(
    TF_KernelBuilder* kernel_builder, int32_t priority_number);

TF_CAPI_EXPORT extern void TF_KernelBuilder_Label(
    TF_KernelBuilder* kernel_builder, const char* label);

/* Registers the kernel; takes ownership of `builder`. */
TF_CAPI_EXPORT extern void TF_RegisterKernelBuilder(const char* kernel_name,
                                                    TF_KernelBuilder* builder,
                                                    TF_Status* status);

/* As TF_RegisterKernelBuilder, with a serialized KernelDef to use instead of the one the
 * builder describes (NULL: same as TF_RegisterKernelBuilder). */
TF_CAPI_EXPORT extern void TF_RegisterKernelBuilderWithKernelDef(
    const char* serialized_kernel_def, const char* name,
    TF_KernelBuilder* builder, TF_Status* status);

/* Frees a builder that was not registered. */
TF_CAPI_EXPORT extern void TF_DeleteKernelBuilder(TF_KernelBuilder* builder);

/* --- inside compute: TF_OpKernelContext --- */

/* The stream the kernel must enqueue its device work on. Only devices of the StreamExecutor
 * C API have one; elsewhere NULL, with an error in `status`. */
TF_CAPI_EXPORT extern SP_Stream TF_GetStream(TF_OpKernelContext* ctx,
                                             TF_Status* status);

TF_CAPI_EXPORT extern int TF_NumInputs(TF_OpKernelContext* ctx);

TF_CAPI_EXPORT extern int TF_NumOutputs(TF_OpKernelContext* ctx);

/* Stores input `i` in *tensor (the caller deletes it). TF_OUT_OF_RANGE for a bad `i`;
 * *tensor is untouched on failure. */
TF_CAPI_EXPORT extern void TF_GetInput(TF_OpKernelContext* ctx, int i,
                                       TF_Tensor** tensor, TF_Status* status);

/* Argument of TF_InputRange. The caller sets struct_size and status; the host sets start,
 * stop and the status. */
typedef struct {
  size_t struct_size;
  void* priv; /* reserved */
  int start;  /* out */
  int stop;   /* out */
  TF_Status* status;
} TF_InputRange_Args;
#ifdef __cplusplus
const size_t TF_InputRange_Args_STRUCT_SIZE =
    TF_OFFSET_OF_END(TF_InputRange_Args, status);
#else
/* A macro in C: TensorFlow's non-static const object would be defined once per C
 * translation unit and clash at link time. */
#define TF_InputRange_Args_STRUCT_SIZE \
  TF_OFFSET_OF_END(TF_InputRange_Args, status)
#endif

/* The input indices [start, stop) of the input argument called `name`. */
TF_CAPI_EXPORT extern void TF_InputRange(TF_OpKernelContext* ctx,
                                         const char* name,
                                         TF_InputRange_Args* args);

/* Type of input `index`; `index` must be valid. */
TF_CAPI_EXPORT extern TF_DataType TF_InputDatatype(TF_OpKernelContext* ctx,
                                                   int index);

/* Makes `tensor` output `i` (the output shares its data; the caller still deletes `tensor`).
 * TF_OUT_OF_RANGE for a bad `i`. */
TF_CAPI_EXPORT extern void TF_SetOutput(TF_OpKernelContext* ctx, int i,
                                        const TF_Tensor* tensor,
                                        TF_Status* status);

/* Output `i` as set so far (the caller deletes the result); NULL and an error on failure. */
TF_CAPI_EXPORT extern TF_Tensor* TF_GetMutableOutput(TF_OpKernelContext* ctx,
                                                     int i, TF_Status* status);

/* Fill the caller's buffer with a serialized FunctionDefLibrary / ConfigProto /
 * ResourceHandleProto (of input `i`). */
TF_CAPI_EXPORT extern void TF_GetSerializedFunctionDefLibrary(
    TF_OpKernelContext* ctx, TF_Buffer* serialized_function_def_library,
    TF_Status* status);

TF_CAPI_EXPORT extern void TF_GetSerializedConfigProto(
    TF_OpKernelContext* ctx, TF_Buffer* serialized_config_proto,
    TF_Status* status);

TF_CAPI_EXPORT extern void TF_GetSerializedResourceHandleProto(
    TF_OpKernelContext* ctx, int i, TF_Buffer* serialized_resource_handle_proto,
    TF_Status* status);

/* Fail kernel construction / execution with the (non-OK) `status`; the host copies it. */
TF_CAPI_EXPORT extern void TF_OpKernelConstruction_Failure(
    TF_OpKernelConstruction* ctx, TF_Status* status);

TF_CAPI_EXPORT extern void TF_OpKernelContext_Failure(TF_OpKernelContext* ctx,
                                                      TF_Status* status);

/* Type output `i` must have; `i` must be valid. */
TF_CAPI_EXPORT extern TF_DataType TF_ExpectedOutputDataType(
    TF_OpKernelContext* ctx, int i);

/* Whether input / output `i` lives in host memory; `i` must be valid. */
TF_CAPI_EXPORT extern bool TF_IsHostMemoryInput(TF_OpKernelContext* ctx, int i,
                                                TF_Status* status);

TF_CAPI_EXPORT extern bool TF_IsHostMemoryOutput(TF_OpKernelContext* ctx, int i,
                                                 TF_Status* status);

TF_CAPI_EXPORT extern int64_t TF_StepId(TF_OpKernelContext* ctx);

/* The kernel's serialized NodeDef (the caller deletes the buffer). */
TF_CAPI_EXPORT extern TF_Buffer* TF_OpKernelConstruction_GetNodeDef(
    TF_OpKernelConstruction* ctx, TF_Status* status);

TF_CAPI_EXPORT extern uint64_t TF_GetFrameId(TF_OpKernelContext* ctx);

TF_CAPI_EXPORT extern int64_t TF_GetIterId(TF_OpKernelContext* ctx);

TF_CAPI_EXPORT extern int64_t TF_GetStepId(TF_OpKernelContext* ctx);

/* Ordinal of the device the kernel runs on (the platform's device id). */
TF_CAPI_EXPORT extern int TF_GetDeviceId(TF_OpKernelContext* ctx);

/* Full name of the device the kernel runs on. */
TF_CAPI_EXPORT TF_StringView TF_GetDeviceName(TF_OpKernelContext* ctx);

#if !defined(IS_MOBILE_PLATFORM) && !defined(IS_SLIM_BUILD)
/* The step's rendezvous. */
TF_CAPI_EXPORT TF_RendezvousThunk TF_GetRendezvous(TF_OpKernelContext* ctx);
#endif

TF_CAPI_EXPORT extern int TF_GetGraphDefVersion(TF_OpKernelContext* ctx);

/* The node name of the kernel. */
TF_CAPI_EXPORT extern TF_StringView TF_GetOpKernelName(TF_OpKernelContext* ctx);

TF_CAPI_EXPORT extern TF_StringView TF_GetResourceMgrDefaultContainerName(
    TF_OpKernelContext* ctx);

/* The name of requested input `index` of the node. */
TF_CAPI_EXPORT extern TF_StringView TF_GetOpKernelRequestedInput(
    TF_OpKernelContext* ctx, size_t index);

/* --- inside create: attributes of TF_OpKernelConstruction ---
 * The getters fail with an error in `status` when the attribute is missing or of another
 * type. List getters fill at most `max_vals` entries; size the arrays with
 * TF_OpKernelConstruction_GetAttrSize. */

/* *list_size: list length, or -1 for a scalar. *total_size: for strings the total bytes,
 * for a shape its rank (-1 if unknown), for a shape list the total number of dimensions;
 * otherwise unspecified. */
TF_CAPI_EXPORT extern void TF_OpKernelConstruction_GetAttrSize(
    TF_OpKernelConstruction* ctx, const char* attr_name, int32_t* list_size,
    int32_t* total_size, TF_Status* status);

TF_CAPI_EXPORT extern void TF_OpKernelConstruction_GetAttrType(
    TF_OpKernelConstruction* ctx, const char* attr_name, TF_DataType* val,
    TF_Status* status);

TF_CAPI_EXPORT extern void TF_OpKernelConstruction_GetAttrInt32(
    TF_OpKernelConstruction* ctx, const char* attr_name, int32_t* val,
    TF_Status* status);

TF_CAPI_EXPORT extern void TF_OpKernelConstruction_GetAttrInt64(
    TF_OpKernelConstruction* ctx, const char* attr_name, int64_t* val,
    TF_Status* status);

TF_CAPI_EXPORT extern void TF_OpKernelConstruction_GetAttrFloat(
    TF_OpKernelConstruction* ctx, const char* attr_name, float* val,
    TF_Status* status);

TF_CAPI_EXPORT extern void TF_OpKernelConstruction_GetAttrBool(
    TF_OpKernelConstruction* ctx, const char* attr_name, TF_Bool* val,
    TF_Status* status);

/* Copies at most `max_length` bytes of the string into `val`, with no NUL added. */
TF_CAPI_EXPORT extern void TF_OpKernelConstruction_GetAttrString(
    TF_OpKernelConstruction* ctx, const char* attr_name, char* val,
    size_t max_length, TF_Status* status);

/* *val is a new tensor the caller deletes. */
TF_CAPI_EXPORT extern void TF_OpKernelConstruction_GetAttrTensor(
    TF_OpKernelConstruction* ctx, const char* attr_name, TF_Tensor** val,
    TF_Status* status);

TF_CAPI_EXPORT extern void TF_OpKernelConstruction_GetAttrTypeList(
    TF_OpKernelConstruction* ctx, const char* attr_name, TF_DataType* vals,
    int max_vals, TF_Status* status);

TF_CAPI_EXPORT extern void TF_OpKernelConstruction_GetAttrInt32List(
    TF_OpKernelConstruction* ctx, const char* attr_name, int32_t* vals,
    int max_vals, TF_Status* status);

TF_CAPI_EXPORT extern void TF_OpKernelConstruction_GetAttrInt64List(
    TF_OpKernelConstruction* ctx, const char* attr_name, int64_t* vals,
    int max_vals, TF_Status* status);

TF_CAPI_EXPORT extern void TF_OpKernelConstruction_GetAttrFloatList(
    TF_OpKernelConstruction* ctx, const char* attr_name, float* vals,
    int max_vals, TF_Status* status);

TF_CAPI_EXPORT extern void TF_OpKernelConstruction_GetAttrBoolList(
    TF_OpKernelConstruction* ctx, const char* attr_name, TF_Bool* vals,
    int max_vals, TF_Status* status);

/* values[i] / lengths[i] describe string i, copied (without NUL) into the caller's
 * `storage` of `storage_size` bytes. */
TF_CAPI_EXPORT extern void TF_OpKernelConstruction_GetAttrStringList(
    TF_OpKernelConstruction* ctx, const char* attr_name, char** values,
    size_t* lengths, int max_values, void* storage, size_t storage_size,
    TF_Status* status);

/* The caller deletes every non-NULL vals[i]. */
TF_CAPI_EXPORT extern void TF_OpKernelConstruction_GetAttrTensorList(
    TF_OpKernelConstruction* ctx, const char* attr_name, TF_Tensor** vals,
    int max_values, TF_Status* status);

/* A function attribute as a serialized NameAttrList; the caller deletes the buffer. */
TF_CAPI_EXPORT extern TF_Buffer* TF_OpKernelConstruction_GetAttrFunction(
    TF_OpKernelConstruction* ctx, const char* attr_name, TF_Status* status);

TF_CAPI_EXPORT extern bool TF_OpKernelConstruction_HasAttr(
    TF_OpKernelConstruction* ctx, const char* attr_name, TF_Status* status);

/* The node name of the kernel being built. */
TF_CAPI_EXPORT extern TF_StringView TF_OpKernelConstruction_GetName(
    TF_OpKernelConstruction* ctx);

/* --- memory for outputs and temporaries --- */

/* Allocates output `index` (on the device, unless it is a host-memory output) with the
 * given type and shape; `len` is its size in bytes. The caller deletes the returned handle;
 * the output itself stays set. */
TF_CAPI_EXPORT TF_Tensor* TF_AllocateOutput(TF_OpKernelContext* context,
                                            int index, TF_DataType dtype,
                                            const int64_t* dims, int num_dims,
                                            size_t len, TF_Status* status);

/* Reuses one of the candidate inputs' buffers for output `output_index` when it can, else
 * allocates. *forwarded_input (if not NULL) receives the input used, or -1. */
TF_CAPI_EXPORT TF_Tensor* TF_ForwardInputOrAllocateOutput(
    TF_OpKernelContext* context, const int* candidate_input_indices,
    int num_candidate_input_indices, int output_index,
    const int64_t* output_dims, int output_num_dims, int* forwarded_input,
    TF_Status* status);

/* A scratch tensor for the duration of compute, in host or device memory as `alloc_attrs`
 * (struct_size set) says. */
TF_CAPI_EXPORT extern TF_Tensor* TF_AllocateTemp(
    TF_OpKernelContext* context, TF_DataType dtype, const int64_t* dims,
    int num_dims, TF_AllocatorAttributes* alloc_attrs, TF_Status* status);

/* Bracket device work that outlives compute: Inc before enqueuing it, Dec once it is done,
 * so the host knows the kernel's work is still in flight. */
TF_CAPI_EXPORT extern void TF_IncNumDeferredOps(TF_OpKernelContext* context);
TF_CAPI_EXPORT extern void TF_DecNumDeferredOps(TF_OpKernelContext* context);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TENSORFLOW_C_KERNELS_H_ */
