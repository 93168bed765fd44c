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

# AddressSanitizer reserves terabytes of address space for its shadow memory, so a child
# under an address-space limit cannot even start under it (.ci/sanitize preloads it).
address_space_limit = pytest.mark.skipif(
    "libasan" in os.environ.get("LD_PRELOAD", ""),
    reason="runs a child under RLIMIT_AS, which AddressSanitizer's shadow memory exceeds")


def run_limited(code: str, limit: int = 3 << 30) -> subprocess.CompletedProcess:
    """Runs ``code`` in a child whose address space is limited to ``limit`` bytes."""
    prelude = (f"import resource\nresource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))\n")
    env = dict(os.environ)  # the interpreter's own pluggable, installed or editable
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120, env=env)


@address_space_limit
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


@address_space_limit
def test_memory_error_inside_a_cpu_kernel_becomes_resource_exhausted():
    # Where's output shape is known only from the values (one row per true element), so no
    # check can come first: 40 MiB of indices under a limit with 8 MiB of room make NumPy
    # raise MemoryError, reported as ResourceExhaustedError for the op.
    result = run_limited("""
        import numpy as np, resource
        import pluggable
        from pluggable.eager.dispatch import execute
        from pluggable.errors import ResourceExhaustedError
        x = pluggable.tensor(np.ones(5 << 20, np.bool_))
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (used + (8 << 20),) * 2)
        try:
            execute("Where", [x])
        except ResourceExhaustedError as e:
            print("refused:", e)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("refused: out of host memory running Where on the CPU"), \
        result.stdout
    assert "shape (unknown) int64" in result.stdout


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


@address_space_limit
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


@address_space_limit
def test_small_cpu_output_larger_than_the_memory_left_is_refused():
    # 16 MiB, far below the size of a fresh reading, under a limit with 4 MiB of room: once
    # the last reading is a second old, the check refuses it before NumPy allocates, with
    # the op, shape, size, device and room.
    result = run_limited("""
        import numpy as np, resource, time
        import pluggable
        from pluggable import ops
        from pluggable.errors import ResourceExhaustedError
        x = pluggable.tensor(np.ones(2 << 20, np.float64))
        before = ops.add(x, x)  # a reading is taken now, with room to spare
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (used + (4 << 20),) * 2)
        time.sleep(1.1)
        for _ in range(2):
            try:
                ops.add(x, x)
            except ResourceExhaustedError as e:
                print("refused:", e)
        small = pluggable.tensor(np.arange(4, dtype=np.float64))
        print(ops.add(small, small).numpy().tolist())
    """)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 3, result.stdout
    for line in lines[:2]:
        assert line.startswith("refused: AddV2 would need 16.0 MiB (16777216 bytes) for its "
                               "outputs (shape (2097152,) float64) on /device:CPU:0, more than "
                               "the memory left to this process on the host ("), line
        assert "nothing was allocated" in line
    assert lines[2] == "[0.0, 2.0, 4.0, 6.0]"


def _run_with_device_limit(code: str, limit: int) -> subprocess.CompletedProcess:
    """Runs ``code`` in a child whose XPU:0 allocator is limited to ``limit`` bytes."""
    prelude = (f"import pluggable\npluggable.config.set_memory_limit('XPU:0', {limit})\n")
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))


def test_small_device_output_larger_than_the_device_limit_is_refused_on_every_call():
    # 2 MiB on a device limited to 1 MiB: refused before the kernel runs, by the op's first
    # call and by the repeated one (a refused call leaves no remembered plan behind).
    result = _run_with_device_limit("""
        import numpy as np
        from pluggable import ops
        from pluggable.eager import dispatch
        from pluggable.errors import ResourceExhaustedError
        allocator = pluggable.get_device("XPU:0").executor.allocator
        with pluggable.device("XPU:0"):
            kept = ops.fill([4], 1.0)  # something in use
            allocs = allocator.stats()["num_allocs"]
            plans = len(dispatch._plans)
            for _ in range(2):
                try:
                    ops.fill([512, 1024], 1.0)
                except ResourceExhaustedError as e:
                    print("refused:", e)
            print(allocator.stats()["num_allocs"] - allocs, len(dispatch._plans) - plans)
            print(ops.fill([2, 2], 3.0).numpy().tolist())
    """, 1 << 20)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 4, result.stdout
    for line in lines[:2]:
        assert line == (
            "refused: Fill would need 2.0 MiB (2097152 bytes) for its outputs (shape (512, "
            "1024) float32) on /device:XPU:0, more than the memory limit of /device:XPU:0 "
            "(1.0 MiB, of which 256 B in use and 1023.8 KiB left); nothing was allocated. "
            "Check the arguments (a size or depth far too large?) or work on smaller pieces."), line
    assert lines[2] == "0 0"
    assert lines[3] == "[[3.0, 3.0], [3.0, 3.0]]"


def test_empty_checks_every_size(xpu_platform):
    limit = xpu_platform.executor(0).allocator.memory_limit
    with pytest.raises(ResourceExhaustedError) as info:
        pluggable.empty((limit // 4 + 1,), "float32", device="XPU:0")
    assert "empty would need" in str(info.value)
    assert f"for a tensor (shape ({limit // 4 + 1},) float32) on /device:XPU:0" in str(info.value)
    assert pluggable.empty((limit // 8,), "float32", device="XPU:0").shape == (limit // 8,)


class _Readings:
    """Stands in for `host_memory_left`: answers ``left`` and counts the readings."""

    def __init__(self, left):
        self.left, self.count = left, 0

    def __call__(self):
        self.count += 1
        return self.left


@pytest.fixture
def readings(monkeypatch):
    from pluggable.base import limits

    clock = [1000.0]
    reader = _Readings(800 << 20)
    monkeypatch.setattr(limits, "host_memory_left", reader)
    monkeypatch.setattr(limits, "_monotonic", lambda: clock[0])
    monkeypatch.setattr(limits, "_reading", [None, float("-inf"), 0])
    reader.clock = clock
    return reader


def test_host_check_compares_with_a_recent_reading(readings):
    from pluggable.base.limits import host_memory_fits

    assert host_memory_fits(1 << 20) is None
    assert readings.count == 1  # the first check reads
    for _ in range(50):  # 50 MiB more, under an eighth of 800 MiB: no reading
        assert host_memory_fits(1 << 20) is None
    assert readings.count == 1
    for _ in range(60):  # past an eighth (100 MiB) since the reading: one more
        assert host_memory_fits(1 << 20) is None
    assert readings.count == 2
    readings.clock[0] += 1.5  # a second later: read again
    assert host_memory_fits(16) is None
    assert readings.count == 3
    assert host_memory_fits(64 << 20) is None  # a large output always reads
    assert readings.count == 4


def test_host_check_reads_again_before_refusing(readings):
    from pluggable.base.limits import host_memory_fits

    assert host_memory_fits(16) is None
    readings.left = 2 << 20  # the memory went elsewhere
    assert host_memory_fits(4 << 20) is None  # the old reading had room for it...
    assert readings.count == 1
    assert host_memory_fits(100 << 20) == 2 << 20  # ...this one is read again and refused
    assert readings.count == 2
    assert host_memory_fits(4 << 20) == 2 << 20  # 4 MiB is now an eighth's worth: read
    readings.left = None  # nothing says: everything fits
    readings.clock[0] += 2
    assert host_memory_fits(1 << 40) is None
