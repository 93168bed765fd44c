"""tf_tensor.h, tf_datatype.h and tf_buffer.h as the runtime library implements them,
called through ctypes the way a plugin calls them from C."""
from __future__ import annotations

import ctypes

import pytest

from pluggable.base import native as _native
from pluggable.abi.tf_datatype import TF_DataType
from pluggable.abi.tf_status import TF_Code
from pluggable.abi.tf_tensor import TF_NewTensor_deallocator_fn

# A handle of our own on the runtime library: its function objects (and their argtypes) are
# not the ones pluggable itself uses.
lib = ctypes.CDLL(_native.RUNTIME_LIBRARY_PATH)
_p, _i64p = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)
for name, restype, argtypes in [
    ("TF_DataTypeSize", ctypes.c_size_t, [ctypes.c_int]),
    ("TF_AllocateTensor", _p, [ctypes.c_int, _i64p, ctypes.c_int, ctypes.c_size_t]),
    ("TF_NewTensor", _p, [ctypes.c_int, _i64p, ctypes.c_int, _p, ctypes.c_size_t,
                          TF_NewTensor_deallocator_fn, _p]),
    ("TF_DeleteTensor", None, [_p]),
    ("TF_TensorMaybeMove", _p, [_p]),
    ("TF_TensorType", ctypes.c_int, [_p]),
    ("TF_SetShape", None, [_p, _i64p, ctypes.c_int]),
    ("TF_NumDims", ctypes.c_int, [_p]),
    ("TF_Dim", ctypes.c_int64, [_p, ctypes.c_int]),
    ("TF_TensorByteSize", ctypes.c_size_t, [_p]),
    ("TF_TensorData", _p, [_p]),
    ("TF_TensorElementCount", ctypes.c_int64, [_p]),
    ("TF_TensorBitcastFrom", None, [_p, ctypes.c_int, _p, _i64p, ctypes.c_int, _p]),
    ("TF_TensorIsAligned", ctypes.c_bool, [_p]),
    ("TF_TensorDefaultAlignment", ctypes.c_size_t, []),
]:
    getattr(lib, name).restype = restype
    getattr(lib, name).argtypes = argtypes


class TF_Buffer(ctypes.Structure):
    _fields_ = [("data", _p), ("length", ctypes.c_size_t),
                ("data_deallocator", ctypes.CFUNCTYPE(None, _p, ctypes.c_size_t))]


lib.TF_NewBuffer.restype = ctypes.POINTER(TF_Buffer)
lib.TF_NewBufferFromString.restype = ctypes.POINTER(TF_Buffer)
lib.TF_NewBufferFromString.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
lib.TF_DeleteBuffer.argtypes = [ctypes.POINTER(TF_Buffer)]
lib.TF_GetBuffer.restype = TF_Buffer
lib.TF_GetBuffer.argtypes = [ctypes.POINTER(TF_Buffer)]


def dims(*values):
    return (ctypes.c_int64 * max(1, len(values)))(*values), len(values)


class Deallocations:
    """A TF_NewTensor deallocator that records its calls."""

    def __init__(self):
        self.calls = []
        self.fn = TF_NewTensor_deallocator_fn(lambda data, n, arg: self.calls.append((data, n)))


@pytest.mark.parametrize("dtype, size", [
    ("TF_FLOAT", 4), ("TF_DOUBLE", 8), ("TF_INT32", 4), ("TF_UINT8", 1), ("TF_INT16", 2),
    ("TF_INT8", 1), ("TF_STRING", 0), ("TF_COMPLEX64", 8), ("TF_INT64", 8), ("TF_BOOL", 1),
    ("TF_QINT8", 1), ("TF_QUINT8", 1), ("TF_QINT32", 4), ("TF_BFLOAT16", 2), ("TF_QINT16", 2),
    ("TF_QUINT16", 2), ("TF_UINT16", 2), ("TF_COMPLEX128", 16), ("TF_HALF", 2),
    ("TF_RESOURCE", 0), ("TF_VARIANT", 0), ("TF_UINT32", 4), ("TF_UINT64", 8),
    ("TF_FLOAT8_E5M2", 1), ("TF_FLOAT8_E4M3FN", 1), ("TF_INT4", 1), ("TF_UINT4", 1),
])
def test_data_type_sizes(dtype, size):
    assert lib.TF_DataTypeSize(int(TF_DataType[dtype])) == size


