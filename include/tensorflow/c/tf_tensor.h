/* tensorflow/c/tf_tensor.h: TF_Tensor, a shaped, typed block of memory.
 *
 * A TF_Tensor is opaque and created by the host. Every TF_Tensor* a function returns belongs
 * to the caller, who releases it with TF_DeleteTensor; the memory it describes may be shared
 * with other tensors and is freed when the last of them is deleted. Data is dense and row
 * major. In kernels, a tensor's data lives where the kernel context says: device memory
 * (an SP_DeviceMemoryBase.opaque value of the device) unless the input or output is in host
 * memory.
 */
#ifndef TENSORFLOW_C_TF_TENSOR_H_
#define TENSORFLOW_C_TF_TENSOR_H_

#include <stdbool.h>
#include <stdint.h>

#include "tensorflow/c/c_api_macros.h"
#include "tensorflow/c/tf_datatype.h"
#include "tensorflow/c/tf_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where TF_AllocateTemp places memory. Filled by the caller, struct_size included. */
typedef struct TF_AllocatorAttributes {
  size_t struct_size;
  TF_Bool on_host; /* 1: host memory; 0: the device's memory */
} TF_AllocatorAttributes;

#define TF_ALLOCATOR_ATTRIBUTES_STRUCT_SIZE \
  TF_OFFSET_OF_END(TF_AllocatorAttributes, on_host)

typedef struct TF_Tensor TF_Tensor;

/* Wraps caller-owned data[0, len) without copying. The tensor calls
 * deallocator(data, len, deallocator_arg) once nothing uses the data any more. Returns NULL,
 * after calling the deallocator, when `len` does not fit the type and shape. */
TF_CAPI_EXPORT extern TF_Tensor* TF_NewTensor(
    TF_DataType, const int64_t* dims, int num_dims, void* data, size_t len,
    void (*deallocator)(void* data, size_t len, void* arg),
    void* deallocator_arg);

/* The alignment in bytes of the data of tensors the host allocates. */
TF_CAPI_EXPORT extern size_t TF_TensorDefaultAlignment(void);

/* A tensor with fresh, aligned, uninitialized host memory of `len` bytes. */
TF_CAPI_EXPORT extern TF_Tensor* TF_AllocateTensor(TF_DataType,
                                                   const int64_t* dims,
                                                   int num_dims, size_t len);

/* Moves `tensor` into a new tensor and deletes it, when nothing else shares its data;
 * otherwise returns NULL and leaves `tensor` alone. */
TF_CAPI_EXPORT extern TF_Tensor* TF_TensorMaybeMove(TF_Tensor* tensor);

TF_CAPI_EXPORT extern void TF_DeleteTensor(TF_Tensor*);

TF_CAPI_EXPORT extern TF_DataType TF_TensorType(const TF_Tensor*);

/* Changes the shape; the element count must stay the same. */
TF_CAPI_EXPORT extern void TF_SetShape(TF_Tensor* tensor, const int64_t* dims,
                                       int num_dims);

TF_CAPI_EXPORT extern int TF_NumDims(const TF_Tensor*);

/* Requires 0 <= dim_index < TF_NumDims(tensor). */
TF_CAPI_EXPORT extern int64_t TF_Dim(const TF_Tensor* tensor, int dim_index);

TF_CAPI_EXPORT extern size_t TF_TensorByteSize(const TF_Tensor*);

/* The data pointer; device memory for device tensors. Valid while the tensor lives. */
TF_CAPI_EXPORT extern void* TF_TensorData(const TF_Tensor*);

TF_CAPI_EXPORT extern int64_t TF_TensorElementCount(const TF_Tensor* tensor);

/* Makes `to` share the data of `from`, reinterpreted as `type` with shape `new_dims`. The
 * byte sizes must be equal and neither type may be variable-sized; otherwise `status` is
 * TF_INVALID_ARGUMENT and `to` is unchanged. */
TF_CAPI_EXPORT extern void TF_TensorBitcastFrom(const TF_Tensor* from,
                                                TF_DataType type, TF_Tensor* to,
                                                const int64_t* new_dims,
                                                int num_new_dims,
                                                TF_Status* status);

/* Whether the data is aligned to TF_TensorDefaultAlignment(). */
TF_CAPI_EXPORT extern bool TF_TensorIsAligned(const TF_Tensor*);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TENSORFLOW_C_TF_TENSOR_H_ */
