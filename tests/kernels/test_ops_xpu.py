"""Every op of the library on the XPU against the CPU's NumPy reference: integers exactly,
floating point within a stated tolerance. Any fallback to the CPU would warn, and warnings of
pluggable are errors in the tests: these ops really ran on the XPU."""
from __future__ import annotations

import numpy as np
import pytest

import pluggable
from pluggable import raw_ops

F = ["float32", "float64"]
N = ["float32", "float64", "int32", "int64"]
# Tolerances for floating point: element-wise ops differ at most by rounding of libm;
# reductions, matmul and convolution sum in another order, so their error is relative to the
# size of the terms summed (the largest result stands for it), not to each result.
TOLERANCE = {"float32": dict(rtol=2e-5, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-12)}
SUMMING = {"float32": (2e-4, 2e-5), "float64": (1e-10, 1e-12)}  # rtol, atol per |largest|


def values(shape, dtype, seed=0, low=-50, high=50, nonzero=False, positive=False):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.startswith("int"):
        x = rng.integers(low, high, shape).astype(dtype)
    else:
        x = (rng.standard_normal(shape) * (high - low) / 6).astype(dtype)
    if positive:
        x = np.abs(x) + np.asarray(1, dtype)
    if nonzero:
        x = np.where(x == 0, np.asarray(3, dtype), x)
    return x


def run_both(op, inputs, attrs=None, summing=False):
    """Runs `op` on the CPU and on XPU:0; returns both outputs after checking they agree."""
    with pluggable.device("CPU"):
        expected = [t.numpy() for t in pluggable.eager.dispatch.execute(op, inputs, attrs)]
    device_inputs = [pluggable.tensor(x, device="xpu:0") for x in inputs]
    with pluggable.device("xpu:0"):
        outputs = pluggable.eager.dispatch.execute(op, device_inputs, attrs)
    got = []
    for out, want in zip(outputs, expected):
        assert out.device == "/device:XPU:0", f"{op} did not run on the XPU"
        value = out.numpy()
        assert value.shape == want.shape and value.dtype == want.dtype, (value, want)
        if value.dtype.kind in "f":
            if summing:
                rtol, scale = SUMMING[value.dtype.name]
                finite = np.abs(want[np.isfinite(want)])
                tol = dict(rtol=rtol, atol=scale * (finite.max() if finite.size else 1.0))
            else:
                tol = TOLERANCE[value.dtype.name]
            np.testing.assert_allclose(value, want, equal_nan=True, **tol)
        else:
            np.testing.assert_array_equal(value, want)
        got.append(value)
    return got


BINARY_SHAPES = [((), ()), ((5,), ()), ((), (5,)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)),
                 ((4, 1), (1, 6)), ((64, 257), (64, 257)), ((1, 1, 1, 1, 5), (2, 3, 1, 4, 1))]


@pytest.mark.parametrize("op", ["AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum",
                                "Equal", "Less", "Greater"])
@pytest.mark.parametrize("dtype", N)
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
def test_binary(op, dtype, shapes):
    few = op in ("Equal", "Less", "Greater")  # few distinct values: many ties
    x = values(shapes[0], dtype, 1, low=-3 if few else -50, high=3 if few else 50)
    y = values(shapes[1], dtype, 2, low=-3 if few else -50, high=3 if few else 50,
               nonzero=op == "RealDiv")
    if few:
        x, y = np.round(x), np.round(y)
    run_both(op, [x, y])


@pytest.mark.parametrize("op", ["Neg", "Abs", "Square", "Relu", "Relu6", "Identity",
                                "ZerosLike", "OnesLike"])
@pytest.mark.parametrize("dtype", N)
@pytest.mark.parametrize("shape", [(), (1,), (7, 3), (1000,)], ids=str)
def test_unary_numeric(op, dtype, shape):
    run_both(op, [values(shape, dtype, 4, low=-9, high=9)])


@pytest.mark.parametrize("op", ["Sqrt", "Rsqrt", "Exp", "Log", "Tanh", "Sigmoid"])
@pytest.mark.parametrize("dtype", F)
@pytest.mark.parametrize("shape", [(), (9,), (33, 17)], ids=str)
def test_unary_floating(op, dtype, shape):
    positive = op in ("Sqrt", "Rsqrt", "Log")
    run_both(op, [values(shape, dtype, 5, low=-20, high=20, positive=positive)])


