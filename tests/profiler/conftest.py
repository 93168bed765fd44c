"""Fixtures of the profiler tests: the profiler test plugin in its -D variants, and a plugin
manager of the test's own that profiling sessions use in place of the process's."""
from __future__ import annotations

import ctypes
import os

import pytest

from pluggable.loader import plugin_manager as loader

PROFILER_PLUGIN_SOURCE = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "plugins", "profiler_plugin.c")
COUNT_NAMES = ("created", "started", "stopped", "collected", "destroyed", "destroyed_fns")


@pytest.fixture
def profiler_plugin(build_test_plugin):
    """``profiler_plugin(WITH_DEVICE=True, ...)``: the path of a profiler test plugin."""
    return lambda **macros: build_test_plugin(PROFILER_PLUGIN_SOURCE, **macros)


def _counts(path: str) -> dict:
    lib = ctypes.CDLL(path)
    out = (ctypes.c_int64 * 6)()
    lib.TestProfiler_Counts(out)
    return dict(zip(COUNT_NAMES, out))


@pytest.fixture
def counts():
    """``counts(path)``: the test profiler's counters (tests/plugins/profiler_plugin.c)."""
    return _counts


@pytest.fixture
def own_manager(private_manager, monkeypatch):
    """A private plugin manager (discovery off) that `pluggable.profiler` sessions use."""
    monkeypatch.setattr(loader, "_manager", private_manager)
    return private_manager


@pytest.fixture(autouse=True)
def no_session_left():
    """Every test leaves no session running, whatever it did."""
    yield
    from pluggable import profiler

    if profiler.is_running():
        profiler.stop(save=False)
        pytest.fail("the test left a profiler session running")
