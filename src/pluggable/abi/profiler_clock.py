"""ctypes mirror of include/pluggable/profiler_clock.h (header-only; nothing crosses the
plugin boundary with it, but every struct of include/ has its mirror)."""
from __future__ import annotations

from ctypes import c_int64, c_uint64

from ._struct import ABIStruct


class PG_ClockPair(ABIStruct):
    _fields_ = [("ticks", c_uint64), ("ns", c_int64)]


STRUCTS = (PG_ClockPair,)
