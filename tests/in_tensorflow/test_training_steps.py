"""A few training steps of an MLP and of a small CNN with ``pluggable.GradientTape`` and
``pluggable.optimizers`` on /xpu:0 (and the CPU device) against ``tf.GradientTape`` and
``tf.keras.optimizers`` on TensorFlow 2.21's CPU, from the same initial weights and data: the
loss of every step agrees to 1e-4 relative, for SGD with momentum and for Adam.

TensorFlow runs in a child interpreter (tests/tensorflow_child.py); it makes the data (the
MLP's is TRAINING_DATA, shared with test_in_tensorflow.py), trains, and hands the data, the
initial weights and its losses back as JSON."""
from __future__ import annotations

import numpy as np
import pytest
from tensorflow_child import in_tensorflow

import pluggable
from pluggable import nn, ops, optimizers

from test_in_tensorflow import TRAINING_DATA  # noqa: E402  (skips without TensorFlow)

STEPS = 5
# (name, optimizer class, arguments): the same in Keras and in pluggable.optimizers.
OPTIMIZERS = [("sgd-momentum", "SGD", {"learning_rate": 0.1, "momentum": 0.9}),
              ("adam", "Adam", {"learning_rate": 0.01})]

TENSORFLOW = TRAINING_DATA + """

def cnn_data():
    rng = np.random.default_rng(1)
    images = rng.standard_normal((16, 8, 8, 2)).astype(np.float32)
    labels = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 16)]
    kernel = (rng.standard_normal((3, 3, 2, 4)) * 0.3).astype(np.float32)
    kernel_bias = (rng.standard_normal(4) * 0.1).astype(np.float32)
    dense = (rng.standard_normal((64, 3)) * 0.2).astype(np.float32)
    dense_bias = np.zeros(3, np.float32)
    return [images, labels], [kernel, kernel_bias, dense, dense_bias]


def mlp_data():
    x, y, w1, w2 = training_data()
    return [x, y.astype(np.int64)], [w1, np.zeros(16, np.float32), w2, np.zeros(3, np.float32)]


def mlp_loss(x, y, w1, b1, w2, b2):
    hidden = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), b1))
    logits = tf.nn.bias_add(tf.matmul(hidden, w2), b2)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))


def cnn_loss(images, labels, kernel, kernel_bias, dense, dense_bias):
    features = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(images, kernel, 1, "SAME"), kernel_bias))
    pooled = tf.nn.max_pool2d(features, 2, 2, "VALID")
    logits = tf.nn.bias_add(tf.matmul(tf.reshape(pooled, [images.shape[0], -1]), dense),
                            dense_bias)
    return tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels, logits))


out = {}
for model, data, loss_fn in (("mlp", mlp_data, mlp_loss), ("cnn", cnn_data, cnn_loss)):
    inputs, weights = data()
    out[model] = {"inputs": [a.tolist() for a in inputs],
                  "weights": [w.tolist() for w in weights]}
    for name, cls, kwargs in OPTIMIZERS:
        with tf.device("/CPU:0"):
            variables = [tf.Variable(w) for w in weights]
            optimizer = getattr(tf.keras.optimizers, cls)(**kwargs)
            losses = []
            for _ in range(STEPS):
                with tf.GradientTape() as tape:
                    loss = loss_fn(*inputs, *variables)
                optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
                losses.append(float(loss))
        out[model][name] = losses
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def tensorflow_runs():
    return in_tensorflow(f"STEPS = {STEPS}\nOPTIMIZERS = {OPTIMIZERS!r}\n" + TENSORFLOW)


def mlp_loss(x, y, w1, b1, w2, b2):
    hidden = nn.relu(nn.bias_add(ops.matmul(x, w1), b1))
    logits = nn.bias_add(ops.matmul(hidden, w2), b2)
    return ops.reduce_mean(nn.sparse_softmax_cross_entropy_with_logits(y, logits))


def cnn_loss(images, labels, kernel, kernel_bias, dense, dense_bias):
    features = nn.relu(nn.bias_add(nn.conv2d(images, kernel, 1, "SAME"), kernel_bias))
    pooled = nn.max_pool2d(features, 2, 2, "VALID")
    logits = nn.bias_add(ops.matmul(ops.reshape(pooled, [images.shape[0], -1]), dense),
                         dense_bias)
    return ops.reduce_mean(nn.softmax_cross_entropy_with_logits(labels, logits))


LOSSES = {"mlp": (mlp_loss, [np.float32, np.int64]), "cnn": (cnn_loss, [np.float32] * 2)}


def train(device, model, run, optimizer):
    """The loss of each of STEPS steps on `device`, from TensorFlow's data and weights; and
    the devices the gradients and the optimizer's slots were on."""
    loss_fn, input_types = LOSSES[model]
    _, cls, kwargs = next(o for o in OPTIMIZERS if o[0] == optimizer)
    with pluggable.device(device):
        inputs = [pluggable.constant(np.asarray(a, t))
                  for a, t in zip(run["inputs"], input_types)]
        variables = [pluggable.Variable(np.asarray(w, np.float32)) for w in run["weights"]]
        opt = getattr(optimizers, cls)(**kwargs)
        losses, devices = [], set()
        for _ in range(STEPS):
            with pluggable.GradientTape() as tape:
                loss = loss_fn(*inputs, *variables)
            grads = tape.gradient(loss, variables)
            devices |= {g.device for g in grads}
            opt.apply_gradients(zip(grads, variables))
            losses.append(float(loss.numpy()))
    return losses, devices, opt.update_op(variables[0])


@pytest.mark.parametrize("optimizer", [o[0] for o in OPTIMIZERS])
@pytest.mark.parametrize("model", ["mlp", "cnn"])
@pytest.mark.parametrize("device", ["/xpu:0", "/cpu:0"])
def test_training_steps_match_tensorflow(tensorflow_runs, device, model, optimizer):
    run = tensorflow_runs[model]
    expected = run[optimizer]
    assert len(expected) == STEPS and expected[-1] < expected[0]  # TensorFlow's loss falls
    losses, devices, update_op = train(device, model, run, optimizer)
    assert losses == pytest.approx(expected, rel=1e-4)
    assert devices == {{"/xpu:0": "/device:XPU:0", "/cpu:0": "/device:CPU:0"}[device]}
    if device == "/xpu:0":  # the XPU has the update kernels
        assert update_op == {"sgd-momentum": "ResourceApplyKerasMomentum",
                             "adam": "ResourceApplyAdam"}[optimizer]
