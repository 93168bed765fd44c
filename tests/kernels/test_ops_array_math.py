"""The array and math ops of op_defs_array.py and op_defs_math.py on the CPU: each op's NumPy
kernel against values worked out with NumPy (or by hand where TensorFlow differs from
NumPy), list inputs and outputs, data-dependent shapes, and the errors of bad input."""
from __future__ import annotations

import numpy as np
import pytest

import pluggable
from pluggable import raw_ops
from pluggable.eager.dispatch import execute
from pluggable.errors import InvalidArgumentError
from pluggable.oplib.core import OPS

A = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
I = np.array([[3, -7], [0, 5]], np.int32)
J = np.array([[2, 2], [-3, 4]], np.int32)
F = np.array([-2.5, -0.5, 0.5, 1.5, 2.5], np.float32)


def values(t):
    return t.numpy() if not isinstance(t, tuple) else [x.numpy() for x in t]


CASES = [
    ("ConcatV2", dict(values=[A, A[:, :1]], axis=np.int32(1)), np.concatenate([A, A[:, :1]], 1)),
    ("ConcatV2", dict(values=[A, A], axis=np.int32(-1)), np.concatenate([A, A], -1)),
    ("Pack", dict(values=[I, J], axis=1), np.stack([I, J], 1)),
    ("Pack", dict(values=[np.float32(1), np.float32(2)]), np.array([1, 2], np.float32)),
    ("Unpack", dict(value=A, num=3, axis=1), [A[:, 0], A[:, 1], A[:, 2]]),
    ("Split", dict(axis=np.int32(2), value=A, num_split=2), np.split(A, 2, axis=2)),
    ("SplitV", dict(value=A, size_splits=np.array([1, -1]), axis=np.int32(2), num_split=2),
     [A[..., :1], A[..., 1:]]),
    ("SelectV2", dict(condition=np.array([True, False, True]), t=np.float32(1),
                      e=np.zeros((2, 3), np.float32)),
     np.array([[1, 0, 1], [1, 0, 1]], np.float32)),
    ("NotEqual", dict(x=I, y=np.int32(0)), I != 0),
    ("GreaterEqual", dict(x=I, y=J), I >= J),
    ("LessEqual", dict(x=I, y=J), I <= J),
    ("Pow", dict(x=I, y=np.int32(2)), I ** 2),
    ("Pow", dict(x=np.float32([4, 9]), y=np.float32(0.5)), np.float32([2, 3])),
    # Python's floor division and modulo, the divisor's sign.
    ("FloorDiv", dict(x=I, y=J), np.array([[1, -4], [0, 1]], np.int32)),
    ("FloorMod", dict(x=I, y=J), np.array([[1, 1], [0, 1]], np.int32)),
    ("FloorMod", dict(x=np.float32([-7, 7]), y=np.float32([2, -2])), np.float32([1, -1])),
    ("FloorDiv", dict(x=np.float32([-7, 7]), y=np.float32(2)), np.float32([-4, 3])),
    # C's truncating division and remainder.
    ("TruncateDiv", dict(x=I, y=J), np.array([[1, -3], [0, 1]], np.int32)),
    ("TruncateMod", dict(x=I, y=J), np.array([[1, -1], [0, 1]], np.int32)),
    ("DivNoNan", dict(x=np.float32([1, 2, 3]), y=np.float32([0, 4, 0])),
     np.float32([0, 0.5, 0])),
    ("Xdivy", dict(x=np.float32([0, 2]), y=np.float32([0, 4])), np.float32([0, 0.5])),
    ("SquaredDifference", dict(x=I, y=J), (I - J) ** 2),
    ("Atan2", dict(y=np.float64([1, -1]), x=np.float64([-1, -1])),
     np.arctan2([1.0, -1.0], [-1.0, -1.0])),
    ("AddN", dict(inputs=[I, J, I]), I + J + I),
    ("BitwiseAnd", dict(x=I, y=J), I & J),
    ("BitwiseOr", dict(x=I, y=J), I | J),
    ("BitwiseXor", dict(x=I, y=J), I ^ J),
    ("Invert", dict(x=I), ~I),
    ("LeftShift", dict(x=np.int8([1, 1]), y=np.int8([3, 9])), np.int8([8, -128])),
    ("RightShift", dict(x=np.int32([-16, 16]), y=np.int32([2, 40])), np.int32([-4, 0])),
    ("LogicalAnd", dict(x=np.array([True, True, False]), y=np.array([True, False, False])),
     np.array([True, False, False])),
    ("LogicalOr", dict(x=np.array([True, False]), y=np.array([False, False])),
     np.array([True, False])),
    ("LogicalNot", dict(x=np.array([True, False])), np.array([False, True])),
    ("Round", dict(x=F), np.float32([-2, -0, 0, 2, 2])),  # half to even
    ("Rint", dict(x=F), np.float32([-2, -0, 0, 2, 2])),
    ("Floor", dict(x=F), np.floor(F)),
    ("Ceil", dict(x=F), np.ceil(F)),
    ("Sign", dict(x=I), np.sign(I)),
    ("Reciprocal", dict(x=np.int32([1, 2, -1])), np.int32([1, 0, -1])),
    ("Reciprocal", dict(x=np.float32([2, -4])), np.float32([0.5, -0.25])),
    ("Sin", dict(x=F), np.sin(F)),
    ("Cos", dict(x=F), np.cos(F)),
    ("Tan", dict(x=F), np.tan(F)),
    ("Atan", dict(x=F), np.arctan(F)),
    ("Sinh", dict(x=F), np.sinh(F)),
    ("Asinh", dict(x=F), np.arcsinh(F)),
    ("Log1p", dict(x=np.float32([0, 1e-8])), np.float32([0, 1e-8])),
    ("Expm1", dict(x=np.float32([0, 1e-8])), np.float32([0, 1e-8])),
    ("Erf", dict(x=np.float64([0, 1])), np.float64([0, 0.8427007929497149])),
    ("Softplus", dict(features=np.float32([0, 100, -100])),
     np.float32([np.log(2), 100, 3.7200760e-44])),
    ("Softsign", dict(features=np.float32([1, -3])), np.float32([0.5, -0.75])),
    ("Elu", dict(features=np.float32([1, -1])), np.float32([1, np.expm1(-1)])),
    ("Selu", dict(features=np.float64([1, -1])),
     np.float64([1.0507009873554805, 1.0507009873554805 * 1.6732632423543772 * np.expm1(-1)])),
    ("LeakyRelu", dict(features=np.float32([2, -2])), np.float32([2, -0.4])),
    ("LeakyRelu", dict(features=np.float32([2, -2]), alpha=0.5), np.float32([2, -1])),
    ("IsNan", dict(x=np.float32([np.nan, np.inf, 1])), np.array([True, False, False])),
    ("IsInf", dict(x=np.float32([np.nan, -np.inf, 1])), np.array([False, True, False])),
    ("IsFinite", dict(x=np.float32([np.nan, np.inf, 1])), np.array([False, False, True])),
    ("ClipByValue", dict(t=I, clip_value_min=np.int32(0), clip_value_max=np.int32(4)),
     np.clip(I, 0, 4)),
    ("All", dict(input=np.array([[True, False], [True, True]]),
                 axis=np.int32(1)), np.array([False, True])),
    ("Any", dict(input=np.array([[True, False], [False, False]]),
                 axis=np.int32([0, 1]), keep_dims=True), np.array([[True]])),
    ("ArgMin", dict(input=I, dimension=np.int32(1)), np.array([1, 0], np.int64)),
    ("Tile", dict(input=I, multiples=np.int32([1, 2])), np.tile(I, (1, 2))),
    ("Tile", dict(input=I, multiples=np.int32([0, 2])), np.zeros((0, 4), np.int32)),
    ("StridedSlice", dict(input=A, begin=np.int32([1, -1]), end=np.int32([2, -4]),
                          strides=np.int32([1, -1])), A[1:2, -1:-4:-1]),
    ("StridedSlice", dict(input=A, begin=np.int32([0, 0, 1]), end=np.int32([0, 0, 0]),
                          strides=np.int32([1, 1, 2]), ellipsis_mask=1, new_axis_mask=2,
                          end_mask=4), A[..., None, 1::2]),
    ("StridedSlice", dict(input=A, begin=np.int32([-1, 2]), end=np.int32([0, 3]),
                          strides=np.int32([1, 1]), shrink_axis_mask=3), A[-1, 2]),
    ("StridedSlice", dict(input=A, begin=np.int32([0]), end=np.int32([100]),
                          strides=np.int32([1]), begin_mask=1), A[:100]),
    ("Slice", dict(input=A, begin=np.int32([1, 0, 1]), size=np.int32([1, -1, 2])),
     A[1:2, :, 1:3]),
    ("GatherV2", dict(params=A, indices=np.int32([[2, 0]]), axis=np.int32(1)),
     np.take(A, [[2, 0]], axis=1)),
    ("GatherV2", dict(params=A, indices=np.int32([[2], [0]]), axis=np.int32(1), batch_dims=1),
     np.stack([A[0, [2]], A[1, [0]]])),
    ("GatherNd", dict(params=A, indices=np.int64([[1, 2], [0, 0]])), A[[1, 0], [2, 0]]),
    ("GatherNd", dict(params=I, indices=np.int32([[1, 1, 0]]).reshape(3, 1)), I[[1, 1, 0]]),
    ("Where", dict(condition=np.array([[0, 3], [2, 0]], np.float32)),
     np.array([[0, 1], [1, 0]], np.int64)),
    ("Where", dict(condition=np.zeros((2, 2), bool)), np.zeros((0, 2), np.int64)),
    ("BroadcastTo", dict(input=np.int32([1, 2]), shape=np.int32([3, 2])),
     np.broadcast_to(np.int32([1, 2]), (3, 2))),
    ("Range", dict(start=np.int32(5), limit=np.int32(-2), delta=np.int32(-3)),
     np.int32([5, 2, -1])),
    ("Range", dict(start=np.float32(0), limit=np.float32(1), delta=np.float32(0.25)),
     np.float32([0, 0.25, 0.5, 0.75])),
    ("Shape", dict(input=A), np.int32([2, 3, 4])),
    ("Shape", dict(input=A, out_type="int64"), np.int64([2, 3, 4])),
    ("Size", dict(input=A), np.int32(24)),
    ("Rank", dict(input=A), np.int32(3)),
    ("ExpandDims", dict(input=I, axis=np.int32(-1)), I[..., None]),
    ("Squeeze", dict(input=np.zeros((1, 2, 1), np.int32)), np.zeros(2, np.int32)),
    ("Squeeze", dict(input=np.zeros((1, 2, 1), np.int32), axis=[-1]),
     np.zeros((1, 2), np.int32)),
    ("Pad", dict(input=I, paddings=np.int32([[1, 0], [0, 2]])), np.pad(I, ((1, 0), (0, 2)))),
    ("PadV2", dict(input=I, paddings=np.int32([[0, 1], [1, 0]]),
                   constant_values=np.int32(9)), np.pad(I, ((0, 1), (1, 0)), constant_values=9)),
    ("ReverseV2", dict(tensor=A, axis=np.int32([0, -1])), A[::-1, :, ::-1]),
    ("OneHot", dict(indices=np.int64([0, 2, -1, 5]), depth=np.int32(3), on_value=np.float32(5),
                    off_value=np.float32(-1)),
     np.float32([[5, -1, -1], [-1, -1, 5], [-1, -1, -1], [-1, -1, -1]])),
    ("OneHot", dict(indices=np.int32([1, 0]), depth=np.int32(2), on_value=True,
                    off_value=False, axis=0), np.array([[False, True], [True, False]])),
    ("Cumsum", dict(x=I, axis=np.int32(1)), np.cumsum(I, 1).astype(np.int32)),
    ("Cumsum", dict(x=np.int32([1, 2, 3]), axis=np.int32(0), exclusive=True, reverse=True),
     np.int32([5, 3, 0])),
    ("Cumprod", dict(x=np.int32([1, 2, 3]), axis=np.int32(0), exclusive=True),
     np.int32([1, 1, 2])),
]


