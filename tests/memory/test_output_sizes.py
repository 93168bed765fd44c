"""Output sizes are checked before anything is allocated: an op whose outputs exceed the
device's memory limit, or on the CPU the memory left to the process, raises
ResourceExhaustedError naming the op and the size. The CPU cases run in a child process under
an address-space limit, so a failing check cannot take the machine's memory."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pluggable
from pluggable import ops
from pluggable.base.limits import host_memory_left
from pluggable.eager.dispatch import execute
from pluggable.errors import ResourceExhaustedError

def run_limited(code: str, limit: int = 3 << 30) -> subprocess.CompletedProcess:
    """Runs ``code`` in a child whose address space is limited to ``limit`` bytes."""
    prelude = (f"import resource\nresource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))\n")
    env = dict(os.environ)  # the interpreter's own pluggable, installed or editable
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120, env=env)


def test_one_hot_too_large_for_the_host_is_refused_before_allocating():
    result = run_limited("""
        import warnings
        import numpy as np
        from pluggable import ops
        from pluggable.errors import ResourceExhaustedError
        warnings.simplefilter("ignore")
        for device in ("CPU", "XPU:0"):  # no OneHot kernel on the XPU: the CPU runs it
            try:
                import pluggable
                with pluggable.device(device):
                    ops.one_hot(np.array([0, 1]), 2**31 - 1)
            except ResourceExhaustedError as e:
                print("refused:", e)
        # the process goes on: a small one still works
        print(ops.one_hot(np.array([0, 2]), 3).numpy().tolist())
    """)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len([line for line in lines if line.startswith("refused:")]) == 2, result.stdout
    assert "OneHot would need 16.0 GiB (17179869176 bytes)" in lines[0]
    assert "shape (2, 2147483647) float32" in lines[0]
    assert "memory left to this process on the host" in lines[0]
    assert lines[-1] == "[[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]"


def test_memory_error_inside_a_cpu_kernel_becomes_resource_exhausted():
    # 40 MiB output (below the size where the memory left is read) under a limit with less
    # room than that: NumPy's MemoryError is reported as ResourceExhaustedError for the op.
    result = run_limited("""
        import numpy as np, resource
        import pluggable
        from pluggable import ops
        from pluggable.errors import ResourceExhaustedError
        x = pluggable.tensor(np.ones(5 << 20, np.float64))
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (used + (8 << 20),) * 2)
        try:
            ops.add(x, x)
        except ResourceExhaustedError as e:
            print("refused:", e)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("refused: out of host memory running AddV2 on the CPU"), \
        result.stdout
    assert "shape (5242880,) float64" in result.stdout


def test_fill_larger_than_the_device_limit_is_refused_before_the_kernel_runs(xpu_platform):
    xpu = xpu_platform.executor(0)
    limit = xpu.allocator.memory_limit
    before = xpu.allocator.stats()["num_allocs"]
    with pluggable.device("XPU:0"):
        with pytest.raises(ResourceExhaustedError) as info:
            execute("Fill", [np.array([1 << 20, 1 << 16], np.int32), np.float32(1)])
    message = str(info.value)
    assert "Fill would need 256.0 GiB (274877906944 bytes)" in message
    assert "memory limit of /device:XPU:0" in message and "nothing was allocated" in message
    assert limit < 1 << 38
    assert xpu.allocator.stats()["num_allocs"] == before
    with pluggable.device("XPU:0"):  # the device is still usable
        out = execute("Fill", [np.array([2, 3], np.int32), np.float32(4)])[0]
    np.testing.assert_array_equal(out.numpy(), np.full((2, 3), 4, np.float32))


def test_host_memory_left_reads_the_address_space_limit():
    result = run_limited("""
        from pluggable.base.limits import host_memory_left
        print(host_memory_left())
    """, limit=2 << 30)
    assert result.returncode == 0, result.stderr
    left = int(result.stdout)
    assert 0 < left < 2 << 30
    assert host_memory_left() is not None and host_memory_left() > 0


def test_sizes_below_the_check_run_normally():
    out = ops.one_hot(np.array([[0, 3], [-1, 2]]), 3, axis=1).numpy()
    want = np.zeros((2, 3, 2), np.float32)
    want[0, 0, 0] = want[1, 2, 1] = 1
    np.testing.assert_array_equal(out, want)
