"""Dispatch and placement: where an op runs and how.

`execute(op, inputs, attrs)` is the one way an op runs, whichever front end called it
(`pluggable.raw_ops`, `pluggable.ops`, Tensor operators). It:

1. converts inputs to tensors and completes the attributes (type attributes from the inputs,
   defaults from the op definition), checking both;
2. picks the device: the innermost ``with pluggable.device(...)`` scope (per thread and per
   asyncio task), else the plugin device of the first input that lives on one, else the CPU;
3. picks, among the kernels the device's own plugin registered for (op, device type, type
   attributes), the one with the highest priority; two at that priority make the call fail
   with InvalidArgumentError, as TensorFlow's lookup does. Without one, soft placement (on by
   default) runs the op on the CPU and warns once per op and device type; strict placement raises `NotFoundError` listing the kernels
   registered for the op;
4. runs it: on the CPU with the op's NumPy reference kernel; on a plugin device on its compute
   stream, with inputs copied to the device first as TensorFlow does, and outputs allocated
   by the kernel from the device's allocator.

While a gradient tape records (`pluggable.eager.tape`), the compiled entry points hand every
op to the tape's recorder, which runs it the same way (`_compiled.run_untaped`) and records
it; with no tape they test one pointer and go on.

Memory follows TensorFlow's stream-ordered rule: device memory freed by a tensor is reused
only by work enqueued later on the device's compute stream, and the other streams wait for
the compute stream before they write to memory they were just given.
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..devices.device import PluggableDevice
from ..base.dtypes import DType, as_dtype, has_tensors, op_dtype, resource, type_names
from ..base.errors import (InternalError, InvalidArgumentError, NotFoundError, PlacementWarning,
                           PluggableError, ResourceExhaustedError, UnimplementedError, warn)
from ..oplib.core import OPS, REQUIRED, OpDef, TensorMeta, bad, select_condition_shape
from ..kernels import registry as _registry
from ..kernels.plugin_ops import plugin_of
from ..base.native import compiled as _compiled
from ..kernels.registry import output_guard_report, set_output_guards
from ..tensors.placement import (CPU_DEVICE, device, device_scope, scoped_device,  # noqa: F401
                                 soft_placement)
from ..tensors.tensor import Tensor, check_fits, tensor as make_tensor
from .resources import find_state

__all__ = ["device", "execute", "set_soft_device_placement", "get_soft_device_placement",
           "set_log_device_placement", "get_log_device_placement", "PlacementWarning"]

placement_log = logging.getLogger("pluggable.placement")


_scope = device_scope  # tensors.placement owns it: new tensors follow the scope too
# "general": every call takes the general path, no remembered plan (placement logging and
# the synchronise-after-every-op mode both need each call to pass through Python).
_SYNC_VARIABLE = "PLUGGABLE_SYNC_EVERY_OP"
_settings = {"soft": True, "log": False,
             "sync": os.environ.get(_SYNC_VARIABLE, "") not in ("", "0")}
_settings["general"] = _settings["sync"]
set_output_guards(_settings["sync"])
# "tape": a gradient tape records in some thread (set by eager.tape); paths that run a plan
# without the compiled entry points (Tensor indexing) take the general path then.
_settings["tape"] = False
_warned: set = set()
_warned_lock = threading.Lock()
# The host tracer of a running profiling session, or None (set by pluggable.profiler): the
# one check an op pays when no session runs.
_tracer = None


def set_soft_device_placement(enabled: bool) -> None:
    """With soft placement (the default), an op without a kernel on its device runs on the
    CPU, and so do the ops of a scope naming a device type no plugin provides; without it,
    both raise `NotFoundError`."""
    _settings["soft"] = bool(enabled)
    soft_placement["enabled"] = bool(enabled)


def get_soft_device_placement() -> bool:
    return _settings["soft"]


def set_log_device_placement(enabled: bool) -> None:
    """Logs the device each op runs on (logger ``pluggable.placement``, to stderr unless
    logging is configured otherwise)."""
    _settings["log"] = bool(enabled)
    _settings["general"] = _settings["log"] or _settings["sync"]
    if enabled and not placement_log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        placement_log.addHandler(handler)
        placement_log.setLevel(logging.INFO)
        placement_log.propagate = False


def get_log_device_placement() -> bool:
    return _settings["log"]


def set_sync_every_op(enabled: bool) -> None:
    """With it, every op on a plugin device waits for the device's work before it returns
    and raises the error of work that failed, naming the op: a debugging mode (as
    TensorFlow's GPU device has) that finds the op whose stream work fails, at the cost of
    all overlap between host and device. ``PLUGGABLE_SYNC_EVERY_OP=1`` turns it on at
    start-up."""
    _settings["sync"] = bool(enabled)
    _settings["general"] = _settings["log"] or _settings["sync"]
    set_output_guards(_settings["sync"])


def get_sync_every_op() -> bool:
    return _settings["sync"]


def _synchronize_after(op: OpDef, target: PluggableDevice) -> None:
    """The synchronise-after-every-op mode's wait: the error of failed work names the op;
    then the guard bytes after the op's outputs and temporaries (a kernel that wrote past the
    end of one)."""
    try:
        target.synchronize()
    except PluggableError as exc:
        output_guard_report()  # the run's guards: its outputs are not handed out
        raise type(exc)(f"{op.name} on {target.name}: the device work it enqueued failed "
                        f"(found by synchronising after every op): {exc}", plugin=exc.plugin,
                        call=op.name, plugin_message=exc.plugin_message) from exc
    overwritten = output_guard_report()
    if overwritten:
        raise InternalError(
            f"{op.name} on {target.name}: {overwritten} (found by the guard bytes of the "
            f"synchronise-after-every-op mode); the memory after it may belong to "
            f"another tensor, so values on {target.name} are not to be trusted. Report this "
            f"to the plugin's authors", plugin=target.platform.label, call=op.name)


# -- attributes ---------------------------------------------------------------------------
def _check_attr(op: OpDef, name: str, value: Any) -> Any:
    """``value`` converted to the kind of attribute ``name``, or an error naming both."""
    spec = op.attr(name)
    kind = spec.kind
    element = kind[5:-1] if kind.startswith("list(") else kind
    if element in _NOT_FOR_KERNELS or kind == "list(shape)":
        raise UnimplementedError(
            f"{op.name}: attribute {name} is a {kind}, and pluggable cannot give {kind} "
            f"attributes to kernels yet (only int, float, bool, type, string, shape and "
            f"lists of the first five)", call=op.name)
    try:
        if kind == element:
            value = _attr_value(element, value)
        else:
            if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
                raise TypeError
            value = tuple(_attr_value(element, v) for v in value)
    except (TypeError, ValueError):
        raise bad(op.name, f"attribute {name} must be a {kind}, got {value!r}") from None
    values = value if kind != element else (value,)
    if element == "type" and any(arg.type_attr == name for arg in op.inputs + op.outputs):
        # Only a type of tensors needs tensor support; a kernel takes any type's code.
        for dtype in values:
            if not has_tensors(dtype):
                raise UnimplementedError(
                    f"{op.name}: attribute {name}={dtype.name}: pluggable has no "
                    f"{dtype.name} tensors yet (dtype {dtype.name} is not supported for "
                    f"tensors), so {op.name} cannot run with it", call=op.name)
    if spec.minimum is not None:
        size = value if kind == "int" else len(values)
        if size < spec.minimum:
            what = f"attribute {name}={value}" if kind == "int" else \
                f"the length of attribute {name} ({size})"
            raise bad(op.name, f"{what} must be at least {spec.minimum}")
    if spec.allowed is not None:
        for v in values:
            if v not in spec.allowed:
                allowed = ", ".join(getattr(a, "name", repr(a)) for a in spec.allowed)
                what = v.name if element == "type" else repr(v)
                raise bad(op.name, f"{name}={what} is not supported; allowed: {allowed}")
    return value


# Attribute kinds a kernel cannot be given through PG_Attr (kernels.c) yet. (A shape is
# given as its list of dimensions, -1 for an unknown one; None is an unknown rank.)
_NOT_FOR_KERNELS = frozenset(("tensor", "func"))


def _attr_value(kind: str, value: Any) -> Any:
    if kind == "type":
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            try:
                return as_dtype(value)
            except (TypeError, InvalidArgumentError):
                pass
            try:  # qint8 and the other types without tensors
                return op_dtype(value)
            except InvalidArgumentError:
                raise TypeError from None
        return as_dtype(value)
    if kind == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError
        return bool(value)
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    if kind == "string":
        if not isinstance(value, str):
            raise TypeError
        return value
    if kind == "shape":
        if value is None:
            return None
        if isinstance(value, (str, bytes)):
            raise TypeError
        return tuple(-1 if d is None else int(d) for d in value)
    raise TypeError


def _complete_attrs(op: OpDef, given: Mapping[str, Any]) -> Dict[str, Any]:
    known = {a.name for a in op.attrs}
    for name in given:
        if name not in known:
            raise bad(op.name, f"unknown attribute {name!r}; {op.name} has "
                               f"{', '.join(sorted(known)) or 'no attributes'}")
    return {name: _check_attr(op, name, value) for name, value in given.items()}


# -- inputs -------------------------------------------------------------------------------
def _convert_inputs(op: OpDef, inputs: Sequence[Any], attrs: Dict[str, Any]) -> List[Tensor]:
    """Tensors for every input, with the type attributes they determine set in ``attrs``."""
    if len(inputs) != len(op.inputs):
        raise bad(op.name, f"takes {len(op.inputs)} inputs "
                           f"({', '.join(a.name for a in op.inputs)}), got {len(inputs)}")
    if any(arg.number_attr for arg in op.inputs):
        inputs = _flatten_lists(op, inputs, attrs)
    args = op.flat_inputs(attrs)
    # Objects that stand for a tensor (pluggable.Variable): its handle for a resource input,
    # else its value.
    inputs = [v.__pluggable_tensor__(arg.dtype is resource)
              if hasattr(type(v), "__pluggable_tensor__") else v for arg, v in zip(args, inputs)]
    # Type attributes from tensors first, then from NumPy data, so Python numbers take their
    # dtype.
    for kinds in (Tensor, (np.ndarray, np.generic)):
        for arg, value in zip(args, inputs):
            if arg.type_attr and arg.type_attr not in attrs and isinstance(value, kinds):
                attrs[arg.type_attr] = _check_attr(op, arg.type_attr, as_dtype(value.dtype))
    converted = []
    for arg, value in zip(args, inputs):
        wanted = arg.dtype or (attrs.get(arg.type_attr) if arg.type_attr else None)
        if not isinstance(value, Tensor):
            if wanted is None:
                value = _natural_tensor(op, arg, value)
            else:
                try:
                    value = make_tensor(value, dtype=wanted, device=CPU_DEVICE)
                except InvalidArgumentError as exc:
                    raise bad(op.name, f"input {arg.name}: {exc}") from None
        if arg.type_attr:
            if arg.type_attr not in attrs:
                attrs[arg.type_attr] = _check_attr(op, arg.type_attr, value.dtype)
            elif value.dtype != attrs[arg.type_attr]:
                raise bad(op.name, f"input {arg.name} is {value.dtype.name} but "
                                   f"{arg.type_attr} is {attrs[arg.type_attr].name}: inputs "
                                   f"sharing {arg.type_attr} must have one dtype (use "
                                   f"pluggable.ops.cast)")
        elif arg.dtype is not None and value.dtype != arg.dtype:
            raise bad(op.name, f"input {arg.name} must be {arg.dtype.name}, got "
                               f"{value.dtype.name}")
        converted.append(value)
    return converted


def _natural_tensor(op: OpDef, arg, value: Any) -> Tensor:
    """A host tensor of ``value`` when nothing fixes its type: TensorFlow's inference
    (Python float -> float32, int -> int32), then the type attribute's default where it is
    of the same kind, as TensorFlow's op helper prefers it (Python ints as int64 for an int64
    attribute)."""
    natural = make_tensor(value, device=CPU_DEVICE)
    default = op.attr(arg.type_attr).default if arg.type_attr else REQUIRED
    if (default is REQUIRED or natural.dtype == default
            or isinstance(value, (np.ndarray, np.generic))
            or natural.dtype.numpy_dtype.kind != default.numpy_dtype.kind):
        return natural
    try:
        return make_tensor(value, dtype=default, device=CPU_DEVICE)
    except InvalidArgumentError:
        return natural


def _flatten_lists(op: OpDef, inputs: Sequence[Any], attrs: Dict[str, Any]) -> List[Any]:
    """The inputs with each list input ("N * T") spread out, its length in ``attrs``."""
    flat: List[Any] = []
    for arg, value in zip(op.inputs, inputs):
        if not arg.number_attr:
            flat.append(value)
            continue
        if isinstance(value, Tensor) or not isinstance(value, (list, tuple)):
            raise bad(op.name, f"input {arg.name} must be a list or tuple of tensors, got "
                               f"{type(value).__name__}")
        given = attrs.get(arg.number_attr)
        if given is not None and given != len(value):
            raise bad(op.name, f"{arg.number_attr}={given} but input {arg.name} holds "
                               f"{len(value)} tensors")
        attrs[arg.number_attr] = _check_attr(op, arg.number_attr, len(value))
        flat.extend(value)
    return flat


def _host_values(op: OpDef, tensors: List[Tensor], attrs: Dict[str, Any]
                 ) -> List[Optional[np.ndarray]]:
    return [t.numpy() if arg.host else None for arg, t in zip(op.flat_inputs(attrs), tensors)]


def _output_dtypes(op: OpDef, attrs: Dict[str, Any]) -> List[DType]:
    return [arg.dtype or attrs[arg.type_attr] for arg in op.flat_outputs(attrs)]


# -- placement ----------------------------------------------------------------------------
def _target_device(tensors: Sequence[Tensor]):
    if _scope.get() is not None:
        return scoped_device()
    for t in tensors:
        if t._device is not CPU_DEVICE:
            return t._device
    return CPU_DEVICE


def _find_kernel(op: OpDef, device: PluggableDevice, attrs: Dict[str, Any]):
    registry = _registry
    # Only the kernels of the plugin whose device it is (two plugins may register one device
    # type; RFC 262 keys kernels by the platform too), and those of kernel libraries, which
    # have no device of their own and serve every device of the types they name.
    own, shared = device.platform.path, registry.kernel_libraries
    candidates = [r for r in registry.registered_kernels(op.name, device.device_type)
                  if (r.plugin == own or r.plugin in shared) and r.matches(attrs)]
    return _highest(op, device.name, attrs, candidates)


# The op library's NumPy reference stands, on the CPU, for TensorFlow's own CPU kernel: a
# registration at the default priority, 0, for every type the op allows.
BUILTIN_CPU_PRIORITY = 0


def _find_cpu_kernel(op: OpDef, attrs: Dict[str, Any]):
    """The plugin kernel registered for "CPU" that runs ``op`` on the CPU, or None when the
    op's NumPy reference does: TensorFlow's rule, with the reference as a kernel of priority
    `BUILTIN_CPU_PRIORITY`. Two at the highest priority (the reference one of them) raise
    InvalidArgumentError, as TensorFlow's lookup does."""
    registered = _registry.registered_kernels(op.name, "CPU")
    if not registered:  # the common case: a few hundred nanoseconds
        return None
    candidates = [r for r in registered if r.matches(attrs)]
    if not candidates:
        return None
    builtin = plugin_of(op) is None and not attrs.get("_kernel")
    if builtin and max(r.priority for r in candidates) < BUILTIN_CPU_PRIORITY:
        return None
    return _highest(op, CPU_DEVICE.name, attrs, candidates, builtin)