def test_data_type_size_of_unknown_values_is_zero():
    assert [lib.TF_DataTypeSize(v) for v in (0, 34, 101, -1)] == [0, 0, 0, 0]


def test_allocate_tensor():
    shape, n = dims(2, 3, 4)
    t = lib.TF_AllocateTensor(TF_DataType.TF_FLOAT, shape, n, 96)
    try:
        assert lib.TF_TensorType(t) == TF_DataType.TF_FLOAT
        assert [lib.TF_Dim(t, i) for i in range(lib.TF_NumDims(t))] == [2, 3, 4]
        assert (lib.TF_TensorElementCount(t), lib.TF_TensorByteSize(t)) == (24, 96)
        assert lib.TF_TensorData(t) % 64 == 0 and lib.TF_TensorIsAligned(t)
        assert lib.TF_TensorDefaultAlignment() == 64
        assert lib.TF_Dim(t, 3) == -1 and lib.TF_Dim(t, -1) == -1
        ctypes.memset(lib.TF_TensorData(t), 0, 96)  # the memory is really there
        assert lib.TF_TensorMaybeMove(t) == t        # owned and unshared: movable
    finally:
        lib.TF_DeleteTensor(t)
    # Too small a buffer for the shape, or a bad shape: NULL.
    assert lib.TF_AllocateTensor(TF_DataType.TF_FLOAT, shape, n, 95) is None
    bad, m = dims(2, -1)
    assert lib.TF_AllocateTensor(TF_DataType.TF_FLOAT, bad, m, 0) is None
    # Scalars, empty tensors, and a rank above the inline limit.
    scalar = lib.TF_AllocateTensor(TF_DataType.TF_INT64, None, 0, 8)
    empty = lib.TF_AllocateTensor(TF_DataType.TF_INT64, *dims(0, 5), 0)
    high, rank = dims(*([1] * 10 + [3]))
    deep = lib.TF_AllocateTensor(TF_DataType.TF_INT8, high, rank, 3)
    assert (lib.TF_NumDims(scalar), lib.TF_TensorElementCount(scalar)) == (0, 1)
    assert (lib.TF_TensorElementCount(empty), lib.TF_TensorData(empty)) == (0, None)
    assert (lib.TF_NumDims(deep), lib.TF_Dim(deep, 10)) == (11, 3)
    for t in (scalar, empty, deep):
        lib.TF_DeleteTensor(t)
    lib.TF_DeleteTensor(None)


def test_new_tensor_wraps_without_copying_and_calls_the_deallocator_once():
    buffer = (ctypes.c_float * 8)()
    record = Deallocations()
    shape, n = dims(2, 4)
    t = lib.TF_NewTensor(TF_DataType.TF_FLOAT, shape, n, ctypes.addressof(buffer), 32,
                         record.fn, None)
    assert lib.TF_TensorData(t) == ctypes.addressof(buffer)
    assert lib.TF_TensorMaybeMove(t) is None  # the caller's memory: not movable
    lib.TF_DeleteTensor(t)
    assert record.calls == [(ctypes.addressof(buffer), 32)]
    # Unaligned data is wrapped as it is (TensorFlow would copy host data).
    t = lib.TF_NewTensor(TF_DataType.TF_UINT8, *dims(3), ctypes.addressof(buffer) + 1, 3,
                         record.fn, None)
    assert lib.TF_TensorData(t) == ctypes.addressof(buffer) + 1
    assert not lib.TF_TensorIsAligned(t)
    lib.TF_DeleteTensor(t)
    # A length too short for the shape: NULL, after the deallocator ran.
    assert lib.TF_NewTensor(TF_DataType.TF_FLOAT, shape, n, ctypes.addressof(buffer), 31,
                            record.fn, None) is None
    assert len(record.calls) == 3


