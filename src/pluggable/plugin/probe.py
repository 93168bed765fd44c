"""The child-process probe: a plugin is loaded, validated and enumerated in a child process
first, so that a crash, an ``abort()``, an ``exit()`` or a hang costs a report, never the
caller's process.

The child (`pluggable.loader.probe_child`) runs the same loading code as the host
(`PluginLibrary`, `Platform`, `load_kernels`), then what a user does next (a stream, an event,
memory, copies both ways, each kernel once, the profiler started and stopped), and appends one
JSON line to a report file before each step, so that when it dies the parent knows the last
step reached. It runs in its own process group; a step that lasts longer than the time limit
(`limits.probe_timeout`, 10 s by default) gets the whole group killed. A negative return code
names the signal.

A plugin must not be able to tell the probe from the user's process: the child runs as
``python -c "import sys; exec(sys.stdin.read())"`` with the user's environment unchanged, and
reads its program from standard input; its report file has a plain temporary name. What it
could still notice: its parent is the user's process, it leads a session of its own, its
standard input is an emptied pipe and its output goes to a temporary file.

Discovery asks for `verdict` before the first in-process load of each discovered plugin;
verdicts are cached per file (real path, inode, size, mtime) in the user's cache directory
(`limits.cache_directory`), so the child is paid once per plugin build. ``PLUGGABLE_PROBE=0``
turns probing off. ``load_plugin(path, isolate=True)`` and ``python -m pluggable doctor``
use the same probe; the child's `inspect` gathers what ``doctor`` prints.
"""
from __future__ import annotations

import os
import sys

from ..base import limits
from . import cache_files
from ..base.record import record

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

# Bumped when what the child checks changes: older cached verdicts are then ignored.
PROTOCOL = 3
_OUTPUT_TAIL = 600
_STEPS = ("dlopen", "symbol lookup", "init", "validation", "device count", "device creation",
          "kernels", "stream", "event", "memory", "copies", "event record", "kernel NAME",
          "profiler", "profiler start", "profiler stop", "shutdown")


@record
class ProbeResult:
    """What the probe found. ``ok`` is False when any step failed; ``step`` is the last step
    reached (the failing one), ``reason`` says why, ``signal`` names the signal that killed
    the child, ``timed_out`` is True when the time limit ended it. ``report`` holds
    everything the child gathered (see `inspect`)."""

    path: str
    ok: bool
    step: str = ""
    reason: str = ""
    signal: Optional[str] = None
    timed_out: bool = False
    seconds: float = 0.0
    steps: List[str] = []  # (a record copies a list or dict default per instance)
    report: Dict[str, Any] = {}
    output: str = ""
    cached: bool = False

    def as_dict(self) -> Dict[str, Any]:
        import copy

        return {f: copy.deepcopy(getattr(self, f)) for f in self._fields}


# -- the parent's side ------------------------------------------------------------------------
def _package_parent() -> str:
    # src/ or site-packages: two floors above this file's package
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# The child's command line: nothing in it, in its environment or in the names of the files
# it holds open says "probe", so that a plugin cannot behave only while it is watched. The
# program comes on standard input.
CHILD_COMMAND = "import sys; exec(sys.stdin.read())"
_CHILD_PROGRAM = """import sys
sys.path.insert(0, {parent!r})
from pluggable.loader.probe_child import child_main
sys.exit(child_main([{path!r}, {report!r}]))
"""


