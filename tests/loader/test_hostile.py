"""The hostile-plugin corpus: every variant of tests/plugins/hostile_plugin.c and every unsafe
or foreign file, through discovery and through explicit loading (``isolate=True``), in one
fresh interpreter. Zero host deaths, zero hangs; every warning and error names the file, the
step and the reason."""
from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import sys
import textwrap
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTILE_SOURCE = os.path.join(HERE, "..", "plugins", "hostile_plugin.c")
# Long enough for a healthy probe (slower under the sanitizers: .ci/sanitize raises it),
# short enough that the hanging variants cost little.
IS_ROOT = os.geteuid() == 0
PROBE_TIMEOUT = os.environ.get("PLUGGABLE_TEST_PROBE_TIMEOUT", "2")

# variant: (step, fragment of the reason) -- the step is a prefix ("device creation 0").
CRASHES = {
    "SEGV_IN_INIT": ("init", "SIGSEGV"),
    "ABORT_IN_INIT": ("init", "SIGABRT"),
    "EXIT_IN_INIT": ("init", "exited with status 3"),
    "EXIT0_IN_INIT": ("init", "exited with status 0"),
    "KILL_IN_INIT": ("init", "SIGKILL"),
    "FPE_IN_INIT": ("init", "SIGFPE"),
    "BUS_IN_INIT": ("init", "SIGBUS"),
    "HANG_IN_INIT": ("init", f"did not finish within {PROBE_TIMEOUT} s"),
    "SEGV_IN_DEVICE_COUNT": ("device count", "SIGSEGV"),
    "ABORT_IN_CREATE_DEVICE": ("device creation 0", "SIGABRT"),
    "HANG_IN_CREATE_DEVICE": ("device creation 0", f"did not finish within {PROBE_TIMEOUT} s"),
    "EXIT_IN_CREATE_STREAM_EXECUTOR": ("device creation 0", "exited with status 4"),
    "ABORT_IN_INIT_KERNEL": ("kernels", "SIGABRT"),
    "HANG_IN_INIT_KERNEL": ("kernels", f"did not finish within {PROBE_TIMEOUT} s"),
    "SEGV_IN_DESTROY_PLATFORM": ("shutdown", "SIGSEGV"),
    "BLOCKING_HANGS": ("event record", f"did not finish within {PROBE_TIMEOUT} s"),
    # After loading, in what a user does next: the probe exercises each step.
    "SEGV_IN_CREATE_STREAM": ("stream", "SIGSEGV"),
    "BOGUS_ALLOCATE": ("copies", "SIGSEGV"),
    "SEGV_IN_COMPUTE": ("kernel HostileNeg", "SIGSEGV"),
    "SEGV_IN_PROFILER_START": ("profiler start", "SIGSEGV"),
    "EVENT_ERROR": ("event record", "the event completed with an error"),
    "EVENT_NEVER_COMPLETES": ("event record", f"did not finish within {PROBE_TIMEOUT} s"),
    "EVENT_STATUS_77": ("event record", "77"),
    # Behaves where its command line says "probe", crashes elsewhere: the probe's says nothing.
    "SEGV_UNLESS_PROBE": ("init", "SIGSEGV"),
    "INT_MAX_DEVICES": ("validation", "2147483647 devices; the host accepts at most 4096"),
    "DEVICE_TYPE_CPU": ("validation", "SP_Platform.type is 'CPU'"),
    "HUGE_PLATFORM_STRUCT": ("validation", "SP_Platform.struct_size to 1099511627776"),
    "HUGE_PLATFORM_FNS_STRUCT": ("validation", "SP_PlatformFns.struct_size to 1099511627776"),
    "HUGE_SE_STRUCT": ("validation", "SP_StreamExecutor.struct_size to 1099511627776"),
    "HUGE_DEVICE_STRUCT": ("validation", "SP_Device.struct_size to 1099511627776"),
    "NEGATIVE_MEMORY": ("validation", "total_bytes is negative (-4096)"),
    "FREE_ABOVE_TOTAL": ("validation", "free_bytes (2097152) is larger than total_bytes"),
    "HUGE_MESSAGE": ("init", "[cut: 16777216 in all, 2000 shown]"),
    "ESCAPE_MESSAGE": ("init", "\\x1b[31mred alert\\x1b[0m\\r\\nforged line\\x07"),
    "HUGE_DEVICE_MESSAGE": ("device creation", "[cut: 16777216 in all, 2000 shown]"),
}
# This one loads: its device name is shown escaped. (The event variants fail the probe's
# "event record" step; tests/runtime/test_hostile_waits.py loads them without a probe.)
LOADS = ("ESCAPE_DEVICE_NAME",)
AFTER_LOAD = ("SEGV_IN_CREATE_STREAM", "BOGUS_ALLOCATE", "SEGV_IN_COMPUTE",
              "SEGV_IN_PROFILER_START", "EVENT_ERROR", "EVENT_NEVER_COMPLETES", "BLOCKING_HANGS")
