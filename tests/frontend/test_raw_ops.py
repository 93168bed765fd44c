"""`pluggable.raw_ops` takes exactly ``tf.raw_ops``' keyword names and defaults: every
signature against TensorFlow 2.21's, recorded in tests/data/tf_raw_ops_signatures.json (no
TensorFlow import), and calls written for ``tf.raw_ops`` run unchanged."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
from tf_record import TF as RECORD, parameters

from pluggable import raw_ops
from pluggable.errors import InvalidArgumentError
from pluggable.oplib.core import OPS

TF = RECORD["ops"]


def _ours(op):
    function = getattr(raw_ops, op)
    assert all(p.kind is p.KEYWORD_ONLY for p in inspect.signature(function).parameters.values())
    return parameters(function)


def _normalised(params):
    # TensorFlow's float defaults are float32 values printed as doubles.
    return [{**p, "value": round(p["value"], 6)} if isinstance(p.get("value"), float) else p
            for p in params]


@pytest.mark.parametrize("op", sorted(OPS))
def test_signature_is_tensorflows(op):
    assert _normalised(_ours(op)) == _normalised(TF[op]["parameters"])


def test_every_op_is_there_and_dir_shows_only_ops():
    assert set(TF) == set(OPS) and len(OPS) >= 100
    names = dir(raw_ops)
    assert set(OPS) <= set(names)
    assert not {"bad", "inspect", "np", "OPS", "execute", "OpDef"} & set(names)


def test_calls_written_for_tf_raw_ops_run_unchanged():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert raw_ops.Sum(input=x, axis=1).numpy().tolist() == [3, 12]
    assert raw_ops.Sum(input=x, axis=[0, 1], keep_dims=True).numpy().tolist() == [[15]]
    assert raw_ops.Select(condition=np.array([True, False]), x=x, y=-x).numpy().tolist() == \
        [[0, 1, 2], [-3, -4, -5]]
    assert raw_ops.MatMul(a=x, b=x, transpose_b=True, grad_a=False).numpy().tolist() == \
        [[5, 14], [14, 50]]
    assert raw_ops.Squeeze(input=x[None], axis=[0]).shape == (2, 3)
    assert raw_ops.ExpandDims(input=x, axis=-1).shape == (2, 3, 1)
    parts = raw_ops.Split(axis=1, value=x, num_split=3, name="split")
    assert [p.numpy().tolist() for p in parts] == [[[0], [3]], [[1], [4]], [[2], [5]]]
    assert raw_ops.Where(condition=x > 3).numpy().tolist() == [[1, 1], [1, 2]]
    assert raw_ops.Shape(input=x, out_type="int64").dtype == "int64"
    assert raw_ops.Cast(x=x, DstT="int32").dtype == "int32"


@pytest.mark.parametrize("call, error, match", [
    (lambda: raw_ops.Sum(input=np.ones(2), reduction_indices=0), InvalidArgumentError,
     r"Sum: missing input\(s\) axis; Sum takes Sum\(\*, input, axis, keep_dims=False"),
    (lambda: raw_ops.Sum(input=np.ones(2), axis=0, T="float32"), InvalidArgumentError,
     r"unknown argument\(s\) T"),
    (lambda: raw_ops.AddV2(np.ones(2), np.ones(2)), TypeError, "keyword arguments only"),
    (lambda: raw_ops.Cast(x=np.ones(2)), InvalidArgumentError, r"missing argument\(s\) DstT"),
])
def test_bad_calls_say_what_the_op_takes(call, error, match):
    with pytest.raises(error, match=match):
        call()
