/* xpu_kernels_dtypes.c: the dtypes the XPU kernels handle.
 *
 * Holds:
 *   xpu_types_F, xpu_types_N, xpu_types_NB, xpu_types_CAST, xpu_types_MATMUL, xpu_types_FIXED
 *                    the type lists of the kernels' registration tables (each ends with 0)
 *   xpu_dtype_size   bytes per element of the fixed-size types (0 for others)
 *   xpu_dtype_name   "float", "int32", ...: for messages and kernel names
 */
#include "xpu_kernels.h"

const TF_DataType xpu_types_F[] = {TF_FLOAT, TF_DOUBLE, 0};
const TF_DataType xpu_types_N[] = {TF_FLOAT, TF_DOUBLE, TF_INT32, TF_INT64, 0};
const TF_DataType xpu_types_NB[] = {TF_FLOAT, TF_DOUBLE, TF_INT32, TF_INT64, TF_BOOL, 0};
const TF_DataType xpu_types_CAST[] = {TF_BOOL,   TF_INT32, TF_INT64,    TF_FLOAT,
                                      TF_DOUBLE, TF_HALF,  TF_BFLOAT16, 0};
const TF_DataType xpu_types_MATMUL[] = {TF_FLOAT, TF_DOUBLE, TF_INT32, TF_INT64, 0};
const TF_DataType xpu_types_FIXED[] = {
    TF_FLOAT,  TF_DOUBLE, TF_INT32,  TF_INT64,    TF_BOOL,   TF_HALF,   TF_BFLOAT16, TF_INT8,
    TF_INT16,  TF_UINT8,  TF_UINT16, TF_UINT32,   TF_UINT64, TF_COMPLEX64, TF_COMPLEX128, 0};

size_t xpu_dtype_size(TF_DataType dt) {
  switch (dt) {
    case TF_BOOL: case TF_INT8: case TF_UINT8: return 1;
    case TF_HALF: case TF_BFLOAT16: case TF_INT16: case TF_UINT16: return 2;
    case TF_FLOAT: case TF_INT32: case TF_UINT32: return 4;
    case TF_DOUBLE: case TF_INT64: case TF_UINT64: case TF_COMPLEX64: return 8;
    case TF_COMPLEX128: return 16;
    default: return 0;
  }
}

const char* xpu_dtype_name(TF_DataType dt) {
  switch (dt) {
    case TF_FLOAT: return "float";
    case TF_DOUBLE: return "double";
    case TF_INT32: return "int32";
    case TF_INT64: return "int64";
    case TF_BOOL: return "bool";
    case TF_HALF: return "half";
    case TF_BFLOAT16: return "bfloat16";
    case TF_INT8: return "int8";
    case TF_INT16: return "int16";
    case TF_UINT8: return "uint8";
    case TF_UINT16: return "uint16";
    case TF_UINT32: return "uint32";
    case TF_UINT64: return "uint64";
    case TF_COMPLEX64: return "complex64";
    case TF_COMPLEX128: return "complex128";
    default: return "unsupported type";
  }
}
