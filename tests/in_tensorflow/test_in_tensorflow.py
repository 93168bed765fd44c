"""The plugins of this project inside TensorFlow 2.21 itself, loaded with
``load_pluggable_device_library``: the reference XPU trains a Keras model like the CPU and
survives an integer division by zero; the plugin written against TensorFlow's headers
(tests/plugins/tf_portable_plugin.c) runs its ops.h custom ops there as it does here.

TensorFlow is optional: without it these tests skip. Each runs in a fresh interpreter, so
TensorFlow's libraries (which export TF_* functions too) never meet pluggable's runtime in
the test process, and a crash of TensorFlow fails one test instead of the run."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

if importlib.util.find_spec("tensorflow") is None:
    pytest.skip("TensorFlow is not installed (pip install 'pluggable[tensorflow]')",
                allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
PORTABLE_SOURCE = os.path.join(os.path.dirname(HERE), "plugins", "tf_portable_plugin.c")
PRELUDE = """
import json, os, site, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import load_library
# TensorFlow loads site-packages/tensorflow-plugins/*.so at import (an installed pluggable
# puts the XPU there); loading the same platform twice aborts TensorFlow.
_auto = {os.path.realpath(os.path.join(d, "tensorflow-plugins")) for d in site.getsitepackages()}
if os.path.dirname(os.path.realpath(sys.argv[1])) not in _auto:
    load_library.load_pluggable_device_library(sys.argv[1])
"""


def xpu_library() -> str:
    from pluggable import get_platform  # the installed reference plugin

    return get_platform("REF_XPU").path


def run_tf(code: str, library: str, env=None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-c", PRELUDE + code, library], capture_output=True,
                          text=True, env=full_env, timeout=600)


def last_json(result: subprocess.CompletedProcess):
    assert result.returncode == 0, f"TensorFlow failed ({result.returncode}):\n" \
                                   f"{result.stdout}\n{result.stderr[-4000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])


# The data and initial weights both training tests use (a Dense-ReLU-Dense model).
TRAINING_DATA = """
tf.config.set_soft_device_placement(False)

def training_data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 8)).astype(np.float32)
    y = rng.integers(0, 3, 64)
    w1 = (rng.standard_normal((8, 16)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((16, 3)) * 0.3).astype(np.float32)
    return x, y, w1, w2
"""

KERAS = TRAINING_DATA + """

def losses(device):
    x, y, w1, w2 = training_data()
    out = []
    with tf.device(device):
        const = tf.keras.initializers.Constant
        model = tf.keras.Sequential([
            tf.keras.Input((8,)),
            tf.keras.layers.Dense(16, activation="relu", kernel_initializer=const(w1)),
            tf.keras.layers.Dense(3, activation="softmax", kernel_initializer=const(w2))])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1),
                      loss="sparse_categorical_crossentropy", jit_compile=False)
        for epoch in range(2):
            for i in range(0, 64, 16):  # batches as tensors: no tf.data, which is CPU-only
                out.append(float(model.train_on_batch(x[i:i + 16], y[i:i + 16])))
    return out

print(json.dumps({"cpu": losses("/CPU:0"), "xpu": losses("/XPU:0")}))
"""


def test_keras_model_trains_on_the_xpu_like_on_the_cpu():
    """Dense-ReLU-Dense-softmax with SGD on /XPU:0, soft placement off, against the CPU;
    XPU_STREAM_DELAY_US makes an update that is not ordered with the stream visible."""
    out = last_json(run_tf(KERAS, xpu_library(), env={"XPU_STREAM_DELAY_US": "500"}))
    assert len(out["cpu"]) == len(out["xpu"]) == 8
    assert out["xpu"] == pytest.approx(out["cpu"], rel=1e-5, abs=1e-5)


def test_integer_division_by_zero_does_not_kill_tensorflow():
    out = last_json(run_tf("""
