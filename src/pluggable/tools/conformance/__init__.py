"""The conformance suite: tiered checks that any device plugin must pass.

The checks are pytest tests (`checks.py`) run against one plugin library, named by
`--pluggable-plugin PATH.so` (the pytest plugin in `pytest_plugin.py`, which pytest loads
through its `pytest11` entry point) or by `python -m pluggable conformance PATH.so`, which
calls `run()`. The tiers, in order, are the classes of `checks.py`:

    TestLoading   the library loads and validates, with no warning
    TestDevices   every device describes itself
    TestMemory    allocation, statistics, fills, out of memory
    TestCopies    every direction, sizes from 0 bytes to 64 MiB, offsets, data checked
    TestStreams   ordering on a stream and across streams, events, timers, host callbacks
    TestCrossDevice  with two or more devices: a stream or event of one device ordering
                  work on another's stream, and copies between devices, as TensorFlow's
                  cross-device copies (MirroredStrategy) use them
    TestKernels   every registered kernel against pluggable's NumPy reference
    TestGradientKernels  each gradient kernel (ReluGrad, BiasAddGrad, Conv2DBackpropInput
                  and Filter, MaxPoolGrad, the cross-entropy ops' backprop) against a
                  finite difference of its forward op
    TestProfiler  the plugin's profiler, when it has one

A check that fails names what the plugin did wrong; one defect fails the checks that use the
defective function and no others, so the first failing check is where to look.
"""
from __future__ import annotations

import json
import os
from typing import Dict, List, Optional

CHECKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checks.py")
#: The exit status for a file that is not a plugin (pytest's own statuses are 0 to 5).
NOT_A_PLUGIN = 2
#: The entry points of which a plugin exports at least one.
ENTRY_POINTS = ("SE_InitPlugin", "SE_InitializePlugin", "TF_InitKernel", "TF_InitProfiler",
                "TF_InitGraph")


def not_a_plugin(path: str) -> Optional[str]:
    """None for a file that could be a plugin; else `doctor`'s verdict line on it: a file
    the loader refuses before opening it, or a library that exports no entry point."""
    from ...plugin import elf, probe
    from ...plugin.library import PluginCallError, check_file

    try:
        real, _ = check_file(path)
        exported = elf.dynamic_info(real, ENTRY_POINTS).defined
    except PluginCallError:
        exported = ()
    except (OSError, ValueError):
        exported = ()
    if exported:
        return None
    result = probe.doctor(path)
    return "verdict " + ("OK" if result.ok else f"FAILED at step {result.step!r}: "
                                                f"{result.reason}")


class _Collector:
    """Gathers each check's outcome for the JSON report."""

    def __init__(self):
        self.results: Dict[str, Dict[str, str]] = {}

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            name = report.nodeid.split("::", 1)[-1]
            entry = self.results.setdefault(name, {"outcome": report.outcome, "message": ""})
            if report.outcome != "passed" or report.when == "call":
                entry["outcome"] = report.outcome
            if report.failed:
                entry["message"] = str(report.longrepr.reprcrash.message
                                       if hasattr(report.longrepr, "reprcrash")
                                       else report.longrepr)[:2000]
            elif report.skipped and isinstance(report.longrepr, tuple):
                entry["message"] = str(report.longrepr[2])


def run(path: str, keyword: Optional[str] = None, json_path: Optional[str] = None,
        verbose: bool = True) -> int:
    """Runs the suite against the plugin at ``path``; returns pytest's exit status (0: every
    check passed or was skipped for a stated reason). ``json_path`` receives
    ``{"plugin": path, "results": {check: {"outcome", "message"}}}``."""
    if not os.path.isfile(path):
        raise SystemExit(f"pluggable conformance: no such file: {path!r}; name the plugin's "
                         f"shared library (a .so file)")
    verdict = not_a_plugin(path)
    if verdict is not None:  # nothing to check: doctor's verdict, and no test session
        print(f"pluggable conformance: {path} is not a plugin; {verdict}")
        return NOT_A_PLUGIN
    try:
        import pytest
    except ImportError:
        raise SystemExit("the conformance suite needs pytest and hypothesis: "
                         "python -m pip install 'pluggable[test]'") from None
    # The pytest plugin by module name, whether or not its entry point ("pluggable") is
    # installed: blocking the entry point keeps it from being registered twice.
    args: List[str] = [CHECKS, "--pluggable-plugin", os.path.abspath(path), "-p", "no:pluggable",
                       "-p", "pluggable.tools.conformance.pytest_plugin", "-p", "no:cacheprovider",
                       "-q" if not verbose else "-v", "-rfEs", "-W",
                       "error::pluggable.errors.PluggableWarning",
                       # pluggable is imported before pytest starts: nothing to rewrite there.
                       "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    if keyword:
        args += ["-k", keyword]
    collector = _Collector()
    # The suite's own settings, whatever configuration file the current directory has.
    code = int(pytest.main(args + ["-c", os.devnull, "--rootdir", os.path.dirname(CHECKS)],
                           plugins=[collector]))
    if json_path:
        report = {"plugin": os.path.abspath(path), "exit_status": code,
                  "results": collector.results}
        with open(json_path, "w") as f:
            json.dump(report, f, indent=2)
    return code