def _highest(op: OpDef, device_name: str, attrs: Dict[str, Any], candidates: List,
             builtin: bool = False):
    """The candidate of the highest priority; ``builtin``: the op library's reference kernel
    competes at `BUILTIN_CPU_PRIORITY` (it is never returned)."""
    if not candidates:
        return None
    best = max(candidates, key=lambda r: r.priority)
    tied = [r for r in candidates if r.priority == best.priority]
    if len(tied) + (builtin and best.priority == BUILTIN_CPU_PRIORITY) > 1:
        tied = [_kernel_summary(r) for r in tied]  # made for the message only
        if builtin and best.priority == BUILTIN_CPU_PRIORITY:
            tied.insert(0, f"pluggable's own CPU kernel for {op.name} (its NumPy reference, "
                           f"standing for TensorFlow's), priority {BUILTIN_CPU_PRIORITY}")
        # TensorFlow keeps every registration and refuses, at lookup, a node that two of
        # them match at the highest priority.
        plugins = sorted({r.plugin for r in candidates if r.priority == best.priority})
        raise InvalidArgumentError(
            f"Multiple OpKernel registrations match NodeDef at the same priority "
            f"'{op.name}' on {device_name} ({_type_summary(op, attrs)}): "
            f"'{tied[0]}' and '{tied[1]}'"
            + (f" (and {len(tied) - 2} more)" if len(tied) > 2 else "")
            + f". TensorFlow refuses this call too; the plugin ({', '.join(plugins)}) must "
            f"register them with different priorities, type constraints or labels. "
            f"pluggable.config.list_kernels({op.name!r}) lists the kernels",
            call=op.name)
    return best


