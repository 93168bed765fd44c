"""The gradient of every differentiable op, for `pluggable.eager.tape`.

A gradient function takes the recorded op (its ``inputs`` flattened as the kernel sees them,
``outputs``, ``attr(name)``, and ``needed``: which inputs lead to a source) and the gradient
of each output, and returns one gradient per input (None where there is none). It runs ops,
on the device of the forward op (the tape sets the scope), so that a tape recording around a
``gradient`` call records them too (second derivatives).

Where TensorFlow's gradient runs a gradient kernel (ReluGrad, BiasAddGrad,
Conv2DBackpropInput/Filter, MaxPoolGrad, the cross-entropy ops' backprop output) the same op
runs here, so a plugin's kernel computes it; elsewhere the gradient is composed of forward
ops, with TensorFlow's mathematics (math_grad, array_grad, nn_grad). Ops TensorFlow declares
non-differentiable are `NOT_DIFFERENTIABLE`: the tape does not record them.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np

from ..base import dtypes as dt
from ..base.errors import UnimplementedError
from ..tensors.placement import CPU_DEVICE, device_scope
from ..tensors.tensor import Tensor, tensor
from .dispatch import execute

__all__ = ["NOT_DIFFERENTIABLE", "lookup", "register", "registered"]

NOT_DIFFERENTIABLE = object()
_GRADIENTS: Dict[str, Any] = {}


def register(*names: str):
    """Decorator: the gradient function of the ops ``names``."""
    def decorate(function: Callable) -> Callable:
        for name in names:
            _GRADIENTS[name] = function
        return function
    return decorate


def lookup(op_name: str):
    """The op's gradient function, `NOT_DIFFERENTIABLE`, or None when there is none."""
    return _GRADIENTS.get(op_name)


def registered() -> Dict[str, bool]:
    """Op name -> whether it is differentiable, for every op with an entry."""
    return {name: fn is not NOT_DIFFERENTIABLE for name, fn in _GRADIENTS.items()}


for _name in ("Shape", "Size", "Rank", "ZerosLike", "OnesLike", "ArgMax", "ArgMin", "Equal",
              "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd",
              "LogicalOr", "LogicalNot", "IsNan", "IsInf", "IsFinite", "All", "Any",
              "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Invert", "LeftShift", "RightShift",
              "Floor", "Ceil", "Round", "Rint", "FloorDiv", "TruncateDiv", "TruncateMod",
              "Range", "OneHot", "Where", "RandomUniform", "RandomUniformInt",
              "RandomStandardNormal", "TruncatedNormal", "StatelessRandomUniform",
              "StatelessRandomNormal", "StatelessTruncatedNormal", "VarHandleOp",
              "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
              "DestroyResourceOp", "ResourceApplyGradientDescent", "ResourceApplyMomentum",
              "ResourceApplyAdam", "ResourceApplyKerasMomentum", "ResourceApplyRMSProp",
              "ResourceApplyCenteredRMSProp", "ResourceApplyAdagradV2", "VarIsInitializedOp",
              "VariableShape"):
    _GRADIENTS[_name] = NOT_DIFFERENTIABLE


# -- helpers ------------------------------------------------------------------------------
def _op(name: str, *inputs, **attrs) -> Tensor:
    return execute(name, list(inputs), attrs or None)[0]


def _shape(value: Any) -> Tuple[int, ...]:
    if isinstance(value, Tensor):
        return value.shape
    shape = getattr(value, "shape", None)
    return tuple(shape) if shape is not None else np.shape(value)


def _host(value: Any) -> np.ndarray:
    """A host input (an axis, a shape) as a NumPy array."""
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


def _ints(values: Sequence[int]) -> np.ndarray:
    return np.asarray(list(values), dtype=np.int64)


def _reshape(x, shape) -> Tensor:
    return _op("Reshape", x, _ints(shape))


def _sum(x, axes, keepdims: bool = False) -> Tensor:
    return _op("Sum", x, np.asarray(list(axes), np.int32), keep_dims=keepdims)


def _cast(x, dtype) -> Tensor:
    return _op("Cast", x, DstT=dtype)


def _zeros_like(x) -> Tensor:
    return _op("ZerosLike", x)


