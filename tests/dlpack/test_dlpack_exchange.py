"""CPU tensors cross to and from NumPy, PyTorch and JAX without a copy: the same address on
both sides, for every dtype both sides have, strided and offset views included; the RFC's
round trip keeps values, shape and device."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import pluggable
from pluggable.abi.dlpack import (
    DLPACK_FLAG_BITMASK_IS_COPIED, DLPACK_FLAG_BITMASK_READ_ONLY, DLManagedTensorVersioned)
from pluggable.tensors.dlpack import _PyCapsule_GetPointer
from pluggable.dtypes import ALL_DTYPES

NUMPY_DTYPES = [d for d in ALL_DTYPES if d.name != "bfloat16"]  # NumPy's DLPack has none


def sample(dtype, shape=(3, 4)):
    values = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) % 7
    if dtype.is_bool:
        return values % 2 == 1
    if dtype.is_complex:
        return (values + 1j * values).astype(dtype.numpy_dtype)
    return values.astype(dtype.numpy_dtype)


def address(t: pluggable.Tensor) -> int:
    return t.numpy().__array_interface__["data"][0]


def capsule_flags(capsule) -> int:
    pointer = _PyCapsule_GetPointer(capsule, b"dltensor_versioned")
    return int(DLManagedTensorVersioned.from_address(pointer).flags)


# -- NumPy ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=lambda d: d.name)
def test_numpy_both_ways_share_memory(dtype):
    source = sample(dtype)
    t = pluggable.from_dlpack(source)
    assert t.dtype == dtype and t.shape == source.shape and t.device == "/device:CPU:0"
    assert address(t) == source.ctypes.data
    back = np.from_dlpack(t)
    assert back.ctypes.data == source.ctypes.data
    np.testing.assert_array_equal(back, source)
    assert not back.flags.writeable  # tensors are immutable: exported READ_ONLY


def test_bfloat16_crosses_through_capsules():
    values = np.arange(6, dtype=ml_dtypes.bfloat16)
    t = pluggable.tensor(values)
    again = pluggable.from_dlpack(t.__dlpack__(max_version=(1, 0)))
    assert again.dtype == pluggable.bfloat16
    assert address(again) == address(t)
    np.testing.assert_array_equal(again.numpy(), values)
    legacy = pluggable.from_dlpack(pluggable.to_dlpack(t))
    assert address(legacy) == address(t)


@pytest.mark.parametrize("view", [
    lambda a: a[::2], lambda a: a[1:], lambda a: a.T, lambda a: a[1:, ::-1], lambda a: a[:, 1:3],
], ids=["step", "offset", "transpose", "negative", "columns"])
def test_strided_and_offset_views_stay_views(view):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    v = view(base)
    t = pluggable.from_dlpack(v)
    array = t.numpy()
    assert array.ctypes.data == v.ctypes.data and array.strides == v.strides
    np.testing.assert_array_equal(array, v)
    assert np.from_dlpack(t).ctypes.data == v.ctypes.data
    # Every op on the CPU takes it as it is; an upload makes it compact on the way.
    np.testing.assert_array_equal((t + 1).numpy(), v + 1)
    np.testing.assert_array_equal(t.to("/xpu:0").numpy(), v)
    np.testing.assert_array_equal(pluggable.ops.matmul(t, t.numpy().T.copy()).numpy(),
                                  v @ v.T)


def test_versioned_and_legacy_capsules():
    t = pluggable.tensor(np.arange(4, dtype=np.int32))
    versioned = t.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(versioned)
    assert capsule_flags(versioned) & DLPACK_FLAG_BITMASK_READ_ONLY
    assert not capsule_flags(versioned) & DLPACK_FLAG_BITMASK_IS_COPIED
    assert "dltensor" in repr(t.__dlpack__()) and "versioned" not in repr(t.__dlpack__())
    assert "versioned" not in repr(pluggable.to_dlpack(t))
    copied = t.__dlpack__(max_version=(1, 0), copy=True)
    assert capsule_flags(copied) & DLPACK_FLAG_BITMASK_IS_COPIED
    mine = np.from_dlpack(t, copy=True)
    assert mine.ctypes.data != address(t)
    np.testing.assert_array_equal(mine, [0, 1, 2, 3])
    assert t.__dlpack_device__() == (1, 0)


def test_read_only_input_stays_read_only():
    source = np.arange(5.0)
    source.flags.writeable = False
    t = pluggable.from_dlpack(source)
    assert address(t) == source.ctypes.data
    assert not np.from_dlpack(t).flags.writeable
    writable = np.arange(5.0)
    assert not pluggable.from_dlpack(writable).numpy().flags.writeable  # a tensor is immutable
    writable[0] = 9.0  # ... but it is the producer's memory
    assert pluggable.from_dlpack(writable).numpy()[0] == 9.0


def test_copy_true_copies_and_copy_false_on_cpu_shares():
    source = np.arange(8, dtype=np.int64)
    copied = pluggable.from_dlpack(source, copy=True)
    assert address(copied) != source.ctypes.data
    np.testing.assert_array_equal(copied.numpy(), source)
    shared = pluggable.from_dlpack(source, copy=False)
    assert address(shared) == source.ctypes.data
    onto_xpu = pluggable.from_dlpack(source, device="/xpu:0")
    assert onto_xpu.device == "/device:XPU:0"
    np.testing.assert_array_equal(onto_xpu.numpy(), source)


def test_zero_size_and_scalar():
    empty = pluggable.from_dlpack(np.empty((0, 3), np.float32))
    assert empty.shape == (0, 3) and empty.size == 0
    scalar = pluggable.from_dlpack(np.array(2.5))
    assert scalar.shape == () and float(scalar) == 2.5
    assert scalar.to("/xpu:0").shape == ()
    on_xpu = pluggable.from_dlpack(np.array(4.0), device="/xpu:0")
    assert on_xpu.shape == () and float(on_xpu) == 4.0
    assert np.from_dlpack(pluggable.tensor(np.array(7, np.int16))) == 7


# -- PyTorch ----------------------------------------------------------------------------------
def torch_dtypes(torch):
    names = {"bool": torch.bool, "int8": torch.int8, "int16": torch.int16,
             "int32": torch.int32, "int64": torch.int64, "uint8": torch.uint8,
             "uint16": torch.uint16, "uint32": torch.uint32, "uint64": torch.uint64,
             "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
             "float64": torch.float64, "complex64": torch.complex64,
             "complex128": torch.complex128}
    return names


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_torch_both_ways_share_memory(dtype, torch):
    t = pluggable.tensor(sample(dtype))
    theirs = torch.from_dlpack(t)
    assert theirs.dtype == torch_dtypes(torch)[dtype.name]
    assert theirs.data_ptr() == address(t)
    assert tuple(theirs.shape) == t.shape
    ours = pluggable.from_dlpack(theirs)
    assert ours.dtype == dtype and address(ours) == theirs.data_ptr()
    np.testing.assert_array_equal(ours.numpy(), t.numpy())


def test_torch_strided_views(torch):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    for view in (base.t(), base[1:, ::2], base[2:]):
        t = pluggable.from_dlpack(view)
        assert address(t) == view.data_ptr()
        np.testing.assert_array_equal(t.numpy(), view.numpy())
        back = torch.from_dlpack(t)
        assert back.data_ptr() == view.data_ptr() and back.stride() == view.stride()


def test_rfc_round_trip_with_torch(torch):
    """RFC 180's example: pluggable -> torch -> pluggable, through capsules."""
    import torch.utils.dlpack as thdlpack

    t1 = pluggable.tensor([1, 2, 3], dtype=np.float32)
    t2 = thdlpack.from_dlpack(pluggable.to_dlpack(t1))
    t3 = pluggable.from_dlpack(thdlpack.to_dlpack(t2))
    assert t3.device == t1.device and t3.shape == t1.shape == tuple(t2.shape)
    np.testing.assert_array_equal(t3.numpy(), [1, 2, 3])
    assert t2.device.type == "cpu"
    assert address(t3) == t2.data_ptr() == address(t1)