def has_kernel(op_name: str, device, attrs: Mapping[str, Any]) -> bool:
    """Whether ``op_name`` with type attributes ``attrs`` runs a kernel of its own on
    ``device``: a plugin's kernel there, or on the CPU the op's host kernel or NumPy
    reference (it has one for every op it defines)."""
    op = OPS.get(op_name)
    if op is None or op.missing:
        return False
    if device is CPU_DEVICE:
        return True
    return _find_kernel(op, device, dict(attrs)) is not None


def _kernel_summary(r) -> str:
    constraints = "; ".join(f"{attr} in {{{_list(type_names(codes))}}}"
                            for attr, codes in sorted(r.constraints.items()))
    label = f" label {r.label!r}" if r.label else ""
    return (f"kernel {r.kernel_name} for {r.op} on {r.device_type}, priority {r.priority}"
            f"{label}, {constraints or 'any type'}")


def _type_attrs(op: OpDef, attrs: Dict[str, Any]) -> List[str]:
    """``name=dtype`` for each type attribute of the call."""
    return [f"{a.name}={attrs[a.name].name}" for a in op.attrs
            if a.kind == "type" and a.name in attrs]


def _type_summary(op: OpDef, attrs: Dict[str, Any]) -> str:
    return ", ".join(_type_attrs(op, attrs)) or "no type attributes"