@pytest.mark.parametrize("op, kwargs, expected", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_cpu_kernel_values(op, kwargs, expected):
    result = values(getattr(raw_ops, op)(**kwargs))
    if isinstance(expected, list):
        assert len(result) == len(expected)
        pairs = zip(result, expected)
    else:
        pairs = [(result, expected)]
    for got, want in pairs:
        want = np.asarray(want)
        assert got.shape == want.shape, (got, want)
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-30)
        else:
            np.testing.assert_array_equal(got, want)


def test_the_library_has_at_least_100_ops_each_with_a_cpu_kernel():
    assert len(OPS) >= 100
    assert all(callable(op.cpu) and callable(op.infer) for op in OPS.values())


def test_list_inputs_are_flattened_and_counted():
    out = execute("ConcatV2", [[I, J, I], np.int32(0)])
    assert out[0].shape == (6, 2)
    with pytest.raises(InvalidArgumentError, match="ConcatV2: attribute N=1 must be at least 2"):
        execute("ConcatV2", [[I], np.int32(0)])
    with pytest.raises(InvalidArgumentError, match="input values must be a list or tuple"):
        execute("ConcatV2", [I, np.int32(0)])
    with pytest.raises(InvalidArgumentError, match="N=3 but input values holds 2 tensors"):
        execute("ConcatV2", [[I, J], np.int32(0)], {"N": 3})
    with pytest.raises(InvalidArgumentError, match="input values is int32 but T is float32"):
        raw_ops.Pack(values=[pluggable.tensor(np.float32([1, 2])), pluggable.tensor(I[0])])


