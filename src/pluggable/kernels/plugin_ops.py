"""Ops that plugins register with tensorflow/c/ops.h, turned into ops of the library.

A plugin describes an op in its TF_InitKernel (TF_NewOpDefinitionBuilder, inputs, outputs and
attributes in TensorFlow's spec syntax, a shape function, TF_RegisterOpDefinition); the
runtime keeps the specs (ops.c). When the plugin's kernels are loaded, `adopt` parses each
new op's specs into an `OpDef` in `op_defs.OPS`: the op is then callable as
``pluggable.raw_ops.<Name>`` (and through `dispatch.execute`), runs the plugin's kernels, and
its output shapes come from the plugin's shape function, run at dispatch through the
TF_ShapeInferenceContext functions. On the CPU such an op runs the kernels a plugin registered
for "CPU"; pluggable has no code of its own for it.

Spec syntax understood (TensorFlow's op def builder's): inputs and outputs ``name: T`` (a type
attribute), ``name: float`` (a fixed type), ``name: N * T`` (a list), ``name: Tlist`` (a
list(type) attribute); attributes of every kind (``type``, ``{float, double}``, the sets
``numbertype``, ``realnumbertype``, ``quantizedtype``, ``int >= 1``, ``float``, ``bool``,
``string``, ``{'a', 'b'}``, ``shape``, ``tensor``, ``func`` and ``list(..)`` of each), each with
``= default``, and every type of tensorflow/c/tf_datatype.h. What the host cannot run yet (a
type tensors here cannot hold, such as qint8; inputs typed by a list(type); attributes a kernel
cannot be given: shapes, tensors, functions) still registers: a call that needs it raises
UnimplementedError saying what is missing. Reference inputs, Ref(T), make the op unusable,
said in the plugin's load warning.
"""
from __future__ import annotations

import ctypes

from ..base import native as _native
from ..base.errors import UnimplementedError, error_for_code

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple
    from ..base.dtypes import DType
    from ..oplib.core import Arg, Attr, OpDef

# The op library and the dtypes (NumPy) are imported only when a plugin has registered ops:
# loading the kernels of a plugin that registers none needs neither.

_p = ctypes.c_void_p


class PG_OpInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("num_attrs", ctypes.c_int32),
                ("attrs", ctypes.POINTER(ctypes.c_char_p)), ("num_inputs", ctypes.c_int32),
                ("inputs", ctypes.POINTER(ctypes.c_char_p)), ("num_outputs", ctypes.c_int32),
                ("outputs", ctypes.POINTER(ctypes.c_char_p)), ("flags", ctypes.c_int32),
                ("has_shape_fn", ctypes.c_int32), ("deprecated_version", ctypes.c_int32),
                ("deprecation", ctypes.c_char_p)]


_PROTOTYPES = {
    "pluggable_OpRegistrationCount": (ctypes.c_int64, ()),
    "pluggable_OpRegistrationInfo": (ctypes.c_int, (ctypes.c_int64, ctypes.POINTER(PG_OpInfo))),
    "pluggable_OpInferShapes": (ctypes.c_int, (
        ctypes.c_int64, ctypes.c_int32, ctypes.POINTER(ctypes.c_int64),
        ctypes.POINTER(ctypes.c_int64), ctypes.c_int32, ctypes.POINTER(ctypes.c_char_p),
        ctypes.POINTER(ctypes.c_int32), ctypes.c_int32, ctypes.POINTER(ctypes.c_int64),
        ctypes.POINTER(ctypes.c_int64), ctypes.c_int64, _p)),
    #   int (id, num_inputs, ranks, dims, num_type_attrs, names, values, num_outputs,
    #        out_ranks, out_dims, out_dims_capacity, TF_Status*)
}
_fns = _native.bind(_native.lib, _PROTOTYPES)
_SHAPE_NOT_SET = -2
_OP_STATEFUL = 4  # PG_OP_STATEFUL (runtime_internal.h): TF_OpDefinitionBuilderSetIsStateful

# TensorFlow's op def builder's names for sets of types (tensorflow/core/framework/types.h).
_REAL_NUMBER_TYPES = ("float", "double", "int32", "int64", "uint8", "int16", "int8", "uint16",
                      "half", "uint32", "uint64", "bfloat16")
