"""Array ops of the op library: joining and splitting (ConcatV2, Pack, Unpack, Split, SplitV),
slicing and gathering (StridedSlice, Slice, GatherV2, GatherNd, Where, SelectV2), shapes
(Shape, Size, Rank, ExpandDims, Squeeze, BroadcastTo, Tile, Pad, PadV2, ReverseV2), Range,
OneHot and the cumulative sums.

Inputs, attributes and their defaults are those of TensorFlow's OpDefs; each op has its
shape inference and its NumPy kernel for the CPU, registered into `op_defs.OPS`. Where an
output's shape depends on the input's values rather than its shape (Where), inference gives
None for it and the kernel decides.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

from ..base import dtypes as dt
from .core import (ALL, INDEX, NUMBER, Arg, Attr, _axes, _define, _shape_values,
                      bad, broadcast)

_INDEX16 = (dt.int16, dt.int32, dt.int64)


def _scalar(op: str, values, what: str) -> int:
    array = np.asarray(values)
    if array.size != 1 or array.ndim > 1:
        raise bad(op, f"{what} must be a scalar, got shape {array.shape}")
    return int(array.reshape(()))


def _one_axis(op: str, values, rank: int, what: str = "axis") -> int:
    (axis,) = _axes(op, np.asarray(_scalar(op, values, what)), rank, what)
    return axis


# -- joining and splitting ------------------------------------------------------------------
def _concat_axis(op: str, shapes: List[Tuple[int, ...]], axis_values) -> int:
    first = shapes[0]
    if not first:
        raise bad(op, "cannot concatenate scalars (rank 0); use Pack (pluggable.ops.stack)")
    axis = _one_axis(op, axis_values, len(first))
    for i, shape in enumerate(shapes[1:], 1):
        if len(shape) != len(first) or any(a != b for d, (a, b) in enumerate(zip(first, shape))
                                             if d != axis):
            raise bad(op, f"values[{i}] has shape {shape}, values[0] {first}: all dimensions "
                          f"but the concatenation axis {axis} must match")
    return axis


def _concat_infer(meta, attrs, host):
    n = attrs["N"]
    shapes = [m.shape for m in meta[:n]]
    axis = _concat_axis("ConcatV2", shapes, host[n])
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return [tuple(out)]


def _concat_cpu(arrays, attrs):
    n = attrs["N"]
    axis = _concat_axis("ConcatV2", [a.shape for a in arrays[:n]], arrays[n])
    return [np.concatenate(arrays[:n], axis=axis)]


_define("ConcatV2", [Arg("values", "T", number_attr="N"), Arg("axis", "Tidx", host=True)],
        [Arg("output", "T")],
        [Attr("N", "int", minimum=2), Attr("T", "type", allowed=ALL),
         Attr("Tidx", "type", dt.int32, allowed=INDEX)], _concat_infer, _concat_cpu)


def _pack_axis(op: str, shapes, axis: int) -> Tuple[int, int]:
    first = shapes[0]
    for i, shape in enumerate(shapes[1:], 1):
        if shape != first:
            raise bad(op, f"values[{i}] has shape {shape}, values[0] {first}: packed tensors "
                          f"must have one shape")
    rank = len(first) + 1
    if not -rank <= axis < rank:
        raise bad(op, f"axis {axis} is out of range for packing tensors of rank {rank - 1} "
                      f"(valid: {-rank}..{rank - 1})")
    return axis % rank, rank


def _pack_infer(meta, attrs, host):
    shapes = [m.shape for m in meta]
    axis, _ = _pack_axis("Pack", shapes, attrs["axis"])
    return [shapes[0][:axis] + (len(shapes),) + shapes[0][axis:]]


def _pack_cpu(arrays, attrs):
    axis, _ = _pack_axis("Pack", [a.shape for a in arrays], attrs["axis"])
    return [np.stack(arrays, axis=axis)]


_define("Pack", [Arg("values", "T", number_attr="N")], [Arg("output", "T")],
        [Attr("N", "int", minimum=1), Attr("T", "type", allowed=ALL), Attr("axis", "int", 0)],
        _pack_infer, _pack_cpu)


def _unpack_axis(shape, attrs) -> int:
    rank = len(shape)
    axis = attrs["axis"]
    if not -rank <= axis < rank:
        raise bad("Unpack", f"axis {axis} is out of range for a tensor of rank {rank} "
                            f"(valid: {-rank}..{rank - 1})")
    axis %= rank
    if shape[axis] != attrs["num"]:
        raise bad("Unpack", f"num={attrs['num']} but dimension {axis} of value {shape} is "
                            f"{shape[axis]}")
    return axis


def _unpack_infer(meta, attrs, host):
    shape = meta[0].shape
    axis = _unpack_axis(shape, attrs)
    return [shape[:axis] + shape[axis + 1:]] * attrs["num"]


def _unpack_cpu(arrays, attrs):
    x = arrays[0]
    axis = _unpack_axis(x.shape, attrs)
    return [np.take(x, i, axis=axis) for i in range(attrs["num"])]


_define("Unpack", [Arg("value", "T")], [Arg("output", "T", number_attr="num")],
        [Attr("num", "int", minimum=0), Attr("T", "type", allowed=ALL), Attr("axis", "int", 0)],
        _unpack_infer, _unpack_cpu)


def _split_sizes(op: str, shape, axis_values, attrs, size_values=None) -> Tuple[int, List[int]]:
    if not shape:
        raise bad(op, "cannot split a scalar (rank 0)")
    axis = _one_axis(op, axis_values, len(shape), "split dimension")
    n, total = attrs["num_split"], shape[axis]
    if size_values is None:
        if total % n:
            raise bad(op, f"dimension {axis} of size {total} cannot be split evenly into "
                          f"{n} parts")
        return axis, [total // n] * n
    sizes = _shape_values(op, size_values, "size_splits")
    if len(sizes) != n:
        raise bad(op, f"size_splits has {len(sizes)} sizes but num_split is {n}")
    unknown = [i for i, s in enumerate(sizes) if s == -1]
    if len(unknown) > 1 or any(s < -1 for s in sizes):
        raise bad(op, f"size_splits {sizes} may hold one -1 and otherwise sizes >= 0")
    known = sum(s for s in sizes if s != -1)
    if unknown and known <= total:
        sizes[unknown[0]] = total - known
    elif known != total:
        raise bad(op, f"size_splits {sizes} sum to {known}, not to the size {total} of "
                      f"dimension {axis}")
    return axis, sizes


def _split_parts(x: np.ndarray, axis: int, sizes: List[int]) -> List[np.ndarray]:
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


def _split_infer(meta, attrs, host):
    shape = meta[1].shape
    axis, sizes = _split_sizes("Split", shape, host[0], attrs)
    return [shape[:axis] + (s,) + shape[axis + 1:] for s in sizes]


def _split_cpu(arrays, attrs):
    axis, sizes = _split_sizes("Split", arrays[1].shape, arrays[0], attrs)
    return _split_parts(arrays[1], axis, sizes)


_define("Split", [Arg("split_dim", dtype=dt.int32, host=True), Arg("value", "T")],
        [Arg("output", "T", number_attr="num_split")],
        [Attr("num_split", "int", minimum=1), Attr("T", "type", allowed=ALL)],
        _split_infer, _split_cpu)


def _splitv_infer(meta, attrs, host):
    shape = meta[0].shape
    axis, sizes = _split_sizes("SplitV", shape, host[2], attrs, host[1])
    return [shape[:axis] + (s,) + shape[axis + 1:] for s in sizes]


def _splitv_cpu(arrays, attrs):
    axis, sizes = _split_sizes("SplitV", arrays[0].shape, arrays[2], attrs, arrays[1])
    return _split_parts(arrays[0], axis, sizes)


_define("SplitV", [Arg("value", "T"), Arg("size_splits", "Tlen", host=True),
                   Arg("split_dim", dtype=dt.int32, host=True)],
        [Arg("output", "T", number_attr="num_split")],
        [Attr("num_split", "int", minimum=1), Attr("T", "type", allowed=ALL),
         Attr("Tlen", "type", dt.int64, allowed=(dt.int8, dt.int32, dt.int64))],
        _splitv_infer, _splitv_cpu)


# -- slicing and gathering ------------------------------------------------------------------
def strided_slice_index(shape: Tuple[int, ...], begin, end, strides, attrs
                        ) -> Tuple[tuple, Tuple[int, ...]]:
    """TensorFlow's StridedSlice as a NumPy index (ints, slices, None) and the result's
    shape. Masks: bit i of ``begin_mask``/``end_mask`` ignores begin[i]/end[i]; of
    ``ellipsis_mask`` makes entry i an ellipsis; of ``new_axis_mask`` a new axis of size 1;
    of ``shrink_axis_mask`` an index that removes the dimension."""
    op = "StridedSlice"
    begin, end, strides = (_shape_values(op, v, what) for v, what in
                           ((begin, "begin"), (end, "end"), (strides, "strides")))
    if not len(begin) == len(end) == len(strides):
        raise bad(op, f"begin, end and strides must have one length, got {len(begin)}, "
                      f"{len(end)} and {len(strides)}")
    ellipsis, new_axis = attrs["ellipsis_mask"], attrs["new_axis_mask"]
    shrink = attrs["shrink_axis_mask"]
    if bin(ellipsis & ((1 << len(begin)) - 1)).count("1") > 1:
        raise bad(op, "an index may hold one ellipsis (...) only")
    rank = len(shape)
    entries = range(len(begin))
    consumed = sum(1 for i in entries if not (ellipsis | new_axis) >> i & 1)
    if consumed > rank:
        raise bad(op, f"the index has {consumed} dimensions but the tensor {shape} has {rank}")
    index: list = []
    out: List[int] = []
    dim = 0
    for i in entries:
        if ellipsis >> i & 1:
            for _ in range(rank - consumed):
                index.append(slice(None))
                out.append(shape[dim])
                dim += 1
        elif new_axis >> i & 1:
            index.append(None)
            out.append(1)
        else:
            size, step = shape[dim], strides[i]
            if step == 0:
                raise bad(op, f"stride {i} is 0; strides must be non-zero")
            if shrink >> i & 1:
                at = begin[i] + size if begin[i] < 0 else begin[i]
                if not 0 <= at < size:
                    raise bad(op, f"index {begin[i]} is out of bounds for dimension {dim} of "
                                  f"size {size}")
                index.append(at)
            else:
                part = slice(None if attrs["begin_mask"] >> i & 1 else begin[i],
                             None if attrs["end_mask"] >> i & 1 else end[i], step)
                index.append(part)
                out.append(len(range(*part.indices(size))))
            dim += 1
    for d in range(dim, rank):
        index.append(slice(None))
        out.append(shape[d])
    return tuple(index), tuple(out)


def _strided_slice_infer(meta, attrs, host):
    return [strided_slice_index(meta[0].shape, host[1], host[2], host[3], attrs)[1]]


def _strided_slice_cpu(arrays, attrs):
    index, _ = strided_slice_index(arrays[0].shape, arrays[1], arrays[2], arrays[3], attrs)
    return [np.ascontiguousarray(arrays[0][index])]


_define("StridedSlice", [Arg("input", "T"), Arg("begin", "Index", host=True),
                         Arg("end", "Index", host=True), Arg("strides", "Index", host=True)],
        [Arg("output", "T")],
        [Attr("T", "type", allowed=ALL), Attr("Index", "type", allowed=_INDEX16),
         Attr("begin_mask", "int", 0), Attr("end_mask", "int", 0),
         Attr("ellipsis_mask", "int", 0), Attr("new_axis_mask", "int", 0),
         Attr("shrink_axis_mask", "int", 0)], _strided_slice_infer, _strided_slice_cpu)


def _slice_bounds(shape, begin_values, size_values) -> List[slice]:
    begin = _shape_values("Slice", begin_values, "begin")
    size = _shape_values("Slice", size_values, "size")
    if len(begin) != len(shape) or len(size) != len(shape):
        raise bad("Slice", f"begin {begin} and size {size} need one value per dimension of "
                           f"{shape}")
    parts = []
    for d, (b, n, dim) in enumerate(zip(begin, size, shape)):
        n = dim - b if n == -1 else n
        if b < 0 or n < 0 or b + n > dim:
            raise bad("Slice", f"dimension {d}: begin {b} and size {size[d]} do not fit in "
                               f"size {dim} (need 0 <= begin <= begin + size <= {dim})")
        parts.append(slice(b, b + n))
    return parts


_define("Slice", [Arg("input", "T"), Arg("begin", "Index", host=True),
                  Arg("size", "Index", host=True)], [Arg("output", "T")],
        [Attr("T", "type", allowed=ALL), Attr("Index", "type", allowed=INDEX)],
        lambda meta, attrs, host: [tuple(s.stop - s.start for s in
                                         _slice_bounds(meta[0].shape, host[1], host[2]))],
        lambda arrays, attrs: [np.ascontiguousarray(
            arrays[0][tuple(_slice_bounds(arrays[0].shape, arrays[1], arrays[2]))])])


def _check_indices(op: str, indices: np.ndarray, limits, what: str = "indices") -> None:
    """Every index within [0, limit): TensorFlow's CPU kernels refuse the others."""
    limits = np.asarray(limits)
    bad_mask = (indices < 0) | (indices >= limits)
    if np.any(bad_mask):
        where = tuple(int(i) for i in np.argwhere(bad_mask)[0])
        value = indices[where]
        limit = limits if limits.ndim == 0 else limits[where[-1]]
        raise bad(op, f"{what}{list(where)} = {int(value)} is not in [0, {int(limit)})")


