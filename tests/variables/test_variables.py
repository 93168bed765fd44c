"""`pluggable.Variable` and the resource-variable ops under it, on the CPU and on the XPU:
values, shapes and dtypes, operators and use as an op input, the training updates against
their formulas, stream order under a slow device, and every error a user can make."""
from __future__ import annotations

import numpy as np
import pytest

import pluggable
from pluggable import errors, ops, raw_ops
from pluggable.eager.dispatch import execute

DEVICES = ["/cpu:0", "/xpu:0"]


@pytest.fixture(params=DEVICES, ids=["cpu", "xpu"])
def where(request):
    with pluggable.device(request.param) as target:
        yield target


def test_create_read_assign(where):
    v = pluggable.Variable(np.array([1.0, 2.0, 3.0], np.float32), name="w")
    assert (v.name, v.shape, v.dtype, v.device, v.trainable) == \
        ("w", (3,), pluggable.float32, where.name, True)
    v.assign_add([1.0, 1.0, 1.0])
    v.assign_sub(np.array([0.5, 0.5, 0.5], np.float32))
    assert v.numpy().tolist() == [1.5, 2.5, 3.5]
    assert v.read_value().device == where.name
    assert v.assign(np.arange(3, dtype=np.float32)) is v
    assert v.assign_add(np.ones(3, np.float32), read_value=False) is None
    assert np.asarray(v).tolist() == [1, 2, 3]


UNKNOWN = pluggable.TensorShape(None)


@pytest.mark.parametrize("declared, shape, value, allowed", [
    (None, (2,), [1.0, 2.0, 3.0], False),       # the initial value's shape, as TensorFlow
    ([None], (None,), [1.0, 2.0, 3.0], True),
    ([None], (None,), [[1.0, 2.0]], False),     # the rank is declared
    ([None, 2], (None, 2), [[1.0, 2.0], [3.0, 4.0]], True),
    ([None, 2], (None, 2), [[1.0, 2.0, 3.0]], False),
    (UNKNOWN, UNKNOWN, [[1.0, 2.0, 3.0]], True),
    ("unvalidated", UNKNOWN, [[1.0], [2.0]], True),  # validate_shape=False
])
def test_assign_checks_the_shape_as_tensorflow(where, declared, shape, value, allowed):
    initial = [[5.0, 6.0]] if declared == [None, 2] else [5.0, 6.0]
    if declared == "unvalidated":
        v = pluggable.Variable(initial, validate_shape=False)
    else:
        v = pluggable.Variable(initial, shape=declared)
    expected_shape = shape
    assert v.shape == expected_shape and isinstance(v.shape, pluggable.TensorShape)
    if allowed:
        v.assign(value)
        assert v.numpy().tolist() == value and v.value_shape == np.shape(value)
        assert v.shape == expected_shape  # the declaration stays
        v.assign_add(value)  # an update takes the current value's shape
        assert v.numpy().tolist() == (2 * np.asarray(value)).tolist()
        return
    with pytest.raises(ValueError, match=r"cannot assign a value of shape .* make it with "
                                         r"shape=\[None"):
        v.assign(value)
    with pytest.raises(errors.InvalidArgumentError):  # TensorFlow's class for the updates
        v.assign_add(value)
    with pytest.raises(errors.InvalidArgumentError):
        v.assign_sub(value)
    assert v.numpy().tolist() == initial  # nothing changed


def test_declared_shape_must_fit_the_initial_value():
    with pytest.raises(ValueError, match=r"shape \(2,\) is not compatible with the shape "
                                         r"\(3,\)"):
        pluggable.Variable([1.0, 2.0], shape=[3])
    with pytest.raises(ValueError, match="not compatible"):
        pluggable.Variable([1.0, 2.0], shape=[None, None])


def test_assign_matches_tensorflow():
    from tensorflow_child import in_tensorflow

    cases = [(None, [1.0, 2.0, 3.0]), ([None], [1.0, 2.0, 3.0]), ([None], [[1.0]]),
             ("unknown", [[1.0, 2.0, 3.0]])]
    theirs = in_tensorflow(f"""
out = []
for declared, value in {cases!r}:
    shape = tf.TensorShape(None) if declared == "unknown" else declared
    v = tf.Variable([5.0, 6.0], shape=shape)
    try:
        v.assign(value)
        out.append([True, v.numpy().tolist(), v.shape.rank])
    except ValueError:
        out.append([False, v.numpy().tolist(), v.shape.rank])
print(json.dumps(out))
""")
    ours = []
    for declared, value in cases:
        shape = pluggable.TensorShape(None) if declared == "unknown" else declared
        v = pluggable.Variable([5.0, 6.0], shape=shape)
        try:
            v.assign(value)
            ours.append([True, v.numpy().tolist(), v.shape.rank])
        except ValueError:
            ours.append([False, v.numpy().tolist(), v.shape.rank])
    assert ours == theirs