def run(path: str, timeout: Optional[float] = None) -> ProbeResult:
    """Probes ``path`` in a child process now (no cache). Each step has ``timeout`` seconds
    (`limits.probe_timeout` by default), the whole probe `limits.PROBE_TOTAL_STEPS` times
    as long: a child that stays longer in one step, or in all, is killed."""
    import subprocess  # here, not at the top: a warm start never spawns anything
    import tempfile
    import time

    path = os.path.realpath(path)
    timeout = limits.probe_timeout() if timeout is None else float(timeout)
    fd, report_path = tempfile.mkstemp()
    os.close(fd)
    output_file = tempfile.TemporaryFile()
    program = _CHILD_PROGRAM.format(parent=_package_parent(), path=path, report=report_path)
    started = time.monotonic()
    timed_out = ""  # or which limit ended the child: "step", "in all"
    try:
        # The user's own environment, unchanged; the child loads no plugin but this one.
        child = subprocess.Popen([sys.executable, "-c", CHILD_COMMAND], stdin=subprocess.PIPE,
                                 stdout=output_file, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        try:
            child.stdin.write(program.encode("utf-8"))
            child.stdin.close()
        except OSError:
            pass  # it died before reading: its return code says how
        seen, deadline = 0, time.monotonic() + timeout
        # Many slow steps must not add up to a hang either.
        last_call = time.monotonic() + limits.PROBE_TOTAL_STEPS * timeout
        while True:
            try:
                child.wait(timeout=0.02)
                break
            except subprocess.TimeoutExpired:
                pass
            steps = _count_steps(report_path)
            now = time.monotonic()
            if steps != seen:  # a new step: its own time limit
                seen, deadline = steps, now + timeout
            if now > deadline or now > last_call:
                timed_out = "in all" if now > last_call else "step"
                _kill_group(child.pid)
                child.wait()
                break
        returncode = child.returncode
        with open(report_path, "rb") as f:
            lines = f.read().splitlines()
        output_file.seek(0)
        output = output_file.read()
    finally:
        output_file.close()
        try:
            os.unlink(report_path)
        except OSError:
            pass
    result = _interpret(path, lines, returncode, timed_out, timeout,
                        output.decode("utf-8", "replace"))
    result.seconds = round(time.monotonic() - started, 3)
    return result


def _count_steps(report_path: str) -> int:
    """How far the child's report has grown: a new step makes it longer."""
    try:
        return os.stat(report_path).st_size
    except OSError:
        return 0


def _kill_group(pid: int) -> None:
    import signal

    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def signal_name(number: int) -> str:
    """``SIGSEGV`` for 11: the name of the signal that ended a child."""
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _interpret(path: str, lines: List[bytes], returncode: int, timed_out: str,
               timeout: float, output: str) -> ProbeResult:
    import json

    steps: List[str] = []
    report: Dict[str, Any] = {}
    error: Optional[Dict[str, str]] = None
    done = False
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut short by the child's death
        if "step" in entry:
            steps.append(entry["step"])
        if "report" in entry:
            report = entry["report"]
        if "error" in entry:
            error = entry["error"]
        if entry.get("done"):
            done = True
    tail = limits.safe_text(output[-_OUTPUT_TAIL:].strip(), _OUTPUT_TAIL)
    last = steps[-1] if steps else "start"
    result = ProbeResult(path, False, last, steps=steps, report=report, output=tail)
    said = f"; its last output: {tail}" if tail else ""
    if timed_out == "in all":
        result.timed_out = True
        result.reason = (f"the probe child did not finish within "
                         f"{limits.PROBE_TOTAL_STEPS * timeout:g} s in all ({limits.PROBE_TOTAL_STEPS} "
                         f"times the time limit of a step) and was killed in step {last!r}; "
                         f"its steps are too slow together. Raise the limit with "
                         f"{limits.PROBE_TIMEOUT_VARIABLE} if the plugin is just slow")
    elif timed_out:
        result.timed_out = True
        result.reason = (f"the probe child did not finish within {timeout:g} s of starting step "
                         f"{last!r} and was killed; a plugin must not block in this step. Raise "
                         f"the limit with {limits.PROBE_TIMEOUT_VARIABLE} if it is just slow")
    elif returncode < 0:
        result.signal = signal_name(-returncode)
        result.reason = (f"the plugin crashed the probe child with {result.signal} during step "
                         f"{last!r}{said}")
    elif error is not None:
        result.step, result.reason = error["step"], error["reason"]
    elif not done:
        result.reason = (f"the probe child exited with status {returncode} during step {last!r} "
                         f"before finishing (the plugin called exit() or _exit()){said}")
    else:
        result.ok = True
    return result


def _cache_file(real_path: str) -> str:
    return os.path.join(limits.cache_directory(), "probe",
                        f"{cache_files.fnv_name(real_path)}.json")


def _file_identity(real_path: str) -> Dict[str, Any]:
    from ..base.version import __version__

    from . import dependencies

    info = os.stat(real_path)
    try:
        tree = dependencies.tree_of(real_path).identity()
    except (OSError, ValueError):
        tree = None
    # Everything that changes what the dynamic loader does with the file: the file, the
    # files its dependencies resolve to (and the ones missing), and the loader's variables.
    return {"path": real_path, "inode": info.st_ino, "device": info.st_dev,
            "size": info.st_size, "mtime_ns": info.st_mtime_ns, "host": __version__,
            "protocol": PROTOCOL, "python": sys.executable,
            "loader": dependencies.loader_environment(), "dependencies": tree}


def verdict(path: str, timeout: Optional[float] = None, report: bool = True) -> ProbeResult:
    """The probe's verdict on ``path``: from the cache when this very file (real path, inode,
    size, mtime) was probed before by this host version, else from a new probe, cached.

    With ``report=False`` a verdict from the cache comes with an empty ``report``: the
    report (the plugin's every kernel and callback) is most of a cache entry, and discovery
    needs only ``ok``, ``step`` and ``reason``."""
    real_path = os.path.realpath(path)
    identity = _file_identity(real_path)
    cache_file = _cache_file(real_path)
    try:
        stored = _load(cache_file, report)
        if stored.get("identity") == identity:
            result = ProbeResult(**stored["result"])
            result.cached = True
            return result
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass  # absent, stale or unreadable: probe again
    result = run(real_path, timeout)
    if result.steps:  # a child that reached no step tells nothing about the plugin
        _store(cache_file, identity, result)
    return result


# A cache entry is one JSON object on two lines: the identity and the verdict on the first,
# the report on the second. The first line alone, closed, is the verdict without the report.
def _load(cache_file: str, report: bool) -> Dict[str, Any]:
    with open(cache_file, encoding="utf-8") as f:
        if not report:
            head = f.readline()
            if head.endswith(",\n"):
                return cache_files.json_loads(head[:-2] + "}")
            f.seek(0)
        text = f.read()
    stored = cache_files.json_loads(text)
    stored["result"]["report"] = stored.pop("report")
    return stored


def _store(cache_file: str, identity: Dict[str, Any], result: ProbeResult) -> None:
    import json

    fields = result.as_dict()
    report = fields.pop("report")
    head = json.dumps({"identity": identity, "result": fields})  # one line: no indent
    cache_files.store(cache_file, f"{head[:-1]},\n\"report\": {json.dumps(report)}}}\n")


def doctor(path: str, timeout: Optional[float] = None) -> ProbeResult:
    """What ``python -m pluggable doctor`` reports on ``path``: the file check, then a fresh
    probe (never the cache). ``ok`` is False on any failure: a failed step, API symbols the
    runtime does not provide, kernels the host refused."""
    from . import dependencies
    from .library import PluginCallError, check_file

    try:
        real, _ = check_file(path)
    except PluginCallError as exc:
        return ProbeResult(os.path.abspath(path), False, exc.step, exc.reason)
    result = run(real, timeout)
    report = result.report
    missing = report.get("missing_symbols")
    if missing and result.step == "symbol lookup":
        result.reason += (f" (its tree uses C API functions the host runtime does not "
                          f"provide: {dependencies.describe_missing_symbols(missing)})")
    elif result.ok and missing:
        result.ok, result.step = False, "symbol lookup"
        result.reason = (f"the plugin's tree uses {len(missing)} C API function(s) the host "
                         f"runtime does not provide: "
                         f"{dependencies.describe_missing_symbols(missing)}")
    elif result.ok and (report.get("exercised") or {}).get("kernels_failed"):
        failed = report["exercised"]["kernels_failed"]
        name, message = next(iter(failed.items()))
        result.ok, result.step = False, f"kernel {name}"
        result.reason = (f"{len(failed)} kernel(s) failed on generated inputs; the first: "
                         f"{message}")
    elif result.ok and report.get("kernel_warnings"):
        result.ok, result.step = False, "kernels"
        refused = report.get("refused", [])
        kernels = sum(r.startswith("kernel ") for r in refused)
        result.reason = (f"{kernels} kernel registration(s) and {len(refused) - kernels} op(s) "
                         f"refused" if refused else "; ".join(report["kernel_warnings"]))
    return result


def _steps_shown(steps: List[str]) -> List[str]:
    """The steps, with a run of kernel steps as one ("250 kernels"; the last one named when
    it is where the probe stopped)."""
    shown: List[str] = []
    run: List[str] = []
    for name in steps + [""]:  # "": the end
        if name.startswith("kernel "):
            run.append(name)
            continue
        if run:
            shown.append(f"{len(run)} kernel run(s)" if name
                         else f"{len(run)} kernel run(s), stopped in {run[-1]!r}")
            run = []
        if name:
            shown.append(name)
    return shown


def format_report(result: ProbeResult) -> str:
    """``doctor``'s text: the verdict first, then every section of the report. Each line is
    passed through `limits.safe_text` (most of the report is the plugin's own text)."""
    return "\n".join(limits.safe_text(line, 4 * limits.MAX_MESSAGE_CHARS)
                     for line in _report_lines(result))


def _report_lines(result: ProbeResult) -> List[str]:
    r = result.report
    lines = [f"plugin   {result.path}",
             f"verdict  {'OK' if result.ok else 'FAILED'}"
             + ("" if result.ok else f" at step {result.step!r}: {result.reason}"),
             f"steps    {' > '.join(_steps_shown(result.steps)) or '(none)'}  "
             f"({result.seconds:g} s)"]
    if not r:
        return lines
    exports = r.get("exports", {})
    if exports:
        lines.append("exports  " + ", ".join(f"{k} {'yes' if v else 'no'}"
                                              for k, v in exports.items()))
    if "libraries" in r:
        missing = r.get("missing_libraries", [])
        lines.append(f"needs    {len(r['libraries'])} libraries (its whole tree); missing: "
                     + (", ".join(f"{name} (needed by {by})" for name, by in missing)
                        or "none"))
    if r.get("tensorflow"):
        lines.append(f"links    TensorFlow: {r['tensorflow']}")
    users = r.get("missing_symbols_users", {})
    lines.append("missing  " + (", ".join(
        f"{name} (used by {', '.join(users[name])})" if name in users else name
        for name in r.get("missing_symbols", [])) or
        "none (every TF_/TFE_/SE_/TP_ function its tree uses is provided)"))
    if "platform" in r:
        lines.append(f"platform {r['platform']} (device type {r['device_type']}), StreamExecutor "
                     f"C API {r['api_version']}, plugin {r.get('plugin_version') or '?'}, "
                     f"priority {r.get('priority')}, {r['device_count']} device(s)")
    for name, size in r.get("struct_sizes", {}).items():
        relation = ("same" if size["plugin"] == size["host"] else
                    "older plugin" if size["plugin"] < size["host"] else "newer plugin")
        lines.append(f"struct   {name:<18} plugin {size['plugin']:>4}  host {size['host']:>4}  "
                     f"{relation}")
    callbacks = r.get("callbacks", {})
    if not callbacks and "kernels" not in r:  # the probe stopped before the callbacks were read
        return lines
    missing_optional = [k for k, v in callbacks.items() if not v["present"] and not v["required"]]
    missing_required = [k for k, v in callbacks.items() if not v["present"] and v["required"]]
    if callbacks:  # a library without a device has none
        lines.append(f"callbacks {sum(v['present'] for v in callbacks.values())} of "
                     f"{len(callbacks)} set; required missing: "
                     f"{', '.join(missing_required) or 'none'}; optional missing: "
                     f"{', '.join(missing_optional) or 'none'}")
    for device in r.get("devices", []):
        details = ", ".join(f"{k}={v}" for k, v in device["details"].items())
        lines.append(f"device   {device['ordinal']}: {details}")
    kernels = r.get("kernels", [])
    by_op: Dict[str, List[str]] = {}
    for k in kernels:
        types = "; ".join(f"{a}={','.join(v)}" for a, v in k["types"].items())
        by_op.setdefault(k["op"], []).append(types or "any type")
    lines.append(f"kernels  {len(kernels)} registered for {len(by_op)} op(s)")
    for op in sorted(by_op):
        lines.append(f"         {op}: {' | '.join(by_op[op])}")
    # Every refusal (the load warning names only the first few), then any other warning.
    for refusal in r.get("refused", []):
        lines.append(f"refused  {refusal}")
    for warning in r.get("kernel_warnings", []):
        if not r.get("refused") or "TF_InitKernel:" not in warning:
            lines.append(f"warning  {warning}")
    exercised = r.get("exercised")
    if exercised is not None:
        skipped = exercised.get("kernels_skipped", {})
        lines.append(f"ran      a stream, an event, memory, copies both ways, an event record; "
                     f"{len(exercised.get('kernels_run', []))} kernel(s) once, "
                     f"{len(exercised.get('kernels_failed', {}))} failed, {len(skipped)} "
                     f"skipped")
        by_reason: Dict[str, List[str]] = {}
        for name, why in sorted(skipped.items()):
            by_reason.setdefault(why, []).append(name)
        for why, names in sorted(by_reason.items()):
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if names[3:] else "")
            lines.append(f"skipped  {len(names)} kernel(s), {why}: {shown}")
        for name, message in sorted(exercised.get("kernels_failed", {}).items()):
            lines.append(f"failed   kernel {name}: {message}")
    profiler = "TF_InitProfiler exported" if r.get("profiler") else "none"
    if r.get("profiler_error"):
        profiler += f"; left out of sessions: {r['profiler_error']}"
    elif r.get("profiler") and "profiler stop" in result.steps:
        profiler += ", started and stopped"
    lines.append(f"profiler {profiler}")
    return lines