def _gather_geometry(shape, indices_shape, axis_values, batch_dims: int) -> Tuple[int, int]:
    op = "GatherV2"
    if batch_dims < 0:
        batch_dims += len(indices_shape)
    if not 0 <= batch_dims <= len(indices_shape):
        raise bad(op, f"batch_dims must be in [{-len(indices_shape)}, {len(indices_shape)}] "
                      f"for indices of rank {len(indices_shape)}")
    if not shape:
        raise bad(op, "params must have rank 1 or more")
    axis = _one_axis(op, axis_values, len(shape))
    if axis < batch_dims:
        raise bad(op, f"axis {axis} must be at least batch_dims {batch_dims}")
    if shape[:batch_dims] != indices_shape[:batch_dims]:
        raise bad(op, f"the first {batch_dims} dimensions of params {shape} and indices "
                      f"{indices_shape} must be equal (batch_dims)")
    return axis, batch_dims


def _gather_infer(meta, attrs, host):
    shape, ishape = meta[0].shape, meta[1].shape
    axis, batch = _gather_geometry(shape, ishape, host[2], attrs["batch_dims"])
    return [shape[:axis] + ishape[batch:] + shape[axis + 1:]]


def _gather_cpu(arrays, attrs):
    params, indices = arrays[0], arrays[1]
    axis, batch = _gather_geometry(params.shape, indices.shape, arrays[2], attrs["batch_dims"])
    _check_indices("GatherV2", indices, params.shape[axis])
    if batch == 0:
        return [np.take(params, indices, axis=axis)]
    out_shape = params.shape[:axis] + indices.shape[batch:] + params.shape[axis + 1:]
    flat_p = params.reshape((-1,) + params.shape[batch:])
    flat_i = indices.reshape((-1,) + indices.shape[batch:])
    out = np.empty((flat_p.shape[0],) + out_shape[batch:], params.dtype)
    for b in range(flat_p.shape[0]):
        out[b] = np.take(flat_p[b], flat_i[b], axis=axis - batch)
    return [out.reshape(out_shape)]


