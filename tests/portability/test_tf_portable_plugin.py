"""A plugin written against TensorFlow's public headers only (tests/plugins/
tf_portable_plugin.c) runs here unchanged: its ops registered through ops.h become ops of the
library with their shape functions, its variable kernels work through kernels_experimental.h,
its graph optimizer (grappler.h) is validated and listed. Each case runs in a fresh
interpreter: a loaded plugin's ops and device type stay for the life of the process.
(tests/abi/test_tf_conformance.py builds the same source against TensorFlow's headers.)"""
from __future__ import annotations

import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(os.path.dirname(HERE), "plugins", "tf_portable_plugin.c")
PRELUDE = """
import json, warnings
import numpy as np
import pluggable
from pluggable import errors, raw_ops
warnings.simplefilter("error", pluggable.PluginLoadWarning)
"""


@pytest.fixture(scope="module")
def portable(build_test_plugin):
    return lambda **macros: build_test_plugin(SOURCE, **macros)


def run(run_python, plugin: str, body: str, env=None):
    """Runs ``body`` after loading ``plugin``; returns what it printed as JSON."""
    code = PRELUDE + f"pluggable.load_plugin({plugin!r})\n" + body
    result = run_python(code, env={"PLUGGABLE_DISABLE_AUTOLOAD": "1", **(env or {})})
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_custom_ops_run_with_their_shape_functions(run_python, portable):
    out = run(run_python, portable(), """
x = np.arange(6, dtype=np.float32).reshape(2, 3)
with pluggable.device("/port:0"):
    z = raw_ops.PortableScaleAdd(x=x, y=np.ones((2, 3), np.float32), scale=2.0)
    rows = raw_ops.PortableRowSum(x=x.astype(np.float64))
    default = raw_ops.PortableScaleAdd(x=x, y=x)
print(json.dumps({"z": z.numpy().tolist(), "z_device": z.device, "rows": rows.numpy().tolist(),
                  "rows_dtype": rows.dtype.name, "default": default.numpy().tolist()}))
""")
    assert out == {"z": [[1, 3, 5], [7, 9, 11]], "z_device": "/device:PORT:0",
                   "rows": [3, 12], "rows_dtype": "float64",
                   "default": [[0, 2, 4], [6, 8, 10]]}


def test_kernels_can_use_string_temporaries(run_python, portable):
    """PortableStringLengths builds short, long and borrowed TF_TStrings in a TF_AllocateTemp
    string tensor (no shape function: the kernel's output shape is taken)."""
    out = run(run_python, portable(), """
with pluggable.device("/port:0"):
    y = raw_ops.PortableStringLengths(x=np.zeros(7, np.float32))
print(json.dumps([y.dtype.name, y.numpy().tolist()]))
""")
    assert out == ["int64", [13, 7, 14, 13, 28, 35, 13]]


def test_shape_functions_refuse_bad_inputs_at_dispatch(run_python, portable):
    out = run(run_python, portable(), """
messages = {}
with pluggable.device("/port:0"):
    for name, call in (
            ("rank", lambda: raw_ops.PortableRowSum(x=np.ones(3, np.float32))),
            ("shapes", lambda: raw_ops.PortableScaleAdd(x=np.ones((2, 3), np.float32),
                                                        y=np.ones(3, np.float32))),
            ("type", lambda: raw_ops.PortableRowSum(x=np.ones((2, 2), np.int32)))):
        try:
            call()
        except errors.InvalidArgumentError as exc:
            messages[name] = str(exc)
try:
    raw_ops.PortableRowSum(x=np.ones((2, 2), np.float32))  # on the CPU
except errors.UnimplementedError as exc:
    messages["cpu"] = str(exc)
print(json.dumps(messages))
""")
    assert "rank 2, but has rank 1" in out["rank"] and "shape function" in out["rank"]
    assert "x and y must have one shape" in out["shapes"]
    assert "int32" in out["type"] and "float32, float64" in out["type"]
    assert "no CPU kernel" in out["cpu"] and "pluggable.device" in out["cpu"]


def test_plugin_ops_have_tensorflow_style_signatures_and_only_plugin_kernels(run_python,
                                                                             portable):
    out = run(run_python, portable(), """
import inspect
sig = inspect.signature(raw_ops.PortableScaleAdd)
kernels = pluggable.config.list_kernels("PortableScaleAdd")
print(json.dumps({"listed": "PortableRowSum" in dir(raw_ops),
                  "sig": [[p.name, None if p.default is p.empty else p.default]
                          for p in sig.parameters.values()],
                  "kernels": sorted([k.device_type, k.type_constraints["T"][0]]
                                    for k in kernels)}))
""")
    assert out["sig"] == [["x", None], ["y", None], ["scale", 1.0], ["name", None]]
    assert out["listed"]  # dir(raw_ops) shows the plugin's ops
    assert out["kernels"] == [["PORT", "float32"], ["PORT", "float64"]]  # no CPU kernel