@pytest.mark.parametrize("src", ["bool", "int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("dst", ["bool", "int32", "int64", "float32", "float64"])
def test_cast(src, dst):
    x = values((50,), src, 6, low=-1000, high=1000)
    if src.startswith("float"):
        x = np.concatenate([x, np.array([np.nan, np.inf, -np.inf, 3e12, -3e12, 0.5, -0.5],
                                        src)])
    run_both("Cast", [x], {"DstT": pluggable.dtypes.as_dtype(dst)})


@pytest.mark.parametrize("dtype", F)
@pytest.mark.parametrize("shapes, ta, tb", [(((1, 1), (1, 1)), False, False),
                                             (((3, 5), (5, 2)), False, False),
                                             (((5, 3), (5, 2)), True, False),
                                             (((3, 5), (2, 5)), False, True),
                                             (((64, 130), (33, 130)), False, True),
                                             (((0, 4), (4, 3)), False, False),
                                             (((200, 300), (300, 150)), False, False)], ids=str)
def test_matmul(dtype, shapes, ta, tb):
    run_both("MatMul", [values(shapes[0], dtype, 7), values(shapes[1], dtype, 8)],
             {"transpose_a": ta, "transpose_b": tb}, summing=True)


@pytest.mark.parametrize("dtype", F)
@pytest.mark.parametrize("shapes, adj_x, adj_y", [(((2, 3, 4), (4, 5)), False, False),
                                                   (((2, 1, 3, 4), (5, 4, 6)), False, False),
                                                   (((3, 4, 2), (3, 5, 4)), True, True),
                                                   (((4, 3), (2, 3, 6)), False, False)],
                         ids=str)
def test_batch_matmul(dtype, shapes, adj_x, adj_y):
    run_both("BatchMatMulV2", [values(shapes[0], dtype, 9), values(shapes[1], dtype, 10)],
             {"adj_x": adj_x, "adj_y": adj_y}, summing=True)


@pytest.mark.parametrize("dtype", N)
@pytest.mark.parametrize("shape, fmt", [((4, 3), "NHWC"), ((2, 5, 5, 3), "NHWC"),
                                        ((2, 3, 5, 5), "NCHW")], ids=str)
def test_bias_add(dtype, shape, fmt):
    channels = shape[1] if fmt == "NCHW" else shape[-1]
    run_both("BiasAdd", [values(shape, dtype, 11), values((channels,), dtype, 12)],
             {"data_format": fmt})


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min", "Prod"])
@pytest.mark.parametrize("dtype", N)
@pytest.mark.parametrize("shape, axes, keep", [((), [], False), ((5,), [0], False),
                                               ((3, 4, 5), [0, 2], False),
                                               ((3, 4, 5), [-1], True),
                                               ((3, 4, 5), [], False),
                                               ((2, 3), [0, 1], True),
                                               ((0, 3), [0], False),
                                               ((300, 200), [1], False)], ids=str)
def test_reductions(op, dtype, shape, axes, keep):
    high = 4 if op == "Prod" else 50
    x = values(shape, dtype, 13, low=-high, high=high)
    run_both(op, [x, np.asarray(axes, np.int32)], {"keep_dims": keep}, summing=True)


@pytest.mark.parametrize("dtype", N)
@pytest.mark.parametrize("shape, axis, out", [((7,), 0, "int64"), ((4, 9), -1, "int32"),
                                              ((4, 9, 2), 1, "int64")], ids=str)
def test_argmax(dtype, shape, axis, out):
    x = values(shape, dtype, 14, low=-3, high=3)  # ties: the first index wins
    run_both("ArgMax", [x, np.asarray(axis, np.int32)],
             {"output_type": pluggable.dtypes.as_dtype(out)})


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("dtype", F)
@pytest.mark.parametrize("shape", [(1,), (10,), (4, 10), (2, 3, 1000)], ids=str)
def test_softmax(op, dtype, shape):
    x = values(shape, dtype, 15, low=-300, high=300)
    run_both(op, [x], summing=True)


@pytest.mark.parametrize("dtype", F)
@pytest.mark.parametrize("x_shape, f_shape, strides, padding, dilations", [
    ((1, 5, 5, 1), (3, 3, 1, 1), [1, 1, 1, 1], "VALID", [1, 1, 1, 1]),
    ((1, 5, 5, 1), (3, 3, 1, 1), [1, 1, 1, 1], "SAME", [1, 1, 1, 1]),
    ((2, 8, 7, 3), (3, 3, 3, 4), [1, 2, 2, 1], "SAME", [1, 1, 1, 1]),
    ((2, 9, 9, 2), (3, 2, 2, 5), [1, 1, 2, 1], "VALID", [1, 2, 1, 1]),
    ((1, 6, 6, 3), (2, 2, 3, 2), [1, 1, 1, 1], [(1, 0), (0, 2)], [1, 1, 1, 1]),
    ((4, 16, 16, 8), (3, 3, 8, 16), [1, 1, 1, 1], "SAME", [1, 1, 1, 1]),
    # More than one K block of the GEMM (256 columns of im2col): blocks that start within a
    # tap's channels, with strides, dilations and rows of pixels that cross images.
    ((1, 7, 9, 40), (3, 3, 40, 8), [1, 1, 1, 1], "SAME", [1, 1, 1, 1]),
    ((3, 10, 11, 30), (3, 3, 30, 7), [1, 2, 1, 1], "SAME", [1, 1, 2, 1]),
    ((2, 28, 28, 1), (3, 3, 1, 16), [1, 1, 1, 1], "SAME", [1, 1, 1, 1]),
], ids=str)
def test_conv2d(dtype, x_shape, f_shape, strides, padding, dilations):
    attrs = {"strides": strides, "dilations": dilations}
    if isinstance(padding, str):
        attrs["padding"] = padding
    else:
        attrs.update(padding="EXPLICIT", explicit_paddings=[0, 0, *padding[0], *padding[1], 0, 0])
    run_both("Conv2D", [values(x_shape, dtype, 16), values(f_shape, dtype, 17)], attrs,
             summing=True)


@pytest.mark.parametrize("dtype", N + ["bool"])
def test_shape_ops(dtype):
    x = values((2, 3, 4), dtype, 18)
    run_both("Reshape", [x, np.asarray([4, -1], np.int32)])
    run_both("Reshape", [x, np.asarray([24], np.int64)])
    run_both("Transpose", [x, np.asarray([2, 0, 1], np.int32)])
    run_both("Transpose", [x, np.asarray([0, 1, 2], np.int64)])
    run_both("Fill", [np.asarray([3, 2], np.int32), values((), dtype, 19)])
    run_both("Select", [values((2, 3, 4), "bool", 20), x, values((2, 3, 4), dtype, 21)])
    run_both("Select", [values((2,), "bool", 22), x, values((2, 3, 4), dtype, 23)])
    run_both("Select", [values((4,), "bool", 24), x, values((), dtype, 25)])


def test_large_elementwise_and_matmul_1024():
    x = values((1024, 1024), "float32", 26)
    y = values((1024, 1024), "float32", 27)
    run_both("AddV2", [x, y])
    run_both("MatMul", [x, y], {"transpose_a": False, "transpose_b": False}, summing=True)


def test_raw_ops_and_operators_on_xpu():
    a = pluggable.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device="xpu:1")
    b = pluggable.tensor(np.ones((3, 2), np.float32), device="xpu:1")
    product = raw_ops.MatMul(a=a, b=b)
    assert product.device == "/device:XPU:1"
    assert product.numpy().tolist() == [[3, 3], [12, 12]]
    assert (a @ b).numpy().tolist() == [[3, 3], [12, 12]]
    expected = (np.arange(6).reshape(2, 3) + 1) * 2 - np.arange(6).reshape(2, 3) / 2
    assert ((a + 1) * 2 - a / 2).numpy().tolist() == expected.tolist()
    assert (-a).numpy()[1, 2] == -5 and abs(-a).numpy()[1, 2] == 5
    assert (a > 2).numpy().tolist() == [[False, False, False], [True, True, True]]
    assert (a == 1).dtype == pluggable.bool_ and (a < 1).device == "/device:XPU:1"
    assert (10 - a).numpy()[0].tolist() == [10, 9, 8]
