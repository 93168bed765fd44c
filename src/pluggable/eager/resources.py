"""Resource variables: the state behind `pluggable.Variable`, and TensorFlow's
resource-variable ops over it, which live here rather than in the op library because their
host kernels read and write that state (VarHandleOp, ReadVariableOp, AssignVariableOp,
AssignAddVariableOp, AssignSubVariableOp, DestroyResourceOp, and the optimizers' updates
ResourceApplyGradientDescent, ResourceApplyMomentum, ResourceApplyKerasMomentum,
ResourceApplyAdam, ResourceApplyRMSProp, ResourceApplyCenteredRMSProp,
ResourceApplyAdagradV2).

A variable lives in the runtime library (kernels_experimental.c): a dtype, a lock and a value
in the memory of one device (host memory for the CPU). A DT_RESOURCE tensor is its handle: a
scalar in host memory holding the runtime's pointer. Plugins register kernels for these ops
exactly as for TensorFlow, through kernels_experimental.h (TF_AssignVariable,
TF_AssignUpdateVariable, TF_GetInputTensorFromVariable, ...); their work goes on the device's
compute stream, ordered with every other kernel.

Where a device has no kernel for one of them (and on the CPU), the host's own kernel runs it,
as TensorFlow's DEVICE_DEFAULT kernels do: VarHandleOp and DestroyResourceOp are always the
host's; a read copies the value on the device's compute stream (so it follows every update
enqueued before it); an update reads the value to the host (after the compute stream), computes
with the op's NumPy reference (`cpu`) and writes the result back on the compute stream.
"""
from __future__ import annotations

import ctypes
import threading
from contextlib import ExitStack, contextmanager
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple

import numpy as np

from ..base import native as _native
from ..base import dtypes as dt
from ..base.errors import DataLossError, FailedPreconditionError, NotFoundError, error_for_code
from ..devices.memory import DeviceMemory
from ..oplib.core import ALL, NUMBER, OPS, Arg, Attr, OpDef, bad
from ..tensors.tensor import CPU_DEVICE, DeviceBuffer, Tensor, tensor as make_tensor

_p = ctypes.c_void_p
_PROTOTYPES = {
    "pluggable_VariableNew": (_p, (ctypes.c_char_p, ctypes.c_int, _p, ctypes.c_int)),
    #   PG_Variable* (const char* name, TF_DataType dtype, PG_BFC* bfc, int device_id)
    "pluggable_VariableDelete": (None, (_p, ctypes.c_int)),
    #   void (PG_Variable* var, int release_memory)
    "pluggable_VariableLock": (None, (_p,)),
    "pluggable_VariableUnlock": (None, (_p,)),
    "pluggable_VariableInfo": (ctypes.c_int, (_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
                                              ctypes.POINTER(_p),
                                              ctypes.POINTER(ctypes.c_uint64))),
    #   int (PG_Variable*, int64_t* dims, int capacity, void** data, uint64_t* nbytes)
    "pluggable_VariableShape": (ctypes.c_int, (_p, ctypes.POINTER(ctypes.c_int64),
                                               ctypes.c_int)),
    #   int (PG_Variable*, int64_t* dims, int capacity): takes the lock itself
    "pluggable_VariableAllocate": (_p, (_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_int, _p)),
    #   void* (PG_Variable*, const int64_t* dims, int num_dims, TF_Status* status)
}
_fns = _native.bind(_native.lib, _PROTOTYPES)
_MAX_DIMS = 254
_FEW_DIMS = 8  # a shape's first try: most values have at most this many dimensions