def _no_kernel(op: OpDef, device: PluggableDevice, attrs: Dict[str, Any]) -> None:
    from ..kernels.registry import registered_kernels

    summary = _type_summary(op, attrs)
    if _settings["soft"]:
        key = (op.name, device.device_type)
        with _warned_lock:
            first = key not in _warned
            _warned.add(key)
        if first:
            types = f" for {summary}" if _type_attrs(op, attrs) else ""
            warn(
                f"{op.name} has no {device.device_type} kernel{types}; it runs on the "
                f"CPU instead (soft placement; this is said once per op). "
                f"pluggable.config.list_kernels({op.name!r}) shows the kernels there are",
                PlacementWarning)
        return
    # One line per device type, with the types its kernels take together.
    by_type: Dict[str, Dict[str, set]] = {}
    for r in registered_kernels(op.name):
        merged = by_type.setdefault(r.device_type, {})
        for attr, codes in r.constraints.items():
            merged.setdefault(attr, set()).update(codes)
    listing = "; ".join(
        f"{device_type} ({', '.join(f'{k} in {{{_list(type_names(v))}}}' for k, v in sorted(c.items())) or 'any type'})"
        for device_type, c in sorted(by_type.items())) or "none"
    raise NotFoundError(
        f"no kernel for {op.name} on {device.name} with {summary} and soft placement is off. "
        f"Kernels registered for {op.name}: {listing}; the CPU runs it for "
        f"{_cpu_types(op)}. Enable soft placement (pluggable.config.set_soft_device_placement"
        f"(True)) or run it on another device", call=op.name)


def _list(names) -> str:
    return ", ".join(names)


def _cpu_types(op: OpDef) -> str:
    parts = [f"{a.name} in {{{', '.join(t.name for t in a.allowed)}}}" for a in op.attrs
             if a.kind == "type" and a.allowed]
    return "; ".join(parts) or "any type"


# -- execution ----------------------------------------------------------------------------
# -- the fast path ------------------------------------------------------------------------
# An op run on a plugin device, with tensor inputs already there and no attributes given,
# is remembered as a plan under (op, scope, each input's dtype, shape and device): the
# checks, inference, kernel choice and the kernel's request were made once; a new run only
# fills in the input addresses.
_plans: Dict[Tuple, "_Plan"] = {}
_MAX_PLANS = 4096


class _Plan(_compiled.Plan):
    """How to run one op on one device for given input types and shapes (`pluggable._compiled`
    runs it): ``run(tensors)`` takes the device inputs, returns the outputs, or None when the
    plan went stale (streams replaced, kernels changed or closed). Every run of a plugin
    kernel by dispatch is a plan's run; one that can serve later calls is kept in `_plans`.

    ``constants`` are the host-memory inputs the plan's request points to (a reshape's
    shape, a variable's handle), kept alive with it."""

    __slots__ = ("key", "kernel_name", "inputs", "constants", "host_inputs")


_plan_key = _compiled.plan_key  # (op, scope, each input's dtype code, shape and device)
_fast_execute = _compiled.execute
_fast_execute_constants = _compiled.execute_constants


def execute(op_name: str, inputs: Sequence[Any], attrs: Optional[Mapping[str, Any]] = None,
            _record: Optional[list] = None) -> List[Tensor]:
    """Runs ``op_name`` on ``inputs`` with ``attrs``; returns its outputs.

    ``_record`` is the host tracer's: a list that receives the slow path's choice of device
    and kernel (the fast path records its runs itself)."""
    if _record is not None:  # the host tracer's own run: no lookup, the choices recorded
        key = _plan_key(op_name, inputs) if not attrs and not _settings["general"] else None
        return _execute(op_name, inputs, attrs, key, _record)
    if not attrs:
        outputs = _fast_execute(op_name, inputs)  # a remembered plan, in C
        if outputs is not None:
            return outputs
    # A remembered plan with attributes or host values, in C; else the call's key.
    found = _fast_execute_constants(op_name, inputs, attrs)
    if type(found) is list:
        return found
    return _missed(op_name, inputs, attrs, found)


def _missed(op_name: str, inputs: Sequence[Any], attrs: Optional[Mapping[str, Any]],
            found: Optional[Tuple]) -> List[Tensor]:
    """`execute` once the lookups in C found no plan (`_compiled.run` and `ops` call it after
    their own): ``found`` is the call's key with constants, None when it has none."""
    if _tracer is not None:
        return _tracer.op(op_name, inputs, attrs)
    if _settings["general"]:
        return _execute(op_name, inputs, attrs, None)
    if _resource_flags(op_name) is not None:
        resource_key = _resource_key(op_name, inputs, attrs)
        if resource_key is not None:
            run = _resource_runs.get(resource_key)
            if run is not None:
                outputs = run.run(op_name, inputs)
                if outputs is not None:
                    return outputs
                _resource_runs.pop(resource_key, None)  # general path says why (or remakes it)
            return _execute(op_name, inputs, attrs, None, resource_key=resource_key)
    key = _plan_key(op_name, inputs) if not attrs else None
    if key is None and found is not None and found not in _unplannable:
        outputs = execute_with_constants(found, op_name, inputs, attrs or {})
        if found not in _plans:
            if len(_unplannable) >= _MAX_PLANS:
                _unplannable.clear()
            _unplannable.add(found)
        return outputs
    return _execute(op_name, inputs, attrs, key)


_compiled.bind_dispatch(_plans, _settings, _missed)

