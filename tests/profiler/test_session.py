"""Profiling sessions against the profiler test plugin: start/stop rules, options, the
two-call collection, plugins that fail, and the saved layout."""
from __future__ import annotations

import os
import re
import socket

import numpy as np
import pytest

from pluggable import profiler
from pluggable.errors import AlreadyExistsError, InvalidArgumentError, UnavailableError
from pluggable.profiler import ProfilerOptions, ProfilerWarning


def _load(manager, *paths):
    for path in paths:
        manager.load_plugin(path)


def _names(result, plane):
    return [e.name for e in result.events(plane)]


def test_session_saves_plugin_planes_in_tensorboard_layout(profiler_plugin, own_manager,
                                                           counts, tmp_path):
    path = profiler_plugin()
    _load(own_manager, path)
    before = counts(path)
    profiler.start(tmp_path)
    assert profiler.is_running()
    with profiler.Trace("step", step_num=7, phase="train"):
        pass
    result = profiler.stop()
    assert not profiler.is_running()
    after = counts(path)
    assert (after["started"] - before["started"], after["stopped"] - before["stopped"],
            after["collected"] - before["collected"]) == (1, 1, 1)
    relative = os.path.relpath(result.path, tmp_path)
    assert re.fullmatch(r"plugins/profile/\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d/"
                        + re.escape(socket.gethostname()) + r"\.xplane\.pb", relative)
    assert result.planes == ["/device:TEST:0", "/host:CPU"]
    events = list(result.events("/device:TEST:0"))
    assert [(e.line, e.name, e.duration_ns) for e in events] == [("compute", "TestKernel", 1000)] * 3
    assert [e.start_ns - events[0].start_ns for e in events] == [0, 2000, 4000]
    (step,) = result.events("/host:CPU")
    assert (step.name, step.stats) == ("step", {"phase": "train", "step_num": 7})
    assert step.start_ns >= events[0].start_ns  # one clock: the plugin's start came first
    loaded = profiler.load(result.path)
    assert list(loaded.events()) == list(result.events())
    assert profiler.load(tmp_path).path == result.path  # a logdir: its newest profile
    assert socket.gethostname() in loaded.space.hostnames


def test_starting_twice_and_stopping_without_session_are_errors(own_manager, tmp_path):
    with pytest.raises(UnavailableError, match="no profiler is running"):
        profiler.stop()
    profiler.start(tmp_path)
    try:
        with pytest.raises(AlreadyExistsError, match="already running"):
            profiler.start(tmp_path)
    finally:
        result = profiler.stop(save=False)
    assert result.path is None
    with pytest.raises(UnavailableError):
        profiler.stop()


@pytest.mark.parametrize("options", [
    ProfilerOptions(device_tracer_level=0),
    ProfilerOptions(device_type="CPU"),
])
def test_options_that_exclude_plugin_profilers_start_none(profiler_plugin, own_manager, counts,
                                                          tmp_path, options):
    path = profiler_plugin()
    _load(own_manager, path)
    before = counts(path)
    with profiler.Profile(tmp_path, options) as session:
        pass
    assert counts(path)["started"] == before["started"]
    assert session.result.planes == []


def test_pluggable_device_type_and_restarts(profiler_plugin, own_manager, tmp_path):
    _load(own_manager, profiler_plugin())
    options = ProfilerOptions(device_type="PLUGGABLE_DEVICE", host_tracer_level=0)
    for _ in range(3):  # restartable, each session has its own data
        with profiler.Profile(tmp_path, options) as session:
            pass
        assert _names(session.result, "/device:TEST:0") == ["TestKernel"] * 3


@pytest.mark.parametrize("bad, match", [
    (dict(host_tracer_level=-1), "host_tracer_level must be an integer >= 0"),
    (dict(device_tracer_level="1"), "device_tracer_level must be an integer"),
    (dict(delay_ms=-5), "delay_ms must be None or an integer >= 0"),
    (dict(device_type="XPU"), "device_type must be one of UNSPECIFIED, PLUGGABLE_DEVICE"),
])
def test_bad_options_are_refused(bad, match):
    with pytest.raises(InvalidArgumentError, match=match):
        ProfilerOptions(**bad)


def test_no_events_means_no_plane(profiler_plugin, own_manager, tmp_path):
    _load(own_manager, profiler_plugin(EVENT_COUNT=0))
    with profiler.Profile(tmp_path) as session:
        pass
    assert session.result.planes == []
    assert profiler.load(session.result.path).planes == []


@pytest.mark.parametrize("macro, match", [
    ("START_ERROR", r"TP_ProfilerFns.start failed: the test profiler refuses to start; it is "
                    r"left out"),
    ("COLLECT_ERROR", r"collect_data_xspace \(size query\) failed: the test profiler cannot "
                      r"collect; its planes are left out"),
    ("COLLECT_OVERFLOW", r"collect_data_xspace announced \d+ bytes but wrote \d+"),
    ("COLLECT_MALFORMED", r"is not a serialized XSpace \(\d+ bytes\): .* at byte \d+, in "
                          r"\w+.*; collect_data_xspace must write a tensorflow.profiler.XSpace"),
])
def test_failing_plugin_is_left_out_and_others_are_saved(profiler_plugin, own_manager,
                                                         tmp_path, macro, match):
    good = profiler_plugin(PROFILER_TYPE="GOOD", PLANE_NAME="/device:GOOD:0")
    broken = profiler_plugin(PROFILER_TYPE="BROKEN", PLANE_NAME="/device:BROKEN:0",
                             **{macro: True})
    _load(own_manager, broken, good)
    with pytest.warns(ProfilerWarning) as caught:
        profiler.start(tmp_path)
        with profiler.Trace("work"):
            pass
        result = profiler.stop()
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and broken in messages[0]
    assert re.search(match, messages[0]), messages[0]
    assert result.planes == ["/device:GOOD:0", "/host:CPU"]
    assert _names(result, "/device:GOOD:0") == ["TestKernel"] * 3
    assert result.warnings == messages
    assert profiler.load(result.path).planes == result.planes