def test_stateless_random_repeats_and_stateful_random_advances():
    a = raw_ops.StatelessRandomUniform(shape=[4], seed=[7, 1]).numpy()
    b = raw_ops.StatelessRandomUniform(shape=[4], seed=[7, 1]).numpy()
    c = raw_ops.StatelessRandomUniform(shape=[4], seed=[7, 2]).numpy()
    assert a.dtype == np.float32 and (a == b).all() and not (a == c).all()
    assert ((a >= 0) & (a < 1)).all()
    from pluggable.oplib.math import reset_random_generators

    reset_random_generators()
    first = raw_ops.RandomStandardNormal(shape=[3], dtype="float64", seed=3, seed2=4).numpy()
    second = raw_ops.RandomStandardNormal(shape=[3], dtype="float64", seed=3, seed2=4).numpy()
    assert not (first == second).all()
    reset_random_generators()
    again = raw_ops.RandomStandardNormal(shape=[3], dtype="float64", seed=3, seed2=4).numpy()
    assert (again == first).all()
    truncated = raw_ops.StatelessTruncatedNormal(shape=[1000], seed=[1, 1]).numpy()
    assert np.abs(truncated).max() <= 2 and truncated.std() > 0.7
    ints = raw_ops.RandomUniformInt(shape=[100], minval=np.int32(-3), maxval=np.int32(3),
                                    seed=1).numpy()
    assert ints.dtype == np.int32 and ints.min() >= -3 and ints.max() < 3