_define("GatherV2", [Arg("params", "Tparams"), Arg("indices", "Tindices"),
                     Arg("axis", "Taxis", host=True)], [Arg("output", "Tparams")],
        [Attr("batch_dims", "int", 0), Attr("Tparams", "type", allowed=ALL),
         Attr("Tindices", "type", allowed=_INDEX16), Attr("Taxis", "type", allowed=INDEX)],
        _gather_infer, _gather_cpu)


def _gather_nd_shape(shape, ishape) -> Tuple[int, ...]:
    if not ishape:
        raise bad("GatherNd", "indices must have rank 1 or more")
    depth = ishape[-1]
    if depth > len(shape):
        raise bad("GatherNd", f"indices index {depth} dimensions (their last dimension) but "
                              f"params {shape} has {len(shape)}")
    return ishape[:-1] + shape[depth:]


def _gather_nd_cpu(arrays, attrs):
    params, indices = arrays
    out_shape = _gather_nd_shape(params.shape, indices.shape)
    depth = indices.shape[-1]
    _check_indices("GatherNd", indices, np.asarray(params.shape[:depth], np.int64))
    if depth == 0:
        return [np.broadcast_to(params, out_shape).copy()]
    return [params[tuple(np.moveaxis(indices, -1, 0))]]


_define("GatherNd", [Arg("params", "Tparams"), Arg("indices", "Tindices")],
        [Arg("output", "Tparams")],
        [Attr("Tparams", "type", allowed=ALL), Attr("Tindices", "type", allowed=_INDEX16),
         Attr("bad_indices_policy", "string", "", allowed=("", "DEFAULT", "ERROR"))],
        lambda meta, attrs, host: [_gather_nd_shape(meta[0].shape, meta[1].shape)],
        _gather_nd_cpu)

