"""Mirror of include/pluggable/plugin_ext.h: the project's extension chain, and
:func:`walk_ext_chain`, which reads one defensively.

``const char*`` fields are ``c_void_p`` (the host reads plugin strings itself, bounded).
"""

from __future__ import annotations

import enum
from collections import namedtuple
from collections.abc import Iterator
from ctypes import CFUNCTYPE, c_char_p, c_int32, c_int64, c_size_t, c_uint64, c_void_p

from ._struct import ABIStruct

PLUGGABLE_EXT_MAJOR = 0
PLUGGABLE_EXT_MINOR = 4
PLUGGABLE_EXT_PATCH = 0

# A value `t` is an extension tag when (t & PLUGGABLE_EXT_TAG_MASK) == PLUGGABLE_EXT_TAG_BASE.
PLUGGABLE_EXT_TAG_MASK = 0xFFFFFF00
PLUGGABLE_EXT_TAG_BASE = 0x504C4700

# Bits of PLUGGABLE_PlatformInfoExt.flags.
PLUGGABLE_PLATFORM_PAGEABLE_ASYNC_COPY = 1 << 0
# memcpy_dtod / sync_memcpy_dtod for device D accept a source in memory of any device of the
# same platform instance (the destination stays D's); ordered on D's stream only (since 0.2.0).
PLUGGABLE_PLATFORM_PEER_DTOD = 1 << 1

# Bits of PLUGGABLE_DLPackDeviceExt.flags (since 0.3.0): the host may dereference device
# pointers of the platform, so a kDLCPU consumer gets device memory without a copy.
PLUGGABLE_DLPACK_HOST_ADDRESSABLE = 1 << 0

# walk_ext_chain stops after this many links, so a cyclic or corrupt chain cannot hang the host.
MAX_EXT_CHAIN_LINKS = 64


class PLUGGABLE_ExtType(enum.IntEnum):
    PLUGGABLE_EXT_PLATFORM_INFO = 0x504C4701
    PLUGGABLE_EXT_LIVE_HANDLES = 0x504C4702
    PLUGGABLE_EXT_DLPACK_DEVICE = 0x504C4703  # since 0.3.0
    PLUGGABLE_EXT_STREAM_NAMES = 0x504C4704  # since 0.3.0
    PLUGGABLE_EXT_PROFILER_CONTEXT = 0x504C4705  # since 0.4.0


PLUGGABLE_EXT_PLATFORM_INFO = PLUGGABLE_ExtType.PLUGGABLE_EXT_PLATFORM_INFO
PLUGGABLE_EXT_LIVE_HANDLES = PLUGGABLE_ExtType.PLUGGABLE_EXT_LIVE_HANDLES
PLUGGABLE_EXT_STREAM_NAMES = PLUGGABLE_ExtType.PLUGGABLE_EXT_STREAM_NAMES
PLUGGABLE_EXT_DLPACK_DEVICE = PLUGGABLE_ExtType.PLUGGABLE_EXT_DLPACK_DEVICE
PLUGGABLE_EXT_PROFILER_CONTEXT = PLUGGABLE_ExtType.PLUGGABLE_EXT_PROFILER_CONTEXT


class PLUGGABLE_ExtHeader(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("type", c_int32),
        ("next", c_void_p),
    ]
    _last_field_ = "next"
    _size_macro_ = "PLUGGABLE_EXT_HEADER_STRUCT_SIZE"


class PLUGGABLE_PlatformInfoExt(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("type", c_int32),
        ("next", c_void_p),
        ("flags", c_uint64),
        ("plugin_version", c_void_p),  # const char*, may be NULL
        ("default_priority", c_int32),
    ]
    _last_field_ = "default_priority"
    _size_macro_ = "PLUGGABLE_PLATFORM_INFO_EXT_STRUCT_SIZE"
    _optional_ = ("plugin_version",)


class PLUGGABLE_LiveHandles(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("streams", c_int64),
        ("events", c_int64),
        ("timers", c_int64),
        ("allocations", c_int64),
        ("host_allocations", c_int64),
    ]
    _last_field_ = "host_allocations"
    _size_macro_ = "PLUGGABLE_LIVE_HANDLES_STRUCT_SIZE"


# void (*get_live_handles)(const SP_Device* device, PLUGGABLE_LiveHandles* counts);
PLUGGABLE_LiveHandlesExt_get_live_handles_fn = CFUNCTYPE(None, c_void_p, c_void_p)


class PLUGGABLE_LiveHandlesExt(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("type", c_int32),
        ("next", c_void_p),
        ("get_live_handles", PLUGGABLE_LiveHandlesExt_get_live_handles_fn),
    ]
    _last_field_ = "get_live_handles"
    _size_macro_ = "PLUGGABLE_LIVE_HANDLES_EXT_STRUCT_SIZE"


# void (*set_stream_name)(const SP_Device* device, SP_Stream stream, const char* name);
PLUGGABLE_StreamNamesExt_set_stream_name_fn = CFUNCTYPE(None, c_void_p, c_void_p, c_char_p)


