"""Mirror of tensorflow/c/tf_status.h (and xla/tsl/c/tsl_status.h): TF_Code and the payload
visitor. TF_Status itself is opaque: a ``TF_Status*`` is a ``ctypes.c_void_p``."""

from __future__ import annotations

import ctypes
import enum


class TF_Code(enum.IntEnum):
    """TF_Code (= TSL_Code), the canonical error codes."""

    TF_OK = 0
    TF_CANCELLED = 1
    TF_UNKNOWN = 2
    TF_INVALID_ARGUMENT = 3
    TF_DEADLINE_EXCEEDED = 4
    TF_NOT_FOUND = 5
    TF_ALREADY_EXISTS = 6
    TF_PERMISSION_DENIED = 7
    TF_UNAUTHENTICATED = 16
    TF_RESOURCE_EXHAUSTED = 8
    TF_FAILED_PRECONDITION = 9
    TF_ABORTED = 10
    TF_OUT_OF_RANGE = 11
    TF_UNIMPLEMENTED = 12
    TF_INTERNAL = 13
    TF_UNAVAILABLE = 14
    TF_DATA_LOSS = 15


TF_OK = TF_Code.TF_OK
TF_CANCELLED = TF_Code.TF_CANCELLED
TF_UNKNOWN = TF_Code.TF_UNKNOWN
TF_INVALID_ARGUMENT = TF_Code.TF_INVALID_ARGUMENT
TF_DEADLINE_EXCEEDED = TF_Code.TF_DEADLINE_EXCEEDED
TF_NOT_FOUND = TF_Code.TF_NOT_FOUND
TF_ALREADY_EXISTS = TF_Code.TF_ALREADY_EXISTS
TF_PERMISSION_DENIED = TF_Code.TF_PERMISSION_DENIED
TF_UNAUTHENTICATED = TF_Code.TF_UNAUTHENTICATED
TF_RESOURCE_EXHAUSTED = TF_Code.TF_RESOURCE_EXHAUSTED
TF_FAILED_PRECONDITION = TF_Code.TF_FAILED_PRECONDITION
TF_ABORTED = TF_Code.TF_ABORTED
TF_OUT_OF_RANGE = TF_Code.TF_OUT_OF_RANGE
TF_UNIMPLEMENTED = TF_Code.TF_UNIMPLEMENTED
TF_INTERNAL = TF_Code.TF_INTERNAL
TF_UNAVAILABLE = TF_Code.TF_UNAVAILABLE
TF_DATA_LOSS = TF_Code.TF_DATA_LOSS

# typedef void (*TSL_PayloadVisitor)(const char* key, const char* value, void* capture);
TSL_PayloadVisitor = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p)
# #define TF_PayloadVisitor TSL_PayloadVisitor
TF_PayloadVisitor = TSL_PayloadVisitor