def test_overflow_is_caught_with_the_written_size(profiler_plugin, own_manager, tmp_path):
    _load(own_manager, profiler_plugin(COLLECT_OVERFLOW=True))
    profiler.start(tmp_path)
    with pytest.warns(ProfilerWarning) as caught:
        profiler.stop()
    announced, written = map(int, re.search(r"announced (\d+) bytes but wrote (\d+)",
                                            str(caught[0].message)).groups())
    assert written == announced + 64


def test_several_profiler_plugins_at_once(profiler_plugin, own_manager, tmp_path):
    _load(own_manager, profiler_plugin(PROFILER_TYPE="ONE", PLANE_NAME="/device:ONE:0"),
          profiler_plugin(PROFILER_TYPE="TWO", PLANE_NAME="/device:TWO:0", EVENT_COUNT=5))
    with profiler.Profile(tmp_path, ProfilerOptions(host_tracer_level=0)) as session:
        pass
    result = session.result
    assert result.planes == ["/device:ONE:0", "/device:TWO:0"]
    assert len(_names(result, "/device:TWO:0")) == 5


def test_trace_as_decorator_and_context_manager(own_manager, tmp_path):
    @profiler.Trace("decorated", step_num=1)
    def work(x):
        return x * 2

    assert work(4) == 8  # no session: just runs
    with profiler.Profile(tmp_path) as session:
        assert work(5) == 10
        with profiler.Trace("outer", batch=32):
            with profiler.Trace("inner"):
                pass
    events = list(session.result.events("/host:CPU"))
    assert [(e.name, e.stats) for e in events] == [
        ("decorated", {"step_num": 1}), ("outer", {"batch": 32}), ("inner", {})]
    outer, inner = events[1], events[2]
    assert outer.start_ns <= inner.start_ns
    assert inner.start_ns + inner.duration_ns <= outer.start_ns + outer.duration_ns
    with pytest.raises(InvalidArgumentError, match="non-empty string"):
        profiler.Trace("")
    with pytest.raises(InvalidArgumentError, match="step_num must be an integer.*'abc'"):
        profiler.Trace("bad", step_num="abc")  # refused now, not when the session stops
    assert profiler.Trace("numpy", step_num=np.int64(3)).step_num == 3


def test_delay_ms_waits_before_recording(profiler_plugin, own_manager, tmp_path):
    import time

    _load(own_manager, profiler_plugin())
    before = time.time_ns()
    with profiler.Profile(tmp_path, ProfilerOptions(delay_ms=30)) as session:
        pass
    (first, *_) = session.result.events("/device:TEST:0")
    assert first.start_ns - before >= 30_000_000  # the plugin was started after the delay


def test_profile_without_a_logdir_saves_under_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with profiler.Profile() as session:
        with profiler.Trace("step"):
            pass
    assert session.logdir == str(tmp_path / "logs")
    assert session.result.path.startswith(str(tmp_path / "logs" / "plugins" / "profile"))


@pytest.mark.parametrize("step", [1, 7, 4096])
def test_the_saved_file_holds_every_piece_however_the_writes_are_cut(tmp_path, monkeypatch,
                                                                      step):
    from pluggable.profiler import session as session_module

    pieces = [b"", bytes(range(256)) * 40, b"x", b"", b"\x00\x01" * 3000]
    real_writev, calls = os.writev, []

    def short_writev(fd, buffers):  # a file system that takes at most `step` bytes a call
        calls.append(len(buffers))
        joined = b"".join(bytes(b) for b in buffers)
        return real_writev(fd, [joined[:step]])

    monkeypatch.setattr(os, "writev", short_writev)
    path = session_module._save(str(tmp_path), pieces)
    assert open(path, "rb").read() == b"".join(pieces)
    assert len(calls) == -(-sum(map(len, pieces)) // step)
    assert not os.path.exists(path + ".tmp")


def test_an_interrupted_stop_gives_up_the_collects_and_the_next_session_works(
        profiler_plugin, own_manager, counts, tmp_path, monkeypatch):
    from pluggable.plugin import profiler as plugin_profiler
    from pluggable.profiler.host_tracer import HostTracer

    path = profiler_plugin()
    _load(own_manager, path)
    given_up = []
    real_abandon = plugin_profiler.PendingCollect.abandon
    monkeypatch.setattr(plugin_profiler.PendingCollect, "abandon",
                        lambda self: (given_up.append(self), real_abandon(self)))

    def interrupted(self):  # Ctrl-C while the host plane is encoded
        raise KeyboardInterrupt

    profiler.start(tmp_path)
    with profiler.Trace("step", step_num=1):
        pass
    with monkeypatch.context() as patch:
        patch.setattr(HostTracer, "encode_plane", interrupted)
        with pytest.raises(KeyboardInterrupt):
            profiler.stop()
    assert len(given_up) == 1 and not profiler.is_running()
    profiler.start(tmp_path)
    with profiler.Trace("step", step_num=2):
        pass
    result = profiler.stop()
    assert result.planes == ["/device:TEST:0", "/host:CPU"]
    assert [e.stats["step_num"] for e in result.events("/host:CPU")] == [2]
    assert not result.warnings
