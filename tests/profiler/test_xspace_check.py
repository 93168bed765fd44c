"""The check of a plugin's XSpace before it joins the saved profile
(`pluggable._compiled.check_xspace`, which walks the wire format without building the
message): it refuses exactly what the protobuf parser refuses, on real profiles and on
thousands of damaged copies of them, and gives the plane ids the parser gives."""
from __future__ import annotations

import random

import numpy as np
import pytest

pytest.importorskip("google.protobuf")

import pluggable
from pluggable import _compiled, ops, profiler
from pluggable.errors import DataLossError
from pluggable.profiler.xspace import check_xspace, parse_xspace, pb2


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
    with pytest.raises(DataLossError, match=rf"the plugin's data is not a serialized XSpace "
                                            rf"\({len(data)} bytes\): .*{problem}"):
        check_xspace(data, "the plugin's data")


def test_unknown_fields_and_groups_pass_as_for_the_parser():
    space = pb2().XSpace(hostnames=["h"])
    space.planes.add(id=7, name="/device:GPU:7")
    data = space.SerializeToString() + b"\x2b\x08\x01\x2c" + b"\x30\x05"  # a group, a varint
    assert _parses(data) and _compiled.check_xspace(data) == [7]
