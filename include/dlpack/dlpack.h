/* dlpack/dlpack.h: DLPack 1.1, the in-memory tensor structure frameworks exchange.
 *
 * DLPack (https://github.com/dmlc/dlpack) is a small C ABI that lets one library hand a
 * tensor to another without copying it: a pointer, a device, a shape, strides and an
 * element type, plus a deleter through which the consumer tells the producer it is done.
 * This header reproduces the layouts, enum values, macro names and values of DLPack 1.1, so
 * code written against the upstream header builds against this one; the text is this
 * project's. Python libraries pass these structs inside PyCapsules (see the Python array API
 * standard, `__dlpack__` / `__dlpack_device__`):
 *
 *   "dltensor_versioned"  a DLManagedTensorVersioned*, renamed "used_dltensor_versioned" by
 *                         the consumer that takes ownership;
 *   "dltensor"            the legacy DLManagedTensor*, renamed "used_dltensor".
 *
 * Ownership: the consumer that takes a managed tensor calls its `deleter` exactly once, when
 * it no longer needs the memory; a capsule never consumed calls it when it is destroyed.
 * Versioning: `version`, `manager_ctx` and `deleter` of DLManagedTensorVersioned are a frozen
 * prefix. A consumer that sees another major version must read nothing past `deleter` and
 * only call the deleter. A minor version may add enum values and flag bits, never change
 * a layout.
 */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1

/* Symbol visibility for libraries that export DLPack functions on Windows. */
#ifdef _WIN32
#ifdef DLPACK_EXPORTS
#define DLPACK_DLL __declspec(dllexport)
#else
#define DLPACK_DLL __declspec(dllimport)
#endif
#else
#define DLPACK_DLL
#endif

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version a managed tensor follows. */
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

/* Where the memory lives. The values are fixed: 5 and 6 were used once and are never
 * reused. */
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,          /* host memory; device_id is 0 */
  kDLCUDA = 2,         /* CUDA device memory */
  kDLCUDAHost = 3,     /* CUDA pinned host memory (cudaMallocHost) */
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,        /* ROCm device memory */
  kDLROCMHost = 11,    /* ROCm pinned host memory */
  kDLExtDev = 12,      /* a device not listed here: meaning agreed between the two sides */
  kDLCUDAManaged = 13, /* CUDA unified memory (cudaMallocManaged) */
  kDLOneAPI = 14,      /* oneAPI unified shared memory */
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
} DLDeviceType;

/* A device: its type and its index among the devices of that type. */
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

/* The kind of number an element is; DLDataType.code holds one of these. */
typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U, /* an opaque pointer-sized handle */
  kDLBfloat = 4U,
  kDLComplex = 5U,      /* bits counts both parts: 64 is two float32 */
  kDLBool = 6U,         /* stored in 8 bits */
  /* Since 1.1: narrow floating-point formats, named as in the ml_dtypes package. */
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U, /* bits is 6 */
  kDLFloat6_e3m2fn = 16U, /* bits is 6 */
  kDLFloat4_e2m1fn = 17U, /* bits is 4 */
} DLDataTypeCode;

/* An element type: float32 is {kDLFloat, 32, 1}; complex64 is {kDLComplex, 64, 1}; a vector
 * of four float32 per element is {kDLFloat, 32, 4}. */
typedef struct {
  uint8_t code;   /* a DLDataTypeCode */
  uint8_t bits;   /* bits of one lane */
  uint16_t lanes; /* lanes per element; 1 for scalars */
} DLDataType;

/* A tensor: no ownership, just a description of memory. */
typedef struct {
  /* The base address. On kDLCPU and CUDA-like devices it is the address of the memory; on
   * other devices it may be an opaque handle, which is why `byte_offset` exists. The first
   * element is at (char*)data + byte_offset. */
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  /* ndim extents; may be NULL when ndim is 0. */
  int64_t* shape;
  /* ndim strides counted in elements, not bytes; NULL means compact row-major. */
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

/* The legacy managed tensor (DLPack before 1.0; capsule name "dltensor"). It has no version
 * and no flags. */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx; /* the producer's own data, for the deleter */
  /* Frees the tensor and whatever keeps its memory alive, `self` included. */
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

/* Bits of DLManagedTensorVersioned.flags. */
/* The consumer must not write to the memory (it may be shared or constant). */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
/* The producer made this memory for the consumer alone (a copy): writing to it affects no
 * other user. */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
/* Since 1.1: sub-byte elements (bits < 8) are each padded to a whole byte. */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

/* The managed tensor of DLPack 1.x (capsule name "dltensor_versioned"). `version`,
 * `manager_ctx` and `deleter` come first and never move, so a consumer of any version can
 * free a tensor of any version. */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx; /* the producer's own data, for the deleter */
  /* Frees the tensor and whatever keeps its memory alive, `self` included. DLPack allows it
   * to be NULL when there is nothing to free. */
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags; /* DLPACK_FLAG_BITMASK_* */
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLPACK_DLPACK_H_ */
