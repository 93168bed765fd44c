"""The functions of TensorFlow's client C API that real plugins import and the runtime
provides (src/pluggable/_runtime/c_api.c, tensor_proto.c): TF_Version, TF_GetAllOpList,
TF_GetRegisteredKernelsForOp, TF_GetAllRegisteredKernels, TF_OpIsStateful,
TF_GetXlaAutoJitEnabled and TF_TensorFromProto. Their protos are checked against
TensorFlow's own (in a separate interpreter: TensorFlow exports the same functions) when it
is installed."""
from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import pluggable
import pluggable.eager  # noqa: F401  (the resource ops join the op library)
from pluggable.base import native
from pluggable.base.proto import integer, message, packed, varint
from pluggable.kernels import c_api  # noqa: F401  (installs the runtime's query)

lib = native.lib
_p = ctypes.c_void_p
for name, restype, argtypes in [
        ("TF_Version", ctypes.c_char_p, []),
        ("TF_GetAllOpList", _p, []),
        ("TF_GetRegisteredKernelsForOp", _p, [ctypes.c_char_p, _p]),
        ("TF_GetAllRegisteredKernels", _p, [_p]),
        ("TF_OpIsStateful", ctypes.c_int, [ctypes.c_char_p, _p]),
        ("TF_GetXlaAutoJitEnabled", ctypes.c_ubyte, []),
        ("TF_TensorFromProto", None, [_p, _p, _p]),
        ("TF_NewBufferFromString", _p, [ctypes.c_char_p, ctypes.c_size_t]),
        ("TF_DeleteBuffer", None, [_p]),
        ("TF_AllocateTensor", _p, [ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
                                   ctypes.c_size_t]),
        ("TF_DeleteTensor", None, [_p]),
        ("TF_TensorType", ctypes.c_int, [_p]),
        ("TF_NumDims", ctypes.c_int, [_p]),
        ("TF_Dim", ctypes.c_int64, [_p, ctypes.c_int]),
        ("TF_TensorByteSize", ctypes.c_size_t, [_p]),
        ("TF_TensorData", _p, [_p])]:
    getattr(lib, name).restype = restype
    getattr(lib, name).argtypes = argtypes

HAS_TENSORFLOW = importlib.util.find_spec("tensorflow") is not None


class TF_Buffer(ctypes.Structure):
    _fields_ = [("data", _p), ("length", ctypes.c_size_t), ("data_deallocator", _p)]


def take(buffer: int) -> bytes:
    """The bytes of a TF_Buffer the runtime returned; the buffer is deleted."""
    view = TF_Buffer.from_address(buffer)
    data = ctypes.string_at(view.data, view.length) if view.length else b""
    lib.TF_DeleteBuffer(buffer)
    return data


def in_tensorflow(code: str) -> dict:
    """Runs ``code`` in an interpreter with TensorFlow and returns its last line as JSON."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_version_and_xla():
    assert lib.TF_Version() == b"2.21.0"
    assert lib.TF_GetXlaAutoJitEnabled() == 0


def test_op_is_stateful():
    status = native.Status()
    assert lib.TF_OpIsStateful(b"RandomUniform", status.address) == 1 and status.ok
    assert lib.TF_OpIsStateful(b"AssignAddVariableOp", status.address) == 1 and status.ok
    assert lib.TF_OpIsStateful(b"AddV2", status.address) == 0 and status.ok
    assert lib.TF_OpIsStateful(b"NoSuchOp", status.address) == 0
    assert status.code == 5  # TF_NOT_FOUND
    assert status.message == "Op type not registered 'NoSuchOp' in pluggable's op library"


def test_kernels_of_an_op_name_the_cpus_and_the_plugins(xpu_platform):
    status = native.Status()
    data = take(lib.TF_GetRegisteredKernelsForOp(b"MatMul", status.address))
    assert status.ok
    # KernelDefs begin with op (field 1) and device_type (field 2).
    assert b"\x0a\x06MatMul\x12\x03CPU" in data and b"\x0a\x06MatMul\x12\x03XPU" in data
    assert lib.TF_GetRegisteredKernelsForOp(b"NoSuchOp", status.address) is None
    assert status.code == 5
    everything = take(lib.TF_GetAllRegisteredKernels(status.address))
    first = data[:2 + data[1]]  # the first KernelDef, the CPU's
    assert status.ok and len(everything) > len(data) and first in everything


def test_the_op_list_holds_every_op():
    data = take(lib.TF_GetAllOpList())
    names = set(pluggable.eager.OPS)
    assert len(names) > 100
    for name in ("AddV2", "MatMul", "ConcatV2", "VarHandleOp"):
        assert message(1, name.encode())[:1] + varint(len(name)) + name.encode() in data


@pytest.mark.skipif(not HAS_TENSORFLOW, reason="TensorFlow is not installed")
def test_the_op_list_and_kernel_list_match_tensorflows_protos(tmp_path, xpu_platform):
    (tmp_path / "ops.bin").write_bytes(take(lib.TF_GetAllOpList()))
    status = native.Status()
    (tmp_path / "kernels.bin").write_bytes(
        take(lib.TF_GetRegisteredKernelsForOp(b"MatMul", status.address)))
    out = in_tensorflow(f"""
