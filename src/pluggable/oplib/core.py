"""The op library's definitions: TensorFlow's op names, inputs, outputs and attributes with
their defaults, shape and dtype inference, and the NumPy reference kernel that runs each op
on the CPU device.

An op is described once, by an `OpDef`. `infer` checks the inputs and attributes and gives
the output shapes and dtypes (it raises `InvalidArgumentError` naming the op and the argument
on bad input, wherever the op then runs); `cpu` computes the outputs with NumPy. Inputs whose
values shape the output (Reshape's shape, reduction axes, ...) are *host* arguments: their
values are read on the host, as TensorFlow's kernels declare them in host memory.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..base import dtypes as dt
from ..base.dtypes import DType
from ..base.errors import InvalidArgumentError

REQUIRED = object()

# Type sets, by TensorFlow's names for them.
INTS = (dt.int8, dt.int16, dt.int32, dt.int64, dt.uint8, dt.uint16, dt.uint32, dt.uint64)
FLOATS = (dt.float16, dt.bfloat16, dt.float32, dt.float64)
COMPLEX = (dt.complex64, dt.complex128)
REAL = INTS + FLOATS
NUMBER = REAL + COMPLEX
ALL = NUMBER + (dt.bool_,)
INDEX = (dt.int32, dt.int64)


@dataclasses.dataclass(frozen=True)
class Arg:
    """An input or output: its dtype is the attribute ``type_attr`` or the fixed ``dtype``.
    ``host`` inputs are read on the host (shapes, axes, permutations)."""

    name: str
    type_attr: Optional[str] = None
    dtype: Optional[DType] = None
    host: bool = False
    # A list of tensors ("N * T" in TensorFlow's OpDefs): its length is the int attribute
    # named here. Kernels see the list flattened, one input or output per element.
    number_attr: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Attr:
    name: str
    # "type", "int", "float", "bool", "string", "shape", "tensor", "func", or "list(..)" of
    # one of those
    kind: str
    default: Any = REQUIRED
    allowed: Optional[Tuple[Any, ...]] = None
    minimum: Optional[int] = None  # for "int" attributes (list lengths, counts)


@dataclasses.dataclass
class OpDef:
    name: str
    inputs: Tuple[Arg, ...]
    outputs: Tuple[Arg, ...]
    attrs: Tuple[Attr, ...]
    # infer(meta, attrs, host_values) -> [shape of each output]; dtypes come from the attrs
    infer: Callable[..., List[Tuple[int, ...]]]
    # cpu(arrays, attrs) -> [array of each output]
    cpu: Callable[..., List[np.ndarray]]
    doc: str = ""
    # host_kernel(device, tensors, attrs) -> [Tensor]: the host's own kernel for any device,
    # used where the device has no plugin kernel (TensorFlow's DEVICE_DEFAULT kernels: the
    # resource-variable ops); `host_only` ops never look for a plugin kernel.
    host_kernel: Optional[Callable[..., List[Any]]] = None
    host_only: bool = False
    # What a call would need that pluggable lacks (an op of a plugin with a qint8 input, or
    # inputs typed by a list(type)); a call raises UnimplementedError with it. "" for none.
    missing: str = ""
    # TensorFlow's OpDef.is_stateful: the op has state or effects beyond its outputs (random
    # draws, variables), so a graph must not merge or drop its calls (TF_OpIsStateful).
    is_stateful: bool = False

    def attr(self, name: str) -> Attr:
        for a in self.attrs:
            if a.name == name:
                return a
        raise KeyError(name)

    def flat_inputs(self, attrs: Dict[str, Any]) -> Tuple[Arg, ...]:
        """One `Arg` per tensor the kernel sees: list inputs repeated their length times."""
        return _flatten(self.inputs, attrs)

    def flat_outputs(self, attrs: Dict[str, Any]) -> Tuple[Arg, ...]:
        return _flatten(self.outputs, attrs)


def _flatten(args: Tuple[Arg, ...], attrs: Dict[str, Any]) -> Tuple[Arg, ...]:
    if not any(a.number_attr for a in args):
        return args
    flat: List[Arg] = []
    for a in args:
        flat += [a] * (attrs[a.number_attr] if a.number_attr else 1)
    return tuple(flat)


class TensorMeta:
    """What inference sees of an input: shape and dtype."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: Tuple[int, ...], dtype: DType):
        self.shape = shape
        self.dtype = dtype


