"""Plugins that misbehave after loading (the run-time variants of
tests/plugins/hostile_plugin.c, armed by ``hostile_arm(1)`` once the host is set up): each
ends in a clear error of the exact class, within a bounded time, with no silent wrong value,
and the process goes on (other devices, the CPU).

Every case runs in a child interpreter with a timeout, so a host that hangs or dies fails the
test instead of the suite."""
from __future__ import annotations

import json
import os
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTILE_SOURCE = os.path.join(HERE, "..", "plugins", "hostile_plugin.c")

PRELUDE = textwrap.dedent("""
    import ctypes, json, os, sys, time, warnings
    import numpy as np
    import pluggable
    from pluggable import errors
    PLUGIN = ctypes.CDLL(os.environ["PLUGGABLE_PLUGIN_PATH"])
    arm = PLUGIN.hostile_arm
    results = {}

    def outcome(fn):
        try:
            value = fn()
        except Exception as e:
            return [type(e).__name__, str(e)]
        return ["ok", value.tolist() if hasattr(value, "tolist") else value]
""")
EPILOGUE = textwrap.dedent("""
    # The rest of the process goes on: the XPU and the CPU still compute.
    results["xpu"] = (pluggable.ops.add(pluggable.tensor([1.0], device="XPU:0"), 1.0)
                      .numpy().tolist())
    results["cpu"] = pluggable.ops.add(np.float32(1), 1.0).numpy().tolist()
    print("RESULTS", json.dumps(results))
""")


@pytest.fixture
def run_hostile(build_test_plugin, run_python):
    """``run_hostile(variant, code, **macros)``: runs ``code`` in a child that discovers the
    variant's plugin (and the XPU); returns the ``results`` dict it filled."""
    def run(variant: str, code: str, env=None, **macros) -> dict:
        path = build_test_plugin(HOSTILE_SOURCE, **{f"HOSTILE_{variant}": True}, **macros)
        result = run_python(PRELUDE + textwrap.dedent(code) + EPILOGUE, check=False,
                            env={"PLUGGABLE_PLUGIN_PATH": path, "PLUGGABLE_PROBE": "0",
                                 **(env or {})})
        lines = [line for line in result.stdout.splitlines() if line.startswith("RESULTS ")]
        assert result.returncode == 0 and lines, (result.returncode, result.stdout,
                                                  result.stderr)
        results = json.loads(lines[-1][len("RESULTS "):])
        assert results["xpu"] == [2.0] and results["cpu"] == 2.0
        results["stderr"] = result.stderr
        return results
    return run


# -- a stream status error -------------------------------------------------------------------
def test_a_stream_data_loss_is_raised_once_by_numpy_and_the_device_recovers(run_hostile):
    r = run_hostile("STREAM_DATA_LOSS", """
        before = pluggable.tensor(np.arange(4, dtype=np.float32), device="TEST:0")
        results["before"] = outcome(before.numpy)
        arm(1)
        lost = pluggable.tensor(np.ones(4, np.float32), device="TEST:0")
        results["first"] = outcome(lost.numpy)
        results["again"] = outcome(lost.numpy)          # lost for good, said so
        results["sync"] = outcome(pluggable.get_device("TEST:0").synchronize)
        arm(0)
        results["after"] = outcome(
            pluggable.tensor(np.full(4, 5, np.float32), device="TEST:0").numpy)
        results["kept"] = outcome(before.numpy)         # made before the fault: intact
    """)
    assert r["before"] == ["ok", [0.0, 1.0, 2.0, 3.0]]
    assert r["first"][0] == "DataLossError"
    assert "SP_StreamExecutor.get_stream_status failed: hostile: the stream lost its data" \
        in r["first"][1] and "TEST_DEV plugin" in r["first"][1]
    assert r["again"][0] == "DataLossError" and "has no value" in r["again"][1]
    assert r["sync"] == ["ok", None]  # reported once, by the first wait
    assert r["after"] == ["ok", [5.0] * 4]
    assert r["kept"] == ["ok", [0.0, 1.0, 2.0, 3.0]]


