"""What a `Tensor` does with Python's operators and NumPy, as TensorFlow's ``Tensor`` does:
indexing through one StridedSlice (ints, slices with steps, negative indices, ``...``,
``None``), boolean masks (Where + GatherNd), the arithmetic, comparison and bitwise operators
with TensorFlow's semantics (``/`` of integers is true division in floating point, ``//``
and ``%`` floor, ``&`` of booleans is logical), ``==``/``!=`` with non-tensors, scalar
conversions, and NumPy's ufuncs on tensors.

`attach` gives `Tensor` its operator methods (`TensorOperators`); they call these functions,
which run ops through `pluggable.eager.dispatch`.
"""
from __future__ import annotations

import operator
from typing import Any, List, Tuple

import numpy as np

from ..base.native import compiled as _compiled
from .dispatch import _plans, _settings, execute, execute_with_constants
from ..base.dtypes import as_dtype
from ..tensors.tensor import CPU_DEVICE, Tensor, device_scope

__all__ = ["getitem", "boolean_mask", "binary", "true_divide", "equality", "logical_or_bitwise",
           "invert", "scalar", "array_ufunc"]

_run = _compiled.run  # an op's first output, from its remembered plan when there is one
_INDEX_HELP = ("only integers, slices (`:`), ellipsis (`...`), None (new axis), scalar integer "
               "tensors and one boolean mask are valid indices")


# -- indexing ---------------------------------------------------------------------------------
def _is_mask(key: Any) -> bool:
    if isinstance(key, Tensor):
        return key.dtype.is_bool
    if isinstance(key, np.ndarray):
        return key.dtype == np.bool_
    return (isinstance(key, list) and len(key) > 0
            and all(isinstance(k, (bool, np.bool_)) for k in np.ravel(np.asarray(key))))


def _index_value(k: Any, position: int) -> int:
    if isinstance(k, (bool, np.bool_)):
        raise TypeError(f"index {position}: a Python bool is not an index; {_INDEX_HELP}")
    if isinstance(k, Tensor) and (k.ndim or not k.dtype.is_integer):
        raise TypeError(f"index {position}: a {k.dtype.name} tensor of shape {k.shape} is not "
                        f"an index; {_INDEX_HELP} (pluggable.ops.gather takes index lists)")
    try:
        return operator.index(k)
    except TypeError:
        raise TypeError(f"index {position}: {type(k).__name__} {k!r} is not an index; "
                        f"{_INDEX_HELP} (pluggable.ops.gather takes index lists)") from None


def strided_slice_args(key: Any) -> Tuple[List[int], List[int], List[int], dict]:
    """``key`` (what `t[key]` received) as StridedSlice's begin, end, strides and masks."""
    if not isinstance(key, tuple):
        key = (key,)
    begin: List[int] = []
    end: List[int] = []
    strides: List[int] = []
    masks = {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0,
             "shrink_axis_mask": 0}
    for i, k in enumerate(key):
        bit = 1 << i
        if k is Ellipsis:
            masks["ellipsis_mask"] |= bit
            b, e, s = 0, 0, 1
        elif k is None:
            masks["new_axis_mask"] |= bit
            b, e, s = 0, 0, 1
        elif isinstance(k, slice):
            s = 1 if k.step is None else _index_value(k.step, i)
            if s == 0:
                raise ValueError(f"index {i}: slice step cannot be zero")
            if k.start is None:
                masks["begin_mask"] |= bit
                b = 0
            else:
                b = _index_value(k.start, i)
            if k.stop is None:
                masks["end_mask"] |= bit
                e = 0
            else:
                e = _index_value(k.stop, i)
        elif _is_mask(k):
            raise TypeError(f"index {i}: a boolean mask must be the only index (t[mask]); "
                            f"{_INDEX_HELP}")
        else:
            b = _index_value(k, i)
            e, s = b + 1, 1
            masks["shrink_axis_mask"] |= bit
        begin.append(b)
        end.append(e)
        strides.append(s)
    return begin, end, strides, masks