_define("Where", [Arg("input", "T")], [Arg("index", dtype=dt.int64)],
        [Attr("T", "type", dt.bool_, allowed=ALL)],
        lambda meta, attrs, host: [None],  # as many rows as true elements
        lambda arrays, attrs: [np.argwhere(arrays[0]).astype(np.int64)])


def _select_v2_infer(meta, attrs, host):
    return [broadcast("SelectV2", *(m.shape for m in meta))]


_define("SelectV2", [Arg("condition", dtype=dt.bool_), Arg("t", "T"), Arg("e", "T")],
        [Arg("output", "T")], [Attr("T", "type", allowed=ALL)], _select_v2_infer,
        lambda arrays, attrs: [np.where(*arrays).astype(arrays[1].dtype)])


# -- shapes ---------------------------------------------------------------------------------
def _shape_of_type(name, value):
    _define(name, [Arg("input", "T")], [Arg("output", "out_type")],
            [Attr("T", "type", allowed=ALL),
             Attr("out_type", "type", dt.int32, allowed=INDEX)],
            lambda meta, attrs, host: [() if name == "Size" else (len(meta[0].shape),)],
            lambda arrays, attrs: [np.asarray(value(arrays[0]), attrs["out_type"].numpy_dtype)])


_shape_of_type("Shape", lambda x: x.shape)
_shape_of_type("Size", lambda x: x.size)
_define("Rank", [Arg("input", "T")], [Arg("output", dtype=dt.int32)],
        [Attr("T", "type", allowed=ALL)], lambda meta, attrs, host: [()],
        lambda arrays, attrs: [np.asarray(arrays[0].ndim, np.int32)])


