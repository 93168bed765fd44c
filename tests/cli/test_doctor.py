"""``python -m pluggable doctor``: a plugin checked in a child process; a crash is reported,
never suffered, and the exit status says whether anything failed."""
from __future__ import annotations

import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTILE_SOURCE = os.path.join(HERE, "..", "plugins", "hostile_plugin.c")
HANG_TIMEOUT = os.environ.get("PLUGGABLE_TEST_PROBE_TIMEOUT", "1")


def doctor(run_python, path, *extra):
    result = run_python(None, args=("-m", "pluggable", "doctor", str(path), *extra),
                        check=False)
    return result


def test_the_xpu_passes_with_a_full_report(run_python, xpu_platform):
    result = doctor(run_python, xpu_platform.path, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["ok"] and not data["cached"]
    report = data["report"]
    assert report["platform"] == "REF_XPU" and report["device_count"] == 2
    assert report["exports"]["SE_InitPlugin"] and report["exports"]["TF_InitKernel"]
    assert report["missing_symbols"] == []
    assert report["struct_sizes"]["SP_StreamExecutor"]["plugin"] == \
        report["struct_sizes"]["SP_StreamExecutor"]["host"]
    assert report["callbacks"]["SP_StreamExecutor.allocate"] == {"required": True,
                                                                  "present": True}
    assert [d["ordinal"] for d in report["devices"]] == [0, 1]
    assert report["devices"][1]["details"]["pci_bus_id"] == "0000:01:00.0"
    matmul = [k for k in report["kernels"] if k["op"] == "MatMul"]
    assert {"float32"} <= {t for k in matmul for t in k["types"]["T"]}
    assert data["steps"][-1] == "shutdown"


def test_text_report(run_python, xpu_platform):
    result = doctor(run_python, xpu_platform.path)
    assert result.returncode == 0
    assert "verdict  OK" in result.stdout
    assert "struct   SP_StreamExecutor" in result.stdout
    assert "MatMul: T=float32" in result.stdout


@pytest.mark.parametrize("variant, step, words", [
    ("SEGV_IN_INIT", "init", "SIGSEGV"),
    ("ABORT_IN_INIT", "init", "SIGABRT"),
    ("HANG_IN_INIT", "init", f"did not finish within {HANG_TIMEOUT} s"),
    ("EXIT_IN_CREATE_STREAM_EXECUTOR", "device creation 0", "exited with status 4"),
])
def test_crashes_and_hangs_are_reported_and_exit_non_zero(run_python, build_test_plugin,
                                                          variant, step, words):
    path = build_test_plugin(HOSTILE_SOURCE, **{f"HOSTILE_{variant}": True})
    timeout = HANG_TIMEOUT if variant.startswith("HANG") else "60"
    result = doctor(run_python, path, "--json", "--timeout", timeout)
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert not data["ok"] and data["step"] == step and words in data["reason"]
    text = doctor(run_python, path, "--timeout", timeout).stdout
    assert f"verdict  FAILED at step {step!r}" in text and words in text


def test_a_file_that_is_not_a_shared_library(run_python, tmp_path):
    path = tmp_path / "libnotes.so"
    path.write_text("notes\n")
    result = doctor(run_python, path)
    assert result.returncode == 1
    assert "FAILED at step 'file check'" in result.stdout
    assert "not an ELF shared library" in result.stdout


def test_device_names_are_shown_escaped(run_python, build_test_plugin):
    path = build_test_plugin(HOSTILE_SOURCE, HOSTILE_ESCAPE_DEVICE_NAME=True)
    result = doctor(run_python, path, "--json")
    data = json.loads(result.stdout)
    assert result.returncode == 0 and data["report"]["kernels"] == []
    assert data["report"]["devices"][0]["details"]["device_name"].startswith("evil\\x1b]0;")


def test_isolated_load_uses_the_same_probe(private_manager, build_test_plugin):
    from pluggable.errors import PluginLoadError

    path = build_test_plugin(HOSTILE_SOURCE, HOSTILE_ABORT_IN_CREATE_DEVICE=True)
    with pytest.raises(PluginLoadError) as info:
        private_manager.load_plugin(path, isolate=True)
    assert info.value.step == "device creation 0" and "SIGABRT" in str(info.value)
    assert private_manager.records[-1].status == "skipped"


def test_plugins_command_survives_a_crashing_plugin_and_names_it(run_python, tmp_path,
                                                                build_test_plugin):
    import shutil

    directory = tmp_path / "plugins"
    directory.mkdir()
    shutil.copy(build_test_plugin(HOSTILE_SOURCE, HOSTILE_SEGV_IN_INIT=True),
                directory / "libcrash.so")
    result = run_python(None, args=("-m", "pluggable", "plugins"), env={
        "PLUGGABLE_PLUGIN_PATH": str(directory),
        "PLUGGABLE_CACHE_DIR": str(tmp_path / "cache")})
    line = next(l for l in result.stdout.splitlines() if "libcrash.so" in l)
    assert line.startswith("skipped") and "init: the plugin crashed the probe child with "\
        "SIGSEGV during step 'init'" in line
    assert "REF_XPU" in result.stdout


def test_symbols_the_runtime_does_not_provide_are_named(run_python, tmp_path):
    import subprocess

    import pluggable

    source = tmp_path / "missing.c"
    source.write_text('#include "tensorflow/c/tf_status.h"\n'
                      "void TF_NotARealFunction(int);\n"
                      "void TFE_NewOp(void);\nvoid TFE_Execute(void);\n"
                      "void TF_GetPjRtCClient(void);\n"
                      "void SE_InitPlugin(void* params, TF_Status* status) {\n"
                      "  (void)params; (void)status; TF_NotARealFunction(1);\n"
                      "  TFE_NewOp(); TFE_Execute(); TF_GetPjRtCClient();\n}\n")
    library = tmp_path / "libmissing.so"
    subprocess.run(["cc", "-std=c11", "-fPIC", "-shared", "-I", pluggable.get_include(),
                    "-o", str(library), str(source)], check=True)
    result = doctor(run_python, library, "--json")
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert data["step"] == "dlopen"
    assert data["report"]["missing_symbols"] == ["TFE_Execute", "TFE_NewOp",
                                                 "TF_GetPjRtCClient", "TF_NotARealFunction"]
    # Every one is named, grouped by why it is not provided.
    assert "its tree uses 4 C API function(s) the host runtime does not provide: " \
           "TFE_Execute, TFE_NewOp (TensorFlow's eager C API: " in data["reason"]
    assert "; TF_GetPjRtCClient (the NextPluggableDevice API: " in data["reason"]
    assert "; TF_NotARealFunction (not among the TensorFlow C API functions pluggable " \
           "provides" in data["reason"]
