"""python -m pluggable devices | plugins."""
from __future__ import annotations

import shutil


def test_devices_table(run_python):
    out = run_python("from pluggable.cli import main; main(['devices'])").stdout.splitlines()
    assert out[0].split()[:3] == ["device", "platform", "name"]
    rows = {line.split()[0]: line for line in out[2:]}
    assert set(rows) >= {"CPU:0", "XPU:0", "XPU:1"}
    assert "REF_XPU" in rows["XPU:1"] and "XPU reference device" in rows["XPU:1"]
    assert "1.0 GiB" in rows["XPU:0"]


def test_plugins_table_shows_reasons(run_python, tmp_path, build_test_plugin):
    shutil.copy(build_test_plugin(MAJOR_VERSION=3), tmp_path / "libold.so")
    result = run_python("import sys; from pluggable.cli import main; sys.exit(main(['plugins']))",
                        env={"PLUGGABLE_PLUGIN_PATH": str(tmp_path)})
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["status", "type", "platform"]
    xpu = next(line for line in lines if "libxpu_plugin.so" in line)
    assert xpu.split()[:3] == ["loaded", "XPU", "REF_XPU"]
    old = next(line for line in lines if "libold.so" in line)
    assert old.startswith("skipped")
    assert "validation: the plugin implements StreamExecutor C API 3.0.1" in old
    assert result.stderr == ""  # the table says it; no warning on top


def test_module_entry_point(run_python):
    result = run_python(None, args=("-m", "pluggable", "devices"))
    assert "XPU:1" in result.stdout


def test_usage_error(run_python):
    result = run_python(None, args=("-m", "pluggable", "nonsense"), check=False)
    assert result.returncode == 2 and "invalid choice" in result.stderr


def test_plugins_survives_a_plugin_that_crashes_unless_probed(run_python, tmp_path,
                                                             build_test_plugin):
    # It behaves where its command line says "probe" and crashes anywhere else; the probe's
    # command line says nothing, so the probe sees the crash and the plugin is not loaded.
    import os

    hostile = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "plugins", "hostile_plugin.c")
    shutil.copy(build_test_plugin(hostile, HOSTILE_SEGV_UNLESS_PROBE=True,
                                  PLATFORM_NAME="SHY_DEV", DEVICE_TYPE="SHY"),
                tmp_path / "libshy.so")
    result = run_python(None, args=("-m", "pluggable", "plugins"),
                        env={"PLUGGABLE_PLUGIN_PATH": str(tmp_path),
                             "PLUGGABLE_CACHE_DIR": str(tmp_path / "cache")})
    shy = next(line for line in result.stdout.splitlines() if "libshy.so" in line)
    assert shy.startswith("skipped")
    assert "init: the plugin crashed the probe child with SIGSEGV during step 'init'" in shy


def test_plugins_table_says_what_a_library_without_a_device_is(run_python, tmp_path,
                                                               build_test_plugin):
    import os

    source = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "plugins", "kernel_library.c")
    shutil.copy(build_test_plugin(source), tmp_path / "libkernels.so")
    shutil.copy(build_test_plugin(source, GRAPH_ONLY=True), tmp_path / "libgraph.so")
    result = run_python(None, args=("-m", "pluggable", "plugins"),
                        env={"PLUGGABLE_PLUGIN_PATH": str(tmp_path)})
    lines = result.stdout.splitlines()
    header = lines[0]
    kernels = next(line for line in lines if "libkernels.so" in line)
    graph = next(line for line in lines if "libgraph.so" in line and line.startswith("loaded"))
    cells = {name: kernels[header.index(name):].split("  ")[0].strip()
             for name in ("type", "platform", "devices", "kernels")}
    assert kernels.startswith("loaded")
    assert cells == {"type": "kernels only", "platform": "no device (kernels for CPU)",
                     "devices": "0", "kernels": "yes"}
    assert graph[header.index("type"):].split("  ")[0] == "graph optimizer only"
    assert graph[header.index("platform"):].split("  ")[0] == "no device"
