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

The checks run in a child process: a plugin that crashes or exits costs the tier it was in
(reported failed, with the signal and the check), never the caller's process, and a new
child runs the tiers after it. A check that fails names what the plugin did wrong; one defect fails the checks that use the
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
    """Gathers each check's outcome for the JSON report; with ``state_path``, writes them and
    the check that is running there whenever a check starts or ends, so that what ran before
    a crash, and where it happened, are kept."""

    def __init__(self, state_path: Optional[str] = None):
        self.results: Dict[str, Dict[str, str]] = {}
        self.warnings: List[Dict[str, str]] = []
        self.state_path = state_path
        self.running: Optional[str] = None
        self._save()

    def _save(self) -> None:
        if self.state_path:
            with open(self.state_path, "w") as f:
                json.dump({"results": self.results, "warnings": self.warnings,
                           "running": self.running}, f)

    def pytest_runtest_logstart(self, nodeid, location):
        self.running = nodeid.split("::", 1)[-1]
        self._save()

    def pytest_warning_recorded(self, warning_message, when, nodeid, location):
        # A check that passes may still warn (ProfileViewWarning: TensorBoard would not show
        # the plugin's planes); the report keeps what it said.
        self.warnings.append({"check": nodeid.split("::", 1)[-1],
                              "category": warning_message.category.__name__,
                              "message": str(warning_message.message)})
        self._save()

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
        if report.when == "teardown":
            self.running = None
            self._save()


#: The tiers, in the order they run: the classes of `checks.py`.
TIERS = ("TestLoading", "TestDevices", "TestMemory", "TestCopies", "TestStreams",
         "TestCrossDevice", "TestRegistrations", "TestKernels", "TestGradientKernels",
         "TestProfiler")
#: The exit status of a run in which a tier's child died (pytest's own statuses are 0 to 5).
TIER_DIED = 6
_CHILD_PROGRAM = """import sys
sys.path.insert(0, {parent!r})
from pluggable.tools.conformance import run_tiers
sys.exit(run_tiers({path!r}, {tiers!r}, {keyword!r}, {results!r}, {verbose!r}))
"""


def run(path: str, keyword: Optional[str] = None, json_path: Optional[str] = None,
        verbose: bool = True, strict: bool = False) -> int:
    """Runs the suite against the plugin at ``path`` in a child process, so that a plugin that
    crashes or exits takes down the child, never this process: the tier it was in is reported
    failed, naming the signal, and a new child runs the tiers after it. Returns 0 when every
    check passed or was skipped for a stated reason (with ``strict``, a skipped check fails
    the run with status 1), `TIER_DIED` when a tier's child died, else pytest's status.
    Skipped checks are summed up, with their reasons, after the run. ``json_path`` receives ``{"plugin": path, "exit_status": code,
    "results": {check: {"outcome", "message"}}, "warnings": [{"check", "category",
    "message"}]}``."""
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
    warnings: List[Dict[str, str]] = []
    code = 0
    tiers = list(TIERS)
    while tiers:
        fd, state_path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            program = _CHILD_PROGRAM.format(parent=parent, path=os.path.abspath(path),
                                            tiers=tiers, keyword=keyword, results=state_path,
                                            verbose=verbose)
            sys.stdout.flush()
            status = subprocess.run([sys.executable, "-c", program]).returncode
            try:
                with open(state_path) as f:
                    state = json.load(f)
            except (OSError, ValueError):
                state = {}  # it died before writing
        finally:
            os.unlink(state_path)
        results.update(state.get("results", {}))
        warnings += state.get("warnings", [])
        if 0 <= status <= 5:  # pytest finished: every tier asked for ran
            code = code or (0 if status == 5 and results else status)
            break
        # A signal, or an exit() no pytest run makes: the tier of the check that was running.
        running = state.get("running") or f"{tiers[0]}::"
        tier = running.split("::", 1)[0]
        how = f"signal {probe.signal_name(-status)}" if status < 0 else f"exit status {status}"
        message = safe_text(f"the plugin ended the child process running tier {tier} with "
                            f"{how} (in {running}); the tier's remaining checks did not run")
        results[f"{tier}::(tier)"] = {"outcome": "failed", "message": message}
        print(f"pluggable conformance: {tier} FAILED: {message}", flush=True)
        code = TIER_DIED
        tiers = tiers[tiers.index(tier) + 1:] if tier in tiers else []
    skipped = {name: r["message"] for name, r in results.items() if r["outcome"] == "skipped"}
    if skipped:
        reasons: Dict[str, List[str]] = {}
        for name, message in skipped.items():
            reasons.setdefault(message or "(no reason given)", []).append(name)
        print(f"pluggable conformance: {len(skipped)} check(s) skipped"
              + (" (--strict: the run fails)" if strict else "") + ":")
        for message, names in sorted(reasons.items()):
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3
                                             else "")
            print(f"  {message}: {shown}")
        if strict and code == 0:
            code = 1
    if json_path:
        report = {"plugin": os.path.abspath(path), "exit_status": code, "results": results,
                  "warnings": warnings}
        with open(json_path, "w") as f:
            json.dump(report, f, indent=2)
    return code


def run_tiers(path: str, tiers: List[str], keyword: Optional[str], state_path: str,
              verbose: bool = True) -> int:
    """The ``tiers`` of the suite against ``path``, in this process (a child `run` started).
    Writes ``{"results": {check: {"outcome", "message"}}, "running": check}`` to
    ``state_path`` as checks start and end, so that the parent knows where a crash
    happened; returns pytest's status."""
    import pytest

    # The pytest plugin by module name, whether or not its entry point ("pluggable") is
    # installed: blocking the entry point keeps it from being registered twice.
    args: List[str] = [CHECKS, "--pluggable-plugin", path, "-p", "no:pluggable",
                       "-p", "pluggable.tools.conformance.pytest_plugin", "-p", "no:cacheprovider",
                       "-q" if not verbose else "-v", "-rfEs", "-W",
                       "error::pluggable.errors.PluggableWarning",
                       # pluggable is imported before pytest starts: nothing to rewrite there.
                       "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    selected = " or ".join(tiers)
    args += ["-k", f"({selected}) and ({keyword})" if keyword else selected]
    collector = _Collector(state_path)
    # The suite's own settings, whatever configuration file the current directory has.
    return int(pytest.main(args + ["-c", os.devnull, "--rootdir", os.path.dirname(CHECKS)],
                           plugins=[collector]))