def test_a_stream_data_loss_is_raised_by_device_synchronize(run_hostile):
    r = run_hostile("STREAM_DATA_LOSS", """
        device = pluggable.get_device("TEST:0")
        arm(1)
        lost = pluggable.tensor(np.ones(4, np.float32), device="TEST:0")
        arm(0)
        results["sync"] = outcome(device.synchronize)
        results["sync2"] = outcome(device.synchronize)
        results["numpy"] = outcome(lost.numpy)
        results["after"] = outcome(pluggable.tensor([3.0], device="TEST:0").numpy)
    """)
    assert r["sync"][0] == "DataLossError" and "lost its data" in r["sync"][1]
    assert r["sync2"] == ["ok", None]
    assert r["numpy"][0] == "DataLossError" and "has no value" in r["numpy"][1]
    assert r["after"] == ["ok", [3.0]]


@pytest.mark.parametrize("deadline", ["10", "0"])
def test_a_failed_user_stream_reports_once_and_recovers(run_hostile, deadline):
    r = run_hostile("STREAM_DATA_LOSS", """
        executor = pluggable.get_device("TEST:0").executor
        stream = executor.create_stream()
        memory = executor.allocate(16)
        arm(1)
        executor.memcpy_htod(stream, memory, np.ones(4, np.float32), 16)
        arm(0)
        results["sync"] = outcome(stream.synchronize)
        results["sync2"] = outcome(stream.synchronize)
        executor.memcpy_htod(stream, memory, np.full(4, 9, np.float32), 16)
        results["sync3"] = outcome(stream.synchronize)
        out = np.zeros(4, np.float32)
        executor.sync_memcpy_dtoh(out, memory, 16)
        results["value"] = out.tolist()
        stream.close()
        memory.free() if hasattr(memory, "free") else None
    """, env={"PLUGGABLE_DEADLINE": deadline})
    assert r["sync"][0] == "DataLossError" and "lost its data" in r["sync"][1]
    assert r["sync2"] == ["ok", None] and r["sync3"] == ["ok", None]
    assert r["value"] == [9.0] * 4


# -- dishonest allocate ----------------------------------------------------------------------
ALLOCATE_CODE = """
    before = pluggable.tensor(np.arange(4, dtype=np.float32), device="TEST:0")
    arm(1)
    results["upload"] = outcome(
        lambda: pluggable.tensor(np.full(4, 7, np.float32), device=DEVICE).numpy())
    results["before"] = outcome(before.numpy)   # never overwritten
    arm(0)
"""


@pytest.mark.parametrize("variant, macros, device, fragment", [
    ("OVERLAPPING_ALLOCATE", {"NO_BFC_ALLOCATOR": True}, "TEST:0",
     "which overlaps memory it handed out before and that is still in use"),
    ("OVERLAPPING_ALLOCATE", {"DEVICE_COUNT": 2}, "TEST:1",
     "which overlaps memory it handed out before and that is still in use"),
    ("SHORT_ALLOCATE", {"NO_BFC_ALLOCATOR": True}, "TEST:0",
     "was asked for 256 bytes and reported a block of 128 bytes"),
    ("MISALIGNED_ALLOCATE", {"NO_BFC_ALLOCATOR": True}, "TEST:0", "which is not 16-byte aligned"),
])
def test_memory_a_plugin_should_not_hand_out_is_refused(run_hostile, variant, macros, device,
                                                         fragment):
    r = run_hostile(variant, ALLOCATE_CODE.replace("DEVICE", repr(device)), **macros)
    kind, message = r["upload"]
    assert kind == "InternalError", r["upload"]
    assert fragment in message and "the block was refused" in message
    assert "TEST_DEV plugin" in message and f"device {device[-1]}" in message
    assert r["before"] == ["ok", [0.0, 1.0, 2.0, 3.0]]


HOST_ALLOCATE_CODE = """
    executor = pluggable.get_device("TEST:1").executor
    live = executor.host_memory_allocate(256)   # the block a dishonest plugin hands out again
    live.numpy()[:4] = [1, 2, 3, 4]
    pool = executor.host_allocator
    arm(1)
    results["host"] = outcome(lambda: executor.host_memory_allocate(256))
    results["unified"] = outcome(lambda: executor.unified_memory_allocate(256))
    results["pinned_pool"] = outcome(lambda: pool.allocate(4096))
    results["live"] = live.numpy()[:4].tolist()   # never handed to anyone else
    arm(0)
    honest = executor.unified_memory_allocate(64)
    results["after"] = [honest.size, honest.address % 16]
    honest.close()
    live.close()
    again = executor.host_memory_allocate(256)   # a freed block's claim was dropped
    results["again"] = again.size
    again.close()
"""


