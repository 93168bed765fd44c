"""The XPU kernels of the array and math ops whose CPU OpDefs live in op_defs_array.py and
op_defs_math.py, against those NumPy references: every registered dtype family, empty,
broadcast and negative-axis shapes; and the value edge cases where the XPU answers like a
GPU (integer division by zero, out-of-range gather indices) instead of failing its stream."""
from __future__ import annotations

import numpy as np
import pytest

import pluggable
from pluggable import config
from pluggable.eager import dispatch
from pluggable.errors import InvalidArgumentError
from test_ops_xpu import BINARY_SHAPES, TOLERANCE, values

N = ["float32", "float64", "int32", "int64"]
FIXED = ["float32", "int64", "bool", "float16", "int8", "complex64"]  # one per element size

XPU_OPS = ["ConcatV2", "Pack", "SelectV2", "NotEqual", "GreaterEqual", "LessEqual", "Pow",
           "Cast", "Tile", "StridedSlice", "GatherV2", "BroadcastTo", "DivNoNan", "FloorMod",
           "FloorDiv", "Range", "Square", "Sqrt", "AddN", "Fill", "Shape", "Slice", "Split",
           "ExpandDims", "Squeeze", "Pad"]


def _on_xpu(x):
    if isinstance(x, list):
        return [pluggable.tensor(v, device="xpu:0") for v in x]
    return pluggable.tensor(x, device="xpu:0")


def both(op, inputs, attrs=None):
    """Runs op on the CPU and on XPU:0 and checks they agree; returns the XPU's outputs."""
    with pluggable.device("CPU"):
        expected = [t.numpy() for t in dispatch.execute(op, inputs, attrs)]
    with pluggable.device("xpu:0"):
        outputs = dispatch.execute(op, [_on_xpu(x) for x in inputs], attrs)
    got = []
    assert len(outputs) == len(expected)
    for out, want in zip(outputs, expected):
        assert out.device == "/device:XPU:0", f"{op} did not run on the XPU"
        value = out.numpy()
        assert value.shape == want.shape and value.dtype == want.dtype, (value, want)
        if value.dtype.name == "bfloat16":  # NumPy does not see its NaNs as floats
            np.testing.assert_array_equal(value.astype(np.float32), want.astype(np.float32))
        elif value.dtype.kind == "f" and value.dtype.name in TOLERANCE:
            np.testing.assert_allclose(value, want, equal_nan=True, **TOLERANCE[value.dtype.name])
        else:
            np.testing.assert_array_equal(value, want)
        got.append(value)
    return got


def xpu(op, inputs, attrs=None):
    with pluggable.device("xpu:0"):
        return [t.numpy() for t in dispatch.execute(op, [_on_xpu(x) for x in inputs], attrs)]


def mixed(shape, dtype, seed=0):
    if dtype.startswith("complex"):
        return (values(shape, "float32", seed) + 1j * values(shape, "float32", seed + 1)
                ).astype(dtype)
    if dtype in ("float16", "int8"):
        return values(shape, "int32", seed, low=-100, high=100).astype(dtype)
    return values(shape, dtype, seed)


@pytest.mark.parametrize("op", XPU_OPS)
def test_each_op_has_a_cpu_and_an_xpu_kernel(op):
    assert {k.device_type for k in config.list_kernels(op)} >= {"CPU", "XPU"}


def test_host_memory_arguments_are_declared_as_tensorflow_gpu_kernels_do():
    def host(op):
        return set(config.list_kernels(op, "XPU")[0].host_memory)

    assert host("ConcatV2") == {"axis"}
    assert host("StridedSlice") == {"begin", "end", "strides"}
    assert host("Range") == {"start", "limit", "delta"}
    assert host("GatherV2") == {"axis"}
    assert host("Conv2DBackpropInput") == {"input_sizes"}
    assert host("Pad") == {"paddings"} and host("Tile") == {"multiples"}


# -- binary ops -------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["NotEqual", "GreaterEqual", "LessEqual"])
@pytest.mark.parametrize("dtype", N)
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
def test_comparisons(op, dtype, shapes):
    x = np.round(values(shapes[0], dtype, 1, low=-3, high=3))
    y = np.round(values(shapes[1], dtype, 2, low=-3, high=3))
    both(op, [x, y])


