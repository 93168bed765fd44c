"""The XPU's kernels inside TensorFlow 2.21, soft placement off: every kernel issue 11 lists
runs on /XPU:0 under TensorFlow's own OpDefs (names, attributes, host-memory arguments) and
gives what TensorFlow's CPU kernels give; and the values a GPU answers without failing its
stream (integer division by zero, out-of-range gather indices and sparse labels) leave
TensorFlow running. Skipped without TensorFlow; each test is one fresh interpreter."""
from __future__ import annotations

from test_in_tensorflow import last_json, run_tf, xpu_library

OPS = """
tf.config.set_soft_device_placement(False)
rng = np.random.default_rng(0)
f = lambda *s: tf.constant(rng.standard_normal(s).astype(np.float32))
x4 = f(2, 6, 6, 3); w4 = f(3, 3, 3, 4)
cases = {
 "ConcatV2": lambda: tf.raw_ops.ConcatV2(values=[f(2, 3), f(2, 2)], axis=1),
 "Pack": lambda: tf.raw_ops.Pack(values=[f(3), f(3)], axis=1),
 "SelectV2": lambda: tf.raw_ops.SelectV2(condition=tf.constant([True, False, True]), t=f(2, 3), e=f(3)),
 "NotEqual": lambda: tf.raw_ops.NotEqual(x=f(3), y=f(3)),
 "GreaterEqual": lambda: tf.raw_ops.GreaterEqual(x=f(3), y=f(3)),
 "LessEqual": lambda: tf.raw_ops.LessEqual(x=f(3), y=f(3)),
 "Pow": lambda: tf.raw_ops.Pow(x=tf.abs(f(3)), y=f(3)),
 "CastH": lambda: tf.raw_ops.Cast(x=f(4), DstT=tf.float16),
 "CastB": lambda: tf.raw_ops.Cast(x=f(4), DstT=tf.bfloat16),
 "CastFromHalf": lambda: tf.raw_ops.Cast(x=tf.constant([1.5, -2.25, 65504.0], tf.float16), DstT=tf.float32),
 "BiasAddGrad": lambda: tf.raw_ops.BiasAddGrad(out_backprop=f(4, 3)),
 "ReluGrad": lambda: tf.raw_ops.ReluGrad(gradients=f(5), features=f(5)),
 "Xent": lambda: tf.raw_ops.SoftmaxCrossEntropyWithLogits(features=f(2, 3), labels=tf.nn.softmax(f(2, 3))),
 "SXent": lambda: tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=f(2, 3), labels=tf.constant([0, 2], tf.int64)),
 "Tile": lambda: tf.raw_ops.Tile(input=f(2, 3), multiples=tf.constant([2, 1])),
 "StridedSlice": lambda: tf.raw_ops.StridedSlice(input=f(4, 5), begin=tf.constant([1, 0]), end=tf.constant([3, 5]), strides=tf.constant([1, 2])),
 "GatherV2": lambda: tf.raw_ops.GatherV2(params=f(4, 3), indices=tf.constant([3, 0]), axis=tf.constant(0)),
 "BroadcastTo": lambda: tf.raw_ops.BroadcastTo(input=f(3), shape=tf.constant([2, 3])),
 "DivNoNan": lambda: tf.raw_ops.DivNoNan(x=f(3), y=tf.constant([0., 1., 2.])),
 "FloorMod": lambda: tf.raw_ops.FloorMod(x=f(3), y=f(3)),
 "FloorDiv": lambda: tf.raw_ops.FloorDiv(x=f(3), y=f(3)),
 "FloorDivI": lambda: tf.raw_ops.FloorDiv(x=tf.constant([7, -7], tf.int64), y=tf.constant([2, 2], tf.int64)),
 "Range": lambda: tf.raw_ops.Range(start=tf.constant(0.), limit=tf.constant(5.), delta=tf.constant(1.5)),
 "Square": lambda: tf.raw_ops.Square(x=f(3)),
 "Sqrt": lambda: tf.raw_ops.Sqrt(x=tf.abs(f(3))),
 "AddN": lambda: tf.raw_ops.AddN(inputs=[f(3), f(3), f(3)]),
 "C2DBI": lambda: tf.raw_ops.Conv2DBackpropInput(input_sizes=tf.constant([2, 6, 6, 3]), filter=w4, out_backprop=f(2, 6, 6, 4), strides=[1, 1, 1, 1], padding="SAME"),
 "C2DBF": lambda: tf.raw_ops.Conv2DBackpropFilter(input=x4, filter_sizes=tf.constant([3, 3, 3, 4]), out_backprop=f(2, 6, 6, 4), strides=[1, 1, 1, 1], padding="SAME"),
 "MaxPool": lambda: tf.raw_ops.MaxPool(input=x4, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"),
 "MaxPoolGrad": lambda: tf.raw_ops.MaxPoolGrad(orig_input=x4, orig_output=tf.raw_ops.MaxPool(input=x4, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"), grad=f(2, 3, 3, 3), ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"),
 "Fill": lambda: tf.raw_ops.Fill(dims=tf.constant([2, 3]), value=tf.constant(1.5)),
 "Shape": lambda: tf.raw_ops.Shape(input=f(2, 3), out_type=tf.int64),
 "Slice": lambda: tf.raw_ops.Slice(input=f(4, 5), begin=tf.constant([1, 1]), size=tf.constant([2, -1])),
 "Split": lambda: tf.raw_ops.Split(axis=tf.constant(1), value=f(2, 4), num_split=2),
 "SplitV": lambda: tf.raw_ops.SplitV(value=f(3, 7), size_splits=tf.constant([2, -1, 4], tf.int64), axis=tf.constant(-1), num_split=3),
 "SplitV0": lambda: tf.raw_ops.SplitV(value=f(5, 2), size_splits=tf.constant([0, 5]), axis=tf.constant(0), num_split=2),
 "Add": lambda: tf.raw_ops.Add(x=f(2, 3), y=f(3)),
 "AddSame": lambda: tf.raw_ops.Add(x=f(4, 3), y=f(4, 3)),
 "Div": lambda: tf.raw_ops.Div(x=f(3), y=f(3)),
 "DivI": lambda: tf.raw_ops.Div(x=tf.constant([7, -7, 9], tf.int32), y=tf.constant([2, 2, -4], tf.int32)),
 "ExpandDims": lambda: tf.raw_ops.ExpandDims(input=f(2, 3), axis=tf.constant(1)),
 "Squeeze": lambda: tf.raw_ops.Squeeze(input=f(2, 1, 3), axis=[1]),
 "Pad": lambda: tf.raw_ops.Pad(input=f(2, 3), paddings=tf.constant([[1, 0], [0, 2]])),
}
results = {}
for name, fn in cases.items():
    try:
        with tf.device("/CPU:0"):
            rng = np.random.default_rng(1)
            want = fn()
        with tf.device("/XPU:0"):
            rng = np.random.default_rng(1)
            got = fn()
        want = want if isinstance(want, (list, tuple)) else [want]
        got = got if isinstance(got, (list, tuple)) else [got]
        close = all(np.allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                                rtol=1e-5, atol=1e-5, equal_nan=True) for a, b in zip(want, got))
        close = close and len(want) == len(got) and all(
            a.shape == b.shape for a, b in zip(want, got))
        results[name] = [got[-1].device, bool(close)]
    except Exception as exc:  # reported per op by the test
        results[name] = [type(exc).__name__, str(exc).splitlines()[0][:300]]
print(json.dumps(results))
"""

