/* tensorflow/c/kernels_experimental.h: kernels that work on resource variables (and a few
 * other stateful things), with the host doing the bookkeeping. Declarations match TensorFlow
 * 2.21.
 *
 * A variable kernel receives the variable as a DT_RESOURCE input (always in host memory; its
 * bytes belong to the host) and passes that input's index to the functions below. The host
 * locks the variable, checks dtypes and shapes, allocates its memory, and calls back into
 * the plugin for the device work:
 *   copyFunc(ctx, source, dest)          copy source's bytes into dest (same shape and type);
 *   updateFunc(ctx, variable, value, op) variable op= value element-wise; op 0 adds, 1
 *                                        subtracts (TensorFlow's DenseUpdateType).
 * Callbacks enqueue their work on TF_GetStream(ctx), so it is ordered with every other
 * kernel of the device.
 *
 * In pluggable, functions that need TensorFlow's graph runtime (reference variables,
 * temporary variables, variant tensors, named inputs) set TF_UNIMPLEMENTED naming
 * themselves; include/ABI.md and docs/tensorflow-compatibility.md list which. */
#ifndef TENSORFLOW_C_KERNELS_EXPERIMENTAL_H_
#define TENSORFLOW_C_KERNELS_EXPERIMENTAL_H_

#include "tensorflow/c/c_api_macros.h"
#include "tensorflow/c/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Locks taken by TF_MaybeLockVariableInputMutexesInOrder. */
typedef struct TF_VariableInputLockHolder TF_VariableInputLockHolder;

/* Variable of input `input_index` = input `value_index` (a fresh buffer when the variable
 * is uninitialized or changes shape; with `validate_shape`, changing shape is an error). */
TF_CAPI_EXPORT extern void TF_AssignVariable(
    TF_OpKernelContext* ctx, int input_index, int value_index,
    bool validate_shape,
    void (*copyFunc)(TF_OpKernelContext* ctx, TF_Tensor* source,
                     TF_Tensor* dest),
    TF_Status* status);

/* Assignment to a reference variable (TensorFlow 1 graphs). */
TF_CAPI_EXPORT extern void TF_AssignRefVariable(
    TF_OpKernelContext* ctx, int input_ref_index, int output_ref_index,
    int value_index, bool use_locking, bool validate_shape,
    void (*copyFunc)(TF_OpKernelContext* ctx, TF_Tensor* source,
                     TF_Tensor* dest),
    TF_Status* status);

/* Variable of input `input_index` op= input `value_index` (same shape), through updateFunc;
 * `Op` is handed to updateFunc. copyFunc copies the variable first when its buffer is
 * shared. */
TF_CAPI_EXPORT extern void TF_AssignUpdateVariable(
    TF_OpKernelContext* ctx, int input_index, int value_index, int Op,
    int isVariantType,
    void (*copyFunc)(TF_OpKernelContext* ctx, TF_Tensor* source,
                     TF_Tensor* dest),
    void (*updateFunc)(TF_OpKernelContext* ctx, TF_Tensor* tensor,
                       TF_Tensor* value, int Op),
    TF_Status* status);

/* A temporary variable named `var_name` (TensorFlow 1's TemporaryVariable op). */
TF_CAPI_EXPORT extern void TF_TemporaryVariable(
    TF_OpKernelContext* ctx, TF_DataType dtype, const int64_t* dims,
    int num_dims, TF_StringView* var_name,
    void (*plugin_allocator)(TF_OpKernelContext*, TF_Tensor*, TF_DataType,
                             const int64_t*, int, TF_Status*),
    TF_Status* tf_status);

TF_CAPI_EXPORT extern void TF_DestroyTemporaryVariable(TF_OpKernelContext* ctx,
                                                       const int index,
                                                       TF_StringView* var_name,
                                                       TF_Status* tf_status);

/* Locks the variables of the `len` inputs listed (in a fixed order, so that kernels
 * locking the same variables never deadlock) when `do_lock`; `*lockHolder` must be released
 * with TF_ReleaseVariableInputLockHolder in every case. */
TF_CAPI_EXPORT extern void TF_MaybeLockVariableInputMutexesInOrder(
    TF_OpKernelContext* ctx, bool do_lock, bool sparse, const int* const inputs,
    size_t len,
    void (*copyFunc)(TF_OpKernelContext* ctx, TF_Tensor* source,
                     TF_Tensor* dest),
    TF_VariableInputLockHolder** lockHolder, TF_Status* status);

/* The current value of the variable of input `input`, sharing its memory: a kernel updates
 * the variable in place by writing through it. The caller deletes `*out`. */
TF_CAPI_EXPORT extern void TF_GetInputTensorFromVariable(
    TF_OpKernelContext* ctx, int input, bool lock_held, bool isVariantType,
    bool sparse,
    void (*copyFunc)(TF_OpKernelContext* ctx, TF_Tensor* source,
                     TF_Tensor* dest),
    TF_Tensor** out, TF_Status* status);

TF_CAPI_EXPORT extern void TF_OpKernelContext_ForwardRefInputToRefOutput(
    TF_OpKernelContext* ctx, int32_t input_index, int32_t output_index);

/* Unlocks and frees (NULL is a no-op). */
TF_CAPI_EXPORT extern void TF_ReleaseVariableInputLockHolder(
    TF_VariableInputLockHolder* lockHolder);

/* The input named `inputName` in the op's definition. */
TF_CAPI_EXPORT extern void TF_GetInputByName(TF_OpKernelContext* ctx,
                                             const char* inputName,
                                             TF_Tensor** tensor,
                                             TF_Status* status);

/* The dimensions of a shape attribute, into `dims` (`num_dims` of them). */
TF_CAPI_EXPORT extern void TF_OpKernelConstruction_GetAttrTensorShape(
    TF_OpKernelConstruction* ctx, const char* attr_name, int64_t* dims,
    size_t num_dims, TF_Status* status);

/* Whether input `i` is a reference (TensorFlow 1's ref tensors). */
TF_CAPI_EXPORT extern bool TF_IsRefInput(TF_OpKernelContext* ctx, int i,
                                         TF_Status* status);

#ifndef IS_MOBILE_PLATFORM
/* AddN and ZerosLike over variant tensors, with the plugin's functions for one element. */
TF_CAPI_EXPORT extern void TF_AddNVariant(
    TF_OpKernelContext* ctx,
    void (*binary_add_func)(TF_OpKernelContext* ctx, TF_Tensor* a, TF_Tensor* b,
                            TF_Tensor* out),
    TF_Status* status);

TF_CAPI_EXPORT extern void TF_ZerosLikeVariant(
    TF_OpKernelContext* ctx,
    void (*zeros_like_func)(TF_OpKernelContext* ctx, TF_Tensor* input,
                            TF_Tensor* out),
    TF_Status* status);

typedef struct TF_CoordinationServiceAgent TF_CoordinationServiceAgent;
#endif

#ifdef __cplusplus
}
#endif

#endif
