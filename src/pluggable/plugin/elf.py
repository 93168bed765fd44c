"""What the loader reads from a plugin file before ``dlopen``: its ELF class and machine, and
its dynamic section and symbols (what it needs, where it looks, what it defines and uses).

``dlopen`` of a library built for another CPU says "No such file or directory" or "wrong ELF
class"; reading the header first lets the host name both machines instead.
"""
from __future__ import annotations

import mmap
import struct
from collections import namedtuple

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import List, Optional, Tuple

_MACHINES = {3: "x86", 8: "MIPS", 20: "PowerPC", 21: "PowerPC64", 22: "S/390", 40: "ARM",
             43: "SPARC V9", 50: "IA-64", 62: "x86-64", 183: "AArch64", 243: "RISC-V",
             258: "LoongArch"}
_CLASSES = {1: "32-bit", 2: "64-bit"}


class ElfHeader(namedtuple("ElfHeader", "elf_class little_endian file_type machine")):
    """``elf_class`` 1: 32-bit, 2: 64-bit; ``little_endian`` a bool; ``file_type`` 3: a
    shared object; ``machine`` the e_machine code."""

    __slots__ = ()

    def describe(self) -> str:
        machine = _MACHINES.get(self.machine, f"machine {self.machine}")
        return (f"{_CLASSES.get(self.elf_class, f'class {self.elf_class}')} {machine} "
                f"{'little' if self.little_endian else 'big'}-endian")


class NotElfError(ValueError):
    """The file is not an ELF file (the message says what it starts with)."""


def read_header(path: str) -> ElfHeader:
    """The ELF header of ``path``; raises `NotElfError` when it has none, OSError when it
    cannot be read."""
    with open(path, "rb") as f:
        head = f.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF":
        raise NotElfError(f"it is not an ELF shared library (it starts with {head[:8]!r})")
    little = head[5] == 1
    file_type, machine = struct.unpack(("<" if little else ">") + "HH", head[16:20])
    return ElfHeader(head[4], little, file_type, machine)


_host: Optional[ElfHeader] = None


def host_header() -> Optional[ElfHeader]:
    """The running interpreter's ELF header, None where there is none (not Linux)."""
    global _host
    if _host is None:
        try:
            _host = read_header("/proc/self/exe")
        except (OSError, NotElfError):
            return None
    return _host


def check_compatible(path: str) -> Optional[str]:
    """None when ``path`` can be loaded into this process as far as its header says; else
    why not, naming both sides."""
    host = host_header()
    if host is None:
        return None
    try:
        plugin = read_header(path)
    except NotElfError as exc:
        return str(exc)
    if (plugin.elf_class, plugin.little_endian, plugin.machine) != (
            host.elf_class, host.little_endian, host.machine):
        return (f"it is built for {plugin.describe()} but this Python runs on "
                f"{host.describe()}; rebuild the plugin for this machine")
    if plugin.file_type != 3:
        return f"it is an ELF file of type {plugin.file_type}, not a shared library (type 3)"
    return None


class DynamicInfo(namedtuple("DynamicInfo", "soname needed rpath runpath defined undefined")):
    """What the dynamic loader reads of a shared library: its DT_SONAME (or None), its
    DT_NEEDED names in order, its DT_RPATH and DT_RUNPATH search lists (``:``-separated in the
    file), and the names of its defined and undefined dynamic symbols."""

    __slots__ = ()


_SHT_DYNAMIC, _SHT_DYNSYM = 6, 11
_DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH = 1, 14, 15, 29


def dynamic_info(path: str, symbols: Optional[Tuple[str, ...]] = ()) -> DynamicInfo:
    """The dynamic section and symbol table of ``path`` (64-bit and 32-bit ELF of either
    byte order). ``symbols``: the prefixes of the symbol names wanted (``()`` none, None
    all): a library with its device code inside has hundreds of thousands. Raises
    `NotElfError` for a file that is not ELF, ValueError for a damaged one, OSError when it
    cannot be read."""
    header = read_header(path)
    with open(path, "rb") as f:
        try:  # mapped, not read: a plugin with its device code inside can be a GiB
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file
            raise ValueError(f"{path}: a damaged ELF file (empty)") from None
    with data:
        return _dynamic_info(path, data, header, symbols)


def _dynamic_info(path: str, data, header: ElfHeader, symbols) -> DynamicInfo:
    order = "<" if header.little_endian else ">"
    is64 = header.elf_class == 2
    try:
        if is64:
            shoff, = struct.unpack_from(order + "Q", data, 0x28)
            shentsize, shnum = struct.unpack_from(order + "HH", data, 0x3A)
            section = order + "IIQQQQIIQQ"
            symbol, symsize = order + "IBBHQQ", 24
            entry, entsize = order + "qQ", 16
        else:
            shoff, = struct.unpack_from(order + "I", data, 0x20)
            shentsize, shnum = struct.unpack_from(order + "HH", data, 0x2E)
            section = order + "IIIIIIIIII"
            symbol, symsize = order + "IIIBBH", 16
            entry, entsize = order + "iI", 8
        sections = [struct.unpack_from(section, data, shoff + i * shentsize)
                    for i in range(shnum)]

        def string(table: int, offset: int) -> str:
            end = data.find(b"\0", table + offset)
            if end < 0:
                raise ValueError("a string runs past the end of the file")
            return data[table + offset:end].decode("utf-8", "replace")

        soname, needed, rpath, runpath = None, [], [], []
        defined, undefined = set(), set()
        for sec in sections:
            kind, offset, size, link = sec[1], sec[4], sec[5], sec[6]
            strtab = sections[link][4]
            if kind == _SHT_DYNAMIC:
                for at in range(offset, offset + size - entsize + 1, entsize):
                    tag, value = struct.unpack_from(entry, data, at)
                    if tag == 0:  # DT_NULL ends the table
                        break
                    if tag == _DT_NEEDED:
                        needed.append(string(strtab, value))
                    elif tag == _DT_SONAME:
                        soname = string(strtab, value)
                    elif tag == _DT_RPATH:
                        rpath.extend(p for p in string(strtab, value).split(":") if p)
                    elif tag == _DT_RUNPATH:
                        runpath.extend(p for p in string(strtab, value).split(":") if p)
            elif kind == _SHT_DYNSYM and symbols != ():
                wanted = None if symbols is None else tuple(s.encode() for s in symbols)
                width = max(map(len, wanted)) if wanted else 0
                index = 3 if is64 else 5
                table = data[offset + symsize:offset + (size // symsize) * symsize]
                for fields in struct.iter_unpack(symbol, table):
                    name_off = fields[0]
                    if not name_off:
                        continue
                    start = strtab + name_off
                    if wanted is not None and not data[start:start + width].startswith(wanted):
                        continue
                    (undefined if fields[index] == 0 else defined).add(string(strtab, name_off))
    except (struct.error, IndexError, ValueError) as exc:
        raise ValueError(f"{path}: a damaged ELF file ({exc})") from None
    return DynamicInfo(soname, tuple(needed), tuple(rpath), tuple(runpath),
                       frozenset(defined), frozenset(undefined))


def undefined_symbols(path: str) -> List[str]:
    """The names of the undefined symbols in ``path``'s dynamic symbol table; empty when
    there is none."""
    return sorted(dynamic_info(path, symbols=None).undefined)
