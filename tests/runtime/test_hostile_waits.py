"""Bounded waits and an event manager that cannot die, against the hostile plugins whose
events misbehave (tests/plugins/hostile_plugin.c): a status outside SE_EventStatus, events
that fail, events that never complete, blocking calls that never return."""
from __future__ import annotations

import os
import textwrap
import time

import pytest

from pluggable.base import limits
from pluggable.errors import (
    DeadlineExceededError, FailedPreconditionError, InternalError, PluggableWarning)

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTILE_SOURCE = os.path.join(HERE, "..", "plugins", "hostile_plugin.c")


@pytest.fixture
def hostile(private_manager, build_test_plugin):
    """``hostile("EVENT_ERROR")``: device 0's executor of that variant, loaded in-process."""
    def load(variant: str):
        path = build_test_plugin(HOSTILE_SOURCE, **{f"HOSTILE_{variant}": True})
        return private_manager.load_plugin(path, isolate=False).executor(0)
    return load


@pytest.fixture
def short_deadline():
    limits.set_deadline(0.2)
    yield 0.2
    limits.set_deadline(None)


def close_leaving_work(executor):
    """Closes an executor whose work never finishes: a warning, and back within the bound."""
    started = time.monotonic()
    with pytest.warns(PluggableWarning, match="left to the operating system"):
        executor.close(timeout=0.2)
    assert time.monotonic() - started < 5
    assert executor.is_closed


def test_a_status_outside_the_enum_is_an_error_naming_plugin_and_value(hostile):
    executor = hostile("EVENT_STATUS_77")
    with executor.create_stream() as stream, executor.create_event() as event:
        event.record(stream)
        with pytest.raises(InternalError) as info:
            event.status()
        message = str(info.value)
        assert "returned 77, which is not an SE_EventStatus value" in message
        assert "TEST_DEV plugin" in message and "device 0" in message
        with pytest.raises(InternalError, match="returned 77"):
            event.synchronize()


def test_the_event_manager_survives_invalid_statuses_and_keeps_freeing(hostile):
    executor = hostile("EVENT_STATUS_77")
    manager = executor.event_manager
    freed = []
    with executor.create_stream() as stream:
        markers = [manager.then_execute(stream, lambda i=i: freed.append(i)) for i in range(300)]
        deadline = time.monotonic() + 20
        while manager.pending and time.monotonic() < deadline:
            time.sleep(0.005)
        assert manager.pending == 0
        assert freed == list(range(300))  # in stream order, every one of them
        assert manager._thread.is_alive()
        with pytest.raises(InternalError, match="returned 77"):
            markers[0].synchronize()  # the error is delivered to the waiter
        with pytest.warns(PluggableWarning, match="treats a point of a stream as failed"):
            executor._flush_warnings()


def test_an_event_error_reaches_the_user(hostile):
    executor = hostile("EVENT_ERROR")
    with executor.create_stream() as stream:
        with executor.create_event() as event:
            event.record(stream)
            with pytest.raises(InternalError, match="completed with an error"):
                event.synchronize()
        marker = executor.event_manager.mark(stream)
        # The stream reports no error of its own: the marker's waiter gets the event's.
        with pytest.raises(InternalError, match="completed with an error"):
            marker.synchronize()


def test_waits_on_an_event_that_never_completes_end_at_the_deadline(hostile, short_deadline):
    executor = hostile("EVENT_NEVER_COMPLETES")
    stream = executor.create_stream()
    with executor.create_event() as event:
        event.record(stream)
        started = time.monotonic()
        with pytest.raises(DeadlineExceededError) as info:
            event.synchronize()
        waited = time.monotonic() - started
        assert 0.2 <= waited < 5
        message = str(info.value)
        assert "TEST_DEV plugin" in message and "device 0" in message
        assert "block_host_for_event did not finish within the deadline of 0.2 s" in message
        assert "PLUGGABLE_DEADLINE" in message and "set_deadline" in message
        assert isinstance(info.value, TimeoutError)
    with pytest.raises(DeadlineExceededError, match="block_host_until_done"):
        stream.synchronize()
    executor.event_manager.mark(stream)  # pending for ever
    close_leaving_work(executor)


def test_blocking_calls_that_never_return_are_not_trusted(hostile, short_deadline):
    executor = hostile("BLOCKING_HANGS")
    with executor.create_stream() as stream:
        with pytest.raises(DeadlineExceededError, match="block_host_until_done"):
            stream.synchronize()
        started = time.monotonic()
        with pytest.raises(DeadlineExceededError, match="synchronize_all_activity"):
            executor.synchronize_all_activity()
        assert time.monotonic() - started < 5
    with pytest.warns(PluggableWarning, match="synchronize_all_activity did not finish"):
        executor.close(timeout=0.2)


def test_queueing_work_on_a_closed_device_names_it(xpu_platform, private_manager,
                                                    build_test_plugin):
    executor = private_manager.load_plugin(build_test_plugin()).executor(0)
    stream = executor.create_stream()
    manager = executor.event_manager
    manager.close()
    with pytest.raises(FailedPreconditionError, match="TEST:0 .TEST_DEV. is being closed"):
        manager.mark(stream)
    stream.close()


def test_the_deadline_setting(monkeypatch):
    monkeypatch.setenv(limits.DEADLINE_VARIABLE, "12.5")
    assert limits.deadline() == 12.5
    limits.set_deadline(3)
    try:
        assert limits.deadline() == 3
        with pytest.raises(ValueError, match="0 or more seconds"):
            limits.set_deadline(-1)
    finally:
        limits.set_deadline(None)
    monkeypatch.setenv(limits.DEADLINE_VARIABLE, "soon")
    with pytest.warns(PluggableWarning, match="PLUGGABLE_DEADLINE='soon' is not a number"):
        assert limits.deadline() == limits.DEFAULT_DEADLINE


def test_interpreter_exit_is_bounded_with_work_that_never_finishes(run_python,
                                                                   build_test_plugin):
    path = build_test_plugin(HOSTILE_SOURCE, HOSTILE_EVENT_NEVER_COMPLETES=True)
    code = textwrap.dedent(f"""
        import pluggable
        executor = pluggable.load_plugin({path!r}, isolate=False).executor(0)
        stream = executor.create_stream()
        executor.event_manager.then_execute(stream, lambda: None)
        print("queued")
    """)
    started = time.monotonic()
    result = run_python(code, env={"PLUGGABLE_EXIT_TIMEOUT": "0.5",
                                   "PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    assert time.monotonic() - started < 30
    assert result.stdout.strip() == "queued"
    assert "were not done within 0.5 s" in result.stderr
    assert "left to the operating system" in result.stderr


def test_config_functions_set_the_limits():
    pluggable_config = __import__("pluggable").config
    pluggable_config.set_deadline(2.5)
    pluggable_config.set_probe_timeout(4)
    try:
        assert pluggable_config.get_deadline() == 2.5 == limits.deadline()
        assert pluggable_config.get_probe_timeout() == 4 == limits.probe_timeout()
        with pytest.raises(ValueError, match="more than 0 seconds"):
            pluggable_config.set_probe_timeout(0)
    finally:
        pluggable_config.set_deadline(None)
        pluggable_config.set_probe_timeout(None)
    assert pluggable_config.get_probe_timeout() == limits.probe_timeout()