with tf.device("/XPU:0"):
    q = tf.raw_ops.RealDiv(x=tf.constant([7, -7, 8], tf.int32), y=tf.constant([0, 0, 2], tf.int32))
    after = tf.constant([1.0, 2.0]) * 2.0  # the device still works
print(json.dumps({"q2": int(q.numpy()[2]), "device": q.device, "after": after.numpy().tolist()}))
""", xpu_library()))
    assert out["q2"] == 4 and out["device"].endswith("XPU:0")
    assert out["after"] == [2.0, 4.0]


def test_custom_op_of_a_tensorflow_headers_plugin_runs_in_tensorflow(build_test_plugin):
    library = build_test_plugin(PORTABLE_SOURCE)
    out = last_json(run_tf("""
from tensorflow.python.eager import context, execute
x = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
ctx = context.context()
with tf.device("/PORT:0"):
    (z,) = execute.execute(b"PortableScaleAdd", 1, inputs=[x, x],
                           attrs=("T", tf.float32.as_datatype_enum, "scale", 2.0), ctx=ctx)
    (rows,) = execute.execute(b"PortableRowSum", 1, inputs=[x],
                              attrs=("T", tf.float32.as_datatype_enum), ctx=ctx)
try:
    with tf.device("/PORT:0"):
        execute.execute(b"PortableRowSum", 1, inputs=[tf.constant([1.0])],
                        attrs=("T", tf.float32.as_datatype_enum), ctx=ctx)
    refused = ""
except tf.errors.InvalidArgumentError as exc:
    refused = str(exc)
with tf.device("/PORT:0"):
    (lengths,) = execute.execute(b"PortableStringLengths", 1, inputs=[tf.zeros(7)], attrs=(),
                                 ctx=ctx)
print(json.dumps({"z": z.numpy().tolist(), "device": z.device, "rows": rows.numpy().tolist(),
                  "refused": refused, "lengths": lengths.numpy().tolist()}))
""", library))
    # The same values pluggable gives (tests/portability/test_tf_portable_plugin.py).
    assert out["z"] == [[0, 3, 6], [9, 12, 15]] and out["device"].endswith("PORT:0")
    assert out["rows"] == [3, 12]
    assert out["lengths"] == [13, 7, 14, 13, 28, 35, 13]  # string temporaries there too
    # Eager TensorFlow runs no shape functions: the kernel's own check refuses.
    assert "PortableRowSum: x must be a matrix" in out["refused"]


def test_tensorflow_runs_the_plugins_graph_optimizer(build_test_plugin):
    """The optimizer pluggable only validates and lists is TensorFlow's to run."""
    result = run_tf("""
@tf.function
def f(x):
    return tf.identity(x) * 2.0 + 1.0
with tf.device("/PORT:0"):
    y = f(tf.constant([1.0, 2.0]))
print(json.dumps(y.numpy().tolist()))
""", build_test_plugin(PORTABLE_SOURCE), env={"PORT_TRACE_OPTIMIZER": "1"})
    assert last_json(result) == [3.0, 5.0]
    assert "PORT graph optimizer: a GraphDef of" in result.stderr