def test_python_numbers_take_tensorflows_default_types(where):
    assert pluggable.Variable([1.0, 2.0]).dtype == pluggable.float32
    assert pluggable.Variable(3).dtype == pluggable.int32
    assert pluggable.Variable(np.float64(1.5)).dtype == pluggable.float64  # NumPy's own kept


def test_dtype_converts_the_initial_value(where):
    v = pluggable.Variable([0.1, 0.2], dtype="float32", trainable=False)
    assert v.dtype == pluggable.float32 and not v.trainable
    assert v.numpy().tolist() == np.array([0.1, 0.2], np.float32).tolist()
    w = pluggable.Variable(pluggable.tensor(np.array([1, 2], np.int32)), dtype="float64")
    assert w.dtype == pluggable.float64 and w.numpy().tolist() == [1.0, 2.0]
    copy = pluggable.Variable(w)
    w.assign_add([1.0, 1.0])
    assert copy.numpy().tolist() == [1.0, 2.0]  # a copy of the value, not an alias


def test_operators_and_use_as_an_op_input(where):
    v = pluggable.Variable(np.array([[1.0, 2.0]], np.float32))
    w = pluggable.Variable(np.array([[3.0], [4.0]], np.float32))
    assert ops.matmul(v, w).numpy().tolist() == [[11.0]]
    assert (v @ w).numpy().tolist() == [[11.0]]
    assert (v + 1).numpy().tolist() == [[2.0, 3.0]]
    assert (1 - v).numpy().tolist() == [[0.0, -1.0]]
    assert (v * v).numpy().tolist() == [[1.0, 4.0]]
    assert (-v).numpy().tolist() == [[-1.0, -2.0]]
    assert float(pluggable.Variable(2.5)) == 2.5
    assert raw_ops.ReadVariableOp(resource=v, dtype=pluggable.float32).numpy().tolist() == \
        [[1.0, 2.0]]
    assert {v: 1}[v] == 1  # hashable by identity, as tf.Variable


def test_reads_are_snapshots(where):
    v = pluggable.Variable(np.zeros(3, np.float32))
    before = v.read_value()
    v.assign_add(np.ones(3, np.float32))
    assert before.numpy().tolist() == [0, 0, 0] and v.numpy().tolist() == [1, 1, 1]


def test_training_updates_match_their_formulas(where):
    rng = np.random.default_rng(0)
    var0, accum0, m0, v0, grad = (rng.standard_normal(5).astype(np.float32) for _ in range(5))
    v0 = np.abs(v0)
    f32 = np.float32
    var = pluggable.Variable(var0)
    raw_ops.ResourceApplyGradientDescent(var=var, alpha=f32(0.1), delta=grad)
    np.testing.assert_allclose(var.numpy(), var0 - f32(0.1) * grad, rtol=1e-6)

    var, accum = pluggable.Variable(var0), pluggable.Variable(accum0)
    raw_ops.ResourceApplyMomentum(var=var, accum=accum, lr=f32(0.1), grad=grad,
                                  momentum=f32(0.9))
    new_accum = accum0 * f32(0.9) + grad
    np.testing.assert_allclose(accum.numpy(), new_accum, rtol=1e-6)
    np.testing.assert_allclose(var.numpy(), var0 - f32(0.1) * new_accum, rtol=1e-6)

    var, m, v = (pluggable.Variable(a) for a in (var0, m0, v0))
    b1p, b2p, lr, b1, b2, eps = (f32(a) for a in (0.9, 0.999, 0.01, 0.9, 0.999, 1e-7))
    raw_ops.ResourceApplyAdam(var=var, m=m, v=v, beta1_power=b1p, beta2_power=b2p, lr=lr,
                              beta1=b1, beta2=b2, epsilon=eps, grad=grad)
    lr_t = lr * np.sqrt(1 - b2p) / (1 - b1p)
    new_m = m0 + (grad - m0) * (1 - b1)
    new_v = v0 + (grad * grad - v0) * (1 - b2)
    np.testing.assert_allclose(m.numpy(), new_m, rtol=1e-5)
    np.testing.assert_allclose(v.numpy(), new_v, rtol=1e-5)
    np.testing.assert_allclose(var.numpy(), var0 - new_m * lr_t / (np.sqrt(new_v) + eps),
                               rtol=1e-5)


