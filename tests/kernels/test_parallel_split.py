"""Kernels split across the XPU's helper threads give the same results split or not, and
split where plugins/xpu/README.md ("Threads") says they do.

Element-wise kernels split from XPU_ELEMENTWISE_SPLIT elements on, into an even number of
tasks of at least 32768 elements (default: from 2 x 32768). These tests run a fresh
interpreter with a given threshold and two kernel threads, and compare with NumPy element by
element. The plugin counts the tasks of every split kernel (XPU_SplitTaskCount,
xpu_control.h), which tells whether and how an op was split.

A float GEMM is split when C has more than one tile (at most 192 x 512 elements)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import pluggable
from pluggable import raw_ops


@pytest.fixture(scope="module")
def split_tasks(xpu_control):
    return xpu_control.XPU_SplitTaskCount

SPLIT_OPS = r"""
import json
import numpy as np
import pluggable
from pluggable import raw_ops

dev = pluggable.get_device("XPU:0")
rng = np.random.default_rng(3)
n = 300_007  # several tasks of 32768 elements and a ragged last one
x = rng.standard_normal(n).astype(np.float32)
y = rng.standard_normal(n).astype(np.float32)
m = rng.standard_normal((n // 7, 7)).astype(np.float64)
bias = rng.standard_normal(7)
cond = rng.integers(0, 2, n).astype(bool)
X, Y = pluggable.tensor(x, device=dev), pluggable.tensor(y, device=dev)
checks = {
    "AddV2": (raw_ops.AddV2(x=X, y=Y), x + y),
    "Mul broadcast": (raw_ops.Mul(x=pluggable.tensor(m, device=dev),
                                  y=pluggable.tensor(bias, device=dev)), m * bias),
    "Sqrt": (raw_ops.Sqrt(x=pluggable.tensor(np.abs(x), device=dev)), np.sqrt(np.abs(x))),
    "Cast": (raw_ops.Cast(x=X, DstT="float64"), x.astype(np.float64)),
    "SelectV2": (raw_ops.SelectV2(condition=pluggable.tensor(cond, device=dev), t=X, e=Y),
                 np.where(cond, x, y)),
    "BiasAdd": (raw_ops.BiasAdd(value=pluggable.tensor(m, device=dev),
                                bias=pluggable.tensor(bias, device=dev)), m + bias),
    "AddN": (raw_ops.AddN(inputs=[X, Y, X]), x + y + x),
    "ReluGrad": (raw_ops.ReluGrad(gradients=X, features=Y), np.where(y > 0, x, 0)),
    "Fill": (raw_ops.Fill(dims=np.asarray([n], np.int32), value=np.float32(2.5)),
             np.full(n, 2.5, np.float32)),
}
print(json.dumps({name: bool(np.array_equal(got.numpy(), want))
                  for name, (got, want) in checks.items()}))
"""


@pytest.mark.parametrize("split", ["0", "65536", "100000000"])
def test_results_are_the_same_split_or_not(run_python, split):
    result = run_python(SPLIT_OPS, env={"XPU_ELEMENTWISE_SPLIT": split,
                                        "XPU_KERNEL_THREADS": "2"})
    exact = json.loads(result.stdout.splitlines()[-1])
    assert exact == dict.fromkeys(exact, True) and len(exact) == 9, exact


@pytest.mark.parametrize("text", ["", "12x", "-1", "4611686018427387905",
                                  "99999999999999999999"])
def test_an_invalid_split_size_stops_the_plugin_with_a_reason(run_python, text):
    result = run_python("import pluggable; pluggable.get_device('XPU:0')",
                        env={"XPU_ELEMENTWISE_SPLIT": text}, check=False)
    assert result.returncode != 0
    assert (f"XPU_ELEMENTWISE_SPLIT='{text}' is not valid: expected a whole number of "
            "elements from 0 to 2^62") in result.stderr


SPLIT_COUNTS = r"""
import ctypes, json, sys
import numpy as np
import pluggable
from pluggable import raw_ops

dev = pluggable.get_device("XPU:0")
count = ctypes.CDLL(pluggable.get_platform("REF_XPU").path).XPU_SplitTaskCount
count.restype = ctypes.c_uint64
rng = np.random.default_rng(5)
out = []
for n in json.loads(sys.argv[1]):
    for dtype in (np.float32, np.float64, np.int32, np.int64):
        x = (rng.standard_normal(n) * 1000).astype(dtype)
        y = (rng.standard_normal(n) * 1000).astype(dtype)
        X, Y = pluggable.tensor(x, device=dev), pluggable.tensor(y, device=dev)
        before = count()
        z = raw_ops.AddV2(x=X, y=Y).numpy()
        out.append([n, np.dtype(dtype).name, int(count() - before),
                    bool(np.array_equal(z, x + y))])
print(json.dumps(out))
"""


@pytest.mark.parametrize("split, sizes", [
    # Across the threshold and across each step of the task count (tasks come in pairs of at
    # least 32768 elements each), odd sizes included.
    ("65536", {65535: 0, 65536: 2, 131071: 2, 131072: 4, 300_007: 8}),
    # 0: from 2 x 32768 elements on, never a split of a few elements.
    ("0", {5: 0, 65535: 0, 65536: 2}),
    # The default: from 2 x 32768 elements on, as with 0.
    (None, {65535: 0, 65536: 2, 100_000: 2, 131072: 4}),
])
def test_elementwise_split_points_and_results_for_every_dtype(run_python, split, sizes):
    result = run_python(None, env={"XPU_ELEMENTWISE_SPLIT": split, "XPU_KERNEL_THREADS": "2"},
                        args=("-c", SPLIT_COUNTS, json.dumps(list(sizes))))
    rows = json.loads(result.stdout.splitlines()[-1])
    assert len(rows) == 4 * len(sizes)
    for n, dtype, tasks, exact in rows:
        assert exact, (n, dtype)
        assert tasks == sizes[n], (n, dtype, tasks)


def product(dtype, m, k, n, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    return a, b


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, k, n", [
    (256, 256, 256),   # more rows than one tile of C holds (192 at most): split by rows
    (300, 257, 131),   # odd sizes: a ragged last row tile and a ragged micro-panel
    (5, 300, 1100),    # more columns than one tile holds (512 at most): split by columns
    (2, 3, 1),         # (below: one piece)
])
def test_a_gemm_of_several_tiles_is_split_and_exact(split_tasks, dtype, m, k, n):
    dev = pluggable.get_device("XPU:0")
    a, b = product(dtype, m, k, n)
    before = split_tasks()
    got = raw_ops.MatMul(a=pluggable.tensor(a, device=dev),
                         b=pluggable.tensor(b, device=dev)).numpy()
    tasks = split_tasks() - before
    assert tasks >= 2 if max(m / 192, n / 512) > 1 else tasks == 0, tasks
    want = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.sqrt(k) * 10)


# Below 2^19 multiply-adds (or two micro-panels of rows) a product of one tile runs as one
# piece; from there on it is split into row tiles (XPU_GEMM_SPLIT_FMAS).
@pytest.mark.parametrize("m, k, n", [(64, 64, 64), (90, 32, 128), (1, 2048, 512),
                                     (8, 512, 512)])
def test_a_small_gemm_runs_as_one_piece(split_tasks, m, k, n):
    dev = pluggable.get_device("XPU:0")
    a, b = product(np.float32, m, k, n, seed=1)
    before = split_tasks()
    got = raw_ops.MatMul(a=pluggable.tensor(a, device=dev),
                         b=pluggable.tensor(b, device=dev)).numpy()
    assert split_tasks() - before == 0
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, k, n", [(128, 128, 128), (90, 128, 128), (97, 61, 89)])
def test_a_one_tile_gemm_with_enough_work_is_split_by_rows_and_exact(split_tasks, dtype, m,
                                                                     k, n):
    dev = pluggable.get_device("XPU:0")
    a, b = product(dtype, m, k, n, seed=2)
    before = split_tasks()
    got = raw_ops.MatMul(a=pluggable.tensor(a, device=dev),
                         b=pluggable.tensor(b, device=dev)).numpy()
    assert split_tasks() - before >= 2
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=tol,
                               atol=tol * np.sqrt(k) * 10)
    # (test_kernel_threads checks that the bits are those of one thread.)
