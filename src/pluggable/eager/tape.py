"""Gradient tapes: `GradientTape`, `stop_gradient` and the recording of ops.

While a tape records in some thread, the compiled per-op path hands every op to `_recorder`
(`pluggable._compiled.set_tape_recorder`), which runs it as usual (remembered plans
included) and records it on the tapes of the calling thread that are recording and that see
one of its inputs (a watched tensor or variable, or an output of an op already recorded).
With no tape recording anywhere, an op pays one pointer test in C.

A recorded op keeps its inputs, its outputs, its attributes and the device its outputs were
made on. `GradientTape.gradient` walks the recorded ops backwards from the targets and runs
each op's gradient function (`pluggable.eager.gradients`) on that device; those are ops too,
so a tape that records around another tape's `gradient` call records them, which is how
second derivatives are taken.

Tapes are per thread, as in TensorFlow: a tape records the ops of the thread that entered it.
"""
from __future__ import annotations

import contextlib
import enum
import threading
import warnings
import weakref
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..base.dtypes import resource
from ..base.errors import InvalidArgumentError, PluggableWarning, UnimplementedError
from ..base.native import compiled as _compiled
from ..oplib.core import OPS
from ..tensors.placement import CPU_DEVICE, device_scope
from ..tensors.tensor import Tensor, tensor as make_tensor
from . import gradients as _gradients
from .dispatch import _settings, execute

__all__ = ["GradientTape", "UnconnectedGradients", "stop_gradient", "GradientTapeWarning",
           "register_variable"]

_run_untaped = _compiled.run_untaped


class GradientTapeWarning(PluggableWarning):
    """A tape was used in a way that works but is probably not what was meant (a source of a
    dtype that has no gradient, a persistent tape's gradient taken while it records)."""


class UnconnectedGradients(enum.Enum):
    """What `GradientTape.gradient` returns for a source the target does not depend on:
    None (``NONE``, the default) or zeros of the source's shape (``ZERO``)."""

    NONE = "none"
    ZERO = "zero"


class _ThreadTapes(threading.local):
    def __init__(self):
        self.tapes: List["GradientTape"] = []  # the recording tapes, innermost last
        # their (tensor table, op list) pairs, which the compiled path records on; an empty
        # tuple while the thread is busy
        self.recording: Any = []
        # inside a recorded op's run (or stop_gradient's): the ops it runs itself are its own
        self.busy = False


def _untaped_here(op_name: str, inputs: Sequence[Any], attrs: Optional[dict]) -> List[Tensor]:
    """The op run with the thread busy: nothing it runs is recorded."""
    state = _state
    was_busy, recording = state.busy, state.recording
    state.busy, state.recording = True, ()
    try:
        return _run_untaped(op_name, inputs, attrs)
    finally:
        state.busy, state.recording = was_busy, recording


_state = _ThreadTapes()
_count_lock = threading.Lock()
_recording_count = 0  # tapes recording in all threads


def _started() -> None:
    global _recording_count
    with _count_lock:
        _recording_count += 1
        if _recording_count == 1:
            _compiled.set_tape_recorder(_recorder, _state, _recordable)
            _settings["tape"] = True


def _stopped() -> None:
    global _recording_count
    with _count_lock:
        _recording_count -= 1
        if _recording_count == 0:
            _compiled.set_tape_recorder(None)
            _settings["tape"] = False


# Handles of the trainable variables (id of the handle tensor -> the variable): a read of one
# is watched automatically. pluggable.Variable registers itself.
_variables: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()


def register_variable(variable: Any) -> None:
    """Makes reads of ``variable`` (a `pluggable.Variable`) visible to tapes that watch
    accessed variables (when it is trainable) and to `GradientTape.watched_variables`."""
    _variables[id(variable.handle)] = variable


def _is_variable(value: Any) -> bool:
    return hasattr(type(value), "__pluggable_tensor__")


def _trainable_dtype(dtype) -> bool:
    return dtype.is_floating or dtype.is_complex