@pytest.mark.parametrize("variant, fragment", [
    ("OVERLAPPING_HOST_ALLOCATE",
     "which overlaps memory it handed out before and that is still in use"),
    ("MISALIGNED_HOST_ALLOCATE", "which is not 16-byte aligned"),
])
def test_host_and_unified_memory_a_plugin_should_not_hand_out_is_refused(run_hostile, variant,
                                                                         fragment):
    r = run_hostile(variant, HOST_ALLOCATE_CODE, DEVICE_COUNT=2)
    for key, call in (("host", "host_memory_allocate"), ("unified", "unified_memory_allocate"),
                      ("pinned_pool", "host_memory_allocate")):
        kind, message = r[key]
        assert kind == "InternalError", (key, r[key])
        assert f"SP_StreamExecutor.{call} returned" in message, (key, message)
        assert fragment in message and "the block was refused" in message, (key, message)
        assert "TEST_DEV plugin" in message and "device 1" in message, (key, message)
    assert r["live"] == [1, 2, 3, 4]
    assert r["after"] == [64, 0] and r["again"] == 256


# -- calls that never return -----------------------------------------------------------------
def test_a_compute_that_never_returns_is_ended_by_the_deadline(run_hostile):
    r = run_hostile("COMPUTE_HANGS", """
        pluggable.config.set_deadline(1)
        x = pluggable.tensor(np.arange(3, dtype=np.float32), device="TEST:0")
        with pluggable.device("TEST:0"):
            results["before"] = outcome(lambda: pluggable.raw_ops.Neg(x=x).numpy())
            arm(1)
            started = time.monotonic()
            results["hung"] = outcome(lambda: pluggable.raw_ops.Neg(x=x).numpy())
            results["seconds"] = time.monotonic() - started
            arm(0)
            results["later"] = outcome(lambda: pluggable.raw_ops.Neg(x=x).numpy())
    """)
    assert r["before"] == ["ok", [-0.0, -1.0, -2.0]]
    kind, message = r["hung"]
    assert kind == "DeadlineExceededError", r["hung"]
    assert "kernel 'HostileNeg' (op Neg) did not return from its compute within the deadline " \
           "of 1 s" in message and "marked stuck" in message
    assert 0.9 <= r["seconds"] < 5
    # The plugin is not called again: a clear error at once, not a second hang.
    assert r["later"][0] == "UnavailableError", r["later"]
    assert "kernel 'HostileNeg' (op Neg) did not return from its compute within the " \
           "deadline of 1 s" in r["later"][1]


# What a user does next with a plugin wedged in a kernel's compute: each call is refused at
# once, naming the plugin and the compute that got stuck, and the plugin (which counts the
# calls it gets once wedged) is never called, at exit neither.
STUCK_PLUGIN_CODE = """
    pluggable.config.set_deadline(1)
    x = pluggable.tensor(np.arange(3, dtype=np.float32), device="TEST:0")
    executor = pluggable.get_device("TEST:0").executor
    kept = executor.allocate(64)
    stream = executor.create_stream()
    arm(1)
    STUCK
    results["calls"] = {
        "op": outcome(lambda: pluggable.raw_ops.Neg(x=x)),
        "numpy": outcome(lambda: x.numpy()),
        "upload": outcome(lambda: pluggable.tensor([1.0, 2.0], device="TEST:0")),
        "allocate": outcome(lambda: executor.allocate(16)),
        "host_memory": outcome(lambda: executor.host_memory_allocate(16)),
        "synchronize": outcome(lambda: pluggable.get_device("TEST:0").synchronize()),
        "stream": outcome(executor.create_stream),
        "stream_sync": outcome(stream.synchronize),
        "event": outcome(executor.create_event),
        "memory_usage": outcome(executor.memory_usage),
        "other_device": outcome(lambda: pluggable.get_device("TEST:1")),
        "profiler": outcome(lambda: (pluggable.profiler.start(None),
                                     pluggable.profiler.stop(save=False)) and None),
    }
    kept.close()
    stream.close()
    del x
    results["calls_after"] = PLUGIN.hostile_calls_after_wedged()
"""