def _select(condition, a, b) -> Tensor:
    return _op("SelectV2", condition, a, b)


def _axes(value: Any, rank: int) -> List[int]:
    axes = _host(value).reshape(-1)
    return sorted({int(a) % rank for a in axes}) if rank else []


def _unbroadcast(g: Tensor, shape: Tuple[int, ...]) -> Tensor:
    """``g`` summed over the dimensions a broadcast to its shape added to ``shape``
    (TensorFlow's BroadcastGradientArgs, then the reduction and the reshape)."""
    gshape = g.shape
    if tuple(gshape) == tuple(shape):
        return g
    lead = len(gshape) - len(shape)
    axes = list(range(lead)) + [lead + i for i, n in enumerate(shape)
                                if n == 1 and gshape[lead + i] != 1]
    if axes:
        g = _sum(g, axes)
    return _reshape(g, shape) if tuple(g.shape) != tuple(shape) else g


def _binary(op, gx, gy):
    """The two gradients of a broadcasting binary op, each reduced to its input's shape and
    only where it is needed (``gx``/``gy`` are functions computing the full gradient)."""
    x, y = op.inputs[0], op.inputs[1]
    return [_unbroadcast(gx(), _shape(x)) if op.needed[0] else None,
            _unbroadcast(gy(), _shape(y)) if op.needed[1] else None]


def _pair(op):
    """A binary op's inputs, a Python or NumPy value made a tensor of the op's dtype (so the
    gradient's ops combine it with tensors of that dtype)."""
    dtype = op.outputs[0].dtype.numpy_dtype
    return [v if isinstance(v, Tensor) else tensor(np.asarray(v, dtype))
            for v in op.inputs[:2]]


def _keep_shape(shape: Tuple[int, ...], axes: List[int]) -> List[int]:
    return [1 if i in axes else n for i, n in enumerate(shape)]


# -- arithmetic ---------------------------------------------------------------------------
@register("AddV2", "Add")
def _add_grad(op, g):
    return _binary(op, lambda: g, lambda: g)


@register("Sub")
def _sub_grad(op, g):
    return _binary(op, lambda: g, lambda: _op("Neg", g))


@register("Mul")
def _mul_grad(op, g):
    x, y = _pair(op)
    return _binary(op, lambda: _op("Mul", g, y), lambda: _op("Mul", x, g))


@register("RealDiv", "Div")
def _div_grad(op, g):
    x, y = _pair(op)
    return _binary(op, lambda: _op("RealDiv", g, y),
                   lambda: _op("Mul", g, _op("RealDiv", _op("RealDiv", _op("Neg", x), y), y)))


@register("DivNoNan")
def _div_no_nan_grad(op, g):
    x, y = _pair(op)
    return _binary(op, lambda: _op("DivNoNan", g, y),
                   lambda: _op("Mul", g, _op("DivNoNan", _op("DivNoNan", _op("Neg", x), y), y)))


@register("Xdivy")
def _xdivy_grad(op, g):
    x, y = _pair(op)
    def gx():  # 1 / y where x is not zero
        nonzero = _cast(_op("NotEqual", x, _zeros_like(x)), op.outputs[0].dtype)
        return _op("Mul", g, _op("Xdivy", nonzero, y))
    return _binary(op, gx,
                   lambda: _op("Mul", g, _op("Xdivy", _op("Neg", x), _op("Square", y))))


@register("FloorMod")
def _floor_mod_grad(op, g):
    x, y = _pair(op)
    return _binary(op, lambda: g,
                   lambda: _op("Mul", g, _op("Neg", _op("FloorDiv", x, y))))


@register("Pow")
def _pow_grad(op, g):
    x, y = _pair(op)
    z = op.outputs[0]

    def gx():
        return _op("Mul", g, _op("Mul", y, _op("Pow", x, _op("Sub", y, _op("OnesLike", y)))))

    def gy():
        # d/dy x**y = x**y * log(x), taken as 0 where x <= 0 (as TensorFlow does)
        positive = _op("Greater", x, _zeros_like(x))
        safe_x = _select(positive, x, _op("OnesLike", x))
        log_x = _select(positive, _op("Log", safe_x), _zeros_like(x))
        return _op("Mul", g, _op("Mul", z, log_x))
    return _binary(op, gx, gy)