def test_data_dependent_shapes_on_the_xpu_fall_back_and_stay_right():
    x = pluggable.tensor(np.array([[0, 1], [1, 1]], np.int32), device="xpu:0")
    with pluggable.device("xpu:0"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pluggable.eager.dispatch.PlacementWarning)
            where = raw_ops.Where(condition=x)
    assert where.numpy().tolist() == [[0, 1], [1, 0], [1, 1]]


BAD = [
    ("ConcatV2", dict(values=[I, A], axis=np.int32(0)), "values\\[1\\] has shape \\(2, 3, 4\\)"),
    ("ConcatV2", dict(values=[I, I], axis=np.int32(2)), "axis 2 is out of range"),
    ("Pack", dict(values=[I, I[:1]]), "packed tensors must have one shape"),
    ("Unpack", dict(value=I, num=3), "num=3 but dimension 0"),
    ("Split", dict(axis=np.int32(0), value=A, num_split=3), "cannot be split evenly"),
    ("SplitV", dict(value=A, size_splits=np.array([1, 2]), axis=np.int32(0), num_split=2),
     "sum to 3, not to the size 2"),
    ("FloorDiv", dict(x=I, y=np.int32(0)), "Integer division by zero"),
    ("FloorMod", dict(x=I, y=np.int32(0)), "Integer division by zero"),
    ("TruncateDiv", dict(x=I, y=np.int32(0)), "Integer division by zero"),
    ("Pow", dict(x=I, y=np.int32(-1)), "Integers to negative integer powers"),
    ("AddN", dict(inputs=[I, A]), "inputs\\[1\\] has shape"),
    ("Tile", dict(input=I, multiples=np.int32([2])), "one non-negative count per dimension"),
    ("StridedSlice", dict(input=I, begin=np.int32([5]), end=np.int32([6]),
                          strides=np.int32([1]), shrink_axis_mask=1),
     "index 5 is out of bounds for dimension 0 of size 2"),
    ("StridedSlice", dict(input=I, begin=np.int32([0]), end=np.int32([1]),
                          strides=np.int32([0])), "stride 0 is 0"),
    ("StridedSlice", dict(input=I, begin=np.int32([0, 0, 0]), end=np.int32([1, 1, 1]),
                          strides=np.int32([1, 1, 1])), "the index has 3 dimensions"),
    ("StridedSlice", dict(input=I, begin=np.int32([0]), end=np.int32([1, 2]),
                          strides=np.int32([1])), "must have one length"),
    ("Slice", dict(input=I, begin=np.int32([1, 0]), size=np.int32([2, 1])),
     "dimension 0: begin 1 and size 2 do not fit"),
    ("GatherV2", dict(params=I, indices=np.int32([2]), axis=np.int32(0)),
     "indices\\[0\\] = 2 is not in \\[0, 2\\)"),
    ("GatherNd", dict(params=I, indices=np.int32([[0, 0, 0]])), "index 3 dimensions"),
    ("GatherNd", dict(params=I, indices=np.int32([[0, -1]])), "is not in \\[0, 2\\)"),
    ("BroadcastTo", dict(input=np.int32([1, 2]), shape=np.int32([3])), "cannot broadcast"),
    ("Range", dict(start=np.int32(0), limit=np.int32(5), delta=np.int32(0)),
     "delta must not be 0"),
    ("Range", dict(start=np.int32(5), limit=np.int32(0), delta=np.int32(1)), "wrong order"),
    ("ExpandDims", dict(input=I, axis=np.int32(3)), "dim 3 is out of range"),
    ("Squeeze", dict(input=I, axis=[0]), "cannot squeeze dimension 0 of size 2"),
    ("Pad", dict(input=I, paddings=np.int32([[1, 1]])), "paddings must have shape \\(2, 2\\)"),
    ("Pad", dict(input=I, paddings=np.int32([[1, -1], [0, 0]])), "must be non-negative"),
    ("OneHot", dict(indices=np.int32([1]), depth=np.int32(-1), on_value=1.0, off_value=0.0),
     "depth must be non-negative"),
    ("ClipByValue", dict(t=I, clip_value_min=np.int32([0, 1, 2]), clip_value_max=np.int32(3)),
     "clip_value_min must be a scalar or have t's shape"),
    ("StatelessRandomUniform", dict(shape=[2], seed=[1]), "seed must be a vector of 2"),
    ("RandomUniformInt", dict(shape=[2], minval=np.int32(3), maxval=np.int32(3)),
     "Need minval < maxval"),
    ("ArgMin", dict(input=np.zeros((2, 0)), dimension=np.int32(1)), "empty dimension"),
    ("LogicalAnd", dict(x=I[0], y=I[0]), "input x: .* cannot be converted to bool"),
    ("Invert", dict(x=np.float32([1])), "T=float32 is not supported"),
]


@pytest.mark.parametrize("op, kwargs, match", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_bad_input_names_the_op_and_what_is_wrong(op, kwargs, match):
    with pytest.raises(InvalidArgumentError, match=f"{op}: .*{match}"):
        values(getattr(raw_ops, op)(**kwargs))
    # The host stays usable.
    assert raw_ops.AddV2(x=np.int32(1), y=np.int32(2)).numpy() == 3