def _hashable(key: Any) -> Any:
    """``key`` as a dict key (slices are not hashable before Python 3.12), or None when it
    holds something else than ints, slices, None and Ellipsis."""
    parts = []
    for k in key if isinstance(key, tuple) else (key,):
        if type(k) is int or k is None or k is Ellipsis:
            parts.append(k)
        elif type(k) is slice and all(type(v) is int or v is None
                                      for v in (k.start, k.stop, k.step)):
            parts.append(("slice", k.start, k.stop, k.step))
        else:
            return None
    return tuple(parts)


class _Slicing:
    """What one index does to tensors of one shape: StridedSlice's arguments, and the NumPy
    index and result shape of the CPU kernel."""

    __slots__ = ("inputs", "masks", "index", "shape")

    def __init__(self, key: Any, shape: Tuple[int, ...]):
        from ..oplib.array import strided_slice_index

        begin, end, strides, self.masks = strided_slice_args(key)
        wide = any(abs(v) >= 2**31 for v in begin + end + strides)
        dtype = np.int64 if wide else np.int32
        self.inputs = [np.array(v, dtype) for v in (begin, end, strides)]
        for array in self.inputs:
            array.flags.writeable = False
        self.index, self.shape = strided_slice_index(shape, *self.inputs, self.masks)


_slicings: dict = {}
_MAX_SLICINGS = 4096


def getitem(t: Tensor, key: Any) -> Tensor:
    """``t[key]``: one StridedSlice op, or a boolean mask. A repeated index on tensors of one
    shape reuses its arguments; on the CPU it is NumPy's indexing, on a plugin device a
    remembered kernel run (`dispatch.execute_with_constants`)."""
    if _is_mask(key):
        return boolean_mask(t, key)
    hashable = _hashable(key)
    if hashable is None or _settings["tape"]:  # (a tape records the op: the general path)
        begin, end, strides, masks = strided_slice_args(key)
        wide = any(abs(v) >= 2**31 for v in begin + end + strides)
        index = np.int64 if wide else np.int32
        return execute("StridedSlice", [t, np.array(begin, index), np.array(end, index),
                                        np.array(strides, index)], masks)[0]
    scope = device_scope.get()
    device = t._device
    if device is not CPU_DEVICE and not _settings["general"]:
        # A repeated index on a plugin device: straight to its remembered kernel run.
        plan = _plans.get(("StridedSlice", scope, t._dtype.code, t._shape, device, hashable))
        if plan is not None:
            outputs = plan.run((t,), "StridedSlice")
            if outputs is not None:
                return outputs[0]
    cache_key = (hashable, t._shape)
    slicing = _slicings.get(cache_key)
    if slicing is None:
        slicing = _Slicing(key, t._shape)
        if len(_slicings) >= _MAX_SLICINGS:
            _slicings.clear()
        _slicings[cache_key] = slicing
    if device is CPU_DEVICE and scope in (None, CPU_DEVICE) and not _log_placement():
        # asarray, not ascontiguousarray, which makes a 0-d result 1-d.
        array = np.asarray(t._array[slicing.index], order="C")
        array.flags.writeable = False
        return Tensor(slicing.shape, t._dtype, CPU_DEVICE, array=array)
    plan_key = ("StridedSlice", scope, t._dtype.code, t._shape, device, hashable)
    return execute_with_constants(plan_key, "StridedSlice", [t, *slicing.inputs],
                                  slicing.masks)[0]


def _log_placement() -> bool:
    from .dispatch import get_log_device_placement

    return get_log_device_placement()


def _runs_on(device, *ops: str) -> bool:
    if device is CPU_DEVICE:
        return True
    from ..kernels.registry import registered_kernels

    return all(registered_kernels(op, device.device_type, plugin=device.platform.path)
               for op in ops)