@register("Maximum", "Minimum")
def _max_min_grad(op, g):
    x, y = _pair(op)
    compare = "GreaterEqual" if op.name == "Maximum" else "LessEqual"

    return _binary(op, lambda: _select(_op(compare, x, y), g, _zeros_like(g)),
                   lambda: _select(_op(compare, x, y), _zeros_like(g), g))


@register("SquaredDifference")
def _squared_difference_grad(op, g):
    x, y = _pair(op)
    def gx():
        return _op("Mul", _op("Mul", g, 2.0), _op("Sub", x, y))
    return _binary(op, gx, lambda: _op("Neg", gx()))


@register("Atan2")
def _atan2_grad(op, g):
    y, x = _pair(op)
    def scaled(factor):  # g * factor / (x^2 + y^2)
        return _op("RealDiv", _op("Mul", g, factor),
                   _op("AddV2", _op("Square", x), _op("Square", y)))
    return _binary(op, lambda: scaled(x), lambda: scaled(_op("Neg", y)))


@register("AddN")
def _add_n_grad(op, g):
    return [g] * len(op.inputs)


def _unary(name: str, derivative: Callable[[Any, Any, Any], Tensor]):
    """An element-wise op whose gradient is ``g * f'(x)``; ``derivative(x, y, g)`` returns
    the product."""
    register(name)(lambda op, g: [derivative(op.inputs[0], op.outputs[0], g)])


_unary("Identity", lambda x, y, g: g)
_unary("Neg", lambda x, y, g: _op("Neg", g))
_unary("Abs", lambda x, y, g: _select(_op("Greater", x, 0.0), g, _select(
    _op("Less", x, 0.0), _op("Neg", g), _zeros_like(g))))  # g * sign(x)
_unary("Sign", lambda x, y, g: _zeros_like(x))
_unary("Square", lambda x, y, g: _op("Mul", g, _op("Mul", x, 2.0)))
_unary("Sqrt", lambda x, y, g: _op("RealDiv", _op("Mul", g, 0.5), y))
_unary("Rsqrt", lambda x, y, g: _op("Mul", _op("Mul", g, -0.5),
                                    _op("Mul", y, _op("Square", y))))
_unary("Reciprocal", lambda x, y, g: _op("Neg", _op("Mul", g, _op("Square", y))))
_unary("Exp", lambda x, y, g: _op("Mul", g, y))
_unary("Expm1", lambda x, y, g: _op("Mul", g, _op("Exp", x)))
_unary("Log", lambda x, y, g: _op("RealDiv", g, x))
_unary("Log1p", lambda x, y, g: _op("RealDiv", g, _op("AddV2", x, 1.0)))
_unary("Sin", lambda x, y, g: _op("Mul", g, _op("Cos", x)))
_unary("Cos", lambda x, y, g: _op("Neg", _op("Mul", g, _op("Sin", x))))
_unary("Tan", lambda x, y, g: _op("RealDiv", g, _op("Square", _op("Cos", x))))
_unary("Asin", lambda x, y, g: _op("Mul", g, _op("Rsqrt", _op("Sub", 1.0, _op("Square", x)))))
_unary("Acos", lambda x, y, g: _op("Neg", _op("Mul", g, _op("Rsqrt",
                                                            _op("Sub", 1.0, _op("Square", x))))))
_unary("Atan", lambda x, y, g: _op("RealDiv", g, _op("AddV2", _op("Square", x), 1.0)))
_unary("Sinh", lambda x, y, g: _op("Mul", g, _op("Cosh", x)))
_unary("Cosh", lambda x, y, g: _op("Mul", g, _op("Sinh", x)))
_unary("Asinh", lambda x, y, g: _op("RealDiv", g, _op("Cosh", y)))
_unary("Acosh", lambda x, y, g: _op("RealDiv", g, _op("Sinh", y)))
_unary("Atanh", lambda x, y, g: _op("RealDiv", g, _op("Sub", 1.0, _op("Square", x))))
_unary("Erf", lambda x, y, g: _op("Mul", _op("Mul", g, 2.0 / math.sqrt(math.pi)),
                                  _op("Exp", _op("Neg", _op("Square", x)))))
