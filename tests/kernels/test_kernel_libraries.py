"""Libraries without a device (tests/plugins/kernel_library.c): a library that exports
TF_InitKernel and TF_InitGraph and no SE_InitPlugin loads, as TensorFlow's
load_pluggable_device_library loads it. Its CPU kernels run on the CPU device in host memory,
chosen by TensorFlow's priority rule against pluggable's own CPU kernel (priority 0); its
kernels for another plugin's device type run on that device; its graph optimizer is
registered. Each case runs in a fresh interpreter: kernels and ops stay for the life of the
process."""
from __future__ import annotations

import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGINS = os.path.join(os.path.dirname(HERE), "plugins")
SOURCE = os.path.join(PLUGINS, "kernel_library.c")
DEVICE_SOURCE = os.path.join(PLUGINS, "test_plugin.c")
PRELUDE = """
import ctypes, json, sys, warnings
import numpy as np
import pluggable
from pluggable import errors, ops, raw_ops
from pluggable.kernels import registry
warnings.simplefilter("error", pluggable.PluginLoadWarning)
x = np.array([1.5, -2.0, 3.0], np.float32)
"""


@pytest.fixture(scope="module")
def library(build_test_plugin):
    return lambda **macros: build_test_plugin(SOURCE, **macros)


def run(run_python, body: str) -> dict:
    result = run_python(PRELUDE + body, env={"PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_kernel_library_loads_and_its_cpu_kernels_run(run_python, library):
    path = library()
    out = run(run_python, f"""
loaded = pluggable.load_plugin({path!r})
lib = ctypes.CDLL({path!r})
lib.kernel_library_neg_runs.restype = ctypes.c_int64
record = [r for r in pluggable.loader.plugin_manager.manager().records if r.path == {path!r}][0]
neg = raw_ops.Neg(x=x)
runs_after_raw = lib.kernel_library_neg_runs()
neg_ops = ops.negative(x)
neg_int = raw_ops.Neg(x=np.array([1, 2], np.int32))  # the plugin kernel is float only
scaled = raw_ops.LibScale(x=x, scale=3.0)
forwarded = raw_ops.LibForward(x=x)
try:
    raw_ops.LibStream(x=x)
    stream = None
except errors.FailedPreconditionError as exc:
    stream = str(exc)
try:
    raw_ops.LibScale(x=x.astype(np.float64))
    double = None
except errors.UnimplementedError as exc:
    double = str(exc)
print(json.dumps(dict(
    loaded=loaded, status=record.status, kernels=record.provides_kernels,
    optimizer=record.graph_optimizer.device_type,
    neg=neg.numpy().tolist(), device=neg.device, runs_after_raw=runs_after_raw,
    neg_ops=neg_ops.numpy().tolist(), runs=lib.kernel_library_neg_runs(),
    neg_int=neg_int.numpy().tolist(), scaled=scaled.numpy().tolist(),
    scaled_default=raw_ops.LibScale(x=x).numpy().tolist(),
    forwarded=forwarded.numpy().tolist(), stream=stream, double=double,
    cpu_kernels=sorted(k.kernel_name for k in pluggable.config.list_kernels(device_type="CPU")
                       if k.source == {path!r}))))
""")
    assert out["loaded"] is None and out["status"] == "loaded" and out["kernels"]
    assert out["optimizer"] == "CPU"
    assert out["neg"] == [-1.5, 2.0, -3.0] and out["device"].endswith("CPU:0")
    assert out["runs_after_raw"] == 1 and out["runs"] == 2  # raw_ops and ops both reach it
    assert out["neg_ops"] == [-1.5, 2.0, -3.0]
    assert out["neg_int"] == [-1, -2]  # int32: pluggable's own CPU kernel
    assert out["scaled"] == [4.5, -6.0, 9.0] and out["scaled_default"] == [3.0, -4.0, 6.0]
    assert out["forwarded"] == [1.5, -2.0, 3.0]  # an output that is its input
    assert out["stream"].startswith(f"{path}, CPU: kernel LibStreamCpu for LibStream failed: "
                                    f"TF_GetStream: kernels on the CPU device have no stream")
    assert "registers no CPU kernel for this call" in out["double"]
    assert out["cpu_kernels"] == ["LibForwardCpu", "LibNegCpu", "LibScaleCpu", "LibStreamCpu"]


def test_a_cpu_kernel_below_the_builtin_priority_is_not_chosen(run_python, library):
    path = library(NEG_PRIORITY=-1)
    out = run(run_python, f"""
pluggable.load_plugin({path!r})
lib = ctypes.CDLL({path!r})
lib.kernel_library_neg_runs.restype = ctypes.c_int64
neg = raw_ops.Neg(x=x).numpy().tolist()
print(json.dumps(dict(neg=neg, runs=lib.kernel_library_neg_runs())))
""")
    assert out == {"neg": [-1.5, 2.0, -3.0], "runs": 0}


def test_a_cpu_kernel_at_the_builtin_priority_fails_the_call_as_in_tensorflow(run_python,
                                                                               library):
    path = library(NEG_PRIORITY=0)
    out = run(run_python, f"""
pluggable.load_plugin({path!r})
try:
    raw_ops.Neg(x=x)
    error = None
except errors.InvalidArgumentError as exc:
    error = str(exc)
other = raw_ops.Neg(x=np.array([3], np.int64)).numpy().tolist()  # not constrained: no tie
print(json.dumps(dict(error=error, other=other)))
""")
    assert out["error"].startswith("Multiple OpKernel registrations match NodeDef at the same "
                                   "priority 'Neg' on /device:CPU:0 (T=float32): 'pluggable's "
                                   "own CPU kernel for Neg")
    assert "'kernel LibNegCpu for Neg on CPU, priority 0, T in {float32}'" in out["error"]
    assert path in out["error"]
    assert out["other"] == [-3]


def test_kernels_for_another_plugins_device_type_run_on_its_devices(run_python, library,
                                                                    build_test_plugin):
    device = build_test_plugin(DEVICE_SOURCE, PLATFORM_NAME="KL_DEV", DEVICE_TYPE="KLDEV")
    path = library(DEVICE_KERNELS="KLDEV")
    out = run(run_python, f"""
pluggable.load_plugin({device!r})
pluggable.load_plugin({path!r})
with pluggable.device("KLDEV:0"):
    y = raw_ops.Neg(x=x)
print(json.dumps(dict(y=y.numpy().tolist(), device=y.device)))
""")
    assert out["y"] == [-15.0, 20.0, -30.0] and out["device"].endswith("KLDEV:0")


def test_kernels_for_a_device_type_loaded_later_serve_its_devices(run_python, library,
                                                                   build_test_plugin):
    """As in TensorFlow, a kernel library's kernels wait for their device type: loaded before
    the plugin that provides it, with no warning, they run on its devices once it loads."""
    device = build_test_plugin(DEVICE_SOURCE, PLATFORM_NAME="KL_LATE", DEVICE_TYPE="KLLATE")
    path = library(DEVICE_KERNELS="KLLATE")
    out = run(run_python, f"""
pluggable.load_plugin({path!r})  # warnings are errors here: none
before = [k.kernel_name for k in pluggable.config.list_kernels("Neg", "KLLATE")]
pluggable.load_plugin({device!r})
with pluggable.device("KLLATE:0"):
    y = raw_ops.Neg(x=x)
print(json.dumps(dict(before=before, y=y.numpy().tolist(), refused=len(
    pluggable.config.list_refused({path!r})))))
""")
    assert out == {"before": ["LibNegDevice"], "y": [-15.0, 20.0, -30.0], "refused": 0}


def test_a_graph_only_library_loads(run_python, library):
    path = library(GRAPH_ONLY=True)
    out = run(run_python, f"""
pluggable.load_plugin({path!r})
record = [r for r in pluggable.loader.plugin_manager.manager().records if r.path == {path!r}][0]
print(json.dumps(dict(status=record.status, kernels=record.provides_kernels,
                      optimizer=record.graph_optimizer.describe())))
""")
    assert out == {"status": "loaded", "kernels": False,
                   "optimizer": "for CPU (remapping=off); not run: pluggable builds no graphs"}


def test_a_library_with_no_entry_point_is_refused_naming_them_all(run_python, library):
    path = library(NO_ENTRY_POINTS=True)
    out = run(run_python, f"""
try:
    pluggable.load_plugin({path!r})
    print(json.dumps(None))
except errors.PluginLoadError as exc:
    print(json.dumps([exc.step, exc.reason]))
""")
    assert out == ["symbol lookup", "the library exports none of the plugin entry points "
                   "(SE_InitPlugin, SE_InitializePlugin, TF_InitKernel, TF_InitGraph, "
                   "TF_InitProfiler)"]


def test_doctor_reports_the_kernels_of_a_library_without_a_device(library):
    """Its kernels for a device type no plugin in the probe's child provides are no fault:
    they serve that type's devices wherever a plugin provides them."""
    import subprocess
    import sys

    path = library(DEVICE_KERNELS="KLDEV")
    result = subprocess.run([sys.executable, "-m", "pluggable", "doctor", path],
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "TF_InitKernel yes" in result.stdout and "SE_InitPlugin no" in result.stdout
    assert "LibScale" in result.stdout and "kernels  5 registered for 4 op(s)" in result.stdout