# -- remembered runs of ops on variables ----------------------------------------------------
# An op with resource inputs (an optimizer's ResourceApply*, AssignAddVariableOp,
# ReadVariableOp) names its variables by handle, a host value, so neither kind of plan above
# keys it, and each call used to take the general path (100-250 µs of checks, inference and
# kernel preparation). Its run (the plugin kernel's plan, or the host's kernel) is remembered
# under a key of the op, the handle tensors themselves (the run keeps them, so their ids stay
# theirs), the other inputs' dtype, shape and device, and the attributes. A repeated call
# checks what inference checked that can have changed since: each variable is alive and its
# value has the shape it had (an assignment of another shape makes the general path run
# again); a plan's run then checks the values are intact, runs and marks the variables
# written, as the general path does (the host's kernels check and mark themselves).
_resource_runs: Dict[Tuple, "_ResourceRun"] = {}
# Op name -> per input, whether it is a resource (None: the op's calls are not remembered).
_resource_inputs: Dict[str, Optional[Tuple[bool, ...]]] = {}


def _resource_flags(op_name: str) -> Optional[Tuple[bool, ...]]:
    flags = _resource_inputs.get(op_name, False)
    if flags is False:
        op = OPS.get(op_name)
        if op is None:
            return None  # not kept: a plugin may register the op later
        flags = tuple(arg.dtype is resource for arg in op.inputs)
        if not any(flags) or any(arg.number_attr or (arg.host and arg.dtype is not resource)
                                 for arg in op.inputs):
            flags = None
        _resource_inputs[op_name] = flags
    return flags


def _resource_key(op_name: str, inputs: Sequence[Any],
                  attrs: Optional[Mapping[str, Any]]) -> Optional[Tuple]:
    """The key of a call of an op on variables, None when a part cannot be keyed (an input
    that is not a tensor, or a variable where a value is wanted; unhashable attributes)."""
    flags = _resource_inputs[op_name]
    if len(inputs) != len(flags):
        return None
    parts: List[Any] = [op_name]
    for is_resource, x in zip(flags, inputs):
        if type(x) is not Tensor:
            if not is_resource or not hasattr(type(x), "__pluggable_tensor__"):
                return None
            x = x.__pluggable_tensor__(True)
            if type(x) is not Tensor:
                return None
        if is_resource:
            if x._dtype is not resource:
                return None
            parts.append(id(x))
        else:
            parts.append((x._dtype, x._shape, x._device))
    if attrs:
        try:
            parts.append(frozenset(attrs.items()))  # hashes each item: TypeError if it cannot
        except TypeError:
            return None
    return tuple(parts)


class _ResourceRun:
    """A remembered run of an op on variables (see _resource_runs): a plugin kernel's plan
    (``plan``), or the host's own kernel (``plan`` None: a read, an assignment the plugin has
    no kernel for, a variable on the CPU), run with the attributes the first call completed."""

    __slots__ = ("plan", "host_kernel", "attrs", "handles", "states", "shapes", "values",
                 "target", "writes", "generation")

    def __init__(self, plan, op: OpDef, attrs, handles, states, shapes, values, target):
        self.plan, self.host_kernel, self.attrs = plan, op.host_kernel, attrs
        # The kernel registry's then: a kernel registered, enabled or disabled since may
        # change the choice (a plan checks its own).
        self.generation = _registry.generation
        self.handles, self.states, self.shapes = handles, states, shapes
        self.values, self.target = values, target
        self.writes = op.name not in _READS_VARIABLES

    def run(self, op_name: str, inputs: Sequence[Any]) -> Optional[List[Tensor]]:
        """The outputs, or None when the general path must run the call."""
        for state, shape in zip(self.states, self.shapes):
            if not state.live or state.shape() != shape:
                return None
        if self.plan is None:
            if self.generation != _registry.generation:
                return None
            tensors = list(inputs)
            for i, handle in enumerate(self.handles):
                if handle is not None:
                    tensors[i] = handle
            return self.host_kernel(self.target, tensors, dict(self.attrs))
        if op_name != "AssignVariableOp":  # as _intact_variable: it may replace a lost value
            for state in self.states:
                state.check_intact(op_name)
        outputs = self.plan.run([inputs[i] for i in self.values])
        if outputs is not None and self.writes:
            stream = self.target.compute_stream
            for state in self.states:
                state.written(stream)
        return outputs


def _keep_resource_run(key: Tuple, plan: Optional["_Plan"], op: OpDef, target, registration,
                       tensors: List[Tensor], attrs: Dict[str, Any], shapes) -> None:
    """Remembers a run of an op on variables: the plugin kernel's ``plan`` when it serves
    every call with ``key`` (its other inputs are tensors on ``target`` in device memory, the
    outputs' shapes are known), or a run of the host's kernel (``plan`` None). Its variables'
    values must have known shapes."""
    if plan is not None and any(shape is None for shape in shapes):
        return
    handles, states, state_shapes, values = [], [], [], []
    for i, (arg, t) in enumerate(zip(op.inputs, tensors)):
        if t._dtype is resource:
            state = find_state(t.numpy())
            shape = state.shape() if state is not None else None
            if shape is None:
                return
            handles.append(t)
            states.append(state)
            state_shapes.append(shape)
            continue
        handles.append(None)
        if plan is not None:
            if arg.name in registration.host_memory or t._device is not target:
                return  # a value the plan would keep, or one each call moves
            values.append(i)
    if len(_resource_runs) >= _MAX_PLANS:
        _resource_runs.clear()
    _resource_runs[key] = _ResourceRun(plan, op, dict(attrs), tuple(handles), tuple(states),
                                       tuple(state_shapes), tuple(values), target)


# -- plans with attributes and host values --------------------------------------------------
# A call with attributes, or with host-memory inputs given as values (a reshape's shape, a
# reduction's axis), is remembered too, under a key that holds the attributes and those
# values as well: `ops.reduce_sum(x, axis=0)` repeated costs one plan run, not the general
# path (~50 µs). The key is built, and a repeated call run, in C (_compiled/constplans.c). Keys
# whose run could not be remembered (the op's inputs do not suit a plan, or it ran on the
# CPU) are kept in _unplannable so they are not tried again.
_unplannable: set = set()
# Op name -> whether each input is in host memory (None: the op's calls are never keyed),
# filled by _host_flags the first time the C side asks about an op.
_host_inputs: Dict[str, Optional[Tuple[bool, ...]]] = {}