# Activations: y is the output
_unary("Tanh", lambda x, y, g: _op("Mul", g, _op("Sub", 1.0, _op("Square", y))))
_unary("Sigmoid", lambda x, y, g: _op("Mul", g, _op("Mul", y, _op("Sub", 1.0, y))))
_unary("Softplus", lambda x, y, g: _op("Mul", g, _op("Sigmoid", x)))
_unary("Softsign", lambda x, y, g: _op("RealDiv", g,
                                       _op("Square", _op("AddV2", _op("Abs", x), 1.0))))
_unary("Relu6", lambda x, y, g: _select(_op("Greater", x, 0.0), _select(
    _op("Less", x, 6.0), g, _zeros_like(g)), _zeros_like(g)))
_unary("Elu", lambda x, y, g: _select(_op("Less", y, 0.0), _op("Mul", g, _op("AddV2", y, 1.0)),
                                      g))
_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
_unary("Selu", lambda x, y, g: _select(_op("Less", y, 0.0),
                                       _op("Mul", g, _op("AddV2", y, _SELU_ALPHA * _SELU_SCALE)),
                                       _op("Mul", g, _SELU_SCALE)))


@register("Relu")
def _relu_grad(op, g):
    return [_op("ReluGrad", g, op.outputs[0])]


@register("ReluGrad")
def _relu_grad_grad(op, g):
    # ReluGrad(gradients, features) = gradients where features > 0
    return [_op("ReluGrad", g, op.inputs[1]), _zeros_like(op.inputs[1])]


@register("LeakyRelu")
def _leaky_relu_grad(op, g):
    x = op.inputs[0]
    alpha = float(op.attr("alpha"))
    return [_select(_op("Greater", x, 0.0), g, _op("Mul", g, alpha))]


@register("Cast")
def _cast_grad(op, g):
    x = op.inputs[0]
    source = x.dtype if isinstance(x, Tensor) else dt.as_dtype(np.asarray(x).dtype)
    target = op.outputs[0].dtype
    if not all(t.is_floating or t.is_complex for t in (source, target)):
        return [None]
    return [_cast(g, source) if source != target else g]


@register("ClipByValue")
def _clip_grad(op, g):
    x, low, high = op.inputs
    zeros = _zeros_like(g)
    below, above = _op("Less", x, low), _op("Greater", x, high)
    inside = _op("LogicalNot", _op("LogicalOr", below, above))
    return [_unbroadcast(_select(inside, g, zeros), _shape(x)) if op.needed[0] else None,
            _unbroadcast(_select(below, g, zeros), _shape(low)) if op.needed[1] else None,
            _unbroadcast(_select(above, g, zeros), _shape(high)) if op.needed[2] else None]


@register("Select")
def _select_grad(op, g):
    condition, x, y = op.inputs
    condition = _condition_like(condition, g)
    zeros = _zeros_like(g)
    return [None, _select(condition, g, zeros), _select(condition, zeros, g)]


def _condition_like(condition, g):
    """Select's condition, a vector selecting rows of matrices, shaped to broadcast."""
    shape = _shape(condition)
    if len(shape) == 1 and len(g.shape) > 1:
        return _reshape(condition, [shape[0]] + [1] * (len(g.shape) - 1))
    return condition


@register("SelectV2")
def _select_v2_grad(op, g):
    condition, x, y = op.inputs
    zeros = _zeros_like(g)
    return [None,
            _unbroadcast(_select(condition, g, zeros), _shape(x)) if op.needed[1] else None,
            _unbroadcast(_select(condition, zeros, g), _shape(y)) if op.needed[2] else None]


# -- matrices and nn ----------------------------------------------------------------------
# The operands of the two gradient products of a matrix product, for each pair of
# (transpose_a, transpose_b): (left, right, transpose left, transpose right) for a's gradient,
# then for b's. ``g`` is the output's gradient.
_MATMUL_GRADS = {
    (False, False): (("g", "b", False, True), ("a", "g", True, False)),
    (False, True): (("g", "b", False, False), ("g", "a", True, False)),
    (True, False): (("b", "g", False, True), ("a", "g", False, False)),
    (True, True): (("b", "g", True, True), ("g", "a", True, True)),
}