import json
from tensorflow.core.framework import op_def_pb2, kernel_def_pb2
from tensorflow.python.framework import op_def_registry
ops = op_def_pb2.OpList()
ops.ParseFromString(open({str(tmp_path / 'ops.bin')!r}, 'rb').read())
def arg(a):
    return [a.name, a.type, a.type_attr, a.number_attr]
def attr(a):
    return [a.name, a.type, a.default_value.SerializeToString(deterministic=True)
            .hex() if a.HasField('default_value') else None, a.has_minimum, a.minimum]
differences = []
for op in ops.op:
    tf = op_def_registry.get(op.name)
    ours = [[arg(a) for a in op.input_arg], [arg(a) for a in op.output_arg],
            sorted(attr(a) for a in op.attr), op.is_stateful]
    theirs = [[arg(a) for a in tf.input_arg], [arg(a) for a in tf.output_arg],
              sorted(attr(a) for a in tf.attr), tf.is_stateful]
    if ours != theirs:
        differences.append([op.name, ours, theirs])
kernels = kernel_def_pb2.KernelList()
kernels.ParseFromString(open({str(tmp_path / 'kernels.bin')!r}, 'rb').read())
print(json.dumps(dict(count=len(ops.op), differences=differences,
                      kernels=sorted([k.device_type, k.priority, sorted(
                          t for c in k.constraint for t in c.allowed_values.list.type)]
                          for k in kernels.kernel))))