def _host_flags(op_name: str) -> Optional[Tuple[bool, ...]]:
    op = OPS.get(op_name)
    if op is None:
        return None  # not kept: a plugin may register the op later
    if op.host_kernel is not None or any(arg.number_attr for arg in op.inputs):
        flags = None
    else:
        flags = tuple(bool(arg.host) for arg in op.inputs)
    _host_inputs[op_name] = flags
    return flags


_compiled.bind_constants(_host_inputs, _host_flags, CPU_DEVICE, np.ndarray)
# The key of a remembered run with constants (`execute_with_constants`): the op, the device
# scope, each device input's dtype, shape and device, each host input's value and the
# attributes; None when a part cannot be keyed (an input that is not a tensor where the op
# wants one in device memory, or is a tensor on the CPU, a host input given as a tensor, a
# list input, a value that is unhashable, NaN, or an array of more than 64 elements), and
# for a call with neither attributes nor host inputs (its plan is the plain one).
_constant_plan_key = _compiled.constant_plan_key


def _execute(op_name: str, inputs: Sequence[Any], attrs: Optional[Mapping[str, Any]],
             key: Optional[Tuple], record: Optional[list] = None,
             constant_key: Optional[Tuple] = None,
             resource_key: Optional[Tuple] = None) -> List[Tensor]:
    """The general path: checks, placement, inference, then the device's kernel (through a
    plan, kept under ``key`` or ``constant_key`` when it can serve those calls again), the
    host's own kernel, or the op's NumPy reference on the CPU."""
    op = OPS.get(op_name)
    if op is None:
        raise NotFoundError(f"there is no op named {op_name!r}; pluggable.raw_ops lists them",
                            call="execute")
    if op.missing:
        raise UnimplementedError(op.missing, call=op.name)
    attrs = _complete_attrs(op, attrs or {})
    tensors = _convert_inputs(op, inputs, attrs)
    for spec in op.attrs:
        if spec.name not in attrs:
            if spec.default is REQUIRED:
                raise bad(op.name, f"attribute {spec.name} is required")
            attrs[spec.name] = _check_attr(op, spec.name, spec.default)
    target = _target_device(tensors)
    for t in tensors:  # an op on a variable runs where the variable lives, as in TensorFlow
        if t._dtype is resource:
            target = t._device
            break
    host = _host_values(op, tensors, attrs)
    shapes = op.infer([TensorMeta(t._shape, t.dtype) for t in tensors], attrs, host)
    out_dtypes = _output_dtypes(op, attrs)
    if target is not CPU_DEVICE and not op.host_only:
        registration = _find_kernel(op, target, attrs)
        if registration is not None:
            _check_output_sizes(op, shapes, out_dtypes, target)
            _log(op, target)
            if record is not None:
                record.append(_choice(target, registration.kernel_name, False, tensors))
            try:
                outputs, plan = _run_on_device(op, target, registration, tensors, host, attrs,
                                               shapes, out_dtypes)
            except BaseException:
                if _settings["sync"]:
                    output_guard_report()  # gives back the temporaries its guards hold
                raise
            if key is not None and _serves_plain_calls(op, target, tensors, shapes):
                _keep_plan(key, plan, tensors)
            elif constant_key is not None and _serves_constant_calls(op, target, registration,
                                                                     tensors, shapes):
                _keep_plan(constant_key, plan, tensors)
            elif resource_key is not None:
                _keep_resource_run(resource_key, plan, op, target, registration, tensors,
                                   attrs, shapes)
            if _settings["sync"]:
                _synchronize_after(op, target)
            return outputs
        if op.host_kernel is None:
            _no_kernel(op, target, attrs)
    if op.host_kernel is not None:  # the host's own kernel, for any device
        _check_output_sizes(op, shapes, out_dtypes, target)
        _log(op, target)
        if record is not None:
            record.append(_choice(None if target is CPU_DEVICE else target, None, False,
                                  tensors))
        outputs = op.host_kernel(target, tensors, attrs)
        if _settings["sync"] and target is not CPU_DEVICE:
            _synchronize_after(op, target)
        if resource_key is not None:
            _keep_resource_run(resource_key, None, op, target, None, tensors, attrs, shapes)
        return outputs
    cpu_kernel = _find_cpu_kernel(op, attrs)
    _log(op, CPU_DEVICE)
    if record is not None:
        record.append(_choice(None, cpu_kernel and cpu_kernel.kernel_name,
                              target is not CPU_DEVICE, tensors))
    _check_output_sizes(op, shapes, out_dtypes, CPU_DEVICE)
    if cpu_kernel is not None:
        return _run_on_cpu(op, cpu_kernel, tensors, attrs, shapes, out_dtypes)
    arrays = [t.numpy() for t in tensors]
    try:
        outputs = op.cpu(arrays, attrs)
        result = []
        for array, shape, dtype in zip(outputs, shapes, out_dtypes):
            array = np.ascontiguousarray(array, dtype=dtype.numpy_dtype)
            if shape is None:  # known from the values only: the kernel's word
                shape = array.shape
            array = array.reshape(shape)
            array.flags.writeable = False
            result.append(Tensor(shape, dtype, CPU_DEVICE, array=array))
    except MemoryError as e:
        if isinstance(e, PluggableError):
            raise
        raise ResourceExhaustedError(
            f"out of host memory running {op.name} on the CPU (outputs of "
            f"{_describe_sizes(shapes, out_dtypes)}): {e or 'no message'}. Free arrays and "
            f"tensors you no longer need or work on smaller pieces.", call=op.name) from None
    return result


def _output_bytes(shapes, out_dtypes) -> int:
    total = 0
    for shape, dtype in zip(shapes, out_dtypes):
        if shape is not None and None not in shape:
            count = 1
            for n in shape:
                count *= n
            total += count * dtype.itemsize
    return total


def _describe_sizes(shapes, out_dtypes) -> str:
    return ", ".join(f"shape {tuple(shape) if shape is not None else '(unknown)'} "
                     f"{dtype.name}" for shape, dtype in zip(shapes, out_dtypes))