OPS: Dict[str, OpDef] = {}


def bad(op: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"{op}: {message}", call=op)


def _define(name, inputs, outputs, attrs, infer, cpu, doc=""):
    OPS[name] = OpDef(name, tuple(inputs), tuple(outputs), tuple(attrs), infer, cpu, doc)


# -- shared shape rules -----------------------------------------------------------------------
def broadcast(op: str, *shapes: Tuple[int, ...]) -> Tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise bad(op, f"shapes {' and '.join(map(str, shapes))} are not broadcastable "
                      f"(NumPy's rules: trailing dimensions equal or 1)") from None


def _axes(op: str, values: np.ndarray, rank: int, what: str) -> List[int]:
    flat = [int(v) for v in np.asarray(values).reshape(-1)]
    out = []
    for a in flat:
        if not -rank <= a < max(rank, 1) or (rank == 0 and a not in (0, -1)):
            raise bad(op, f"{what} {a} is out of range for a tensor of rank {rank} "
                          f"(valid: {-rank}..{rank - 1})")
        a = a % rank if rank else 0
        if a in out:
            raise bad(op, f"{what} {a} appears twice")
        out.append(a)
    return out


def _shape_values(op: str, values: np.ndarray, what: str) -> List[int]:
    array = np.asarray(values)
    if array.ndim > 1:
        raise bad(op, f"{what} must be a scalar or a vector, got shape {array.shape}")
    return [int(v) for v in array.reshape(-1)]


# -- element-wise ---------------------------------------------------------------------------
def _truncating_divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if np.any(y == 0):
        raise InvalidArgumentError("RealDiv: Integer division by zero", call="RealDiv")
    with np.errstate(all="ignore"):
        q = np.floor_divide(x, y)
        r = np.fmod(x, y)
    fix = (r != 0) & ((x < 0) != (y < 0))
    return (q + fix.astype(q.dtype)).astype(np.result_type(x, y))


def _real_div(x, y):
    if np.issubdtype(np.asarray(x).dtype, np.integer):
        return _truncating_divide(*np.broadcast_arrays(x, y))
    with np.errstate(all="ignore"):
        return np.true_divide(x, y).astype(np.result_type(x, y))


def _binary(name, fn, types, out=None):
    def infer(meta, attrs, host):
        return [broadcast(name, meta[0].shape, meta[1].shape)]

    def cpu(arrays, attrs):
        x, y = arrays
        with np.errstate(all="ignore"):
            result = fn(x, y)
        return [np.asarray(result, dtype=(out.numpy_dtype if out else x.dtype))]

    out_arg = Arg("z", dtype=out) if out else Arg("z", "T")
    _define(name, [Arg("x", "T"), Arg("y", "T")], [out_arg],
            [Attr("T", "type", allowed=types)], infer, cpu)


_binary("AddV2", np.add, NUMBER)
_binary("Sub", np.subtract, NUMBER)
_binary("Mul", np.multiply, NUMBER)
_binary("RealDiv", _real_div, NUMBER)
_binary("Maximum", np.maximum, REAL)
_binary("Minimum", np.minimum, REAL)
_binary("Less", np.less, REAL, out=dt.bool_)
_binary("Greater", np.greater, REAL, out=dt.bool_)

# Equal has an attribute; otherwise as the comparisons.
_binary("Equal", np.equal, ALL, out=dt.bool_)
OPS["Equal"].attrs += (Attr("incompatible_shape_error", "bool", True),)


def _sigmoid(x):
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        positive = 1 / (1 + np.exp(-x))
        negative = np.exp(x) / (1 + np.exp(x))
    return np.where(x >= 0, positive, negative)


def _unary(name, fn, types, in_name="x", out_name="y"):
    def infer(meta, attrs, host):
        return [meta[0].shape]

    def cpu(arrays, attrs):
        with np.errstate(all="ignore"):
            return [np.asarray(fn(arrays[0]), dtype=arrays[0].dtype)]

    _define(name, [Arg(in_name, "T")], [Arg(out_name, "T")], [Attr("T", "type", allowed=types)],
            infer, cpu)


