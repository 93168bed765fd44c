"""The probe's cache and switches: a verdict per plugin build, paid once; PLUGGABLE_PROBE=0
turns probing off; the cache lives where PLUGGABLE_CACHE_DIR / XDG_CACHE_HOME say."""
from __future__ import annotations

import json
import os
import shutil
import textwrap

from pluggable.base import limits

from pluggable.plugin import probe

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTILE_SOURCE = os.path.join(HERE, "..", "plugins", "hostile_plugin.c")

REPORT = textwrap.dedent("""
    import json, warnings
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as caught:
        import pluggable
        records = pluggable.config.list_plugins()
    print(json.dumps({"records": {r.platform_name or r.path: [r.status, r.probe, r.step]
                                  for r in records},
                      "warnings": [str(w.message) for w in caught]}))
""")


def test_verdicts_are_cached_per_file_build(tmp_path, monkeypatch, build_test_plugin):
    monkeypatch.setenv(limits.CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    path = tmp_path / "libprobed.so"
    shutil.copy(build_test_plugin(), path)
    first = probe.verdict(str(path))
    assert first.ok and not first.cached and first.steps[0] == "dlopen"
    second = probe.verdict(str(path))
    assert second.ok and second.cached and second.report == first.report
    # Discovery reads the verdict alone (the entry's first line), not the report.
    light = probe.verdict(str(path), report=False)
    assert light.cached and (light.ok, light.step, light.steps) == (True, first.step,
                                                                     first.steps)
    assert light.report == {} and first.report["platform"]
    stored = os.listdir(tmp_path / "cache" / "probe")
    assert len(stored) == 1 and stored[0].endswith(".json")
    # A new build (another size and mtime) is probed again.
    shutil.copy(build_test_plugin(HOSTILE_SOURCE, HOSTILE_ABORT_IN_INIT=True), path)
    third = probe.verdict(str(path))
    assert not third.ok and not third.cached and third.signal == "SIGABRT"
    fourth = probe.verdict(str(path))
    assert fourth.cached and fourth.signal == "SIGABRT" and fourth.step == "init"


def test_a_corrupt_cache_entry_is_probed_again(tmp_path, monkeypatch, build_test_plugin):
    monkeypatch.setenv(limits.CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    path = build_test_plugin()
    probe.verdict(path)
    (entry,) = (tmp_path / "cache" / "probe").iterdir()
    entry.write_text("{not json")
    again = probe.verdict(path)
    assert again.ok and not again.cached
    assert json.loads(entry.read_text())["result"]["ok"] is True


def test_the_default_cache_follows_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.delenv(limits.CACHE_DIR_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert limits.cache_directory() == str(tmp_path / "pluggable")


def test_discovery_probes_once_and_can_be_turned_off(run_python, tmp_path, build_test_plugin):
    directory = tmp_path / "plugins"
    directory.mkdir()
    shutil.copy(build_test_plugin(PLATFORM_NAME="PROBED_DEV", DEVICE_TYPE="PROBED"),
                directory / "libprobed.so")
    env = {"PLUGGABLE_PLUGIN_PATH": str(directory), "PLUGGABLE_CACHE_DIR": str(tmp_path / "c"),
           "PLUGGABLE_PROBE": None}
    cold = json.loads(run_python(REPORT, env=env).stdout)
    assert cold["records"]["PROBED_DEV"] == ["loaded", "passed", ""]
    assert cold["records"]["REF_XPU"][1] == "passed"
    warm = json.loads(run_python(REPORT, env=env).stdout)
    assert warm["records"]["PROBED_DEV"] == ["loaded", "passed (cached)", ""]
    off = json.loads(run_python(REPORT, env={**env, "PLUGGABLE_PROBE": "0"}).stdout)
    assert off["records"]["PROBED_DEV"] == ["loaded", None, ""]
    assert cold["warnings"] == warm["warnings"] == off["warnings"] == []


def test_the_child_cannot_tell_it_is_a_probe(tmp_path, monkeypatch, build_test_plugin):
    # The plugin copies what it could look at (its command line, environment and open
    # files) in SE_InitPlugin; none of it may differ from a user's process for the probe.
    path = build_test_plugin(HOSTILE_SOURCE, HOSTILE_DUMP_PROCESS=True, PLATFORM_NAME="DUMP",
                             DEVICE_TYPE="DUMP")
    dump = tmp_path / "dump"
    dump.mkdir()
    monkeypatch.setenv("HOSTILE_DUMP_DIR", str(dump))
    result = probe.run(path)
    assert result.ok, result.reason
    (cmdline,) = dump.glob("*.cmdline")
    argv = cmdline.read_bytes().split(b"\0")[:-1]
    assert argv[1:] == [b"-c", probe.CHILD_COMMAND.encode()]
    for word in (b"probe", b"pluggable", path.encode()):
        assert word not in cmdline.read_bytes()
    (environ,) = dump.glob("*.environ")
    child_env = dict(entry.split(b"=", 1) for entry in environ.read_bytes().split(b"\0")
                     if b"=" in entry)
    # The process's own environment, inherited as any child's (the C library's may hold a
    # few variables os.environ does not, such as COLUMNS set by a terminal library).
    mine = {k.encode(): v.encode() for k, v in os.environ.items()}
    assert {k: child_env.get(k) for k in mine} == mine
    assert not [k for k in child_env if k not in mine and (b"PROBE" in k or b"PLUGGABLE" in k)]
    (fds,) = dump.glob("*.fds")
    assert "probe" not in fds.read_text().replace(str(tmp_path), "")


def test_the_probe_exercises_what_a_user_does_next():
    xpu = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(probe.__file__))),
                       os.pardir, "tensorflow-plugins", "libxpu_plugin.so")
    result = probe.run(os.path.realpath(xpu))
    assert result.ok, result.reason
    after = result.steps[result.steps.index("kernels") + 1:]
    assert after[:5] == ["stream", "event", "memory", "copies", "event record"]
    exercised = result.report["exercised"]
    ran = exercised["kernels_run"]
    assert "XPU:MatMul:float" in ran and "XPU:Neg:float" in ran
    assert [s for s in after if s.startswith("kernel ")] == [f"kernel {k}" for k in ran]
    # Kernels without inputs to generate are named with the reason, not silently passed.
    assert exercised["kernels_skipped"]["XPU:Add:float"] == "pluggable has no usable op 'Add'"
    assert after[-4:] == ["profiler", "profiler start", "profiler stop", "shutdown"]


