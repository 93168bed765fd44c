"""The op library as TensorFlow's protos (tensorflow/core/framework/op_def.proto and
attr_value.proto): `op_list` serializes ops as an OpList, the answer of TF_GetAllOpList, and
`attr_value` one attribute value, which KernelDefs use too. Field numbers are TensorFlow's;
the bytes parse with TensorFlow's own ``op_def_pb2``."""
from __future__ import annotations

import struct
from typing import Any, Iterable, Optional

from ..base.proto import integer, message, packed, text, varint
from .core import REQUIRED, Arg, Attr, OpDef

# AttrValue's fields (a oneof: a set field is written even when it holds a default value).
_S, _I, _F, _B, _TYPE, _SHAPE, _LIST = 2, 3, 4, 5, 6, 7, 1
# AttrValue.ListValue's repeated fields.
_LIST_FIELDS = {"string": 2, "int": 3, "float": 4, "bool": 5, "type": 6, "shape": 7}


def _type_code(value: Any) -> int:
    return int(getattr(value, "tf_code", value))


def _shape(dims: Optional[Iterable[int]]) -> bytes:
    """A TensorShapeProto: None is an unknown rank, -1 an unknown dimension."""
    if dims is None:
        return integer(3, 1)  # unknown_rank
    return b"".join(message(2, integer(1, int(d))) for d in dims)


def _scalar(kind: str, value: Any) -> Optional[bytes]:
    """The AttrValue body of one value of ``kind``; None for a kind not written here."""
    if kind == "int":
        return varint(_I << 3) + varint(int(value))
    if kind == "float":
        return varint(_F << 3 | 5) + struct.pack("<f", float(value))
    if kind == "bool":
        return varint(_B << 3) + varint(1 if value else 0)
    if kind == "type":
        return varint(_TYPE << 3) + varint(_type_code(value))
    if kind == "string":
        raw = value if isinstance(value, bytes) else str(value).encode("utf-8")
        return message(_S, raw)
    if kind == "shape":
        return message(_SHAPE, _shape(value))
    return None


def _list(kind: str, values: Iterable[Any]) -> Optional[bytes]:
    """The ListValue body of ``values`` of element ``kind``; None for a kind not written."""
    values = list(values)
    number = _LIST_FIELDS.get(kind)
    if number is None:
        return None
    if kind in ("int", "bool", "type"):
        codes = [_type_code(v) if kind == "type" else int(v) for v in values]
        return packed(number, codes)
    if kind == "float":
        return message(number, b"".join(struct.pack("<f", float(v)) for v in values)) \
            if values else b""
    if kind == "string":
        return b"".join(message(number, v if isinstance(v, bytes) else str(v).encode("utf-8"))
                        for v in values)
    return b"".join(message(number, _shape(v)) for v in values)


def attr_value(kind: str, value: Any) -> Optional[bytes]:
    """An AttrValue message holding ``value`` of attribute kind ``kind`` ("int",
    "list(type)", ...); None for kinds whose values are not written (tensors, functions)."""
    if kind.startswith("list(") and kind.endswith(")"):
        body = _list(kind[5:-1], value)
        return None if body is None else message(_LIST, body)
    return _scalar(kind, value)


def _arg_def(arg: Arg) -> bytes:
    out = text(1, arg.name)
    if arg.dtype is not None:
        out += integer(3, _type_code(arg.dtype))
    out += text(4, arg.type_attr or "") + text(5, arg.number_attr or "")
    return out


def _attr_def(attr: Attr) -> bytes:
    out = text(1, attr.name) + text(2, attr.kind)
    if attr.default is not REQUIRED:
        default = attr_value(attr.kind, attr.default)
        if default is not None:
            out += message(3, default)
    if attr.minimum is not None:
        out += integer(5, 1) + varint(6 << 3) + varint(int(attr.minimum))
    if attr.allowed:
        element = attr.kind[5:-1] if attr.kind.startswith("list(") else attr.kind
        allowed = _list(element, attr.allowed)
        if allowed is not None:
            out += message(7, message(_LIST, allowed))
    return out


def op_def(op: OpDef) -> bytes:
    """The OpDef message of ``op``: name, arguments, attributes (kind, default, minimum,
    allowed values), summary and is_stateful."""
    out = text(1, op.name)
    out += b"".join(message(2, _arg_def(a)) for a in op.inputs)
    out += b"".join(message(3, _arg_def(a)) for a in op.outputs)
    out += b"".join(message(4, _attr_def(a)) for a in op.attrs)
    out += text(5, op.doc.split("\n", 1)[0])
    return out + integer(17, op.is_stateful)


def op_list(ops: Iterable[OpDef]) -> bytes:
    """An OpList message of ``ops``."""
    return b"".join(message(1, op_def(op)) for op in ops)