_SIGNED = tuple(t for t in NUMBER if not t.name.startswith("uint"))
_unary("Neg", np.negative, _SIGNED)
_unary("Abs", np.abs, tuple(t for t in REAL if not t.name.startswith("uint")))
_unary("Square", lambda x: x * x, NUMBER)
_unary("Sqrt", np.sqrt, FLOATS + COMPLEX)
_unary("Rsqrt", lambda x: 1 / np.sqrt(x), FLOATS + COMPLEX)
_unary("Exp", np.exp, FLOATS + COMPLEX)
_unary("Log", np.log, FLOATS + COMPLEX)
_unary("Tanh", np.tanh, FLOATS + COMPLEX)
_unary("Sigmoid", _sigmoid, FLOATS)
_unary("Relu", lambda x: np.maximum(x, np.zeros((), x.dtype)), REAL, "features", "activations")
_unary("Relu6", lambda x: np.minimum(np.maximum(x, np.zeros((), x.dtype)), np.asarray(6, x.dtype)),
       REAL,
       "features", "activations")
_unary("Identity", lambda x: x.copy(), ALL, "input", "output")
_unary("ZerosLike", np.zeros_like, ALL)
_unary("OnesLike", np.ones_like, ALL)


def _cast_array(x: np.ndarray, to: DType) -> np.ndarray:
    """TensorFlow's Cast as the XPU kernels do it: float -> integer truncates toward zero
    after clamping to the target's range, with NaN -> 0; anything -> bool is `!= 0`."""
    target = to.numpy_dtype
    if to.is_bool:
        return x != 0
    if np.iscomplexobj(x) and not to.is_complex:
        x = x.real  # TensorFlow's Cast keeps the real part (NumPy would warn about it)
    if to.is_integer and (np.issubdtype(x.dtype, np.floating) or x.dtype == dt.bfloat16.numpy_dtype):
        info = np.iinfo(target)
        wide = np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=info.max, neginf=info.min)
        wide = np.trunc(wide)
        # float64 cannot hold every int64: clamp in float, then fix the ends exactly.
        with np.errstate(invalid="ignore"):
            result = np.asarray(np.clip(wide, info.min, info.max)).astype(target)
        result[wide >= float(info.max)] = info.max
        result[wide <= float(info.min)] = info.min
        return result
    with np.errstate(all="ignore"):
        return x.astype(target)


def _cast_infer(meta, attrs, host):
    return [meta[0].shape]


_define("Cast", [Arg("x", "SrcT")], [Arg("y", "DstT")],
        [Attr("SrcT", "type", allowed=ALL), Attr("DstT", "type", allowed=ALL),
         Attr("Truncate", "bool", False)],
        _cast_infer, lambda arrays, attrs: [_cast_array(arrays[0], attrs["DstT"])])


def _select_infer(meta, attrs, host):
    cond, t, e = (m.shape for m in meta)
    return [broadcast("Select", select_condition_shape(cond, t), t, e)]


def select_condition_shape(cond: Tuple[int, ...], t: Tuple[int, ...]) -> Tuple[int, ...]:
    """TensorFlow's Select takes a vector condition for the first dimension of `t`; that is
    NumPy broadcasting once the vector becomes (n, 1, ..., 1)."""
    if len(cond) == 1 and len(t) > 1 and cond[0] == t[0]:
        return cond + (1,) * (len(t) - 1)
    return cond


def _select_cpu(arrays, attrs):
    cond, t, e = arrays
    cond = cond.reshape(select_condition_shape(cond.shape, t.shape))
    return [np.where(cond, t, e).astype(t.dtype)]


_define("Select", [Arg("condition", dtype=dt.bool_), Arg("t", "T"), Arg("e", "T")],
        [Arg("output", "T")], [Attr("T", "type", allowed=ALL)], _select_infer, _select_cpu)


# -- linear algebra ---------------------------------------------------------------------------
def _matmul_infer(meta, attrs, host):
    a, b = meta[0].shape, meta[1].shape
    if len(a) != 2 or len(b) != 2:
        raise bad("MatMul", f"a and b must be matrices (rank 2), got shapes {a} and {b}")
    m, k = (a[1], a[0]) if attrs["transpose_a"] else a
    k2, n = (b[1], b[0]) if attrs["transpose_b"] else b
    if k != k2:
        raise bad("MatMul", f"inner dimensions differ: a is {a}{' transposed' if attrs['transpose_a'] else ''}"
                            f", b is {b}{' transposed' if attrs['transpose_b'] else ''} ({k} != {k2})")
    return [(m, n)]


