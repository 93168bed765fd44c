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