@pytest.mark.parametrize("variant, stuck, reason", [
    ("COMPUTE_HANGS", """with pluggable.device("TEST:0"): results["stuck"] = outcome(
        lambda: pluggable.raw_ops.Neg(x=x).numpy())""",
     "kernel 'HostileNeg' (op Neg) did not return from its compute within the deadline of 1 s"),
    ("DESTROY_STREAM_HANGS", 'results["stuck"] = outcome(executor.create_stream().close)',
     "SP_StreamExecutor.destroy_stream of device 0 did not return within the deadline "
          "of 1 s"),
])
def test_a_plugin_wedged_in_a_call_is_never_called_again(run_hostile, variant, stuck, reason):
    r = run_hostile(variant, STUCK_PLUGIN_CODE.replace("STUCK", stuck), DEVICE_COUNT=2)
    assert r["stuck"][0] == "DeadlineExceededError", r["stuck"]
    profiler = r["calls"].pop("profiler")
    for call, (kind, message) in r["calls"].items():
        assert kind == "UnavailableError", (call, kind, message)
        assert "TEST_DEV plugin" in message and reason in message, (call, message)
        assert "Restart the process to use the plugin again" in message or \
            "restart the process" in message, (call, message)
    # The refused call is named too.
    assert "StreamExecutor.create_stream is refused" in r["calls"]["stream"][1]
    assert "StreamExecutor.allocate is refused" in r["calls"]["allocate"][1]
    # The device profiler of another plugin is not in the way; the session goes on.
    assert profiler == ["ok", None]
    assert r["calls_after"] == 0
    assert "HOSTILE_CALLS_AFTER_WEDGED 0" in r["stderr"], r["stderr"][-2000:]


def interrupted_child(build_test_plugin, variant: str, code: str,
                      deadline: str = "600") -> list:
    """Runs ``code`` in a child with the hostile plugin ``variant``, sends it Ctrl-C (SIGINT)
    half a second after it printed HANGING, and returns the lines it printed after that; the
    child must end by itself, with status 0, within 30 s."""
    import signal
    import subprocess
    import sys
    import time

    path = build_test_plugin(HOSTILE_SOURCE, **{f"HOSTILE_{variant}": True})
    env = dict(os.environ, PLUGGABLE_PLUGIN_PATH=path, PLUGGABLE_PROBE="0",
               PLUGGABLE_DEADLINE=deadline)
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout.readline().strip() == "HANGING"
        time.sleep(0.5)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, err
    return out.splitlines()


# A compute that never returns, after the Python code in {handlers} ran: the kernel has run
# once before, so the watchdog and its SIGINT wrapper were in place before {handlers}.
CTRL_C = """
    import ctypes, os, signal, time
    import numpy as np
    import pluggable
    arm = ctypes.CDLL(os.environ["PLUGGABLE_PLUGIN_PATH"]).hostile_arm
    x = pluggable.tensor(np.arange(3, dtype=np.float32), device="TEST:0")
    with pluggable.device("TEST:0"):
        pluggable.raw_ops.Neg(x=x).numpy()
        {handlers}
        arm(1)
        print("HANGING", flush=True)
        started = time.monotonic()
        try:
            pluggable.raw_ops.Neg(x=x)
        except KeyboardInterrupt:
            print("INTERRUPTED", round(time.monotonic() - started, 1), flush=True)
        except pluggable.errors.PluggableError as e:
            print(type(e).__name__, round(time.monotonic() - started, 1), flush=True)
            print("MESSAGE", e, flush=True)
    print("XPU", pluggable.raw_ops.Neg(x=pluggable.tensor([1.0], device="XPU:0")).numpy())
"""


def test_ctrl_c_interrupts_a_compute_that_never_returns(build_test_plugin):
    lines = interrupted_child(build_test_plugin, "COMPUTE_HANGS", CTRL_C.format(handlers=""))
    assert lines[0].startswith("INTERRUPTED") and float(lines[0].split()[1]) < 10
    assert lines[1] == "XPU [-1.]"


