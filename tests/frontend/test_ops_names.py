"""`pluggable.ops` and `pluggable.random` take TensorFlow's parameter names and defaults:
every function against the ``tf.*`` function of its name (tf, tf.math, tf.nn, tf.bitwise,
tf.random), as recorded from TensorFlow 2.21 in tests/data/tf_raw_ops_signatures.json."""
from __future__ import annotations

import inspect
import json
import os

import pytest

from pluggable import ops, random

RECORDED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                        "tf_raw_ops_signatures.json")
with open(RECORDED, encoding="utf-8") as f:
    TF = json.load(f)["functions"]
FUNCTIONS = [(name, getattr(ops, name)) for name in ops.__all__] + \
            [(f"random.{name}", getattr(random, name)) for name in random.__all__]


def _parameters(function):
    out = []
    for p in inspect.signature(function).parameters.values():
        if p.default is p.empty:
            out.append({"name": p.name, "required": True})
        elif hasattr(p.default, "numpy_dtype"):
            out.append({"name": p.name, "dtype": p.default.name})
        else:
            out.append({"name": p.name, "value": p.default})
    return out


@pytest.mark.parametrize("name, function", FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
def test_signature_is_tensorflows(name, function):
    assert TF[name] is not None, f"TensorFlow has no function {name}"
    assert _parameters(function) == TF[name]["parameters"], TF[name]["tf"]


def test_every_function_is_recorded():
    assert sorted(TF) == sorted(n for n, _ in FUNCTIONS), \
        "re-run tests/data/record_tf_signatures.py"