class VariableState:
    """One variable of the runtime: its pointer, the device holding its value, its dtype."""

    __slots__ = ("address", "device", "dtype", "name", "live", "ledger", "stamp",
                 "__weakref__")

    def __init__(self, address: int, device: Any, dtype: dt.DType, name: str):
        self.address = address
        self.device = device
        self.dtype = dtype
        self.name = name
        self.live = True  # False once destroyed: the runtime's object is gone
        # The last write's stream ledger and stamp (_compiled/ledger.c): after that stream
        # failed, a value whose write was not known done is lost.
        self.ledger = None
        self.stamp = 0

    def written(self, stream) -> None:
        """The value was just written (or updated) by work enqueued on ``stream``."""
        self.ledger, self.stamp = stream._ledger, stream._ledger.issue()

    def check_intact(self, op: str) -> None:
        """Raises `DataLossError` when failed stream work was to write the value."""
        failure = None if self.ledger is None else self.ledger.lost(self.stamp)
        if failure is not None:
            raise DataLossError(
                f"{op}: variable {self.name!r} on {self.device.name} has no value: the stream "
                f"work that was to write it did not run, because {failure}. Assign it a value "
                f"again (Variable.assign) before reading or updating it", call=op)

    @property
    def on_cpu(self) -> bool:
        return self.device is CPU_DEVICE

    @contextmanager
    def locked(self) -> Iterator["VariableState"]:
        if not self.live:
            raise NotFoundError(f"variable {self.name!r} was destroyed", call="Variable")
        _fns["pluggable_VariableLock"](self.address)
        try:
            yield self
        finally:
            _fns["pluggable_VariableUnlock"](self.address)

    def info(self) -> Optional[Tuple[Tuple[int, ...], int, int]]:
        """(shape, address, nbytes) of the value, None when uninitialized. Lock held."""
        dims = (ctypes.c_int64 * _MAX_DIMS)()
        data, nbytes = _p(), ctypes.c_uint64()
        rank = _fns["pluggable_VariableInfo"](self.address, dims, _MAX_DIMS, ctypes.byref(data),
                                              ctypes.byref(nbytes))
        if rank < 0:
            return None
        return tuple(dims[:rank]), data.value or 0, nbytes.value

    def shape(self) -> Optional[Tuple[int, ...]]:
        """The value's shape, None when uninitialized (one call, which locks)."""
        if not self.live:
            raise NotFoundError(f"variable {self.name!r} was destroyed", call="Variable")
        dims = (ctypes.c_int64 * _FEW_DIMS)()
        rank = _fns["pluggable_VariableShape"](self.address, dims, _FEW_DIMS)
        if rank > _FEW_DIMS:
            dims = (ctypes.c_int64 * _MAX_DIMS)()
            rank = _fns["pluggable_VariableShape"](self.address, dims, _MAX_DIMS)
        return None if rank < 0 else tuple(dims[:rank])

    def allocate(self, shape: Tuple[int, ...]) -> int:
        """Fresh memory for a value of ``shape`` (lock held); the old value is dropped."""
        dims = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        status = _native.acquire_status()
        try:
            address = _fns["pluggable_VariableAllocate"](self.address, dims, len(shape),
                                                         status.address)
            if not status.ok:
                raise error_for_code(status.code)(
                    f"variable {self.name!r} on {self.device.name}: {status.message}",
                    call="AssignVariableOp")
        finally:
            _native.release_status(status)
        return address or 0

    def uninitialized(self, op: str) -> FailedPreconditionError:
        return FailedPreconditionError(
            f"{op}: variable {self.name!r} on {self.device.name} is uninitialized; assign it a "
            f"value first", call=op)


_states: Dict[int, VariableState] = {}
_states_lock = threading.Lock()


def create(device: Any, dtype: dt.DType, name: str) -> VariableState:
    """A new, uninitialized variable whose value will live on ``device``."""
    if device is CPU_DEVICE:
        bfc, ordinal = None, -1
    else:
        bfc, ordinal = device.executor.allocator._handle, device.executor.ordinal
    address = _fns["pluggable_VariableNew"](name.encode("utf-8"), int(dtype.tf_code), bfc,
                                            ordinal)
    if not address:
        raise MemoryError("out of host memory creating a variable")
    state = VariableState(address, device, dtype, name)
    with _states_lock:
        _states[address] = state
    return state