def test_ctrl_c_interrupts_a_compute_after_the_user_installs_a_sigint_handler(
        build_test_plugin):
    # Python installs its own C handler over the watchdog's wrapper; Ctrl-C still ends the
    # stuck call, the user's handler runs as Python runs it, and the op raises the
    # interruption (the handler raised nothing).
    lines = interrupted_child(build_test_plugin, "COMPUTE_HANGS", CTRL_C.format(
        handlers="signal.signal(signal.SIGINT, lambda *_: print('HANDLER', flush=True))"))
    assert lines[0] == "HANDLER", lines
    kind, seconds = lines[1].split()
    assert kind == "CancelledError" and float(seconds) < 10, lines
    assert "kernel 'HostileNeg' (op Neg) was interrupted (Ctrl-C) inside its compute" in lines[2]
    assert lines[3] == "XPU [-1.]"


def test_ctrl_c_interrupts_a_compute_after_sigint_is_ignored_then_handled_again(
        build_test_plugin):
    lines = interrupted_child(build_test_plugin, "COMPUTE_HANGS", CTRL_C.format(
        handlers="signal.signal(signal.SIGINT, signal.SIG_IGN); "
                 "signal.signal(signal.SIGINT, signal.default_int_handler)"))
    assert lines[0].startswith("INTERRUPTED") and float(lines[0].split()[1]) < 10, lines
    assert lines[1] == "XPU [-1.]"


def test_ctrl_c_is_ignored_when_the_user_ignores_sigint(build_test_plugin):
    # SIG_IGN is respected: the Ctrl-C sent after half a second changes nothing, and the
    # deadline (2 s) is what ends the call.
    lines = interrupted_child(build_test_plugin, "COMPUTE_HANGS", CTRL_C.format(
        handlers="signal.signal(signal.SIGINT, signal.SIG_IGN)"), deadline="2")
    kind, seconds = lines[0].split()
    assert kind == "DeadlineExceededError" and 1.9 <= float(seconds) < 10, lines
    assert "did not return from its compute within the deadline of 2 s" in lines[1]
    assert lines[2] == "XPU [-1.]"


def test_a_destroy_stream_that_never_returns_marks_the_device_stuck(run_hostile):
    r = run_hostile("DESTROY_STREAM_HANGS", """
        pluggable.config.set_deadline(1)
        executor = pluggable.get_device("TEST:0").executor
        stream = executor.create_stream()
        arm(1)
        started = time.monotonic()
        results["close"] = outcome(stream.close)
        results["seconds"] = time.monotonic() - started
        results["again"] = outcome(executor.create_stream)
    """)
    kind, message = r["close"]
    assert kind == "DeadlineExceededError", r["close"]
    assert "destroy_stream did not finish within the deadline of 1 s" in message
    assert "marked stuck" in message and "TEST_DEV plugin" in message
    assert 0.9 <= r["seconds"] < 5
    assert r["again"][0] == "UnavailableError", r["again"]
    assert "destroy_stream of device 0 did not return within the deadline" in r["again"][1]


def test_a_profiler_start_that_never_returns_is_left_out_of_the_session(run_hostile):
    r = run_hostile("PROFILER_START_HANGS", """
        pluggable.config.set_deadline(1)
        pluggable.get_device("TEST:0")
        arm(1)
        started = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pluggable.profiler.start(None)
            y = pluggable.ops.add(pluggable.tensor([1.0], device="XPU:0"), 2.0).numpy()
            result = pluggable.profiler.stop(save=False)
        results["seconds"] = time.monotonic() - started
        results["warnings"] = [str(w.message) for w in caught]
        results["value"] = y.tolist()
        results["planes"] = list(result.devices.values())  # the device each plane records
        # Never called again: the next session leaves it out at once.
        started = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pluggable.profiler.start(None)
            pluggable.profiler.stop(save=False)
        results["second"] = time.monotonic() - started
        # The profiler's call holds the plugin: its devices are not called either.
        results["device"] = outcome(lambda: pluggable.tensor([1.0], device="TEST:0"))
        results["calls_after"] = PLUGIN.hostile_calls_after_wedged()
    """)
    assert 0.9 <= r["seconds"] < 5 and r["second"] < 0.9
    assert any("TP_ProfilerFns.start did not return within the deadline of 1 s" in w
               and "marked stuck" in w for w in r["warnings"]), r["warnings"]
    assert r["value"] == [3.0]
    assert any("XPU" in name for name in r["planes"]), r["planes"]
    assert r["device"][0] == "UnavailableError", r["device"]
    assert "TP_ProfilerFns.start did not return within the deadline of 1 s" in r["device"][1]
    assert r["calls_after"] == 0 and "HOSTILE_CALLS_AFTER_WEDGED 0" in r["stderr"]