# -- recording ----------------------------------------------------------------------------
_NOT_DIFFERENTIABLE = _gradients.NOT_DIFFERENTIABLE
# Op name -> (gradient function or None, per input: (a list input, a resource input)):
# what the recorder needs of an op, looked up once (None for an op it does not know).
_op_info: Dict[str, Tuple[Any, Optional[Tuple[Tuple[bool, bool], ...]]]] = {}
# Op name -> whether the compiled path may record the op itself: not declared
# non-differentiable, no list input, and not ReadVariableOp (whose recording watches the
# variable read). Filled as ops are first met.
_recordable: Dict[str, bool] = {}


def _info(op_name: str):
    info = _op_info.get(op_name)
    if info is None:
        op = OPS.get(op_name)
        kinds = None if op is None else tuple((bool(arg.number_attr), arg.dtype is resource)
                                              for arg in op.inputs)
        grad = _gradients.lookup(op_name)
        info = _op_info[op_name] = (grad, kinds)
        _recordable[op_name] = (kinds is not None and grad is not _NOT_DIFFERENTIABLE
                                and not any(is_list for is_list, _ in kinds)
                                and op_name != "ReadVariableOp")
    return info


_PLAIN = (Tensor, float, int)


def _read(value: Any, is_resource: bool) -> Any:
    """A variable given where a value is wanted, read here, so that the read is recorded
    (and the variable watched) as TensorFlow records it; anything else unchanged."""
    if type(value) in _PLAIN or not _is_variable(value):
        return value
    return value.__pluggable_tensor__(is_resource)


def _prepared(kinds, inputs: Sequence[Any]) -> Tuple[Sequence[Any], List[Any]]:
    """The inputs with variables read, and the same flattened (list inputs spread out)."""
    given, flat = [], []
    for (is_list, is_resource), value in zip(kinds, inputs):
        if is_list and isinstance(value, (list, tuple)):
            value = [_read(v, is_resource) for v in value]
            flat.extend(value)
        else:
            value = _read(value, is_resource)
            flat.append(value)
        given.append(value)
    return given, flat


def _recorder(op_name: str, inputs: Sequence[Any], attrs: Optional[dict]) -> List[Tensor]:
    """Runs the op and records it on the calling thread's recording tapes (the compiled path
    calls it while any tape records, for the ops it does not record itself)."""
    state = _state
    tapes = state.tapes
    if not tapes or state.busy:
        return _run_untaped(op_name, inputs, attrs)
    grad, kinds = _info(op_name)
    if grad is _NOT_DIFFERENTIABLE:
        return _untaped_here(op_name, inputs, attrs)
    flat = inputs
    if kinds is not None and len(kinds) == len(inputs):
        inputs, flat = _prepared(kinds, inputs)
    outputs = _untaped_here(op_name, inputs, attrs)
    for tape in tapes:
        tape._record(op_name, flat, attrs, outputs)
    return outputs


class _Recorded:
    """One op on a tape: what its gradient function reads."""

    __slots__ = ("name", "inputs", "outputs", "given_attrs", "grad", "device", "needed")

    def __init__(self, name, inputs, outputs, attrs, grad, device):
        self.name, self.inputs = name, inputs
        self.outputs, self.given_attrs, self.grad, self.device = outputs, attrs, grad, device
        self.needed: Tuple[bool, ...] = ()

    def attr(self, name: str) -> Any:
        """The attribute as given to the op, else its default."""
        if self.given_attrs and name in self.given_attrs:
            return self.given_attrs[name]
        return OPS[self.name].attr(name).default


