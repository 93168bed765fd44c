"""Mirror of include/dlpack/dlpack.h (DLPack 1.1): the structs frameworks exchange tensors
through, their enums, version and flag bits.

None of these structs carries ``struct_size``: DLPack versions the managed tensor by its
``version`` field instead, whose first three fields are frozen.
"""

from __future__ import annotations

import enum
from ctypes import CFUNCTYPE, POINTER, c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64, \
    c_void_p

from ._struct import ABIStruct

DLPACK_MAJOR_VERSION = 1
DLPACK_MINOR_VERSION = 1

DLPACK_FLAG_BITMASK_READ_ONLY = 1 << 0
DLPACK_FLAG_BITMASK_IS_COPIED = 1 << 1
DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED = 1 << 2


class DLDeviceType(enum.IntEnum):
    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17


class DLDataTypeCode(enum.IntEnum):
    kDLInt = 0
    kDLUInt = 1
    kDLFloat = 2
    kDLOpaqueHandle = 3
    kDLBfloat = 4
    kDLComplex = 5
    kDLBool = 6
    kDLFloat8_e3m4 = 7
    kDLFloat8_e4m3 = 8
    kDLFloat8_e4m3b11fnuz = 9
    kDLFloat8_e4m3fn = 10
    kDLFloat8_e4m3fnuz = 11
    kDLFloat8_e5m2 = 12
    kDLFloat8_e5m2fnuz = 13
    kDLFloat8_e8m0fnu = 14
    kDLFloat6_e2m3fn = 15
    kDLFloat6_e3m2fn = 16
    kDLFloat4_e2m1fn = 17


class DLPackVersion(ABIStruct):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLDevice(ABIStruct):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]  # device_type: DLDeviceType


class DLDataType(ABIStruct):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(ABIStruct):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


# void (*deleter)(struct DLManagedTensor* self); the same shape for the versioned struct.
DLManagedTensor_deleter = CFUNCTYPE(None, c_void_p)
DLManagedTensorVersioned_deleter = DLManagedTensor_deleter


class DLManagedTensor(ABIStruct):
    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", c_void_p),
        ("deleter", DLManagedTensor_deleter),
    ]


class DLManagedTensorVersioned(ABIStruct):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", c_void_p),
        ("deleter", DLManagedTensorVersioned_deleter),
        ("flags", c_uint64),
        ("dl_tensor", DLTensor),
    ]


STRUCTS = (DLPackVersion, DLDevice, DLDataType, DLTensor, DLManagedTensor,
           DLManagedTensorVersioned)
