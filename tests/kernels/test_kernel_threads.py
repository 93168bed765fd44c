"""How a GEMM is cut for the XPU's kernel threads, and where those threads run.

A product of a few tiles of C is cut into two row tiles per kernel thread, so that every
thread gets an even share (plugins/xpu/README.md, "Threads"). The tiles of C never change
how an element is computed, so the results are bit for bit the same whatever
XPU_KERNEL_THREADS is. A helper thread that joins a job on a CPU another thread of the job
already has moves to a free one, and leaves its affinity as it found it. Each case runs in a
fresh interpreter, since the pool reads XPU_KERNEL_THREADS when it starts its helpers."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PRODUCTS = r"""
import ctypes, hashlib, json
import numpy as np
import pluggable
from pluggable import raw_ops

dev = pluggable.get_device("XPU:0")
count = ctypes.CDLL(pluggable.get_platform("REF_XPU").path).XPU_SplitTaskCount
count.restype = ctypes.c_uint64
rng = np.random.default_rng(11)

def run(name, fn, *arrays):
    tensors = [pluggable.tensor(a, device=dev) for a in arrays]
    before = count()
    got = fn(*tensors).numpy()
    return name, int(count() - before), hashlib.sha256(got.tobytes()).hexdigest(), got

rows = []
for m, k, n in [(256, 256, 256), (384, 256, 256), (512, 512, 512), (300, 257, 131),
                (193, 64, 40), (128, 128, 128)]:
    for dtype in (np.float32, np.float64):
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        name, tasks, digest, got = run(f"MatMul {m}x{k}x{n} {np.dtype(dtype).name}",
                                       lambda x, y: raw_ops.MatMul(a=x, b=y), a, b)
        np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
        rows.append([name, tasks, digest])
x = rng.standard_normal((3, 200, 96)).astype(np.float32)
y = rng.standard_normal((3, 96, 70)).astype(np.float32)
name, tasks, digest, got = run("BatchMatMulV2 3x200x96x70",
                               lambda p, q: raw_ops.BatchMatMulV2(x=p, y=q), x, y)
np.testing.assert_allclose(got, x.astype(np.float64) @ y, rtol=1e-4, atol=1e-3)
rows.append([name, tasks, digest])
image = rng.standard_normal((2, 20, 20, 8)).astype(np.float32)
kernel = rng.standard_normal((3, 3, 8, 16)).astype(np.float32)
name, tasks, digest, _ = run("Conv2D 2x20x20x8 3x3x8x16",
                             lambda p, q: raw_ops.Conv2D(input=p, filter=q, strides=[1, 1, 1, 1],
                                                         padding="SAME"), image, kernel)
rows.append([name, tasks, digest])
print(json.dumps(rows))
"""


def products(run_python, threads):
    result = run_python(PRODUCTS, env={"XPU_KERNEL_THREADS": str(threads)})
    return {name: (tasks, digest) for name, tasks, digest in
            json.loads(result.stdout.splitlines()[-1])}


@pytest.mark.parametrize("threads", [2, 3])
def test_gemm_results_are_the_same_bits_for_any_thread_count(run_python, threads):
    one = products(run_python, 1)
    other = products(run_python, threads)
    assert one.keys() == other.keys() and len(one) == 14
    assert {name: digest for name, (_, digest) in other.items()} == \
        {name: digest for name, (_, digest) in one.items()}


def test_a_gemm_of_few_tiles_is_cut_into_two_row_tiles_per_thread(run_python):
    # Tiles of C are at most 192 rows (AVX-512 float32) down to 96 (16-byte vectors) by 256
    # or 512 columns, so with every instruction set a product of 256 or 384 rows and 256
    # columns has 2 to 4 row tiles of its own. Cut for the threads, it has 4 for 2 threads
    # and 6 for 3: equal heights in whole micro-panels give exactly that many.
    one, two, three = (products(run_python, t) for t in (1, 2, 3))
    for name in ("MatMul 256x256x256 float32", "MatMul 384x256x256 float32",
                 "MatMul 256x256x256 float64", "MatMul 384x256x256 float64"):
        assert 2 <= one[name][0] <= 4, (name, one[name])
        assert two[name][0] == 4, (name, two[name])
        assert three[name][0] == 6, (name, three[name])
    # A product of one tile with enough work (2^19 multiply-adds and more) is cut the same way.
    for name in ("MatMul 128x128x128 float32", "MatMul 128x128x128 float64"):
        assert (one[name][0], two[name][0], three[name][0]) == (2, 4, 6), name
    # A batch of three products of two row tiles each already gives every thread two tasks:
    # its tiles stay as they are.
    batch = "BatchMatMulV2 3x200x96x70"
    assert one[batch][0] == two[batch][0] == three[batch][0] >= 6, (one, two, three)


PLACEMENT = r"""
import ctypes, json, os
import numpy as np