def destroy(address: int) -> bool:
    """Frees the variable at ``address``; False when there is none (already destroyed)."""
    with _states_lock:
        state = _states.pop(address, None)
        if state is None:
            return False
        state.live = False
    release = state.on_cpu or not state.device.executor.is_closed
    _fns["pluggable_VariableDelete"](address, 1 if release else 0)
    return True


def find_state(handle: Any) -> Optional[VariableState]:
    """The variable a resource handle (its host value) refers to, None when it names none."""
    handle = np.asarray(handle)
    address = int(handle.reshape(-1)[0]) if handle.size == 1 else 0
    with _states_lock:
        return _states.get(address)


def state_of(op: str, handle: Any) -> VariableState:
    """The variable a resource handle (its host value) refers to."""
    state = find_state(handle)
    if state is None:
        raise NotFoundError(f"{op}: the resource handle refers to no live variable (it was "
                            f"destroyed, or is not a handle made by VarHandleOp)", call=op)
    return state


# -- reading and writing values on the host's side -----------------------------------------
def _value_locked(state: VariableState, op: str) -> Tuple[Tuple[int, ...], int, int]:
    """(shape, address, nbytes) of a value ``op`` may read (lock held): initialized and
    intact, else the error that says so."""
    info = state.info()
    if info is None:
        raise state.uninitialized(op)
    state.check_intact(op)
    return info


def _host_value_locked(state: VariableState, op: str) -> np.ndarray:
    """The value of a variable on the CPU as a writable array over its memory (lock held)."""
    shape, address, nbytes = _value_locked(state, op)
    raw = (ctypes.c_char * nbytes).from_address(address) if nbytes else bytearray()
    return np.frombuffer(raw, dtype=state.dtype.numpy_dtype).reshape(shape)


def read_locked(state: VariableState, op: str):
    """The value as a new tensor on the variable's device (lock held). On a plugin device the
    copy is enqueued on the compute stream, after every update enqueued before it."""
    if state.on_cpu:
        array = _host_value_locked(state, op).copy()
        array.flags.writeable = False
        return Tensor(array.shape, state.dtype, CPU_DEVICE, array=array)
    shape, address, nbytes = _value_locked(state, op)
    device = state.device
    executor = device.executor
    buffer = DeviceBuffer(executor, nbytes)
    if nbytes:
        executor.memcpy_dtod(device.compute_stream, buffer.memory(),
                             DeviceMemory.unchecked(executor, address, nbytes), nbytes)
        buffer.stamp(device.compute_stream._ledger)
    return Tensor(shape, state.dtype, device, buffer=buffer)


def write_locked(state: VariableState, value) -> None:
    """Makes ``value`` (a Tensor of the variable's dtype) the value (lock held): in place when
    the shape is unchanged, else in fresh memory; on a plugin device the copy is enqueued on
    the compute stream."""
    info = state.info()
    shape = tuple(value.shape)
    nbytes = value.nbytes
    address = info[1] if info is not None and info[0] == shape else state.allocate(shape)
    if not nbytes:
        return
    if state.on_cpu:
        array = np.ascontiguousarray(value.numpy(), dtype=state.dtype.numpy_dtype)
        ctypes.memmove(address, array.ctypes.data, nbytes)
        return
    device = state.device
    if value._device is not device:
        value = value.to(device)
    else:
        value._live_device()  # raises for a value that failed work left unwritten
    compute = device.compute_stream
    if value._ready is not None:
        value._ready.make_wait(compute)
    executor = device.executor
    executor.memcpy_dtod(compute, DeviceMemory.unchecked(executor, address, nbytes),
                         value._buffer.memory(), nbytes)
    state.written(compute)


@contextmanager
def _lock_all(states: Sequence[VariableState]) -> Iterator[None]:
    """Locks each distinct variable once, in address order (the runtime's order too)."""
    with ExitStack() as stack:
        for state in sorted({s.address: s for s in states}.values(), key=lambda s: s.address):
            stack.enter_context(state.locked())
        yield


# -- the ops --------------------------------------------------------------------------------
_NUMBER = NUMBER  # TensorFlow's numbertype for the training ops
_RESOURCE = dt.resource


