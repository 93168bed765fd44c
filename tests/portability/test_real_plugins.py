"""Real plugin binaries published on PyPI, loaded here by every route: Intel Extension for
TensorFlow's CPU plugin (intel-extension-for-tensorflow-lib 2.15.0.0.0, `libitex_cpu.so`) and
its GPU plugin (2.15.0.3.2, `libitex_gpu.so`). Both are built on TensorFlow's own
`_pywrap_tensorflow_internal.so` (through their `libitex_common.so`), so each route refuses
them at step `dependencies` with the same explanation, the process goes on, and `doctor`
names the whole tree, the GPU plugin's missing oneAPI libraries included.

The wheels are downloaded with ``pip download --no-deps`` (about 0.7 GB, kept in
``PLUGGABLE_TEST_WHEELS``, default ``~/.cache/pluggable/test-wheels``); without a package
registry the tests skip, saying so.
"""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import zipfile

import pytest

pytestmark = pytest.mark.network

WHEELS = {"cpu": ("2.15.0.0.0", "tensorflow-plugins/libitex_cpu.so"),
          "gpu": ("2.15.0.3.2", "tensorflow-plugins/libitex_gpu.so")}
COMMON = "intel_extension_for_tensorflow/libitex_common.so"


def _wheel(version: str) -> str:
    folder = os.environ.get("PLUGGABLE_TEST_WHEELS") or os.path.join(
        os.path.expanduser("~"), ".cache", "pluggable", "test-wheels")
    os.makedirs(folder, exist_ok=True)
    pattern = os.path.join(folder, f"intel_extension_for_tensorflow_lib-{version}-*.whl")
    found = glob.glob(pattern)
    if not found:
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "--quiet", "-d", folder, f"intel-extension-for-tensorflow-lib=={version}"],
            capture_output=True, text=True, timeout=1200)
        found = glob.glob(pattern)
        if result.returncode or not found:
            pytest.skip(f"intel-extension-for-tensorflow-lib=={version} could not be "
                        f"downloaded (no package registry?): {result.stderr.strip()[-300:]}")
    return found[0]


@pytest.fixture(scope="module", params=sorted(WHEELS))
def real_plugin(request, tmp_path_factory):
    """(kind, the plugin's path) in a site folder holding the plugin, the library of the
    wheel it needs first (libitex_common.so) and the wheel's metadata: what the loader
    needs to see the tree, without the wheel's 3 GB of device code."""
    version, plugin = WHEELS[request.param]
    site = tmp_path_factory.mktemp(f"site-{request.param}")
    with zipfile.ZipFile(_wheel(version)) as wheel:
        for name in wheel.namelist():
            if name in (plugin, COMMON) or ".dist-info/" in name:
                wheel.extract(name, site)
    return request.param, str(site / plugin)


def _run(code: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PLUGGABLE_DISABLE_AUTOLOAD": "1", **env}
    return subprocess.run([sys.executable, "-W", "always", "-c", code, *args],
                          capture_output=True, text=True, timeout=300, env=environment)


def test_the_tree_shows_tensorflows_library_and_what_is_missing(real_plugin):
    from pluggable.plugin import dependencies

    kind, plugin = real_plugin
    tree = dependencies.Tree(plugin)
    assert [(lib.name, os.path.basename(lib.needed_by)) for lib in tree.tensorflow] == [
        ("_pywrap_tensorflow_internal.so", "libitex_common.so")]
    missing = {lib.name for lib in tree.missing}
    if kind == "gpu":  # oneAPI's runtime, which dlopen would name one at a time
        assert {"libimf.so", "libsycl.so.8", "libze_loader.so.1", "libOpenCL.so.1",
                "libmkl_core.so.2", "libsvml.so"} <= missing
    told = dependencies.tensorflow_build(tree)
    assert told.startswith("it links _pywrap_tensorflow_internal.so; it comes from the "
                           "package intel-extension-for-tensorflow-lib==2.15.0.")


def test_every_route_refuses_it_the_same_way_and_the_process_goes_on(real_plugin):
    _, plugin = real_plugin
    code = ("import json, sys, warnings, pluggable\n"
            "from pluggable.errors import PluginLoadError\n"
            "out = {}\n"
            "for route, isolate in (('probed', None), ('direct', False)):\n"
            "    try:\n"
            "        pluggable.loader.PluginManager().load_plugin(sys.argv[1], isolate=isolate)\n"
            "    except PluginLoadError as exc:\n"
            "        out[route] = [exc.step, exc.reason]\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n"
            "    m = pluggable.loader.PluginManager()\n"
            "    m._load(sys.argv[1], 'discovery', None, explicit=False)\n"
            "out['discovery'] = [str(w.message) for w in caught]\n"
            "print(json.dumps(out))\n")
    result = _run(code, plugin)
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout.splitlines()[-1])
    assert out["probed"] == out["direct"]
    step, reason = out["direct"]
    assert step == "dependencies"
    assert reason.startswith("it links _pywrap_tensorflow_internal.so; it comes from the "
                             "package intel-extension-for-tensorflow-lib==2.15.0.")
    assert "two implementations in one process" in reason
    assert len(out["discovery"]) == 1  # one warning, with the same reason
    assert "dependencies" in out["discovery"][0] and reason in out["discovery"][0]


