"""`pluggable.ops` and `pluggable.random` take TensorFlow's parameter names and defaults:
every function against the ``tf.*`` function of its name (tf, tf.math, tf.nn, tf.bitwise,
tf.random), as recorded from TensorFlow 2.21 in tests/data/tf_raw_ops_signatures.json."""
from __future__ import annotations

import pytest
from tf_record import TF as RECORD, parameters as _parameters

from pluggable import ops, random

TF = RECORD["functions"]
FUNCTIONS = [(name, getattr(ops, name)) for name in ops.__all__] + \
            [(f"random.{name}", getattr(random, name)) for name in random.__all__]


@pytest.mark.parametrize("name, function", FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
def test_signature_is_tensorflows(name, function):
    assert TF[name] is not None, f"TensorFlow has no function {name}"
    assert _parameters(function) == TF[name]["parameters"], TF[name]["tf"]


def test_every_function_is_recorded():
    assert sorted(TF) == sorted(n for n, _ in FUNCTIONS), \
        "re-run tests/data/record_tf_signatures.py"