os.sched_setaffinity(0, {0})  # the stream workers, and the helper they start, inherit CPU 0
import pluggable
from pluggable import raw_ops

dev = pluggable.get_device("XPU:0")
lib = ctypes.CDLL(pluggable.get_platform("REF_XPU").path)
lib.XPU_PoolMoveCount.restype = ctypes.c_uint64
rng = np.random.default_rng(2)
a = rng.standard_normal((512, 512)).astype(np.float32)
A = pluggable.tensor(a, device=dev)
want = raw_ops.MatMul(a=A, b=A).numpy()
for _ in range(3):
    raw_ops.MatMul(a=A, b=A)
dev.synchronize()

def threads(name):
    return [int(t) for t in os.listdir("/proc/self/task")
            if open(f"/proc/self/task/{t}/comm").read().strip() == name]

helpers = threads("xpu-pool")
widen = os.environ.get("WIDEN") == "1"
if widen:
    for tid in helpers:
        os.sched_setaffinity(tid, {0, 1})  # a helper on CPU 0, allowed on 1: free to move
moves = lib.XPU_PoolMoveCount()
same = True
for _ in range(200):
    same = same and np.array_equal(raw_ops.MatMul(a=A, b=A).numpy(), want)
    if widen and lib.XPU_PoolMoveCount() > moves:
        break
print(json.dumps({"helpers": len(helpers), "moves": int(lib.XPU_PoolMoveCount() - moves),
                  "same": same,
                  "affinity": sorted({str(sorted(os.sched_getaffinity(t))) for t in helpers})}))
"""

two_cpus = pytest.mark.skipif(not hasattr(os, "sched_getaffinity")
                              or not {0, 1} <= os.sched_getaffinity(0),
                              reason="needs Linux and CPUs 0 and 1")


BUSY_CPU_1 = "import os\nos.sched_setaffinity(0, {1})\nwhile True:\n    pass\n"


@two_cpus
def test_a_helper_on_a_taken_cpu_moves_and_keeps_its_affinity(run_python):
    # CPU 1 is kept busy by another process, so the scheduler has no idle CPU to wake the
    # helper on and leaves it where it last ran, on CPU 0 with the workers.
    busy = subprocess.Popen([sys.executable, "-c", BUSY_CPU_1])
    try:
        result = run_python(PLACEMENT, env={"XPU_KERNEL_THREADS": "2", "WIDEN": "1"})
    finally:
        busy.kill()
        busy.wait()
    out = json.loads(result.stdout.splitlines()[-1])
    assert out["helpers"] == 1 and out["same"], out
    # The workers stay on CPU 0, so the helper, last run there, finds CPU 0 taken and moves.
    assert out["moves"] >= 1, out
    # It narrowed its affinity to move and put back what it had.
    assert out["affinity"] == ["[0, 1]"], out


@two_cpus
def test_a_helper_with_nowhere_to_go_stays_and_works(run_python):
    result = run_python(PLACEMENT, env={"XPU_KERNEL_THREADS": "2", "WIDEN": "0"})
    out = json.loads(result.stdout.splitlines()[-1])
    assert out == {"helpers": 1, "moves": 0, "same": True, "affinity": ["[0]"]}, out
