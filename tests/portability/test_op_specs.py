"""TensorFlow's op-spec syntax (tensorflow/c/ops.h) as pluggable reads it: attributes with
kinds, allowed values, minimums and defaults; inputs and outputs by type attribute, fixed
type or list; every attribute kind and every type of tf_datatype.h; and clear refusals for
what is not TensorFlow's syntax."""
from __future__ import annotations

import pytest

from pluggable import dtypes as dt
from pluggable.oplib.core import REQUIRED, Arg, Attr
from pluggable.base.dtypes import op_dtype
from pluggable.kernels.plugin_ops import SpecError, parse_arg, parse_attr

QINT8, QINT32 = op_dtype("qint8"), op_dtype("qint32")


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
    ("s: shape", Attr("s", "shape")),
    ("s: shape = [2, -1]", Attr("s", "shape", (2, -1))),
    ("t: tensor", Attr("t", "tensor")),
    ("f: func", Attr("f", "func")),
    ("fs: list(func) = []", Attr("fs", "list(func)", "[]")),
    ("ts: list(tensor)", Attr("ts", "list(tensor)")),
    ("Tout: list(type) >= 1", Attr("Tout", "list(type)", REQUIRED, None, 1)),
    ("Tin: list(type) = [DT_FLOAT, qint8]", Attr("Tin", "list(type)", (dt.float32, QINT8))),
    ("shapes: list(shape) = [[2, 3], [4]]", Attr("shapes", "list(shape)", ((2, 3), (4,)))),
    ("ws: list(float) = [0.5, 2]", Attr("ws", "list(float)", (0.5, 2.0))),
    ("names: list(string) = ['a', \"b\"]", Attr("names", "list(string)", ("a", "b"))),
    ("flags: list(bool) >= 2", Attr("flags", "list(bool)", REQUIRED, None, 2)),
    ("T: quantizedtype", Attr("T", "type", REQUIRED, tuple(map(op_dtype, (
        "qint8", "quint8", "qint16", "quint16", "qint32"))))),
    ("T: {float, quint8}", Attr("T", "type", REQUIRED, (dt.float32, op_dtype("quint8")))),
    ("T: {realnumbertype, quantizedtype, string}", Attr("T", "type", REQUIRED, tuple(map(
        op_dtype, ("float", "double", "int32", "int64", "uint8", "int16", "int8", "uint16",
                   "half", "uint32", "uint64", "bfloat16", "qint8", "quint8", "qint16",
                   "quint16", "qint32", "string"))))),
    ("T: numbertype = DT_QINT32", Attr("T", "type", QINT32, tuple(map(op_dtype, (
        "float", "double", "int64", "int32", "uint8", "uint16", "int16", "int8", "complex64",
        "complex128", "qint8", "quint8", "qint32", "half", "uint32", "uint64",
        "bfloat16"))))),
    ("Ts: list(realnumbertype)", Attr("Ts", "list(type)", REQUIRED, tuple(map(op_dtype, (
        "float", "double", "int32", "int64", "uint8", "int16", "int8", "uint16", "half",
        "uint32", "uint64", "bfloat16"))))),
    ("T: {variant, float8_e5m2, float8_e4m3fn, int4, uint2, float4_e2m1fn}", Attr(
        "T", "type", REQUIRED, tuple(map(op_dtype, (
            "variant", "float8_e5m2", "float8_e4m3fn", "int4", "uint2", "float4_e2m1fn"))))),
])
def test_attribute_specs(spec, expected):
    assert parse_attr(spec) == expected


@pytest.mark.parametrize("spec, words", [
    ("s: matrix", "attribute kind 'matrix' is not one of TensorFlow's"),
    ("l: list(shapes)", "attribute kind 'shapes' is not one of TensorFlow's"),
    ("T: {float, qint64}", "type 'qint64' is not a type of tensorflow/c/tf_datatype.h"),
    ("b: bool >= 1", "a minimum (>= 1) applies to int and list attributes, not to bool"),
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
         "s": Attr("s", "string", ""), "Tlist": Attr("Tlist", "list(type)")}


@pytest.mark.parametrize("spec, expected", [
    ("x: T", Arg("x", type_attr="T")),
    ("x : float", Arg("x", dtype=dt.float32)),
    ("h: resource", Arg("h", dtype=dt.resource)),
    ("xs: N * T", Arg("xs", type_attr="T", number_attr="N")),
    ("xs: N*int64", Arg("xs", dtype=dt.int64, number_attr="N")),
    ("x: string", Arg("x", dtype=op_dtype("string"))),
    ("q: qint8", Arg("q", dtype=op_dtype("qint8"))),
    ("xs: Tlist", Arg("xs", type_attr="Tlist")),
])
def test_argument_specs(spec, expected):
    assert parse_arg(spec, ATTRS) == expected


@pytest.mark.parametrize("spec, words", [
    ("x: Ref(T)", "reference inputs, Ref(T), need TensorFlow's graph runtime"),
    ("x: s", "'s' in 'x: s' is not a type attribute"),
    ("x: T * T", "'T' in 'x: T * T' is not an int attribute"),
    ("x: qint64", "type 'qint64' is not a type of tensorflow/c/tf_datatype.h"),
    ("xs: N * Tlist", "'Tlist' in 'xs: N * Tlist' is not a type attribute"),
])
def test_argument_specs_refused(spec, words):
    with pytest.raises(SpecError) as info:
        parse_arg(spec, ATTRS)
    assert words in str(info.value)