class GradientTape:
    """Records the ops run inside ``with GradientTape() as tape:`` on the tensors it
    watches, to compute gradients with `gradient`, `jacobian` and `batch_jacobian`, as
    ``tf.GradientTape``.

    Trainable `pluggable.Variable`s are watched when read (unless
    ``watch_accessed_variables=False``); tensors are watched with `watch`. A tape can
    compute one set of gradients, and then frees what it recorded; a ``persistent=True``
    tape computes any number, until it is deleted or `reset`."""

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True):
        self._persistent = bool(persistent)
        self._watch_accessed = bool(watch_accessed_variables)
        self._recording = False
        self._owner: Optional[int] = None  # the thread the tape records in
        self._warned_inside = False
        self._tensors: Dict[int, Any] = {}
        self._ops: List[tuple] = []
        self._watched_variables: Dict[int, Any] = {}
        self._used = False

    def _clear(self) -> None:
        # id of a tensor on the tape -> the tensor itself when it is watched, else the
        # recorded op that made it (which holds it): either keeps it alive, so the id stays
        # its own. Both are emptied, never replaced: the compiled path holds them while the
        # tape records.
        self._tensors.clear()
        self._ops.clear()  # (op name, inputs, outputs, attributes) of each recorded op
        self._watched_variables.clear()
        self._used = False

    # -- the recording context -----------------------------------------------------------
    def __enter__(self) -> "GradientTape":
        if self._recording:
            raise ValueError("this GradientTape is already recording: a tape cannot be "
                             "entered again inside its own with block")
        self._push()
        return self

    def __exit__(self, *exc) -> None:
        if self._recording:
            self._pop()

    def _push(self) -> None:
        _state.tapes.append(self)
        _state.recording.append((self._tensors, self._ops))
        self._recording = True
        self._owner = threading.get_ident()
        _started()

    def _pop(self) -> None:
        if threading.get_ident() != self._owner:
            raise RuntimeError("a GradientTape must be left in the thread that entered it")
        tapes = _state.tapes
        for i in range(len(tapes) - 1, -1, -1):
            if tapes[i] is self:
                del tapes[i]
                del _state.recording[i]
                break
        self._recording = False
        _stopped()

    @contextlib.contextmanager
    def stop_recording(self) -> Iterator[None]:
        """A block in which the tape records nothing (the ops still run)::

            with tape.stop_recording():
                y = expensive_and_not_differentiated(x)
        """
        if not self._recording:
            raise ValueError("stop_recording: the tape is not recording (use it inside the "
                             "tape's with block)")
        self._pop()
        try:
            yield
        finally:
            self._push()

    def reset(self) -> None:
        """Forgets everything recorded and watched, as if a new tape had been entered."""
        self._clear()

    # -- watching ------------------------------------------------------------------------
    def watch(self, tensor: Any) -> None:
        """Records the ops that use ``tensor`` (a Tensor, a Variable, or a list, tuple or
        dict of them) from now on."""
        for value in _flatten(tensor):
            if isinstance(value, Tensor):
                dtype = value.dtype
            elif _is_variable(value):
                dtype = value.dtype
            else:
                raise ValueError(f"GradientTape.watch: an object of type "
                                 f"{type(value).__name__} is neither a pluggable Tensor nor a "
                                 f"Variable; pass tensors (pluggable.constant(...)) or "
                                 f"variables")
            if not _trainable_dtype(dtype):
                warnings.warn(f"GradientTape.watch: the watched tensor is {dtype.name}; only "
                              f"floating-point and complex tensors have gradients, so its "
                              f"gradient will be None", GradientTapeWarning, stacklevel=2)
            if _is_variable(value):
                self._watch_variable(value)
            else:
                self._tensors.setdefault(id(value), value)

    def _watch_variable(self, variable: Any) -> None:
        handle = variable.handle
        self._watched_variables[id(handle)] = variable
        self._tensors.setdefault(id(handle), handle)

    def watched_variables(self) -> Tuple[Any, ...]:
        """The variables this tape watches (explicitly or because they were read), in the
        order they were first watched."""
        return tuple(self._watched_variables.values())

    # -- recording -----------------------------------------------------------------------
    def _record(self, op_name: str, flat: Sequence[Any], attrs,
                outputs: List[Tensor]) -> None:
        tensors = self._tensors
        for value in flat:
            if id(value) in tensors:
                break
        else:
            if not (op_name == "ReadVariableOp" and self._watch_accessed and flat):
                return
            variable = _variables.get(id(flat[0]))
            if variable is None or not variable.trainable:
                return
            self._watch_variable(variable)
        entry = (op_name, tuple(flat), outputs, attrs)
        self._ops.append(entry)
        for out in outputs:
            tensors[id(out)] = entry

    # -- gradients -----------------------------------------------------------------------
    def gradient(self, target: Any, sources: Any, output_gradients: Any = None,
                 unconnected_gradients: Any = UnconnectedGradients.NONE) -> Any:
        """The gradient of ``target`` (a tensor, or a list or dict of them, whose gradients
        add up) with respect to each of ``sources`` (tensors or variables, nested as lists,
        tuples or dicts; the result has the same structure). ``output_gradients`` weights
        each target (default: ones). A source ``target`` does not depend on gets None, or
        zeros with ``unconnected_gradients=UnconnectedGradients.ZERO``."""
        unconnected = _unconnected(unconnected_gradients)
        self._check_usable("gradient")
        self._gradient_inside()
        try:
            result = self._gradient(_flatten(target), _flatten(sources),
                                    None if output_gradients is None
                                    else _flatten(output_gradients), unconnected)
        finally:
            self._release()
        return _pack(sources, result)

    def _check_usable(self, what: str) -> None:
        if self._used and not self._persistent:
            raise RuntimeError(f"GradientTape.{what}: a non-persistent GradientTape can only "
                               f"be used to compute one set of gradients (or jacobians); "
                               f"create it with persistent=True to compute more")

    def _gradient_inside(self) -> None:
        """TensorFlow's rule for a gradient taken inside the tape's own with block: a
        non-persistent tape stops recording; a persistent one records the gradient's ops
        too (what a higher derivative needs), which it warns about once."""
        if not self._recording:
            return
        if not self._persistent:
            self._pop()  # not entered again: the tape is spent
            return
        if not self._warned_inside:
            self._warned_inside = True
            warnings.warn("GradientTape.gradient was called inside the persistent tape's own "
                          "with block: the gradient's ops are recorded on the tape too, which "
                          "costs time and memory. Call it after the with block unless a "
                          "higher derivative of the gradient is wanted",
                          GradientTapeWarning, stacklevel=3)

    def _release(self) -> None:
        if not self._persistent:
            self._used = True
            self._tensors.clear()
            self._ops.clear()

    def _source_id(self, source: Any) -> int:
        if _is_variable(source):
            return id(source.handle)
        if isinstance(source, Tensor):
            return id(source)
        raise ValueError(f"GradientTape.gradient: a source of type {type(source).__name__} "
                         f"is neither a pluggable Tensor nor a Variable")

    def _gradient(self, targets: List[Any], sources: List[Any],
                  output_gradients: Optional[List[Any]],
                  unconnected: UnconnectedGradients) -> List[Any]:
        source_ids = [self._source_id(s) for s in sources]
        if output_gradients is not None and len(output_gradients) != len(targets):
            raise InvalidArgumentError(
                f"GradientTape.gradient: {len(output_gradients)} output_gradients for "
                f"{len(targets)} targets; give one per target (or None)", call="gradient")
        grads: Dict[int, List[Any]] = {}
        tensors = self._tensors
        for i, target in enumerate(targets):
            if _is_variable(target):
                target = target.read_value()
            if not isinstance(target, Tensor):
                raise ValueError(f"GradientTape.gradient: a target of type "
                                 f"{type(target).__name__} is not a pluggable Tensor")
            if id(target) not in tensors:
                continue  # not computed on this tape from anything watched
            given = output_gradients[i] if output_gradients is not None else None
            if given is None:
                with _scoped(target._device):
                    given = execute("OnesLike", [target])[0]
            elif not isinstance(given, Tensor):
                given = make_tensor(given, dtype=target.dtype, device=target._device)
            if tuple(given.shape) != tuple(target.shape):
                raise InvalidArgumentError(
                    f"GradientTape.gradient: output_gradients[{i}] has shape "
                    f"{tuple(given.shape)} but its target has shape {tuple(target.shape)}; "
                    f"give one of the target's shape", call="gradient")
            grads.setdefault(id(target), []).append(given)
        wanted = set(source_ids)
        # The ops on a path from a source: only they are differentiated.
        leads = set(wanted)
        relevant = []
        for name, inputs, outputs, attrs in self._ops:
            for value in inputs:
                if id(value) in leads:
                    relevant.append(_Recorded(name, inputs, outputs, attrs,
                                              _gradients.lookup(name),
                                              outputs[0]._device if outputs else None))
                    leads.update(id(o) for o in outputs)
                    break
        for entry in reversed(relevant):
            out_grads = []
            for out in entry.outputs:
                pending = grads.get(id(out))
                if pending is None:
                    out_grads.append(None)
                    continue
                out_grads.append(_sum(pending, out))
                if id(out) not in wanted:
                    del grads[id(out)]
            if all(g is None for g in out_grads):
                continue
            if any(o.dtype.is_complex for o in entry.outputs):
                raise UnimplementedError(
                    f"GradientTape.gradient: {entry.name} has a complex output on the path to "
                    f"a source; pluggable does not differentiate complex tensors yet (their "
                    f"gradients need conjugates, and the op library has no Conj). Take the "
                    f"gradient of real tensors (split complex values into real parts first)",
                    call="gradient")
            if entry.grad is None:
                raise LookupError(f"No gradient defined for operation '{entry.name}' (op "
                                  f"type: {entry.name}): pluggable has no gradient function "
                                  f"for it; wrap the op in pluggable.stop_gradient if no "
                                  f"gradient should flow through it")
            input_ids = [id(v) for v in entry.inputs]
            entry.needed = tuple(i in leads for i in input_ids)
            with _scoped(entry.device):  # (None for an output nothing used)
                in_grads = entry.grad(entry, *out_grads)
            if len(in_grads) != len(entry.inputs):
                raise RuntimeError(f"the gradient function of {entry.name} returned "
                                   f"{len(in_grads)} gradients for {len(entry.inputs)} inputs")
            for i, g, needed in zip(input_ids, in_grads, entry.needed):
                if g is not None and needed:
                    grads.setdefault(i, []).append(g)
        result = []
        for source, sid in zip(sources, source_ids):
            pending = grads.get(sid)
            dtype = source.dtype
            if pending and _trainable_dtype(dtype):
                result.append(_sum(pending, source))
            elif unconnected is UnconnectedGradients.ZERO:
                with _scoped(_device_of(source)):
                    result.append(execute("ZerosLike", [source])[0])
            else:
                result.append(None)
        return result

    def jacobian(self, target: Any, sources: Any, unconnected_gradients: Any =
                 UnconnectedGradients.NONE, parallel_iterations=None,
                 experimental_use_pfor: bool = True) -> Any:
        """The Jacobian of ``target`` with respect to each source: for a source of shape S,
        a tensor of shape ``target.shape + S`` (one gradient per element of the target)."""
        unconnected = _unconnected(unconnected_gradients)
        self._check_usable("jacobian")
        self._gradient_inside()
        try:
            target = _as_target(target)
            flat_sources = _flatten(sources)
            n = target.size
            rows: List[List[Any]] = [[] for _ in flat_sources]
            for k in range(n):
                onehot = np.zeros(n, target.dtype.numpy_dtype)
                onehot[k] = 1
                weight = make_tensor(onehot.reshape(target.shape), device=target._device)
                for row, g in zip(rows, self._gradient([target], flat_sources, [weight],
                                                       unconnected)):
                    row.append(g)
            result = [_stacked(row, target.shape, source, 0, unconnected)
                      for row, source in zip(rows, flat_sources)]
        finally:
            self._release()
        return _pack(sources, result)

    def batch_jacobian(self, target: Any, source: Any, unconnected_gradients: Any =
                       UnconnectedGradients.NONE, parallel_iterations=None,
                       experimental_use_pfor: bool = True) -> Any:
        """For ``target`` of shape ``[b, y...]`` and ``source`` of shape ``[b, x...]``, where
        each row of the target depends only on the same row of the source, the per-row
        Jacobians: a tensor of shape ``[b, y..., x...]``."""
        unconnected = _unconnected(unconnected_gradients)
        self._check_usable("batch_jacobian")
        target = _as_target(target)
        source_shape = tuple(source.shape)
        if not target.shape or not source_shape or target.shape[0] != source_shape[0]:
            raise ValueError(f"batch_jacobian: the first dimension of the target (shape "
                             f"{target.shape}) and of the source (shape {source_shape}) must "
                             f"be the same batch dimension")
        self._gradient_inside()
        try:
            batch, rest = target.shape[0], target.shape[1:]
            n = int(np.prod(rest, dtype=np.int64))
            row = []
            for k in range(n):
                onehot = np.zeros((batch, n), target.dtype.numpy_dtype)
                onehot[:, k] = 1
                weight = make_tensor(onehot.reshape(target.shape), device=target._device)
                row.append(self._gradient([target], [source], [weight], unconnected)[0])
            result = _stacked(row, rest, source, 1, unconnected)
        finally:
            self._release()
        return result