class PLUGGABLE_StreamNamesExt(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("type", c_int32),
        ("next", c_void_p),
        ("set_stream_name", PLUGGABLE_StreamNamesExt_set_stream_name_fn),
    ]
    _last_field_ = "set_stream_name"
    _size_macro_ = "PLUGGABLE_STREAM_NAMES_EXT_STRUCT_SIZE"


class PLUGGABLE_DLPackDeviceExt(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("type", c_int32),
        ("next", c_void_p),
        ("device_type", c_int32),  # a DLDeviceType value
        ("flags", c_uint64),
    ]
    _last_field_ = "flags"
    _size_macro_ = "PLUGGABLE_DLPACK_DEVICE_EXT_STRUCT_SIZE"


# uint64_t (*correlation_id)(TF_OpKernelContext* ctx);
PLUGGABLE_ProfilerContextExt_correlation_id_fn = CFUNCTYPE(c_uint64, c_void_p)


class PLUGGABLE_ProfilerContextExt(ABIStruct):
    """Filled by the host, on TF_ProfilerRegistrationParams.ext (since 0.4.0)."""
    _fields_ = [
        ("struct_size", c_size_t),
        ("type", c_int32),
        ("next", c_void_p),
        ("correlation_id", PLUGGABLE_ProfilerContextExt_correlation_id_fn),
    ]
    _last_field_ = "correlation_id"
    _size_macro_ = "PLUGGABLE_PROFILER_CONTEXT_EXT_STRUCT_SIZE"


PLUGGABLE_EXT_HEADER_STRUCT_SIZE = PLUGGABLE_ExtHeader.struct_size()
PLUGGABLE_PLATFORM_INFO_EXT_STRUCT_SIZE = PLUGGABLE_PlatformInfoExt.struct_size()
PLUGGABLE_LIVE_HANDLES_STRUCT_SIZE = PLUGGABLE_LiveHandles.struct_size()
PLUGGABLE_LIVE_HANDLES_EXT_STRUCT_SIZE = PLUGGABLE_LiveHandlesExt.struct_size()
PLUGGABLE_STREAM_NAMES_EXT_STRUCT_SIZE = PLUGGABLE_StreamNamesExt.struct_size()
PLUGGABLE_DLPACK_DEVICE_EXT_STRUCT_SIZE = PLUGGABLE_DLPackDeviceExt.struct_size()
PLUGGABLE_PROFILER_CONTEXT_EXT_STRUCT_SIZE = PLUGGABLE_ProfilerContextExt.struct_size()

# The struct each extension tag announces.
EXT_STRUCTS: dict[int, type[ABIStruct]] = {
    PLUGGABLE_EXT_PLATFORM_INFO: PLUGGABLE_PlatformInfoExt,
    PLUGGABLE_EXT_LIVE_HANDLES: PLUGGABLE_LiveHandlesExt,
    PLUGGABLE_EXT_STREAM_NAMES: PLUGGABLE_StreamNamesExt,
    PLUGGABLE_EXT_DLPACK_DEVICE: PLUGGABLE_DLPackDeviceExt,
    PLUGGABLE_EXT_PROFILER_CONTEXT: PLUGGABLE_ProfilerContextExt,
}


def is_ext_tag(value: int) -> bool:
    """Whether ``value`` has the form of an extension tag (known or not)."""
    return (value & PLUGGABLE_EXT_TAG_MASK) == PLUGGABLE_EXT_TAG_BASE


class ExtLink(namedtuple("ExtLink", "type address struct_size")):
    """One extension of a chain: its tag, its address and the struct_size it declares."""

    __slots__ = ()


def walk_ext_chain(
    address: int | None, max_links: int = MAX_EXT_CHAIN_LINKS
) -> Iterator[ExtLink]:
    """Yield an :class:`ExtLink` ``(type, address, struct_size)`` per extension of the chain
    that starts at ``address`` (an ``ext`` field's value; 0 or None is an empty chain).

    ``type`` is the raw tag and may be one this host does not know (skip it). The caller
    checks ``struct_size`` against the struct the tag announces before reading past the
    header. The walk ends, without raising:

    - at a NULL ``next``;
    - at a value that is not an extension tag: ``ext`` then holds the plugin's own data,
      which TensorFlow allows (that link is not yielded);
    - after a link whose ``struct_size`` does not reach ``next`` (the link is yielded, so
      the caller can reject it);
    - on an address already visited (a cycle), or after ``max_links`` links.
    """
    seen: set[int] = set()
    while address and len(seen) < max_links and address not in seen:
        seen.add(address)
        header = PLUGGABLE_ExtHeader.from_address(address)
        if not is_ext_tag(header.type):
            return
        size = header.struct_size
        yield ExtLink(header.type, address, size)
        if not PLUGGABLE_ExtHeader.field_present("next", size):
            return
        address = header.next


STRUCTS = (
    PLUGGABLE_ExtHeader,
    PLUGGABLE_PlatformInfoExt,
    PLUGGABLE_LiveHandles,
    PLUGGABLE_LiveHandlesExt,
    PLUGGABLE_ProfilerContextExt,
    PLUGGABLE_StreamNamesExt,
    PLUGGABLE_DLPackDeviceExt,
)
