"""Every OpDef of the library against TensorFlow 2.21's own, as recorded in
tests/data/tf_raw_ops_signatures.json (tests/data/record_tf_signatures.py; no TensorFlow
import here): input and output names, their type attributes, list lengths and fixed types,
attribute names, kinds, defaults and minimums, and types TensorFlow allows."""
from __future__ import annotations

import json
import os

import pytest

from pluggable.oplib.core import OPS, REQUIRED

RECORDED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                        "tf_raw_ops_signatures.json")
with open(RECORDED, encoding="utf-8") as f:
    TF = json.load(f)
KINDS = {"type": "type", "int": "int", "float": "float", "bool": "bool", "string": "string",
         "list(int)": "list(int)", "shape": "shape", "list(string)": "list(string)"}


def test_the_record_is_tensorflow_2_21_and_covers_every_op():
    assert TF["tensorflow"].startswith("2.21.")
    assert sorted(OPS) == sorted(TF["ops"]), "re-run tests/data/record_tf_signatures.py"


def _args(args):
    return [(a.name, a.type_attr or "", a.number_attr or "", a.dtype.name if a.dtype else "")
            for a in args]


def _recorded_args(args):
    return [(a["name"], a["type_attr"], a["number_attr"], a["type"]) for a in args]


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_def_matches_tensorflow(name):
    op, recorded = OPS[name], TF["ops"][name]["op_def"]
    assert _args(op.inputs) == _recorded_args(recorded["inputs"])
    assert _args(op.outputs) == _recorded_args(recorded["outputs"])
    theirs = {a["name"]: a for a in recorded["attrs"]}
    assert sorted(a.name for a in op.attrs) == sorted(theirs)
    for attr in op.attrs:
        tf_attr = theirs[attr.name]
        assert KINDS[attr.kind] == tf_attr["type"], attr.name
        default = tf_attr["default"]
        if attr.default is REQUIRED:
            assert default == {"required": True}, attr.name
        elif attr.kind == "type":
            assert attr.default.name == default, attr.name
        elif attr.kind == "float":
            assert attr.default == pytest.approx(default, rel=1e-6), attr.name
        else:
            assert (list(attr.default) if attr.kind.startswith("list") else attr.default) \
                == default, attr.name
        if attr.kind == "int" and tf_attr["has_minimum"]:
            assert attr.minimum == tf_attr["minimum"], attr.name
        if attr.kind == "type" and attr.allowed and tf_attr["allowed"]:
            extra = {t.name for t in attr.allowed} - set(tf_attr["allowed"])
            assert not extra, f"{name}.{attr.name} allows types TensorFlow refuses: {extra}"
