"""Property-based: whatever a plugin writes into the fields the host reads (struct sizes,
versions, device count, memory figures, event states), loading and first use end in a
plugin that works or in a `pluggable` error class; never a crash, never another exception."""
from __future__ import annotations

import ctypes
import os

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pluggable.base import limits
from pluggable.errors import PluggableError, PluginLoadError
from pluggable.loader import PluginManager

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTILE_SOURCE = os.path.join(HERE, "..", "plugins", "hostile_plugin.c")

SIZES = st.one_of(st.integers(0, 1024), st.sampled_from([2**16, 2**16 + 1, 2**40, 2**63,
                                                          2**64 - 1]))
INT32 = st.integers(-2**31, 2**31 - 1)
INT64 = st.integers(-2**63, 2**63 - 1)
FIELDS = {
    "platform_struct_size": SIZES, "platform_fns_struct_size": SIZES,
    "se_struct_size": SIZES, "device_struct_size": SIZES, "timer_fns_struct_size": SIZES,
    "major_version": st.one_of(st.just(0), INT32),
    "device_count": st.one_of(st.integers(-2, 8), INT32),
    "memory_free": st.one_of(st.integers(-2, 1 << 21), INT64),
    "memory_total": st.one_of(st.integers(-2, 1 << 21), INT64),
    "event_status": st.one_of(st.integers(-1, 4), INT32),
}


@pytest.fixture(scope="module")
def configurable(build_test_plugin):
    path = build_test_plugin(HOSTILE_SOURCE, HOSTILE_CONFIGURABLE=True)
    library = ctypes.CDLL(path)
    library.hostile_set.argtypes = (ctypes.c_char_p, ctypes.c_int64)
    library.hostile_set.restype = ctypes.c_int
    return path, library


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.fixed_dictionaries({}, optional=FIELDS))
def test_any_field_values_end_in_a_working_plugin_or_a_pluggable_error(configurable, fields):
    path, library = configurable
    library.hostile_reset()
    for name, value in fields.items():
        value = value - 2**64 if value >= 2**63 else value  # a size_t's bits, as int64
        assert library.hostile_set(name.encode(), value) == 0
    manager = PluginManager()
    manager._discovered = True
    limits.set_deadline(0.05)
    try:
        try:
            platform = manager.load_plugin(path)
        except PluginLoadError as exc:
            assert exc.step in ("init", "validation", "device creation") and str(exc)
            return
        assert 0 <= platform.device_count <= limits.MAX_DEVICES
        if platform.device_count == 0:
            return
        executor = platform.executor(0)
        details = executor.details()
        if "memory_total" in details:
            free, total = executor.memory_usage()
            assert 0 <= free <= total == details["memory_total"]
        with executor.create_stream() as stream, executor.create_event() as event:
            event.record(stream)
            try:
                event.synchronize()
                assert event.query()
            except PluggableError as exc:  # an error state, an invalid one, or never done
                assert str(exc)
    finally:
        limits.set_deadline(None)
        library.hostile_reset()
        manager.shutdown()


def test_an_unknown_field_is_refused_by_the_control_function(configurable):
    _, library = configurable
    assert library.hostile_set(b"no_such_field", 1) == -1