def _resource_arg(name: str) -> Arg:
    return Arg(name, dtype=_RESOURCE, host=True)  # the handle is read on the host


def _register(name, inputs, outputs, attrs, infer, cpu, host_kernel, host_only=False):
    OPS[name] = OpDef(name, tuple(inputs), tuple(outputs), tuple(attrs), infer, cpu,
                      host_kernel=host_kernel, host_only=host_only)


def _check_dtype(op: str, state: VariableState, dtype: dt.DType) -> None:
    if state.dtype != dtype:
        raise bad(op, f"variable {state.name!r} holds {state.dtype.name}, but the op was given "
                      f"{dtype.name}")


def _value_shape(op: str, state: VariableState) -> Tuple[int, ...]:
    shape = state.shape()
    if shape is None:
        raise state.uninitialized(op)
    return shape


# VarHandleOp: always the host's (TensorFlow registers it itself for pluggable devices).
def _var_handle_infer(meta, attrs, host):
    return [()]


def _var_handle_kernel(device, tensors, attrs):
    state = create(device, attrs["dtype"], attrs["shared_name"] or attrs["debug_name"]
                   or "Variable")
    array = np.array(state.address, dtype=np.int64)
    array.flags.writeable = False
    return [Tensor((), _RESOURCE, device, array=array)]


def _no_cpu(op: str):
    def cpu(arrays, attrs):
        raise bad(op, "runs through its host kernel only")
    return cpu


_register("VarHandleOp", [], [Arg("resource", dtype=_RESOURCE)],
          [Attr("container", "string", ""), Attr("shared_name", "string", ""),
           Attr("debug_name", "string", ""), Attr("dtype", "type", allowed=ALL),
           Attr("shape", "shape"), Attr("allowed_devices", "list(string)", ())],
          _var_handle_infer, _no_cpu("VarHandleOp"), _var_handle_kernel, host_only=True)


def _destroy_kernel(device, tensors, attrs):
    address = int(tensors[0].numpy())
    if not destroy(address) and not attrs["ignore_lookup_error"]:
        raise NotFoundError("DestroyResourceOp: the resource handle refers to no live "
                            "variable", call="DestroyResourceOp")
    return []


_register("DestroyResourceOp", [_resource_arg("resource")], [],
          [Attr("ignore_lookup_error", "bool", True)], lambda meta, attrs, host: [],
          _no_cpu("DestroyResourceOp"), _destroy_kernel, host_only=True)


# ReadVariableOp
def _read_infer(meta, attrs, host):
    state = state_of("ReadVariableOp", host[0])
    _check_dtype("ReadVariableOp", state, attrs["dtype"])
    return [_value_shape("ReadVariableOp", state)]


def _read_kernel(device, tensors, attrs):
    state = state_of("ReadVariableOp", tensors[0].numpy())
    with state.locked():
        return [read_locked(state, "ReadVariableOp")]


_register("ReadVariableOp", [_resource_arg("resource")], [Arg("value", "dtype")],
          [Attr("dtype", "type", allowed=ALL)], _read_infer,
          lambda arrays, attrs: [np.array(arrays[0])], _read_kernel)


# AssignVariableOp
def _assign_infer(meta, attrs, host):
    state = state_of("AssignVariableOp", host[0])
    _check_dtype("AssignVariableOp", state, attrs["dtype"])
    if attrs["validate_shape"]:
        shape = state.shape()
        if shape is not None and shape != meta[1].shape:
            raise bad("AssignVariableOp", f"variable {state.name!r} has shape {shape} and the "
                                          f"value {meta[1].shape}; with validate_shape the "
                                          f"shape cannot change")
    return []


def _assign_kernel(device, tensors, attrs):
    state = state_of("AssignVariableOp", tensors[0].numpy())
    with state.locked():
        write_locked(state, tensors[1])
    return []


