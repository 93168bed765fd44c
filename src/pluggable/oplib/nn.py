"""The op library's training ops: the gradients and losses of a Keras training step
(BiasAddGrad, ReluGrad, SoftmaxCrossEntropyWithLogits, SparseSoftmaxCrossEntropyWithLogits,
Conv2DBackpropInput, Conv2DBackpropFilter) and max pooling (MaxPool, MaxPoolGrad), with
TensorFlow's input, output and attribute names and defaults, shape inference and NumPy
reference kernels for the CPU.

The CPU kernels do what TensorFlow's CPU kernels do, including their errors on data (a sparse
label out of range raises); plugin devices may answer those the way GPUs do (the XPU gives
NaN rows), which plugins/xpu/README.md documents.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

from ..base import dtypes as dt
from ..base.errors import InvalidArgumentError
from .core import (FLOATS, INDEX, NUMBER, REAL, Arg, Attr, _define, bad, conv2d_geometry)

_CONV_TYPES = (dt.float16, dt.bfloat16, dt.float32, dt.float64)
_FORMATS = ("NHWC", "NCHW")


# -- ReluGrad, BiasAddGrad ------------------------------------------------------------------
def _relu_grad_infer(meta, attrs, host):
    gradients, features = meta[0].shape, meta[1].shape
    if gradients != features:
        raise bad("ReluGrad", f"gradients {gradients} and features {features} must have the "
                              f"same shape")
    return [gradients]


def _relu_grad_cpu(arrays, attrs):
    gradients, features = arrays
    return [np.where(features > 0, gradients, np.zeros((), gradients.dtype))]


_define("ReluGrad", [Arg("gradients", "T"), Arg("features", "T")], [Arg("backprops", "T")],
        [Attr("T", "type", allowed=REAL)], _relu_grad_infer, _relu_grad_cpu)


def _bias_channel_axis(shape: Tuple[int, ...], data_format: str) -> int:
    if len(shape) < 2:
        raise bad("BiasAddGrad", f"out_backprop must have rank 2 or more, got shape {shape}")
    return 1 if data_format == "NCHW" else len(shape) - 1


def _bias_add_grad_infer(meta, attrs, host):
    shape = meta[0].shape
    return [(shape[_bias_channel_axis(shape, attrs["data_format"])],)]


def _bias_add_grad_cpu(arrays, attrs):
    x = arrays[0]
    axis = _bias_channel_axis(x.shape, attrs["data_format"])
    others = tuple(a for a in range(x.ndim) if a != axis)
    with np.errstate(all="ignore"):
        return [np.sum(x, axis=others, dtype=x.dtype)]


_define("BiasAddGrad", [Arg("out_backprop", "T")], [Arg("output", "T")],
        [Attr("T", "type", allowed=NUMBER),
         Attr("data_format", "string", "NHWC", allowed=_FORMATS)],
        _bias_add_grad_infer, _bias_add_grad_cpu)


# -- softmax cross entropy ------------------------------------------------------------------
def _xent_infer(meta, attrs, host):
    features, labels = meta[0].shape, meta[1].shape
    if len(features) != 2:
        raise bad("SoftmaxCrossEntropyWithLogits",
                  f"features must be 2-D [batch, classes], got shape {features}")
    if labels != features:
        raise bad("SoftmaxCrossEntropyWithLogits",
                  f"logits {features} and labels {labels} must have the same shape")
    return [features[:1], features]


def _log_softmax_rows(x: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(x - max) and log(sum(exp(x - max))) per row."""
    with np.errstate(all="ignore"):
        shifted = x - np.max(x, axis=1, keepdims=True)
        return shifted, np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))


def _xent_cpu(arrays, attrs):
    x, labels = arrays
    if x.shape[1] == 0:
        return [np.zeros(x.shape[:1], x.dtype), np.zeros_like(x)]
    shifted, lse = _log_softmax_rows(x)
    with np.errstate(all="ignore"):
        loss = np.sum(labels * (lse - shifted), axis=1)
        backprop = np.exp(shifted) / np.exp(lse) - labels
    return [loss.astype(x.dtype), backprop.astype(x.dtype)]


_define("SoftmaxCrossEntropyWithLogits", [Arg("features", "T"), Arg("labels", "T")],
        [Arg("loss", "T"), Arg("backprop", "T")], [Attr("T", "type", allowed=FLOATS)],
        _xent_infer, _xent_cpu)


