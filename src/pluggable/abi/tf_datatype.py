"""Mirror of tensorflow/c/tf_datatype.h: the TF_DataType enum."""

from __future__ import annotations

import enum


class TF_DataType(enum.IntEnum):
    """Element types of tensors (TensorFlow's types.proto values)."""

    TF_FLOAT = 1
    TF_DOUBLE = 2
    TF_INT32 = 3
    TF_UINT8 = 4
    TF_INT16 = 5
    TF_INT8 = 6
    TF_STRING = 7
    TF_COMPLEX64 = 8
    TF_COMPLEX = 8  # alias of TF_COMPLEX64, as in C
    TF_INT64 = 9
    TF_BOOL = 10
    TF_QINT8 = 11
    TF_QUINT8 = 12
    TF_QINT32 = 13
    TF_BFLOAT16 = 14
    TF_QINT16 = 15
    TF_QUINT16 = 16
    TF_UINT16 = 17
    TF_COMPLEX128 = 18
    TF_HALF = 19
    TF_RESOURCE = 20
    TF_VARIANT = 21
    TF_UINT32 = 22
    TF_UINT64 = 23
    TF_FLOAT8_E5M2 = 24
    TF_FLOAT8_E4M3FN = 25
    TF_FLOAT8_E4M3FNUZ = 26
    TF_FLOAT8_E4M3B11FNUZ = 27
    TF_FLOAT8_E5M2FNUZ = 28
    TF_INT4 = 29
    TF_UINT4 = 30
    TF_INT2 = 31
    TF_UINT2 = 32
    TF_FLOAT4_E2M1FN = 33
