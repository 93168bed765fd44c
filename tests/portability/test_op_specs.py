"""TensorFlow's op-spec syntax (tensorflow/c/ops.h) as pluggable reads it: attributes with
kinds, allowed values, minimums and defaults; inputs and outputs by type attribute, fixed
type or list; and clear refusals for what it cannot use."""
from __future__ import annotations

import pytest

from pluggable import dtypes as dt
from pluggable.oplib.core import REQUIRED, Arg, Attr
from pluggable.kernels.plugin_ops import SpecError, parse_arg, parse_attr


@pytest.mark.parametrize("spec, expected", [
    ("T: type", Attr("T", "type")),
    ("T: {float, double} = DT_DOUBLE", Attr("T", "type", dt.float64, (dt.float32, dt.float64))),
    ("T: type = int32", Attr("T", "type", dt.int32)),
    ("n: int >= 2", Attr("n", "int", REQUIRED, None, 2)),
    ("n: int = -3", Attr("n", "int", -3)),
    ("scale: float = 0.5", Attr("scale", "float", 0.5)),
    ("flag: bool = true", Attr("flag", "bool", True)),
    ("flag:bool=false", Attr("flag", "bool", False)),
    ("mode: string = 'fast'", Attr("mode", "string", "fast")),
    ("mode: {'fast', 'slow'} = \"slow\"", Attr("mode", "string", "slow", ("fast", "slow"))),
    ("sizes: list(int) = [1, 2, 3]", Attr("sizes", "list(int)", (1, 2, 3))),
])
def test_attribute_specs(spec, expected):
    assert parse_attr(spec) == expected


@pytest.mark.parametrize("spec, words", [
    ("s: shape", "attribute kind 'shape' is not supported"),
    ("f: func", "attribute kind 'func' is not supported"),
    ("T: {float, quint8}", "type 'quint8' is not supported"),
    ("b: bool = yes", "bool default 'yes' is neither true nor false"),
    ("n: int = many", "default 'many' is not a int"),
    ("s: string = fast", "'fast' is not a quoted string"),
    ("l: list(int) = 1", "list default '1' is not [..]"),
])
def test_attribute_specs_refused(spec, words):
    with pytest.raises(SpecError) as info:
        parse_attr(spec)
    assert words in str(info.value)


ATTRS = {"T": Attr("T", "type"), "N": Attr("N", "int", REQUIRED, None, 1),
         "s": Attr("s", "string", "")}


@pytest.mark.parametrize("spec, expected", [
    ("x: T", Arg("x", type_attr="T")),
    ("x : float", Arg("x", dtype=dt.float32)),
    ("h: resource", Arg("h", dtype=dt.resource)),
    ("xs: N * T", Arg("xs", type_attr="T", number_attr="N")),
    ("xs: N*int64", Arg("xs", dtype=dt.int64, number_attr="N")),
])
def test_argument_specs(spec, expected):
    assert parse_arg(spec, ATTRS) == expected


@pytest.mark.parametrize("spec, words", [
    ("x: Ref(T)", "reference inputs, Ref(T), need TensorFlow's graph runtime"),
    ("x: s", "'s' in 'x: s' is not a type attribute"),
    ("x: T * T", "'T' in 'x: T * T' is not an int attribute"),
    ("x: string", "type 'string' is not supported"),
])
def test_argument_specs_refused(spec, words):
    with pytest.raises(SpecError) as info:
        parse_arg(spec, ATTRS)
    assert words in str(info.value)