def test_doctor_names_the_whole_tree(real_plugin):
    kind, plugin = real_plugin
    result = subprocess.run([sys.executable, "-m", "pluggable", "doctor", plugin],
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    assert result.returncode == 1, result.stderr[-2000:]
    report = result.stdout
    assert "verdict  FAILED at step 'dependencies': it links _pywrap_tensorflow_internal.so" \
        in report
    assert "links    TensorFlow: it links _pywrap_tensorflow_internal.so" in report
    if kind == "gpu":
        assert "libimf.so (needed by libitex_gpu.so)" in report
        assert "libsycl.so.8 (needed by libitex_gpu.so)" in report


def test_the_cpu_plugin_is_a_kernel_library_refused_only_for_its_dependencies(real_plugin):
    """libitex_cpu.so has no SE_InitPlugin (only TF_InitKernel and TF_InitGraph): it is a
    plugin as TensorFlow sees it, and its refusal names TensorFlow and every missing
    library, never "symbol lookup"."""
    from pluggable.plugin import dependencies, elf
    from pluggable.plugin.library import ENTRY_POINTS, PluginCallError, PluginLibrary

    kind, plugin = real_plugin
    exported = elf.dynamic_info(plugin, ENTRY_POINTS).defined & set(ENTRY_POINTS)
    if kind == "cpu":
        assert exported == {"TF_InitKernel", "TF_InitGraph"}
    else:
        assert {"SE_InitPlugin", "TF_InitKernel"} <= exported
    with pytest.raises(PluginCallError) as caught:
        PluginLibrary(plugin)
    assert caught.value.step == "dependencies"
    tree = dependencies.Tree(plugin)
    assert tree.missing  # at least TensorFlow's own library, outside a TensorFlow install
    for lib in tree.missing:
        assert f"{lib.name} (needed by {os.path.basename(lib.needed_by)})" \
            in caught.value.reason or len(tree.missing) > 20
    assert f"{len(tree.missing)} of the libraries its tree needs" in caught.value.reason


def test_every_c_api_function_the_cpu_wheel_imports_is_provided(tmp_path):
    """The C API functions of every library of the CPU wheel (its kernels live in
    libitex_cpu_internal_*.so): the runtime exports each one (TF_Version, TF_GetAllOpList,
    TF_OpIsStateful, TF_TensorFromProto, TF_GetRegisteredKernelsForOp among them)."""
    from pluggable.base import native
    from pluggable.plugin import elf
    from pluggable.plugin.dependencies import API_PREFIXES

    with zipfile.ZipFile(_wheel(WHEELS["cpu"][0])) as wheel:
        names = [n for n in wheel.namelist() if n.endswith(".so") and "libitex" in n]
        for name in names:
            wheel.extract(name, tmp_path)
    imported = set()
    for name in names:
        imported |= elf.dynamic_info(str(tmp_path / name), API_PREFIXES).undefined
    assert {"TF_Version", "TF_GetAllOpList", "TF_OpIsStateful", "TF_TensorFromProto",
            "TF_GetRegisteredKernelsForOp", "TF_NewKernelBuilder"} <= imported
    assert sorted(n for n in imported if not hasattr(native.lib, n)) == []