VALUES = """
tf.config.set_soft_device_placement(False)
out = {}
with tf.device("/XPU:0"):
    for dt in (tf.int32, tf.int64):
        x, y = tf.constant([7, -7, 0], dt), tf.constant([0, 0, 0], dt)
        out[dt.name] = [tf.raw_ops.RealDiv(x=x, y=y).numpy().tolist(),
                        tf.raw_ops.FloorDiv(x=x, y=y).numpy().tolist(),
                        tf.raw_ops.FloorMod(x=x, y=y).numpy().tolist()]
    out["gather"] = tf.raw_ops.GatherV2(params=tf.constant([[1., 2.], [3., 4.]]),
                                        indices=tf.constant([1, 5]),
                                        axis=tf.constant(0)).numpy().tolist()
    loss, _ = tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(
        features=tf.constant([[1., 2.], [3., 4.]]), labels=tf.constant([1, 7], tf.int64))
    out["loss_nan"] = [bool(v) for v in np.isnan(loss.numpy())]
    out["after"] = tf.reduce_sum(tf.ones([4])).numpy().item()
print(json.dumps(out))
"""


def test_every_listed_kernel_runs_on_the_xpu_in_tensorflow_like_the_cpu():
    results = last_json(run_tf(OPS, xpu_library()))
    assert len(results) == 43
    wrong = {name: r for name, r in results.items() if not (r[0].endswith("XPU:0") and r[1])}
    assert not wrong, wrong