def _expand_axis(shape, values) -> int:
    rank = len(shape) + 1
    axis = _scalar("ExpandDims", values, "dim")
    if not -rank <= axis < rank:
        raise bad("ExpandDims", f"dim {axis} is out of range for a tensor of rank "
                                f"{rank - 1} (valid: {-rank}..{rank - 1})")
    return axis % rank


def _expanded(shape, values) -> Tuple[int, ...]:
    axis = _expand_axis(shape, values)
    return shape[:axis] + (1,) + shape[axis:]


_define("ExpandDims", [Arg("input", "T"), Arg("dim", "Tdim", host=True)],
        [Arg("output", "T")],
        [Attr("T", "type", allowed=ALL), Attr("Tdim", "type", dt.int32, allowed=INDEX)],
        lambda meta, attrs, host: [_expanded(meta[0].shape, host[1])],
        lambda arrays, attrs: [arrays[0].reshape(_expanded(arrays[0].shape, arrays[1]))])


def _squeezed(shape, dims) -> Tuple[int, ...]:
    if not dims:
        return tuple(n for n in shape if n != 1)
    axes = _axes("Squeeze", np.asarray(dims, np.int64), len(shape), "squeeze dimension")
    for a in axes:
        if shape[a] != 1:
            raise bad("Squeeze", f"cannot squeeze dimension {a} of size {shape[a]} "
                                 f"(shape {shape}): only dimensions of size 1")
    return tuple(n for i, n in enumerate(shape) if i not in axes)