def _matmul_cpu(arrays, attrs):
    a, b = arrays
    a = a.T if attrs["transpose_a"] else a
    b = b.T if attrs["transpose_b"] else b
    with np.errstate(all="ignore"):
        return [np.matmul(a, b).astype(arrays[0].dtype)]


_MATMUL_TYPES = (dt.float16, dt.bfloat16, dt.float32, dt.float64, dt.int32, dt.int64) + COMPLEX
_define("MatMul", [Arg("a", "T"), Arg("b", "T")], [Arg("product", "T")],
        [Attr("transpose_a", "bool", False), Attr("transpose_b", "bool", False),
         Attr("T", "type", allowed=_MATMUL_TYPES), Attr("grad_a", "bool", False),
         Attr("grad_b", "bool", False)], _matmul_infer, _matmul_cpu)


def _bmm_infer(meta, attrs, host):
    x, y = meta[0].shape, meta[1].shape
    if len(x) < 2 or len(y) < 2:
        raise bad("BatchMatMulV2", f"x and y must have rank 2 or more, got {x} and {y}")
    m, k = (x[-1], x[-2]) if attrs["adj_x"] else (x[-2], x[-1])
    k2, n = (y[-1], y[-2]) if attrs["adj_y"] else (y[-2], y[-1])
    if k != k2:
        raise bad("BatchMatMulV2", f"inner dimensions differ: x is {x}, y is {y} "
                                   f"(adj_x={attrs['adj_x']}, adj_y={attrs['adj_y']}; {k} != {k2})")
    return [broadcast("BatchMatMulV2", x[:-2], y[:-2]) + (m, n)]


def _bmm_cpu(arrays, attrs):
    x, y = arrays
    if attrs["adj_x"]:
        x = np.conj(np.swapaxes(x, -1, -2))
    if attrs["adj_y"]:
        y = np.conj(np.swapaxes(y, -1, -2))
    with np.errstate(all="ignore"):
        return [np.matmul(x, y).astype(arrays[0].dtype)]


_define("BatchMatMulV2", [Arg("x", "T"), Arg("y", "T")], [Arg("output", "T")],
        [Attr("adj_x", "bool", False), Attr("adj_y", "bool", False),
         Attr("T", "type", allowed=_MATMUL_TYPES), Attr("grad_x", "bool", False),
         Attr("grad_y", "bool", False)], _bmm_infer, _bmm_cpu)


def _channel_axis(op: str, rank: int, data_format: str) -> int:
    if rank < 2:
        raise bad(op, f"value must have rank 2 or more, got rank {rank}")
    if data_format == "NCHW":
        return 1
    return rank - 1


def _bias_add_infer(meta, attrs, host):
    value, bias = meta[0].shape, meta[1].shape
    axis = _channel_axis("BiasAdd", len(value), attrs["data_format"])
    if len(bias) != 1 or bias[0] != value[axis]:
        raise bad("BiasAdd", f"bias must be a vector of {value[axis]} elements (the channel "
                             f"dimension of value {value}, {attrs['data_format']}), got {bias}")
    return [value]


def _bias_add_cpu(arrays, attrs):
    value, bias = arrays
    axis = _channel_axis("BiasAdd", value.ndim, attrs["data_format"])
    shape = [1] * value.ndim
    shape[axis] = bias.shape[0]
    with np.errstate(all="ignore"):
        return [(value + bias.reshape(shape)).astype(value.dtype)]


_define("BiasAdd", [Arg("value", "T"), Arg("bias", "T")], [Arg("output", "T")],
        [Attr("T", "type", allowed=NUMBER),
         Attr("data_format", "string", "NHWC", allowed=("NHWC", "NCHW"))],
        _bias_add_infer, _bias_add_cpu)


