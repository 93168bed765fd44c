"""The training ops (gradients, losses, pooling) on the XPU against their NumPy CPU reference
(op_defs_nn.py), and the references themselves against independent definitions: adjoint
identities for the convolution gradients, one-hot equivalence for the sparse loss, a
brute-force loop for pooling. Value edge cases (NaN, out-of-range labels) follow a GPU on the
XPU: a value never fails the stream."""
from __future__ import annotations

import numpy as np
import pytest

import pluggable
from pluggable import config
from pluggable.eager import dispatch
from pluggable.errors import InvalidArgumentError
from test_ops_xpu import SUMMING, run_both, values

F = ["float32", "float64"]
N = ["float32", "float64", "int32", "int64"]
TRAINING_OPS = ["BiasAddGrad", "ReluGrad", "SoftmaxCrossEntropyWithLogits",
                "SparseSoftmaxCrossEntropyWithLogits", "Conv2DBackpropInput",
                "Conv2DBackpropFilter", "MaxPool", "MaxPoolGrad"]


def cpu(op, inputs, attrs=None):
    with pluggable.device("CPU"):
        return [t.numpy() for t in dispatch.execute(op, inputs, attrs)]


def xpu(op, inputs, attrs=None):
    device_inputs = [pluggable.tensor(x, device="xpu:0") for x in inputs]
    with pluggable.device("xpu:0"):
        return [t.numpy() for t in dispatch.execute(op, device_inputs, attrs)]


@pytest.mark.parametrize("op", TRAINING_OPS)
def test_every_training_op_has_a_cpu_and_an_xpu_kernel(op):
    assert {k.device_type for k in config.list_kernels(op)} >= {"CPU", "XPU"}


# -- ReluGrad, BiasAddGrad --------------------------------------------------------------------
@pytest.mark.parametrize("dtype", N)
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 5), (64, 1025)], ids=str)
def test_relu_grad(dtype, shape):
    g = values(shape, dtype, 1)
    f = values(shape, dtype, 2, low=-3, high=3)
    (out,) = run_both("ReluGrad", [g, f])
    np.testing.assert_array_equal(out, np.where(f > 0, g, 0).astype(dtype))


def test_relu_grad_shapes_must_match():
    with pytest.raises(InvalidArgumentError, match="ReluGrad: gradients .* and features"):
        xpu("ReluGrad", [np.ones(3, np.float32), np.ones(4, np.float32)])


@pytest.mark.parametrize("dtype", F)
@pytest.mark.parametrize("shape, fmt", [((4, 3), "NHWC"), ((2, 5, 6, 3), "NHWC"),
                                        ((2, 5, 6, 3), "NCHW"), ((0, 3), "NHWC"),
                                        ((3, 0), "NHWC"), ((2, 3, 0), "NCHW")], ids=str)
def test_bias_add_grad(dtype, shape, fmt):
    x = values(shape, dtype)
    (out,) = run_both("BiasAddGrad", [x], dict(data_format=fmt), summing=True)
    axis = 1 if fmt == "NCHW" else len(shape) - 1
    expected = np.moveaxis(x, axis, -1).reshape(-1, shape[axis]).sum(axis=0) if x.size else \
        np.zeros(shape[axis], dtype)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-3)


def test_bias_add_grad_errors():
    with pytest.raises(InvalidArgumentError, match="BiasAddGrad: out_backprop must have rank 2"):
        xpu("BiasAddGrad", [np.ones(3, np.float32)])
    with pytest.raises(InvalidArgumentError, match="data_format='NCDHW' is not supported"):
        xpu("BiasAddGrad", [np.ones((2, 3), np.float32)], dict(data_format="NCDHW"))


