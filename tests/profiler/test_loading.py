"""TF_InitProfiler: loading, validation of what it fills, destroy at shutdown, and what
`python -m pluggable plugins` says."""
from __future__ import annotations

import pytest

from pluggable import cli
from pluggable.errors import PluginLoadError, PluginLoadWarning


def test_profiler_only_library_loads_and_is_destroyed_once(profiler_plugin, own_manager,
                                                            counts):
    path = profiler_plugin(PROFILER_TYPE="ONLY")
    before = counts(path)
    assert own_manager.load_plugin(path) is None  # no platform: a profiler and no device
    record = own_manager.records[-1]
    assert (record.status, record.device_type, record.profiler_type) == ("loaded", None, "ONLY")
    assert [p.device_type for p in own_manager.profilers] == ["ONLY"]
    assert counts(path)["created"] == before["created"] + 1
    own_manager.shutdown()
    own_manager.shutdown()  # a second shutdown destroys nothing twice
    after = counts(path)
    assert after["destroyed"] == before["destroyed"] + 1
    assert after["destroyed_fns"] == before["destroyed_fns"] + 1


def test_library_with_device_and_profiler(profiler_plugin, own_manager):
    path = profiler_plugin(WITH_DEVICE=True, PROFILER_TYPE="TEST")
    platform = own_manager.load_plugin(path)
    assert platform.device_type == "TEST" and platform.device_count >= 1
    assert own_manager.records[-1].profiler_type == "TEST"
    with platform.executor(0).allocate(256) as memory:  # the device works
        assert memory.size == 256


def test_library_without_tf_init_profiler_has_no_profiler(profiler_plugin, own_manager):
    path = profiler_plugin(WITH_DEVICE=True, NO_TF_INIT_PROFILER=True)
    own_manager.load_plugin(path)
    record = own_manager.records[-1]
    assert (record.provides_profiler, record.profiler_type, record.profiler_reason) == \
        (False, None, "")
    assert own_manager.profilers == []


def test_library_with_neither_entry_point_is_refused(profiler_plugin, own_manager):
    path = profiler_plugin(NO_TF_INIT_PROFILER=True)
    with pytest.raises(PluginLoadError, match="symbol lookup.*TF_InitProfiler") as info:
        own_manager.load_plugin(path)
    assert info.value.call == "symbol lookup"


@pytest.mark.parametrize("macro, step, reason", [
    ("INIT_PROFILER_ERROR", "profiler init",
     "TF_InitProfiler returned TF_FAILED_PRECONDITION: the test profiler is switched off"),
    ("NULL_START", "profiler validation", "TP_ProfilerFns.start is required but the plugin "
                                          "left it NULL"),
    ("FNS_STRUCT_SIZE_ZERO", "profiler validation", "left TP_ProfilerFns.struct_size at 0"),
    ("PROFILER_STRUCT_SIZE_ZERO", "profiler validation", "left TP_Profiler.struct_size at 0"),
    ("EMPTY_TYPE", "profiler validation", "TP_Profiler.device_type is empty"),
])
def test_broken_profiler_is_skipped_and_devices_still_work(profiler_plugin, own_manager,
                                                           macro, step, reason, counts):
    path = profiler_plugin(WITH_DEVICE=True, **{macro: True})
    before = counts(path)
    with pytest.warns(PluginLoadWarning) as caught:
        platform = own_manager.load_plugin(path)
    message = str(caught[0].message)
    assert path in message and f"{step} failed" in message and reason in message
    assert "its devices still work" in message
    record = own_manager.records[-1]
    assert record.status == "loaded" and record.profiler_type is None
    assert record.profiler_reason.startswith(f"{step}: ") and reason in record.profiler_reason
    assert own_manager.profilers == []
    with platform.executor(0).allocate(512) as memory:
        assert memory.size == 512
    if step == "profiler validation":  # what the plugin filled is given back at once
        assert counts(path)["destroyed"] == before["destroyed"] + 1


def test_profiler_only_library_whose_profiler_fails_is_skipped(profiler_plugin, own_manager):
    path = profiler_plugin(NULL_START=True)
    with pytest.warns(PluginLoadWarning, match="profiler validation failed"):
        assert own_manager.load_plugin(path) is None
    record = own_manager.records[-1]
    assert (record.status, record.step) == ("skipped", "profiler validation")
    assert "TP_ProfilerFns.start" in record.reason


def test_cli_plugins_shows_profiler_type_or_why_skipped(profiler_plugin, own_manager, capsys):
    good = profiler_plugin(PROFILER_TYPE="CLITEST")
    bad = profiler_plugin(WITH_DEVICE=True, EMPTY_TYPE=True)
    own_manager.load_plugin(good)
    with pytest.warns(PluginLoadWarning):
        own_manager.load_plugin(bad)
    assert cli.main(["plugins"]) == 0
    lines = capsys.readouterr().out.splitlines()
    good_line = next(line for line in lines if good in line)
    bad_line = next(line for line in lines if bad in line)
    assert " CLITEST " in good_line
    assert "skipped (profiler validation: TP_Profiler.device_type is empty" in bad_line