def test_comparisons_with_nan_and_bool():
    x = np.array([np.nan, 1.0, np.nan], np.float32)
    y = np.array([np.nan, np.nan, 2.0], np.float32)
    assert both("NotEqual", [x, y])[0].tolist() == [True, True, True]
    assert both("LessEqual", [x, y])[0].tolist() == [False, False, False]
    assert both("GreaterEqual", [x, x])[0].tolist() == [False, True, False]
    b = np.array([True, False, True])
    assert both("NotEqual", [b, b[::-1].copy()])[0].tolist() == [False, False, False]


@pytest.mark.parametrize("op", ["FloorDiv", "FloorMod"])
@pytest.mark.parametrize("dtype", N)
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
def test_floor_division(op, dtype, shapes):
    x = values(shapes[0], dtype, 1)
    y = values(shapes[1], dtype, 2, low=-9, high=9, nonzero=True)
    both(op, [x, y])


@pytest.mark.parametrize("dtype", N)
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
def test_pow(dtype, shapes):
    if dtype.startswith("int"):
        x = values(shapes[0], dtype, 1, low=-6, high=6)
        y = values(shapes[1], dtype, 2, low=0, high=6)
    else:
        x = values(shapes[0], dtype, 1, positive=True)
        y = values(shapes[1], dtype, 2, low=-3, high=3)
    both("Pow", [x, y])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_div_no_nan(dtype):
    x = np.array([1, -2, np.nan, np.inf, 0, 6], dtype)
    y = np.array([0, 4, 0, 0, 0, -3], dtype)
    (z,) = both("DivNoNan", [x, y])
    assert z.tolist() == [0, -0.5, 0, 0, 0, -2]
    both("DivNoNan", [values((3, 4), dtype), values((4,), dtype, 2)])


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_division_by_zero_gives_a_gpu_value_and_the_stream_stays_healthy(dtype):
    info = np.iinfo(dtype)
    x = np.array([7, -7, 0, info.min, info.min, 5], dtype)
    y = np.array([0, 0, 0, -1, 0, 2], dtype)
    assert xpu("RealDiv", [x, y])[0].tolist() == [-1, -1, -1, info.min, -1, 2]
    assert xpu("FloorDiv", [x, y])[0].tolist() == [-1, -1, -1, info.min, -1, 2]
    assert xpu("FloorMod", [x, y])[0].tolist() == [7, -7, 0, 0, info.min, 1]
    # The CPU, like TensorFlow's CPU kernels, refuses.
    for op in ("RealDiv", "FloorDiv", "FloorMod"):
        with pytest.raises(InvalidArgumentError, match="Integer division by zero"), \
                pluggable.device("CPU"):
            dispatch.execute(op, [x, y])


def test_integer_pow_with_a_negative_exponent_truncates_on_the_xpu():
    x = np.array([2, 1, -1, -1, 0, 3], np.int32)
    y = np.array([-1, -3, -3, -2, 2, 3], np.int32)
    assert xpu("Pow", [x, y])[0].tolist() == [0, 1, -1, 1, 0, 27]


def test_not_equal_of_incompatible_shapes_without_the_error():
    x, y = np.ones((2, 3), np.float32), np.ones((4,), np.float32)
    with pytest.raises(InvalidArgumentError):
        xpu("NotEqual", [x, y])


# -- SelectV2, Cast, AddN ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", N + ["bool"])
@pytest.mark.parametrize("shapes", [((), (), ()), ((4,), (4,), (4,)), ((3, 1), (1, 4), ()),
                                    ((2, 1, 4), (3, 1), (1, 3, 4)), ((0, 3), (3,), (1, 3))],
                         ids=str)
def test_select_v2(dtype, shapes):
    cond = values(shapes[0], "bool", 1)
    both("SelectV2", [cond, values(shapes[1], dtype, 2), values(shapes[2], dtype, 3)])


