"""Element-wise kernels split across the XPU's helper threads from XPU_ELEMENTWISE_SPLIT
elements on, and give the same results split or not.

The default threshold (4M elements) is above what the other tests use, so these tests run a
fresh interpreter with XPU_ELEMENTWISE_SPLIT=0 (split from 2 x XPU_PARALLEL_GRAIN elements)
and two kernel threads, and compare with NumPy element by element."""
from __future__ import annotations

import json

import pytest

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
