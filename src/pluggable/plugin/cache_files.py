"""The files of pluggable's cache directory (`limits.cache_directory`): what discovery
remembers between processes (the probe's verdicts, the entry points of the installed
distributions), read with CPython's C JSON scanner and written whole or not at all.

A cache file is only ever a shortcut: one that is absent, unreadable or stale is ignored and
made again, and one that cannot be written costs the next process the work, not a failure."""
from __future__ import annotations

import os

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Any


class _PlainJSON:
    """The settings json's C scanner reads from its decoder: plain JSON to Python's types."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float = parse_constant = float
    parse_int = int


def json_loads(text: str) -> "Any":
    """``json.loads(text)``; with CPython's C scanner (the one `json` itself uses) where
    there is one: importing `json` pulls in `re` and costs a warm start more than the
    rest of a cache lookup."""
    try:
        from _json import make_scanner
        scan = make_scanner(_PlainJSON())
    except (ImportError, AttributeError, TypeError):
        import json

        return json.loads(text)
    try:
        value, end = scan(text, 0)
    except StopIteration:
        raise ValueError("the text is not JSON") from None
    if text[end:].strip():
        raise ValueError("the text holds more than one JSON value")
    return value


def fnv_name(text: str) -> str:
    """A 64-bit FNV-1a of ``text``, as 16 hex digits: a cache file's name, which only spreads
    entries (what is stored inside decides). hashlib (OpenSSL) would cost more to import
    than a lookup saves."""
    digest = 0xCBF29CE484222325
    for byte in text.encode("utf-8", "surrogateescape"):
        digest = ((digest ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{digest:016x}"


def store(path: str, text: str) -> None:
    """Writes ``text`` to ``path`` whole (a temporary file renamed over it), or nothing when
    the directory is not writable."""
    import tempfile

    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(temporary, path)
        except BaseException:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise
    except OSError:
        pass  # a read-only cache costs the next process the work, not a failure
