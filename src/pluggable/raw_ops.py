"""Every op by its TensorFlow name, called with keyword arguments as ``tf.raw_ops`` is:
``pluggable.raw_ops.AddV2(x=a, y=b)``, ``pluggable.raw_ops.MatMul(a=a, b=b,
transpose_b=True)``. Inputs and attributes are named as in TensorFlow's op definitions;
``name`` is accepted and ignored, as in eager TensorFlow."""
from __future__ import annotations

import inspect
from typing import Any, Callable

from .dispatch import execute
from .op_defs import OPS, REQUIRED, OpDef, bad


def _make(op: OpDef) -> Callable[..., Any]:
    inputs = [a.name for a in op.inputs]
    attrs = [a.name for a in op.attrs]

    def raw_op(**kwargs):
        kwargs.pop("name", None)
        missing = [n for n in inputs if n not in kwargs]
        if missing:
            raise bad(op.name, f"missing input(s) {', '.join(missing)}; {op.name} takes "
                               f"{', '.join(inputs)} as keyword arguments")
        unknown = [k for k in kwargs if k not in inputs and k not in attrs]
        if unknown:
            raise bad(op.name, f"unknown argument(s) {', '.join(unknown)}; inputs: "
                               f"{', '.join(inputs)}; attributes: {', '.join(attrs) or 'none'}")
        outputs = execute(op.name, [kwargs[n] for n in inputs],
                          {k: v for k, v in kwargs.items() if k in attrs})
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    parameters = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in inputs]
    parameters += [inspect.Parameter(a.name, inspect.Parameter.KEYWORD_ONLY,
                                     default=None if a.default is REQUIRED else a.default)
                   for a in op.attrs if a.kind != "type"]
    parameters.append(inspect.Parameter("name", inspect.Parameter.KEYWORD_ONLY, default=None))
    raw_op.__signature__ = inspect.Signature(parameters)
    raw_op.__name__ = raw_op.__qualname__ = op.name
    raw_op.__doc__ = (f"TensorFlow's {op.name}: inputs {', '.join(inputs)}; outputs "
                      f"{', '.join(a.name for a in op.outputs)}; attributes "
                      f"{', '.join(attrs) or 'none'}.")
    return raw_op


for _name, _op in OPS.items():
    globals()[_name] = _make(_op)

__all__ = sorted(OPS)