_define("Squeeze", [Arg("input", "T")], [Arg("output", "T")],
        [Attr("T", "type", allowed=ALL), Attr("squeeze_dims", "list(int)", (), minimum=0)],
        lambda meta, attrs, host: [_squeezed(meta[0].shape, attrs["squeeze_dims"])],
        lambda arrays, attrs: [arrays[0].reshape(_squeezed(arrays[0].shape,
                                                           attrs["squeeze_dims"]))])


def _broadcast_target(shape, values) -> Tuple[int, ...]:
    target = tuple(_shape_values("BroadcastTo", values, "shape"))
    if any(n < 0 for n in target):
        raise bad("BroadcastTo", f"shape {list(target)} has a negative size")
    try:
        ok = np.broadcast_shapes(shape, target) == target
    except ValueError:
        ok = False
    if not ok:
        raise bad("BroadcastTo", f"cannot broadcast a tensor of shape {shape} to "
                                 f"{list(target)}")
    return target


_define("BroadcastTo", [Arg("input", "T"), Arg("shape", "Tidx", host=True)],
        [Arg("output", "T")],
        [Attr("T", "type", allowed=ALL), Attr("Tidx", "type", dt.int32, allowed=INDEX)],
        lambda meta, attrs, host: [_broadcast_target(meta[0].shape, host[1])],
        lambda arrays, attrs: [np.broadcast_to(
            arrays[0], _broadcast_target(arrays[0].shape, arrays[1])).copy()])


def _multiples(shape, values) -> List[int]:
    multiples = _shape_values("Tile", values, "multiples")
    if len(multiples) != len(shape) or any(m < 0 for m in multiples):
        raise bad("Tile", f"multiples {multiples} must hold one non-negative count per "
                          f"dimension of the input {shape}")
    return multiples


_define("Tile", [Arg("input", "T"), Arg("multiples", "Tmultiples", host=True)],
        [Arg("output", "T")],
        [Attr("T", "type", allowed=ALL), Attr("Tmultiples", "type", dt.int32, allowed=INDEX)],
        lambda meta, attrs, host: [tuple(n * m for n, m in
                                         zip(meta[0].shape, _multiples(meta[0].shape, host[1])))],
        lambda arrays, attrs: [np.tile(arrays[0], _multiples(arrays[0].shape, arrays[1]))
                               .reshape(tuple(n * m for n, m in zip(
                                   arrays[0].shape, _multiples(arrays[0].shape, arrays[1]))))])


