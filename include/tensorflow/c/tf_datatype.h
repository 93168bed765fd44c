/* tensorflow/c/tf_datatype.h: element types of tensors.
 *
 * Values are those of TensorFlow's types.proto (TensorFlow 2.21) and never change; new types
 * only ever get new numbers. 0 is not a valid type.
 */
#ifndef TENSORFLOW_C_TF_DATATYPE_H_
#define TENSORFLOW_C_TF_DATATYPE_H_

#include <stddef.h>

#include "tensorflow/c/c_api_macros.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum TF_DataType {
  TF_FLOAT = 1,
  TF_DOUBLE = 2,
  TF_INT32 = 3, /* TensorFlow keeps int32 tensors in host memory */
  TF_UINT8 = 4,
  TF_INT16 = 5,
  TF_INT8 = 6,
  TF_STRING = 7,
  TF_COMPLEX64 = 8, /* two float32 */
  TF_COMPLEX = 8,   /* older name of TF_COMPLEX64 */
  TF_INT64 = 9,
  TF_BOOL = 10,
  TF_QINT8 = 11, /* the Q types are quantized integers */
  TF_QUINT8 = 12,
  TF_QINT32 = 13,
  TF_BFLOAT16 = 14,
  TF_QINT16 = 15,
  TF_QUINT16 = 16,
  TF_UINT16 = 17,
  TF_COMPLEX128 = 18, /* two float64 */
  TF_HALF = 19,       /* IEEE float16 */
  TF_RESOURCE = 20,
  TF_VARIANT = 21,
  TF_UINT32 = 22,
  TF_UINT64 = 23,
  /* 8-bit floats: E<exponent bits>M<mantissa bits>; FN = finite only (no infinities),
   * UZ = unsigned zero (the -0 pattern is the only NaN), B11 = exponent bias 11. */
  TF_FLOAT8_E5M2 = 24,
  TF_FLOAT8_E4M3FN = 25,
  TF_FLOAT8_E4M3FNUZ = 26,
  TF_FLOAT8_E4M3B11FNUZ = 27,
  TF_FLOAT8_E5M2FNUZ = 28,
  /* Sub-byte integers and float4. */
  TF_INT4 = 29,
  TF_UINT4 = 30,
  TF_INT2 = 31,
  TF_UINT2 = 32,
  TF_FLOAT4_E2M1FN = 33
} TF_DataType;

/* Bytes per element of `dt`; 0 for types without a fixed size (TF_STRING, TF_RESOURCE,
 * TF_VARIANT) and for unknown values. */
TF_CAPI_EXPORT extern size_t TF_DataTypeSize(TF_DataType dt);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TENSORFLOW_C_TF_DATATYPE_H_ */
