"""Small value classes (records), declared by annotated fields as a dataclass is.

`dataclasses` imports `inspect`, `ast`, `dis` and `tokenize`, which cost more at start-up than
the plugin discovery they would serve. A `record` gets what this package's value types use
from a dataclass: an ``__init__`` taking the fields in order (positionally or by name, the
later ones with their class-level defaults; a list or dict default is copied per instance),
a ``__repr__`` like ``Name(field=value, ...)``, ``__eq__`` on the fields for instances of the
same class, and with ``frozen=True`` fields that cannot be assigned and a ``__hash__`` on
the fields.
"""
from __future__ import annotations

_NO_DEFAULT = object()


def record(cls=None, *, frozen: bool = False):
    """Class decorator: ``@record`` or ``@record(frozen=True)``."""
    if cls is None:
        return lambda c: record(c, frozen=frozen)
    fields = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = tuple(cls.__dict__.get(f, _NO_DEFAULT) for f in fields)
    name = cls.__qualname__

    def __init__(self, *args, **kwargs):
        if len(args) > len(fields):
            raise TypeError(f"{name}() takes {len(fields)} arguments, {len(args)} given")
        values = list(args)
        for i in range(len(args), len(fields)):
            field = fields[i]
            value = kwargs.pop(field, _NO_DEFAULT)
            if value is _NO_DEFAULT:
                value = defaults[i]
                if value is _NO_DEFAULT:
                    raise TypeError(f"{name}() is missing the argument {field!r}")
                if type(value) in (list, dict):
                    value = value.copy()
            values.append(value)
        if kwargs:
            raise TypeError(f"{name}() got unexpected or repeated arguments "
                            f"{', '.join(map(repr, kwargs))} (fields: {', '.join(fields)})")
        set_field = object.__setattr__
        for field, value in zip(fields, values):
            set_field(self, field, value)

    def _values(self):
        return tuple(getattr(self, f) for f in fields)

    def __repr__(self):
        return (f"{type(self).__qualname__}("
                f"{', '.join(f'{f}={getattr(self, f)!r}' for f in fields)})")

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return _values(self) == _values(other)

    cls.__init__, cls.__repr__, cls.__eq__ = __init__, __repr__, __eq__
    cls.__match_args__ = fields
    cls._fields = fields
    if frozen:
        def __setattr__(self, field, value):
            raise AttributeError(f"cannot assign to field {field!r} of {name} (frozen)")

        def __delattr__(self, field):
            raise AttributeError(f"cannot delete field {field!r} of {name} (frozen)")

        def __hash__(self):
            return hash(_values(self))

        cls.__setattr__, cls.__delattr__, cls.__hash__ = __setattr__, __delattr__, __hash__
    else:
        cls.__hash__ = None  # mutable and compared by value, as a dataclass
    for f in ("__init__", "__repr__", "__eq__", "__setattr__", "__delattr__", "__hash__"):
        method = cls.__dict__.get(f)
        if callable(method):
            method.__qualname__ = f"{name}.{f}"
    return cls
