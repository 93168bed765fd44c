"""What the loader reads from a plugin file before ``dlopen``: its ELF class and machine, and
(for ``doctor``) its undefined dynamic symbols.

``dlopen`` of a library built for another CPU says "No such file or directory" or "wrong ELF
class"; reading the header first lets the host name both machines instead.
"""
from __future__ import annotations

import struct
from collections import namedtuple

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import List, Optional

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


def undefined_symbols(path: str) -> List[str]:
    """The names of the undefined symbols in ``path``'s dynamic symbol table (64-bit and
    32-bit little- or big-endian ELF); empty when there is none."""
    with open(path, "rb") as f:
        data = f.read()
    header = read_header(path)
    order = "<" if header.little_endian else ">"
    is64 = header.elf_class == 2
    if is64:
        shoff, = struct.unpack_from(order + "Q", data, 0x28)
        shentsize, shnum = struct.unpack_from(order + "HH", data, 0x3A)
        section = order + "IIQQQQIIQQ"
        symbol, symsize = order + "IBBHQQ", 24
    else:
        shoff, = struct.unpack_from(order + "I", data, 0x20)
        shentsize, shnum = struct.unpack_from(order + "HH", data, 0x2E)
        section = order + "IIIIIIIIII"
        symbol, symsize = order + "IIIBBH", 16
    sections = [struct.unpack_from(section, data, shoff + i * shentsize) for i in range(shnum)]
    names: List[str] = []
    for sec in sections:
        if sec[1] != 11:  # SHT_DYNSYM
            continue
        offset, size, link = sec[4], sec[5], sec[6]
        strtab = sections[link][4]
        for i in range(1, size // symsize):
            fields = struct.unpack_from(symbol, data, offset + i * symsize)
            name_off, shndx = fields[0], (fields[3] if is64 else fields[5])
            if shndx != 0 or not name_off:
                continue
            end = data.index(b"\0", strtab + name_off)
            names.append(data[strtab + name_off:end].decode("ascii", "replace"))
    return sorted(set(names))