_register("AssignVariableOp", [_resource_arg("resource"), Arg("value", "dtype")], [],
          [Attr("dtype", "type", allowed=ALL), Attr("validate_shape", "bool", False)],
          _assign_infer, lambda arrays, attrs: [arrays[1]], _assign_kernel)


# Updates: the NumPy reference computes the variables' new values from their old values
# (first, in input order) and the other inputs.
def _update_op(name: str, variables: Tuple[str, ...], others: Tuple[str, ...], type_attr: str,
               extra_attrs, math, check):
    """Registers an update op whose inputs are ``variables`` (resources) then ``others``."""

    def infer(meta, attrs, host):
        states = [state_of(name, h) for h in host[:len(variables)]]
        for state in states:
            _check_dtype(name, state, attrs[type_attr])
        shapes = [_value_shape(name, s) for s in states]
        check(name, shapes, [m.shape for m in meta[len(variables):]])
        return []

    def kernel(device, tensors, attrs):
        states = [state_of(name, t.numpy()) for t in tensors[:len(variables)]]
        others_values = [t.numpy() for t in tensors[len(variables):]]
        with _lock_all(states):
            on_cpu = all(s.on_cpu for s in states)
            if on_cpu:  # copies of the values in place: a result may alias an input
                views = [_host_value_locked(s, name) for s in states]
                old = [view.copy() for view in views]
            else:
                old = [read_locked(s, name).numpy() for s in states]
            with np.errstate(all="ignore"):
                new = math(old + others_values, attrs)
            for i, (state, value) in enumerate(zip(states, new)):
                if on_cpu and np.shape(value) == views[i].shape:
                    np.copyto(views[i], value, casting="unsafe")  # in place: no tensor made
                else:
                    write_locked(state, make_tensor(np.asarray(value,
                                                               dtype=state.dtype.numpy_dtype)))
        return []

    def cpu(arrays, attrs):
        with np.errstate(all="ignore"):
            return math(arrays, attrs)

    inputs = [_resource_arg(v) for v in variables] + [Arg(o, type_attr) for o in others]
    _register(name, inputs, [], [Attr(type_attr, "type", allowed=_types_for(type_attr)),
                                 *extra_attrs], infer, cpu, kernel)


def _types_for(type_attr: str):
    return ALL if type_attr == "dtype" else _NUMBER


def _same_shape(name, var_shapes, other_shapes):
    if var_shapes[0] != other_shapes[0]:
        raise bad(name, f"cannot update a variable of shape {var_shapes[0]} with a value of "
                        f"shape {other_shapes[0]}; the shapes must be equal")


def _apply_shapes(scalars: Tuple[int, ...], grad: int):
    """A check that every variable and the gradient (others[grad]) share a shape and that
    others[i] for i in ``scalars`` are scalars."""
    def check(name, var_shapes, other_shapes):
        for i in scalars:
            if other_shapes[i] != ():
                raise bad(name, f"input {i + len(var_shapes)} must be a scalar, got shape "
                                f"{other_shapes[i]}")
        for shape in var_shapes[1:] + [other_shapes[grad]]:
            if shape != var_shapes[0]:
                raise bad(name, f"the variables and the gradient must share one shape, got "
                                f"{var_shapes} and gradient {other_shapes[grad]}")
    return check


_update_op("AssignAddVariableOp", ("resource",), ("value",), "dtype", [],
           lambda a, attrs: [a[0] + a[1]], _same_shape)
_update_op("AssignSubVariableOp", ("resource",), ("value",), "dtype", [],
           lambda a, attrs: [a[0] - a[1]], _same_shape)


def _gradient_descent(a, attrs):
    var, alpha, delta = a
    return [var - alpha * delta]


def _momentum(a, attrs):
    var, accum, lr, grad, momentum = a
    accum = accum * momentum + grad
    if attrs["use_nesterov"]:
        return [var - (grad * lr + accum * momentum * lr), accum]
    return [var - lr * accum, accum]