# Files that are not plugins one may load: refused before dlopen.
FILES = {
    "not_elf": ("file check", "not an ELF shared library"),
    "empty": ("file check", "not an ELF shared library"),
    "aarch64": ("file check", "built for 64-bit AArch64 little-endian but this Python runs on"),
    "elf32": ("file check", "built for 32-bit"),
    "fifo": ("file check", "is a FIFO, not a shared library file"),
    "dangling": ("file check", "dangling link"),
    "world_writable": ("file check", "is world-writable"),
    "other_owner": ("file check", "belongs to user 65534"),
    "open_directory": ("file check", "world-writable without the sticky bit"),
    "duplicate_of_xpu": ("registration", "'REF_XPU' is already registered"),
}

SCRIPT = textwrap.dedent("""
    import json, os, sys, time, warnings
    warnings.simplefilter("always")
    started = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        import pluggable
        from pluggable.loader import PluginManager
        records = pluggable.config.list_plugins()
        devices = [d.name for d in pluggable.config.list_physical_devices()]
    discovery = time.monotonic() - started
    explicit = {}
    for name, path in json.loads(sys.argv[1]).items():
        manager = PluginManager()
        manager._discovered = True
        try:
            platform = manager.load_plugin(path, isolate=True)
            explicit[name] = {"loaded": platform.name,
                              "details": platform.executor(0).details()}
        except pluggable.PluginLoadError as exc:
            explicit[name] = {"error": str(exc), "step": exc.step, "path": exc.path}
        finally:
            manager.shutdown()
    print(json.dumps({
        "records": [dict(path=r.path, found_as=r.found_as, status=r.status, step=r.step,
                         reason=r.reason, platform=r.platform_name, probe=r.probe)
                    for r in records],
        "devices": devices,
        "warnings": [(w.category.__name__, str(w.message)) for w in caught],
        "explicit": explicit, "discovery_seconds": discovery,
    }))
""")


def _elf_header(elf_class: int, machine: int) -> bytes:
    ident = b"\x7fELF" + bytes([elf_class, 1, 1]) + bytes(9)
    return ident + struct.pack("<HH", 3, machine) + bytes(44)


def _platform(variant: str) -> str:
    """A platform name for the variant (names are capitals and underscores only)."""
    return variant.replace("77", "SEVENTY_SEVEN")


