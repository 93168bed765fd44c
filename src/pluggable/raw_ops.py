"""Every op by its TensorFlow name, called exactly as ``tf.raw_ops``: keyword arguments with
TensorFlow 2.21's Python names and defaults, ``name`` accepted and ignored as in eager
TensorFlow. ``pluggable.raw_ops.Sum(input=x, axis=0, keep_dims=True)``,
``pluggable.raw_ops.Select(condition=c, x=a, y=b)``, ``pluggable.raw_ops.MatMul(a=a, b=b,
transpose_b=True)``.

The parameters are the op's inputs, then its attributes that the inputs do not determine
(required ones first), then ``name``. TensorFlow's Python API renames a few OpDef arguments
(``reduction_indices`` is ``axis``, Select's ``t``/``e`` are ``x``/``y``, ...);
`PYTHON_NAMES` lists them. tests/frontend/test_raw_ops.py checks every signature against
TensorFlow's, recorded in tests/data.
"""
from __future__ import annotations

import inspect as _inspect
from typing import Any as _Any, Callable as _Callable, Dict as _Dict, List as _List

from .base.native import compiled as _compiled
from .eager.dispatch import execute as _execute
from .eager import OPS as _OPS
from .oplib.core import REQUIRED as _REQUIRED, OpDef as _OpDef, bad as _bad

_REDUCTION = {"reduction_indices": "axis"}
# OpDef argument name -> tf.raw_ops keyword, where they differ.
PYTHON_NAMES: _Dict[str, _Dict[str, str]] = {
    **{op: _REDUCTION for op in ("All", "Any", "Max", "Mean", "Min", "Prod", "Sum")},
    "ExpandDims": {"dim": "axis"},
    "Select": {"t": "x", "e": "y"},
    "Split": {"split_dim": "axis"},
    "SplitV": {"split_dim": "axis"},
    "Squeeze": {"squeeze_dims": "axis"},
    "Where": {"input": "condition"},
}


def parameters(op: _OpDef) -> _List[_inspect.Parameter]:
    """``tf.raw_ops``' parameters of ``op``: inputs, attributes the inputs do not determine
    (required first, then those with defaults, each group in OpDef order), ``name``."""
    names = PYTHON_NAMES.get(op.name, {})
    inferred = {a.type_attr for a in op.inputs} | {a.number_attr for a in op.inputs}
    attrs = [a for a in op.attrs if a.name not in inferred]
    attrs = ([a for a in attrs if a.default is _REQUIRED]
             + [a for a in attrs if a.default is not _REQUIRED])
    keyword = _inspect.Parameter.KEYWORD_ONLY
    params = [_inspect.Parameter(names.get(a.name, a.name), keyword) for a in op.inputs]
    params += [_inspect.Parameter(names.get(a.name, a.name), keyword) if a.default is _REQUIRED
               else _inspect.Parameter(names.get(a.name, a.name), keyword,
                                       default=list(a.default) if isinstance(a.default, tuple)
                                       else a.default)
               for a in attrs]
    params.append(_inspect.Parameter("name", keyword, default=None))
    return params


def _make(op: _OpDef) -> _Callable[..., _Any]:
    names = PYTHON_NAMES.get(op.name, {})
    inputs = [names.get(a.name, a.name) for a in op.inputs]
    signature = _inspect.Signature(parameters(op))
    # keyword -> OpDef attribute name, for the attributes one may pass
    keywords = set(signature.parameters)
    attrs = {names.get(a.name, a.name): a.name for a in op.attrs
             if names.get(a.name, a.name) in keywords}
    required = [p.name for p in signature.parameters.values() if p.default is p.empty]

    single = len(op.outputs) == 1 and not op.outputs[0].number_attr

    def raw_op(*args, **kwargs):
        if args:
            raise TypeError(f"raw_ops.{op.name} takes keyword arguments only, as "
                            f"tf.raw_ops does: {op.name}{signature}")
        kwargs.pop("name", None)
        missing = [n for n in required if n not in kwargs]
        if missing:
            kind = "input(s)" if all(n in inputs for n in missing) else "argument(s)"
            raise _bad(op.name, f"missing {kind} {', '.join(missing)}; {op.name} takes "
                                f"{op.name}{signature}")
        unknown = [k for k in kwargs if k not in inputs and k not in attrs]
        if unknown:
            raise _bad(op.name, f"unknown argument(s) {', '.join(unknown)}; {op.name} takes "
                                f"{op.name}{signature}")
        outputs = _execute(op.name, [kwargs[n] for n in inputs],
                           {attrs[k]: v for k, v in kwargs.items() if k in attrs})
        return outputs[0] if single else tuple(outputs)

    # Called with exactly its inputs, the op runs from its remembered plan in C; anything
    # else goes to raw_op above.
    fn = _compiled.RawOp(op.name, tuple(inputs), single, raw_op)
    fn.__signature__ = signature
    fn.__name__ = fn.__qualname__ = op.name
    fn.__module__ = __name__
    fn.__doc__ = (f"TensorFlow's {op.name}: inputs {', '.join(inputs) or 'none'}; outputs "
                  f"{', '.join(a.name for a in op.outputs)}; attributes "
                  f"{', '.join(a.name for a in op.attrs) or 'none'}.")
    return fn


for _name, _op in _OPS.items():
    globals()[_name] = _make(_op)

__all__ = sorted(_OPS)


def __dir__():
    # sorted(_OPS), not __all__: ops registered by plugins since the import are listed too
    return sorted(_OPS) + ["PYTHON_NAMES", "parameters"]


def __getattr__(name: str) -> _Any:
    # Ops that plugins register (tensorflow/c/ops.h) join the library when their plugin
    # loads, after this module was imported: discovery first, then the op if it exists.
    if name.startswith("_"):
        raise AttributeError(name)
    from .loader.plugin_manager import manager as _manager

    _manager().ensure_discovered()
    op = _OPS.get(name)
    if op is None:
        raise AttributeError(f"pluggable.raw_ops has no op {name!r} (no op of that name is "
                             f"defined or registered by a loaded plugin)")
    fn = globals()[name] = _make(op)
    return fn
