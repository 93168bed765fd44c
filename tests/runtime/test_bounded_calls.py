"""Blocking plugin calls given up on at a deadline (`pluggable._compiled.bounded_call`, which
`StreamExecutor.synchronize_all_activity` uses): the call's result and status, a call that
never returns, the helper threads, bad arguments, signals and fork."""
from __future__ import annotations

import ctypes
import os
import signal
import textwrap
import threading
import time

import pytest

from pluggable.base import native as _native

from pluggable.base import limits
from pluggable.abi.tf_status import TF_Code
from pluggable.errors import DeadlineExceededError, InternalError, PluggableWarning

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTILE_SOURCE = os.path.join(HERE, "..", "plugins", "hostile_plugin.c")
compiled = _native.compiled


def synchronize_address(executor) -> int:
    return ctypes.cast(executor._fns["synchronize_all_activity"], ctypes.c_void_p).value


def helpers():
    """(started, idle, in_calls) of the helper pool."""
    return compiled.bounded_call_helpers()


@pytest.fixture
def hanging(private_manager, build_test_plugin):
    """Device 0 of a plugin whose blocking calls never return; closed, warning, at the end."""
    path = build_test_plugin(HOSTILE_SOURCE, HOSTILE_BLOCKING_HANGS=True)
    # In this process on purpose (the probe would refuse it): the test is of what happens here.
    executor = private_manager.load_plugin(path, isolate=False).executor(0)
    yield executor
    with pytest.warns(PluggableWarning, match="synchronize_all_activity did not finish"):
        executor.close(timeout=0.2)


def test_a_bounded_call_waits_for_the_plugin_without_the_gil(xpu, stream_delay):
    """The XPU's synchronize returns once the stream's host callback ran, which needs the GIL
    the caller gave up."""
    done = []
    with xpu.create_stream() as stream:
        stream_delay(20_000)
        stream.host_callback(lambda: done.append(1))
        status = _native.acquire_status()
        try:
            started = time.monotonic()
            assert compiled.bounded_call(synchronize_address(xpu), xpu._device_address,
                                     status.address, 10.0) is True
            assert time.monotonic() - started >= 0.02
            assert done == [1]
            assert status.code == TF_Code.TF_OK
        finally:
            _native.release_status(status)


def test_a_plugin_error_comes_back_in_the_status(xpu, faults):
    with xpu.create_stream() as stream, xpu.allocate(16) as memory:
        faults("stream:1")
        xpu.memset(stream, memory, 1)
        status = _native.acquire_status()
        try:
            assert compiled.bounded_call(synchronize_address(xpu), xpu._device_address,
                                     status.address, 10.0) is True
            assert status.code == TF_Code.TF_INTERNAL
            assert "a stream of XPU device 0 has failed" in status.message
            assert "injected fault" in status.message
        finally:
            _native.release_status(status)
        pool = list(_native._local.pool)
        with pytest.raises(InternalError) as info:
            xpu.synchronize_all_activity()
        assert "SP_StreamExecutor.synchronize_all_activity failed" in str(info.value)
        assert "injected fault" in info.value.plugin_message
        after = list(_native._local.pool)  # the status went back to the pool
        assert all(any(s is t for t in after) for s in pool) and len(after) - len(pool) in (0, 1)


def test_a_call_that_never_returns_is_given_up_on_and_the_next_gets_a_helper(hanging, xpu):
    xpu.synchronize_all_activity()
    _, _, in_calls = helpers()
    status = _native.acquire_status()
    started = time.monotonic()
    assert compiled.bounded_call(synchronize_address(hanging), hanging._device_address,
                             status.address, 0.2) is False
    waited = time.monotonic() - started
    _native.abandon_status(status)  # the hung call still holds it
    assert 0.2 <= waited < 5
    assert helpers()[2] == in_calls + 1  # left in the call
    healthy = _native.acquire_status()
    try:
        assert compiled.bounded_call(synchronize_address(xpu), xpu._device_address,
                                 healthy.address, 10.0) is True
        assert healthy.code == TF_Code.TF_OK
    finally:
        _native.release_status(healthy)
    assert helpers()[2] == in_calls + 1
    xpu.synchronize_all_activity()


def test_the_executor_raises_the_deadline_error_and_keeps_working(hanging, xpu):
    limits.set_deadline(0.2)
    try:
        started = time.monotonic()
        with pytest.raises(DeadlineExceededError) as info:
            hanging.synchronize_all_activity()
        assert time.monotonic() - started < 5
        message = str(info.value)
        assert "synchronize_all_activity did not finish within the deadline of 0.2 s" in message
        assert "TEST_DEV plugin" in message
        with pytest.raises(DeadlineExceededError):
            hanging.synchronize_all_activity()  # a second helper, stuck as well
        xpu.synchronize_all_activity()
    finally:
        limits.set_deadline(None)