def _remembered(op: str, variable) -> int:
    """How many remembered runs of ``op`` on ``variable`` the dispatcher holds."""
    from pluggable.eager import dispatch

    return sum(1 for key in dispatch._resource_runs
               if key[0] == op and id(variable.handle) in key)


def test_repeated_calls_on_a_variable_are_remembered_and_follow_its_shape(where):
    v = pluggable.Variable(np.zeros(3, np.float32), shape=[None], name="grows")
    delta = pluggable.tensor(np.ones(3, np.float32))
    for _ in range(3):
        v.assign_add(delta)
        v.read_value()
    assert _remembered("AssignAddVariableOp", v) == 1
    assert _remembered("ReadVariableOp", v) == 1
    assert v.numpy().tolist() == [3, 3, 3]
    v.assign(np.ones(2, np.float32))  # another shape: the remembered runs no longer serve
    assert v.read_value().shape == (2,)
    with pytest.raises(errors.InvalidArgumentError, match=r"shape \(2,\) with a value of "
                                                          r"shape \(3,\)"):
        v.assign_add(delta)
    half = pluggable.tensor(np.full(2, 0.5, np.float32))
    for _ in range(2):
        v.assign_add(half)
    assert v.numpy().tolist() == [2, 2]


def test_a_remembered_call_on_a_destroyed_variable_says_so(where):
    (handle,) = execute("VarHandleOp", [], {"dtype": "float32", "shape": (2,),
                                            "shared_name": "gone"})
    value = pluggable.tensor(np.ones(2, np.float32))
    raw_ops.AssignVariableOp(resource=handle, value=value)
    for _ in range(2):
        raw_ops.AssignAddVariableOp(resource=handle, value=value)
        read = raw_ops.ReadVariableOp(resource=handle, dtype=pluggable.float32)
    assert read.numpy().tolist() == [3, 3]
    raw_ops.DestroyResourceOp(resource=handle, ignore_lookup_error=False)
    with pytest.raises(errors.NotFoundError, match="no live variable"):
        raw_ops.AssignAddVariableOp(resource=handle, value=value)
    with pytest.raises(errors.NotFoundError, match="no live variable"):
        raw_ops.ReadVariableOp(resource=handle, dtype=pluggable.float32)


def test_a_remembered_host_run_gives_way_to_a_kernel_enabled_later():
    """With the XPU's AssignAddVariableOp disabled the host's kernel runs and is remembered;
    once the kernel is enabled again, the next call runs the kernel's plan."""
    from pluggable.eager import dispatch
    from pluggable.kernels.registry import registered_kernels

    with pluggable.device("/xpu:0"):
        v = pluggable.Variable(np.zeros(2, np.float32))
        one = pluggable.tensor(np.ones(2, np.float32))
        xpu = registered_kernels("AssignAddVariableOp", "XPU")

        def runs():
            return [run for key, run in dispatch._resource_runs.items()
                    if key[0] == "AssignAddVariableOp" and id(v.handle) in key]

        for r in xpu:
            r.set_enabled(False)
        try:
            for _ in range(2):
                v.assign_add(one)
            assert [run.plan for run in runs()] == [None]
        finally:
            for r in xpu:
                r.set_enabled(True)
        v.assign_add(one)
        assert [run.plan is not None for run in runs()] == [True]
        assert v.numpy().tolist() == [3, 3]


def test_remembered_optimizer_steps_match_the_general_path(where):
    """Adam's ResourceApplyAdam (and the updates and reads around it) repeated: the runs the
    dispatcher remembers give the same bits as the general path every call takes while
    placements are logged."""
    from pluggable import optimizers

    rng = np.random.default_rng(3)
    start = rng.standard_normal((4, 3)).astype(np.float32)
    grads = [pluggable.tensor(rng.standard_normal((4, 3)).astype(np.float32))
             for _ in range(4)]

    def train():
        w = pluggable.Variable(start)
        adam = optimizers.Adam(0.1)
        for g in grads:
            adam.apply_gradients([(g, w)])
        return w, w.numpy()

    w, remembered = train()
    if where.name != "/device:CPU:0":
        assert _remembered("ResourceApplyAdam", w) == 1
    pluggable.config.set_log_device_placement(True)
    try:
        _, general = train()
    finally:
        pluggable.config.set_log_device_placement(False)
    assert remembered.tobytes() == general.tobytes()
    assert not np.array_equal(remembered, start)


