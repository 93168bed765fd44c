"""`pluggable.Variable`: mutable state on a device, as ``tf.Variable``.

A Variable owns a resource variable of the runtime (op_defs_resource.py) on the device of the
``with pluggable.device(...)`` scope it is made in (else the device of its initial value, else
the CPU), and works only through the resource-variable ops: VarHandleOp makes it,
AssignVariableOp / AssignAddVariableOp / AssignSubVariableOp change it, ReadVariableOp reads
it. On a plugin device these run the plugin's kernels when it registers them
(kernels_experimental.h), on the device's compute stream, so every update is ordered with the
kernels before and after it; otherwise the host's own kernels run them, in the same order.

A Variable is usable wherever a tensor is: as an op input (its current value, or its handle
for a resource input such as ResourceApplyGradientDescent's ``var``), with the operators of
tensors, and with NumPy (``np.asarray(v)``).
"""
from __future__ import annotations

import weakref
from typing import Any, Optional

import numpy as np

from .base import dtypes as dt
from .base.errors import InvalidArgumentError
from .base.shape import TensorShape, as_shape
from .eager import resources, tape as _tape
from .eager.dispatch import _target_device, device as scope, execute
from .tensors.placement import resolve_device
from .tensors.tensor import Tensor, tensor

__all__ = ["Variable"]


def _destroy(address: int) -> None:
    try:
        resources.destroy(address)
    except Exception:  # interpreter shutdown: the process takes the memory back
        pass


