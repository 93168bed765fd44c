"""The conformance suite: the XPU passes every check; each planted defect fails exactly the
check written for it; the command line and the pytest plugin both run it."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGINS = os.path.join(os.path.dirname(HERE), "plugins")
KERNEL_C_PLUGIN = os.path.join(PLUGINS, "kernel_c_plugin.c")


def conformance(path, *args, tmp_path, env=None):
    report = tmp_path / "report.json"
    result = subprocess.run([sys.executable, "-m", "pluggable", "conformance", path, "-q",
                             "--json", str(report), *args],
                            capture_output=True, text=True, timeout=600,
                            env=None if env is None else {**os.environ, **env})
    assert report.exists(), result.stdout + result.stderr
    return result, json.loads(report.read_text())


def failed(report):
    return sorted(name for name, r in report["results"].items() if r["outcome"] == "failed")


def test_the_xpu_passes_every_check(xpu_platform, tmp_path):
    result, report = conformance(xpu_platform.path, "--strict", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    assert failed(report) == []
    outcomes = [r["outcome"] for r in report["results"].values()]
    assert outcomes.count("passed") > 500  # every kernel of every dtype, and the API tiers
    assert "skipped" not in outcomes  # every kernel has generated inputs
    # Every tier ran.
    tiers = {name.split("::")[0] for name in report["results"]}
    assert {"TestLoading", "TestDevices", "TestMemory", "TestCopies", "TestStreams",
            "TestKernels", "TestRegistrations", "TestProfiler"} <= tiers
    kernels = {n.split("[")[1].split("-")[0] for n in report["results"] if "[" in n
               and n.startswith("TestKernels")}
    assert {"StridedSlice", "GatherV2", "ConcatV2", "Pad", "Tile", "Conv2DBackpropInput",
            "Conv2DBackpropFilter", "MaxPoolGrad", "AssignAddVariableOp", "ResourceApplyAdam",
            "Add", "Div"} <= kernels
    profiler = [r["outcome"] for n, r in report["results"].items() if n.startswith("TestProfiler")]
    assert profiler and set(profiler) == {"passed"}


def test_the_plugin_template_passes_every_check(build_test_plugin, tmp_path):
    template = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples",
                            "plugin_template", "my_device_plugin.c")
    result, report = conformance(build_test_plugin(template), tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    outcomes = {n: r["outcome"] for n, r in report["results"].items()}
    assert outcomes["TestKernels::test_kernel_matches_reference[AddV2-float32]"] == "passed"
    assert outcomes["TestProfiler::test_a_session_with_work_gives_the_device_plane"] == "passed"


def test_the_profiler_tier_warns_when_tensorboard_would_not_show_the_planes(
        build_test_plugin, tmp_path):
    """The profiler test plugin names its plane /device:TEST:0, which xprof does not draw: the
    check passes (TensorFlow accepts any plane) and warns with the reason."""
    plugin = build_test_plugin(os.path.join(PLUGINS, "profiler_plugin.c"), WITH_DEVICE=True)
    result, report = conformance(plugin, "-k", "TestProfiler", tmp_path=tmp_path)
    assert report["results"]["TestProfiler::test_planes_are_what_tensorboard_shows"][
        "outcome"] == "passed", result.stdout[-3000:]
    (warning,) = [w for w in report["warnings"] if w["category"] == "ProfileViewWarning"]
    assert warning["check"] == "TestProfiler::test_planes_are_what_tensorboard_shows"
    assert "plane '/device:TEST:0' is not drawn: xprof shows only planes named " \
           "/device:GPU:<n>" in warning["message"]
    assert "ProfileViewWarning" in result.stdout


def test_the_xpu_and_the_template_warn_about_nothing(xpu_platform, build_test_plugin,
                                                     tmp_path):
    template = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples",
                            "plugin_template", "my_device_plugin.c")
    for path in (xpu_platform.path, build_test_plugin(template)):
        _, report = conformance(path, "-k", "test_planes_are_what_tensorboard_shows",
                                tmp_path=tmp_path)
        assert report["results"]["TestProfiler::test_planes_are_what_tensorboard_shows"][
            "outcome"] == "passed"
        assert not [w for w in report["warnings"] if w["category"] == "ProfileViewWarning"]


def test_a_correct_test_plugin_passes(build_test_plugin, tmp_path):
    result, report = conformance(build_test_plugin(CONFORMANT=True), tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    assert failed(report) == []


DEFECTS = [
    ("BUG_MEMSET32", "TestMemory::test_memset32["),
    ("BUG_MEMSET", "TestMemory::test_memset["),
    ("BUG_MEM_ZERO", "TestMemory::test_mem_zero["),
    ("BUG_DTOD", "TestCopies::test_dtod["),
    ("BUG_STATS", "TestMemory::test_allocator_stats_"),
    # Only the allocations smaller than a MiB go uncounted: the older check misses it.
    ("BUG_STATS_ROUNDED", "TestMemory::test_allocator_stats_agree_with_real_use"),
    ("BUG_OOM", "TestMemory::test_out_of_memory_is_reported"),
    ("BUG_TIMER", "TestStreams::test_timer_measures_device_time"),
    # The host itself refuses inconsistent memory figures when it creates the device.
    ("BUG_MEMORY_USAGE", "TestLoading::test_loads_and_validates"),
]


@pytest.mark.parametrize("defect, check", DEFECTS, ids=[d for d, _ in DEFECTS])
def test_each_defect_fails_exactly_its_check(build_test_plugin, tmp_path, defect, check):
    path = build_test_plugin(CONFORMANT=True, **{defect: True})
    result, report = conformance(path, tmp_path=tmp_path)
    assert result.returncode != 0
    bad = failed(report)
    assert bad, f"{defect} went unnoticed"
    assert all(name.startswith(check) for name in bad), f"{defect} failed {bad}"


def test_a_wrong_kernel_fails_its_kernel_check_only(build_test_plugin, tmp_path):
    good = build_test_plugin(KERNEL_C_PLUGIN, CONFORMANT=True, WITH_NEG=True,
                             PLATFORM_NAME="KC_DEV", DEVICE_TYPE="KC")
    result, report = conformance(good, tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    assert report["results"]["TestKernels::test_kernel_matches_reference[Neg-float32]"][
        "outcome"] == "passed"
    # Kernels of ops the library does not define are skipped, saying why.
    skipped = {n: r["message"] for n, r in report["results"].items() if r["outcome"] == "skipped"}
    assert any("has no op 'Typed'" in m for m in skipped.values())

    bad = build_test_plugin(KERNEL_C_PLUGIN, CONFORMANT=True, WITH_NEG=True, BUG_NEG=True,
                            PLATFORM_NAME="KC_DEV", DEVICE_TYPE="KC")
    result, report = conformance(bad, tmp_path=tmp_path)
    assert failed(report) == ["TestKernels::test_kernel_matches_reference[Neg-float32]"]
    assert "Neg (float32)" in report["results"][failed(report)[0]]["message"]


SHAPE_CHECK = "TestRegistrations::test_shape_ops_keep_their_int32_outputs_in_host_memory"


def test_a_shape_kernel_with_its_output_in_device_memory_fails_its_check(build_test_plugin,
                                                                        tmp_path):
    """TensorFlow refuses a device Shape kernel whose int32 output is not in host memory: the
    registration check says so and how to fix it; the same kernel with HostMemory("output")
    passes it and its kernel checks."""
    flags = dict(CONFORMANT=True, WITH_SHAPE=True, PLATFORM_NAME="KC_DEV", DEVICE_TYPE="KC")
    result, report = conformance(build_test_plugin(KERNEL_C_PLUGIN, **flags), "-k",
                                 "TestRegistrations or Shape", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    assert report["results"][SHAPE_CHECK]["outcome"] == "passed"
    shape_runs = [n for n in report["results"] if n.startswith(
        "TestKernels::test_kernel_matches_reference[Shape-")]
    assert shape_runs and all(report["results"][n]["outcome"] == "passed" for n in shape_runs)

    result, report = conformance(build_test_plugin(KERNEL_C_PLUGIN, SHAPE_ON_DEVICE=True,
                                                   **flags), "-k",
                                 "TestRegistrations or Shape", tmp_path=tmp_path)
    assert result.returncode == 1
    assert failed(report) == [SHAPE_CHECK]
    message = report["results"][SHAPE_CHECK]["message"]
    assert "'ShapeKernel32' (Shape on KC)" in message and "ShapeKernel64" not in message
    assert "has an int32 output with unexpected full type information" in message
    assert 'TF_KernelBuilder_HostMemory(builder, "output")' in message


RANDOM_CHECKS = ("TestKernels::test_kernel_matches_reference[RandomUniform-float32]",
                 "TestKernels::test_kernel_matches_reference[StatelessRandomUniform-float32]")


def test_random_kernels_are_checked_by_shape_type_and_range(build_test_plugin, tmp_path):
    """Random kernels draw their own numbers: a correct one passes; one drawing outside
    [0, 1) fails both checks; a stateless one that ignores its seed fails its own."""
    flags = dict(CONFORMANT=True, WITH_RANDOM=True, PLATFORM_NAME="KC_DEV", DEVICE_TYPE="KC")
    result, report = conformance(build_test_plugin(KERNEL_C_PLUGIN, **flags), "-k",
                                 "Random", tmp_path=tmp_path)
    assert [report["results"][n]["outcome"] for n in RANDOM_CHECKS] == ["passed", "passed"], \
        result.stdout[-3000:]

    result, report = conformance(build_test_plugin(KERNEL_C_PLUGIN, BUG_RANDOM=True, **flags),
                                 "-k", "Random", tmp_path=tmp_path)
    assert failed(report) == sorted(RANDOM_CHECKS)
    assert "lie outside [0.0, 1.0)" in report["results"][RANDOM_CHECKS[0]]["message"]

    result, report = conformance(build_test_plugin(KERNEL_C_PLUGIN, BUG_STATELESS=True,
                                                   **flags), "-k", "Random", tmp_path=tmp_path)
    assert failed(report) == [RANDOM_CHECKS[1]]
    assert "two calls with one seed input gave different numbers" in \
        report["results"][RANDOM_CHECKS[1]]["message"]


def test_skips_are_summed_up_and_strict_fails_on_them(build_test_plugin, tmp_path):
    path = build_test_plugin(KERNEL_C_PLUGIN, CONFORMANT=True, WITH_NEG=True,
                             PLATFORM_NAME="KC_DEV", DEVICE_TYPE="KC")
    result, report = conformance(path, "-k", "TestKernels", tmp_path=tmp_path)
    assert result.returncode == 0
    skipped = [n for n, r in report["results"].items() if r["outcome"] == "skipped"]
    assert skipped
    assert f"pluggable conformance: {len(skipped)} check(s) skipped:" in result.stdout
    assert "pluggable's library has no op 'Typed' to compare against: " in result.stdout
    result, report = conformance(path, "-k", "TestKernels", "--strict", tmp_path=tmp_path)
    assert result.returncode == 1 and report["exit_status"] == 1
    assert f"{len(skipped)} check(s) skipped (--strict: the run fails):" in result.stdout


def test_two_kernels_matching_one_node_fail_the_registration_check(build_test_plugin,
                                                                   tmp_path):
    path = build_test_plugin(KERNEL_C_PLUGIN, CONFORMANT=True, DUPLICATE=True,
                             PLATFORM_NAME="KC_DUP", DEVICE_TYPE="KCDUP")
    result, report = conformance(path, tmp_path=tmp_path)
    check = "TestRegistrations::test_no_two_kernels_match_one_node_at_one_priority"
    assert failed(report) == [check]
    message = report["results"][check]["message"]
    assert "Multiple OpKernel registrations match NodeDef at the same priority" in message
    assert "Dup on KCDUP at priority 0: 'DupFirst' and 'DupSecond' (T in {float32})" in message


GRADIENT_CHECK = "TestGradientKernels::test_gradient_kernel_matches_finite_differences"


def test_the_xpus_gradient_kernels_pass(xpu_platform, tmp_path):
    result, report = conformance(xpu_platform.path, "-k", "Gradient", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    outcomes = {n: r["outcome"] for n, r in report["results"].items()
                if n.startswith("TestGradientKernels")}
    kernels = ["ReluGrad", "BiasAddGrad", "Conv2DBackpropInput", "Conv2DBackpropFilter",
               "MaxPoolGrad", "SoftmaxCrossEntropyWithLogits",
               "SparseSoftmaxCrossEntropyWithLogits"]
    assert outcomes == {f"{GRADIENT_CHECK}[{k}-{t}]": "passed"
                        for k in kernels for t in ("float32", "float64")}


def test_a_wrong_gradient_kernel_fails_the_gradient_check(build_test_plugin, tmp_path):
    good = build_test_plugin(KERNEL_C_PLUGIN, CONFORMANT=True, WITH_RELU=True,
                             PLATFORM_NAME="KC_DEV", DEVICE_TYPE="KC")
    result, report = conformance(good, tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    assert report["results"][f"{GRADIENT_CHECK}[ReluGrad-float32]"]["outcome"] == "passed"

    bad = build_test_plugin(KERNEL_C_PLUGIN, CONFORMANT=True, WITH_RELU=True,
                            BUG_RELU_GRAD=True, PLATFORM_NAME="KC_DEV", DEVICE_TYPE="KC")
    result, report = conformance(bad, tmp_path=tmp_path)
    # The gradient check and the kernel tier's check of ReluGrad against its reference catch
    # it; the forward kernel is right.
    assert sorted(failed(report)) == [
        f"{GRADIENT_CHECK}[ReluGrad-float32]",
        "TestKernels::test_kernel_matches_reference[ReluGrad-float32]"]
    message = report["results"][f"{GRADIENT_CHECK}[ReluGrad-float32]"]["message"]
    assert "ReluGrad (float32)" in message and "finite differences of Relu" in message
    assert report["results"]["TestKernels::test_kernel_matches_reference[Relu-float32]"][
        "outcome"] == "passed"


def test_a_plugin_without_gradient_kernels_skips_the_tier(build_test_plugin, tmp_path):
    path = build_test_plugin(KERNEL_C_PLUGIN, CONFORMANT=True, WITH_NEG=True,
                             PLATFORM_NAME="KC_DEV", DEVICE_TYPE="KC")
    result, report = conformance(path, "-k", "Gradient", tmp_path=tmp_path)
    entry = report["results"][f"{GRADIENT_CHECK}[no-gradient-kernels]"]
    assert entry["outcome"] == "skipped" and "registers none of the gradient kernels" in \
        entry["message"]


def test_kernels_of_types_without_tensors_are_skipped(build_test_plugin, tmp_path):
    source = os.path.join(os.path.dirname(KERNEL_C_PLUGIN), "registration_plugin.c")
    path = build_test_plugin(source, CONFORMANT=True, NEG_PRIORITY=True, QUANTIZED_NEG=True,
                             PLATFORM_NAME="REG_CONF", DEVICE_TYPE="REGCONF")
    result, report = conformance(path, tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    results = report["results"]
    # One case per float32 kernel; the call runs NegHigh, the higher priority, both times.
    assert [results[f"TestKernels::test_kernel_matches_reference[Neg-float32_{i}]"]["outcome"]
            for i in (0, 1)] == ["passed", "passed"]
    quantized = results["TestKernels::test_kernel_matches_reference[Neg-qint8]"]
    assert quantized["outcome"] == "skipped"
    assert "pluggable has no qint8 tensors yet to compare with" in quantized["message"]


def test_a_plugin_that_does_not_load_fails_the_loading_check(build_test_plugin, tmp_path):
    result, report = conformance(build_test_plugin(INIT_ERROR=True), tmp_path=tmp_path)
    assert result.returncode != 0
    assert failed(report) == ["TestLoading::test_loads_and_validates"]
    assert "no device present" in report["results"][failed(report)[0]]["message"]
    others = [r["outcome"] for n, r in report["results"].items() if not n.startswith("TestLoading")]
    assert others and set(others) == {"skipped"}


def test_keyword_selects_checks(build_test_plugin, tmp_path):
    path = build_test_plugin(CONFORMANT=True, BUG_TIMER=True)
    result, report = conformance(path, "-k", "TestMemory", tmp_path=tmp_path)
    assert result.returncode == 0  # the broken timer is not among the selected checks
    assert report["results"] and all(n.startswith("TestMemory") for n in report["results"])


def test_the_pytest_plugin_runs_the_suite(build_test_plugin, tmp_path):
    path = build_test_plugin(CONFORMANT=True, BUG_MEMSET=True)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "--pluggable-plugin", path, "-k", "memset and not memset32"],
                            capture_output=True, text=True, cwd=str(tmp_path), timeout=300)
    assert result.returncode == 1, result.stdout
    assert "4 failed" in result.stdout and "TestMemory::test_memset[" in result.stdout


def test_a_missing_file_is_a_clear_error(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pluggable", "conformance",
                             str(tmp_path / "nope.so")], capture_output=True, text=True)
    assert result.returncode != 0
    assert "no such file" in result.stderr and "nope.so" in result.stderr


@pytest.mark.parametrize("kind", ["a library", "not ELF"])
def test_a_file_that_is_not_a_plugin_gets_one_line_and_status_2(kind, tmp_path):
    if kind == "a library":  # the C library's maths: a shared library with no entry point
        path = os.path.realpath(next(p for p in ("/lib/x86_64-linux-gnu/libm.so.6",
                                                 "/usr/lib/x86_64-linux-gnu/libm.so.6",
                                                 "/lib64/libm.so.6", "/usr/lib64/libm.so.6")
                                     if os.path.exists(p)))
    else:
        path = str(tmp_path / "notes.so")
        with open(path, "w") as f:
            f.write("these are notes, not a library\n")
    result = subprocess.run([sys.executable, "-m", "pluggable", "conformance", path],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pluggable conformance: {path} is not a "
                                                   f"plugin; verdict FAILED at step ")
    if kind == "a library":
        assert "step 'symbol lookup': the library exports none of the plugin entry points " \
               "(SE_InitPlugin, SE_InitializePlugin, TF_InitKernel, TF_InitGraph, " \
               "TF_InitProfiler)" in lines[0]
    else:
        assert "step 'file check'" in lines[0] and "not an ELF shared library" in lines[0]


REPO = os.path.dirname(os.path.dirname(HERE))
CROSS_DEVICE_CHECKS = [
    "TestCrossDevice::test_dtod_across_devices[source_stream]",
    "TestCrossDevice::test_event_record_across_devices",
    "TestCrossDevice::test_event_wait_across_devices",
    "TestCrossDevice::test_stream_dependency_across_devices",
]


@pytest.fixture(scope="module")
def same_device_only_xpu(tmp_path_factory):
    """The XPU built with -DXPU_SAME_DEVICE_ONLY: it refuses streams and events of its other
    device and copies into another device's memory, as it did when TensorFlow's
    MirroredStrategy failed on it (issue 23)."""
    out = tmp_path_factory.mktemp("xpu_variant") / "libxpu_same_device_only.so"
    sources = sorted(os.path.join(REPO, "plugins", "xpu", f)
                     for f in os.listdir(os.path.join(REPO, "plugins", "xpu"))
                     if f.endswith(".c"))
    cmd = [os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1",
           "-fPIC", "-shared", "-pthread", "-I", os.path.join(REPO, "include"),
           "-DXPU_SAME_DEVICE_ONLY", "-o", str(out), *sources, "-lm"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return str(out)


def test_conformance_catches_an_xpu_that_refuses_other_devices(same_device_only_xpu, tmp_path):
    """Exactly the cross-device checks fail; the same-device stream and copy checks, and a
    copy from the other device's memory on the destination's stream (which the old XPU
    already allowed), pass."""
    result, report = conformance(same_device_only_xpu, "-k", "Streams or Copies or CrossDevice",
                                 tmp_path=tmp_path, env={"PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    assert result.returncode != 0
    assert failed(report) == CROSS_DEVICE_CHECKS
    outcomes = {n: r["outcome"] for n, r in report["results"].items()}
    assert outcomes["TestCrossDevice::test_dtod_across_devices[destination_stream]"] == "passed"
    assert outcomes["TestStreams::test_stream_dependency"] == "passed"
    messages = " ".join(str(r) for n, r in report["results"].items() if n in CROSS_DEVICE_CHECKS)
    assert "is not a live stream of XPU device 1" in messages


def test_the_xpu_passes_the_cross_device_checks(xpu_platform, tmp_path):
    result, report = conformance(xpu_platform.path, "-k", "CrossDevice", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    assert sorted(n for n, r in report["results"].items() if r["outcome"] == "passed") == \
        sorted(CROSS_DEVICE_CHECKS + ["TestCrossDevice::test_dtod_across_devices"
                                      "[destination_stream]"])


def test_every_tier_of_the_checks_is_run():
    """The tiers `run` hands to its children are exactly the check classes, in file order: a
    tier missing there would never run."""
    import re

    from pluggable.tools.conformance import CHECKS, TIERS

    with open(CHECKS) as f:
        classes = re.findall(r"^class (Test\w+)", f.read(), re.M)
    assert list(TIERS) == classes