def _paddings(op: str, shape, values) -> List[Tuple[int, int]]:
    array = np.asarray(values)
    if array.shape != (len(shape), 2):
        raise bad(op, f"paddings must have shape ({len(shape)}, 2) for an input of rank "
                      f"{len(shape)}, got {array.shape}")
    pairs = [(int(a), int(b)) for a, b in array]
    if any(a < 0 or b < 0 for a, b in pairs):
        raise bad(op, f"paddings {pairs} must be non-negative")
    return pairs


def _padded(op: str, shape, values) -> Tuple[int, ...]:
    return tuple(n + a + b for n, (a, b) in zip(shape, _paddings(op, shape, values)))


_define("Pad", [Arg("input", "T"), Arg("paddings", "Tpaddings", host=True)],
        [Arg("output", "T")],
        [Attr("T", "type", allowed=ALL), Attr("Tpaddings", "type", dt.int32, allowed=INDEX)],
        lambda meta, attrs, host: [_padded("Pad", meta[0].shape, host[1])],
        lambda arrays, attrs: [np.pad(arrays[0], _paddings("Pad", arrays[0].shape, arrays[1]))])


def _pad_v2_infer(meta, attrs, host):
    if meta[2].shape != ():
        raise bad("PadV2", f"constant_values must be a scalar, got shape {meta[2].shape}")
    return [_padded("PadV2", meta[0].shape, host[1])]


_define("PadV2", [Arg("input", "T"), Arg("paddings", "Tpaddings", host=True),
                  Arg("constant_values", "T")], [Arg("output", "T")],
        [Attr("T", "type", allowed=ALL), Attr("Tpaddings", "type", dt.int32, allowed=INDEX)],
        _pad_v2_infer,
        lambda arrays, attrs: [np.pad(arrays[0], _paddings("PadV2", arrays[0].shape, arrays[1]),
                                      constant_values=arrays[2])])

def _reverse_infer(meta, attrs, host):
    _axes("ReverseV2", host[1], len(meta[0].shape), "axis")
    return [meta[0].shape]


_define("ReverseV2", [Arg("tensor", "T"), Arg("axis", "Tidx", host=True)],
        [Arg("output", "T")],
        [Attr("Tidx", "type", dt.int32, allowed=INDEX), Attr("T", "type", allowed=ALL)],
        _reverse_infer,
        lambda arrays, attrs: [np.ascontiguousarray(np.flip(
            arrays[0], tuple(_axes("ReverseV2", arrays[1], arrays[0].ndim, "axis"))))])


# -- sequences ------------------------------------------------------------------------------
def _range_count(values) -> Tuple[float, float, int]:
    start, limit, delta = (np.asarray(v) for v in values)
    for what, v in (("start", start), ("limit", limit), ("delta", delta)):
        if v.ndim:
            raise bad("Range", f"{what} must be a scalar, got shape {v.shape}")
    if delta == 0:
        raise bad("Range", "delta must not be 0")
    if (delta > 0 and start > limit) or (delta < 0 and start < limit):
        raise bad("Range", f"start {start} and limit {limit} are in the wrong order for "
                           f"delta {delta}")
    if start.dtype.kind in "iu":
        count = (abs(int(limit) - int(start)) + abs(int(delta)) - 1) // abs(int(delta))
    else:
        count = int(np.ceil(abs((float(limit) - float(start)) / float(delta))))
    return start, delta, count


def _range_cpu(arrays, attrs):
    start, delta, count = _range_count(arrays)
    dtype = attrs["Tidx"].numpy_dtype
    return [(start + delta * np.arange(count, dtype=np.float64 if dtype.kind == "f" else None)
             ).astype(dtype)]


_RANGE_TYPES = (dt.bfloat16, dt.float16, dt.float32, dt.float64, dt.int8, dt.int16, dt.int32,
                dt.int64, dt.uint16, dt.uint32, dt.uint64)
