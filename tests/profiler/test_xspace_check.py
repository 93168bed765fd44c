"""The check of a plugin's XSpace before it joins the saved profile
(`pluggable._compiled.check_xspace`, which walks the wire format without building the
message): it refuses exactly what the protobuf parser refuses, on real profiles and on
thousands of damaged copies of them, and gives the plane ids the parser gives."""
from __future__ import annotations

import random
import re

import numpy as np
import pytest

pytest.importorskip("google.protobuf")

import pluggable
from pluggable import _compiled, ops, profiler
from pluggable.errors import DataLossError
from pluggable.profiler.xspace import parse_xspace, pb2


def _parses(data: bytes) -> bool:
    try:
        parse_xspace(data, "data")
        return True
    except DataLossError:
        return False


def _checks(data: bytes) -> bool:
    try:
        _compiled.check_xspace(data)
        return True
    except ValueError:
        return False


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    x = pluggable.tensor(np.ones((4, 4), np.float32), device="/xpu:0")
    with profiler.Profile(tmp_path_factory.mktemp("check")) as session:
        with profiler.Trace("step", step_num=1, note="é ✓ 𝄞"):
            ops.relu(ops.matmul(x, x))
    return session.result.serialize()


def test_a_real_profile_passes_with_its_plane_ids(profile):
    ids = [p.id for p in parse_xspace(profile, "the profile").planes]
    assert len(ids) >= 2 and _compiled.check_xspace(profile) == ids


def test_damaged_copies_are_refused_exactly_when_the_parser_refuses_them(profile):
    rng = random.Random(25)
    refused = 0
    for n in range(3000):
        data = bytearray(profile)
        how = n % 4
        if how == 0:  # truncated
            data = data[:rng.randrange(len(data))]
        elif how == 1:  # a byte changed
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif how == 2:  # a few bytes changed
            for _ in range(4):
                data[rng.randrange(len(data))] = rng.randrange(256)
        else:  # a high byte (UTF-8 lead or continuation) put in
            at = rng.randrange(len(data))
            data[at:at + 1] = bytes([rng.choice((0x80, 0xC0, 0xE0, 0xED, 0xF0, 0xF8, 0xFF))])
        data = bytes(data)
        parses = _parses(data)
        assert _checks(data) == parses, (n, how)
        refused += not parses
    assert refused > 300  # the damage does reach the checks


@pytest.mark.parametrize("data, problem", [
    (b"\x0a\x05\x12\x03ab", "a length past the end"),
    (b"\x0a\x04\x12\x02\xc3\x28", "not UTF-8"),
    (b"\x1a\x02\xed\xa0", "not UTF-8"),  # a surrogate's first bytes
    (b"\x00\x01", "field number of 0"),
    (b"\x0f", "wire type 6 or 7"),
    (b"\x08\xff\xff", "a truncated varint"),
    (b"\x0c", "end-group tag without its group"),
    (b"\x0b\x08\x01", "never closed"),
])
def test_what_is_wrong_is_said(data, problem):
    assert not _parses(data)
    with pytest.raises(ValueError, match=problem):
        _compiled.check_xspace(data)
    (announced, _, _, _, collected, _, said), _ = _collect_with(data)  # the session's path
    assert announced == len(data) and collected is None and re.search(problem, said)


def test_unknown_fields_and_groups_pass_as_for_the_parser():
    space = pb2().XSpace(hostnames=["h"])
    space.planes.add(id=7, name="/device:GPU:7")
    data = space.SerializeToString() + b"\x2b\x08\x01\x2c" + b"\x30\x05"  # a group, a varint
    assert _parses(data) and _compiled.check_xspace(data) == [7]


# -- the collect job: both calls and the check, on a helper thread -----------------------

def _collect_with(profile_bytes: bytes, extra: int = 0, fail_query: bool = False):
    """`begin_collect` on a collect_data_xspace written here: it announces the bytes of
    ``profile_bytes`` and writes ``extra`` bytes more."""
    import ctypes

    from pluggable.base import native

    data_calls = []

    @ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    def collect(profiler_, buffer, size, status):
        size_p = ctypes.cast(size, ctypes.POINTER(ctypes.c_size_t))
        data_calls.append(bool(buffer))
        if fail_query:
            native.TF_SetStatus(status, 9, b"nothing to give")
            return
        if not buffer:
            size_p[0] = len(profile_bytes)
            return
        data = profile_bytes + b"\x00" * extra
        ctypes.memmove(buffer, data, len(data))

    query, status = native.Status(), native.Status()
    job = _compiled.begin_collect(ctypes.cast(collect, ctypes.c_void_p).value, 1,
                                  query.address, status.address, 64, 0xA5)
    assert job.wait(30.0) is True
    announced, size_after, written, data, ids, problem = job.result()
    data_called = data_calls == [False, True]  # the size query, then the data call
    assert data_calls in ([False], [False, True])
    return (announced, data_called, size_after, written, data, ids, problem), query


def test_the_collect_job_gives_the_bytes_and_their_plane_ids(profile):
    (announced, data_called, size_after, written, data, ids, problem), _ = _collect_with(profile)
    assert (announced, data_called, size_after, written) == (len(profile), True, len(profile), 0)
    assert data == profile and problem is None
    assert ids == [p.id for p in parse_xspace(profile, "the profile").planes]


def test_the_collect_job_reports_writes_past_the_size_and_malformed_bytes(profile):
    result, _ = _collect_with(profile, extra=10)
    assert result[3] == len(profile) + 10 and result[4] is None
    result, _ = _collect_with(b"\x0a\x05\x08")  # a plane field whose length runs past the end
    assert result[4] is None and result[6] == "a length past the end at byte 0, in XSpace"


def test_the_collect_job_stops_at_a_failed_size_query():
    (announced, data_called, *_), query = _collect_with(b"", fail_query=True)
    assert (announced, data_called) == (0, False) and query.code == 9


def test_begin_collect_refuses_bad_arguments():
    with pytest.raises(ValueError, match="begin_collect: fn is 0 \\(a NULL pointer\\)"):
        _compiled.begin_collect(0, 1, 1, 1, 64, 0xA5)
    with pytest.raises(ValueError, match="guard_bytes must be 0 to 2\\*\\*20 and pattern a byte"):
        _compiled.begin_collect(1, 1, 1, 1, 64, 256)
    with pytest.raises(TypeError, match="takes 6 arguments"):
        _compiled.begin_collect(1, 1)