def _sparse_xent_infer(meta, attrs, host):
    features, labels = meta[0].shape, meta[1].shape
    op = "SparseSoftmaxCrossEntropyWithLogits"
    if len(features) != 2:
        raise bad(op, f"features must be 2-D [batch, classes], got shape {features}")
    if labels != features[:1]:
        raise bad(op, f"labels must be 1-D with the batch size of features: logits "
                      f"{features}, labels {labels}")
    return [features[:1], features]


def _sparse_xent_cpu(arrays, attrs):
    x, labels = arrays
    classes = x.shape[1]
    out_of_range = (labels < 0) | (labels >= classes)
    if np.any(out_of_range):
        row = int(np.argmax(out_of_range))
        raise InvalidArgumentError(
            f"SparseSoftmaxCrossEntropyWithLogits: Received a label value of {labels[row]} "
            f"which is outside the valid range of [0, {classes}) (row {row})",
            call="SparseSoftmaxCrossEntropyWithLogits")
    if x.shape[0] == 0:
        return [np.zeros((0,), x.dtype), np.zeros_like(x)]
    shifted, lse = _log_softmax_rows(x)
    rows = np.arange(x.shape[0])
    with np.errstate(all="ignore"):
        loss = lse[:, 0] - shifted[rows, labels]
        backprop = np.exp(shifted) / np.exp(lse)
        backprop[rows, labels] -= 1
    return [loss.astype(x.dtype), backprop.astype(x.dtype)]


_define("SparseSoftmaxCrossEntropyWithLogits",
        [Arg("features", "T"), Arg("labels", "Tlabels")],
        [Arg("loss", "T"), Arg("backprop", "T")],
        [Attr("T", "type", allowed=FLOATS),
         Attr("Tlabels", "type", dt.int64, allowed=INDEX)],
        _sparse_xent_infer, _sparse_xent_cpu)


# -- convolution gradients ------------------------------------------------------------------
_CONV_ATTRS = [Attr("T", "type", allowed=_CONV_TYPES), Attr("strides", "list(int)"),
               Attr("use_cudnn_on_gpu", "bool", True),
               Attr("padding", "string", allowed=("SAME", "VALID", "EXPLICIT")),
               Attr("explicit_paddings", "list(int)", ()),
               Attr("data_format", "string", "NHWC", allowed=_FORMATS),
               Attr("dilations", "list(int)", (1, 1, 1, 1))]


def _sizes(op: str, values, what: str) -> Tuple[int, ...]:
    sizes = [int(v) for v in np.asarray(values).reshape(-1)]
    if np.asarray(values).ndim != 1 or len(sizes) != 4 or min(sizes) < 0:
        raise bad(op, f"{what} must be a vector of 4 non-negative sizes, got {sizes}")
    return tuple(sizes)


def _conv_grad_geometry(op, input_shape, filter_shape, dy_shape, attrs):
    if attrs["padding"] == "EXPLICIT" and not attrs["explicit_paddings"]:
        raise bad(op, "padding 'EXPLICIT' needs explicit_paddings")
    out, pads = conv2d_geometry(op, input_shape, filter_shape, attrs)
    if tuple(dy_shape) != tuple(out):
        raise bad(op, f"out_backprop has shape {tuple(dy_shape)}, but the convolution of an "
                      f"input {tuple(input_shape)} with a filter {tuple(filter_shape)} gives "
                      f"{tuple(out)}")
    return out, pads


def _taps(attrs, out_shape, kh, kw):
    """(i, j, window slices of the padded input) for each filter tap."""
    _, oh, ow, _ = out_shape
    sh, sw = attrs["strides"][1], attrs["strides"][2]
    dh, dw = attrs["dilations"][1], attrs["dilations"][2]
    for i in range(kh):
        for j in range(kw):
            yield i, j, (slice(None), slice(i * dh, i * dh + (oh - 1) * sh + 1, sh),
                         slice(j * dw, j * dw + (ow - 1) * sw + 1, sw), slice(None))


def _accumulator(dtype: np.dtype) -> np.dtype:
    return np.float64 if dtype == np.float64 else np.float32


