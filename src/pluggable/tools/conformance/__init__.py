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
    TestProfiler  the plugin's profiler, when it has one

Each tier runs in a child process of its own: a plugin that crashes or exits costs that
tier (reported failed, with the signal), never the caller's process, and the other tiers
still run. A check that fails names what the plugin did wrong; one defect fails the checks that use the
defective function and no others, so the first failing check is where to look.
"""
from __future__ import annotations

import json
import os
from typing import Dict, List, Optional

from ...base.limits import safe_text

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
    """Gathers each check's outcome for the JSON report, written to ``path`` after each
    check (when set), so that what ran before a crash is kept."""

    def __init__(self):
        self.results: Dict[str, Dict[str, str]] = {}
        self.path: Optional[str] = None

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            name = report.nodeid.split("::", 1)[-1]
            entry = self.results.setdefault(name, {"outcome": report.outcome, "message": ""})
            if report.outcome != "passed" or report.when == "call":
                entry["outcome"] = report.outcome
            if report.failed:
                entry["message"] = safe_text(str(report.longrepr.reprcrash.message
                                                 if hasattr(report.longrepr, "reprcrash")
                                                 else report.longrepr))
            elif report.skipped and isinstance(report.longrepr, tuple):
                entry["message"] = safe_text(str(report.longrepr[2]))
            if self.path:
                with open(self.path, "w") as f:
                    json.dump(self.results, f)


#: The tiers, in the order they run: the classes of `checks.py`.
TIERS = ("TestLoading", "TestDevices", "TestMemory", "TestCopies", "TestStreams",
         "TestCrossDevice", "TestKernels", "TestProfiler")
#: The exit status of a run in which a tier's child died (pytest's own statuses are 0 to 5).
TIER_DIED = 6
_TIER_PROGRAM = """import sys
sys.path.insert(0, {parent!r})
from pluggable.tools.conformance import run_tier
sys.exit(run_tier({path!r}, {tier!r}, {keyword!r}, {results!r}, {verbose!r}))
"""


def run(path: str, keyword: Optional[str] = None, json_path: Optional[str] = None,
        verbose: bool = True) -> int:
    """Runs the suite against the plugin at ``path``, each tier in a child process of its
    own, so that a plugin that crashes or exits takes down that tier's child, never this
    process: the tier is reported failed, naming the signal, and the other tiers still run.
    Returns 0 when every check passed or was skipped for a stated reason, else the first
    tier's nonzero pytest status (`TIER_DIED` for a tier whose child died). ``json_path``
    receives ``{"plugin": path, "exit_status": code, "results": {check: {"outcome",
    "message"}}}``."""
    import subprocess
    import sys
    import tempfile

    from ...plugin import probe

    if not os.path.isfile(path):
        raise SystemExit(f"pluggable conformance: no such file: {path!r}; name the plugin's "
                         f"shared library (a .so file)")
    verdict = not_a_plugin(path)
    if verdict is not None:  # nothing to check: doctor's verdict, and no test session
        print(f"pluggable conformance: {path} is not a plugin; {verdict}")
        return NOT_A_PLUGIN
    try:
        import pytest  # noqa: F401  (the children need it: say so here, once)
    except ImportError:
        raise SystemExit("the conformance suite needs pytest and hypothesis: "
                         "python -m pip install 'pluggable[test]'") from None
    parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    results: Dict[str, Dict[str, str]] = {}
    code = 0
    for tier in TIERS:
        fd, tier_results = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            program = _TIER_PROGRAM.format(parent=parent, path=os.path.abspath(path),
                                           tier=tier, keyword=keyword, results=tier_results,
                                           verbose=verbose)
            sys.stdout.flush()
            child = subprocess.run([sys.executable, "-c", program])
            try:
                with open(tier_results) as f:
                    results.update(json.load(f))
            except (OSError, ValueError):
                pass  # the child died before writing
        finally:
            os.unlink(tier_results)
        status = child.returncode
        if status < 0 or status > 5:  # a signal, or an exit() no pytest run makes
            how = (f"signal {probe.signal_name(-status)}" if status < 0
                   else f"exit status {status}")
            message = (f"the plugin ended the child process running tier {tier} with {how}; "
                       f"the tier's remaining checks did not run")
            results[f"{tier}::(tier)"] = {"outcome": "failed", "message": message}
            print(f"pluggable conformance: {tier} FAILED: {message}", flush=True)
            status = TIER_DIED
        if status == 5:  # no check of this tier was selected (-k)
            status = 0
        if status and not code:
            code = status
    if not results:  # -k selected nothing in any tier
        code = 5
    if json_path:
        report = {"plugin": os.path.abspath(path), "exit_status": code, "results": results}
        with open(json_path, "w") as f:
            json.dump(report, f, indent=2)
    return code


def run_tier(path: str, tier: str, keyword: Optional[str], results_path: str,
             verbose: bool = True) -> int:
    """One tier of the suite against ``path``, in this process (a child `run` started);
    writes ``{check: {"outcome", "message"}}`` to ``results_path``; returns pytest's
    status."""
    import pytest

    # The pytest plugin by module name, whether or not its entry point ("pluggable") is
    # installed: blocking the entry point keeps it from being registered twice.
    args: List[str] = [CHECKS, "--pluggable-plugin", path, "-p", "no:pluggable",
                       "-p", "pluggable.tools.conformance.pytest_plugin", "-p", "no:cacheprovider",
                       "-q" if not verbose else "-v", "-rfEs", "-W",
                       "error::pluggable.errors.PluggableWarning",
                       # pluggable is imported before pytest starts: nothing to rewrite there.
                       "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    args += ["-k", f"{tier} and ({keyword})" if keyword else tier]
    collector = _Collector()
    with open(results_path, "w") as f:  # rewritten after each check: a crash keeps the rest
        json.dump({}, f)
    collector.path = results_path
    # The suite's own settings, whatever configuration file the current directory has.
    return int(pytest.main(args + ["-c", os.devnull, "--rootdir", os.path.dirname(CHECKS)],
                           plugins=[collector]))
