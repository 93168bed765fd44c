"""Tensors on the XPU: round trips, dtypes, lifetimes, bad input."""
from __future__ import annotations

import gc

import ml_dtypes
import numpy as np
import pytest

import pluggable
from pluggable import config, dtypes
from pluggable.errors import (
    InternalError, InvalidArgumentError, ResourceExhaustedError)

SHAPES = [(), (0,), (1,), (7,), (3, 0, 2), (2, 3, 4), (129, 33)]
MIB64 = 64 << 20


def sample(dtype: dtypes.DType, shape, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    count = int(np.prod(shape, dtype=np.int64))
    if dtype.is_bool:
        values = rng.integers(0, 2, count).astype(bool)
    elif dtype.is_integer:
        info = np.iinfo(dtype.numpy_dtype)
        values = rng.integers(info.min, info.max, count, dtype=dtype.numpy_dtype,
                              endpoint=True)
    elif dtype.is_complex:
        values = (rng.standard_normal(count) + 1j * rng.standard_normal(count))
    else:
        values = rng.standard_normal(count) * 1000
    return values.astype(dtype.numpy_dtype).reshape(shape)


def settled_use(device: str) -> int:
    """Bytes in use on ``device`` once deferred frees of earlier tests are done."""
    gc.collect()
    pluggable.get_device(device).executor.event_manager.synchronize()
    return config.get_memory_info(device)["current"]


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def round_trip(values, dtype=None):
    t0 = pluggable.tensor(values, dtype=dtype, device="/xpu:0")
    t1 = t0.to("/device:XPU:1")
    host = t1.to("CPU")
    assert (t0.device, t1.device, host.device) == ("/device:XPU:0", "/device:XPU:1",
                                                   "/device:CPU:0")
    return t0, t1, host


@pytest.mark.parametrize("dtype", dtypes.ALL_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_round_trip_is_exact(dtype, shape):
    values = sample(dtype, shape)
    t0, t1, host = round_trip(values)
    assert t0.dtype == dtype and t1.shape == shape
    assert same_bits(t0.numpy(), values)
    assert same_bits(t1.numpy(), values)
    assert same_bits(host.numpy(), values)


@pytest.mark.parametrize("dtype", dtypes.ALL_DTYPES, ids=lambda d: d.name)
def test_round_trip_64_mib(dtype):
    values = sample(dtype, (MIB64 // dtype.itemsize,), seed=1)
    _, _, host = round_trip(values)
    assert same_bits(host.numpy(), values)


@pytest.mark.parametrize("shape", [(), (5,), (1000, 17), (MIB64 // 4,)], ids=str)
def test_round_trip_with_slow_streams(stream_delay, shape):
    stream_delay(2000)
    values = sample(dtypes.float32, shape, seed=2)
    t0, t1, host = round_trip(values)
    assert same_bits(host.numpy(), values)
    assert same_bits(t1.numpy(), values)


def test_properties_and_repr():
    t = pluggable.tensor([[1, 2, 3], [4, 5, 6]], dtype="float32", device="xpu:0")
    assert (t.shape, t.ndim, t.size, t.nbytes, len(t)) == ((2, 3), 2, 6, 24, 2)
    assert t.dtype == pluggable.float32 and t.dtype == np.float32 and t.dtype == "float32"
    assert repr(t) == ("<pluggable.Tensor: shape=(2, 3), dtype=float32, device=/device:XPU:0, "
                       "numpy=array([[1., 2., 3.],\n       [4., 5., 6.]], dtype=float32)>")
    scalar = pluggable.tensor(3.5, device="xpu:1")
    assert scalar.shape == () and scalar.dtype == pluggable.float32
    with pytest.raises(TypeError, match="scalar"):
        len(scalar)
    big = pluggable.zeros((100, 100), device="xpu:0")
    assert "numpy=" not in repr(big)
    assert np.asarray(big).sum() == 0 and np.asarray(t, dtype=np.int64)[1, 2] == 6


def test_dtype_conversion_and_bfloat16():
    t = pluggable.tensor([1.5, -2.25, 3.0], dtype="bfloat16", device="xpu:0")
    assert t.dtype == pluggable.bfloat16 and t.numpy().dtype == ml_dtypes.bfloat16
    assert t.numpy().astype(np.float32).tolist() == [1.5, -2.25, 3.0]
    assert pluggable.tensor([True, False], device="xpu:0").dtype == pluggable.bool_


def test_numpy_of_device_tensor_is_a_copy_the_user_owns():
    t = pluggable.tensor(np.arange(4, dtype=np.int32), device="xpu:0")
    first = t.numpy()
    first[0] = 99
    assert t.numpy().tolist() == [0, 1, 2, 3]


def test_tensor_copies_the_callers_array_before_returning(stream_delay):
    stream_delay(5000)
    source = np.arange(1000, dtype=np.int64)
    t = pluggable.tensor(source, device="xpu:0")
    source[:] = -1  # the tensor must not see this
    assert t.numpy().tolist() == list(range(1000))


def test_cpu_tensors():
    source = np.arange(6.0).reshape(2, 3)
    t = pluggable.tensor(source)
    source[0, 0] = 100
    assert t.device == "/device:CPU:0" and t.numpy()[0, 0] == 0
    assert not t.numpy().flags.writeable
    assert t.to("cpu") is t
    assert t.to("xpu:0").to("xpu:0").numpy().tolist() == [[0, 1, 2], [3, 4, 5]]


def test_zeros_and_empty():
    z = pluggable.zeros((3, 4), dtype="int16", device="xpu:1")
    assert z.numpy().tolist() == [[0] * 4] * 3 and z.dtype == pluggable.int16
    e = pluggable.empty((2,), "complex128", device="xpu:0")
    assert e.shape == (2,) and e.nbytes == 32
    assert pluggable.zeros(5).numpy().tolist() == [0.0] * 5


@pytest.mark.parametrize("bad, error, match", [
    (np.array([object(), 1], dtype=object), InvalidArgumentError, "Python objects"),
    (np.array(["a", "b"]), InvalidArgumentError, "not supported"),
    ([[1, 2], [3]], InvalidArgumentError, "cannot make a tensor"),
    (np.array([1, 2], dtype="datetime64[s]"), InvalidArgumentError, "not supported"),
])
def test_bad_data(bad, error, match):
    with pytest.raises(error, match=match):
        pluggable.tensor(bad, device="xpu:0")


def test_bad_dtype_shape_and_device():
    with pytest.raises(TypeError, match="element type"):
        pluggable.tensor([1], dtype="no-such-type")
    with pytest.raises(InvalidArgumentError, match="negative"):
        pluggable.zeros((2, -1), device="xpu:0")
    with pytest.raises(InvalidArgumentError, match="more than any device has"):
        pluggable.zeros((1 << 40, 1 << 40), device="xpu:0")
    with pytest.raises(InvalidArgumentError, match="sequence of integers"):
        pluggable.zeros((2.5,), device="xpu:0")
    with pytest.raises(pluggable.errors.NotFoundError, match="XPU device"):
        pluggable.tensor([1], device="xpu:7")
    with pytest.raises(InvalidArgumentError, match="cannot parse device name"):
        pluggable.tensor([1], device="xpu:zero")


def test_data_larger_than_the_device_leaves_it_usable():
    before = settled_use("XPU:0")
    with pytest.raises(ResourceExhaustedError) as info:
        pluggable.empty((4 << 30,), "uint8", device="xpu:0")
    assert "4294967296" in str(info.value)
    assert settled_use("XPU:0") == before
    assert pluggable.tensor([1, 2, 3], device="xpu:0").numpy().tolist() == [1, 2, 3]


def test_failed_copy_leaves_the_allocator_statistics_unchanged(faults):
    pluggable.tensor([0], device="xpu:0")  # the allocator exists
    before = settled_use("XPU:0")
    faults("memcpy_htod:1")
    with pytest.raises(InternalError, match="injected fault"):
        pluggable.tensor(np.ones(1000), device="xpu:0")
    assert settled_use("XPU:0") == before
    assert pluggable.tensor(np.ones(3), device="xpu:0").numpy().tolist() == [1, 1, 1]


def test_dropping_a_tensor_returns_its_memory_once_the_device_is_done(stream_delay):
    source = pluggable.tensor(np.ones(1 << 20, np.uint8), device="xpu:0")
    base = settled_use("XPU:0")
    # The collection below looks at newer objects only: a full one over a long session's
    # heap could outlast the stream delay.
    gc.freeze()
    stream_delay(50_000)
    copy = source.to("xpu:1")  # queued on XPU:1's stream, reading XPU:0's memory
    del source
    gc.collect()
    gc.unfreeze()
    # The copy has not run yet: XPU:0 still holds the source's memory.
    assert config.get_memory_info("XPU:0")["current"] == base
    stream_delay(0)
    assert copy.numpy().sum() == 1 << 20
    pluggable.get_device("XPU:1").executor.event_manager.synchronize()
    assert config.get_memory_info("XPU:0")["current"] == base - (1 << 20)


def test_staging_through_pinned_memory(monkeypatch):
    from pluggable.abi.plugin_ext import PLUGGABLE_PLATFORM_PAGEABLE_ASYNC_COPY

    platform = pluggable.get_platform("REF_XPU")
    monkeypatch.setattr(platform, "capabilities",
                        platform.capabilities & ~PLUGGABLE_PLATFORM_PAGEABLE_ASYNC_COPY)
    from pluggable.devices import staging
    from pluggable.tensors import tensor as tensors

    executor = platform.executor(0)
    # Small: through the staging ring, which keeps its one block of the pool.
    values = sample(dtypes.float64, (3000,), seed=5)
    t = pluggable.tensor(values, device="xpu:0")
    assert same_bits(t.numpy(), values)
    pool = executor.host_allocator
    assert pool.memory_info()["current"] == staging.RING_BYTES
    # Large: a block of its own, given back once the copy is done.
    values = sample(dtypes.float64, (tensors.STAGE_LIMIT // 8 + 1,), seed=6)
    t = pluggable.tensor(values, device="xpu:0")
    assert same_bits(t.numpy(), values)
    executor.event_manager.synchronize()
    assert pool.memory_info()["current"] == staging.RING_BYTES


def test_tensor_on_a_closed_device(run_python):
    code = """
import pluggable
from pluggable.errors import FailedPreconditionError
t = pluggable.tensor([1, 2], device="xpu:0")
pluggable.get_device("xpu:0").close()
try:
    t.numpy()
except FailedPreconditionError as e:
    print("refused:", e)
print(repr(t))
"""
    out = run_python(code).stdout.splitlines()
    assert out[0].startswith("refused: the tensor's device /device:XPU:0 was closed")
    assert out[1].endswith("(device closed)>")


@pytest.mark.parametrize("data, dtype", [([1.5], "int32"), ([np.nan], "int64"), ([2], "bool"),
                                         ([3_000_000_000], "int32"), ([1 + 2j], "float32"),
                                         (["7"], "int32")])
def test_conversions_that_change_values_are_refused(data, dtype):
    with pytest.raises(InvalidArgumentError, match=f"cannot .*{dtype}"):
        pluggable.tensor(data, dtype=dtype, device="xpu:0")


def test_conversions_that_keep_values_are_made():
    assert pluggable.tensor([1.0, -2.0], dtype="int8").numpy().tolist() == [1, -2]
    assert pluggable.tensor([0.1], dtype="float16").dtype == pluggable.float16  # precision only
    assert pluggable.tensor([1, 0], dtype="bool").numpy().tolist() == [True, False]