""")
    assert out["count"] == len(pluggable.eager.OPS)
    assert out["differences"] == []  # every argument, attribute, default and minimum
    cpu = [k for k in out["kernels"] if k[0] == "CPU"]
    assert cpu == [["CPU", 0, sorted(int(t.tf_code) for t in
                                     pluggable.eager.OPS["MatMul"].attr("T").allowed)]]
    assert any(k[0] == "XPU" for k in out["kernels"])


# -- TF_TensorFromProto -----------------------------------------------------------------------
def tensor_proto(dtype: int, dims, *fields: bytes) -> bytes:
    shape = b"".join(message(2, integer(1, d)) for d in dims)
    return integer(1, dtype) + message(2, shape) + b"".join(fields)


def from_proto(data: bytes):
    """(dtype code, shape, bytes) of the tensor TF_TensorFromProto made, or the status."""
    status = native.Status()
    to = lib.TF_AllocateTensor(1, None, 0, 4)
    buffer = lib.TF_NewBufferFromString(data, len(data))
    try:
        lib.TF_TensorFromProto(buffer, to, status.address)
        if not status.ok:
            return status.code, status.message
        shape = tuple(lib.TF_Dim(to, i) for i in range(lib.TF_NumDims(to)))
        size = lib.TF_TensorByteSize(to)
        return (lib.TF_TensorType(to), shape,
                ctypes.string_at(lib.TF_TensorData(to), size) if size else b"")
    finally:
        lib.TF_DeleteBuffer(buffer)
        lib.TF_DeleteTensor(to)


def test_tensor_content_is_copied():
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = from_proto(tensor_proto(1, (2, 3), message(4, values.tobytes())))
    assert got == (1, (2, 3), values.tobytes())


def test_typed_values_repeat_the_last_one():
    floats = message(5, b"".join(struct.pack("<f", v) for v in (1.5, -2.0)))  # packed
    assert from_proto(tensor_proto(1, (4,), floats)) == (
        1, (4,), np.array([1.5, -2.0, -2.0, -2.0], np.float32).tobytes())
    ints = packed(7, [-3, 7])  # int_val for int8
    assert from_proto(tensor_proto(6, (3,), ints)) == (6, (3,), np.array([-3, 7, 7],
                                                                          np.int8).tobytes())
    longs = integer(10, -(1 << 40)) + integer(10, 5)  # int64_val, not packed
    assert from_proto(tensor_proto(9, (2,), longs)) == (
        9, (2,), np.array([-(1 << 40), 5], np.int64).tobytes())
    assert from_proto(tensor_proto(10, (3,), packed(11, [1, 0]))) == (
        10, (3,), bytes([1, 0, 0]))
    pair = message(9, struct.pack("<ff", 1.0, -1.0))  # scomplex_val: one complex64
    assert from_proto(tensor_proto(8, (2,), pair)) == (
        8, (2,), np.array([1 - 1j, 1 - 1j], np.complex64).tobytes())
    assert from_proto(tensor_proto(3, (2, 2))) == (3, (2, 2), bytes(16))  # no values: zeros
    assert from_proto(tensor_proto(3, ())) == (3, (), bytes(4))  # a scalar


def test_bad_protos_are_refused_naming_why():
    too_many = tensor_proto(3, (2,), packed(7, [1, 2, 3]))
    assert from_proto(too_many) == (3, "TF_TensorFromProto: it holds more values than its "
                                       "shape has elements")
    short = tensor_proto(1, (2, 3), message(4, bytes(20)))
    assert from_proto(short)[1] == ("TF_TensorFromProto: its tensor_content does not hold "
                                    "the shape's number of elements of its dtype")
    assert from_proto(tensor_proto(7, (1,), message(8, b"abc")))[0] == 12  # string: unimplemented
    assert from_proto(b"\xff\xff\xff")[1] == ("TF_TensorFromProto: the buffer is not a "
                                             "serialized TensorProto")
    assert from_proto(integer(2, 1))[1] == "TF_TensorFromProto: the TensorProto has no " \
                                           "valid dtype"


@pytest.mark.skipif(not HAS_TENSORFLOW, reason="TensorFlow is not installed")
def test_tensorflows_own_tensor_protos_read_back(tmp_path):
    out = in_tensorflow(f"""
import json
import numpy as np
import tensorflow as tf
cases = {{"big": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
          "scalar": np.float64(2.5), "ints": np.array([[1, -2], [3, 4]], np.int32),
          "halves": np.array([0.5, 1.5, -2.0], np.float16), "flags": np.array([True, False])}}
out = {{}}
for name, value in cases.items():
    proto = tf.make_tensor_proto(value)
    open({str(tmp_path)!r} + "/" + name, "wb").write(proto.SerializeToString())
    array = np.asarray(value)
    out[name] = [array.dtype.str, list(array.shape), array.tobytes().hex()]
# Filled from one value: TensorFlow's proto holds it once.
proto = tf.make_tensor_proto(7, dtype=tf.int64, shape=[3])
open({str(tmp_path)!r} + "/filled", "wb").write(proto.SerializeToString())
out["filled"] = ["<i8", [3], np.full(3, 7, np.int64).tobytes().hex()]
print(json.dumps(out))
""")
    for name, (dtype, shape, data) in out.items():
        code, got_shape, got = from_proto((tmp_path / name).read_bytes())
        assert code == int(pluggable.dtypes.as_dtype(np.dtype(dtype)).tf_code), name
        assert got_shape == tuple(shape) and got.hex() == data, name