def test_values_that_fail_a_cpu_kernel_leave_tensorflow_running_on_the_xpu():
    out = last_json(run_tf(VALUES, xpu_library()))
    for dt in ("int32", "int64"):
        assert out[dt] == [[-1, -1, -1], [-1, -1, -1], [7, -7, 0]], dt
    assert out["gather"] == [[3.0, 4.0], [0.0, 0.0]]
    assert out["loss_nan"] == [False, True]
    assert out["after"] == 4.0


CHAIN = """
tf.config.set_soft_device_placement(False)
wrong = 0
with tf.device("/XPU:0"):
    for trial in range(5):
        v = tf.Variable(tf.zeros([1000]))
        one = tf.ones([1000]) * 1.0  # made by an XPU kernel
        for i in range(20):
            v.assign_sub(one)
        wrong += int(float(tf.reduce_sum(v.read_value())) != -20000.0)
print(json.dumps({"wrong": wrong}))
"""


def test_tensorflows_own_variable_updates_see_settled_xpu_results():
    """TensorFlow 2.21 exports no kernels_experimental.h, so its host-side AssignSubVariableOp
    runs on the XPU's memory: the XPU's kernels then complete before compute() returns, and
    a chain of updates stays right however slow the stream is."""
    out = last_json(run_tf(CHAIN, xpu_library(), env={"XPU_STREAM_DELAY_US": "500"}))
    assert out["wrong"] == 0


def test_splitv_refuses_sizes_that_do_not_add_up_on_the_xpu():
    out = last_json(run_tf("""
tf.config.set_soft_device_placement(False)
out = {}
for name, sizes in (("sum", [2, 2]), ("two_unknown", [-1, -1]), ("negative", [-2, 7])):
    try:
        with tf.device("/XPU:0"):
            tf.raw_ops.SplitV(value=tf.zeros([5]), size_splits=tf.constant(sizes),
                              axis=tf.constant(0), num_split=2)
        out[name] = "no error"
    except tf.errors.InvalidArgumentError as exc:
        out[name] = str(exc).splitlines()[0]
with tf.device("/XPU:0"):
    out["after"] = [t.numpy().tolist() for t in tf.raw_ops.SplitV(
        value=tf.range(5.0), size_splits=tf.constant([3, -1]), axis=tf.constant(0), num_split=2)]
print(json.dumps(out))
""", xpu_library()))
    assert "SplitV" in out["sum"] and "must add up to the size of split_dim 0 (5)" in out["sum"]
    assert "entry 1 is -1" in out["two_unknown"]
    assert "entry 0 is -2" in out["negative"]
    assert out["after"] == [[0.0, 1.0, 2.0], [3.0, 4.0]]