# -- JAX --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "bfloat16", "complex64",
                                   "uint8", "float16"])
def test_jax_both_ways(dtype, jax):
    d = pluggable.dtypes.as_dtype(dtype)
    t = pluggable.tensor(sample(d))
    theirs = jax.dlpack.from_dlpack(t)  # a legacy consumer: asks without max_version
    np.testing.assert_array_equal(np.asarray(theirs), t.numpy())
    assert str(theirs.dtype) == dtype
    ours = pluggable.from_dlpack(theirs)
    assert ours.dtype == d
    np.testing.assert_array_equal(ours.numpy(), t.numpy())
    assert address(ours) == theirs.unsafe_buffer_pointer()


OPS = {
    "identity": (lambda o, t: o.identity(t), lambda a: a),
    "negative": (lambda o, t: o.negative(t), np.negative),
    "square": (lambda o, t: o.square(t), np.square),
    "exp": (lambda o, t: o.exp(t), np.exp),
    "relu": (lambda o, t: o.relu(t - 3.0), lambda a: np.maximum(a - 3.0, 0)),
    "add": (lambda o, t: o.add(t, t), lambda a: a + a),
    "maximum": (lambda o, t: o.maximum(t, 2.0), lambda a: np.maximum(a, 2.0)),
    "cast": (lambda o, t: o.cast(t, "int32"), lambda a: a.astype(np.int32)),
    "reduce_sum": (lambda o, t: o.reduce_sum(t, axis=1), lambda a: a.sum(axis=1)),
    "reduce_max": (lambda o, t: o.reduce_max(t), lambda a: a.max()),
    "softmax": (lambda o, t: o.softmax(t),
                lambda a: np.exp(a) / np.exp(a).sum(axis=-1, keepdims=True)),
    "reshape": (lambda o, t: o.reshape(t, (-1,)), lambda a: a.reshape(-1)),
    "transpose": (lambda o, t: o.transpose(t), lambda a: a.T),
    "matmul": (lambda o, t: o.matmul(t, t, transpose_b=True), lambda a: a @ a.T),
    "argmax": (lambda o, t: o.argmax(t, axis=1), lambda a: a.argmax(axis=1)),
    "where": (lambda o, t: o.where(o.greater(t, 2.0), t, 0.0),
              lambda a: np.where(a > 2.0, a, 0.0)),
}


@pytest.mark.parametrize("device", ["/cpu:0", "/xpu:0"])
@pytest.mark.parametrize("op", OPS)
def test_a_foreign_strided_view_works_with_every_op(op, device):
    """A view of someone else's buffer (a transposed, stepped, offset NumPy view) is an input
    like any other: CPU kernels take it as it is, device kernels after a compacting upload."""
    base = (np.arange(60, dtype=np.float32).reshape(6, 10) % 7) / 2
    view = base[1:, ::3].T  # shape (4, 5), strides of neither order
    assert not view.flags.c_contiguous and not view.flags.f_contiguous
    t = pluggable.from_dlpack(view)
    assert address(t) == view.ctypes.data
    run, expected = OPS[op]
    with pluggable.device(device):
        result = run(pluggable.ops, t)
    np.testing.assert_allclose(result.numpy(), expected(view), rtol=1e-5)
    assert address(t) == view.ctypes.data  # still a view: nothing compacted it in place