def _check_output_sizes(op: OpDef, shapes, out_dtypes, device) -> None:
    """Refuses, before anything is allocated, an op whose outputs need more memory than the
    device where it runs has (`check_fits`). Every output whose shape the op's inference
    knows counts, whatever its size. A remembered plan is made only after this passed, and
    neither its outputs nor the device's limit change, so its runs need no check of their
    own."""
    check_fits(op.name, _output_bytes(shapes, out_dtypes), device,
               "for its outputs", lambda: _describe_sizes(shapes, out_dtypes))


def _choice(device, kernel_name, fallback: bool, tensors: List[Tensor]) -> Tuple:
    """What the slow path chose, for the host tracer: (device or None for the CPU, kernel
    name, whether a plugin device fell back to the CPU, input (shape, dtype name) pairs)."""
    return (device, kernel_name, fallback, _described(tensors))


def _described(tensors: List[Tensor]) -> Tuple:
    """(shape, dtype name) of each input, as the host tracer shows them."""
    return tuple((t._shape, t.dtype.name) for t in tensors)


def _log(op: OpDef, target) -> None:
    if _settings["log"]:
        placement_log.info("Executing op %s in device %s", op.name, target.name)


_kernel_cache: Dict[Tuple, Any] = {}
_kernel_cache_lock = threading.Lock()


def _kernel_instance(registration, device: Optional[PluggableDevice], attrs: Dict[str, Any]):
    """The cached instance of ``registration`` for ``device`` (None: the CPU) and ``attrs``."""
    key = (id(registration), "CPU" if device is None else device.executor.ordinal,
           tuple(sorted((k, v if not isinstance(v, list) else tuple(v)) for k, v in attrs.items())))
    kernel = _kernel_cache.get(key)
    if kernel is None or kernel.is_closed:
        with _kernel_cache_lock:
            kernel = _kernel_cache.get(key)
            if kernel is None or kernel.is_closed:
                kernel = registration.instantiate(registration.op, attrs)
                _kernel_cache[key] = kernel
    return kernel


def _run_on_cpu(op: OpDef, registration, tensors: List[Tensor], attrs: Dict[str, Any],
                shapes: List[Optional[Tuple[int, ...]]], out_dtypes: List[DType]
                ) -> List[Tensor]:
    """Runs a plugin's CPU kernel on the calling thread, as TensorFlow runs a DEVICE_CPU
    kernel: inputs and outputs are host memory (the outputs' arrays are the memory the
    kernel allocated, not copies)."""
    KernelInput, free_host_output = _registry.KernelInput, _registry.free_host_output
    host_output_array = _registry.host_output_array
    arrays = [np.ascontiguousarray(t.numpy()) for t in tensors]
    inputs = [KernelInput(a.__array_interface__["data"][0] if a.nbytes else 0, a.nbytes,
                          int(t.dtype.tf_code), t.shape, True) for a, t in zip(arrays, tensors)]
    kernel = _kernel_instance(registration, None, attrs)
    outputs = kernel.run(None, None, inputs, [int(d.tf_code) for d in out_dtypes])
    for out, shape, dtype in zip(outputs, shapes, out_dtypes):
        if out.dtype != dtype.tf_code or (shape is not None and tuple(out.shape) != shape):
            for other in outputs:  # what the caller would have owned
                if other.owned:
                    free_host_output(other.address)
            raise InternalError(
                f"{registration.plugin}: CPU kernel {registration.kernel_name} for {op.name} "
                f"returned an output of type code {out.dtype} and shape {out.shape}; the op "
                f"says {dtype.name} and {shape}", call=op.name)
    result = []
    for out, dtype in zip(outputs, out_dtypes):
        array = host_output_array(out, dtype.numpy_dtype, arrays)
        array.flags.writeable = False
        result.append(Tensor(tuple(out.shape), dtype, CPU_DEVICE, array=array))
    return result


def _serves_plain_calls(op: OpDef, target: PluggableDevice, tensors: List[Tensor],
                       shapes) -> bool:
    """Whether the plan of this run can serve every call with the same plain key (op, scope,
    each input's dtype, shape and device): all inputs device tensors on ``target``, none
    whose value the kernel or the output shapes depend on."""
    return not (any(arg.host or arg.number_attr for arg in op.inputs) or op.name == "Select"
                or op.host_kernel is not None
                or any(shape is None for shape in shapes)
                or any(t._device is not target for t in tensors))


def _serves_constant_calls(op: OpDef, target: PluggableDevice, registration,
                           tensors: List[Tensor], shapes) -> bool:
    """Whether the plan of this run can serve every call with the same key with constants
    (`execute_with_constants`): its host inputs are the plan's constants and its other
    inputs are the caller's tensors on ``target``."""
    if any(arg.number_attr for arg in op.inputs) or any(s is None for s in shapes):
        return False
    for arg, t in zip(op.inputs, tensors):
        if arg.host != (arg.name in registration.host_memory or t._dtype is resource):
            return False  # a host value the kernel wants in device memory: uploaded per call
        if not arg.host and (type(t) is not Tensor or t._device is not target):
            return False
    return True


def _keep_plan(key, plan: "_Plan", tensors: List[Tensor]) -> None:
    if len(_plans) >= _MAX_PLANS:
        _plans.clear()
    plan.key, plan.inputs = key, _described(tensors)  # what the host tracer shows of its runs
    _plans[key] = plan


def execute_with_constants(key: Tuple, op_name: str, inputs: Sequence[Any],
                           attrs: Mapping[str, Any]) -> List[Tensor]:
    """`execute` for an op whose host inputs are NumPy arrays that do not change for a given
    ``key`` (which must say everything else too: the scope, each tensor input's dtype, shape
    and device, the attributes). On a plugin device, the run is remembered as a plan with
    those arrays in it, so a repeated call costs what a repeated AddV2 does."""
    if not _settings["general"]:
        plan = _plans.get(key)
        if plan is not None:
            op = OPS[op_name]
            outputs = plan.run([x for x, arg in zip(inputs, op.inputs) if not arg.host],
                               op_name)
            if outputs is not None:
                return outputs
    if _tracer is not None:  # recorded; no plan is made while a session runs
        return _tracer.op(op_name, inputs, attrs)
    return _execute(op_name, inputs, attrs, None,
                    constant_key=None if _settings["general"] else key)


