"""Registrations as TensorFlow 2.21 treats them (tests/plugins/registration_plugin.c): a kernel
registered twice loads; of the kernels a call matches the highest priority runs, and two at
that priority make the call fail as TensorFlow's lookup does; ops and kernels may name every
attribute kind and every type of tf_datatype.h, and a call that needs what the host lacks
says what; a plugin's kernels run only on its own devices; refusals make one warning per
plugin. Each case runs in a fresh interpreter: ops and device types of a loaded plugin stay
for the life of the process."""
from __future__ import annotations

import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(os.path.dirname(HERE), "plugins", "registration_plugin.c")
PRELUDE = """
import json, warnings
import numpy as np
import pluggable
from pluggable import errors, raw_ops
from pluggable.kernels import registry
warnings.simplefilter("error", pluggable.PluginLoadWarning)
"""


@pytest.fixture(scope="module")
def plugin(build_test_plugin):
    return lambda **macros: build_test_plugin(SOURCE, **macros)


def run(run_python, body: str, *plugins):
    """Runs ``body`` after loading ``plugins`` (path, priority); returns its last printed
    line as JSON."""
    loads = "".join(f"pluggable.load_plugin({path!r}, priority={priority})\n"
                    for path, priority in plugins)
    result = run_python(PRELUDE + loads + body, env={"PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_kernel_registered_twice_loads_and_a_call_matching_both_fails(run_python, plugin):
    path = plugin(PLATFORM_NAME="REG_TWICE", DEVICE_TYPE="REGTWICE", NEG_TWICE=True)
    out = run(run_python, """
x = np.array([1.5, -2.0], np.float32)
names = [r.kernel_name for r in registry.registered_kernels("Neg", "REGTWICE")]
listed = [(k.kernel_name, k.priority) for k in pluggable.config.list_kernels("Neg", "REGTWICE")]
try:
    with pluggable.device("/device:REGTWICE:0"):
        raw_ops.Neg(x=x)
    error = None
except errors.InvalidArgumentError as exc:
    error = str(exc)
with pluggable.device("/device:REGTWICE:0"):
    other = raw_ops.Neg(x=np.array([1, 2], np.int32))  # no kernel for int32: the CPU's
# Each registration is a working kernel: with the other one disabled, it runs.
ran = []
first, second = registry.registered_kernels("Neg", "REGTWICE")
for off in (second, first):
    off.set_enabled(False)
    with pluggable.device("/device:REGTWICE:0"):
        y = raw_ops.Neg(x=x)
    ran.append([y.numpy().tolist(), y.device])
    off.set_enabled(True)
print(json.dumps({"names": names, "listed": listed, "error": error, "ran": ran,
                  "other": other.numpy().tolist(), "refused": len(pluggable.config.list_refused())}))
""", (path, 0))
    assert out["names"] == ["NegOnce", "NegAgain"]
    assert out["listed"] == [["NegOnce", 0], ["NegAgain", 0]]
    assert out["other"] == [-1, -2] and out["refused"] == 0
    assert out["ran"] == [[[-1.5, 2.0], "/device:REGTWICE:0"]] * 2
    error = out["error"]
    assert error.startswith("Multiple OpKernel registrations match NodeDef at the same "
                            "priority 'Neg' on /device:REGTWICE:0 (T=float32): ")
    assert ("'kernel NegOnce for Neg on REGTWICE, priority 0, T in {float32}' and "
            "'kernel NegAgain for Neg on REGTWICE, priority 0, T in {float32}'") in error
    assert path in error and "pluggable.config.list_kernels('Neg')" in error


@pytest.mark.parametrize("high_first", [False, True])
def test_the_higher_priority_kernel_runs(run_python, plugin, high_first):
    macros = {"NEG_HIGH_FIRST": True} if high_first else {}
    path = plugin(PLATFORM_NAME="REG_PRIO", DEVICE_TYPE="REGPRIO", NEG_PRIORITY=True, **macros)
    out = run(run_python, """
with pluggable.device("/device:REGPRIO:0"):
    y = raw_ops.Neg(x=np.array([1.5, -2.0], np.float32))
    again = raw_ops.Neg(x=np.array([4.0], np.float32))
print(json.dumps([y.numpy().tolist(), again.numpy().tolist(), y.device]))
""", (path, 0))
    assert out == [[-1.5, 2.0], [-4.0], "/device:REGPRIO:0"]  # NegHigh's, never NegLow's


def test_two_plugins_of_one_device_type_keep_their_kernels(run_python, plugin):
    # A registers Neg (y = -2x) for TWIN; B, loaded with a higher priority, provides TWIN's
    # devices and registers no Neg. A's kernel must never run on B's device.
    a = plugin(PLATFORM_NAME="TWIN_A", DEVICE_TYPE="TWIN", NEG_SCALE=2)
    b = plugin(PLATFORM_NAME="TWIN_B", DEVICE_TYPE="TWIN")
    body = """
import pluggable.eager.dispatch as dispatch
x = np.array([1.0, -3.0], np.float32)
platforms = [d.platform.name for d in [pluggable.device("/device:TWIN:0").__enter__()]]
kernel_sources = sorted(r.plugin for r in registry.registered_kernels("Neg", "TWIN"))
pluggable.config.set_soft_device_placement(False)
try:
    with pluggable.device("/device:TWIN:0"):
        raw_ops.Neg(x=x)
    strict = None
except errors.NotFoundError as exc:
    strict = str(exc)
pluggable.config.set_soft_device_placement(True)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with pluggable.device("/device:TWIN:0"):
        soft = raw_ops.Neg(x=x)
print(json.dumps({"platform": platforms[0], "sources": kernel_sources, "strict": strict,
                  "soft": soft.numpy().tolist(), "soft_device": soft.device,
                  "placement": [str(w.message) for w in caught]}))
"""
    result = run_python(PRELUDE.replace('warnings.simplefilter("error", '
                                        'pluggable.PluginLoadWarning)', "")
                        + f"pluggable.load_plugin({a!r}, priority=1)\n"
                        + f"pluggable.load_plugin({b!r}, priority=2)\n" + body,
                        env={"PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["platform"] == "TWIN_B"
    assert out["sources"] == [a]  # A's kernel is registered, for A's devices only
    assert out["strict"].startswith("no kernel for Neg on /device:TWIN:0")
    assert out["soft"] == [-1.0, 3.0] and out["soft_device"].endswith("CPU:0")  # not -2x
    assert any("Neg has no TWIN kernel" in m for m in out["placement"])


def test_twin_plugin_runs_its_own_kernel(run_python, plugin):
    # The same pair with B's own Neg (y = -3x): B's device runs B's kernel, never A's.
    a = plugin(PLATFORM_NAME="TWIN_A", DEVICE_TYPE="TWIN", NEG_SCALE=2)
    b = plugin(PLATFORM_NAME="TWIN_B", DEVICE_TYPE="TWIN", NEG_SCALE=3)
    result = run_python(PRELUDE.replace('warnings.simplefilter("error", '
                                        'pluggable.PluginLoadWarning)', "")
                        + f"pluggable.load_plugin({a!r}, priority=1)\n"
                        + f"pluggable.load_plugin({b!r}, priority=2)\n" + """
with pluggable.device("/device:TWIN:0"):
    y = raw_ops.Neg(x=np.array([1.0, -3.0], np.float32))
print(json.dumps([y.numpy().tolist(), y.device]))
""", env={"PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out == [[-3.0, 9.0], "/device:TWIN:0"]


def test_every_attribute_kind_and_dtype_registers(run_python, plugin):
    path = plugin(PLATFORM_NAME="REG_KINDS", DEVICE_TYPE="REGKINDS", KINDS=True)
    out = run(run_python, """
from pluggable.eager import OPS
kinds = {a.name: a.kind for a in OPS["RegKinds"].attrs}
allowed = {a.name: [t.name for t in a.allowed] for a in OPS["RegKinds"].attrs
           if a.allowed and a.kind in ("type", "list(type)")}
defaults = {a.name: repr(a.default) for a in OPS["RegKinds"].attrs}
kernels = {r.kernel_name: {k: list(v) for k, v in r.constraints.items()}
           for r in registry.registered_kernels(device_type="REGKINDS")}
listed = {k.kernel_name: k.type_constraints for k in pluggable.config.list_kernels(device_type="REGKINDS")}
coverage = {op: row for op, row in pluggable.config.kernel_coverage("REGKINDS").items()
            if op.startswith("Reg")}  # what `python -m pluggable kernels` prints
print(json.dumps({"kinds": kinds, "allowed": allowed, "defaults": defaults,
                  "kernels": kernels, "listed": listed, "coverage": coverage,
                  "ops": sorted(n for n in OPS if n.startswith("Reg"))}))
""", (path, 0))
    assert out["ops"] == ["RegKinds", "RegQuantized", "RegScale", "RegTypeList"]
    assert out["kinds"] == {
        "s": "string", "i": "int", "f": "float", "b": "bool", "t": "type", "sh": "shape",
        "te": "tensor", "fn": "func", "ls": "list(string)", "li": "list(int)",
        "lf": "list(float)", "lb": "list(bool)", "lt": "list(type)", "lsh": "list(shape)",
        "lte": "list(tensor)", "lfn": "list(func)", "n": "type", "r": "type", "q": "type",
        "e": "type"}
    assert out["allowed"]["q"] == ["qint8", "quint8", "qint16", "quint16", "qint32"]
    assert out["allowed"]["e"] == [
        "float32", "float64", "int32", "int64", "uint8", "int16", "int8", "uint16", "float16",
        "uint32", "uint64", "bfloat16", "qint8", "quint8", "qint16", "quint16", "qint32",
        "string", "variant", "float8_e5m2", "int4"]
    assert "complex64" in out["allowed"]["n"] and "qint32" in out["allowed"]["n"]
    assert "complex64" not in out["allowed"]["r"]
    assert out["defaults"]["lt"] == "(pluggable.qint8, pluggable.bfloat16)"
    assert out["defaults"]["lsh"] == "((1,), (2, 3))"
    assert out["defaults"]["n"] == "pluggable.quint8"
    assert sorted(out["kernels"]["RegScaleQuantized"]["T"]) == [11, 12, 13, 15, 16]
    assert out["listed"]["RegScaleQuantized"] == {  # in tf_datatype.h's order
        "T": ["qint8", "quint8", "qint32", "qint16", "quint16"]}
    assert out["kernels"]["RegScaleFloat"] == {"T": [1]}
    assert out["coverage"] == {
        "RegKinds": {"REGKINDS": ["float32"]}, "RegQuantized": {"REGKINDS": ["qint8"]},
        "RegScale": {"REGKINDS": ["float32", "qint8", "quint8", "qint32", "qint16", "quint16"]},
        "RegTypeList": {"REGKINDS": []}}  # its kernel constrains no type


def test_calls_run_or_say_what_is_missing(run_python, plugin):
    path = plugin(PLATFORM_NAME="REG_CALLS", DEVICE_TYPE="REGCALLS", KINDS=True)
    out = run(run_python, """
from pluggable.eager.dispatch import execute
x = np.array([1.0, -2.0], np.float32)
errors_seen = {}
with pluggable.device("/device:REGCALLS:0"):
    scaled = raw_ops.RegScale(x=x).numpy().tolist()
    scaled3 = raw_ops.RegScale(x=x, factors=[3.0, 1.0], names=["p", "q"], flags=[False],
                               Tlist=["float32", "qint8"]).numpy().tolist()
    # Empty lists reach the kernel: it reads no factor (0).
    empty = raw_ops.RegScale(x=x, factors=[], names=[], Tlist=[]).numpy().tolist()
    for name, call in (
            ("T_qint8", lambda: execute("RegScale", [x], {"T": "qint8"})),
            ("fixed_qint8", lambda: raw_ops.RegQuantized(x=x)),
            ("type_list", lambda: raw_ops.RegTypeList(xs=[x])),
            ("tensor_attr", lambda: execute("RegKinds", [x], {"li": [1], "te": "1.0"})),
            ("shapes_attr", lambda: execute("RegKinds", [x], {"lsh": [[1]]}))):
        try:
            call()
            errors_seen[name] = None
        except errors.UnimplementedError as exc:
            errors_seen[name] = str(exc)
    try:
        execute("RegScale", [x], {"T": "qint64"})
    except errors.InvalidArgumentError as exc:
        errors_seen["unknown"] = str(exc)
print(json.dumps({"scaled": scaled, "scaled3": scaled3, "empty": empty, "errors": errors_seen}))
""", (path, 0))
    # Tlist types no tensor: a qint8 in it is only a code the kernel is given.
    assert out["scaled"] == [2.5, -5.0] and out["scaled3"] == [3.0, -6.0]
    assert out["empty"] == [0.0, 0.0]
    e = out["errors"]
    assert e["T_qint8"] == ("RegScale: attribute T=qint8: pluggable has no qint8 tensors yet "
                            "(dtype qint8 is not supported for tensors), so RegScale cannot "
                            "run with it")
    assert e["fixed_qint8"] == ("RegQuantized: x is a qint8 tensor, and pluggable has no qint8 "
                                "tensors yet (dtype qint8 is not supported for tensors)")
    assert e["type_list"] == ("RegTypeList: xs is a list of tensors typed by the list(type) "
                              "attribute Tin, which pluggable does not support yet")
    assert e["tensor_attr"].startswith("RegKinds: attribute te is a tensor, and pluggable "
                                       "cannot give tensor attributes to kernels yet")
    assert e["shapes_attr"].startswith("RegKinds: attribute lsh is a list(shape), and "
                                       "pluggable cannot give list(shape) attributes")
    assert "attribute T must be a type, got 'qint64'" in e["unknown"]


def test_refusals_make_one_warning_per_plugin(run_python, plugin):
    path = plugin(PLATFORM_NAME="REG_REFUSED", DEVICE_TYPE="REGREFUSED", REFUSED=40,
                  NEG_SCALE=1)
    result = run_python(f"""
import json, warnings
import pluggable
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    pluggable.load_plugin({path!r})
refused = pluggable.config.list_refused({path!r})
print(json.dumps({{"warnings": [str(w.message) for w in caught
                               if issubclass(w.category, pluggable.PluginLoadWarning)],
                  "refused": [[r.what, r.name, r.op] for r in refused],
                  "reason": refused[0].reason}}))
""", env={"PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    out = json.loads(result.stdout.strip().splitlines()[-1])
    (message,) = out["warnings"]
    assert len(message) < 1500
    assert message.startswith(f"pluggable: plugin {path}: TF_InitKernel: 40 of its 41 kernels "
                              f"are ignored (kernel 'Nowhere0' for op 'Neg' on device type "
                              f"'NOWHERE': no loaded plugin provides device type 'NOWHERE'")
    assert "kernel 'Nowhere2'" in message and "kernel 'Nowhere3'" not in message
    assert "; and 37 more); 1 of its 1 ops is ignored (op 'RegWithRef': its spec cannot be " \
           "used: " in message
    assert f"pluggable.config.list_refused({path!r})" in message
    assert out["refused"][0] == ["op", "RegWithRef", "RegWithRef"]
    assert out["refused"][1:] == [["kernel", f"Nowhere{i}", "Neg"] for i in range(40)]
    assert "Ref(T)" in out["reason"]
    doctor = run_python(None, args=("-m", "pluggable", "doctor", path),
                        env={"PLUGGABLE_DISABLE_AUTOLOAD": "1"}, check=False)
    lines = doctor.stdout.splitlines()
    assert sum(line.startswith("refused  kernel 'Nowhere") for line in lines) == 40
    assert any(line.startswith("refused  op 'RegWithRef'") for line in lines)
    assert "40 kernel registration(s) and 1 op(s) refused" in doctor.stdout


def _register_many(run_python, plugin, count: int) -> dict:
    name = "SMALL" if count < 10_000 else "LARGE"
    path = plugin(PLATFORM_NAME=f"REG_MANY_{name}", DEVICE_TYPE=f"REGMANY{name}", MANY=count)
    return run(run_python, f"""
import ctypes, time
from pluggable.base import native
comparisons = native.lib.pluggable_OpNameComparisons
comparisons.restype = ctypes.c_int64
before = comparisons()
started = time.perf_counter()
pluggable.load_plugin({path!r}, isolate=False)
seconds = time.perf_counter() - started
last = {count - 1}
with pluggable.device("/device:REGMANY{name}:0"):
    y = getattr(raw_ops, f"RegMany{{last}}")(x=np.array([1.5, -2.0], np.float32))
print(json.dumps({{"comparisons": comparisons() - before, "seconds": seconds,
                  "kernels": len(registry.registered_kernels(device_type="REGMANY{name}")),
                  "y": y.numpy().tolist()}}))
""")


def test_registration_work_grows_linearly_with_the_number_of_ops_and_kernels(run_python,
                                                                              plugin):
    # Each op name is looked up among the ones registered before it: with a hash index the
    # names compared grow with the count, where a scan grew with its square (16x for 4x).
    small, large = (_register_many(run_python, plugin, n) for n in (5_000, 20_000))
    assert small["kernels"] == 5_000 and large["kernels"] == 20_000
    assert small["y"] == large["y"] == [-1.5, 2.0]
    assert large["comparisons"] < 8 * max(1, small["comparisons"])
    assert large["comparisons"] < 2 * 20_000
    # Wall time is noisy on a shared machine: the bound only rules out the square (16x).
    assert large["seconds"] < 10 * small["seconds"] + 1.0, (small, large)


def test_refusing_many_kernels_rebuilds_the_kernel_index_once(run_python, plugin):
    # Each refused kernel used to rebuild the whole index (registry.generation counts the
    # rebuilds): refusing n kernels cost O(n^2), 60 s for 8 000.
    path = plugin(PLATFORM_NAME="REG_REFUSING", DEVICE_TYPE="REGREFUSING", REFUSED=3000)
    out = run(run_python, f"""
import time
warnings.simplefilter("ignore", pluggable.PluginLoadWarning)
before = registry.generation
started = time.perf_counter()
pluggable.load_plugin({path!r}, isolate=False)
print(json.dumps({{"rebuilds": registry.generation - before,
                  "seconds": time.perf_counter() - started,
                  "refused": len(pluggable.config.list_refused({path!r})),
                  "enabled": [r.enabled for r in registry.all_registrations()
                              if r.device_type == "NOWHERE"][:3]}}))
""")
    assert out["refused"] == 3001  # 3 000 kernels and the op with a reference input
    assert out["enabled"] == [False, False, False]
    assert out["rebuilds"] <= 2, out