# -- helpers ------------------------------------------------------------------------------
class _scoped:
    """The device scope of a recorded op (its gradient's ops run there)."""

    __slots__ = ("device", "token")

    def __init__(self, device):
        self.device = device

    def __enter__(self):
        self.token = device_scope.set(self.device) if self.device is not None else None

    def __exit__(self, *exc):
        if self.token is not None:
            device_scope.reset(self.token)


def _device_of(value: Any):
    if isinstance(value, Tensor):
        return value._device
    return getattr(getattr(value, "handle", None), "_device", CPU_DEVICE)


def _sum(pending: List[Any], like: Any) -> Any:
    if len(pending) == 1:
        return pending[0]
    with _scoped(_device_of(like)):
        return execute("AddN", [list(pending)])[0]


def _unconnected(value: Any) -> UnconnectedGradients:
    try:
        return UnconnectedGradients(value.value if isinstance(value, UnconnectedGradients)
                                    else value)
    except ValueError:
        raise ValueError(f"unconnected_gradients must be UnconnectedGradients.NONE or "
                         f"UnconnectedGradients.ZERO ('none' or 'zero'), not "
                         f"{value!r}") from None


def _as_target(target: Any) -> Tensor:
    if _is_variable(target):
        target = target.read_value()
    if not isinstance(target, Tensor):
        raise ValueError(f"the target must be a pluggable Tensor, not "
                         f"{type(target).__name__}")
    return target