def _write_files(directory, build_test_plugin):
    """The file variants in ``directory``; returns ``{name: path}``."""
    paths = {}

    def place(name, filename):
        paths[name] = str(directory / filename)
        return directory / filename

    place("not_elf", "libnot_elf.so").write_text("this is not a shared library\n")
    place("empty", "libempty.so").write_bytes(b"")
    place("aarch64", "libaarch64.so").write_bytes(_elf_header(2, 183))
    place("elf32", "libelf32.so").write_bytes(_elf_header(1, 3))
    os.mkfifo(place("fifo", "libfifo.so"))
    os.symlink(str(directory / "missing.so"), place("dangling", "libdangling.so"))
    good = build_test_plugin(PLATFORM_NAME="WORLD_DEV", DEVICE_TYPE="WORLD")
    target = place("world_writable", "libworld_writable.so")
    shutil.copy(good, target)
    os.chmod(target, 0o666)
    if IS_ROOT:  # only root can give a file to another user
        target = place("other_owner", "libother_owner.so")
        shutil.copy(build_test_plugin(PLATFORM_NAME="OTHER_DEV", DEVICE_TYPE="OTHER"), target)
        os.chown(target, 65534, 65534)
    shutil.copy(build_test_plugin(PLATFORM_NAME="REF_XPU", DEVICE_TYPE="XPU"),
                place("duplicate_of_xpu", "libduplicate_of_xpu.so"))
    return paths


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, build_test_plugin):
    root = tmp_path_factory.mktemp("hostile")
    directory = root / "plugins"
    directory.mkdir()
    paths = {}
    for name in (*CRASHES, *LOADS):
        built = build_test_plugin(HOSTILE_SOURCE, **{f"HOSTILE_{name}": True,
                                                     "PLATFORM_NAME": _platform(name),
                                                     "DEVICE_TYPE": _platform(name)})
        paths[name] = str(directory / f"lib{name.lower()}.so")
        shutil.copy(built, paths[name])
    paths.update(_write_files(directory, build_test_plugin))
    open_directory = root / "open"
    open_directory.mkdir()
    os.chmod(open_directory, 0o777)
    paths["open_directory"] = str(open_directory / "libopen.so")
    shutil.copy(build_test_plugin(PLATFORM_NAME="OPEN_DEV", DEVICE_TYPE="OPEN"),
                paths["open_directory"])
    linked = root / "links"
    linked.mkdir()
    shutil.copy(build_test_plugin(PLATFORM_NAME="LINKED_DEV", DEVICE_TYPE="LINKED"),
                root / "liblinked_target.so")
    os.symlink(str(root / "liblinked_target.so"), linked / "liblinked.so")
    # Explicit loading: copies (other inodes), so that each is probed again, not cached.
    copies = root / "copies"
    copies.mkdir()
    explicit = {}
    for name, path in paths.items():
        mode = os.lstat(path).st_mode
        if stat.S_ISREG(mode) and name not in ("world_writable", "other_owner", "open_directory"):
            explicit[name] = str(copies / os.path.basename(path))
            shutil.copy2(path, explicit[name])
        else:  # the file's kind, mode or owner is the point: load the file itself
            explicit[name] = path
    entries = [str(directory), str(open_directory), str(linked / "liblinked.so"), ".",
               "libm.so.6"]
    started = time.monotonic()
    result = _run(entries, explicit, root)
    data = json.loads(result.stdout.splitlines()[-1])
    data["seconds"] = time.monotonic() - started
    print(f"corpus: {data['seconds']:.1f} s, discovery {data['discovery_seconds']:.1f} s")
    data["paths"] = paths
    data["explicit_paths"] = explicit
    data["returncode"] = result.returncode
    return data


def _run(entries, explicit, root):
    import subprocess

    env = dict(os.environ)
    env.update({"PLUGGABLE_PLUGIN_PATH": os.pathsep.join(entries),
                "PLUGGABLE_PROBE_TIMEOUT": PROBE_TIMEOUT,
                "PLUGGABLE_CACHE_DIR": str(root / "cache")})
    env.pop("PLUGGABLE_PROBE", None)
    env.pop("PLUGGABLE_DISABLE_AUTOLOAD", None)
    return subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(explicit)],
                          capture_output=True, text=True, env=env, timeout=300, check=True)


def _record(corpus, name):
    path = corpus["paths"][name]
    matches = [r for r in corpus["records"] if r["path"] == path or r["found_as"] == path]
    assert len(matches) == 1, (name, path, corpus["records"])
    return matches[0]


def test_the_corpus_is_large_enough():
    assert len(CRASHES) + len(LOADS) + len(FILES) >= 40