def test_variables_use_the_plugins_variable_kernels(run_python, portable):
    out = run(run_python, portable(), """
from pluggable.eager import dispatch
with pluggable.device("/port:0"):
    v = pluggable.Variable(np.array([1.0, 2.0, 3.0]), shape=pluggable.TensorShape(None))
    v.assign_add(np.array([1.0, 1.0, 1.0]))
    v.assign_sub(np.array([0.5, 0.5, 0.5]))
    raw_ops.ResourceApplyGradientDescent(var=v, alpha=np.float64(2.0),
                                         delta=np.array([0.25, 0.5, 0.75]))
    after_update = v.numpy().tolist()
    v.assign(np.zeros((2, 2)))  # a new shape: fresh memory from TF_AssignVariable
    used = sorted({k.registration.kernel_name for k in dispatch._kernel_cache.values()})
print(json.dumps({"values": after_update, "reshaped": v.numpy().tolist(),
                  "device": v.device, "kernels": used}))
""")
    assert out["values"] == [1.0, 1.5, 2.0]
    assert out["reshaped"] == [[0, 0], [0, 0]]
    assert out["device"] == "/device:PORT:0"
    assert {"PortAssignVariableOp_2", "PortAssignAddVariableOp_2", "PortAssignSubVariableOp_2",
            "PortResourceApplyGradientDescent_2"} <= set(out["kernels"])


@pytest.mark.parametrize("case, error, words", [
    (0, "InvalidArgumentError", "input 1 is not a resource variable"),
    (1, "FailedPreconditionError", "is uninitialized"),
    (2, "UnimplementedError", "TF_TemporaryVariable is not implemented by pluggable"),
    (3, "UnimplementedError", "TF_AddNVariant (variant tensors) is not implemented"),
    (4, "OutOfRangeError", "input 7 is out of range"),
    (5, "OutOfRangeError", "TF_IsRefInput: input index out of range"),
])
def test_kernels_experimental_misuse_is_reported(run_python, portable, case, error, words):
    out = run(run_python, portable(PORT_MISUSE=True), f"""
with pluggable.device("/port:0"):
    (handle,) = pluggable.eager.dispatch.execute("VarHandleOp", [], {{"dtype": "float32",
                                                                 "shape": (1,)}})
    try:
        raw_ops.PortableMisuse(resource=handle, value=np.ones(1, np.float32), case={case})
        print(json.dumps(["no error", ""]))
    except errors.PluggableError as exc:
        print(json.dumps([type(exc).__name__, str(exc)]))
""")
    assert out[0] == error and words in out[1]


def test_malformed_and_unusable_op_specs(run_python, portable):
    plugin = portable(PORT_BAD_SPECS=True)
    code = PRELUDE.replace('warnings.simplefilter("error", pluggable.PluginLoadWarning)', "") + f"""
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    pluggable.load_plugin({plugin!r})
from pluggable.oplib.core import OPS
print(json.dumps({{"warnings": [str(w.message) for w in caught],
                  "ops": sorted(n for n in OPS if n.startswith("Portable"))}}))
"""
    result = run_python(code, env={"PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    out = json.loads(result.stdout.strip().splitlines()[-1])
    # TF_RegisterOpDefinition's own refusals, as the plugin prints them
    assert "input spec 'x' must read 'name: type'" in result.stderr
    assert "op 'PortableRowSum' is already registered with other inputs" in result.stderr
    # PortableRef registered, but a reference input needs TensorFlow's graph runtime.
    assert out["ops"] == ["PortableRowSum", "PortableScaleAdd", "PortableStringLengths"]
    assert any("'PortableRef'" in w and "Ref(float)" in w for w in out["warnings"])


def test_graph_optimizer_is_listed_by_the_cli(run_python, portable, tmp_path):
    good, bad = tmp_path / "good", tmp_path / "bad"
    for folder, plugin in ((good, portable()), (bad, portable(PORT_BAD_OPTIMIZER=True))):
        folder.mkdir()
        os.symlink(plugin, folder / "libportable.so")
    listing = run_python(None, args=("-m", "pluggable", "plugins"),
                         env={"PLUGGABLE_PLUGIN_PATH": str(good)}).stdout
    assert "graph optimizer (TF_InitGraph)" in listing
    assert "for PORT (remapping=off); not run: pluggable builds no graphs" in listing
    listing = run_python(None, args=("-m", "pluggable", "plugins"),
                         env={"PLUGGABLE_PLUGIN_PATH": str(bad)}).stdout
    assert "refused: TF_InitGraph: TP_Optimizer.optimize_func is required but the plugin " \
           "left it NULL" in listing
    # The plugin itself stays loaded, with a warning that says why.
    result = run_python(PRELUDE + f"""
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    platform = pluggable.load_plugin({portable(PORT_BAD_OPTIMIZER=True)!r})
print(json.dumps([platform.device_type, [str(w.message) for w in caught]]))
""", env={"PLUGGABLE_DISABLE_AUTOLOAD": "1"})
    device_type, caught = json.loads(result.stdout.strip().splitlines()[-1])
    assert device_type == "PORT"
    assert any("graph optimizer is refused" in w for w in caught)
