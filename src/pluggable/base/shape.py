"""`TensorShape`: a shape as ``tf.TensorShape`` has it, with unknown dimensions (None) and
an unknown rank (``TensorShape(None)``).

A known-rank shape is a tuple of ints and Nones, so it is equal to, hashes as, indexes and
unpacks as the tuple of its dimensions, and makes no copy where a tuple is expected (NumPy,
``reshape``). `Tensor.shape` wraps the tensor's tuple in one when it is read; nothing on an
op's path reads it.
"""
from __future__ import annotations

import operator
from typing import Any, List, Optional

__all__ = ["TensorShape", "as_shape"]


def _dimension(value: Any) -> Optional[int]:
    if value is None:
        return None
    value = getattr(value, "value", value)  # TensorFlow's Dimension
    if value is None:
        return None
    try:
        dim = operator.index(value)
    except TypeError:
        raise TypeError(f"a dimension must be an int or None, got {value!r}") from None
    if dim < 0:
        raise ValueError(f"a dimension must be at least 0 (or None for an unknown one), "
                         f"got {dim}")
    return dim


class TensorShape(tuple):
    """``TensorShape(dims)``: ``dims`` a sequence of ints and Nones (unknown dimensions), or
    None for a shape whose rank is unknown too."""

    __slots__ = ()

    def __new__(cls, dims: Any = ()) -> "TensorShape":
        if dims is None:
            return _UNKNOWN
        if type(dims) is TensorShape:
            return dims
        if isinstance(dims, (str, bytes)):
            raise TypeError(f"a shape is a sequence of dimensions, got {dims!r}")
        if not hasattr(dims, "__iter__"):
            dims = (dims,)  # TensorShape(3) is TensorShape([3]), as in TensorFlow
        return tuple.__new__(TensorShape, (_dimension(d) for d in dims))

    # -- what TensorFlow's TensorShape answers ---------------------------------------------
    @property
    def rank(self) -> Optional[int]:
        """The number of dimensions, None when unknown."""
        return tuple.__len__(self)

    ndims = rank

    @property
    def dims(self) -> Optional[List[Optional[int]]]:
        """The dimensions as a list (ints, None for unknown ones); None for an unknown
        rank."""
        return list(self)

    def as_list(self) -> List[Optional[int]]:
        return list(self)

    def num_elements(self) -> Optional[int]:
        """The number of elements, None unless every dimension is known."""
        count = 1
        for dim in self:
            if dim is None:
                return None
            count *= dim
        return count

    def is_fully_defined(self) -> bool:
        return None not in tuple(self)

    def is_compatible_with(self, other: Any) -> bool:
        """Whether a tensor could have both shapes: the same rank (or one unknown) and equal
        dimensions wherever both are known."""
        other = as_shape(other)
        if self.rank is None or other.rank is None:
            return True
        return self.rank == other.rank and all(
            a is None or b is None or a == b for a, b in zip(self, other))

    def assert_is_compatible_with(self, other: Any) -> None:
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {as_shape(other)} are incompatible")

    def merge_with(self, other: Any) -> "TensorShape":
        """The shape with every dimension either of the two knows."""
        other = as_shape(other)
        self.assert_is_compatible_with(other)
        if self.rank is None:
            return other
        if other.rank is None:
            return self
        return TensorShape(a if a is not None else b for a, b in zip(self, other))

    def concatenate(self, other: Any) -> "TensorShape":
        other = as_shape(other)
        if self.rank is None or other.rank is None:
            return _UNKNOWN
        return TensorShape(tuple(self) + tuple(other))

    def __add__(self, other: Any) -> "TensorShape":
        return self.concatenate(other)

    def __radd__(self, other: Any) -> "TensorShape":
        return as_shape(other).concatenate(self)

    def __getitem__(self, key):
        if isinstance(key, slice):
            return TensorShape(tuple.__getitem__(self, key))
        return tuple.__getitem__(self, key)

    # Equal to the tuple or list of the same dimensions, and to another TensorShape with
    # the same dimensions (unknown ones included), as TensorFlow's.
    def __eq__(self, other: Any) -> bool:
        if isinstance(other, list):
            other = tuple(other)
        elif type(other) is _UnknownShape:
            return False
        elif not isinstance(other, tuple):
            return NotImplemented
        return tuple.__eq__(self, other)

    def __ne__(self, other: Any) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        return f"TensorShape({list(self)})"

    def __str__(self) -> str:
        return tuple.__repr__(self)

    def __reduce__(self):
        return TensorShape, (tuple(self),)


class _UnknownShape(TensorShape):
    """The shape of unknown rank: TensorShape(None)."""

    __slots__ = ()

    @property
    def rank(self) -> None:
        return None

    ndims = rank

    @property
    def dims(self) -> None:
        return None

    def as_list(self):
        raise ValueError("as_list() is not defined on a TensorShape of unknown rank")

    def num_elements(self) -> None:
        return None

    def is_fully_defined(self) -> bool:
        return False

    def __len__(self) -> int:
        raise ValueError("len() of a TensorShape of unknown rank")

    def __iter__(self):
        raise ValueError("cannot iterate a TensorShape of unknown rank")

    def __getitem__(self, key):
        return _UNKNOWN if isinstance(key, slice) else None

    def __eq__(self, other: Any) -> bool:
        return type(other) is _UnknownShape

    def __ne__(self, other: Any) -> bool:
        return type(other) is not _UnknownShape

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        return "TensorShape(None)"

    def __str__(self) -> str:
        return "<unknown>"

    def __reduce__(self):
        return TensorShape, (None,)


_UNKNOWN = tuple.__new__(_UnknownShape, ())


def as_shape(value: Any) -> TensorShape:
    """``value`` as a TensorShape (a TensorShape is returned as is)."""
    return value if isinstance(value, TensorShape) else TensorShape(value)
