"""The extension chain of pluggable/plugin_ext.h, read by walk_ext_chain: well-formed chains,
unknown extensions, and the malformed chains a broken or hostile plugin could build."""
from __future__ import annotations

import ctypes

import abi_testlib as lib

ext = lib.abi.plugin_ext


def make_link(cls=ext.PLUGGABLE_ExtHeader, tag=ext.PLUGGABLE_EXT_PLATFORM_INFO, **fields):
    """A zeroed extension struct with struct_size and type set."""
    return cls.new(type=tag, **fields)


def chain(*links):
    """Links them in order; returns the address of the first."""
    for a, b in zip(links, links[1:]):
        a.next = ctypes.addressof(b)
    return ctypes.addressof(links[0])


def test_empty_chain():
    assert list(ext.walk_ext_chain(0)) == []
    assert list(ext.walk_ext_chain(None)) == []


def test_known_and_unknown_extensions_are_yielded_in_order():
    info = make_link(ext.PLUGGABLE_PlatformInfoExt,
                     flags=ext.PLUGGABLE_PLATFORM_PAGEABLE_ASYNC_COPY)
    unknown = make_link(tag=ext.PLUGGABLE_EXT_TAG_BASE | 0x7F)  # a newer extension
    live = make_link(ext.PLUGGABLE_LiveHandlesExt, tag=ext.PLUGGABLE_EXT_LIVE_HANDLES)
    head = chain(info, unknown, live)
    links = list(ext.walk_ext_chain(head))
    assert [link.type for link in links] == [
        ext.PLUGGABLE_EXT_PLATFORM_INFO, ext.PLUGGABLE_EXT_TAG_BASE | 0x7F,
        ext.PLUGGABLE_EXT_LIVE_HANDLES]
    assert [link.address for link in links] == [
        ctypes.addressof(info), ctypes.addressof(unknown), ctypes.addressof(live)]
    assert [link.struct_size for link in links] == [
        ext.PLUGGABLE_PLATFORM_INFO_EXT_STRUCT_SIZE, ext.PLUGGABLE_EXT_HEADER_STRUCT_SIZE,
        ext.PLUGGABLE_LIVE_HANDLES_EXT_STRUCT_SIZE]
    tag, address, size = links[0]  # also a plain (type, address, struct_size) tuple
    found = ext.EXT_STRUCTS[tag].from_address(address)
    assert found.flags == ext.PLUGGABLE_PLATFORM_PAGEABLE_ASYNC_COPY and size == found.struct_size


def test_plugin_private_data_ends_the_walk():
    """TensorFlow lets ext point at the plugin's own data: no extension tag, no walk."""
    private = (ctypes.c_uint64 * 8)(24, 0x12345678, 0xDEADBEEF)
    assert list(ext.walk_ext_chain(ctypes.addressof(private))) == []
    info = make_link(ext.PLUGGABLE_PlatformInfoExt)
    info.next = ctypes.addressof(private)
    assert [link.address for link in ext.walk_ext_chain(ctypes.addressof(info))] == [
        ctypes.addressof(info)]


def test_cycle_is_walked_once():
    a, b = make_link(), make_link(tag=ext.PLUGGABLE_EXT_LIVE_HANDLES)
    head = chain(a, b)
    b.next = head
    assert [link.address for link in ext.walk_ext_chain(head)] == [
        ctypes.addressof(a), ctypes.addressof(b)]
    a.next = head  # a link pointing at itself
    assert len(list(ext.walk_ext_chain(head))) == 1


def test_long_chain_is_cut_at_max_links():
    links = [make_link() for _ in range(ext.MAX_EXT_CHAIN_LINKS + 10)]
    head = chain(*links)
    assert ext.MAX_EXT_CHAIN_LINKS == 64
    assert len(list(ext.walk_ext_chain(head))) == 64
    assert len(list(ext.walk_ext_chain(head, max_links=3))) == 3


def test_link_too_short_for_next_is_yielded_and_ends_the_walk():
    short, after = make_link(), make_link()
    head = chain(short, after)
    short.struct_size = ext.PLUGGABLE_ExtHeader.field_end("type")
    links = list(ext.walk_ext_chain(head))
    assert [(link.address, link.struct_size) for link in links] == [
        (head, ext.PLUGGABLE_ExtHeader.field_end("type"))]
    short.struct_size = 0
    assert [link.struct_size for link in ext.walk_ext_chain(head)] == [0]


def test_is_ext_tag():
    assert ext.is_ext_tag(ext.PLUGGABLE_EXT_PLATFORM_INFO)
    assert ext.is_ext_tag(ext.PLUGGABLE_EXT_TAG_BASE | 0xFF)
    assert not ext.is_ext_tag(0) and not ext.is_ext_tag(1) and not ext.is_ext_tag(-1)
    assert all(ext.is_ext_tag(t) for t in ext.PLUGGABLE_ExtType)
