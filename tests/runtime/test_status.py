"""The TF_Status API exported by the host runtime library, called as a plugin calls it."""
from __future__ import annotations

import ctypes
import errno

import pytest

from pluggable.base import native as _native
from pluggable.abi.tf_status import TF_Code
from pluggable.errors import (
    InvalidArgumentError, PluggableError, ResourceExhaustedError, UnimplementedError,
    error_for_code)

lib = _native.lib
Visitor = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p)
lib.TF_SetPayload.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
lib.TF_ForEachPayload.argtypes = [ctypes.c_void_p, Visitor, ctypes.c_void_p]
lib.TF_SetStatusFromIOError.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p]


def payloads(status):
    seen = []
    visitor = Visitor(lambda k, v, _: seen.append((k.decode(), v.decode())))
    lib.TF_ForEachPayload(status.address, visitor, None)
    return seen


def test_new_status_is_ok_with_empty_message():
    status = _native.Status()
    assert status.code == TF_Code.TF_OK and status.message == ""


def test_set_and_read_back():
    status = _native.Status()
    status.set(TF_Code.TF_NOT_FOUND, "no such thing")
    assert (status.code, status.message) == (TF_Code.TF_NOT_FOUND, "no such thing")
    status.set(TF_Code.TF_OK, "ignored")
    assert (status.code, status.message) == (TF_Code.TF_OK, "")


def test_payloads_keep_insertion_order_and_replace_values():
    status = _native.Status()
    lib.TF_SetPayload(status.address, b"ignored-on-ok", b"x")
    status.set(TF_Code.TF_INTERNAL, "boom")
    lib.TF_SetPayload(status.address, b"a", b"1")
    lib.TF_SetPayload(status.address, b"b", b"2")
    lib.TF_SetPayload(status.address, b"a", b"3")
    assert payloads(status) == [("a", "3"), ("b", "2")]
    status.set(TF_Code.TF_OK)
    assert payloads(status) == []


def test_status_from_io_error():
    status = _native.Status()
    lib.TF_SetStatusFromIOError(status.address, errno.ENOENT, b"opening /x")
    assert status.code == TF_Code.TF_NOT_FOUND
    assert status.message.startswith("opening /x; ")
    lib.TF_SetStatusFromIOError(status.address, errno.ENOMEM, None)
    assert status.code == TF_Code.TF_RESOURCE_EXHAUSTED


def test_null_status_is_harmless():
    lib.TF_SetStatus(None, TF_Code.TF_INTERNAL, b"x")
    assert lib.TF_GetCode(None) == TF_Code.TF_OK
    assert lib.TF_Message(None) == b""
    lib.TF_DeleteStatus(None)


def test_thread_pool_hands_out_distinct_statuses():
    from pluggable.devices import executor

    a = _native.acquire_status()
    b = _native.acquire_status()
    assert a is not b and a.address != b.address
    a.set(TF_Code.TF_ABORTED, "x")
    kept = a.address  # what a plugin that keeps the TF_Status* of the call holds
    _native.release_status(a)
    # Reused at once, reset, and lent under a ticket of its own.
    again = _native.acquire_status()
    assert again is a and again.ok and again.address != kept
    before = _native.late_status_writes()[0]
    try:
        lib.TF_SetStatus(kept, TF_Code.TF_INTERNAL, b"written after the call returned")
        assert again.ok  # not blamed on the call in progress
        assert lib.TF_GetCode(kept) == TF_Code.TF_OK and lib.TF_Message(kept) == b""
        count, code, message = _native.late_status_writes()
        assert count == before + 1 and code == TF_Code.TF_INTERNAL
        assert message == "written after the call returned"
        # However many lendings later: the old ticket still names nothing.
        for _ in range(1000):
            _native.release_status(again)
            again = _native.acquire_status()
        lib.TF_SetStatus(kept, TF_Code.TF_INTERNAL, b"much later")
        assert again.ok and _native.late_status_writes()[0] == before + 2
        lib.TF_DeleteStatus(kept)  # a plugin cannot free a lent status either
        assert again.ok
    finally:
        # This test's own late writes are not reported later as a plugin's.
        executor._late_writes_reported[0] = _native.late_status_writes()[0]
    again.set(TF_Code.TF_ABORTED, "its own call's error")
    assert again.code == TF_Code.TF_ABORTED and again.message == "its own call's error"
    for status in (again, b):
        _native.release_status(status)
    taken = [_native.acquire_status() for _ in range(40)]
    assert len({id(status) for status in taken}) == 40
    assert len({status.address for status in taken}) == 40
    for status in taken:
        assert status.ok
        _native.release_status(status)


def test_a_status_with_no_lending_is_its_own_address():
    status = _native.Status()  # made for one call, never lent: no ticket
    assert status.address == status.real
    status.set(TF_Code.TF_NOT_FOUND, "plain")
    assert status.code == TF_Code.TF_NOT_FOUND


@pytest.mark.parametrize("code, builtin", [
    (TF_Code.TF_INVALID_ARGUMENT, ValueError), (TF_Code.TF_RESOURCE_EXHAUSTED, MemoryError),
    (TF_Code.TF_UNIMPLEMENTED, NotImplementedError), (TF_Code.TF_NOT_FOUND, LookupError),
    (TF_Code.TF_OUT_OF_RANGE, IndexError), (TF_Code.TF_DEADLINE_EXCEEDED, TimeoutError),
    (TF_Code.TF_PERMISSION_DENIED, PermissionError),
    (TF_Code.TF_ALREADY_EXISTS, FileExistsError)])
def test_error_classes_inherit_the_natural_builtin(code, builtin):
    cls = error_for_code(code)
    error = cls("message", plugin="P", call="C", plugin_message="pm")
    assert isinstance(error, PluggableError) and isinstance(error, builtin)
    assert cls.code == code
    assert (str(error), error.plugin, error.call, error.plugin_message) == \
        ("message", "P", "C", "pm")


def test_every_code_has_a_class_and_unknown_codes_map_to_unknown():
    for code in TF_Code:
        if code != TF_Code.TF_OK:
            assert error_for_code(code).code == code
    assert error_for_code(999).__name__ == "UnknownError"
    assert issubclass(error_for_code(TF_Code.TF_INVALID_ARGUMENT), InvalidArgumentError)
    assert issubclass(ResourceExhaustedError, MemoryError)
    assert issubclass(UnimplementedError, NotImplementedError)