class Variable:
    """A mutable tensor on a device: ``Variable(initial_value, trainable=True,
    validate_shape=True, name=None, dtype=None, shape=None)``, as ``tf.Variable``.

    ``dtype`` converts the initial value. ``shape`` (a `TensorShape` or a list with None
    for unknown dimensions, or ``TensorShape(None)``) declares which shapes `assign` may give
    the variable; by default only the initial value's, as TensorFlow's;
    ``validate_shape=False`` allows any. ``device`` (not TensorFlow's) places it explicitly,
    else the device scope's, else its initial value's device."""

    def __init__(self, initial_value: Any, trainable: bool = True, validate_shape: bool = True,
                 *, name: Optional[str] = None, dtype: Any = None, shape: Any = None,
                 device: Any = None):
        if name is not None and not isinstance(name, str):
            raise TypeError(f"Variable name must be a string, got {name!r}")
        value = initial_value.read_value() if isinstance(initial_value, Variable) \
            else initial_value
        wanted = None if dtype is None else dt.as_dtype(dtype)
        target = None if device is None else resolve_device(device)
        if not isinstance(value, Tensor):
            # Python numbers take pluggable.tensor's types (float32, int32), as tf.Variable.
            value = tensor(np.asarray(value).astype(wanted.numpy_dtype), device=target) \
                if wanted else tensor(value, device=target)
        elif wanted is not None and value.dtype != wanted:
            (value,) = execute("Cast", [value], {"DstT": wanted})
        if shape is not None:
            declared = as_shape(shape)
            if not declared.is_compatible_with(value._shape):
                raise InvalidArgumentError(
                    f"Variable {name or 'Variable'!r}: the initial value's shape "
                    f"{value._shape} is not compatible with the shape {declared} given",
                    call="Variable")
        else:
            declared = as_shape(value._shape if validate_shape else None)
        self._declared = declared
        # The one shape assign accepts, as a plain tuple (compared in C), when it is known.
        self._fixed_shape = tuple(declared) if declared.is_fully_defined() else None
        self._device = target if target is not None else _target_device([value])
        self._dtype = value.dtype
        self._name = name or "Variable"
        self._trainable = bool(trainable)
        with scope(self._device):
            (self._handle,) = execute("VarHandleOp", [], {
                "dtype": self._dtype, "shape": None if declared.rank is None else declared,
                "shared_name": self._name})
        address = int(self._handle.numpy())
        self._finalizer = weakref.finalize(self, _destroy, address)
        self._state = resources.state_of("Variable", self._handle.numpy())
        self._run("AssignVariableOp", [value], {"dtype": self._dtype})
        _tape.register_variable(self)  # its reads are watched by gradient tapes

    # -- description ---------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self) -> dt.DType:
        return self._dtype

    @property
    def shape(self) -> TensorShape:
        """The shape it was declared with (``shape=``), else its initial value's: as
        ``tf.Variable.shape``, None where the declaration leaves a dimension open."""
        return self._declared

    def get_shape(self) -> TensorShape:
        return self._declared

    @property
    def value_shape(self) -> TensorShape:
        """The shape of the current value (known in every dimension)."""
        self._check_open("shape")
        shape = self._state.shape()
        return TensorShape(() if shape is None else shape)

    @property
    def ndim(self) -> int:
        return len(self.value_shape)

    @property
    def device(self) -> str:
        """The name of the device holding the value, e.g. "/device:XPU:0"."""
        return self._device.name

    @property
    def trainable(self) -> bool:
        return self._trainable

    @property
    def handle(self) -> Tensor:
        """The DT_RESOURCE tensor the resource-variable ops take."""
        return self._handle

    @property
    def is_closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        """Frees the variable now (DestroyResourceOp); idempotent. The variable's memory goes
        back in compute-stream order, after the work already enqueued on it."""
        self._finalizer()

    def __repr__(self) -> str:
        head = f"<pluggable.Variable {self._name!r}"
        tail = f"dtype={self._dtype.name} device={self.device}"
        if self.is_closed:
            return f"{head} {tail} (closed)>"
        return f"{head} shape={self.value_shape} {tail}, numpy={self.numpy()!r}>"

    # -- reading and writing ----------------------------------------------------------------
    def _check_open(self, what: str) -> None:
        if self.is_closed:
            from .base.errors import FailedPreconditionError

            raise FailedPreconditionError(f"{what}: variable {self._name!r} is closed",
                                          call=what)

    def _run(self, op: str, inputs, attrs=None):
        self._check_open(op)
        with scope(self._device):
            return execute(op, [self._handle, *inputs], attrs)

    def read_value(self) -> Tensor:
        """The current value, as a new tensor on the variable's device."""
        return self._run("ReadVariableOp", [], {"dtype": self._dtype})[0]

    value = read_value

    def numpy(self) -> np.ndarray:
        return self.read_value().numpy()

    def assign(self, value: Any, use_locking: bool = False, read_value: bool = True):
        """Replaces the value. Its shape must fit the variable's `shape`, as in TensorFlow:
        another shape is an `InvalidArgumentError` (a ValueError) unless the variable was
        made with a ``shape=`` that leaves the differing dimensions unknown. Returns the
        variable, or nothing with ``read_value=False``."""
        value = self._value_tensor(value)
        declared = self._declared
        if value._shape != self._fixed_shape and not (
                self._fixed_shape is None and declared.is_compatible_with(value._shape)):
            raise InvalidArgumentError(
                f"cannot assign a value of shape {value._shape} to variable {self._name!r} "
                f"of shape {declared}; to let its shape change, make it with "
                f"shape=[None, ...] (None where the size may change) or "
                f"shape=pluggable.TensorShape(None)", call="AssignVariableOp")
        self._run("AssignVariableOp", [value], {"dtype": self._dtype})
        return self if read_value else None

    def assign_add(self, delta: Any, use_locking: bool = False, read_value: bool = True):
        """Adds ``delta``, whose shape must be the value's."""
        self._run("AssignAddVariableOp", [self._value_tensor(delta)], {"dtype": self._dtype})
        return self if read_value else None

    def assign_sub(self, delta: Any, use_locking: bool = False, read_value: bool = True):
        """Subtracts ``delta``, whose shape must be the value's."""
        self._run("AssignSubVariableOp", [self._value_tensor(delta)], {"dtype": self._dtype})
        return self if read_value else None

    def _value_tensor(self, value: Any) -> Tensor:
        if isinstance(value, Variable):
            return value.read_value()
        if isinstance(value, Tensor):
            return value
        # Made where the variable lives: under another device's scope a value made there
        # would have to be copied back, and a CPU variable's update would wait for that
        # device's queued work (an optimizer's step count under `with device("xpu")`).
        return tensor(value, dtype=self._dtype, device=self._device)

    # -- a tensor wherever one is expected ------------------------------------------------
    def __pluggable_tensor__(self, resource: bool) -> Tensor:
        return self._handle if resource else self.read_value()

    def __array__(self, dtype=None, copy=None):
        return self.read_value().__array__(dtype, copy)

    def __float__(self) -> float:
        return float(self.read_value())

    def __int__(self) -> int:
        return int(self.read_value())

    def __bool__(self) -> bool:
        return bool(self.read_value())

    def __len__(self) -> int:
        return len(self.read_value())

    __hash__ = object.__hash__  # a Variable is an object with identity, as in TensorFlow


def _delegate(name: str):
    def method(self, *args):
        return getattr(self.read_value(), name)(*args)

    method.__name__ = name
    method.__doc__ = f"As Tensor.{name}, on the current value."
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__matmul__", "__rmatmul__", "__neg__", "__abs__",
              "__lt__", "__gt__", "__le__", "__ge__", "__eq__", "__ne__", "__pow__",
              "__getitem__"):
    if hasattr(Tensor, _name):
        setattr(Variable, _name, _delegate(_name))