def _count(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


#: Ops with resource inputs that only read the variables (any other may write them).
_READS_VARIABLES = frozenset({"ReadVariableOp", "VariableShape", "VarIsInitializedOp",
                              "ResourceGather"})


def _intact_variable(op_name: str, handle: np.ndarray):
    """The state of the variable of a resource input to a plugin kernel (None for a handle
    that names none: the kernel reports that), after checking that its value is intact: an
    op that reads it must not compute from a value failed work left unwritten.
    AssignVariableOp replaces the value, so it may run on a lost one."""
    state = find_state(handle)
    if state is not None and op_name != "AssignVariableOp":
        state.check_intact(op_name)
    return state


def _kernel_inputs(op: OpDef, target: PluggableDevice, registration, tensors: List[Tensor],
                   host: List[Optional[np.ndarray]], attrs: Dict[str, Any]):
    """What a run of ``registration`` on ``target`` reads: ``(args, constants, by_index,
    device_inputs, variables)``. Inputs the kernel reads in host memory (and variables'
    handles) are host arrays (``constants``); the others are moved to ``target`` first
    (``device_inputs``). ``by_index`` holds, per input, its host array or its device tensor;
    ``variables`` the states of the variables of resource inputs."""
    KernelInput = _registry.KernelInput
    args, constants, by_index, device_inputs = [], [], [], []
    variables = []
    for arg, t, values in zip(op.flat_inputs(attrs), tensors, host):
        if arg.name in registration.host_memory or t._dtype is resource:
            array = np.asarray(values if values is not None else t.numpy(), order="C")
            if t._dtype is resource:
                variables.append(_intact_variable(op.name, array))
            constants.append(array)
            by_index.append(array)
            args.append(KernelInput(array.__array_interface__["data"][0] if array.nbytes else 0,
                                    array.nbytes, int(t.dtype.tf_code), t._shape, True))
            continue
        if t._device is not target:
            t = t.to(target)
        shape = t._shape
        if op.name == "Select" and arg.name == "condition":
            shape = select_condition_shape(shape, tensors[1]._shape)
        args.append(KernelInput(t._buffer.address, t.nbytes, int(t.dtype.tf_code), shape,
                                False))
        by_index.append(t)
        device_inputs.append(t)
    return args, constants, by_index, device_inputs, variables


def _mark_written(op: OpDef, target: PluggableDevice, variables) -> None:
    if op.name not in _READS_VARIABLES:
        for state in variables:
            if state is not None:
                state.written(target.compute_stream)


def _run_on_device(op: OpDef, target: PluggableDevice, registration, tensors: List[Tensor],
                   host: List[Optional[np.ndarray]], attrs: Dict[str, Any],
                   shapes: List[Optional[Tuple[int, ...]]], out_dtypes: List[DType]):
    """Runs the op's kernel on ``target`` and returns ``(outputs, plan)``: the run is a plan's
    (`pluggable._compiled.Plan`), the same C code that runs every repeated call, which stamps,
    checks and wraps the outputs. Inputs the kernel reads in host memory (and variables'
    handles) are the plan's constants; the others are moved to ``target`` first. Outputs the
    kernel keeps in host memory are allocated there (`_host_output` makes their tensors)."""
    kernels = _registry
    args, constants, by_index, device_inputs, variables = _kernel_inputs(
        op, target, registration, tensors, host, attrs)
    host_outputs = registration.host_memory_outputs(
        [arg.name for arg in op.flat_outputs(attrs)])
    kernel = _kernel_instance(registration, target, attrs)
    prepared = kernel.prepare(target.executor, target.compute_stream, args,
                              [int(d.tf_code) for d in out_dtypes], fixed_host_inputs=True,
                              output_host_memory=host_outputs)
    plan = _Plan(target, prepared,
                 [(tuple(shape), dtype, _count(shape) * dtype.itemsize) if shape is not None
                  else (None, dtype, -1) for shape, dtype in zip(shapes, out_dtypes)],
                 kernels.generation)
    plan.key, plan.inputs = None, None
    plan.kernel_name, plan.constants = registration.kernel_name, constants
    # What a host-memory output aliasing a host-memory input is a view of.
    plan.host_inputs = tuple(a if type(a) is np.ndarray else None for a in by_index) \
        if host_outputs is not None else ()
    outputs = plan.run(device_inputs)
    if outputs is None:  # made a moment ago: only a closed device or kernel makes it stale
        target.executor._check_open()
        raise InternalError(f"{registration.plugin}: kernel {registration.kernel_name} for "
                            f"{op.name} could not run on {target.name}: its plan was stale "
                            f"as soon as it was made", call=op.name)
    _mark_written(op, target, variables)
    return outputs, plan


def _host_output(plan: "_Plan", address: int, nbytes: int, dtype: DType,
                 shape: Tuple[int, ...], owned: bool, aliased_input: int) -> Tensor:
    """The tensor of an output a plan's kernel kept in host memory (TensorFlow's
    ``HostMemory("output")``: Shape's and the other shape ops'), which the kernel wrote
    during its compute call; `pluggable._compiled` calls it for each such output. It is a
    tensor of the plan's device, as TensorFlow names such a tensor by the op's device: its
    values stay on the host, in the kernel's memory (``numpy()`` and host-memory inputs of
    later ops read them without waiting for the device), and a copy is uploaded for the
    device's kernels. An owned output's memory is freed with the last array over it."""
    output = _KernelOutput(address, nbytes, int(dtype.tf_code), shape, owned, aliased_input,
                           True)
    values = _host_output_array(output, dtype.numpy_dtype, plan.host_inputs)
    values.flags.writeable = False
    copy = make_tensor(values, dtype, plan.device)
    return Tensor(shape, dtype, plan.device, array=values, buffer=copy._buffer,
                  ready=copy._ready)


_KernelOutput = _registry.KernelOutput
_host_output_array = _registry.host_output_array
_compiled.bind_host_outputs(_host_output, _registry.free_host_output)
