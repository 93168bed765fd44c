"""The gradients of a small MLP's loss with `pluggable.GradientTape` on the XPU and on the
CPU against `tf.GradientTape` on TensorFlow's CPU, from the same weights and data.
TensorFlow runs in a child process (it loads its own copy of the TF_* functions)."""
from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

import pluggable
from pluggable import ops, raw_ops

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                                reason="TensorFlow is not installed (pip install "
                                       "tensorflow-cpu==2.21.*)")

rng = np.random.default_rng(3)
DATA = {
    "x": rng.normal(size=(8, 4)).astype(np.float32),
    "labels": rng.integers(0, 3, size=8).astype(np.int64),
    "w1": rng.normal(size=(4, 6)).astype(np.float32) * 0.5,
    "b1": rng.normal(size=6).astype(np.float32) * 0.1,
    "w2": rng.normal(size=(6, 3)).astype(np.float32) * 0.5,
    "b2": rng.normal(size=3).astype(np.float32) * 0.1,
}
NAMES = ["w1", "b1", "w2", "b2"]

TF_CODE = """
import json, sys
import numpy as np
import tensorflow as tf
tf.config.set_visible_devices(tf.config.list_physical_devices("CPU"))  # TensorFlow's CPU only
tf.device("/CPU:0").__enter__()
data = {k: np.asarray(v) for k, v in json.loads(sys.stdin.read()).items()}
variables = [tf.Variable(data[n].astype(np.float32)) for n in %r]
w1, b1, w2, b2 = variables
with tf.GradientTape() as tape:
    hidden = tf.nn.relu(tf.nn.bias_add(tf.matmul(data["x"].astype(np.float32), w1), b1))
    logits = tf.nn.bias_add(tf.matmul(hidden, w2), b2)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=data["labels"].astype(np.int64), logits=logits))
grads = tape.gradient(loss, variables)
print(json.dumps({"loss": float(loss), "grads": [g.numpy().tolist() for g in grads]}))
""" % (NAMES,)


@pytest.fixture(scope="module")
def tensorflow_result():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", TF_CODE], capture_output=True, text=True,
                          input=json.dumps({k: v.tolist() for k, v in DATA.items()}),
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("device,name", [("/cpu:0", "/device:CPU:0"),
                                         ("/xpu:0", "/device:XPU:0")], ids=["cpu", "xpu"])
def test_mlp_gradients_equal_tensorflows(device, name, tensorflow_result):
    with pluggable.device(device):
        variables = [pluggable.Variable(DATA[n]) for n in NAMES]
        w1, b1, w2, b2 = variables
        with pluggable.GradientTape() as tape:
            hidden = ops.relu(ops.bias_add(ops.matmul(pluggable.constant(DATA["x"]), w1), b1))
            logits = ops.bias_add(ops.matmul(hidden, w2), b2)
            loss = ops.reduce_mean(raw_ops.SparseSoftmaxCrossEntropyWithLogits(
                features=logits, labels=DATA["labels"])[0])
        grads = tape.gradient(loss, variables)
    assert tape.watched_variables() == tuple(variables)
    np.testing.assert_allclose(float(loss), tensorflow_result["loss"], rtol=1e-5)
    for variable, g, expected in zip(NAMES, grads, tensorflow_result["grads"]):
        assert g.device == name
        np.testing.assert_allclose(g.numpy(), np.asarray(expected, np.float32), rtol=1e-4,
                                   atol=1e-6, err_msg=variable)
