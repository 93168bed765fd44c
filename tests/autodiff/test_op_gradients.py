"""The gradient of every differentiable op, on the CPU and on the XPU: the tape's gradient of
a weighted sum of the op's outputs against a central finite difference of the same op on the
same device (float64), and the device the gradient is computed on."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import pluggable
from pluggable import ops, raw_ops
from pluggable.eager import dispatch, gradients
from pluggable.eager.dispatch import PlacementWarning

DEVICES = ["/cpu:0", "/xpu:0"]
rng = np.random.default_rng(7)


def u(*shape, low=-1.0, high=1.0):
    return rng.uniform(low, high, shape)


def away(*shape, low=0.3, high=1.0):
    """Values of either sign at least ``low`` from zero (no kink of relu, abs, max there)."""
    return rng.uniform(low, high, shape) * rng.choice([-1.0, 1.0], shape)


def distinct(*shape):
    """Values far apart from one another (no ties in max, min, sort-like ops)."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.37 - n * 0.15).reshape(shape)


I32 = np.int32
LABELS = u(3, 4, low=0.1, high=0.5)
LABELS /= LABELS.sum(axis=1, keepdims=True)  # rows of probabilities, as the op assumes
CASES = {
    # element-wise, one input
    "Abs": (ops.abs, [away(2, 3)]),
    "Neg": (ops.negative, [u(2, 3)]),
    "Square": (ops.square, [u(2, 3)]),
    "Sqrt": (ops.sqrt, [u(2, 3, low=0.5, high=2)]),
    "Rsqrt": (ops.rsqrt, [u(2, 3, low=0.5, high=2)]),
    "Exp": (ops.exp, [u(2, 3)]),
    "Log": (ops.log, [u(2, 3, low=0.5, high=2)]),
    "Log1p": (ops.log1p, [u(2, 3, low=0.1, high=2)]),
    "Expm1": (ops.expm1, [u(2, 3)]),
    "Reciprocal": (ops.reciprocal, [u(2, 3, low=0.5, high=2)]),
    "Sin": (ops.sin, [u(2, 3)]),
    "Cos": (ops.cos, [u(2, 3)]),
    "Tan": (ops.tan, [u(2, 3)]),
    "Asin": (ops.asin, [u(2, 3, low=-0.8, high=0.8)]),
    "Acos": (ops.acos, [u(2, 3, low=-0.8, high=0.8)]),
    "Atan": (ops.atan, [u(2, 3)]),
    "Sinh": (ops.sinh, [u(2, 3)]),
    "Cosh": (ops.cosh, [u(2, 3)]),
    "Asinh": (ops.asinh, [u(2, 3)]),
    "Acosh": (ops.acosh, [u(2, 3, low=1.2, high=3)]),
    "Atanh": (ops.atanh, [u(2, 3, low=-0.8, high=0.8)]),
    "Erf": (ops.erf, [u(2, 3)]),
    "Tanh": (ops.tanh, [u(2, 3)]),
    "Sigmoid": (ops.sigmoid, [u(2, 3)]),
    "Softplus": (ops.softplus, [u(2, 3)]),
    "Softsign": (ops.softsign, [u(2, 3)]),
    "Relu": (ops.relu, [away(2, 3)]),
    "Relu6": (ops.relu6, [np.array([[-1.5, 0.5, 2.0], [5.5, 6.5, 3.0]])]),
    "Elu": (ops.elu, [away(2, 3)]),
    "Selu": (ops.selu, [away(2, 3)]),
    "LeakyRelu": (lambda x: ops.leaky_relu(x, alpha=0.3), [away(2, 3)]),
    "Identity": (ops.identity, [u(2, 3)]),
    "Sign": (ops.sign, [away(2, 3)]),
    # through float32: a wider finite-difference step, a float32 tolerance
    "Cast": (lambda x: ops.cast(ops.cast(x, "float32"), "float64"), [u(2, 3)],
             dict(eps=1e-2, rtol=1e-4)),
    # element-wise, two inputs, broadcast
    "AddV2": (ops.add, [u(2, 3), u(3)]),
    "Sub": (ops.subtract, [u(2, 1), u(1, 3)]),
    "Mul": (ops.multiply, [u(2, 3), u(2, 1)]),
    "RealDiv": (ops.realdiv, [u(2, 3), u(3, low=0.5, high=2)]),
    "DivNoNan": (ops.divide_no_nan, [u(2, 3), u(3, low=0.5, high=2)]),
    "Xdivy": (ops.xdivy, [away(2, 3), u(3, low=0.5, high=2)]),
    "Pow": (ops.pow, [u(2, 3, low=0.5, high=2), u(3)]),
    "Maximum": (ops.maximum, [distinct(2, 3), distinct(3) + 0.1]),
    "Minimum": (ops.minimum, [distinct(2, 3), distinct(3) + 0.1]),
    "SquaredDifference": (ops.squared_difference, [u(2, 3), u(3)]),
    "Atan2": (ops.atan2, [u(2, 3), u(3, low=0.5, high=2)]),
    "FloorMod": (ops.floormod, [np.array([[2.3, 5.4, 7.7]]), np.array([2.0, 2.5, 3.1])]),
    "AddN": (lambda a, b, c: ops.add_n([a, b, c]), [u(2, 3), u(2, 3), u(2, 3)]),
    "ClipByValue": (ops.clip_by_value, [np.array([[-0.9, 0.1, 0.8], [0.3, -0.2, 0.55]]),
                                        np.array(-0.5), np.array(0.5)]),
    "Select": (lambda x, y: raw_ops.Select(condition=np.array([True, False]), x=x, y=y),
               [u(2, 3), u(2, 3)]),
    "SelectV2": (lambda x, y: ops.where(np.array([True, False, True]), x, y), [u(2, 3), u(2, 1)]),
    # matrices and nn
    "MatMul": (ops.matmul, [u(2, 3), u(3, 4)]),
    "MatMul_ta": (lambda a, b: ops.matmul(a, b, transpose_a=True), [u(3, 2), u(3, 4)]),
    "MatMul_tb": (lambda a, b: ops.matmul(a, b, transpose_b=True), [u(2, 3), u(4, 3)]),
    "MatMul_tatb": (lambda a, b: ops.matmul(a, b, transpose_a=True, transpose_b=True),
                    [u(3, 2), u(4, 3)]),
    "BatchMatMulV2": (ops.matmul, [u(2, 2, 3), u(3, 2)]),
    "BatchMatMulV2_adj": (lambda a, b: ops.matmul(a, b, adjoint_a=True, adjoint_b=True),
                          [u(2, 3, 2), u(1, 4, 3)]),
    "BiasAdd": (ops.bias_add, [u(2, 3, 4), u(4)]),
    "BiasAdd_NCHW": (lambda x, b: ops.bias_add(x, b, data_format="NCHW"), [u(2, 3, 2, 2), u(3)]),
    "Conv2D": (lambda x, w: ops.conv2d(x, w, 1, "SAME"), [u(1, 4, 4, 2), u(2, 2, 2, 3)]),
    "Conv2D_strided": (lambda x, w: ops.conv2d(x, w, 2, "VALID"), [u(1, 5, 5, 1), u(3, 3, 1, 2)]),
    "MaxPool": (lambda x: raw_ops.MaxPool(input=x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1],
                                           padding="VALID"), [distinct(1, 4, 4, 2)]),
    "Softmax": (ops.softmax, [u(2, 4)]),
    "LogSoftmax": (ops.log_softmax, [u(2, 4)]),
    "SoftmaxCrossEntropyWithLogits": (
        lambda logits, labels: list(raw_ops.SoftmaxCrossEntropyWithLogits(features=logits,
                                                                          labels=labels)),
        [u(3, 4), LABELS]),
    "SparseSoftmaxCrossEntropyWithLogits": (
        lambda logits: list(raw_ops.SparseSoftmaxCrossEntropyWithLogits(
            features=logits, labels=np.array([1, 0, 3], np.int64))), [u(3, 4)]),
    "ReluGrad": (lambda g, x: raw_ops.ReluGrad(gradients=g, features=x), [u(2, 3), away(2, 3)]),
    "BiasAddGrad": (lambda g: raw_ops.BiasAddGrad(out_backprop=g), [u(2, 3, 4)]),
    "Conv2DBackpropInput": (
        lambda w, dy: raw_ops.Conv2DBackpropInput(input_sizes=np.array([1, 4, 4, 2], I32),
                                                  filter=w, out_backprop=dy,
                                                  strides=[1, 1, 1, 1], padding="SAME"),
        [u(2, 2, 2, 3), u(1, 4, 4, 3)]),
    "Conv2DBackpropFilter": (
        lambda x, dy: raw_ops.Conv2DBackpropFilter(input=x,
                                                   filter_sizes=np.array([2, 2, 2, 3], I32),
                                                   out_backprop=dy, strides=[1, 1, 1, 1],
                                                   padding="SAME"),
        [u(1, 4, 4, 2), u(1, 4, 4, 3)]),
    # reductions and scans
    "Sum": (lambda x: ops.reduce_sum(x, axis=1), [u(2, 3, 2)]),
    "Sum_all_keepdims": (lambda x: ops.reduce_sum(x, keepdims=True), [u(2, 3)]),
    "Mean": (lambda x: ops.reduce_mean(x, axis=[0, 2]), [u(2, 3, 2)]),
    "Max": (lambda x: ops.reduce_max(x, axis=-1), [distinct(2, 3)]),
    "Min": (lambda x: ops.reduce_min(x, axis=0, keepdims=True), [distinct(2, 3)]),
    "Prod": (lambda x: ops.reduce_prod(x, axis=1), [u(2, 3, 2)]),
    "Prod_with_zero": (lambda x: ops.reduce_prod(x, axis=[0, 1]),
                       [np.array([[0.0, 1.5], [2.0, -0.5]])]),
    "Cumsum": (lambda x: ops.cumsum(x, axis=1, exclusive=True), [u(2, 4)]),
    "Cumsum_reverse": (lambda x: ops.cumsum(x, axis=0, reverse=True), [u(3, 2)]),
    "Cumprod": (lambda x: ops.cumprod(x, axis=1), [u(2, 3, low=0.5, high=1.5)]),
    # shapes and arrays
    "Reshape": (lambda x: ops.reshape(x, [3, 2]), [u(2, 3)]),
    "Transpose": (lambda x: ops.transpose(x, [2, 0, 1]), [u(2, 3, 4)]),
    "ExpandDims": (lambda x: ops.expand_dims(x, 1), [u(2, 3)]),
    "Squeeze": (lambda x: ops.squeeze(x, [1]), [u(2, 1, 3)]),
    "ConcatV2": (lambda a, b: ops.concat([a, b], axis=1), [u(2, 3), u(2, 1)]),
    "Pack": (lambda a, b: ops.stack([a, b], axis=1), [u(2, 3), u(2, 3)]),
    "Unpack": (lambda x: ops.unstack(x, axis=1), [u(2, 3)]),
    "Split": (lambda x: ops.split(x, 2, axis=1), [u(2, 4)]),
    "SplitV": (lambda x: ops.split(x, [1, 3], axis=1), [u(2, 4)]),
    "Tile": (lambda x: ops.tile(x, [2, 3]), [u(2, 2)]),
    "BroadcastTo": (lambda x: ops.broadcast_to(x, [2, 3, 4]), [u(3, 1)]),
    "ReverseV2": (lambda x: ops.reverse(x, [1]), [u(2, 3)]),
    "Slice": (lambda x: ops.slice(x, [1, 0], [1, 2]), [u(3, 3)]),
    "StridedSlice": (lambda x: ops.strided_slice(x, [0, 1], [3, 4], [2, 2]), [u(3, 4)]),
    "StridedSlice_shrink": (lambda x: x[1, ::-1], [u(3, 4)]),
    "Pad": (lambda x: ops.pad(x, [[1, 0], [0, 2]]), [u(2, 2)]),
    "PadV2": (lambda x: ops.pad(x, [[1, 1], [0, 1]], constant_values=2.0), [u(2, 2)]),
    "GatherV2": (lambda p: ops.gather(p, np.array([2, 0, 2], np.int32)), [u(3, 2)]),
    "GatherV2_axis1": (lambda p: ops.gather(p, np.array([[1, 1], [0, 2]], np.int64), axis=1),
                       [u(2, 3, 2)]),
    "GatherNd": (lambda p: ops.gather_nd(p, np.array([[0, 1], [1, 0], [0, 1]], np.int32)),
                 [u(2, 2, 3)]),
    "Fill": (lambda v: ops.fill([2, 3], v), [np.array(0.7)]),
}


