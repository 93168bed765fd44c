"""Bad input: every rejected capsule raises a clear error (a `pluggable.errors` class that is
also a `BufferError` where the array API standard says so), is left unconsumed, and is freed
exactly once by its own destructor; nothing leaks."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import pluggable
from pluggable.abi.dlpack import DLDataTypeCode, DLDeviceType
from pluggable.errors import DLPackError, InvalidArgumentError, NotFoundError, PluggableError


def test_dlpack_error_is_both():
    assert issubclass(DLPackError, BufferError)
    assert issubclass(DLPackError, InvalidArgumentError)
    assert issubclass(DLPackError, PluggableError)


BAD = {
    "major version": (dict(major=2), DLPackError,
                      r"DLPack 2\.1 tensor; this host reads DLPack 1\.x"),
    "null deleter": (dict(null_deleter=True), DLPackError, "NULL deleter"),
    "unknown device type": (dict(device=(99, 0)), DLPackError, "unknown DLPack device type 99"),
    "device not loaded": (dict(device=(int(DLDeviceType.kDLCUDA), 0)), NotFoundError,
                          r"no loaded plugin declares DLPack device type kDLCUDA \(2\)"),
    "negative shape": (dict(shape=(2, -3)), DLPackError, r"negative dimension in shape \(2, -3\)"),
    "overflowing shape": (dict(shape=(1 << 40, 1 << 40)), DLPackError, "overflows"),
    "lanes": (dict(dtype=(int(DLDataTypeCode.kDLFloat), 32, 4)), DLPackError,
              "4 lanes .vector elements. is not supported"),
    "float8": (dict(dtype=(int(DLDataTypeCode.kDLFloat8_e4m3fn), 8, 1)), DLPackError,
               "DLPack dtype kDLFloat8_e4m3fn with 8 bits has no pluggable counterpart"),
    "odd bits": (dict(dtype=(int(DLDataTypeCode.kDLInt), 24, 1)), DLPackError,
                 "kDLInt with 24 bits"),
    "unknown type code": (dict(dtype=(200, 32, 1)), DLPackError, "unknown type code 200"),
    "opaque": (dict(dtype=(int(DLDataTypeCode.kDLOpaqueHandle), 64, 1)), DLPackError,
               "kDLOpaqueHandle"),
}


@pytest.mark.parametrize("case,versioned", [
    (case, versioned) for case in BAD for versioned in (True, False)
    if versioned or case != "major version"  # a legacy capsule has no version
])
def test_bad_capsules_are_rejected_and_freed_once(producer, case, versioned):
    fields, error, message = BAD[case]
    fields = dict(fields)
    fields.setdefault("shape", (2, 3))
    calls, live = producer.deleter_calls, producer.live
    capsule = producer.capsule(nbytes=24 * 4, versioned=versioned, **fields)
    with pytest.raises(error, match=message):
        pluggable.from_dlpack(capsule)
    assert "used_" not in repr(capsule)  # left unconsumed
    assert producer.deleter_calls == calls
    del capsule
    gc.collect()
    null = fields.get("null_deleter")
    assert producer.deleter_calls == calls + (0 if null else 1)
    assert producer.live == live + (1 if null else 0)


def test_consumed_capsule_is_refused(producer):
    capsule = producer.capsule(np.arange(4, dtype=np.float32))
    t = pluggable.from_dlpack(capsule)
    calls = producer.deleter_calls
    with pytest.raises(DLPackError, match="already consumed"):
        pluggable.from_dlpack(capsule)
    with pytest.raises(BufferError):
        pluggable.from_dlpack(capsule)
    np.testing.assert_array_equal(t.numpy(), [0, 1, 2, 3])
    del t, capsule
    gc.collect()
    assert producer.deleter_calls == calls + 1


def test_wrong_capsule_name(producer):
    capsule = producer.capsule(np.arange(2, dtype=np.float32), name=b"not_a_tensor")
    with pytest.raises(DLPackError, match="named 'dltensor_versioned' or 'dltensor', not "
                                          "b'not_a_tensor'"):
        pluggable.from_dlpack(capsule)


def test_offset_tensor_from_a_c_producer(producer):
    values = np.arange(10, dtype=np.int32)
    capsule = producer.capsule(values, shape=(4,), strides=(2,), byte_offset=8,
                               dtype=(int(DLDataTypeCode.kDLInt), 32, 1))
    data = producer.data(capsule)
    t = pluggable.from_dlpack(capsule)
    np.testing.assert_array_equal(t.numpy(), [2, 4, 6, 8])
    assert t.numpy().ctypes.data == data + 8
    np.testing.assert_array_equal((t * 2).numpy(), [4, 8, 12, 16])
    np.testing.assert_array_equal(t.to("/xpu:0").numpy(), [2, 4, 6, 8])


def test_not_a_dlpack_object():
    with pytest.raises(InvalidArgumentError, match="needs an object with __dlpack__.*not list"):
        pluggable.from_dlpack([1, 2, 3])
    with pytest.raises(InvalidArgumentError, match="to_dlpack needs a pluggable.Tensor"):
        pluggable.to_dlpack(np.arange(3))


def test_bad_arguments():
    t = pluggable.tensor([1.0])
    with pytest.raises(DLPackError, match="copy must be None, True or False"):
        pluggable.from_dlpack(t, copy="yes")
    with pytest.raises(DLPackError, match="max_version must be a"):
        t.__dlpack__(max_version="1.0")
    with pytest.raises(DLPackError, match="dl_device must be a"):
        t.__dlpack__(dl_device="cpu")
    with pytest.raises(DLPackError, match="copy=False forbids"):
        pluggable.from_dlpack(np.arange(3.0), device="/xpu:0", copy=False)


def test_producer_returning_garbage():
    class Liar:
        def __dlpack__(self, **kwargs):
            return 42

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(DLPackError, match="Liar.__dlpack__ returned int, not a capsule"):
        pluggable.from_dlpack(Liar())


def test_legacy_producer_without_keywords():
    class Old:
        def __init__(self, array):
            self.array = array

        def __dlpack__(self, stream=None):
            return pluggable.to_dlpack(pluggable.tensor(self.array))

    t = pluggable.from_dlpack(Old(np.arange(3, dtype=np.int16)))
    np.testing.assert_array_equal(t.numpy(), [0, 1, 2])


def test_unknown_plugin_device_index(producer):
    capsule = producer.capsule(np.arange(2, dtype=np.float32),
                               device=(int(DLDeviceType.kDLExtDev), 7))
    with pytest.raises(NotFoundError, match="has 2 device.s.; DLPack device 7"):
        pluggable.from_dlpack(capsule)