def _conv_input_infer(meta, attrs, host):
    op = "Conv2DBackpropInput"
    sizes = _sizes(op, host[0], "input_sizes")
    _conv_grad_geometry(op, sizes, meta[1].shape, meta[2].shape, attrs)
    return [sizes]


def _conv_input_cpu(arrays, attrs):
    op = "Conv2DBackpropInput"
    sizes, f, dy = arrays
    sizes = _sizes(op, sizes, "input_sizes")
    out, pads = _conv_grad_geometry(op, sizes, f.shape, dy.shape, attrs)
    n, h, w, c = sizes
    (top, bottom, _), (left, right, _) = pads
    padded = np.zeros((n, h + top + bottom, w + left + right, c), _accumulator(f.dtype))
    if dy.size:
        for i, j, window in _taps(attrs, out, f.shape[0], f.shape[1]):
            padded[window] += np.tensordot(dy, f[i, j], axes=([3], [1]))
    return [padded[:, top:top + h, left:left + w, :].astype(f.dtype)]


_define("Conv2DBackpropInput",
        [Arg("input_sizes", dtype=dt.int32, host=True), Arg("filter", "T"),
         Arg("out_backprop", "T")],
        [Arg("output", "T")], _CONV_ATTRS, _conv_input_infer, _conv_input_cpu)


def _conv_filter_infer(meta, attrs, host):
    op = "Conv2DBackpropFilter"
    sizes = _sizes(op, host[1], "filter_sizes")
    _conv_grad_geometry(op, meta[0].shape, sizes, meta[2].shape, attrs)
    return [sizes]


def _conv_filter_cpu(arrays, attrs):
    op = "Conv2DBackpropFilter"
    x, sizes, dy = arrays
    sizes = _sizes(op, sizes, "filter_sizes")
    out, pads = _conv_grad_geometry(op, x.shape, sizes, dy.shape, attrs)
    (top, bottom, _), (left, right, _) = pads
    padded = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0))).astype(
        _accumulator(x.dtype))
    df = np.zeros(sizes, _accumulator(x.dtype))
    if dy.size:
        for i, j, window in _taps(attrs, out, sizes[0], sizes[1]):
            df[i, j] = np.tensordot(padded[window], dy, axes=([0, 1, 2], [0, 1, 2]))
    return [df.astype(x.dtype)]


_define("Conv2DBackpropFilter",
        [Arg("input", "T"), Arg("filter_sizes", dtype=dt.int32, host=True),
         Arg("out_backprop", "T")],
        [Arg("output", "T")], _CONV_ATTRS, _conv_filter_infer, _conv_filter_cpu)


# -- max pooling ----------------------------------------------------------------------------
_POOL_TYPES = tuple(t for t in REAL if t not in (dt.uint32, dt.uint64))  # TensorFlow's MaxPool
_POOL_ATTRS = [Attr("T", "type", dt.float32, allowed=_POOL_TYPES),
               Attr("ksize", "list(int)", minimum=4), Attr("strides", "list(int)", minimum=4),
               Attr("padding", "string", allowed=("SAME", "VALID", "EXPLICIT")),
               Attr("explicit_paddings", "list(int)", ()),
               Attr("data_format", "string", "NHWC", allowed=("NHWC", "NCHW", "NCHW_VECT_C"))]


def pool_geometry(op: str, shape: Tuple[int, ...], attrs) -> Tuple[Tuple[int, ...], List]:
    """Pooled shape and ((before, after, out) per spatial dim) of an NHWC input."""
    ksize, strides = list(attrs["ksize"]), list(attrs["strides"])
    if len(ksize) != 4 or ksize[0] != 1 or ksize[3] != 1 or min(ksize) < 1:
        raise bad(op, f"ksize must be [1, kh, kw, 1] with kh, kw >= 1, got {ksize}")
    if len(shape) != 4:
        raise bad(op, f"input must have rank 4 (NHWC), got shape {shape}")
    window = (ksize[1], ksize[2], shape[3], shape[3])
    geometry_attrs = dict(attrs, dilations=(1, 1, 1, 1))
    if attrs["padding"] == "EXPLICIT" and not attrs["explicit_paddings"]:
        raise bad(op, "padding 'EXPLICIT' needs explicit_paddings")
    if len(strides) != 4 or strides[0] != 1 or strides[3] != 1:
        raise bad(op, f"strides must be [1, sh, sw, 1], got {strides}")
    return conv2d_geometry(op, shape, window, geometry_attrs)