_define("Range", [Arg("start", "Tidx", host=True), Arg("limit", "Tidx", host=True),
                  Arg("delta", "Tidx", host=True)], [Arg("output", "Tidx")],
        [Attr("Tidx", "type", dt.int32, allowed=_RANGE_TYPES)],
        lambda meta, attrs, host: [(_range_count(host)[2],)], _range_cpu)


def _one_hot_geometry(meta_or_arrays, host_depth, attrs) -> Tuple[int, int]:
    shape = meta_or_arrays[0].shape
    depth = _scalar("OneHot", host_depth, "depth")
    if depth < 0:
        raise bad("OneHot", f"depth must be non-negative, got {depth}")
    for i, what in ((2, "on_value"), (3, "off_value")):
        if meta_or_arrays[i].shape != ():
            raise bad("OneHot", f"{what} must be a scalar, got shape {meta_or_arrays[i].shape}")
    axis = attrs["axis"]
    if not -1 <= axis <= len(shape):
        raise bad("OneHot", f"axis {axis} must be -1 or in [0, {len(shape)}]")
    return (len(shape) if axis == -1 else axis), depth


def _one_hot_infer(meta, attrs, host):
    axis, depth = _one_hot_geometry(meta, host[1], attrs)
    shape = meta[0].shape
    return [shape[:axis] + (depth,) + shape[axis:]]


def _one_hot_cpu(arrays, attrs):
    indices, _, on, off = arrays
    axis, depth = _one_hot_geometry(arrays, arrays[1], attrs)
    # The output and nothing of its size besides: off everywhere, on where an index is in
    # range (an index outside [0, depth) gives a row of off, as in TensorFlow).
    out = np.full(indices.shape + (depth,), off, dtype=on.dtype)
    flat = indices.reshape(-1).astype(np.int64)
    rows = np.nonzero((flat >= 0) & (flat < depth))[0]
    out.reshape(flat.size, depth)[rows, flat[rows]] = on
    return [np.moveaxis(out, -1, axis)]


_define("OneHot", [Arg("indices", "TI"), Arg("depth", dtype=dt.int32, host=True),
                   Arg("on_value", "T"), Arg("off_value", "T")], [Arg("output", "T")],
        [Attr("axis", "int", -1), Attr("T", "type", allowed=ALL),
         Attr("TI", "type", dt.int64, allowed=(dt.uint8, dt.int8, dt.int32, dt.int64))],
        _one_hot_infer, _one_hot_cpu)


def _cumulative(name, fn, identity):
    def infer(meta, attrs, host):
        _one_axis(name, host[1], max(len(meta[0].shape), 1))
        return [meta[0].shape]

    def cpu(arrays, attrs):
        x = arrays[0]
        if x.ndim == 0:
            return [x.copy()]
        axis = _one_axis(name, arrays[1], x.ndim)
        if attrs["reverse"]:
            x = np.flip(x, axis)
        with np.errstate(all="ignore"):
            out = fn(x, axis=axis, dtype=x.dtype)
            if attrs["exclusive"]:
                out = np.concatenate([np.full_like(np.take(out, [0], axis), identity),
                                      np.take(out, range(x.shape[axis] - 1), axis)], axis)
        if attrs["reverse"]:
            out = np.flip(out, axis)
        return [np.ascontiguousarray(out)]

    _define(name, [Arg("x", "T"), Arg("axis", "Tidx", host=True)], [Arg("out", "T")],
            [Attr("exclusive", "bool", False), Attr("reverse", "bool", False),
             Attr("T", "type", allowed=NUMBER), Attr("Tidx", "type", dt.int32, allowed=INDEX)],
            infer, cpu)


_cumulative("Cumsum", np.cumsum, 0)
_cumulative("Cumprod", np.cumprod, 1)