def _matmul_grads(op, g, name: str, adjoints: Tuple[str, str]):
    a, b = op.inputs
    values = {"a": a, "b": b, "g": g}
    transposed = (bool(op.attr(adjoints[0])), bool(op.attr(adjoints[1])))
    grads = []
    for (left, right, t_left, t_right), needed in zip(_MATMUL_GRADS[transposed], op.needed):
        grads.append(execute(name, [values[left], values[right]],
                             {adjoints[0]: t_left, adjoints[1]: t_right})[0]
                     if needed else None)
    return grads


@register("MatMul")
def _matmul_grad(op, g):
    return _matmul_grads(op, g, "MatMul", ("transpose_a", "transpose_b"))


@register("BatchMatMulV2")
def _batch_matmul_grad(op, g):
    grads = _matmul_grads(op, g, "BatchMatMulV2", ("adj_x", "adj_y"))
    return [None if grad is None else _unbroadcast(grad, _shape(x))
            for grad, x in zip(grads, op.inputs)]


@register("BiasAdd")
def _bias_add_grad(op, g):
    fmt = op.attr("data_format")
    return [g if op.needed[0] else None,
            _op("BiasAddGrad", g, data_format=fmt) if op.needed[1] else None]


@register("BiasAddGrad")
def _bias_add_grad_grad(op, g):
    # The gradient of a sum over every axis but the channels: the channel values spread back.
    out_backprop = op.inputs[0]
    shape = _shape(out_backprop)
    channel = 1 if op.attr("data_format") == "NCHW" and len(shape) > 2 else len(shape) - 1
    keep = [1] * len(shape)
    keep[channel] = shape[channel]
    return [_op("BroadcastTo", _reshape(g, keep), _ints(shape))]


def _conv_attrs(op) -> Dict[str, Any]:
    return {name: op.attr(name) for name in ("strides", "padding", "explicit_paddings",
                                             "data_format", "dilations", "use_cudnn_on_gpu")}


@register("Conv2D")
def _conv2d_grad(op, g):
    x, w = op.inputs
    attrs = _conv_attrs(op)
    return [execute("Conv2DBackpropInput", [np.asarray(_shape(x), np.int32), w, g], attrs)[0]
            if op.needed[0] else None,
            execute("Conv2DBackpropFilter", [x, np.asarray(_shape(w), np.int32), g], attrs)[0]
            if op.needed[1] else None]


@register("Conv2DBackpropInput")
def _conv2d_backprop_input_grad(op, g):
    _, w, dy = op.inputs
    attrs = _conv_attrs(op)
    return [None,
            execute("Conv2DBackpropFilter", [g, np.asarray(_shape(w), np.int32), dy], attrs)[0]
            if op.needed[1] else None,
            execute("Conv2D", [g, w], attrs)[0] if op.needed[2] else None]


@register("Conv2DBackpropFilter")
def _conv2d_backprop_filter_grad(op, g):
    x, _, dy = op.inputs
    attrs = _conv_attrs(op)
    return [execute("Conv2DBackpropInput", [np.asarray(_shape(x), np.int32), g, dy], attrs)[0]
            if op.needed[0] else None,
            None,
            execute("Conv2D", [x, g], attrs)[0] if op.needed[2] else None]


@register("MaxPool")
def _max_pool_grad(op, g):
    attrs = {name: op.attr(name) for name in ("ksize", "strides", "padding",
                                              "explicit_paddings", "data_format")}
    return [execute("MaxPoolGrad", [op.inputs[0], op.outputs[0], g], attrs)[0]]


@register("Softmax")
def _softmax_grad(op, g):
    y = op.outputs[0]
    return [_op("Mul", _op("Sub", g, _sum(_op("Mul", g, y), [-1 % len(y.shape)], True)), y)]


@register("LogSoftmax")
def _log_softmax_grad(op, g):
    y = op.outputs[0]
    return [_op("Sub", g, _op("Mul", _sum(g, [len(y.shape) - 1], True), _op("Exp", y)))]


