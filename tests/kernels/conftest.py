"""Fixtures of the kernel API tests: the C++ and C test plugins with kernels, built like
tests/conftest.py builds test_plugin.c, and helpers to run kernels on device memory."""
from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest

from pluggable.devices.memory import DeviceMemory

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGINS = os.path.join(os.path.dirname(HERE), "plugins")
KERNEL_PLUGIN_CC = os.path.join(PLUGINS, "kernel_plugin.cc")
KERNEL_C_PLUGIN = os.path.join(PLUGINS, "kernel_c_plugin.c")


@pytest.fixture(scope="session")
def build_kernel_plugin(build_test_plugin):
    """``build_kernel_plugin(source, NAME=value, ...)``: tests/conftest.py's builder (C11 for
    .c, C++17 for .cc), under the name these tests use."""
    return build_test_plugin


class Loaded:
    """A test plugin loaded into a private manager: its platform, executor 0, a stream, and
    the plugin's own exported test functions."""

    def __init__(self, manager, path):
        self.manager = manager
        self.path = path
        self.platform = manager.load_plugin(path)
        self.executor = self.platform.executor(0)
        self.stream = self.executor.create_stream()
        self.lib = ctypes.CDLL(path)
        self._keep = []

    def kernel(self, op, **filters):
        from pluggable.kernels.registry import registered_kernels

        found = [r for r in registered_kernels(op, self.platform.device_type)
                 if r.plugin == self.path
                 and all(getattr(r, k) == v for k, v in filters.items())]
        assert found, f"no kernel for {op} from {self.path}"
        return max(found, key=lambda r: r.priority)

    def upload(self, array):
        """Device memory (straight from the plugin) holding ``array``; a KernelInput."""
        from pluggable.kernels.registry import KernelInput
        from pluggable.dtypes import as_dtype

        array = np.ascontiguousarray(array)
        memory = self.executor.allocate(max(array.nbytes, 1))
        if array.nbytes:
            self.executor.sync_memcpy_htod(memory, array)
        self._keep.append(memory)
        return KernelInput(memory.address, array.nbytes, int(as_dtype(array.dtype).tf_code),
                           array.shape, False)

    def download(self, output, dtype):
        """The NumPy value of an owned device KernelOutput, which is freed."""
        out = np.empty(output.shape, dtype=dtype)
        if output.nbytes:
            self.executor.sync_memcpy_dtoh(
                out, DeviceMemory.unchecked(self.executor, output.address, output.nbytes))
        if output.owned:
            self.executor.allocator.deallocate(output.address)
        return out

    def bytes_in_use(self) -> int:
        return self.executor.allocator.stats()["bytes_in_use"]

    def close(self):
        for memory in self._keep:
            memory.close()
        self._keep.clear()
        self.stream.close()


@pytest.fixture
def load_kernel_plugin(private_manager):
    """``load_kernel_plugin(path)`` loads a kernel test plugin into a private manager; after
    the test, its device allocator must have nothing in use (no leaked outputs or
    temporaries)."""
    loaded = []

    def load(path):
        item = Loaded(private_manager, path)
        loaded.append(item)
        return item

    yield load
    for item in loaded:
        item.close()
        if item.executor.allocator_created:
            stats = item.executor.allocator.stats()
            assert stats["bytes_in_use"] == 0, f"kernels leaked device memory: {stats}"


@pytest.fixture
def ktest(build_kernel_plugin, load_kernel_plugin):
    """The C++ kernel plugin (tests/plugins/kernel_plugin.cc), loaded."""
    return load_kernel_plugin(build_kernel_plugin(KERNEL_PLUGIN_CC))


@pytest.fixture
def kc(build_kernel_plugin, load_kernel_plugin):
    """The C kernel plugin (tests/plugins/kernel_c_plugin.c), loaded: device type KC."""
    return load_kernel_plugin(build_kernel_plugin(KERNEL_C_PLUGIN, PLATFORM_NAME="KC_DEV",
                                                  DEVICE_TYPE="KC"))