def _stacked(row: List[Any], lead: Tuple[int, ...], source: Any, axis: int,
             unconnected: UnconnectedGradients) -> Any:
    """The gradients of one source, one per target element, stacked at ``axis`` and
    reshaped so that the target's dimensions ``lead`` stand there."""
    if all(g is None for g in row):
        if unconnected is UnconnectedGradients.NONE:
            return None
    shape = tuple(source.shape)
    with _scoped(_device_of(source)):
        row = [execute("ZerosLike", [source])[0] if g is None else g for g in row]
        if not row:
            return make_tensor(np.zeros(tuple(lead) + shape if axis == 0 else
                                        shape[:1] + tuple(lead) + shape[1:],
                                        source.dtype.numpy_dtype), device=_device_of(source))
        stacked = execute("Pack", [row], {"axis": axis})[0]
        final = (tuple(lead) + shape if axis == 0
                 else shape[:1] + tuple(lead) + shape[1:])
        return execute("Reshape", [stacked, np.asarray(final, np.int64)])[0]


def _flatten(structure: Any) -> List[Any]:
    """The leaves of lists, tuples and dicts (dicts by sorted key, as tf.nest)."""
    if isinstance(structure, dict):
        return [leaf for key in sorted(structure) for leaf in _flatten(structure[key])]
    if isinstance(structure, (list, tuple)):
        return [leaf for item in structure for leaf in _flatten(item)]
    return [structure]


def _pack(structure: Any, leaves: List[Any]) -> Any:
    it = iter(leaves)

    def build(s):
        if isinstance(s, dict):
            built = {key: build(s[key]) for key in sorted(s)}
            return type(s)((key, built[key]) for key in s)
        if isinstance(s, (list, tuple)):
            items = [build(item) for item in s]
            if isinstance(s, tuple) and hasattr(s, "_fields"):
                return type(s)(*items)
            return type(s)(items)
        return next(it)

    return build(structure)


def stop_gradient(input: Any, name: Any = None) -> Tensor:  # noqa: A002
    """A tensor with ``input``'s value through which no gradient flows: tapes do not see
    the copy that makes it (tf.stop_gradient)."""
    return _untaped_here("Identity", [input], None)[0]