def _pool_windows(x: np.ndarray, attrs, pads, out_shape):
    """The padded input (lowest value in the padding), a mask of real positions, and the
    (i, j, window slices) of every tap."""
    (top, bottom, _), (left, right, _) = pads
    if np.issubdtype(x.dtype, np.integer):
        lowest = np.iinfo(x.dtype).min
    else:
        lowest = -np.inf
    spec = ((0, 0), (top, bottom), (left, right), (0, 0))
    padded = np.pad(x, spec, constant_values=lowest)
    real = np.pad(np.ones(x.shape, bool), spec, constant_values=False)
    return padded, real, list(_taps(dict(attrs, dilations=(1, 1, 1, 1)), out_shape,
                                    attrs["ksize"][1], attrs["ksize"][2]))


def _max_pool_infer(meta, attrs, host):
    if attrs["data_format"] != "NHWC":
        raise bad("MaxPool", f"data_format {attrs['data_format']!r} is not supported; use 'NHWC'")
    return [pool_geometry("MaxPool", meta[0].shape, attrs)[0]]


def _max_pool_cpu(arrays, attrs):
    x = arrays[0]
    out_shape, pads = pool_geometry("MaxPool", x.shape, attrs)
    padded, _, taps = _pool_windows(x, attrs, pads, out_shape)
    out = None
    for _, _, window in taps:
        out = padded[window].copy() if out is None else np.maximum(out, padded[window])
    return [out.reshape(out_shape).astype(x.dtype)]


_define("MaxPool", [Arg("input", "T")], [Arg("output", "T")], _POOL_ATTRS,
        _max_pool_infer, _max_pool_cpu)


def _max_pool_grad_infer(meta, attrs, host):
    op = "MaxPoolGrad"
    if attrs["data_format"] != "NHWC":
        raise bad(op, f"data_format {attrs['data_format']!r} is not supported; use 'NHWC'")
    pooled, _ = pool_geometry(op, meta[0].shape, attrs)
    for m, name in ((meta[1], "orig_output"), (meta[2], "grad")):
        if m.shape != pooled:
            raise bad(op, f"{name} has shape {m.shape}; pooling orig_input {meta[0].shape} "
                          f"gives {pooled}")
    return [meta[0].shape]


def _max_pool_grad_cpu(arrays, attrs):
    """The gradient goes to the first maximum of each window in row order (the first NaN when
    the window holds one), the element MaxPool picked."""
    x, _, grad = arrays
    out_shape, pads = pool_geometry("MaxPoolGrad", x.shape, attrs)
    padded, real, taps = _pool_windows(x, attrs, pads, out_shape)
    best = np.zeros(out_shape, x.dtype)
    where_h = np.full(out_shape, -1, np.int64)
    where_w = np.full(out_shape, -1, np.int64)
    rows = np.arange(out_shape[1]).reshape(1, -1, 1, 1)
    cols = np.arange(out_shape[2]).reshape(1, 1, -1, 1)
    sh, sw = attrs["strides"][1], attrs["strides"][2]
    for i, j, window in taps:
        v, ok = padded[window], real[window]
        with np.errstate(invalid="ignore"):
            better = ok & ((where_h < 0) | ((best == best) & ((v > best) | (v != v))))
        best = np.where(better, v, best)
        where_h = np.where(better, rows * sh + i, where_h)
        where_w = np.where(better, cols * sw + j, where_w)
    dx = np.zeros(padded.shape, _accumulator(x.dtype) if x.dtype.kind == "f" else x.dtype)
    n_idx, _, _, c_idx = np.indices(out_shape)
    found = where_h >= 0
    np.add.at(dx, (n_idx[found], where_h[found], where_w[found], c_idx[found]), grad[found])
    (top, _, _), (left, _, _) = pads
    return [dx[:, top:top + x.shape[1], left:left + x.shape[2], :].astype(x.dtype)]


_define("MaxPoolGrad", [Arg("orig_input", "T"), Arg("orig_output", "T"), Arg("grad", "T")],
        [Arg("output", "T")], [Attr("T", "type", dt.float32, allowed=REAL)] + _POOL_ATTRS[1:], _max_pool_grad_infer, _max_pool_grad_cpu)
