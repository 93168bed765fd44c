"""`pluggable.TensorShape` as ``tf.TensorShape``: dimensions, unknown dimensions and ranks,
equality with tuples and lists, indexing; `Tensor.shape` returns one. With TensorFlow
installed, the same questions are asked of ``tf.TensorShape``."""
from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

import pluggable
from pluggable import TensorShape
from tensorflow_child import in_tensorflow

SHAPES = [[], [3], [2, 3], [None], [None, 3], [2, None, 4], None]


ANSWERS = """
def answers(shape_type, dims):
    s = shape_type(dims)
    found = {"rank": s.rank, "num_elements": s.num_elements(),
             "fully_defined": s.is_fully_defined(), "str": str(s), "repr": repr(s),
             "equal_self": s == shape_type(dims), "not_equal_self": s != shape_type(dims),
             "unknown_equal": s == shape_type(None), "compatible": [
                 s.is_compatible_with(other) for other in ([], [3], [2, 3], [None, 4], None)]}
    if dims is not None:
        found.update(as_list=s.as_list(), equal_tuple=s == tuple(dims),
                     equal_list=s == list(dims), items=[s[i] for i in range(len(dims))],
                     slice=s[1:].as_list(), len=len(s))
    return found
"""


def test_answers_as_tensorflows():
    theirs = in_tensorflow(ANSWERS + f"print(json.dumps([answers(tf.TensorShape, d) "
                                     f"for d in {SHAPES!r}]))")
    namespace = {}
    exec(ANSWERS, namespace)
    ours = [namespace["answers"](TensorShape, d) for d in SHAPES]
    assert json.loads(json.dumps(ours)) == theirs


def test_tensor_shape_is_a_tensorshape_and_a_tuple():
    for where in ("CPU", "/xpu:0"):
        x = pluggable.tensor(np.zeros((2, 3), np.float32), device=where)
        shape = x.shape
        assert isinstance(shape, TensorShape) and isinstance(shape, tuple)
        assert shape == (2, 3) and shape == [2, 3] and shape != (3, 2) and shape != [2]
        assert shape.as_list() == [2, 3] and shape.rank == 2 and shape.num_elements() == 6
        assert shape.is_fully_defined() and shape[0] == 2 and shape[-1] == 3
        rows, cols = shape
        assert (rows, cols) == (2, 3) and hash(shape) == hash((2, 3))
        assert np.zeros(shape).shape == (2, 3)
        assert {(2, 3): "found"}[shape] == "found"
        assert pluggable.ops.reshape(x, shape[::-1]).shape == (3, 2)
    assert pluggable.constant(1.0).shape == () and pluggable.constant(1.0).shape.rank == 0


def test_unknown_dimensions_and_rank():
    partial = TensorShape([None, 3])
    assert partial.as_list() == [None, 3] and partial.num_elements() is None
    assert not partial.is_fully_defined() and partial[0] is None
    assert partial.is_compatible_with((5, 3)) and not partial.is_compatible_with((5, 4))
    assert not partial.is_compatible_with([5]) and partial.merge_with([5, None]) == (5, 3)
    unknown = TensorShape(None)
    assert unknown.rank is None and unknown.dims is None and unknown.num_elements() is None
    assert unknown == TensorShape(None) and unknown != () and unknown != TensorShape([])
    assert unknown.is_compatible_with([1, 2, 3]) and unknown[0] is None
    with pytest.raises(ValueError, match="unknown rank"):
        unknown.as_list()
    with pytest.raises(ValueError, match="unknown rank"):
        len(unknown)
    assert TensorShape([1, 2]) + [3] == (1, 2, 3) and (unknown + [3]).rank is None
    assert TensorShape(4) == (4,)
    for shape in (partial, unknown, TensorShape([])):
        assert pickle.loads(pickle.dumps(shape)) == shape


def test_bad_dimensions_say_what_is_wrong():
    with pytest.raises(TypeError, match="must be an int or None"):
        TensorShape([2.5])
    with pytest.raises(ValueError, match="at least 0"):
        TensorShape([-1])
    with pytest.raises(TypeError, match="sequence of dimensions"):
        TensorShape("2, 3")
    with pytest.raises(ValueError, match="incompatible"):
        TensorShape([1]).merge_with([2])