def test_the_host_survives_and_the_xpu_still_loads(corpus):
    assert corpus["returncode"] == 0
    assert "/physical_device:XPU:1" in corpus["devices"]
    xpu = [r for r in corpus["records"] if r["platform"] == "REF_XPU" and r["status"] == "loaded"]
    assert len(xpu) == 1 and xpu[0]["probe"] in ("passed", "passed (cached)")


@pytest.mark.parametrize("name", sorted({**CRASHES, **FILES}))
def test_discovery_skips_with_a_warning_naming_file_step_and_reason(corpus, name):
    if name == "other_owner" and not IS_ROOT:
        pytest.skip("only root can give a file to another user")
    step, reason = {**CRASHES, **FILES}[name]
    record = _record(corpus, name)
    assert record["status"] == "skipped"
    assert record["step"] == step if name in AFTER_LOAD else \
        record["step"].startswith(step.split(" ")[0]), record
    assert reason in record["reason"]
    warning = [m for c, m in corpus["warnings"]
               if c == "PluginLoadWarning" and record["path"] in m]
    assert len(warning) == 1, (name, corpus["warnings"])
    assert f"{record['step']} failed: " in warning[0] and reason in warning[0]
    assert "\x1b" not in warning[0] and len(warning[0]) < 4000


@pytest.mark.parametrize("name", sorted({**CRASHES, **FILES}))
def test_explicit_isolated_loading_raises_naming_file_step_and_reason(corpus, name):
    if name == "other_owner" and not IS_ROOT:
        pytest.skip("only root can give a file to another user")
    step, reason = {**CRASHES, **FILES}[name]
    outcome = corpus["explicit"][name]
    path = os.path.realpath(corpus["explicit_paths"][name]) if name not in (
        "dangling",) else corpus["explicit_paths"][name]
    if name == "duplicate_of_xpu":  # a manager of its own: nothing to collide with
        assert outcome["loaded"] == "REF_XPU"
        return
    assert outcome["path"] == path
    assert outcome["step"] == step if name in AFTER_LOAD else \
        outcome["step"].startswith(step.split(" ")[0]), outcome
    assert reason in outcome["error"] and path in outcome["error"]
    assert "\x1b" not in outcome["error"]


@pytest.mark.parametrize("name", LOADS)
def test_plugins_that_misbehave_only_at_run_time_load(corpus, name):
    record = _record(corpus, name)
    assert record["status"] == "loaded" and record["probe"] is not None
    assert corpus["explicit"][name]["loaded"] == _platform(name)


def test_control_characters_of_device_names_are_escaped(corpus):
    details = corpus["explicit"]["ESCAPE_DEVICE_NAME"]["details"]
    assert details["device_name"] == "evil\\x1b]0;pwned\\x07\\x1b[2J device"


def test_a_link_is_listed_by_its_real_path_and_the_link(corpus):
    linked = [r for r in corpus["records"]
              if r["found_as"] and r["found_as"].endswith("liblinked.so")]
    assert len(linked) == 1
    assert linked[0]["path"].endswith(os.sep + "liblinked_target.so")
    assert linked[0]["status"] == "loaded" and linked[0]["platform"] == "LINKED_DEV"


def test_relative_path_entries_are_refused_saying_how_to_write_them(corpus):
    messages = [m for c, m in corpus["warnings"] if "is relative and is ignored" in m]
    assert len(messages) == 2
    assert any("'libm.so.6'" in m and os.path.join(os.getcwd(), "libm.so.6") in m
               for m in messages)
    assert not any(r["path"].endswith("libm.so.6") for r in corpus["records"])


def test_no_hang_and_hangs_cost_the_probe_timeout_only(corpus):
    hangs = sum(1 for step, reason in CRASHES.values() if "did not finish" in reason)
    # Discovery and explicit loading each pay each hang once, plus the ordinary probes.
    assert corpus["seconds"] < 2 * hangs * float(PROBE_TIMEOUT) + 120