def boolean_mask(t: Tensor, mask: Any) -> Tensor:
    """The elements (rows, ...) of ``t`` where ``mask`` is true, as ``tf.boolean_mask``:
    ``mask``'s shape is the leading dimensions of ``t``'s; the result has one row per true
    element. Runs as Where + GatherNd on ``t``'s device when it has both kernels, else on the
    CPU (the result goes back to ``t``'s device)."""
    if not isinstance(mask, Tensor):
        mask = np.asarray(mask)
    if mask.ndim == 0:
        raise ValueError("a boolean mask must have rank 1 or more (mask.ndim == 0)")
    if tuple(mask.shape) != t.shape[:mask.ndim]:
        raise ValueError(f"the boolean mask of shape {tuple(mask.shape)} must match the "
                         f"leading dimensions of the tensor's shape {t.shape}")
    device = t._device
    if _runs_on(device, "Where", "GatherNd"):
        where = execute("Where", [mask])[0]
        return execute("GatherNd", [t, where])[0]
    token = device_scope.set(CPU_DEVICE)
    try:
        where = execute("Where", [mask])[0]
        result = execute("GatherNd", [t, where])[0]
    finally:
        device_scope.reset(token)
    return result.to(device)


# -- operators ----------------------------------------------------------------------------
def binary(op: str, a: Any, b: Any) -> Tensor:
    return _run(op, (a, b))


_TRUEDIV_FLOAT = {"int8": "float32", "uint8": "float32", "int16": "float32",
                  "uint16": "float32", "int32": "float64", "uint32": "float64",
                  "int64": "float64", "uint64": "float64"}


def _operand_dtype(a: Any, b: Any):
    """The dtype an op on ``a`` and ``b`` takes: a tensor's, else NumPy data's, else that of
    Python numbers (TensorFlow's inference)."""
    for kinds in (Tensor, (np.ndarray, np.generic)):
        for x in (a, b):
            if isinstance(x, kinds):
                return as_dtype(x.dtype)
    from ..tensors.tensor import tensor

    return tensor(a, device=CPU_DEVICE).dtype


def true_divide(a: Any, b: Any) -> Tensor:
    """``a / b`` as TensorFlow: integers are divided in floating point (float32 for 8 and 16
    bits, float64 for 32 and 64 bits)."""
    dtype = _operand_dtype(a, b)
    if dtype is not None and dtype.name in _TRUEDIV_FLOAT:
        target = as_dtype(_TRUEDIV_FLOAT[dtype.name])
        a, b = (execute("Cast", [x], {"DstT": target} if isinstance(x, Tensor) else
                        {"DstT": target, "SrcT": dtype})[0] for x in (a, b))
    return execute("RealDiv", (a, b))[0]


def _comparable(other: Any) -> bool:
    if other is None:
        return False
    if isinstance(other, (Tensor, np.ndarray, np.generic, bool, int, float, complex)):
        return True
    try:
        return np.asarray(other).dtype.kind in "biufc"
    except (TypeError, ValueError):
        return False


def equality(op: str, t: Tensor, other: Any) -> Any:
    """``t == other`` / ``t != other`` as TensorFlow 2: a bool tensor element-wise; against
    None or a non-numeric object, Python's False / True; a scalar False / True tensor when
    the shapes cannot broadcast."""
    if not _comparable(other):
        return op == "NotEqual"
    shape = other._shape if isinstance(other, Tensor) else np.shape(other)
    try:
        np.broadcast_shapes(t._shape, tuple(shape))
    except ValueError:
        value = np.asarray(op == "NotEqual")
        from ..tensors.tensor import tensor

        return tensor(value, device=t._device)
    return execute(op, (t, other))[0]


def logical_or_bitwise(logical: str, bitwise: str, a: Any, b: Any) -> Tensor:
    dtype = _operand_dtype(a, b)
    return execute(logical if dtype is not None and dtype.is_bool else bitwise, (a, b))[0]


def invert(t: Tensor) -> Tensor:
    return execute("LogicalNot" if t.dtype.is_bool else "Invert", [t])[0]