def _as_list(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _weights(outputs):
    return [np.random.default_rng(i).uniform(0.5, 1.5, o.shape) for i, o in enumerate(outputs)]


def _loss_value(fn, arrays, weights):
    outs = _as_list(fn(*[pluggable.constant(a) for a in arrays]))
    return sum(float((o.numpy().astype(np.float64) * w).sum()) for o, w in zip(outs, weights))


def _numeric(fn, arrays, weights, eps=1e-6):
    grads = []
    for i, a in enumerate(arrays):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            up, down = [x.copy() for x in arrays], [x.copy() for x in arrays]
            up[i][idx] += eps
            down[i][idx] -= eps
            g[idx] = (_loss_value(fn, up, weights) - _loss_value(fn, down, weights)) / (2 * eps)
        grads.append(g)
    return grads


@pytest.fixture(autouse=True)
def _fallback_is_fine():
    """Ops without an XPU kernel run on the CPU (soft placement) here; the test of gradient
    placement below checks the ops the XPU has."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlacementWarning)
        yield


@pytest.mark.parametrize("device", DEVICES, ids=["cpu", "xpu"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_gradient_matches_finite_differences(case, device):
    fn, arrays, *options = CASES[case]
    options = options[0] if options else {}
    arrays = [np.asarray(a, np.float64) for a in arrays]
    with pluggable.device(device):
        xs = [pluggable.constant(a) for a in arrays]
        with pluggable.GradientTape() as tape:
            tape.watch(xs)
            outputs = _as_list(fn(*xs))
            weights = _weights(outputs)
            loss = ops.add_n([ops.reduce_sum(o * w) for o, w in zip(outputs, weights)])
        grads = tape.gradient(loss, xs)
        expected = _numeric(fn, arrays, weights, options.get("eps", 1e-6))
    for i, (got, want) in enumerate(zip(grads, expected)):
        if case in ("Sign",):
            assert got is not None and not got.numpy().any()
            continue
        assert got is not None, f"{case}: no gradient for input {i}"
        assert got.shape == arrays[i].shape and got.dtype == pluggable.float64
        np.testing.assert_allclose(got.numpy(), want, rtol=options.get("rtol", 1e-5), atol=1e-6,
                                   err_msg=f"{case}: input {i}")


# The gradients of ops the XPU runs use only ops the XPU has: no op falls back to the CPU.
ON_XPU = ["AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Pow", "MatMul",
          "MatMul_tb", "BatchMatMulV2", "BiasAdd", "Conv2D", "Conv2D_strided", "MaxPool",
          "Relu", "Relu6", "Abs", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Softmax",
          "LogSoftmax", "SoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits",
          "Sum", "Mean", "Max", "Prod", "Reshape", "Transpose", "ConcatV2", "Pack", "Split",
          "Tile", "BroadcastTo", "Slice", "StridedSlice", "Pad", "GatherV2", "SelectV2"]


@pytest.mark.parametrize("case", ON_XPU)
def test_gradients_of_xpu_ops_stay_on_the_xpu(case):
    fn, arrays = CASES[case][:2]
    with pluggable.device("/xpu:0"):
        xs = [pluggable.constant(np.asarray(a, np.float32)) for a in arrays]
        with pluggable.GradientTape() as tape:
            tape.watch(xs)
            loss = ops.add_n([ops.reduce_sum(o) for o in _as_list(fn(*xs))])
        dispatch._warned.clear()  # every fallback warns again
        with warnings.catch_warnings():
            warnings.simplefilter("error", PlacementWarning)
            grads = tape.gradient(loss, xs)
    assert all(g.device == "/device:XPU:0" for g in grads)


def test_every_op_is_differentiable_or_declared_not():
    """Every op of the library has a gradient or is declared non-differentiable, except the
    gradient kernels whose own gradients TensorFlow computes with kernels pluggable lacks."""
    from pluggable.eager import OPS

    entries = gradients.registered()
    missing = sorted(name for name in OPS if name not in entries)
    assert missing == ["MaxPoolGrad"]
    tested = {case.split("_")[0] for case in CASES}
    untested = sorted(n for n, differentiable in entries.items()
                      if differentiable and n in OPS and n not in tested)
    assert untested == ["ReadVariableOp"]  # tests/autodiff/test_tape.py (variables)
