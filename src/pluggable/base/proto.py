"""Protobuf's wire format, written by hand for the few messages the host serializes itself
(XPlane events, TensorFlow's OpList and KernelList): varints and length-delimited fields.
Nothing here imports the ``protobuf`` package."""
from __future__ import annotations


def varint(n: int) -> bytes:
    """``n`` as a protobuf varint (int64 on the wire: two's complement, 10 bytes when
    negative)."""
    n &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field_bytes(tag: int, data: bytes) -> bytes:
    """A length-delimited field: ``tag`` is (field number << 3) | 2."""
    return varint(tag) + varint(len(data)) + data


def message(number: int, data: bytes) -> bytes:
    """Field ``number`` holding ``data`` (a string, bytes or an embedded message)."""
    return field_bytes(number << 3 | 2, data)


def text(number: int, value: str) -> bytes:
    """A string field; nothing for "" (proto3 leaves defaults out)."""
    return message(number, value.encode("utf-8")) if value else b""


def integer(number: int, value: int) -> bytes:
    """A varint field (int32, int64, bool, enum); nothing for 0."""
    return varint(number << 3) + varint(int(value)) if value else b""


def packed(number: int, values) -> bytes:
    """A packed repeated varint field; nothing when empty."""
    return message(number, b"".join(varint(int(v)) for v in values)) if values else b""