_QUANTIZED_TYPES = ("qint8", "quint8", "qint16", "quint16", "qint32")
_NUMBER_TYPES = ("float", "double", "int64", "int32", "uint8", "uint16", "int16", "int8",
                 "complex64", "complex128", "qint8", "quint8", "qint32", "half", "uint32",
                 "uint64", "bfloat16")
_TYPE_SETS = {"numbertype": _NUMBER_TYPES, "numerictype": _NUMBER_TYPES,
              "realnumbertype": _REAL_NUMBER_TYPES, "realnumerictype": _REAL_NUMBER_TYPES,
              "quantizedtype": _QUANTIZED_TYPES}
# Kinds of values: those a kernel can be given (PG_Attr), and those it cannot yet.
_VALUE_KINDS = ("int", "float", "bool", "type", "string", "shape", "tensor", "func")


def count() -> int:
    """Ops registered so far (by every plugin)."""
    return int(_fns["pluggable_OpRegistrationCount"]())


class SpecError(ValueError):
    """A spec this host cannot turn into an op."""


def _type(text: str) -> "DType":
    """The type a name of an op spec means: any type of tensorflow/c/tf_datatype.h
    (``float``, ``DT_HALF``, ``qint8``, ``string``, ``variant``, ``float8_e5m2``...)."""
    from ..base.dtypes import op_dtype
    from ..base.errors import InvalidArgumentError

    try:
        return op_dtype(text.strip())
    except InvalidArgumentError:
        raise SpecError(f"type {text.strip()!r} is not a type of tensorflow/c/tf_datatype.h"
                        ) from None


def _types_of(items: List[str]) -> Tuple["DType", ...]:
    """The types of a ``{...}`` set, whose items may be names of sets (``realnumbertype``)."""
    out: List["DType"] = []
    for item in items:
        for name in _TYPE_SETS.get(item, (item,)):
            dtype = _type(name)
            if dtype not in out:
                out.append(dtype)
    return tuple(out)


def _split_list(body: str) -> List[str]:
    return [item.strip() for item in body.split(",") if item.strip()]