# -- a kernel that writes past its output ------------------------------------------------------
def test_a_kernel_writing_past_its_output_is_caught_in_the_sync_every_op_mode(run_hostile):
    r = run_hostile("WRITES_PAST_OUTPUT", """
        x = pluggable.tensor(np.arange(3, dtype=np.float32), device="TEST:0")
        with pluggable.device("TEST:0"):
            results["unchecked"] = outcome(lambda: pluggable.raw_ops.Neg(x=x).numpy())
            pluggable.config.set_sync_every_op(True)
            results["checked"] = outcome(lambda: pluggable.raw_ops.Neg(x=x))
            pluggable.config.set_sync_every_op(False)
        pluggable.config.set_sync_every_op(True)  # an honest plugin passes the check
        results["xpu_synced"] = outcome(
            lambda: pluggable.raw_ops.Neg(x=pluggable.tensor([1.0, 2.0], device="XPU:0")).numpy())
        pluggable.config.set_sync_every_op(False)
    """)
    # Without the mode nothing checks (the write lands in memory the host owns).
    assert r["unchecked"] == ["ok", [-0.0, -1.0, -2.0]]
    kind, message = r["checked"]
    assert kind == "InternalError", r["checked"]
    assert message.startswith("Neg on /device:TEST:0: kernel 'HostileNeg' (op Neg) wrote past "
                              "the end of its output 0 (12 bytes)")
    assert "guard bytes" in message
    assert r["xpu_synced"] == ["ok", [-1.0, -2.0]]


@pytest.mark.parametrize("variant, buffer", [
    ("WRITES_PAST_TEMP", "temporary 0 (TF_AllocateTemp) (12 bytes)"),
    ("WRITES_PAST_FORWARDED", "output 0 (12 bytes)"),
    ("WRITES_PAST_SET_OUTPUT", "temporary 0 (TF_AllocateTemp) (12 bytes)"),
])
def test_a_kernel_writing_past_a_temporary_or_forwarded_output_is_caught(run_hostile, variant,
                                                                         buffer):
    r = run_hostile(variant, """
        x = pluggable.tensor(np.arange(3, dtype=np.float32), device="TEST:0")
        with pluggable.device("TEST:0"):
            results["unchecked"] = outcome(lambda: pluggable.raw_ops.Neg(x=x).numpy())
            pluggable.config.set_sync_every_op(True)
            results["checked"] = outcome(lambda: pluggable.raw_ops.Neg(x=x))
            pluggable.config.set_sync_every_op(False)
            results["after"] = outcome(lambda: pluggable.raw_ops.Neg(x=x).numpy())
    """)
    assert r["unchecked"] == ["ok", [-0.0, -1.0, -2.0]]
    kind, message = r["checked"]
    assert kind == "InternalError", r["checked"]
    assert message.startswith(f"Neg on /device:TEST:0: kernel 'HostileNeg' (op Neg) wrote past "
                              f"the end of its {buffer}: at least 16 of the 64 guard bytes "
                              f"after it were changed"), message
    assert r["after"] == ["ok", [-0.0, -1.0, -2.0]]


# -- a host callback invoked late --------------------------------------------------------------
def test_synchronize_waits_for_a_host_callback_the_plugin_invokes_late(run_hostile):
    r = run_hostile("LATE_CALLBACK", """
        device = pluggable.get_device("TEST:0")
        executor = device.executor
        ran = []
        with executor.create_stream() as stream:
            stream.host_callback(lambda: ran.append("stream"))
            stream.synchronize()
            results["after_stream_sync"] = list(ran)
        device.compute_stream.host_callback(lambda: ran.append("device"))
        device.synchronize()
        results["after_device_sync"] = list(ran)
    """)
    assert r["after_stream_sync"] == ["stream"]
    assert r["after_device_sync"] == ["stream", "device"]


