"""Fixtures of the ABI tests; the machinery lives in abi_testlib.py."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


def _load_testlib():
    if "abi_testlib" not in sys.modules:
        path = Path(__file__).with_name("abi_testlib.py")
        spec = importlib.util.spec_from_file_location("abi_testlib", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["abi_testlib"] = module
        spec.loader.exec_module(module)
    return sys.modules["abi_testlib"]


lib = _load_testlib()


@pytest.fixture(scope="session")
def layout(tmp_path_factory) -> dict:
    """The C compiler's view of every mirrored struct and constant (our headers)."""
    tmp = tmp_path_factory.mktemp("layout_probe")
    constants = list(lib.mirrored_constants())
    source = lib.layout_probe_source(lib.abi.ALL_STRUCTS, constants, lib.PROBE_HEADERS)
    return lib.run_probe(tmp, source, "c", [lib.INCLUDE])


@pytest.fixture(scope="session")
def kinds(tmp_path_factory) -> dict:
    """The C++ compiler's view of the type of every mirrored field and function type."""
    tmp = tmp_path_factory.mktemp("kind_probe")
    expressions = {name: expr for name, (_, expr) in lib.standalone_function_types().items()}
    source = lib.kind_probe_source(lib.abi.ALL_STRUCTS, expressions, lib.PROBE_HEADERS)
    return lib.run_probe(tmp, source, "c++", [lib.INCLUDE])


def pytest_generate_tests(metafunc):
    if "struct" in metafunc.fixturenames:
        structs = lib.abi.ALL_STRUCTS
        metafunc.parametrize("struct", structs, ids=[c.__name__ for c in structs])
    if "header" in metafunc.fixturenames:
        metafunc.parametrize("header", lib.HEADERS)