# -- reductions -----------------------------------------------------------------------------
def _reduce_infer_for(op):
    def infer(meta, attrs, host):
        shape = meta[0].shape
        axes = _axes(op, host[1], len(shape), "reduction axis")
        if attrs["keep_dims"]:
            return [tuple(1 if i in axes else n for i, n in enumerate(shape))]
        return [tuple(n for i, n in enumerate(shape) if i not in axes)]
    return infer


def _reduce_cpu_for(op):
    def cpu(arrays, attrs):
        x = arrays[0]
        axes = tuple(_axes(op, arrays[1], x.ndim, "reduction axis"))
        if x.ndim == 0:  # axis 0 (or -1) of a scalar is accepted, as TensorFlow does
            axes = ()
        keep = attrs["keep_dims"]
        dtype = x.dtype
        with np.errstate(all="ignore"):
            if op == "Sum":
                result = np.sum(x, axis=axes, keepdims=keep, dtype=dtype)
            elif op == "Prod":
                result = np.prod(x, axis=axes, keepdims=keep, dtype=dtype)
            elif op in ("Max", "Min"):
                if np.issubdtype(dtype, np.integer):
                    info = np.iinfo(dtype)
                    initial = info.min if op == "Max" else info.max
                else:
                    initial = -np.inf if op == "Max" else np.inf
                fn = np.max if op == "Max" else np.min
                result = fn(x, axis=axes, keepdims=keep, initial=initial)
            else:  # Mean
                count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
                total = np.sum(x, axis=axes, keepdims=keep, dtype=dtype)
                if np.issubdtype(dtype, np.integer):
                    result = (_truncating_divide(total, np.asarray(count, dtype))
                              if count else np.zeros_like(total))
                else:
                    result = total / dtype.type(count) if count else total * np.nan
        return [np.asarray(result, dtype=dtype)]
    return cpu


for _op in ("Sum", "Mean", "Max", "Min", "Prod"):
    _define(_op, [Arg("input", "T"), Arg("reduction_indices", "Tidx", host=True)],
            [Arg("output", "T")],
            [Attr("keep_dims", "bool", False),
             Attr("T", "type", allowed=REAL + (COMPLEX if _op in ("Sum", "Mean", "Prod") else ())),
             Attr("Tidx", "type", dt.int32, allowed=INDEX)],
            _reduce_infer_for(_op), _reduce_cpu_for(_op))


def _argmax_infer(meta, attrs, host):
    shape = meta[0].shape
    if not shape:
        raise bad("ArgMax", "input must have rank 1 or more")
    if np.asarray(host[1]).size != 1:
        raise bad("ArgMax", f"dimension must be a scalar, got {np.asarray(host[1]).shape}")
    (axis,) = _axes("ArgMax", host[1], len(shape), "dimension")
    if shape[axis] == 0:
        raise bad("ArgMax", f"cannot take the argmax over an empty dimension ({shape})")
    return [tuple(n for i, n in enumerate(shape) if i != axis)]


def _argmax_cpu(arrays, attrs):
    x = arrays[0]
    (axis,) = _axes("ArgMax", arrays[1], x.ndim, "dimension")
    return [np.argmax(x, axis=axis).astype(attrs["output_type"].numpy_dtype)]


_define("ArgMax", [Arg("input", "T"), Arg("dimension", "Tidx", host=True)],
        [Arg("output", "output_type")],
        [Attr("T", "type", allowed=REAL), Attr("Tidx", "type", dt.int32, allowed=INDEX),
         Attr("output_type", "type", dt.int64, allowed=INDEX)], _argmax_infer, _argmax_cpu)


def _softmax_infer_for(op):
    def infer(meta, attrs, host):
        if not meta[0].shape:
            raise bad(op, "logits must have rank 1 or more")
        return [meta[0].shape]
    return infer


def _softmax_cpu(arrays, attrs):
    x = arrays[0]
    with np.errstate(all="ignore"):
        shifted = x - np.max(x, axis=-1, keepdims=True) if x.size else x
        e = np.exp(shifted)
        return [(e / np.sum(e, axis=-1, keepdims=True)).astype(x.dtype)]


def _log_softmax_cpu(arrays, attrs):
    x = arrays[0]
    with np.errstate(all="ignore"):
        shifted = x - np.max(x, axis=-1, keepdims=True) if x.size else x
        return [(shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))).astype(x.dtype)]


