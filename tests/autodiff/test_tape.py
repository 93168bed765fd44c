"""`pluggable.GradientTape`: watching (tensors, variables read automatically, nested
structures), persistence, recording pauses, nesting for higher derivatives, unconnected
gradients, stop_gradient, Jacobians, threads, and every error a user can make."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import pluggable
from pluggable import ops, raw_ops
from pluggable.eager.tape import GradientTapeWarning

DEVICES = ["/cpu:0", "/xpu:0"]


@pytest.fixture(params=DEVICES, ids=["cpu", "xpu"])
def where(request):
    with pluggable.device(request.param) as target:
        yield target


def c(values, dtype="float64"):
    return pluggable.constant(np.asarray(values, dtype))


def test_watched_tensor_gradient_on_the_device(where):
    x = c([1.0, 2.0, 3.0])
    with pluggable.GradientTape() as tape:
        tape.watch(x)
        y = ops.reduce_sum(x * x + 3.0 * x)
    g = tape.gradient(y, x)
    assert g.device == where.name and g.dtype == pluggable.float64
    assert g.numpy().tolist() == [5.0, 7.0, 9.0]


def test_unwatched_tensor_has_no_gradient(where):
    x = c([1.0, 2.0])
    with pluggable.GradientTape() as tape:
        y = x * x
    assert tape.gradient(y, x) is None


def test_trainable_variables_are_watched_when_read(where):
    w = pluggable.Variable(np.array([[1.0, 2.0], [3.0, 4.0]]))
    b = pluggable.Variable(np.array([0.5, -0.5]))
    frozen = pluggable.Variable(np.array([2.0, 2.0]), trainable=False)
    x = c([[1.0, 1.0]])
    with pluggable.GradientTape() as tape:
        y = ops.reduce_sum((ops.matmul(x, w) + b) * frozen)
    assert tape.watched_variables() == (w, b)
    gw, gb, gf = tape.gradient(y, [w, b, frozen])
    assert gw.numpy().tolist() == [[2.0, 2.0], [2.0, 2.0]] and gw.device == where.name
    assert gb.numpy().tolist() == [2.0, 2.0]
    assert gf is None


def test_variable_operators_and_explicit_watch(where):
    v = pluggable.Variable(np.array([3.0]), trainable=False)
    with pluggable.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(v)
        y = v * v
    assert tape.watched_variables() == (v,)
    assert tape.gradient(y, v).numpy().tolist() == [6.0]
    u = pluggable.Variable(np.array([3.0]))
    with pluggable.GradientTape(watch_accessed_variables=False) as tape:
        y = u * u
    assert tape.watched_variables() == () and tape.gradient(y, u) is None


def test_nested_structures_of_sources_and_targets(where):
    x, y = c([1.0, 2.0]), c(3.0)
    with pluggable.GradientTape() as tape:
        tape.watch({"x": x, "y": [y]})
        a = ops.reduce_sum(x) * y
        b = y * y
    grads = tape.gradient({"first": a, "second": b}, {"x": x, "y": (y,)})
    assert set(grads) == {"x", "y"} and isinstance(grads["y"], tuple)
    assert grads["x"].numpy().tolist() == [3.0, 3.0]
    assert float(grads["y"][0]) == 3.0 + 6.0  # both targets' gradients add up


def test_output_gradients_weight_the_targets(where):
    x = c([1.0, 2.0])
    with pluggable.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    g = tape.gradient(y, x, output_gradients=c([10.0, 100.0]))
    assert g.numpy().tolist() == [20.0, 400.0]
    with pluggable.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
    weights = np.array([1.0, 0.5])  # not a tensor: made one of the target's dtype and device
    assert tape.gradient(y, x, output_gradients=weights).numpy().tolist() == [2.0, 2.0]
    with pytest.raises(pluggable.errors.InvalidArgumentError, match="has shape \\(3,\\)"):
        tape.gradient(y, x, output_gradients=np.array([1.0, 2.0, 3.0]))
    with pytest.raises(pluggable.errors.InvalidArgumentError, match="2 output_gradients"):
        tape.gradient([y], x, output_gradients=[c([1.0, 1.0]), c([1.0, 1.0])])


def test_non_persistent_tape_computes_one_set_of_gradients(where):
    x = c(2.0)
    with pluggable.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    assert float(tape.gradient(y, x)) == 4.0
    with pytest.raises(RuntimeError, match="non-persistent GradientTape can only be used"):
        tape.gradient(y, x)
    with pytest.raises(RuntimeError, match="persistent=True"):
        tape.jacobian(y, x)


def test_persistent_tape_computes_many_and_reset_forgets(where):
    x = c(2.0)
    with pluggable.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
        z = y * x
    assert float(tape.gradient(y, x)) == 4.0
    assert float(tape.gradient(z, x)) == 12.0
    assert float(tape.gradient(z, y)) == 2.0
    tape.reset()
    assert tape.gradient(z, x) is None


def test_reset_inside_the_block_keeps_recording(where):
    x = c(2.0)
    with pluggable.GradientTape() as tape:
        tape.watch(x)
        y = x * x
        tape.reset()
        tape.watch(x)
        z = x * 5.0
    assert tape.gradient([y, z], x).numpy() == 5.0  # y's op was forgotten


def test_stop_recording(where):
    x = c(3.0)
    with pluggable.GradientTape(persistent=True) as tape:
        tape.watch(x)
        with tape.stop_recording():
            hidden = x * x
        y = x * hidden
    assert float(tape.gradient(y, x)) == 9.0  # hidden is a constant to the tape
    assert tape.gradient(hidden, x) is None
    with pytest.raises(ValueError, match="not recording"):
        with tape.stop_recording():
            pass


def test_stop_gradient(where):
    x = c(3.0)
    with pluggable.GradientTape() as tape:
        tape.watch(x)
        y = x * pluggable.stop_gradient(x * x)
    assert float(tape.gradient(y, x)) == 9.0
    assert pluggable.stop_gradient(x).numpy() == 3.0


def test_unconnected_gradients(where):
    x, other = c([1.0, 2.0]), c([[5.0]])
    v = pluggable.Variable(np.array([1.0, 1.0, 1.0]))
    with pluggable.GradientTape(persistent=True) as tape:
        tape.watch([x, other])
        y = ops.reduce_sum(x)
    assert tape.gradient(y, [x, other, v])[1:] == [None, None]
    g = tape.gradient(y, [other, v], unconnected_gradients=pluggable.UnconnectedGradients.ZERO)
    assert g[0].numpy().tolist() == [[0.0]] and g[0].device == where.name
    assert g[1].numpy().tolist() == [0.0, 0.0, 0.0]
    assert tape.gradient(y, other, unconnected_gradients="zero").shape == (1, 1)
    with pytest.raises(ValueError, match="UnconnectedGradients.NONE"):
        tape.gradient(y, x, unconnected_gradients="ones")


def test_second_derivative_with_nested_tapes(where):
    x = c([1.0, 2.0, -3.0])
    with pluggable.GradientTape() as outer:
        outer.watch(x)
        with pluggable.GradientTape() as inner:
            inner.watch(x)
            y = x * x * x
        dy = inner.gradient(y, x)
    d2y = outer.gradient(dy, x)
    assert dy.numpy().tolist() == [3.0, 12.0, 27.0]
    assert d2y.numpy().tolist() == [6.0, 12.0, -18.0]


def test_third_derivative_through_activations(where):
    x = c([0.3, -0.7])
    with pluggable.GradientTape() as t3:
        t3.watch(x)
        with pluggable.GradientTape() as t2:
            t2.watch(x)
            with pluggable.GradientTape() as t1:
                t1.watch(x)
                y = ops.tanh(x)
            d1 = t1.gradient(y, x)
        d2 = t2.gradient(d1, x)
    d3 = t3.gradient(d2, x)
    t = np.tanh([0.3, -0.7])
    np.testing.assert_allclose(d1.numpy(), 1 - t**2)
    np.testing.assert_allclose(d2.numpy(), -2 * t * (1 - t**2))
    np.testing.assert_allclose(d3.numpy(), (1 - t**2) * (6 * t**2 - 2))


def test_second_derivative_through_relu_grad_kernels(where):
    # Relu's gradient runs the ReluGrad kernel; its own gradient is ReluGrad again
    x = c([[-1.0, 2.0], [3.0, -4.0]])
    w = c([[1.0, 2.0], [3.0, 4.0]])
    with pluggable.GradientTape() as outer:
        outer.watch(w)
        with pluggable.GradientTape() as inner:
            inner.watch(w)
            y = ops.reduce_sum(ops.relu(ops.matmul(x, w)) ** 2.0)
        g = inner.gradient(y, w)
        s = ops.reduce_sum(g)
    h = outer.gradient(s, w)
    # numeric check of d(sum dy/dw)/dw
    def sum_grad(wv):
        xv = np.asarray([[-1.0, 2.0], [3.0, -4.0]])
        z = xv @ wv
        return (xv.T @ (2 * np.maximum(z, 0) * (z > 0))).sum()
    eps, w0, numeric = 1e-6, np.array([[1.0, 2.0], [3.0, 4.0]]), np.zeros((2, 2))
    for i in np.ndindex(2, 2):
        up, down = w0.copy(), w0.copy()
        up[i] += eps
        down[i] -= eps
        numeric[i] = (sum_grad(up) - sum_grad(down)) / (2 * eps)
    np.testing.assert_allclose(h.numpy(), numeric, rtol=1e-6)


def test_gradient_inside_its_own_block(where):
    x = c(2.0)
    with pluggable.GradientTape() as tape:
        tape.watch(x)
        y = x * x
        g = tape.gradient(y, x)  # a non-persistent tape stops recording
        z = g * x
    assert float(g) == 4.0 and not tape._recording and float(z) == 8.0
    with pluggable.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x * x
        with pytest.warns(GradientTapeWarning, match="inside the persistent tape"):
            g = tape.gradient(y, x)
    assert float(g) == 12.0
    assert float(tape.gradient(g, x)) == 12.0  # the gradient's ops were recorded


def test_jacobian(where):
    x = c([1.0, 2.0, 3.0])
    w = c([[1.0, 0.0], [2.0, 1.0]])
    with pluggable.GradientTape() as tape:
        tape.watch([x, w])
        y = x * x  # [3]
        z = ops.matmul(w, w)
    jx = tape.jacobian(y, x)
    assert jx.shape == (3, 3) and jx.device == where.name
    assert jx.numpy().tolist() == np.diag([2.0, 4.0, 6.0]).tolist()
    with pluggable.GradientTape(persistent=True) as tape:
        tape.watch(w)
        z = ops.matmul(w, w)
    jw = tape.jacobian(z, w)
    assert jw.shape == (2, 2, 2, 2)
    w0 = np.array([[1.0, 0.0], [2.0, 1.0]])
    expected = np.zeros((2, 2, 2, 2))  # d(w @ w)[i, j] / dw[k, l]
    for i, j, k, l in np.ndindex(2, 2, 2, 2):
        expected[i, j, k, l] = (i == k) * w0[l, j] + (l == j) * w0[i, k]
    np.testing.assert_allclose(jw.numpy(), expected)
    assert tape.jacobian(z, [x], unconnected_gradients="zero")[0].shape == (2, 2, 3)
    assert tape.jacobian(z, x) is None


def test_batch_jacobian(where):
    x = c(np.arange(6.0).reshape(3, 2))
    with pluggable.GradientTape() as tape:
        tape.watch(x)
        y = ops.concat([x * x, ops.reduce_sum(x, axis=1, keepdims=True)], axis=1)  # [3, 3]
    j = tape.batch_jacobian(y, x)
    assert j.shape == (3, 3, 2) and j.device == where.name
    xs = np.arange(6.0).reshape(3, 2)
    for b in range(3):
        np.testing.assert_allclose(j.numpy()[b], [[2 * xs[b, 0], 0], [0, 2 * xs[b, 1]], [1, 1]])
    with pluggable.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * 2.0
    with pytest.raises(ValueError, match="batch dimension"):
        tape.batch_jacobian(y, c([1.0]))


def test_non_float_sources_and_watch_errors(where):
    n = pluggable.constant(np.array([1, 2], np.int32))
    with pluggable.GradientTape() as tape:
        with pytest.warns(GradientTapeWarning, match="int32"):
            tape.watch(n)
        y = n * n
    assert tape.gradient(y, n) is None
    with pluggable.GradientTape() as tape:
        with pytest.raises(ValueError, match="neither a pluggable Tensor nor a Variable"):
            tape.watch(np.array([1.0]))
        with pytest.raises(ValueError, match="already recording"):
            tape.__enter__()
    with pytest.raises(ValueError, match="not a pluggable Tensor"):
        tape.gradient(3.0, n)


def test_op_without_a_gradient_on_the_path_raises():
    from pluggable.eager import gradients

    x = c([[[[1.0], [2.0]], [[3.0], [4.0]]]], "float32")
    with pluggable.GradientTape() as tape:
        tape.watch(x)
        y = raw_ops.MaxPool(input=x, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID")
        with pluggable.GradientTape() as inner:
            inner.watch(x)
            y = raw_ops.MaxPool(input=x, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1],
                                padding="VALID")
        g = inner.gradient(y, x)  # MaxPoolGrad, recorded by the outer tape
    assert g.numpy().ravel().tolist() == [0.0, 0.0, 0.0, 1.0]
    assert gradients.lookup("MaxPoolGrad") is None
    with pytest.raises(LookupError, match="No gradient defined for operation 'MaxPoolGrad'"):
        tape.gradient(g, x)


@pytest.mark.filterwarnings("ignore::pluggable.eager.dispatch.PlacementWarning")
def test_non_differentiable_ops_give_none(where):
    x = c([1.5, -2.5])
    with pluggable.GradientTape() as tape:
        tape.watch(x)
        y = ops.cast(ops.argmax(x), "float64") + ops.floor(x) + ops.round(x)
    assert tape.gradient(y, x) is None


def test_tapes_are_per_thread(where):
    x = c(2.0)
    seen = {}

    def other():
        with pluggable.device(where):
            seen["y"] = x * x  # not on the tape of the main thread

    with pluggable.GradientTape() as tape:
        tape.watch(x)
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
        z = x * 3.0
    assert tape.gradient([seen["y"], z], x).numpy() == 3.0


def test_no_tape_no_recorder():
    from pluggable.base.native import compiled
    from pluggable.eager import dispatch

    x = c(1.0)
    with pluggable.GradientTape() as tape:
        tape.watch(x)
        assert dispatch._settings["tape"]
    assert not dispatch._settings["tape"]
    # with no tape, the compiled path runs ops without Python on the way
    assert float(compiled.run("AddV2", (x, x))) == 2.0


def test_ops_run_from_remembered_plans_are_recorded():
    """Ops whose plan is remembered are run and recorded by the compiled path; ops given a
    variable or a list go through the Python recorder; both land on the tape."""
    from pluggable.eager import tape as tape_module

    with pluggable.device("/xpu:0"):
        a, b = c([[1.0, 2.0], [3.0, 4.0]]), c([[0.5, -1.0], [2.0, 1.0]])
        v = pluggable.Variable(np.array([[1.0, 1.0], [1.0, 1.0]]))
        for _ in range(2):  # the plans are made
            ops.reduce_sum(ops.matmul(a * b, b), axis=0)
        with pluggable.GradientTape() as tape:
            tape.watch(a)
            y = ops.reduce_sum(ops.matmul(a * b, b), axis=0)
            z = ops.add_n([y, ops.reduce_sum(a * v, axis=0)])
        assert tape_module._recordable["Mul"] and tape_module._recordable["Sum"]
        assert not tape_module._recordable["AddN"]  # a list input: the Python recorder
        ga, gv = tape.gradient(z, [a, v])
    bn = np.array([[0.5, -1.0], [2.0, 1.0]])
    np.testing.assert_allclose(ga.numpy(), (np.ones((2, 2)) @ bn.T) * bn + 1.0)
    np.testing.assert_allclose(gv.numpy(), [[1.0, 2.0], [3.0, 4.0]])


def test_variables_inside_list_inputs_are_read_and_watched(where):
    a = pluggable.Variable(np.array([1.0, 2.0]))
    b = pluggable.Variable(np.array([3.0, 4.0]))
    with pluggable.GradientTape() as tape:
        y = ops.reduce_sum(ops.add_n([a, b, a]) * ops.stack([b, a])[0])
    ga, gb = tape.gradient(y, [a, b])
    assert tape.watched_variables() == (a, b)
    # y = sum((2a + b) * b): dy/da = 2b, dy/db = 2a + 2b
    assert ga.numpy().tolist() == [6.0, 8.0] and gb.numpy().tolist() == [8.0, 12.0]


def test_complex_tensors_are_refused_clearly():
    z = pluggable.constant(np.array([1 + 2j, 3 - 1j], np.complex128))
    with pluggable.GradientTape() as tape:
        tape.watch(z)
        y = z * z
    with pytest.raises(pluggable.errors.UnimplementedError, match="complex output on the path"):
        tape.gradient(y, z)