def scalar(t: Tensor, kind: type) -> Any:
    """``float(t)``, ``int(t)``, ``complex(t)``, ``operator.index(t)`` of a 0-d tensor."""
    if t.ndim:
        raise TypeError(f"only a scalar (0-d) tensor converts to a Python {kind.__name__}; "
                        f"this one has shape {t.shape}: index it (t[0]) or use t.numpy()")
    value = t.numpy().reshape(())
    if kind is operator.index:
        if not t.dtype.is_integer:
            raise TypeError(f"only an integer tensor can be an index; this one is "
                            f"{t.dtype.name} (cast it with pluggable.ops.cast)")
        return int(value)
    if kind is int and t.dtype.is_complex:
        raise TypeError("a complex tensor does not convert to int; take its real part first")
    if kind is float and t.dtype.is_complex:
        raise TypeError("a complex tensor does not convert to float; use complex(t)")
    return kind(value)


# -- NumPy ----------------------------------------------------------------------------------
_UFUNC_OPS = {
    np.add: "AddV2", np.subtract: "Sub", np.multiply: "Mul", np.floor_divide: "FloorDiv",
    np.remainder: "FloorMod", np.power: "Pow", np.maximum: "Maximum",
    np.minimum: "Minimum", np.equal: "Equal", np.not_equal: "NotEqual", np.less: "Less",
    np.less_equal: "LessEqual", np.greater: "Greater", np.greater_equal: "GreaterEqual",
    np.logical_and: "LogicalAnd", np.logical_or: "LogicalOr", np.arctan2: "Atan2",
    np.negative: "Neg", np.absolute: "Abs", np.sqrt: "Sqrt", np.square: "Square",
    np.exp: "Exp", np.log: "Log", np.tanh: "Tanh", np.sin: "Sin", np.cos: "Cos",
    np.logical_not: "LogicalNot", np.floor: "Floor", np.ceil: "Ceil", np.sign: "Sign",
}


def array_ufunc(ufunc, method: str, inputs, kwargs) -> Any:
    """A NumPy ufunc called on tensors: the matching op when there is one (``np.ones(3) + t``
    is a tensor, as TensorFlow's ``__array_priority__`` makes it), else NumPy on the
    tensors' values (an ndarray)."""
    if method == "__call__" and not kwargs:
        if ufunc is np.true_divide:
            return true_divide(*inputs)
        if ufunc is np.matmul:
            return plain_matmul(*inputs)
        if ufunc in (np.bitwise_and, np.bitwise_or, np.bitwise_xor):
            name = ufunc.__name__.split("_")[1]
            if name == "xor":
                return execute("BitwiseXor" if not _operand_dtype(*inputs).is_bool
                               else "NotEqual", inputs)[0]
            return logical_or_bitwise(f"Logical{name.capitalize()}",
                                      f"Bitwise{name.capitalize()}", *inputs)
        if ufunc is np.invert:
            return invert(inputs[0])
        op = _UFUNC_OPS.get(ufunc)
        if op is not None:
            return execute(op, list(inputs))[0]
    if any(isinstance(o, Tensor) for o in kwargs.get("out", ())):
        raise TypeError("tensors are immutable: a tensor cannot be a ufunc's out=")
    values = [x.numpy() if isinstance(x, Tensor) else x for x in inputs]
    return getattr(ufunc, method)(*values, **kwargs)


