"""Element types of tensors: TensorFlow's names and ``TF_DataType`` codes, NumPy's dtypes.

``bfloat16`` comes from ``ml_dtypes``, as in TensorFlow and JAX.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

import ml_dtypes
import numpy as np

from ..abi.tf_datatype import TF_DataType
from .errors import InvalidArgumentError

__all__ = ["DType", "as_dtype", "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16",
           "uint32", "uint64", "float16", "bfloat16", "float32", "float64", "complex64",
           "complex128", "ALL_DTYPES", "WITHOUT_TENSORS", "op_dtype", "has_tensors"]


class DType:
    """A tensor element type. Compares equal to its name, its NumPy dtype and its
    ``TF_DataType`` code's DType, so ``t.dtype == "float32"`` and ``t.dtype == np.float32``
    both work."""

    __slots__ = ("name", "numpy_dtype", "tf_code", "code", "itemsize")

    def __init__(self, name: str, numpy_dtype: Any, tf_code: TF_DataType):
        self.name = name
        self.numpy_dtype = np.dtype(numpy_dtype)
        self.tf_code = tf_code
        self.code = int(tf_code)  # a plain int: cheap to hash and to hand to C
        self.itemsize = self.numpy_dtype.itemsize

    @property
    def is_floating(self) -> bool:
        return self.name in ("float16", "bfloat16", "float32", "float64")

    @property
    def is_complex(self) -> bool:
        return self.name.startswith("complex")

    @property
    def is_integer(self) -> bool:
        return self.name.startswith(("int", "uint"))

    @property
    def is_bool(self) -> bool:
        return self.name == "bool"

    def __eq__(self, other) -> bool:
        if isinstance(other, DType):
            return other is self
        try:
            return as_dtype(other) is self
        except (TypeError, InvalidArgumentError):
            return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"pluggable.{self.name if self.name != 'bool' else 'bool_'}"


bool_ = DType("bool", np.bool_, TF_DataType.TF_BOOL)
int8 = DType("int8", np.int8, TF_DataType.TF_INT8)
int16 = DType("int16", np.int16, TF_DataType.TF_INT16)
int32 = DType("int32", np.int32, TF_DataType.TF_INT32)
int64 = DType("int64", np.int64, TF_DataType.TF_INT64)
uint8 = DType("uint8", np.uint8, TF_DataType.TF_UINT8)
uint16 = DType("uint16", np.uint16, TF_DataType.TF_UINT16)
uint32 = DType("uint32", np.uint32, TF_DataType.TF_UINT32)
uint64 = DType("uint64", np.uint64, TF_DataType.TF_UINT64)
float16 = DType("float16", np.float16, TF_DataType.TF_HALF)
bfloat16 = DType("bfloat16", ml_dtypes.bfloat16, TF_DataType.TF_BFLOAT16)
float32 = DType("float32", np.float32, TF_DataType.TF_FLOAT)
float64 = DType("float64", np.float64, TF_DataType.TF_DOUBLE)
complex64 = DType("complex64", np.complex64, TF_DataType.TF_COMPLEX64)
complex128 = DType("complex128", np.complex128, TF_DataType.TF_COMPLEX128)

ALL_DTYPES = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16,
              bfloat16, float32, float64, complex64, complex128)

_BY_NAME: Dict[str, DType] = {d.name: d for d in ALL_DTYPES}
_BY_NAME.update({"float": float32, "double": float64, "half": float16, "bool_": bool_})
_BY_NUMPY: Dict[np.dtype, DType] = {d.numpy_dtype: d for d in ALL_DTYPES}
_BY_CODE: Dict[int, DType] = {int(d.tf_code): d for d in ALL_DTYPES}


def as_dtype(value: Any) -> DType:
    """The DType named or described by ``value``: a DType, a name ("float32"), a NumPy dtype
    or scalar type, or a ``TF_DataType`` code."""
    if isinstance(value, DType):
        return value
    if isinstance(value, TF_DataType):
        return from_code(value)
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    try:
        numpy_dtype = np.dtype(value)
    except TypeError:
        raise TypeError(f"cannot interpret {value!r} as a tensor element type; "
                        f"supported: {_supported()}") from None
    found = _BY_NUMPY.get(numpy_dtype)
    if found is None and numpy_dtype.byteorder not in ("=", "|") and \
            _BY_NUMPY.get(numpy_dtype.newbyteorder("=")) is not None:
        native = numpy_dtype.newbyteorder("=")
        raise InvalidArgumentError(
            f"element type {numpy_dtype.str!r} is {native.name} in the non-native byte order; "
            f"tensors hold native-order data: convert first with "
            f"array.astype({native.name!r})", call="dtype")
    if found is None:
        raise InvalidArgumentError(
            f"element type {numpy_dtype} ({value!r}) is not supported; supported: "
            f"{_supported()}", call="dtype")
    return found


def from_code(code: int) -> DType:
    """The DType of a ``TF_DataType`` code; `InvalidArgumentError` for codes with none."""
    found = _BY_CODE.get(int(code))
    if found is None:
        raise InvalidArgumentError(f"TF_DataType code {code} is not a supported tensor "
                                   f"element type; supported: {_supported()}", call="dtype")
    return found


def type_names(codes) -> Tuple[str, ...]:
    """The names of ``TF_DataType`` codes in the order of `ALL_DTYPES`, unknown codes last
    as "type code N": how messages and `list_kernels` spell a set of types."""
    order = {d.code: i for i, d in enumerate(ALL_DTYPES + WITHOUT_TENSORS)}
    return tuple(_OP_BY_CODE[c].name if c in _OP_BY_CODE else f"type code {c}"
                 for c in sorted({int(c) for c in codes}, key=lambda c: (order.get(c, 99), c)))


def _supported() -> str:
    return ", ".join(d.name for d in ALL_DTYPES)


# DT_RESOURCE: a handle to a resource variable (resource_ops.py). Its one element is the
# runtime's variable handle, in host memory; it is not a numeric type, so it is not among
# ALL_DTYPES (tensor() never makes one) but it has a name and a code.
resource = DType("resource", np.int64, TF_DataType.TF_RESOURCE)
_BY_NAME["resource"] = resource
_BY_CODE[int(resource.tf_code)] = resource


# The other element types of tensorflow/c/tf_datatype.h. Ops and kernels of plugins may name
# them (an op's "x: qint8", "T: quantizedtype", a kernel's TypeConstraint); tensors of them are
# not supported here yet, so they are not among ALL_DTYPES and `as_dtype` does not return
# them: `op_dtype` does, and a call that needs one raises UnimplementedError naming it.
_NO_TENSORS: Dict[str, Tuple[TF_DataType, int]] = {
    "string": (TF_DataType.TF_STRING, 24), "qint8": (TF_DataType.TF_QINT8, 1),
    "quint8": (TF_DataType.TF_QUINT8, 1), "qint32": (TF_DataType.TF_QINT32, 4),
    "qint16": (TF_DataType.TF_QINT16, 2), "quint16": (TF_DataType.TF_QUINT16, 2),
    "variant": (TF_DataType.TF_VARIANT, 8),
    "float8_e5m2": (TF_DataType.TF_FLOAT8_E5M2, 1),
    "float8_e4m3fn": (TF_DataType.TF_FLOAT8_E4M3FN, 1),
    "float8_e4m3fnuz": (TF_DataType.TF_FLOAT8_E4M3FNUZ, 1),
    "float8_e4m3b11fnuz": (TF_DataType.TF_FLOAT8_E4M3B11FNUZ, 1),
    "float8_e5m2fnuz": (TF_DataType.TF_FLOAT8_E5M2FNUZ, 1),
    "int4": (TF_DataType.TF_INT4, 1), "uint4": (TF_DataType.TF_UINT4, 1),
    "int2": (TF_DataType.TF_INT2, 1), "uint2": (TF_DataType.TF_UINT2, 1),
    "float4_e2m1fn": (TF_DataType.TF_FLOAT4_E2M1FN, 1),
}
WITHOUT_TENSORS: Tuple[DType, ...] = tuple(
    DType(name, np.dtype((np.void, size)), code) for name, (code, size) in _NO_TENSORS.items())
_OP_BY_NAME: Dict[str, DType] = {**_BY_NAME, **{d.name: d for d in WITHOUT_TENSORS}}
_OP_BY_CODE: Dict[int, DType] = {**_BY_CODE, **{d.code: d for d in WITHOUT_TENSORS}}
_NO_TENSOR_CODES = frozenset(d.code for d in WITHOUT_TENSORS)


def op_dtype(value: Any) -> DType:
    """The DType of a name ("qint8", "float", "DT_HALF"), a ``TF_DataType`` code or a DType,
    among every type of tensorflow/c/tf_datatype.h, those tensors here cannot hold included
    (`has_tensors` tells). InvalidArgumentError for anything else."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        name = value.strip()
        if name.startswith("DT_"):
            name = name[3:].lower()
        found = _OP_BY_NAME.get(name)
    elif isinstance(value, int) and not isinstance(value, bool):
        found = _OP_BY_CODE.get(int(value))
    else:
        found = None
    if found is None:
        raise InvalidArgumentError(
            f"{value!r} is not a type of tensorflow/c/tf_datatype.h (types: "
            f"{', '.join(sorted(_OP_BY_NAME))})", call="dtype")
    return found


def has_tensors(dtype: DType) -> bool:
    """Whether tensors of ``dtype`` exist here (False for qint8, string, variant, ...)."""
    return dtype.code not in _NO_TENSOR_CODES