def test_a_signal_handler_that_raises_ends_the_wait(hanging):
    """Ctrl-C (here SIGUSR1 with a handler that raises) reaches a caller waiting for a call
    that never returns; the call is left behind as at a deadline."""
    assert threading.current_thread() is threading.main_thread()

    class Interrupted(Exception):
        pass

    def interrupt(signum, frame):
        raise Interrupted()

    previous = signal.signal(signal.SIGUSR1, interrupt)
    timer = threading.Timer(0.3, signal.pthread_kill,
                            (threading.main_thread().ident, signal.SIGUSR1))
    try:
        timer.start()
        started = time.monotonic()
        with pytest.raises(Interrupted):
            hanging.synchronize_all_activity(timeout=60)
        assert 0.3 <= time.monotonic() - started < 5
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)


@pytest.mark.parametrize("arguments, message", [
    ((0, 1, 1, 1.0), "fn_address is 0 (a NULL pointer)"),
    ((1, 0, 1, 1.0), "device_address is 0 (a NULL pointer)"),
    ((-8, 1, 1, 1.0), "fn_address must be an address from 1 to 2**64-1, not -8"),
    ((1, 2**64, 1, 1.0), "device_address must be an address from 1 to 2**64-1"),
    ((1, 1, 1, -0.5), "timeout must be 0 or more seconds, not -0.5"),
    ((1, 1, 1, float("nan")), "timeout must be 0 or more seconds, not nan"),
])
def test_bad_arguments_are_refused_before_any_call(arguments, message):
    before = helpers()
    with pytest.raises(ValueError) as info:
        compiled.bounded_call(*arguments)
    assert message in str(info.value)
    assert helpers() == before


def test_argument_types_and_count():
    with pytest.raises(TypeError, match="fn_address must be an int"):
        compiled.bounded_call("1", 1, 1, 1.0)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        compiled.bounded_call(1, 1, 1)
    with pytest.raises(TypeError):
        compiled.bounded_call(1, 1, 1, "soon")


def test_the_spin_budget_setting():
    budget = compiled.bounded_call_spin()
    assert budget == pytest.approx(50e-6)
    try:
        assert compiled.bounded_call_spin(0) == budget
        assert compiled.bounded_call_spin() == 0
        with pytest.raises(ValueError, match="0 to 1 seconds"):
            compiled.bounded_call_spin(-1)
    finally:
        compiled.bounded_call_spin(budget)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_its_own_helpers(run_python, build_test_plugin):
    """The parent's helpers do not exist in a child: it must not hand calls to them. (Only
    the pool is exercised: the test plugin's synchronize does nothing, and no device is
    used in the child.) In a fresh interpreter: forking this one, with the threads that
    torch or JAX may have started, could leave the child stuck on a lock one of them held."""
    code = textwrap.dedent(f"""
        import ctypes, os
        import pluggable
        from pluggable.base import native as _native
        compiled = _native.compiled
        executor = pluggable.load_plugin({build_test_plugin()!r}).executor(0)
        address = ctypes.cast(executor._fns["synchronize_all_activity"], ctypes.c_void_p).value
        status = _native.Status()
        assert compiled.bounded_call(address, executor._device_address, status.address, 10.0)
        assert compiled.bounded_call_helpers()[1] >= 1  # an idle helper the child must forget
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report, and never return into the parent's code
            try:
                before = compiled.bounded_call_helpers()
                returned = compiled.bounded_call(address, executor._device_address, status.address,
                                             5.0)
                os.write(write, repr((before, returned, compiled.bounded_call_helpers())).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            report = pipe.read()
        _, code = os.waitpid(pid, 0)
        print(code, report)
    """)
    result = run_python(code, env={"PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    assert result.stdout.strip() == "0 " + repr(((0, 0, 0), True, (1, 1, 0)))


def test_the_process_exits_with_a_helper_stuck_in_a_call(run_python, build_test_plugin):
    """Helpers are detached: one stuck in a plugin call does not hold the process up."""
    path = build_test_plugin(HOSTILE_SOURCE, HOSTILE_BLOCKING_HANGS=True)
    code = textwrap.dedent(f"""
        import pluggable
        from pluggable.errors import DeadlineExceededError
        executor = pluggable.load_plugin({path!r}, isolate=False).executor(0)
        pluggable.config.set_deadline(0.2)
        try:
            executor.synchronize_all_activity()
        except DeadlineExceededError:
            print("given up on")
    """)
    started = time.monotonic()
    result = run_python(code, env={"PLUGGABLE_EXIT_TIMEOUT": "0.5",
                                   "PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    assert time.monotonic() - started < 30
    assert result.returncode == 0
    assert result.stdout.strip() == "given up on"
    # Closing the device at exit gives up on a second call, within the exit timeout.
    assert "synchronize_all_activity did not finish within the deadline of 0.5 s" in result.stderr
    assert "left to the operating system" in result.stderr