CAST_VALUES = np.array([0, 1, -1, 0.5, 1.5, 2.5, -2.5, 3.999, 65504, 65520, 1e6, -1e6,
                        1e-8, 6e-8, 3e-5, np.pi, np.nan, np.inf, -np.inf, 2.0 ** 31, -2.0 ** 40,
                        1 + 2.0 ** -10, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 1 + 2.0 ** -8,
                        1 + 2.0 ** -9, 1 + 3 * 2.0 ** -9, 123456.789, -7e-39])


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
@pytest.mark.parametrize("other", ["float32", "float64", "int32", "int64", "bool", "float16",
                                   "bfloat16"])
def test_cast_to_and_from_half_types(half, other):
    from pluggable.dtypes import as_dtype

    source = CAST_VALUES.astype(np.float64)
    if other.startswith("int") or other == "bool":
        src = np.array([0, 1, -1, 7, 255, 256, 257, 2049, -65519, 65519, 65520, 70000,
                        2 ** 20 + 1, -(2 ** 24) - 1], other if other != "bool" else "int32")
        if other == "bool":
            src = src != 0
    else:
        with np.errstate(all="ignore"):
            src = source.astype(as_dtype(other).numpy_dtype)
    (to_half,) = both("Cast", [src], dict(DstT=half))
    if other != half:
        both("Cast", [to_half], dict(DstT=other))
    with np.errstate(all="ignore"):
        halves = source.astype(as_dtype(half).numpy_dtype)
    both("Cast", [halves], dict(DstT=other))


def test_cast_rounds_to_nearest_even():
    x = np.array([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 2049, 2051, 65519, 65520], np.float32)
    (h,) = xpu("Cast", [x], dict(DstT="float16"))
    assert h.astype(np.float64).tolist() == [1, 1 + 2.0 ** -9, 2048, 2052, 65504, np.inf]


@pytest.mark.parametrize("dtype", N)
@pytest.mark.parametrize("n", [1, 2, 3, 7])
@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 70000)], ids=str)
def test_add_n(dtype, n, shape):
    both("AddN", [[values(shape, dtype, seed) for seed in range(n)]])


def test_add_n_wraps_integers_and_checks_shapes():
    big = np.array([np.iinfo(np.int32).max], np.int32)
    assert xpu("AddN", [[big, big, np.array([2], np.int32)]])[0].tolist() == [0]
    with pytest.raises(InvalidArgumentError):
        xpu("AddN", [[np.ones(3, np.float32), np.ones(4, np.float32)]])


# -- joining and splitting --------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FIXED)
@pytest.mark.parametrize("shapes, axis", [
    ([(3,), (4,)], 0), ([(2, 3), (2, 1), (2, 0), (2, 5)], 1), ([(2, 3), (4, 3)], -2),
    ([(2, 3, 4), (2, 3, 4), (2, 3, 4)], -1), ([(0, 3), (0, 3)], 1), ([(5, 2), (0, 2)], 0),
    ([(1, 2, 3), (3, 2, 3)], 0)], ids=str)
def test_concat(dtype, shapes, axis):
    both("ConcatV2", [[mixed(s, dtype, i) for i, s in enumerate(shapes)], np.int32(axis)])


def test_concat_errors():
    with pytest.raises(InvalidArgumentError):
        xpu("ConcatV2", [[np.ones((2, 3)), np.ones((3, 3))], np.int32(1)])
    with pytest.raises(InvalidArgumentError):
        xpu("ConcatV2", [[np.ones((2, 3)), np.ones((2, 3))], np.int32(2)])


@pytest.mark.parametrize("dtype", FIXED)
@pytest.mark.parametrize("shape, n, axis", [((), 3, 0), ((4,), 2, 0), ((4,), 2, 1),
                                            ((2, 3), 4, -1), ((2, 3), 1, 1), ((0, 2), 3, 1),
                                            ((2, 3, 4), 2, -2)], ids=str)
def test_pack(dtype, shape, n, axis):
    both("Pack", [[mixed(shape, dtype, i) for i in range(n)]], dict(axis=axis))


@pytest.mark.parametrize("dtype", FIXED)
@pytest.mark.parametrize("shape, axis, n", [((6,), 0, 3), ((4, 6), 1, 2), ((4, 6), -1, 6),
                                            ((2, 4, 3), -2, 4), ((0, 4), 1, 2), ((3,), 0, 1)],
                         ids=str)