def test_set_shape_keeps_the_element_count():
    t = lib.TF_AllocateTensor(TF_DataType.TF_INT32, *dims(6), 24)
    lib.TF_SetShape(t, *dims(2, 3))
    assert [lib.TF_Dim(t, i) for i in range(lib.TF_NumDims(t))] == [2, 3]
    lib.TF_SetShape(t, *dims(4, 2))  # 8 elements: ignored
    assert [lib.TF_Dim(t, i) for i in range(lib.TF_NumDims(t))] == [2, 3]
    lib.TF_DeleteTensor(t)


def test_bitcast_shares_the_bytes_until_the_last_tensor_goes():
    status = _native.Status()
    record = Deallocations()
    buffer = (ctypes.c_float * 4)()
    src = lib.TF_NewTensor(TF_DataType.TF_FLOAT, *dims(4), ctypes.addressof(buffer), 16,
                           record.fn, None)
    dst = lib.TF_AllocateTensor(TF_DataType.TF_INT8, *dims(1), 1)
    lib.TF_TensorBitcastFrom(src, TF_DataType.TF_INT16, dst, *dims(2, 4), status.address)
    assert status.ok
    assert lib.TF_TensorData(dst) == ctypes.addressof(buffer)
    assert (lib.TF_TensorType(dst), lib.TF_TensorElementCount(dst)) == (TF_DataType.TF_INT16, 8)
    lib.TF_DeleteTensor(src)
    assert record.calls == []  # dst still uses the bytes
    # Incompatible sizes and zero-sized types are refused, leaving `to` unchanged.
    lib.TF_TensorBitcastFrom(dst, TF_DataType.TF_INT32, dst, *dims(3), status.address)
    assert status.code == TF_Code.TF_INVALID_ARGUMENT and "not compatible" in status.message
    lib.TF_TensorBitcastFrom(dst, TF_DataType.TF_STRING, dst, *dims(1), status.address)
    assert status.code == TF_Code.TF_INVALID_ARGUMENT and "zero-sized" in status.message
    assert (lib.TF_TensorType(dst), lib.TF_NumDims(dst)) == (TF_DataType.TF_INT16, 2)
    lib.TF_DeleteTensor(dst)
    assert record.calls == [(ctypes.addressof(buffer), 16)]


def test_a_shared_tensor_cannot_move():
    status = _native.Status()
    a = lib.TF_AllocateTensor(TF_DataType.TF_FLOAT, *dims(2), 8)
    b = lib.TF_AllocateTensor(TF_DataType.TF_FLOAT, *dims(2), 8)
    lib.TF_TensorBitcastFrom(a, TF_DataType.TF_FLOAT, b, *dims(2), status.address)
    assert lib.TF_TensorMaybeMove(a) is None
    lib.TF_DeleteTensor(b)
    assert lib.TF_TensorMaybeMove(a) == a
    lib.TF_DeleteTensor(a)


def test_buffers():
    b = lib.TF_NewBufferFromString(b"proto\x00bytes", 11)
    assert ctypes.string_at(b.contents.data, b.contents.length) == b"proto\x00bytes"
    copy = lib.TF_GetBuffer(b)
    assert (copy.data, copy.length) == (b.contents.data, 11)
    lib.TF_DeleteBuffer(b)
    empty = lib.TF_NewBuffer()
    assert (empty.contents.data, empty.contents.length) == (None, 0)
    freed = []
    keep = ctypes.create_string_buffer(b"abc")
    empty.contents.data = ctypes.addressof(keep)
    empty.contents.length = 3
    empty.contents.data_deallocator = TF_Buffer._fields_[2][1](
        lambda data, n: freed.append((data, n)))
    lib.TF_DeleteBuffer(empty)
    assert freed == [(ctypes.addressof(keep), 3)]
    lib.TF_DeleteBuffer(None)
