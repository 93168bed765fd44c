"""Fixtures shared by every test: the compiled test plugins, the XPU device and its
fault-injection controls."""
from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import sys
import threading
from typing import Optional

import pytest

# The probe's verdicts go to a cache of the session's own, never to the user's ~/.cache;
# subprocesses of the tests inherit it.
import atexit
import shutil
import tempfile

os.environ["PLUGGABLE_CACHE_DIR"] = tempfile.mkdtemp(prefix="pluggable-test-cache-")
atexit.register(shutil.rmtree, os.environ["PLUGGABLE_CACHE_DIR"], True)

import pluggable  # noqa: E402
from pluggable.loader import PluginManager

HERE = os.path.dirname(os.path.abspath(__file__))
TEST_PLUGIN_SOURCE = os.path.join(HERE, "plugins", "test_plugin.c")
# PLUGGABLE_TEST_CFLAGS adds flags to every test plugin (the sanitizer step of .ci/run).
_EXTRA_FLAGS = os.environ.get("PLUGGABLE_TEST_CFLAGS", "").split()
C_FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-fPIC", "-shared", "-pthread",
           *_EXTRA_FLAGS]
CXX_FLAGS = ["-std=c++17", "-Wall", "-Wextra", "-Werror", "-O1", "-fPIC", "-shared",
             "-pthread", *_EXTRA_FLAGS]


@pytest.fixture(scope="session")
def plugin_build_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("plugins")


@pytest.fixture(scope="session")
def build_test_plugin(plugin_build_dir):
    """``build_test_plugin(source=tests/plugins/test_plugin.c, NAME=value, FLAG=True, ...)``
    compiles a test plugin with those macros (once per set) and returns the path of the
    shared library: a .c source as C11, a .cc source as C++17."""
    cache = {}

    def build(source: str = TEST_PLUGIN_SOURCE, **macros) -> str:
        defines = [f"-D{name}" if value is True else f"-D{name}={value}"
                   for name, value in sorted(macros.items())]
        key = (source, tuple(defines))
        if key not in cache:
            digest = hashlib.sha1(repr(key).encode()).hexdigest()[:12]
            out = os.path.join(str(plugin_build_dir), f"libtest_{digest}.so")
            if source.endswith(".cc"):
                compiler, flags = os.environ.get("CXX", "g++"), CXX_FLAGS
            else:
                compiler, flags = os.environ.get("CC", "cc"), C_FLAGS
            cmd = [compiler, *flags, "-I", pluggable.get_include(), *defines, "-o", out, source]
            result = subprocess.run(cmd, capture_output=True, text=True)
            if result.returncode:
                raise AssertionError(f"compiling {' '.join(cmd)} failed:\n{result.stderr}")
            cache[key] = out
        return cache[key]

    return build


@pytest.fixture
def private_manager():
    """A plugin manager of the test's own, with discovery off: plugins loaded into it do
    not meet the process's XPU plugin or each other across tests."""
    m = PluginManager()
    m._discovered = True
    yield m
    m.shutdown()


@pytest.fixture(scope="session")
def xpu_platform():
    platform = pluggable.get_platform("REF_XPU")
    return platform


@pytest.fixture(scope="session")
def xpu_control(xpu_platform):
    """The XPU plugin's test-control functions (plugins/xpu/xpu_control.h)."""
    lib = ctypes.CDLL(xpu_platform.path)
    lib.XPU_SetFaults.argtypes = [ctypes.c_char_p]
    lib.XPU_SetFaults.restype = ctypes.c_int
    lib.XPU_SetStreamDelayUs.argtypes = [ctypes.c_uint64]
    lib.XPU_SetStreamDelayUs.restype = None
    lib.XPU_LastControlError.restype = ctypes.c_char_p
    for counter in ("XPU_InvalidFreeCount", "XPU_OpRecordAllocations", "XPU_SplitTaskCount",
                    "XPU_PoolMoveCount"):  # uint64_t (void)
        getattr(lib, counter).argtypes = []
        getattr(lib, counter).restype = ctypes.c_uint64
    return lib


