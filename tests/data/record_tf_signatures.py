"""Records TensorFlow's view of every op pluggable defines, for tests that must not import
TensorFlow: the Python signature of ``tf.raw_ops.<Op>`` (parameter names and defaults), the
op's OpDef (input, output and attribute names, attribute kinds, defaults, minimums), and the
signatures of the ``tf.*`` functions `pluggable.ops` and `pluggable.random` mirror.

Run it with a TensorFlow 2.21 installation outside the project's environment, with the
project's ``src`` on the path (the op list comes from ``pluggable.oplib.core.OPS``)::

    /tmp/tfvenv/bin/python tests/data/record_tf_signatures.py > tests/data/tf_raw_ops_signatures.json
"""
from __future__ import annotations

import inspect
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "src"))

import tensorflow as tf  # noqa: E402
from tensorflow.python.framework import op_def_registry  # noqa: E402

from pluggable.oplib.core import OPS  # noqa: E402


def _default(value):
    """A parameter default as JSON: DTypes by name, everything else as is."""
    if value is inspect.Parameter.empty:
        return {"required": True}
    if isinstance(value, tf.dtypes.DType):
        return {"dtype": value.name}
    return {"value": value}


def _attr_value(attr_value):
    kind = attr_value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "type":
        return tf.dtypes.as_dtype(attr_value.type).name
    if kind == "list":
        lst = attr_value.list
        for field in ("i", "f", "b", "s", "type"):
            values = list(getattr(lst, field))
            if values:
                if field == "type":
                    return [tf.dtypes.as_dtype(v).name for v in values]
                if field == "s":
                    return [v.decode() for v in values]
                return values
        return []
    value = getattr(attr_value, kind)
    return value.decode() if isinstance(value, bytes) else value


def _op_def(name):
    op_def = op_def_registry.get(name)
    if op_def is None:
        return None

    def arg(a):
        return {"name": a.name, "type_attr": a.type_attr, "number_attr": a.number_attr,
                "type": tf.dtypes.as_dtype(a.type).name if a.type else ""}

    return {
        "inputs": [arg(a) for a in op_def.input_arg],
        "outputs": [arg(a) for a in op_def.output_arg],
        "attrs": [{"name": a.name, "type": a.type,
                   "default": _attr_value(a.default_value) if a.HasField("default_value")
                   else {"required": True},
                   "has_minimum": a.has_minimum, "minimum": a.minimum,
                   "allowed": _attr_value(a.allowed_values) if a.HasField("allowed_values")
                   else None}
                  for a in op_def.attr],
    }


def _function_signature(function):
    return [{"name": p.name, **_default(p.default)}
            for p in inspect.signature(function).parameters.values()]


def _functions():
    """The Python signatures of the ``tf.*`` functions `pluggable.ops` and
    `pluggable.random` provide, by pluggable's name ("reduce_sum", "random.uniform")."""
    import pluggable.ops
    import pluggable.random

    found = {}
    for name in pluggable.ops.__all__:
        for module in (tf, tf.math, tf.nn, tf.bitwise):
            function = getattr(module, name, None)
            if callable(function):
                found[name] = {"tf": f"{module.__name__.split('._api.v2.')[-1]}.{name}"
                                     .replace("tensorflow.", "tf."),
                               "parameters": _function_signature(function)}
                break
        else:
            found[name] = None
    for name in pluggable.random.__all__:
        found[f"random.{name}"] = {"tf": f"tf.random.{name}",
                                   "parameters": _function_signature(getattr(tf.random, name))}
    return found


def main():
    ops = {}
    for name in sorted(OPS):
        fn = getattr(tf.raw_ops, name, None)
        if fn is None:
            ops[name] = None
            continue
        signature = inspect.signature(fn)
        ops[name] = {
            "parameters": [{"name": p.name, **_default(p.default)}
                           for p in signature.parameters.values()],
            "op_def": _op_def(name),
        }
    json.dump({"tensorflow": tf.__version__, "ops": ops, "functions": _functions()},
              sys.stdout, indent=1,
              sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
