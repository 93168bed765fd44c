"""Ops that plugins register with tensorflow/c/ops.h, turned into ops of the library.

A plugin describes an op in its TF_InitKernel (TF_NewOpDefinitionBuilder, inputs, outputs and
attributes in TensorFlow's spec syntax, a shape function, TF_RegisterOpDefinition); the
runtime keeps the specs (ops.c). When the plugin's kernels are loaded, `adopt` parses each
new op's specs into an `OpDef` in `op_defs.OPS`: the op is then callable as
``pluggable.raw_ops.<Name>`` (and through `dispatch.execute`), runs the plugin's kernels, and
its output shapes come from the plugin's shape function, run at dispatch through the
TF_ShapeInferenceContext functions. Such an op has no CPU kernel: the CPU has no code for it.

Spec syntax understood (TensorFlow's): inputs and outputs ``name: T`` (a type attribute),
``name: float`` (a fixed type), ``name: N * T`` (a list); attributes ``name: type``,
``name: {float, double}``, ``name: int``, ``name: int >= 1``, ``name: float``, ``name: bool``,
``name: string``, ``name: {'a', 'b'}``, ``name: list(int)``, each with ``= default``.
Anything else (reference inputs, shapes, tensors and functions as attributes) makes the op
unusable here, said with a `PluginLoadWarning`.
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

_type_names: Dict[str, "DType"] = {}


def _types() -> Dict[str, "DType"]:
    """TensorFlow's type names in op specs (DataTypeToString without "DT_", lower case)."""
    if not _type_names:
        from ..base import dtypes as dt

        _type_names.update({
            "float": dt.float32, "double": dt.float64, "half": dt.float16,
            "bfloat16": dt.bfloat16, "int8": dt.int8, "int16": dt.int16, "int32": dt.int32,
            "int64": dt.int64, "uint8": dt.uint8, "uint16": dt.uint16, "uint32": dt.uint32,
            "uint64": dt.uint64, "bool": dt.bool_, "complex64": dt.complex64,
            "complex128": dt.complex128, "resource": dt.resource})
    return _type_names


def count() -> int:
    """Ops registered so far (by every plugin)."""
    return int(_fns["pluggable_OpRegistrationCount"]())


class SpecError(ValueError):
    """A spec this host cannot turn into an op."""


def _type(text: str) -> "DType":
    names = _types()
    name = text.strip()
    if name.startswith("DT_"):
        name = name[3:].lower()
    if name not in names:
        raise SpecError(f"type {text.strip()!r} is not supported (supported: "
                        f"{', '.join(sorted(names))})")
    return names[name]


def _split_list(body: str) -> List[str]:
    return [item.strip() for item in body.split(",") if item.strip()]


def _string(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    raise SpecError(f"{text!r} is not a quoted string")


def parse_attr(spec: str) -> Attr:
    """``name: kind [>= min] [= default]`` as an `Attr`."""
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
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
        elif c == "=" and depth == 0 and (i == 0 or rest[i - 1] != ">"):
            split = i
            break
    kind_text, has_default, default_text = rest[:split].strip(), split < len(rest), \
        rest[split + 1:]
    import re

    minimum = None
    m = re.fullmatch(r"(.*?)\s*>=\s*(-?\d+)", kind_text)
    if m:
        kind_text, minimum = m.group(1), int(m.group(2))
    allowed: Optional[Tuple[Any, ...]] = None
    if kind_text.startswith("{") and kind_text.endswith("}"):
        items = _split_list(kind_text[1:-1])
        if items and items[0][0] in "'\"":
            kind, allowed = "string", tuple(_string(i) for i in items)
        else:
            kind, allowed = "type", tuple(_type(i) for i in items)
    elif kind_text in ("type", "int", "float", "bool", "string", "list(int)"):
        kind = kind_text
    else:
        raise SpecError(f"attribute kind {kind_text!r} is not supported (supported: type, "
                        f"int, float, bool, string, list(int), {{types}}, {{'strings'}})")
    default: Any = REQUIRED
    if has_default:
        text = default_text.strip()
        try:
            if kind == "type":
                default = _type(text)
            elif kind == "int":
                default = int(text)
            elif kind == "float":
                default = float(text)
            elif kind == "bool":
                if text not in ("true", "false"):
                    raise SpecError(f"bool default {text!r} is neither true nor false")
                default = text == "true"
            elif kind == "string":
                default = _string(text)
            else:
                if not (text.startswith("[") and text.endswith("]")):
                    raise SpecError(f"list default {text!r} is not [..]")
                default = tuple(int(v) for v in _split_list(text[1:-1]))
        except ValueError as exc:
            if isinstance(exc, SpecError):
                raise
            raise SpecError(f"default {text!r} is not a {kind}") from None
    return Attr(name, kind, default, allowed, minimum)


def parse_arg(spec: str, attrs: Dict[str, Attr]) -> Arg:
    """``name: T``, ``name: float`` or ``name: N * T`` as an `Arg`."""
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
        if attrs[rest].kind != "type":
            raise SpecError(f"{rest!r} in {spec!r} is not a type attribute")
        return Arg(name, type_attr=rest, number_attr=number)
    return Arg(name, dtype=_type(rest), number_attr=number)


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
            f"{name} is an op of plugin {plugin}, which registers no CPU kernel for it (the "
            f"CPU's kernels are pluggable's NumPy references); run it on the plugin's device "
            f"(with pluggable.device(...))", call=name)
    return cpu


def adopt(plugin: str, start: int) -> List[str]:
    """Turns the ops registered since registration ``start`` into ops of the library;
    returns messages for the ops that could not be (for `PluginLoadWarning`)."""
    messages: List[str] = []
    end = count()
    if end == start:
        return messages
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
            messages.append(f"pluggable: plugin {plugin}: op {name!r} (registered with "
                            f"TF_RegisterOpDefinition) is ignored: the library already has an "
                            f"op of that name")
            continue
        try:
            attrs = {a.name: a for a in map(parse_attr, specs["attrs"])}
            inputs = tuple(parse_arg(s, attrs) for s in specs["inputs"])
            outputs = tuple(parse_arg(s, attrs) for s in specs["outputs"])
        except SpecError as exc:
            messages.append(f"pluggable: plugin {plugin}: op {name!r} (registered with "
                            f"TF_RegisterOpDefinition) cannot be used: {exc}")
            continue
        type_attrs = [a.name for a in attrs.values() if a.kind == "type"]
        OPS[name] = OpDef(
            name, inputs, outputs, tuple(attrs.values()),
            _infer_for(op_id, name, plugin, outputs, type_attrs), _no_cpu(name, plugin),
            doc=f"registered by plugin {plugin} (tensorflow/c/ops.h)")
    return messages


def plugin_of(op: OpDef) -> Optional[str]:
    """The plugin that registered ``op``, None for the library's own ops."""
    prefix = "registered by plugin "
    if op.doc.startswith(prefix):
        return op.doc[len(prefix):].rsplit(" (", 1)[0]
    return None


__all__ = ["adopt", "count", "parse_attr", "parse_arg", "plugin_of", "SpecError"]
