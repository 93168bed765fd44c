"""Programs written once with pluggable.ops give the same results on CPU, XPU:0 and XPU:1 by
changing only the device scope."""
from __future__ import annotations

import numpy as np
import pytest

import pluggable
from pluggable import ops

DEVICES = ["CPU", "xpu:0", "xpu:1"]


def mlp(x, w1, b1, w2, b2, w3, b3):
    h = ops.relu(ops.bias_add(ops.matmul(x, w1), b1))
    h = ops.tanh(ops.bias_add(ops.matmul(h, w2), b2))
    logits = ops.bias_add(ops.matmul(h, w3), b3)
    return ops.softmax(logits), ops.argmax(logits, axis=1)


def conv_net(images, k1, k2, dense):
    h = ops.relu(ops.conv2d(images, k1, strides=1, padding="SAME"))
    h = ops.relu(ops.conv2d(h, k2, strides=2, padding="VALID"))
    pooled = ops.reduce_mean(h, axis=[1, 2])
    return ops.log_softmax(ops.matmul(pooled, dense))


def params(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) / np.sqrt(s[0] if len(s) > 1 else 1)).astype(np.float32)
            for s in shapes]


def run_everywhere(model, inputs):
    results = {}
    for name in DEVICES:
        with pluggable.device(name):
            outputs = model(*inputs)
            assert all(o.device == pluggable.tensor(0, device=name).device for o in outputs)
            results[name] = [o.numpy() for o in outputs]
    return results


def test_mlp_inference():
    inputs = params(1, (64, 784), (784, 128), (128,), (128, 64), (64,), (64, 10), (10,))
    results = run_everywhere(mlp, inputs)
    for name in DEVICES[1:]:
        np.testing.assert_allclose(results[name][0], results["CPU"][0], rtol=1e-4, atol=1e-6)
        np.testing.assert_array_equal(results[name][1], results["CPU"][1])
    assert results["CPU"][0].sum(axis=1) == pytest.approx(np.ones(64), rel=1e-5)


def test_conv_net():
    inputs = params(2, (8, 16, 16, 3), (3, 3, 3, 8), (3, 3, 8, 16), (16, 10))
    results = run_everywhere(lambda *a: [conv_net(*a)], inputs)
    for name in DEVICES[1:]:
        np.testing.assert_allclose(results[name][0], results["CPU"][0], rtol=1e-4, atol=1e-5)