@pytest.fixture
def faults(xpu_control):
    """``faults("allocate:1")`` injects XPU faults for the test; cleared afterwards."""
    def set_faults(spec: str) -> None:
        if xpu_control.XPU_SetFaults(spec.encode()) != 0:
            raise AssertionError(xpu_control.XPU_LastControlError().decode())
    yield set_faults
    xpu_control.XPU_SetFaults(None)


@pytest.fixture
def plugin_calls(monkeypatch):
    """``plugin_calls(executor)``: the list of the names of the SP_StreamExecutor calls the
    executor makes through Python (`StreamExecutor._call`) from now on, for the test."""
    def record(executor):
        names = []
        original = executor._call

        def call(name, *args):
            names.append(name)
            return original(name, *args)

        monkeypatch.setattr(executor, "_call", call)
        return names
    return record


@pytest.fixture
def stream_delay(xpu_control):
    """``stream_delay(us)`` slows every XPU stream operation for the test."""
    yield lambda us: xpu_control.XPU_SetStreamDelayUs(us)
    xpu_control.XPU_SetStreamDelayUs(0)


def user_handles(executor):
    """The executor's live plugin handles, less those the host keeps on purpose: pooled
    events of the event manager (and those the staging ring's fences hold), the streams of open PluggableDevices and the internal
    stream of synchronous-copy fallbacks."""
    import gc

    gc.collect()
    executor.flush_releases()
    if executor._event_manager is not None:
        executor._event_manager.synchronize()
    counts = executor.live_handles()
    if executor._event_manager is not None:
        counts["events"] -= len(executor._event_manager._pool)
    if executor._staging is not None:  # the staging ring's fences: pooled events on loan
        counts["events"] -= executor._staging.held_events
    devices = pluggable.manager().devices._devices.values()
    counts["streams"] -= sum(4 for d in devices if d.executor is executor and not d.is_closed)
    counts["streams"] -= executor._internal_stream is not None
    return counts


@pytest.fixture(scope="session")
def handle_counts():
    """`user_handles`, for test modules that cannot import this conftest by name."""
    return user_handles


@pytest.fixture
def xpu(xpu_platform):
    """StreamExecutor of XPU:0, checked for leaked handles after the test."""
    executor = xpu_platform.executor(0)
    before = user_handles(executor)
    yield executor
    after = user_handles(executor)
    assert after == before, f"the test leaked XPU handles: {before} -> {after}"


@pytest.fixture
def xpu1(xpu_platform):
    return xpu_platform.executor(1)


@pytest.fixture
def xpu1_checked(xpu1):
    """StreamExecutor of XPU:1, checked for leaked handles after the test as `xpu` checks
    XPU:0 (the event manager's pooled events, which its first peer copy makes, are not
    leaks)."""
    before = user_handles(xpu1)
    yield xpu1
    after = user_handles(xpu1)
    assert after == before, f"the test leaked XPU:1 handles: {before} -> {after}"


@pytest.fixture(scope="session")
def run_python():
    """``run_python(code, env={...})`` runs ``code`` in a fresh interpreter (discovery
    happens once per process) and returns the completed process; ``run_python(None,
    args=("-m", "pluggable"))`` runs a module instead."""
    def run(code: Optional[str], env=None, check=True, args=()) -> subprocess.CompletedProcess:
        full_env = dict(os.environ)
        for name, value in (env or {}).items():
            if value is None:
                full_env.pop(name, None)
            else:
                full_env[name] = value
        command = [sys.executable, *args] + (["-c", code] if code is not None else [])
        result = subprocess.run(command, capture_output=True, text=True, env=full_env,
                                timeout=120)
        if check and result.returncode:
            raise AssertionError(f"subprocess failed ({result.returncode}):\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result

    return run


@pytest.fixture
def in_threads():
    """``in_threads(work, n)`` runs ``work(i)`` for i in range(n), each on its own thread, and
    raises the first exception any of them raised (a thread cannot fail a test itself)."""
    def run(work, count: int) -> None:
        errors = []

        def guarded(i):
            try:
                work(i)
            except BaseException as exc:  # re-raised below, in the test's thread
                errors.append(exc)

        threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
    return run
