"""Fixtures of the DLPack tests: a C producer whose deleter counts its calls, capsules made
from its tensors, and test-plugin devices that declare a DLPack device."""
from __future__ import annotations

import ctypes
import gc
import os
from typing import Optional, Sequence

import numpy as np
import pytest

from pluggable.abi.dlpack import DLDeviceType
from pluggable.abi.plugin_ext import PLUGGABLE_DLPACK_HOST_ADDRESSABLE

HERE = os.path.dirname(os.path.abspath(__file__))
PRODUCER_SOURCE = os.path.join(os.path.dirname(HERE), "plugins", "dlpack_producer.c")

# Capsule names must outlive the capsules: module constants.
_NAMES = {True: b"dltensor_versioned", False: b"dltensor"}
_api = ctypes.pythonapi
_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", _api))
_raw_name = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(("PyCapsule_GetName", _api))
_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_raw_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))


class Producer:
    """The C producer (tests/plugins/dlpack_producer.c) and capsules over its tensors."""

    def __init__(self, path: str):
        lib = ctypes.CDLL(path)
        lib.producer_make.restype = ctypes.c_void_p
        lib.producer_make.argtypes = [
            ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_int32,
            ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint8, ctypes.c_uint8,
            ctypes.c_uint16, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int]
        lib.producer_delete_unconsumed.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.producer_data.restype = ctypes.c_void_p
        lib.producer_data.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.producer_deleter_calls.restype = ctypes.c_int64
        lib.producer_live_tensors.restype = ctypes.c_int64
        self.lib = lib

        # The capsule destructor a producer installs: frees a tensor nobody consumed.
        @ctypes.CFUNCTYPE(None, ctypes.c_void_p)
        def destructor(capsule):
            name = ctypes.string_at(_raw_name(capsule))
            for versioned, expected in _NAMES.items():
                if name == expected:
                    lib.producer_delete_unconsumed(_raw_pointer(capsule, expected), versioned)

        self._destructor = destructor
        self._destructor_address = ctypes.cast(destructor, ctypes.c_void_p).value

    @property
    def deleter_calls(self) -> int:
        return self.lib.producer_deleter_calls()

    @property
    def live(self) -> int:
        return self.lib.producer_live_tensors()

    def managed(self, values: Optional[np.ndarray] = None, *, versioned: bool = True,
                shape: Optional[Sequence[int]] = None, strides: Optional[Sequence[int]] = None,
                dtype: Sequence[int] = (2, 32, 1), device: Sequence[int] = (1, 0),
                nbytes: Optional[int] = None, byte_offset: int = 0, flags: int = 0,
                major: int = 1, null_deleter: bool = False) -> int:
        """A managed tensor (its address) holding a copy of ``values``' bytes; ``shape``
        defaults to theirs, ``dtype`` is (code, bits, lanes)."""
        init = None
        if values is not None:
            values = np.ascontiguousarray(values)
            init = values.ctypes.data
            nbytes = values.nbytes if nbytes is None else nbytes
            shape = values.shape if shape is None else shape
        shape = tuple(shape or ())
        dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        stride_array = None if strides is None else (ctypes.c_int64 * len(strides))(*strides)
        args = (versioned, init, nbytes or 0, device[0], device[1], len(shape), dims,
                stride_array, dtype[0], dtype[1], dtype[2], byte_offset, flags, major,
                null_deleter)
        address = self.lib.producer_make(*args)
        if not address:  # its table of tensors is full: drop the deleted ones
            self.lib.producer_reset()
            address = self.lib.producer_make(*args)
        assert address, "the producer ran out of room"
        return address

    def capsule(self, values: Optional[np.ndarray] = None, *, versioned: bool = True,
                name: Optional[bytes] = None, **fields):
        """A capsule over a new managed tensor (see `managed`), freed by its destructor if no
        consumer takes it."""
        address = self.managed(values, versioned=versioned, **fields)
        if name is not None:
            _NAMES_KEEP.append(name)
        return _new(address, name or _NAMES[versioned], self._destructor_address)

    def data(self, capsule, versioned: bool = True) -> int:
        """The data address of the tensor in an unconsumed capsule."""
        return self.lib.producer_data(_pointer(capsule, _NAMES[versioned]), versioned)


_NAMES_KEEP: list = []  # odd capsule names the tests made, alive as long as their capsules


@pytest.fixture(scope="session")
def producer(build_test_plugin) -> Producer:
    return Producer(build_test_plugin(PRODUCER_SOURCE))


@pytest.fixture
def plugin_device(build_test_plugin, private_manager):
    """``plugin_device(device_type, host_addressable)``: TEST:0 of a test plugin that
    declares that DLPack device (its device memory is malloc'd host memory)."""
    def make(device_type: int = DLDeviceType.kDLExtDev, host_addressable: bool = True):
        flags = PLUGGABLE_DLPACK_HOST_ADDRESSABLE if host_addressable else 0
        path = build_test_plugin(DLPACK_DEVICE_TYPE=int(device_type), DLPACK_FLAGS=flags)
        private_manager.load_plugin(path)
        return private_manager.devices.get("TEST:0")
    return make


def _import_consumer(name: str):
    """Imports an optional consumer (skipping the test without it), then freezes the
    garbage collector's view of what exists: PyTorch and JAX bring millions of objects that
    live to the end anyway, and every later full collection (which many tests run) would
    walk them again, 10-20 times slower than without them."""
    module = pytest.importorskip(name, reason=f"{name} (CPU) is not installed; "
                                              f"pip install '.[interop]'")
    gc.collect()
    gc.freeze()
    return module


@pytest.fixture(scope="session")
def torch():
    return _import_consumer("torch")


@pytest.fixture(scope="session")
def jax():
    _import_consumer("jax.dlpack")
    import jax

    return jax