# -- the Tensor's operators -------------------------------------------------------------------
class TensorOperators:
    """The operators, indexing, scalar conversions and NumPy ufuncs of `Tensor`, which
    `attach` copies onto the class: the tensor floor defines the data, this floor what the op
    library does with it (as JAX attaches its array's methods from outside the array)."""

    def _binary(self, op: str, other: Any, reverse: bool = False) -> "Tensor":
        return _run(op, (other, self) if reverse else (self, other))

    # The commonest operators go straight to the C per-op path (`_binary` spelled out).
    def __add__(self, other):
        return _run("AddV2", (self, other))

    def __radd__(self, other):
        return _run("AddV2", (other, self))

    def __sub__(self, other):
        return _run("Sub", (self, other))

    def __rsub__(self, other):
        return _run("Sub", (other, self))

    def __mul__(self, other):
        return _run("Mul", (self, other))

    def __rmul__(self, other):
        return _run("Mul", (other, self))

    def __truediv__(self, other):
        if self._dtype.is_integer:  # TensorFlow divides integers in floating point
            return true_divide(self, other)
        return self._binary("RealDiv", other)

    def __rtruediv__(self, other):
        if self._dtype.is_integer:
            return true_divide(other, self)
        return self._binary("RealDiv", other, reverse=True)

    def __matmul__(self, other):
        if len(self._shape) == 2 and type(other) is Tensor and len(other._shape) == 2:
            return _run("MatMul", (self, other))  # the commonest case, straight to its plan
        return plain_matmul(self, other)

    def __rmatmul__(self, other):
        return plain_matmul(other, self)

    def __neg__(self):
        return execute("Neg", [self])[0]

    def __abs__(self):
        return execute("Abs", [self])[0]

    def __eq__(self, other):
        return equality("Equal", self, other)

    def __ne__(self, other):
        return equality("NotEqual", self, other)

    def __le__(self, other):
        return self._binary("LessEqual", other)

    def __ge__(self, other):
        return self._binary("GreaterEqual", other)

    def __floordiv__(self, other):
        return self._binary("FloorDiv", other)

    def __rfloordiv__(self, other):
        return self._binary("FloorDiv", other, reverse=True)

    def __mod__(self, other):
        return self._binary("FloorMod", other)

    def __rmod__(self, other):
        return self._binary("FloorMod", other, reverse=True)

    def __pow__(self, other):
        return self._binary("Pow", other)

    def __rpow__(self, other):
        return self._binary("Pow", other, reverse=True)

    def _logical_or_bitwise(self, name: str, other: Any, reverse: bool = False):
        a, b = (other, self) if reverse else (self, other)
        return logical_or_bitwise(f"Logical{name}", f"Bitwise{name}", a, b)

    def __and__(self, other):
        return self._logical_or_bitwise("And", other)

    def __rand__(self, other):
        return self._logical_or_bitwise("And", other, reverse=True)

    def __or__(self, other):
        return self._logical_or_bitwise("Or", other)

    def __ror__(self, other):
        return self._logical_or_bitwise("Or", other, reverse=True)

    def __xor__(self, other):
        return self._binary("NotEqual" if self._dtype.is_bool else "BitwiseXor", other)

    def __rxor__(self, other):
        return self._binary("NotEqual" if self._dtype.is_bool else "BitwiseXor", other,
                            reverse=True)

    def __invert__(self):
        return invert(self)

    def __round__(self, ndigits=None):
        if ndigits is not None:
            raise TypeError("round(tensor, ndigits) is not supported; round(tensor) rounds "
                            "half to even")
        return execute("Round", [self])[0]

    def __getitem__(self, key):
        return getitem(self, key)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return array_ufunc(ufunc, method, inputs, kwargs)

    def __index__(self) -> int:
        return scalar(self, operator.index)

    def __complex__(self) -> complex:
        return scalar(self, complex)

    def __lt__(self, other):
        return self._binary("Less", other)

    def __gt__(self, other):
        return self._binary("Greater", other)

    def __float__(self) -> float:
        return scalar(self, float)

    def __int__(self) -> int:
        return scalar(self, int)


def plain_matmul(a: Any, b: Any) -> Tensor:
    """``a @ b``: MatMul for two matrices, BatchMatMulV2 (broadcast batches) otherwise, as
    `pluggable.ops.matmul` without options."""
    def rank(x: Any) -> int:
        return len(x._shape) if isinstance(x, Tensor) else np.ndim(x)

    return _run("MatMul" if rank(a) == 2 and rank(b) == 2 else "BatchMatMulV2", [a, b])


def attach(cls: type) -> None:
    """Gives ``cls`` (`Tensor`) the methods of `TensorOperators`."""
    for name, value in vars(TensorOperators).items():
        if callable(value) and name not in ("__init__", "__dict__", "__weakref__"):
            setattr(cls, name, value)


attach(Tensor)