# -- softmax cross entropy ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", F)
@pytest.mark.parametrize("shape", [(1, 1), (4, 7), (0, 5), (3, 0), (300, 200)], ids=str)
def test_softmax_cross_entropy(dtype, shape):
    logits = values(shape, dtype, 1)
    labels = np.random.default_rng(2).random(shape).astype(dtype)
    loss, backprop = run_both("SoftmaxCrossEntropyWithLogits", [logits, labels], summing=True)
    if shape[1]:
        wide = logits.astype(np.float64)
        log_p = wide - wide.max(axis=1, keepdims=True)
        log_p -= np.log(np.exp(log_p).sum(axis=1, keepdims=True))
        np.testing.assert_allclose(backprop, np.exp(log_p) - labels, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(loss, -(labels * log_p).sum(axis=1), rtol=1e-4)
    else:
        assert loss.tolist() == [0.0] * shape[0]


@pytest.mark.parametrize("dtype", F)
@pytest.mark.parametrize("label_type", ["int32", "int64"])
@pytest.mark.parametrize("shape", [(1, 1), (5, 7), (0, 4), (257, 130)], ids=str)
def test_sparse_softmax_cross_entropy_matches_the_one_hot_loss(dtype, label_type, shape):
    logits = values(shape, dtype, 3)
    labels = np.random.default_rng(4).integers(0, shape[1], shape[0]).astype(label_type)
    loss, backprop = run_both("SparseSoftmaxCrossEntropyWithLogits", [logits, labels],
                              summing=True)
    one_hot = np.eye(shape[1], dtype=dtype)[labels]
    dense_loss, dense_backprop = cpu("SoftmaxCrossEntropyWithLogits", [logits, one_hot])
    np.testing.assert_allclose(loss, dense_loss, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(backprop, dense_backprop, rtol=1e-4, atol=1e-6)


def test_cross_entropy_of_large_logits_does_not_overflow():
    logits = np.array([[1000.0, 0.0, -1000.0]], np.float32)
    loss, backprop = xpu("SparseSoftmaxCrossEntropyWithLogits", [logits, np.array([1])])
    assert loss[0] == pytest.approx(1000.0)
    np.testing.assert_allclose(backprop, [[1.0, -1.0, 0.0]], atol=1e-6)


def test_out_of_range_sparse_labels_give_nan_rows_on_the_xpu_and_an_error_on_the_cpu():
    logits = values((3, 4), "float32")
    labels = np.array([1, 4, -1], np.int64)
    loss, backprop = xpu("SparseSoftmaxCrossEntropyWithLogits", [logits, labels])
    good_loss, good_backprop = cpu("SparseSoftmaxCrossEntropyWithLogits",
                                   [logits[:1], labels[:1]])
    np.testing.assert_allclose(loss[:1], good_loss, rtol=1e-5)
    np.testing.assert_allclose(backprop[:1], good_backprop, rtol=1e-5, atol=1e-7)
    assert np.isnan(loss[1:]).all() and np.isnan(backprop[1:]).all()
    # The device is still healthy after it: the next op on the stream runs.
    assert xpu("ReluGrad", [np.ones(2, np.float32), np.ones(2, np.float32)])[0].tolist() == [1, 1]
    with pytest.raises(InvalidArgumentError, match="label value of 4 which is outside"):
        cpu("SparseSoftmaxCrossEntropyWithLogits", [logits, labels])


def test_nan_logits_make_their_row_nan():
    logits = np.array([[1.0, np.nan, 2.0], [1.0, 2.0, 3.0]], np.float32)
    loss, backprop = xpu("SparseSoftmaxCrossEntropyWithLogits", [logits, np.array([0, 2])])
    assert np.isnan(loss[0]) and np.isnan(backprop[0]).all()
    assert np.isfinite(loss[1]) and np.isfinite(backprop[1]).all()


@pytest.mark.parametrize("op, inputs, match", [
    ("SoftmaxCrossEntropyWithLogits", [np.ones((2, 3)), np.ones((3, 3))], "must have the same"),
    ("SoftmaxCrossEntropyWithLogits", [np.ones(3), np.ones(3)], "features must be 2-D"),
    ("SparseSoftmaxCrossEntropyWithLogits", [np.ones((2, 3)), np.ones(3, np.int64)],
     "labels must be 1-D with the batch size"),
])
def test_cross_entropy_shape_errors(op, inputs, match):
    with pytest.raises(InvalidArgumentError, match=match):
        xpu(op, inputs)


# -- convolution gradients ------------------------------------------------------------------
CONV_CASES = [
    ((1, 5, 5, 1), (3, 3, 1, 1), dict(strides=[1, 1, 1, 1], padding="VALID")),
    ((2, 7, 6, 3), (3, 2, 3, 4), dict(strides=[1, 2, 1, 1], padding="SAME")),
    ((2, 8, 8, 2), (3, 3, 2, 5), dict(strides=[1, 2, 3, 1], padding="SAME",
                                      dilations=[1, 2, 1, 1])),
    ((1, 6, 7, 2), (2, 3, 2, 3), dict(strides=[1, 1, 2, 1], padding="EXPLICIT",
                                      explicit_paddings=[0, 0, 1, 2, 0, 1, 0, 0])),
    ((3, 9, 9, 4), (1, 1, 4, 6), dict(strides=[1, 3, 3, 1], padding="VALID")),
    ((0, 5, 5, 2), (3, 3, 2, 2), dict(strides=[1, 1, 1, 1], padding="SAME")),
]


@pytest.mark.parametrize("dtype", F)
@pytest.mark.parametrize("x_shape, f_shape, attrs", CONV_CASES, ids=str)
def test_conv2d_gradients_are_the_adjoints_of_conv2d(dtype, x_shape, f_shape, attrs):
    """<conv(x, f), dy> = <x, BackpropInput(dy)> = <f, BackpropFilter(dy)>, on both devices."""
    x = values(x_shape, dtype, 1)
    f = values(f_shape, dtype, 2, low=-3, high=3)
    (y,) = cpu("Conv2D", [x, f], attrs)
    dy = values(y.shape, dtype, 3, low=-3, high=3)
    (dx,) = run_both("Conv2DBackpropInput", [np.array(x_shape, np.int32), f, dy], attrs,
                     summing=True)
    (df,) = run_both("Conv2DBackpropFilter", [x, np.array(f_shape, np.int32), dy], attrs,
                     summing=True)
    assert dx.shape == x_shape and df.shape == f_shape
    total = float(np.sum(y.astype(np.float64) * dy))
    rtol = SUMMING[dtype][0] * 10
    scale = float(np.sum(np.abs(y.astype(np.float64) * dy))) + 1.0
    assert float(np.sum(x.astype(np.float64) * dx)) == pytest.approx(total, rel=rtol,
                                                                       abs=rtol * scale)
    assert float(np.sum(f.astype(np.float64) * df)) == pytest.approx(total, rel=rtol,
                                                                       abs=rtol * scale)


def test_conv2d_gradient_errors_are_found_before_the_work_is_queued():
    f = np.ones((3, 3, 2, 4), np.float32)
    attrs = dict(strides=[1, 1, 1, 1], padding="VALID")
    with pytest.raises(InvalidArgumentError, match="out_backprop has shape"):
        xpu("Conv2DBackpropInput", [np.array([1, 5, 5, 2], np.int32), f,
                                    np.ones((1, 4, 3, 4), np.float32)], attrs)
    with pytest.raises(InvalidArgumentError, match="input_sizes must be a vector of 4"):
        xpu("Conv2DBackpropInput", [np.array([5, 5, 2], np.int32), f,
                                    np.ones((1, 3, 3, 4), np.float32)], attrs)
    with pytest.raises(InvalidArgumentError, match="grouped convolutions are not supported"):
        xpu("Conv2DBackpropFilter", [np.ones((1, 5, 5, 4), np.float32),
                                     np.array([3, 3, 2, 4], np.int32),
                                     np.ones((1, 3, 3, 4), np.float32)], attrs)


# -- max pooling ----------------------------------------------------------------------------
def brute_force_pool(x, kh, kw, sh, sw, top, left, out_h, out_w):
    """Maximum and position of the first maximum (first NaN) of each window, by loops."""
    n, h, w, c = x.shape
    out = np.zeros((n, out_h, out_w, c), x.dtype)
    where = np.zeros((n, out_h, out_w, c, 2), np.int64)
    for b in range(n):
        for i in range(out_h):
            for j in range(out_w):
                for ch in range(c):
                    best, at = None, None
                    for p in range(i * sh - top, i * sh - top + kh):
                        for q in range(j * sw - left, j * sw - left + kw):
                            if 0 <= p < h and 0 <= q < w:
                                v = x[b, p, q, ch]
                                if best is None or (best == best and (v > best or v != v)):
                                    best, at = v, (p, q)
                    out[b, i, j, ch] = best
                    where[b, i, j, ch] = at
    return out, where


POOL_CASES = [
    ((1, 4, 4, 1), [1, 2, 2, 1], [1, 2, 2, 1], "VALID", (0, 0)),
    ((2, 5, 7, 3), [1, 3, 2, 1], [1, 2, 2, 1], "SAME", (1, 0)),
    ((1, 6, 6, 2), [1, 3, 3, 1], [1, 1, 1, 1], "SAME", (1, 1)),
    ((2, 7, 5, 2), [1, 2, 3, 1], [1, 3, 1, 1], "VALID", (0, 0)),
    ((0, 4, 4, 2), [1, 2, 2, 1], [1, 2, 2, 1], "VALID", (0, 0)),
]


@pytest.mark.parametrize("dtype", F)
@pytest.mark.parametrize("shape, ksize, strides, padding, pads", POOL_CASES, ids=str)
def test_max_pool_and_its_gradient(dtype, shape, ksize, strides, padding, pads):
    x = np.round(values(shape, dtype, 5, low=-4, high=4))  # ties: the first maximum wins
    attrs = dict(ksize=ksize, strides=strides, padding=padding, T=dtype)
    (pooled,) = run_both("MaxPool", [x], attrs)
    grad = values(pooled.shape, dtype, 6)
    (dx,) = run_both("MaxPoolGrad", [x, pooled, grad], attrs)
    expected, where = brute_force_pool(x, ksize[1], ksize[2], strides[1], strides[2], *pads,
                                       pooled.shape[1], pooled.shape[2])
    np.testing.assert_array_equal(pooled, expected)
    want = np.zeros(shape, np.float64)
    for b, i, j, ch in np.ndindex(*pooled.shape):
        p, q = where[b, i, j, ch]
        want[b, p, q, ch] += grad[b, i, j, ch]
    np.testing.assert_allclose(dx, want, rtol=1e-6, atol=1e-6)


def test_max_pool_propagates_nan_and_routes_the_gradient_to_it():
    x = np.array([1, np.nan, 3, 2], np.float32).reshape(1, 2, 2, 1)
    attrs = dict(ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
    (pooled,) = run_both("MaxPool", [x], attrs)
    assert np.isnan(pooled).all()
    (dx,) = run_both("MaxPoolGrad", [x, pooled, np.array([5], np.float32).reshape(1, 1, 1, 1)],
                     attrs)
    assert dx.reshape(-1).tolist() == [0, 5, 0, 0]


@pytest.mark.parametrize("attrs, match", [
    (dict(ksize=[2, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID"), "ksize must be"),
    (dict(ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="FULL"), "padding='FULL'"),
    (dict(ksize=[1, 5, 5, 1], strides=[1, 1, 1, 1], padding="VALID"), "larger than the padded"),
    (dict(ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID", data_format="NCHW"),
     "data_format 'NCHW' is not supported"),
])
def test_max_pool_errors(attrs, match):
    with pytest.raises(InvalidArgumentError, match=match):
        xpu("MaxPool", [np.ones((1, 4, 4, 1), np.float32)], attrs)


def test_max_pool_grad_checks_the_pooled_shapes():
    attrs = dict(ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
    x = np.ones((1, 4, 4, 1), np.float32)
    with pytest.raises(InvalidArgumentError, match="grad has shape"):
        xpu("MaxPoolGrad", [x, np.ones((1, 2, 2, 1), np.float32),
                            np.ones((1, 3, 2, 1), np.float32)], attrs)


def test_max_pool_with_explicit_padding():
    x = np.round(values((2, 5, 5, 2), "float32", 8, low=-4, high=4))
    attrs = dict(ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="EXPLICIT",
                 explicit_paddings=[0, 0, 1, 0, 0, 1, 0, 0])
    (pooled,) = run_both("MaxPool", [x], attrs)
    expected, _ = brute_force_pool(x, 2, 2, 2, 2, 1, 0, 3, 3)
    np.testing.assert_array_equal(pooled, expected)
    run_both("MaxPoolGrad", [x, pooled, values(pooled.shape, "float32", 9)], attrs)
    with pytest.raises(InvalidArgumentError, match="explicit_paddings"):
        xpu("MaxPool", [x], dict(attrs, explicit_paddings=[1, 0, 1, 0, 0, 1, 0, 0]))


def test_max_pool_window_wholly_in_the_padding_is_minus_infinity():
    x = values((1, 3, 3, 2), "float32", 10)
    attrs = dict(ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="EXPLICIT",
                 explicit_paddings=[0, 0, 3, 0, 0, 0, 0, 0])
    (pooled,) = run_both("MaxPool", [x], attrs)
    assert np.isneginf(pooled[:, :2]).all() and np.isfinite(pooled[:, 3:]).all()
    (dx,) = run_both("MaxPoolGrad", [x, pooled, np.ones(pooled.shape, np.float32)], attrs)
    assert dx.sum() == pytest.approx(np.isfinite(pooled).sum())


def test_conv2d_gradients_of_images_whose_im2col_is_cut_into_chunks():
    """One image's im2col rows here take 37 MB: the XPU works image by image (64 MB chunks),
    accumulating the filter gradient across them."""
    attrs = dict(strides=[1, 1, 1, 1], padding="SAME")
    x = values((2, 128, 128, 64), "float32", 1, low=-3, high=3)
    f = values((3, 3, 64, 4), "float32", 2, low=-3, high=3)
    dy = values((2, 128, 128, 4), "float32", 3, low=-3, high=3)
    run_both("Conv2DBackpropInput", [np.array(x.shape, np.int32), f, dy], attrs, summing=True)
    run_both("Conv2DBackpropFilter", [x, np.array(f.shape, np.int32), dy], attrs, summing=True)