_define("Softmax", [Arg("logits", "T")], [Arg("softmax", "T")],
        [Attr("T", "type", allowed=FLOATS)], _softmax_infer_for("Softmax"), _softmax_cpu)
_define("LogSoftmax", [Arg("logits", "T")], [Arg("logsoftmax", "T")],
        [Attr("T", "type", allowed=FLOATS)], _softmax_infer_for("LogSoftmax"), _log_softmax_cpu)


# -- convolution ----------------------------------------------------------------------------
def conv2d_geometry(op: str, input_shape, filter_shape, attrs):
    """Output shape and paddings of Conv2D (NHWC input, HWIO filter)."""
    if attrs["data_format"] != "NHWC":
        raise bad(op, f"data_format {attrs['data_format']!r} is not supported; use 'NHWC'")
    if len(input_shape) != 4:
        raise bad(op, f"input must have rank 4 (NHWC), got shape {tuple(input_shape)}")
    if len(filter_shape) != 4:
        raise bad(op, f"filter must have rank 4 (HWIO), got shape {tuple(filter_shape)}")
    n, h, w, c = input_shape
    kh, kw, ci, co = filter_shape
    if ci == 0 or c % ci:
        raise bad(op, f"input depth {c} must be a multiple of the filter's input depth {ci}")
    if ci != c:
        raise bad(op, f"grouped convolutions are not supported: input depth {c}, filter "
                      f"input depth {ci}")
    strides, dilations = list(attrs["strides"]), list(attrs["dilations"])
    if len(strides) != 4 or strides[0] != 1 or strides[3] != 1 or min(strides) < 1:
        raise bad(op, f"strides must be [1, sh, sw, 1] with sh, sw >= 1, got {strides}")
    if len(dilations) != 4 or dilations[0] != 1 or dilations[3] != 1 or min(dilations) < 1:
        raise bad(op, f"dilations must be [1, dh, dw, 1] with dh, dw >= 1, got {dilations}")
    padding = attrs["padding"]
    pads = []
    for size, k, s, d, axis in ((h, kh, strides[1], dilations[1], 1),
                                (w, kw, strides[2], dilations[2], 2)):
        span = (k - 1) * d + 1
        if padding == "VALID":
            before = after = 0
        elif padding == "SAME":
            total = max((math.ceil(size / s) - 1) * s + span - size, 0)
            before, after = total // 2, total - total // 2
        else:  # EXPLICIT
            explicit = list(attrs["explicit_paddings"])
            if len(explicit) != 8 or min(explicit) < 0 or any(explicit[i] for i in (0, 1, 6, 7)):
                raise bad(op, "explicit_paddings must be 8 non-negative numbers, zero for the "
                              f"batch and depth dimensions, got {explicit}")
            before, after = explicit[2 * axis], explicit[2 * axis + 1]
        padded = size + before + after
        if padded < span:
            raise bad(op, f"the filter ({kh}x{kw}, dilations {dilations}) is larger than the "
                          f"padded input ({h}x{w}, padding {padding})")
        pads.append((before, after, (padded - span) // s + 1))
    return (n, pads[0][2], pads[1][2], co), pads


def _conv_infer(meta, attrs, host):
    if attrs["padding"] == "EXPLICIT" and not attrs["explicit_paddings"]:
        raise bad("Conv2D", "padding 'EXPLICIT' needs explicit_paddings")
    shape, _ = conv2d_geometry("Conv2D", meta[0].shape, meta[1].shape, attrs)
    return [shape]


def _conv_cpu(arrays, attrs):
    x, f = arrays
    (n, oh, ow, co), pads = conv2d_geometry("Conv2D", x.shape, f.shape, attrs)
    kh, kw, ci, _ = f.shape
    sh, sw = attrs["strides"][1], attrs["strides"][2]
    dh, dw = attrs["dilations"][1], attrs["dilations"][2]
    padded = np.pad(x, ((0, 0), pads[0][:2], pads[1][:2], (0, 0)))
    out = np.zeros((n, oh, ow, co), dtype=np.result_type(x.dtype, np.float32)
                   if x.dtype != np.float64 else np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = padded[:, i * dh: i * dh + (oh - 1) * sh + 1: sh,
                           j * dw: j * dw + (ow - 1) * sw + 1: sw, :]
            out += np.tensordot(patch, f[i, j], axes=([3], [0]))
    return [out.astype(x.dtype)]


_define("Conv2D", [Arg("input", "T"), Arg("filter", "T")], [Arg("output", "T")],
        [Attr("T", "type", allowed=(dt.float16, dt.bfloat16, dt.float32, dt.float64)),
         Attr("strides", "list(int)"), Attr("use_cudnn_on_gpu", "bool", True),
         Attr("padding", "string", allowed=("SAME", "VALID", "EXPLICIT")),
         Attr("explicit_paddings", "list(int)", ()),
         Attr("data_format", "string", "NHWC", allowed=("NHWC", "NCHW")),
         Attr("dilations", "list(int)", (1, 1, 1, 1))], _conv_infer, _conv_cpu)


# -- shapes ---------------------------------------------------------------------------------
def reshape_target(op: str, shape: Tuple[int, ...], values) -> Tuple[int, ...]:
    target = _shape_values(op, values, "shape")
    count = int(np.prod(shape, dtype=np.int64))
    unknown = [i for i, n in enumerate(target) if n == -1]
    if len(unknown) > 1 or any(n < -1 for n in target):
        raise bad(op, f"shape {target} may hold one -1 and otherwise sizes >= 0")
    known = int(np.prod([n for n in target if n != -1], dtype=np.int64))
    if unknown:
        if known == 0 or count % known:
            raise bad(op, f"cannot reshape a tensor of {count} elements to {target}")
        target[unknown[0]] = count // known
    elif known != count:
        raise bad(op, f"cannot reshape a tensor of {count} elements (shape {shape}) to "
                      f"{target} ({known} elements)")
    return tuple(target)


_define("Reshape", [Arg("tensor", "T"), Arg("shape", "Tshape", host=True)],
        [Arg("output", "T")],
        [Attr("T", "type", allowed=ALL), Attr("Tshape", "type", dt.int32, allowed=INDEX)],
        lambda meta, attrs, host: [reshape_target("Reshape", meta[0].shape, host[1])],
        lambda arrays, attrs: [arrays[0].reshape(reshape_target("Reshape", arrays[0].shape,
                                                                arrays[1])).copy()])


def transpose_perm(op: str, rank: int, values) -> List[int]:
    perm = _shape_values(op, values, "perm")
    if sorted(perm) != list(range(rank)):
        raise bad(op, f"perm {perm} is not a permutation of the {rank} dimensions")
    return perm


_define("Transpose", [Arg("x", "T"), Arg("perm", "Tperm", host=True)], [Arg("y", "T")],
        [Attr("T", "type", allowed=ALL), Attr("Tperm", "type", dt.int32, allowed=INDEX)],
        lambda meta, attrs, host: [tuple(meta[0].shape[p] for p in
                                         transpose_perm("Transpose", len(meta[0].shape), host[1]))],
        lambda arrays, attrs: [np.ascontiguousarray(np.transpose(
            arrays[0], transpose_perm("Transpose", arrays[0].ndim, arrays[1])))])


def fill_dims(op: str, values) -> Tuple[int, ...]:
    dims = _shape_values(op, values, "dims")
    if any(n < 0 for n in dims):
        raise bad(op, f"dims {dims} has a negative size")
    elements = 1
    for n in dims:
        elements *= max(int(n), 1)  # NumPy refuses such sizes even beside a 0
    if elements > 2**48:  # past any memory: NumPy would raise its own ValueError
        raise bad(op, f"dims {dims} describe {elements} elements, more than any device or "
                      f"host memory holds")
    return tuple(dims)


def _fill_infer(meta, attrs, host):
    if meta[1].shape != ():
        raise bad("Fill", f"value must be a scalar, got shape {meta[1].shape}")
    return [fill_dims("Fill", host[0])]


_define("Fill", [Arg("dims", "index_type", host=True), Arg("value", "T")],
        [Arg("output", "T")],
        [Attr("T", "type", allowed=ALL), Attr("index_type", "type", dt.int32, allowed=INDEX)],
        _fill_infer,
        lambda arrays, attrs: [np.full(fill_dims("Fill", arrays[0]), arrays[1],
                                       dtype=arrays[1].dtype)])

