"""`python -m pluggable conformance` runs the checks in a child process: a plugin that
crashes in one tier fails that tier, naming the signal, the tier and the check, and a new
child runs the tiers after it; the command itself never dies."""
from __future__ import annotations

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTILE_SOURCE = os.path.join(HERE, "..", "plugins", "hostile_plugin.c")


def test_a_tier_that_crashes_is_reported_and_the_others_run(run_python, build_test_plugin,
                                                          tmp_path):
    path = build_test_plugin(HOSTILE_SOURCE, HOSTILE_SEGV_IN_COMPUTE=True,
                             PLATFORM_NAME="CRASHING_KERNEL", DEVICE_TYPE="CRASHKERNEL")
    report = tmp_path / "report.json"
    # Without the probe the plugin loads into each tier's child, and its kernel crashes there.
    result = run_python(None, args=("-m", "pluggable", "conformance", path, "-q", "--json",
                                    str(report)),
                        env={"PLUGGABLE_PROBE": "0", "PLUGGABLE_DISABLE_AUTOLOAD": "1"},
                        check=False)
    assert result.returncode == 6, result.stderr[-2000:]  # conformance.TIER_DIED
    data = json.loads(report.read_text())
    tier = data["results"]["TestKernels::(tier)"]
    assert tier["outcome"] == "failed"
    assert tier["message"] == (
        "the plugin ended the child process running tier TestKernels with signal SIGSEGV (in "
        "TestKernels::test_kernel_matches_reference[Neg-float32]); the tier's remaining "
        "checks did not run")
    assert "TestKernels FAILED: the plugin ended the child process" in result.stdout
    tiers = {name.split("::")[0] for name in data["results"]}
    assert {"TestLoading", "TestDevices", "TestCopies", "TestStreams", "TestProfiler"} <= tiers
    assert data["results"]["TestLoading::test_loads_and_validates"]["outcome"] == "passed"
    assert data["results"]["TestCopies::test_sync_round_trip[1]"]["outcome"] == "passed"
    # The tier after the crash ran in a new child.
    profiler = [r["outcome"] for n, r in data["results"].items() if n.startswith("TestProfiler")]
    assert profiler and "failed" not in profiler