# -- a TF_Status* kept and written after its call returned ------------------------------------
@pytest.mark.parametrize("later", [1, 17, 500])
def test_a_status_written_after_its_call_is_refused_not_blamed_on_a_later_call(run_hostile,
                                                                                later):
    """However many plugin calls later the kept status is written (the host reuses its
    statuses from call to call), the write is refused, not blamed on the call in progress."""
    r = run_hostile("LATE_STATUS_WRITE", """
        executor = pluggable.get_device("TEST:0").executor
        stream = executor.create_stream()
        arm(1)
        event = executor.create_event()   # the plugin keeps this call's status
        arm(0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # The LATER-th record writes the kept status; every other plugin call between
            # (a wait polls the event) takes a status from the same pool.
            results["record"] = [outcome(lambda: event.record(stream)) for _ in range(LATER)]
            results["sync"] = outcome(stream.synchronize)
        results["warnings"] = [str(w.message) for w in caught]
        event.close()
        stream.close()
    """.replace("LATER", str(later)), LATE_STATUS_CALLS=later)
    assert r["record"] == [["ok", None]] * later and r["sync"] == ["ok", None]
    assert any("wrote a TF_Status 1 time(s) after the call it was given to had returned" in w
               and "hostile: a late error for create_event" in w and "refused" in w
               for w in r["warnings"]), r["warnings"]


@pytest.mark.parametrize("variant, fragment", [
    ("OVERLAPPING_ALLOCATE", "which overlaps memory it handed out before"),
    ("SHORT_ALLOCATE", "was asked for 64 bytes and reported a block of 32 bytes"),
    ("MISALIGNED_ALLOCATE", "which is not 16-byte aligned"),
])
def test_stream_executor_allocate_makes_the_same_checks(run_hostile, variant, fragment):
    r = run_hostile(variant, """
        executor = pluggable.get_device("TEST:0").executor
        first = executor.allocate(64)
        arm(1)
        results["second"] = outcome(lambda: executor.allocate(64) and None)
        arm(0)
        first.close()
        third = executor.allocate(64)   # a block given back may be handed out again
        results["third"] = third.size
        third.close()
    """, NO_BFC_ALLOCATOR=True)
    assert r["second"][0] == "InternalError" and fragment in r["second"][1]
    assert "TEST_DEV plugin" in r["second"][1] and "device 0" in r["second"][1]
    assert r["third"] == 64


CTRL_C_DESTROY = """
    import ctypes, os, time
    import pluggable
    arm = ctypes.CDLL(os.environ["PLUGGABLE_PLUGIN_PATH"]).hostile_arm
    executor = pluggable.get_device("TEST:0").executor
    stream = executor.create_stream()
    arm(1)
    print("HANGING", flush=True)
    started = time.monotonic()
    try:
        stream.close()
    except KeyboardInterrupt:
        print("INTERRUPTED", round(time.monotonic() - started, 1), flush=True)
    try:
        executor.create_stream()
    except pluggable.errors.UnavailableError as e:
        print("STUCK", "interrupted" in str(e), flush=True)
    print("XPU", pluggable.raw_ops.Neg(x=pluggable.tensor([1.0], device="XPU:0")).numpy())
"""


def test_ctrl_c_interrupts_a_destroy_stream_that_never_returns(build_test_plugin):
    lines = interrupted_child(build_test_plugin, "DESTROY_STREAM_HANGS", CTRL_C_DESTROY)
    assert lines[0].startswith("INTERRUPTED") and float(lines[0].split()[1]) < 10
    assert lines[1] == "STUCK True" and lines[2] == "XPU [-1.]"


CTRL_C_PROFILER = """
    import ctypes, os, time, warnings
    import pluggable
    arm = ctypes.CDLL(os.environ["PLUGGABLE_PLUGIN_PATH"]).hostile_arm
    pluggable.get_device("TEST:0")
    arm(1)
    print("HANGING", flush=True)
    started = time.monotonic()
    try:
        pluggable.profiler.start(None)
    except KeyboardInterrupt:
        print("INTERRUPTED", round(time.monotonic() - started, 1), flush=True)
    with warnings.catch_warnings(record=True) as caught:  # left out of the next session
        warnings.simplefilter("always")
        pluggable.profiler.start(None)
        pluggable.profiler.stop(save=False)
    print("LEFT OUT", any("interrupted" in str(w.message) for w in caught), flush=True)
"""


def test_ctrl_c_interrupts_a_profiler_start_that_never_returns(build_test_plugin):
    lines = interrupted_child(build_test_plugin, "PROFILER_START_HANGS", CTRL_C_PROFILER)
    assert lines[0].startswith("INTERRUPTED") and float(lines[0].split()[1]) < 10
    assert lines[1] == "LEFT OUT True"