def _rows(v) -> Tensor:
    return _op("ExpandDims", v, np.int32(-1))


@register("SoftmaxCrossEntropyWithLogits")
def _softmax_xent_grad(op, g_loss, g_backprop):
    logits, labels = op.inputs
    backprop = op.outputs[1]
    grad = _op("Mul", _rows(g_loss), backprop) if g_loss is not None else None
    if op.needed[0] and g_backprop is not None:
        # the backprop output (softmax - labels) depends on the logits through the softmax
        softmax = _op("Softmax", logits)
        inner = _sum(_op("Mul", g_backprop, softmax), [1], True)
        extra = _op("Mul", _op("Sub", g_backprop, inner), softmax)
        grad = extra if grad is None else _op("AddV2", grad, extra)
    labels_grad = None
    if op.needed[1]:
        if g_loss is not None:
            labels_grad = _op("Mul", _rows(g_loss), _op("Neg", _op("LogSoftmax", logits)))
        if g_backprop is not None:
            labels_grad = (_op("Neg", g_backprop) if labels_grad is None
                           else _op("Sub", labels_grad, g_backprop))
    return [grad if op.needed[0] else None, labels_grad]


@register("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_softmax_xent_grad(op, g_loss, g_backprop):
    logits = op.inputs[0]
    grad = _op("Mul", _rows(g_loss), op.outputs[1]) if g_loss is not None else None
    if g_backprop is not None:
        softmax = _op("Softmax", logits)
        inner = _sum(_op("Mul", g_backprop, softmax), [1], True)
        extra = _op("Mul", _op("Sub", g_backprop, inner), softmax)
        grad = extra if grad is None else _op("AddV2", grad, extra)
    return [grad, None]


# -- reductions ---------------------------------------------------------------------------
def _reduced(op):
    x = op.inputs[0]
    shape = _shape(x)
    axes = _axes(op.inputs[1], len(shape))
    return x, shape, axes


def _spread(g, shape, axes) -> Tensor:
    """The gradient of a reduction over ``axes``, broadcast back to ``shape``."""
    return _op("BroadcastTo", _reshape(g, _keep_shape(shape, axes)), _ints(shape))


@register("Sum")
def _sum_grad(op, g):
    x, shape, axes = _reduced(op)
    return [_spread(g, shape, axes), None]


@register("Mean")
def _mean_grad(op, g):
    x, shape, axes = _reduced(op)
    count = int(np.prod([shape[a] for a in axes], dtype=np.int64)) if axes else 1
    return [_op("RealDiv", _spread(g, shape, axes), float(max(count, 1))), None]


@register("Max", "Min")
def _max_min_reduce_grad(op, g):
    x, shape, axes = _reduced(op)
    keep = _keep_shape(shape, axes)
    y = _reshape(op.outputs[0], keep)
    mask = _cast(_op("Equal", x, y), op.outputs[0].dtype)
    count = _sum(mask, axes, True)
    return [_op("Mul", _op("RealDiv", mask, count), _reshape(g, keep)), None]


@register("Prod")
def _prod_grad(op, g):
    # The product of the other elements of each reduced group, without dividing (so zeros
    # are handled): the group's R values repeated R times, the i-th copy with its i-th value
    # replaced by one, multiplied out.
    x, shape, axes = _reduced(op)
    keep = _keep_shape(shape, axes)
    kept = [i for i in range(len(shape)) if i not in axes]
    perm = axes + kept
    inverse = np.argsort(perm).astype(np.int32)
    r = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    k = int(np.prod([shape[i] for i in kept], dtype=np.int64))
    flat = _reshape(_op("Transpose", x, np.asarray(perm, np.int32)), [1, r, k])
    copies = _op("BroadcastTo", flat, _ints([r, r, k]))
    diagonal = np.eye(r, dtype=bool).reshape(r, r, 1)
    others = _op("Prod", _select(diagonal, _op("OnesLike", copies), copies),
                 np.int32(1), keep_dims=False)
    others = _reshape(others, [shape[i] for i in perm])
    others = _op("Transpose", others, inverse)
    return [_op("Mul", others, _reshape(g, keep)), None]


@register("Cumsum")
def _cumsum_grad(op, g):
    return [_op("Cumsum", g, op.inputs[1], exclusive=bool(op.attr("exclusive")),
                reverse=not op.attr("reverse")), None]


@register("Cumprod")
def _cumprod_grad(op, g):
    x, axis = op.inputs
    exclusive, reverse = bool(op.attr("exclusive")), bool(op.attr("reverse"))
    out = _op("Cumprod", x, axis, exclusive=exclusive, reverse=reverse)
    summed = _op("Cumsum", _op("Mul", out, g), axis, exclusive=exclusive, reverse=not reverse)
    return [_op("DivNoNan", summed, x), None]


# -- shapes and arrays --------------------------------------------------------------------
def _back_to_input_shape(op, g):
    grads = [_reshape(g, _shape(op.inputs[0]))]
    return grads + [None] * (len(op.inputs) - 1)


for _name in ("Reshape", "ExpandDims", "Squeeze"):
    register(_name)(_back_to_input_shape)


@register("ReadVariableOp")
def _read_variable_grad(op, g):
    return [g]


@register("Transpose")
def _transpose_grad(op, g):
    perm = _host(op.inputs[1]).reshape(-1)
    return [_op("Transpose", g, np.argsort(perm).astype(np.int32)), None]


@register("BroadcastTo")
def _broadcast_to_grad(op, g):
    return [_unbroadcast(g, _shape(op.inputs[0])), None]


@register("Tile")
def _tile_grad(op, g):
    shape = _shape(op.inputs[0])
    multiples = [int(m) for m in _host(op.inputs[1]).reshape(-1)]
    split = [n for pair in zip(multiples, shape) for n in pair]
    summed = _sum(_reshape(g, split), list(range(0, 2 * len(shape), 2)))
    return [_reshape(summed, shape), None]


@register("Fill")
def _fill_grad(op, g):
    return [None, _sum(g, list(range(len(g.shape))))]


@register("ReverseV2")
def _reverse_grad(op, g):
    return [_op("ReverseV2", g, op.inputs[1]), None]


@register("ConcatV2")
def _concat_grad(op, g):
    values = op.inputs[:-1]
    rank = len(g.shape)
    axis = int(_host(op.inputs[-1])) % rank
    sizes = np.asarray([_shape(v)[axis] for v in values], np.int64)
    parts = execute("SplitV", [g, sizes, np.int32(axis)], {"num_split": len(values)})
    return [p if needed else None for p, needed in zip(parts, op.needed)] + [None]


@register("Pack")
def _pack_grad(op, g):
    axis = int(op.attr("axis")) % len(g.shape)
    parts = execute("Split", [np.int32(axis), g], {"num_split": len(op.inputs)})
    shape = _shape(op.inputs[0])
    return [_reshape(p, shape) if needed else None for p, needed in zip(parts, op.needed)]


def _filled(op, grads):
    """The gradients of a multi-output op, zeros for the outputs nothing used."""
    return [_zeros_like(o) if g is None else g for g, o in zip(grads, op.outputs)]


@register("Unpack")
def _unpack_grad(op, *grads):
    grads = _filled(op, grads)
    return [_op("Pack", list(grads), axis=int(op.attr("axis")))]


@register("Split")
def _split_grad(op, *grads):
    grads = _filled(op, grads)
    return [None, _op("ConcatV2", list(grads), np.int32(_host(op.inputs[0])))
            if len(grads) > 1 else grads[0]]


@register("SplitV")
def _split_v_grad(op, *grads):
    grads = _filled(op, grads)
    axis = np.int32(_host(op.inputs[2]))
    return [_op("ConcatV2", list(grads), axis) if len(grads) > 1 else grads[0], None, None]


@register("Slice")
def _slice_grad(op, g):
    x = op.inputs[0]
    shape = _shape(x)
    begin = _host(op.inputs[1]).reshape(-1).astype(np.int64)
    end = begin + np.asarray(g.shape, np.int64)
    paddings = np.stack([begin, np.asarray(shape, np.int64) - end], axis=1)
    return [_op("Pad", g, paddings), None, None]


@register("Pad", "PadV2")
def _pad_grad(op, g):
    x = op.inputs[0]
    begin = _host(op.inputs[1]).reshape(-1, 2)[:, 0].astype(np.int64)
    piece = _op("Slice", g, begin, np.asarray(_shape(x), np.int64))
    grads = [piece, None]
    if op.name == "PadV2":
        grads.append(None)
    return grads


@register("StridedSlice")
def _strided_slice_grad(op, g):
    # Which element of the input each output element is, from the same slice of the
    # positions (computed on the host); then every input element takes its output
    # element's gradient, or zero (a gather from the gradient with one zero appended).
    x = op.inputs[0]
    shape = _shape(x)
    count = int(np.prod(shape, dtype=np.int64))
    attrs = {name: op.attr(name) for name in ("begin_mask", "end_mask", "ellipsis_mask",
                                              "new_axis_mask", "shrink_axis_mask")}
    positions = tensor(np.arange(count, dtype=np.int64).reshape(shape), device=CPU_DEVICE)
    token = device_scope.set(CPU_DEVICE)
    try:
        picked = execute("StridedSlice", [positions, _host(op.inputs[1]), _host(op.inputs[2]),
                                          _host(op.inputs[3])], attrs)[0].numpy().reshape(-1)
    finally:
        device_scope.reset(token)
    source = np.full(count, picked.size, np.int64)
    source[picked] = np.arange(picked.size, dtype=np.int64)
    zero = tensor(np.zeros(1, g.dtype.numpy_dtype))  # on the scope's device
    padded = _op("ConcatV2", [_reshape(g, [-1]), zero], np.int32(0))
    gathered = _op("GatherV2", padded, source, np.int32(0))
    return [_reshape(gathered, shape), None, None, None]


def _scatter_rows(g2, indices, rows: int) -> Tensor:
    """The rows of ``g2`` ([n, k]) added into a [rows, k] zero matrix at ``indices`` ([n]),
    repeated indices adding up: the product with a one-hot matrix made by comparing the
    indices with every row number (Equal, Cast, MatMul), so it runs on the device."""
    dtype = indices.dtype.numpy_dtype if isinstance(indices, Tensor) else \
        np.asarray(indices).dtype
    onehot = _op("Equal", _op("ExpandDims", indices, np.int32(-1)),
                 np.arange(rows, dtype=dtype))
    return _op("MatMul", _cast(onehot, g2.dtype), g2, transpose_a=True)


@register("GatherV2")
def _gather_grad(op, g):
    params, indices, axis = op.inputs
    if int(op.attr("batch_dims")):
        raise UnimplementedError("the gradient of GatherV2 with batch_dims > 0 is not "
                                 "supported; gather without batch_dims", call="GatherV2")
    shape = _shape(params)
    axis = int(_host(axis)) % len(shape)
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    n = int(np.prod(_shape(indices), dtype=np.int64))
    g3 = _op("Transpose", _reshape(g, [outer, n, inner]), np.asarray([1, 0, 2], np.int32))
    rows = _scatter_rows(_reshape(g3, [n, outer * inner]), _reshape(indices, [n]),
                         shape[axis])
    back = _op("Transpose", _reshape(rows, [shape[axis], outer, inner]),
               np.asarray([1, 0, 2], np.int32))
    return [_reshape(back, shape), None, None]


@register("GatherNd")
def _gather_nd_grad(op, g):
    params, indices = op.inputs
    shape = _shape(params)
    ishape = _shape(indices)
    k = ishape[-1]
    n = int(np.prod(ishape[:-1], dtype=np.int64))
    rows = int(np.prod(shape[:k], dtype=np.int64))
    inner = int(np.prod(shape[k:], dtype=np.int64))
    strides = np.asarray([int(np.prod(shape[i + 1:k], dtype=np.int64)) for i in range(k)],
                         _shape_dtype(indices))
    flat_indices = _sum(_op("Mul", _reshape(indices, [n, k]), strides), [1])
    scattered = _scatter_rows(_reshape(g, [n, inner]), flat_indices, rows)
    return [_reshape(scattered, shape), None]


def _shape_dtype(indices):
    dtype = indices.dtype if isinstance(indices, Tensor) else np.asarray(indices).dtype
    return getattr(dtype, "numpy_dtype", dtype)