def test_pluggable_and_tensorflow_agree_on_the_custom_op(build_test_plugin, run_python):
    library = build_test_plugin(PORTABLE_SOURCE)
    here = run_python(f"""
import json, numpy as np, pluggable
pluggable.load_plugin({library!r})
x = np.arange(6, dtype=np.float32).reshape(2, 3)
with pluggable.device("/port:0"):
    z = pluggable.raw_ops.PortableScaleAdd(x=x, y=x, scale=2.0)
print(json.dumps(z.numpy().tolist()))
""", env={"PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    assert json.loads(here.stdout.strip().splitlines()[-1]) == [[0, 3, 6], [9, 12, 15]]



CROSS_DEVICE_COPY = """
tf.config.set_soft_device_placement(False)
x = np.arange(24, dtype=np.float32).reshape(4, 6)
with tf.device("/XPU:0"):
    a = tf.constant(x) * 3.0 - 1.0
with tf.device("/XPU:1"):
    b = tf.identity(a)   # TensorFlow's copy from XPU:0 to XPU:1
    c = b + 0.5          # work on XPU:1 that reads the copy
with tf.device("/XPU:0"):
    d = tf.identity(c) * 2.0  # and back
print(json.dumps({"b": b.numpy().tolist(), "c": c.numpy().tolist(), "d": d.numpy().tolist(),
                  "devices": [b.device, c.device, d.device]}))
"""


def test_a_copy_between_two_xpus_in_tensorflow():
    """TensorFlow copies between two devices of one plugin on the source device's stream,
    which first waits for the destination device's stream (a cross-device stream dependency),
    and writes into the other device's memory. With every stream operation delayed, a copy
    not ordered after its producer would read stale memory."""
    out = last_json(run_tf(CROSS_DEVICE_COPY, xpu_library(), env={"XPU_STREAM_DELAY_US": "300"}))
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    assert out["devices"][0].endswith("XPU:1") and out["devices"][1].endswith("XPU:1")
    assert out["devices"][2].endswith("XPU:0")
    assert np.array_equal(np.array(out["b"], np.float32), x * 3.0 - 1.0)
    assert np.array_equal(np.array(out["c"], np.float32), x * 3.0 - 0.5)
    assert np.array_equal(np.array(out["d"], np.float32), (x * 3.0 - 0.5) * 2.0)


MIRRORED = TRAINING_DATA + """

def train(devices):
    x, y, w1, w2 = training_data()
    strategy = tf.distribute.MirroredStrategy(devices)
    with strategy.scope():
        const = tf.keras.initializers.Constant
        model = tf.keras.Sequential([
            tf.keras.Input((8,)),
            tf.keras.layers.Dense(16, activation="relu", kernel_initializer=const(w1)),
            tf.keras.layers.Dense(3, activation="softmax", kernel_initializer=const(w2))])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1),
                      loss="sparse_categorical_crossentropy", jit_compile=False)
    losses = []
    for epoch in range(2):
        for i in range(0, 64, 16):  # batches as tensors: no tf.data, which is CPU-only
            losses.append(float(model.train_on_batch(x[i:i + 16], y[i:i + 16])))
    weights = [v.numpy().tolist() for v in model.trainable_variables]
    mirrored = model.trainable_variables[0].value  # Keras's variable wraps TensorFlow's
    devices_of = sorted({v.device for v in mirrored.values})
    return losses, weights, devices_of

cpu, cpu_w, _ = train(["/CPU:0"])
xpu, xpu_w, placed = train(["/XPU:0", "/XPU:1"])
print(json.dumps({"cpu": cpu, "xpu": xpu, "cpu_w": cpu_w, "xpu_w": xpu_w, "placed": placed}))
"""


def test_mirrored_strategy_on_two_xpus_trains_like_the_cpu():
    """MirroredStrategy over XPU:0 and XPU:1 (a replica of 8 examples on each, gradients
    summed by a collective all-reduce across the devices) against the same training on one
    CPU replica, from the same initial weights and batches, soft placement off.

    Tolerance: the math is the same, only the order of float32 sums differs (each replica
    reduces 8 examples and the all-reduce adds the two partial sums; the CPU adds 16 in one
    go): a few ulp per sum (float32's ulp at 1 is 1.2e-7), which 8 SGD steps at rate 0.1 on
    a loss of about 1 carry along without growing much. Measured: losses differ by at most
    1.2e-7 (1 ulp), weights by 6e-8. rel=1e-5 leaves ~80x room for another summation order
    and still fails a replica that trained on different weights or gradients for a step."""
    out = last_json(run_tf(MIRRORED, xpu_library(), env={"XPU_STREAM_DELAY_US": "100"}))
    assert len(out["cpu"]) == len(out["xpu"]) == 8
    assert out["placed"] == ["/job:localhost/replica:0/task:0/device:XPU:0",
                             "/job:localhost/replica:0/task:0/device:XPU:1"]
    assert out["xpu"] == pytest.approx(out["cpu"], rel=1e-5, abs=1e-6)
    assert out["cpu"][4] < out["cpu"][0]  # it learns: the second epoch's first batch is lower
    for cpu_w, xpu_w in zip(out["cpu_w"], out["xpu_w"]):
        np.testing.assert_allclose(np.array(xpu_w), np.array(cpu_w), rtol=1e-5, atol=1e-6)


SHAPES_AND_GRADIENTS = """
def shapes_and_gradients():
    x = tf.constant(np.arange(24, dtype=np.float32).reshape(4, 6))
    s = tf.shape(x)
    out = {"shape": s.numpy().tolist(), "size": int(tf.size(x)), "rank": int(tf.rank(x)),
           "size64": int(tf.size(x, out_type=tf.int64)),
           "shape64": tf.shape(x, out_type=tf.int64).numpy().tolist(),
           # reshapes whose shape is computed from other shapes
           "swapped": tf.reshape(x, tf.stack([s[1], s[0]])).numpy().tolist(),
           "flat": tf.reshape(x, [tf.size(x)]).numpy().tolist(),
           "halved": tf.reshape(x, tf.concat([s[:1] * 2, s[1:] // 2], 0)).numpy().tolist()}
    rng = np.random.default_rng(0)
    w = tf.Variable(rng.standard_normal((6, 3)).astype(np.float32))
    b = tf.Variable(np.zeros(3, np.float32))
    with tf.GradientTape() as tape:
        y = tf.matmul(x, w) + b  # broadcast over the rows
        centred = y - tf.reduce_mean(y, axis=0)
        loss = tf.reduce_mean(tf.square(centred)) + tf.reduce_mean(b * tf.ones((5, 1, 3)))
    gw, gb = tape.gradient(loss, [w, b])
    out.update(loss=float(loss), gw=gw.numpy().tolist(), gb=gb.numpy().tolist(),
               devices=[s.device, y.device, loss.device, gw.device])
    return out


placed = shapes_and_gradients()  # default placement: the XPU
with tf.device("/CPU:0"):
    cpu = shapes_and_gradients()
print(json.dumps({"placed": placed, "cpu": cpu}))
"""


def test_shapes_and_gradients_with_default_placement_on_the_xpu():
    """Ordinary eager code, no tf.device: TensorFlow places it on the XPU. Shape (the XPU's
    kernel, its output in host memory), Size and Rank (TensorFlow's default kernels), reshapes
    to computed shapes and a gradient through broadcasting and reduce_mean (which read
    shapes) give the CPU's values; before the XPU kept Shape's output in host memory,
    TensorFlow refused every tf.shape there."""
    out = last_json(run_tf(SHAPES_AND_GRADIENTS, xpu_library()))
    placed, cpu = out["placed"], out["cpu"]
    assert all(d.endswith("/device:XPU:0") for d in placed["devices"]), placed["devices"]
    assert all(d.endswith("/device:CPU:0") for d in cpu["devices"]), cpu["devices"]
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    for run in (placed, cpu):
        assert run["shape"] == run["shape64"] == [4, 6]
        assert run["size"] == run["size64"] == 24 and run["rank"] == 2
        assert np.array_equal(run["swapped"], x.reshape(6, 4))
        assert np.array_equal(run["flat"], x.reshape(-1))
        assert np.array_equal(run["halved"], x.reshape(8, 3))
    assert placed["loss"] == pytest.approx(cpu["loss"], rel=1e-5)
    assert np.allclose(placed["gw"], cpu["gw"], rtol=1e-5, atol=1e-5)
    assert np.allclose(placed["gb"], cpu["gb"], rtol=1e-5, atol=1e-6)
    assert np.allclose(cpu["gb"], [1 / 3] * 3, atol=1e-6)  # the centred term gives b none