def _sgd(steps: int):
    """Linear regression by gradient descent on Variables; returns the final weights."""
    rng = np.random.default_rng(1)
    x = pluggable.tensor(rng.standard_normal((16, 4)).astype(np.float32))
    y = pluggable.tensor(rng.standard_normal((16, 3)).astype(np.float32))
    w = pluggable.Variable(rng.standard_normal((4, 3)).astype(np.float32))
    b = pluggable.Variable(np.zeros(3, np.float32))
    scale = np.float32(2.0 / 16)
    for _ in range(steps):
        error = ops.matmul(x, w) + b - y
        grad_w = raw_ops.MatMul(a=x, b=error, transpose_a=True) * scale
        grad_b = raw_ops.Sum(input=error, axis=[0]) * scale
        raw_ops.ResourceApplyGradientDescent(var=w, alpha=np.float32(0.05), delta=grad_w)
        b.assign_sub(grad_b * np.float32(0.05))
    return w.numpy(), b.numpy()


def test_sgd_on_a_slow_xpu_matches_the_cpu(stream_delay):
    """Every update is enqueued on the XPU's compute stream, every read after it: with each
    stream operation delayed, a read that did not wait for the update would see old values."""
    with pluggable.device("/cpu:0"):
        cpu_w, cpu_b = _sgd(12)
    stream_delay(500)
    with pluggable.device("/xpu:0"):
        xpu_w, xpu_b = _sgd(12)
    np.testing.assert_allclose(xpu_w, cpu_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(xpu_b, cpu_b, rtol=1e-5, atol=1e-6)
    assert not np.allclose(cpu_b, 0)  # the loop did move the weights


def test_raw_resource_ops(where):
    (handle,) = execute("VarHandleOp", [], {"dtype": "float32", "shape": (2,),
                                            "shared_name": "raw"})
    assert handle.dtype.name == "resource" and handle.shape == ()
    with pytest.raises(errors.FailedPreconditionError, match="'raw' .* is uninitialized"):
        raw_ops.ReadVariableOp(resource=handle, dtype=pluggable.float32)
    with pytest.raises(errors.FailedPreconditionError, match="uninitialized"):
        raw_ops.AssignAddVariableOp(resource=handle, value=np.ones(2, np.float32))
    raw_ops.AssignVariableOp(resource=handle, value=np.ones(2, np.float32))
    assert raw_ops.ReadVariableOp(resource=handle, dtype=pluggable.float32).numpy().tolist() \
        == [1, 1]
    raw_ops.DestroyResourceOp(resource=handle, ignore_lookup_error=False)
    with pytest.raises(errors.NotFoundError, match="no live variable"):
        raw_ops.ReadVariableOp(resource=handle, dtype=pluggable.float32)
    with pytest.raises(errors.NotFoundError, match="no live variable"):
        raw_ops.DestroyResourceOp(resource=handle, ignore_lookup_error=False)
    raw_ops.DestroyResourceOp(resource=handle)  # ignore_lookup_error=True by default


def test_errors_say_what_is_wrong(where):
    v = pluggable.Variable(np.zeros(3, np.float32), name="bias")
    with pytest.raises(errors.InvalidArgumentError, match=r"shape \(3,\) with a value of shape "
                                                          r"\(2,\)"):
        v.assign_add(np.ones(2, np.float32))
    with pytest.raises(errors.InvalidArgumentError, match="'bias' holds float32, but the op "
                                                          "was given float64"):
        raw_ops.AssignVariableOp(resource=v.handle, value=np.ones(3))
    with pytest.raises(errors.InvalidArgumentError, match="with validate_shape the shape"):
        raw_ops.AssignVariableOp(resource=v.handle, value=np.ones(4, np.float32),
                                 validate_shape=True)
    with pytest.raises(errors.InvalidArgumentError, match="must be a scalar"):
        raw_ops.ResourceApplyGradientDescent(var=v, alpha=np.ones(3, np.float32),
                                             delta=np.ones(3, np.float32))
    with pytest.raises(errors.InvalidArgumentError, match="share one shape"):
        raw_ops.ResourceApplyGradientDescent(var=v, alpha=np.float32(1),
                                             delta=np.ones(4, np.float32))
    with pytest.raises(TypeError, match="Variable name must be a string, got 3"):
        pluggable.Variable(np.zeros(2), name=3)
    with pytest.raises(errors.InvalidArgumentError, match="not supported"):
        pluggable.Variable("text")
    counts = pluggable.Variable(np.zeros(2, np.int32))
    with pytest.raises(errors.InvalidArgumentError, match="cannot be converted to int32"):
        counts.assign_add([0.5, 1])
    assert counts.numpy().tolist() == [0, 0]
    assert v.numpy().tolist() == [0, 0, 0]  # nothing changed by the refused calls
    v.close()
    v.close()  # idempotent
    assert v.is_closed and "(closed)" in repr(v)
    with pytest.raises(errors.FailedPreconditionError, match="'bias' is closed"):
        v.read_value()


def test_repr_and_lifetime(where):
    import gc
    import weakref

    from pluggable.eager import resources as op_defs_resource

    v = pluggable.Variable(np.array([1, 2], np.int32), name="counter")
    assert repr(v) == (f"<pluggable.Variable 'counter' shape=(2,) dtype=int32 "
                       f"device={where.name}, numpy=array([1, 2], dtype=int32)>")
    address = int(v.handle.numpy())
    assert address in op_defs_resource._states
    ref = weakref.ref(v)
    del v
    gc.collect()
    assert ref() is None and address not in op_defs_resource._states


def test_concurrent_updates_from_threads_all_count(where, in_threads):
    v = pluggable.Variable(np.zeros(4, np.float32))
    one = np.ones(4, np.float32)

    def worker(_):
        with pluggable.device(where):
            for _ in range(50):
                v.assign_add(one)
                # use_locking: without it TensorFlow leaves concurrent updates undefined
                raw_ops.ResourceApplyGradientDescent(var=v, alpha=np.float32(-1.0),
                                                     delta=one, use_locking=True)

    in_threads(worker, 4)
    assert v.numpy().tolist() == [400.0] * 4


def test_ops_on_a_variable_run_where_it_lives():
    with pluggable.device("/xpu:1"):
        v = pluggable.Variable(np.ones(3, np.float32))
    with pluggable.device("/xpu:0"):  # another scope: the variable's device still wins
        raw_ops.ResourceApplyGradientDescent(var=v, alpha=np.float32(0.5),
                                             delta=np.ones(3, np.float32))
        v.assign_add(np.ones(3, np.float32))
        value = raw_ops.ReadVariableOp(resource=v, dtype=pluggable.float32)
    with pluggable.device("/cpu:0"):
        w = pluggable.Variable(np.zeros(2, np.float32))
    with pluggable.device("/xpu:0"):
        w.assign_add(np.ones(2, np.float32))
    assert value.device == "/device:XPU:1" and value.numpy().tolist() == [1.5, 1.5, 1.5]
    assert w.device == "/device:CPU:0" and w.numpy().tolist() == [1.0, 1.0]


def test_a_value_given_to_a_variable_is_made_on_the_variable_s_device():
    """Under another device's scope, a number or an array assigned or added to a variable is
    made where the variable lives: a CPU variable's update never waits for the XPU's queued
    work (here a host callback holds the XPU's compute stream until the update is done; a
    timer lets it go after 30 s so that a regression fails instead of hanging)."""
    import threading

    device = pluggable.get_device("XPU:0")
    counter = pluggable.Variable(0, dtype="int64", device="CPU", trainable=False)
    release = threading.Event()
    timer = threading.Timer(30, release.set)
    timer.start()
    try:
        device.compute_stream.host_callback(release.wait)
        with pluggable.device("/xpu:0"):
            counter.assign_add(np.int64(1))
            counter.assign_add(2)
            counter.assign(np.int64(5) + counter.numpy())
            held = not release.is_set()
    finally:
        release.set()
        timer.cancel()
    device.synchronize()
    assert held, "the CPU variable's update waited for the XPU's stream"
    assert int(counter.numpy()) == 8
    assert counter.read_value().device == "/device:CPU:0"
