"""Copies in every direction, and memsets, on XPU streams, with the data checked."""
from __future__ import annotations

import numpy as np
import pytest

from pluggable.errors import InvalidArgumentError

SIZES = [1, 7, 4096, (1 << 20) + 3]


@pytest.fixture
def stream(xpu):
    with xpu.create_stream() as s:
        yield s


@pytest.mark.parametrize("size", SIZES)
def test_async_round_trip_in_every_direction(xpu, stream, size):
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    out = np.zeros(size, np.uint8)
    with xpu.allocate(size) as a, xpu.allocate(size) as b:
        xpu.memcpy_htod(stream, a, data)
        xpu.memcpy_dtod(stream, b, a)
        xpu.memcpy_dtoh(stream, out, b)
        stream.synchronize()
    assert (out == data).all()


@pytest.mark.parametrize("size", SIZES)
def test_sync_round_trip_in_every_direction(xpu, size):
    data = np.random.default_rng(size + 1).integers(0, 256, size, dtype=np.uint8)
    out = bytearray(size)
    with xpu.allocate(size) as a, xpu.allocate(size) as b:
        xpu.sync_memcpy_htod(a, data.tobytes())
        xpu.sync_memcpy_dtod(b, a)
        xpu.sync_memcpy_dtoh(out, b)
    assert bytes(out) == data.tobytes()


def test_partial_copies_and_views(xpu, stream):
    with xpu.allocate(100) as memory:
        xpu.mem_zero(stream, memory)
        xpu.memcpy_htod(stream, memory.view(10, 5), b"hello")
        out = bytearray(100)
        xpu.memcpy_dtoh(stream, out, memory)
        stream.synchronize()
    assert bytes(out) == bytes(10) + b"hello" + bytes(85)


def test_typed_and_multidimensional_host_buffers(xpu, stream):
    data = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    out = np.zeros_like(data)
    with xpu.allocate(data.nbytes) as memory:
        xpu.memcpy_htod(stream, memory, data)
        xpu.memcpy_dtoh(stream, out, memory)
        stream.synchronize()
    assert (out == data).all()


def test_memset_memset32_and_mem_zero(xpu, stream):
    with xpu.allocate(64) as memory:
        xpu.memset(stream, memory, 0x5A)
        xpu.memset32(stream, memory.view(8, 16), 0xDEADBEEF)
        xpu.mem_zero(stream, memory.view(60, 4))
        out = np.zeros(64, np.uint8)
        xpu.memcpy_dtoh(stream, out, memory)
        stream.synchronize()
    expected = np.full(64, 0x5A, np.uint8)
    expected[8:24] = np.frombuffer(np.full(4, 0xDEADBEEF, "<u4").tobytes(), np.uint8)
    expected[60:] = 0
    assert (out == expected).all()


def test_bad_host_buffers_and_patterns(xpu, stream):
    with xpu.allocate(16) as memory:
        with pytest.raises(InvalidArgumentError, match="read-only"):
            xpu.memcpy_dtoh(stream, b"immutable bytes!", memory)
        with pytest.raises(InvalidArgumentError, match="C-contiguous"):
            xpu.memcpy_htod(stream, memory, np.zeros((4, 8), np.uint8)[:, ::2])
        with pytest.raises(TypeError, match="host buffer"):
            xpu.memcpy_htod(stream, memory, 12)
        with pytest.raises(InvalidArgumentError, match="larger than the host destination"):
            xpu.memcpy_dtoh(stream, bytearray(4), memory, size=8)
        with pytest.raises(InvalidArgumentError, match="not a byte"):
            xpu.memset(stream, memory, 256)
        with pytest.raises(InvalidArgumentError, match="multiple of 4"):
            xpu.memset32(stream, memory, 1, size=6)


def test_streams_of_another_device_are_refused(xpu, xpu1, stream):
    with xpu1.allocate(8) as other_memory, xpu1.create_stream() as other_stream:
        with pytest.raises(InvalidArgumentError, match="belongs to XPU:1"):
            xpu.memcpy_htod(other_stream, other_memory, bytes(8))