def _string(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    raise SpecError(f"{text!r} is not a quoted string")


def _kind(text: str) -> Tuple[str, Optional[Tuple[Any, ...]]]:
    """The kind and allowed values of a kind without ``list(..)``: ``int``, ``type``,
    ``{float, double}``, ``quantizedtype``, ``{'a', 'b'}``, ``shape``..."""
    text = text.strip()
    if text.startswith("{") and text.endswith("}"):
        items = _split_list(text[1:-1])
        if items and items[0][0] in "'\"":
            return "string", tuple(_string(i) for i in items)
        return "type", _types_of(items)
    if text in _TYPE_SETS:
        return "type", _types_of([text])
    if text in _VALUE_KINDS:
        return text, None
    raise SpecError(f"attribute kind {text!r} is not one of TensorFlow's (string, int, float, "
                    f"bool, type, shape, tensor, func, numbertype, realnumbertype, "
                    f"quantizedtype, {{types}}, {{'strings'}}, and list(..) of each)")


def _default(kind: str, text: str) -> Any:
    """The value of a default in TensorFlow's text format for an attribute of ``kind``
    (without ``list(..)``); shapes, tensors and functions keep their text."""
    if kind == "type":
        return _type(text)
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    if kind == "bool":
        if text not in ("true", "false"):
            raise SpecError(f"bool default {text!r} is neither true nor false")
        return text == "true"
    if kind == "string":
        return _string(text)
    if kind == "shape" and text.startswith("[") and text.endswith("]"):
        return tuple(int(v) for v in _split_list(text[1:-1]))
    return text


def parse_attr(spec: str) -> Attr:
    """``name: kind [>= min] [= default]`` as an `Attr`; every kind of TensorFlow's op def
    builder, list(..) ones included (kind ``list(type)``, ``list(shape)``...)."""
    from ..oplib.core import REQUIRED, Attr

    name, _, rest = spec.partition(":")
    name, rest = name.strip(), rest.strip()
    # The default follows the first "=" that is not part of ">=" nor inside {...} or quotes.
    split, depth, quote = len(rest), 0, ""
    for i, c in enumerate(rest):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
        elif c == "=" and depth == 0 and (i == 0 or rest[i - 1] != ">"):
            split = i
            break
    kind_text, has_default, default_text = rest[:split].strip(), split < len(rest), \
        rest[split + 1:]
    import re

    minimum = None
    m = re.fullmatch(r"(.*?)\s*>=\s*(-?\d+)", kind_text, re.S)
    if m:
        kind_text, minimum = m.group(1), int(m.group(2))
    m = re.fullmatch(r"list\s*\((.*)\)", kind_text, re.S)
    element, allowed = _kind(m.group(1) if m else kind_text)
    kind = f"list({element})" if m else element
    if minimum is not None and kind not in ("int",) and not m:
        raise SpecError(f"a minimum (>= {minimum}) applies to int and list attributes, not "
                        f"to {kind}")
    default: Any = REQUIRED
    if has_default:
        text = default_text.strip()
        try:
            if m:
                if not (text.startswith("[") and text.endswith("]")):
                    raise SpecError(f"list default {text!r} is not [..]")
                body = text[1:-1]
                if element in ("tensor", "func"):  # protos in text: kept as written
                    default = text
                else:
                    items = (re.findall(r"\[[^\[\]]*\]", body) if element == "shape"
                             else _split_list(body))  # shapes: [[2, 3], [4]]
                    default = tuple(_default(element, item) for item in items)
            else:
                default = _default(element, text)
        except ValueError as exc:
            if isinstance(exc, SpecError):
                raise
            raise SpecError(f"default {text!r} is not a {kind}") from None
    return Attr(name, kind, default, allowed, minimum)


def parse_arg(spec: str, attrs: Dict[str, Attr]) -> Arg:
    """``name: T``, ``name: float``, ``name: N * T`` or ``name: Tlist`` (a list(type)
    attribute) as an `Arg`."""
    from ..oplib.core import Arg

    name, _, rest = spec.partition(":")
    import re

    name, rest = name.strip(), rest.strip()
    number = None
    m = re.fullmatch(r"(\w+)\s*\*\s*(\w+)", rest)
    if m:
        number, rest = m.group(1), m.group(2)
        if number not in attrs or attrs[number].kind != "int":
            raise SpecError(f"{number!r} in {spec!r} is not an int attribute of the op")
    if re.fullmatch(r"\w+", rest) is None:
        raise SpecError(f"{rest!r} is not supported (a type, a type attribute or N * T; "
                        f"reference inputs, Ref(T), need TensorFlow's graph runtime)")
    if rest in attrs:
        if attrs[rest].kind not in ("type", "list(type)") or \
                (number and attrs[rest].kind != "type"):
            raise SpecError(f"{rest!r} in {spec!r} is not a type attribute")
        return Arg(name, type_attr=rest, number_attr=number)
    return Arg(name, dtype=_type(rest), number_attr=number)


def _missing(name: str, attrs: Dict[str, Attr], args: Tuple[Arg, ...]) -> str:
    """What a call of op ``name`` would need that the host lacks ("" when nothing): an
    input or output of a type tensors here cannot hold, or typed by a list(type)."""
    from ..base.dtypes import has_tensors

    for arg in args:
        if arg.dtype is not None and not has_tensors(arg.dtype):
            return (f"{name}: {arg.name} is a {arg.dtype.name} tensor, and pluggable has no "
                    f"{arg.dtype.name} tensors yet (dtype {arg.dtype.name} is not supported "
                    f"for tensors)")
        if arg.type_attr and attrs[arg.type_attr].kind == "list(type)":
            return (f"{name}: {arg.name} is a list of tensors typed by the list(type) "
                    f"attribute {arg.type_attr}, which pluggable does not support yet")
    return ""


def _infer_for(op_id: int, name: str, plugin: str, outputs: Tuple[Arg, ...],
               type_attrs: List[str]):
    def infer(meta, attrs, host):
        n_in = len(meta)
        ranks = (ctypes.c_int64 * max(1, n_in))(*[len(m.shape) for m in meta])
        flat = [d for m in meta for d in m.shape]
        dims = (ctypes.c_int64 * max(1, len(flat)))(*flat)
        names = (ctypes.c_char_p * max(1, len(type_attrs)))(*[a.encode() for a in type_attrs])
        values = (ctypes.c_int32 * max(1, len(type_attrs)))(
            *[int(attrs[a].tf_code) for a in type_attrs])
        n_out = sum(attrs[a.number_attr] if a.number_attr else 1 for a in outputs)
        out_ranks = (ctypes.c_int64 * max(1, n_out))()
        capacity = 254 * max(1, n_out)
        out_dims = (ctypes.c_int64 * capacity)()
        status = _native.acquire_status()
        try:
            code = _fns["pluggable_OpInferShapes"](op_id, n_in, ranks, dims, len(type_attrs),
                                                   names, values, n_out, out_ranks, out_dims,
                                                   capacity, status.address)
            if code:
                message = status.message
                raise error_for_code(code)(
                    f"{name}: the shape function of plugin {plugin} refused the inputs "
                    f"(shapes {[tuple(m.shape) for m in meta]}): {message}",
                    plugin=plugin, call=name, plugin_message=message)
        finally:
            _native.release_status(status)
        shapes: List[Optional[Tuple[int, ...]]] = []
        at = 0
        for i in range(n_out):
            rank = out_ranks[i]
            if rank < 0:  # not set, or unknown: the kernel's output decides
                shapes.append(None)
                continue
            shape = tuple(out_dims[at:at + rank])
            at += rank
            shapes.append(None if any(d < 0 for d in shape) else shape)
        return shapes
    return infer


def _no_cpu(name: str, plugin: str):
    def cpu(arrays, attrs):
        raise UnimplementedError(
            f"{name} is an op of plugin {plugin}, which registers no CPU kernel for this call "
            f"(pluggable has no code of its own for the op); run it on the plugin's device "
            f"(with pluggable.device(...)). pluggable.config.list_kernels({name!r}) lists its "
            f"kernels", call=name)
    return cpu


def adopt(plugin: str, start: int) -> List[Tuple[str, str]]:
    """Turns the ops registered since registration ``start`` into ops of the library;
    returns ``(op name, reason)`` for the ops that could not be."""
    refused: List[Tuple[str, str]] = []
    end = count()
    if end == start:
        return refused
    from ..oplib.core import OPS, OpDef

    for op_id in range(start, end):
        info = PG_OpInfo()
        if _fns["pluggable_OpRegistrationInfo"](op_id, ctypes.byref(info)):
            continue
        name = info.name.decode("utf-8", "replace")
        specs = {kind: [getattr(info, kind)[i].decode("utf-8", "replace")
                        for i in range(getattr(info, f"num_{kind}"))]
                 for kind in ("attrs", "inputs", "outputs")}
        if name in OPS:
            refused.append((name, "the library already has an op of that name"))
            continue
        try:
            attrs = {a.name: a for a in map(parse_attr, specs["attrs"])}
            inputs = tuple(parse_arg(s, attrs) for s in specs["inputs"])
            outputs = tuple(parse_arg(s, attrs) for s in specs["outputs"])
        except SpecError as exc:
            refused.append((name, f"its spec cannot be used: {exc}"))
            continue
        type_attrs = [a.name for a in attrs.values() if a.kind == "type"]
        OPS[name] = OpDef(
            name, inputs, outputs, tuple(attrs.values()),
            _infer_for(op_id, name, plugin, outputs, type_attrs), _no_cpu(name, plugin),
            doc=f"registered by plugin {plugin} (tensorflow/c/ops.h)",
            missing=_missing(name, attrs, inputs + outputs),
            is_stateful=bool(info.flags & _OP_STATEFUL))
    return refused


def plugin_of(op: OpDef) -> Optional[str]:
    """The plugin that registered ``op``, None for the library's own ops."""
    prefix = "registered by plugin "
    if op.doc.startswith(prefix):
        return op.doc[len(prefix):].rsplit(" (", 1)[0]
    return None


__all__ = ["adopt", "count", "parse_attr", "parse_arg", "plugin_of", "SpecError"]