def _adam(a, attrs):
    var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad = a
    one = np.ones((), dtype=var.dtype)
    lr_t = lr * np.sqrt(one - beta2_power) / (one - beta1_power)
    m = m + (grad - m) * (one - beta1)
    v = v + (grad * grad - v) * (one - beta2)
    if attrs["use_nesterov"]:
        step = (m * beta1 + (one - beta1) * grad) * lr_t / (np.sqrt(v) + epsilon)
    else:
        step = m * lr_t / (np.sqrt(v) + epsilon)
    return [var - step, m, v]


_LOCKING = Attr("use_locking", "bool", False)
_NESTEROV = Attr("use_nesterov", "bool", False)
_update_op("ResourceApplyGradientDescent", ("var",), ("alpha", "delta"), "T", [_LOCKING],
           _gradient_descent, _apply_shapes((0,), 1))
_update_op("ResourceApplyMomentum", ("var", "accum"), ("lr", "grad", "momentum"), "T",
           [_LOCKING, _NESTEROV], _momentum, _apply_shapes((0, 2), 1))
_update_op("ResourceApplyAdam", ("var", "m", "v"),
           ("beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad"), "T",
           [_LOCKING, _NESTEROV], _adam, _apply_shapes((0, 1, 2, 3, 4, 5), 6))


def _keras_momentum(a, attrs):
    var, accum, lr, grad, momentum = a
    accum = accum * momentum - lr * grad
    if attrs["use_nesterov"]:
        return [var + (accum * momentum - lr * grad), accum]
    return [var + accum, accum]


def _rms_prop(a, attrs):
    var, ms, mom, lr, rho, momentum, epsilon, grad = a
    one = np.ones((), dtype=var.dtype)
    ms = ms * rho + grad * grad * (one - rho)
    mom = mom * momentum + lr * grad / np.sqrt(ms + epsilon)
    return [var - mom, ms, mom]


def _centered_rms_prop(a, attrs):
    var, mg, ms, mom, lr, rho, momentum, epsilon, grad = a
    one = np.ones((), dtype=var.dtype)
    mg = mg * rho + grad * (one - rho)
    ms = ms * rho + grad * grad * (one - rho)
    mom = mom * momentum + lr * grad / np.sqrt(ms - mg * mg + epsilon)
    return [var - mom, mg, ms, mom]


def _adagrad_v2(a, attrs):
    var, accum, lr, epsilon, grad = a
    if attrs["update_slots"]:
        accum = accum + grad * grad
    return [var - lr * grad / (np.sqrt(accum) + epsilon), accum]


_update_op("ResourceApplyKerasMomentum", ("var", "accum"), ("lr", "grad", "momentum"), "T",
           [_LOCKING, _NESTEROV], _keras_momentum, _apply_shapes((0, 2), 1))
_update_op("ResourceApplyRMSProp", ("var", "ms", "mom"),
           ("lr", "rho", "momentum", "epsilon", "grad"), "T", [_LOCKING], _rms_prop,
           _apply_shapes((0, 1, 2, 3), 4))
_update_op("ResourceApplyCenteredRMSProp", ("var", "mg", "ms", "mom"),
           ("lr", "rho", "momentum", "epsilon", "grad"), "T", [_LOCKING], _centered_rms_prop,
           _apply_shapes((0, 1, 2, 3), 4))
_update_op("ResourceApplyAdagradV2", ("var", "accum"), ("lr", "epsilon", "grad"), "T",
           [_LOCKING, Attr("update_slots", "bool", True)], _adagrad_v2,
           _apply_shapes((0, 1), 2))

# TensorFlow marks every one of these stateful: a handle's creation and destruction, and
# each read or write of a variable's value.
for _name in ("VarHandleOp", "DestroyResourceOp", "ReadVariableOp", "AssignVariableOp",
              "AssignAddVariableOp", "AssignSubVariableOp", "ResourceApplyGradientDescent",
              "ResourceApplyMomentum", "ResourceApplyAdam", "ResourceApplyKerasMomentum",
              "ResourceApplyRMSProp", "ResourceApplyCenteredRMSProp", "ResourceApplyAdagradV2"):
    OPS[_name].is_stateful = True