def test_split(dtype, shape, axis, n):
    outputs = both("Split", [np.int32(axis), mixed(shape, dtype)], dict(num_split=n))
    assert len(outputs) == n


def test_split_must_divide_evenly():
    with pytest.raises(InvalidArgumentError):
        xpu("Split", [np.int32(0), np.ones(5, np.float32)], dict(num_split=2))


# -- slicing ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FIXED)
@pytest.mark.parametrize("shape, begin, size", [((5,), [1], [3]), ((4, 5), [1, 0], [-1, 2]),
                                                ((4, 5), [0, 5], [4, 0]),
                                                ((2, 3, 4), [1, 1, 1], [1, 2, -1])], ids=str)
def test_slice(dtype, shape, begin, size):
    both("Slice", [mixed(shape, dtype), np.array(begin, np.int32), np.array(size, np.int32)])


def test_slice_out_of_bounds_is_an_error():
    with pytest.raises(InvalidArgumentError):
        xpu("Slice", [np.ones((3, 3)), np.array([2, 0]), np.array([2, 1])])


STRIDED = [
    ((10,), [2], [8], [2], {}),
    ((10,), [8], [2], [-2], {}),
    ((10,), [-1], [0], [-1], dict(end_mask=1)),
    ((10,), [-3], [100], [1], {}),
    ((4, 5), [1, 0], [3, 5], [1, 2], {}),
    ((4, 5), [1, 0], [0, 0], [1, 1], dict(shrink_axis_mask=1, end_mask=2)),
    ((4, 5), [-1, 1], [0, 4], [1, 1], dict(shrink_axis_mask=1)),
    ((4, 5, 6), [0, 1], [0, 3], [1, 1], dict(ellipsis_mask=1)),
    ((4, 5, 6), [1, 0, 2], [2, 0, 4], [1, 1, 1], dict(ellipsis_mask=2)),
    ((4, 5), [0, 0, 1], [0, 0, 3], [1, 1, 1], dict(new_axis_mask=1, begin_mask=2, end_mask=2)),
    ((4, 5), [0, 0], [0, 0], [1, 1], dict(new_axis_mask=2, ellipsis_mask=1)),
    ((4, 5), [3, 4], [-5, -6], [-1, -2], {}),
    ((4, 5), [1, 1], [1, 1], [1, 1], {}),
    ((0, 3), [0], [5], [1], {}),
    ((3, 4), [1], [2], [1], dict(shrink_axis_mask=1)),
]


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float16"])
@pytest.mark.parametrize("shape, begin, end, strides, masks", STRIDED, ids=str)
def test_strided_slice(dtype, shape, begin, end, strides, masks):
    both("StridedSlice", [mixed(shape, dtype), np.array(begin, np.int32),
                          np.array(end, np.int32), np.array(strides, np.int32)], masks)


def test_strided_slice_errors_are_found_before_the_work():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(InvalidArgumentError):
        xpu("StridedSlice", [x, np.array([0]), np.array([1]), np.array([0])])
    with pytest.raises(InvalidArgumentError):
        xpu("StridedSlice", [x, np.array([5]), np.array([6]), np.array([1])],
            dict(shrink_axis_mask=1))


# -- Tile, BroadcastTo, Pad, ExpandDims, Squeeze ----------------------------------------------
@pytest.mark.parametrize("dtype", FIXED)
@pytest.mark.parametrize("shape, multiples", [((), []), ((3,), [2]), ((2, 3), [2, 3]),
                                              ((2, 3), [1, 0]), ((2, 1, 3), [3, 4, 1]),
                                              ((0, 2), [3, 2])], ids=str)
def test_tile(dtype, shape, multiples):
    both("Tile", [mixed(shape, dtype), np.array(multiples, np.int32)])


@pytest.mark.parametrize("dtype", FIXED)
@pytest.mark.parametrize("shape, target", [((), [3, 2]), ((3,), [2, 3]), ((2, 1), [2, 5]),
                                           ((1, 3, 1), [4, 3, 2]), ((3,), [0, 3]),
                                           ((2, 3), [2, 3])], ids=str)
def test_broadcast_to(dtype, shape, target):
    both("BroadcastTo", [mixed(shape, dtype), np.array(target, np.int64)])