def test_a_kernel_error_status_is_reported_by_doctor_without_refusing_the_plugin(
        build_test_plugin):
    # An error status is the kernel's answer to inputs it does not take; a crash is not.
    path = build_test_plugin(HOSTILE_SOURCE, HOSTILE_ESCAPE_KERNEL_MESSAGE=True,
                             PLATFORM_NAME="FAILING_KERNEL", DEVICE_TYPE="FAILKERNEL")
    result = probe.run(path)
    assert result.ok and result.step == "shutdown", result.reason
    failed = result.report["exercised"]["kernels_failed"]
    assert list(failed) == ["HostileNeg"]
    assert "kernel HostileNeg for Neg failed: \\x1b[2J\\x1b]0;pwned\\x07" in failed["HostileNeg"]
    report = probe.doctor(path)
    assert not report.ok and report.step == "kernel HostileNeg"
    assert report.reason.startswith("1 kernel(s) failed on generated inputs; the first: ")
    text = probe.format_report(report)
    assert "failed   kernel HostileNeg: " in text and "\x1b" not in text


def test_slow_steps_cannot_add_up_to_a_hang(build_test_plugin):
    # 40 kernels of 0.6 s each: every step keeps its limit (1.5 s), together they do not.
    path = build_test_plugin(HOSTILE_SOURCE, HOSTILE_SLOW_KERNELS=True, PLATFORM_NAME="SLOW",
                             DEVICE_TYPE="SLOW")
    result = probe.run(path, timeout=1.5)
    assert not result.ok and result.timed_out
    assert result.step.startswith("kernel HostileNeg")
    total = limits.PROBE_TOTAL_STEPS * 1.5
    assert result.reason.startswith(f"the probe child did not finish within {total:g} s in all")
    assert total <= result.seconds < total + 10


def test_a_profiler_error_status_leaves_the_plugin_loadable(build_test_plugin):
    # A profiler that refuses to start is left out of sessions with a warning; the devices
    # still work, so the probe passes and doctor says why the profiler is out.
    source = os.path.join(HERE, "..", "plugins", "profiler_plugin.c")
    path = build_test_plugin(source, WITH_DEVICE=True, START_ERROR=True)
    result = probe.run(path)
    assert result.ok, result.reason
    assert "profiler start" in result.steps
    assert "TP_ProfilerFns.start failed: the test profiler refuses to start" in \
        result.report["profiler_error"]
    assert "profiler TF_InitProfiler exported; left out of sessions: " in \
        probe.format_report(result)