def test_broadcast_to_refuses_shapes_that_do_not_broadcast():
    with pytest.raises(InvalidArgumentError):
        xpu("BroadcastTo", [np.ones((2, 3)), np.array([3, 3])])


@pytest.mark.parametrize("dtype", FIXED)
@pytest.mark.parametrize("shape, pads", [((3,), [[1, 2]]), ((2, 3), [[0, 0], [2, 1]]),
                                         ((2, 3), [[1, 1], [0, 0]]), ((0, 2), [[1, 0], [1, 1]]),
                                         ((2, 2, 2), [[1, 0], [0, 1], [2, 2]])],
                         ids=str)
def test_pad(dtype, shape, pads):
    both("Pad", [mixed(shape, dtype), np.array(pads, np.int32).reshape(len(shape), 2)])


@pytest.mark.parametrize("dtype", FIXED)
@pytest.mark.parametrize("shape, axis", [((), 0), ((3,), -1), ((2, 3), 1), ((2, 3), -3),
                                         ((0, 3), 2)], ids=str)
def test_expand_dims(dtype, shape, axis):
    both("ExpandDims", [mixed(shape, dtype), np.int32(axis)])


@pytest.mark.parametrize("dtype", FIXED)
@pytest.mark.parametrize("shape, dims", [((1, 3, 1), []), ((1, 3, 1), [0]), ((1, 3, 1), [-1]),
                                         ((2, 1, 0), [1]), ((1,), [])], ids=str)
def test_squeeze(dtype, shape, dims):
    both("Squeeze", [mixed(shape, dtype)], dict(squeeze_dims=dims))


def test_squeeze_of_a_dimension_that_is_not_1_is_an_error():
    with pytest.raises(InvalidArgumentError):
        xpu("Squeeze", [np.ones((2, 3))], dict(squeeze_dims=[0]))


# -- GatherV2, Shape, Range, Fill -------------------------------------------------------------
@pytest.mark.parametrize("dtype", FIXED)
@pytest.mark.parametrize("index_type", ["int32", "int64"])
@pytest.mark.parametrize("shape, indices, axis", [((5,), [4, 0, 2, 2], 0),
                                                  ((4, 3), [[1, 0], [3, 3]], 0),
                                                  ((4, 3), [2, 0], 1), ((2, 3, 4), [3], -1),
                                                  ((4, 3), [], 0), ((0, 3), [], 1)], ids=str)
def test_gather(dtype, index_type, shape, indices, axis):
    both("GatherV2", [mixed(shape, dtype), np.array(indices, index_type), np.int32(axis)])


def test_out_of_range_gather_indices_give_zeros_on_the_xpu():
    params = np.arange(1, 13, dtype=np.float32).reshape(4, 3)
    indices = np.array([1, 4, -1, 3], np.int32)
    (out,) = xpu("GatherV2", [params, indices, np.int32(0)])
    np.testing.assert_array_equal(out, [[4, 5, 6], [0, 0, 0], [0, 0, 0], [10, 11, 12]])
    with pytest.raises(InvalidArgumentError), pluggable.device("CPU"):
        dispatch.execute("GatherV2", [params, indices, np.int32(0)])


@pytest.mark.parametrize("out_type", ["int32", "int64"])
@pytest.mark.parametrize("shape", [(), (0,), (2, 3, 4)], ids=str)
def test_shape(out_type, shape):
    both("Shape", [np.ones(shape, np.float32)], dict(out_type=out_type))


@pytest.mark.parametrize("dtype", N)
@pytest.mark.parametrize("start, limit, delta", [(0, 10, 1), (3, 18, 4), (10, 0, -3), (5, 5, 1),
                                                 (-4, 4, 3)])
def test_range(dtype, start, limit, delta):
    both("Range", [np.asarray(start, dtype), np.asarray(limit, dtype), np.asarray(delta, dtype)])


def test_range_errors():
    for start, limit, delta in ((0, 5, 0), (5, 0, 1)):
        with pytest.raises(InvalidArgumentError):
            xpu("Range", [np.int32(start), np.int32(limit), np.int32(delta)])


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_fill(dtype):
    both("Fill", [np.array([2, 3], np.int32), np.asarray(values((), dtype))])
