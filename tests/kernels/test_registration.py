"""Kernel registration: what the registry records, how the host chooses among kernels, and
which registrations it rejects (with one PluginLoadWarning per plugin counting them and naming
the first, and `config.list_refused` listing every one)."""
from __future__ import annotations

import ctypes
import os
import warnings

import pytest

import pluggable
from pluggable.kernels import registry as kernels
from pluggable.abi.tf_datatype import TF_DataType
from pluggable.abi.tf_status import TF_Code
from pluggable.errors import FailedPreconditionError, PluginLoadWarning

PLUGINS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plugins")
KERNEL_C_PLUGIN = os.path.join(PLUGINS, "kernel_c_plugin.c")

F32, F64, I32 = (int(TF_DataType.TF_FLOAT), int(TF_DataType.TF_DOUBLE),
                 int(TF_DataType.TF_INT32))


def mine(path):
    return {r.kernel_name: r for r in kernels.all_registrations() if r.plugin == path}


def test_registrations_record_what_the_builder_said(kc):
    regs = mine(kc.path)
    typed = regs["TypedKernel"]
    assert (typed.op, typed.device_type, typed.label, typed.priority) == ("Typed", "KC", "", 0)
    # Two TypeConstraint calls for T accumulate; U has its own constraint.
    assert typed.constraints == {"T": frozenset({F32, F64}), "U": frozenset({I32})}
    assert regs["LabelledKernel"].label == "special"
    assert (regs["PrioLow"].priority, regs["PrioHigh"].priority) == (1, 5)
    assert regs["HostArgsKernel"].host_memory == frozenset({"shape", "count"})
    assert all(r.enabled and r.error_code == TF_Code.TF_OK for r in regs.values())
    assert os.path.isabs(typed.plugin) and typed.plugin == kc.platform.path


def test_mirrors_made_from_keys_read_the_other_fields_on_first_use(kc):
    # Discovery mirrors every registration from its keys in one call; the rest is read when
    # first asked for, and equals what a full read of the same registration gives.
    fields = ("op", "device_type", "plugin", "error_code", "enabled", "kernel_name", "label",
              "priority", "constraints", "host_memory", "is_async", "error_message")
    for mirrored in mine(kc.path).values():
        full = kernels.KernelRegistration(mirrored.id)
        assert [getattr(mirrored, f) for f in fields] == [getattr(full, f) for f in fields]
    with pytest.raises(AttributeError, match="no attribute 'colour'"):
        mirrored.colour
    # The mirrored fields themselves, before any detail is read (a read of the details
    # leaves them as they are).
    for fresh in kernels._mirror(0, kernels._Count()):
        with pytest.raises(AttributeError):
            object.__getattribute__(fresh, "kernel_name")  # not read yet
        full = kernels.KernelRegistration(fresh.id)
        assert [getattr(fresh, f) for f in fields[:5]] == [getattr(full, f) for f in fields[:5]]


def test_registration_keys_come_from_one_runtime_call(kc):
    count = kernels._Count()
    size = kernels._Keys(0, count, None, 0)  # capacity 0: the size it needs
    buffer = ctypes.create_string_buffer(size)
    assert kernels._Keys(0, count, buffer, size) == size
    keys = buffer.raw.split(b"\0")[:-1]
    assert len(keys) == 5 * count
    for r in mine(kc.path).values():
        op, device_type, source, code, enabled = keys[5 * r.id:5 * r.id + 5]
        assert (op.decode(), device_type.decode(), os.fsdecode(source), int(code),
                enabled == b"1") == (r.op, r.device_type, r.plugin, r.error_code, r.enabled)
    too_small = ctypes.create_string_buffer(size)
    assert kernels._Keys(0, count, too_small, size - 1) == size  # nothing written
    assert too_small.raw == bytes(size)
    for start, end in ((-1, 1), (2, 1), (0, count + 1)):
        assert kernels._Keys(start, end, None, 0) == -1


def test_registered_kernels_filters_by_op_and_device_type(kc):
    prio = kernels.registered_kernels("Prio", "KC")
    assert {r.kernel_name for r in prio if r.plugin == kc.path} == {"PrioLow", "PrioHigh"}
    assert all(r.op == "Prio" for r in kernels.registered_kernels("Prio"))
    assert all(r.device_type == "KC" for r in kernels.registered_kernels(device_type="KC"))
    assert kernels.registered_kernels("NoSuchOp") == []
    assert {r.plugin for r in kernels.registered_kernels("Prio", "KC", plugin=kc.path)} == \
        {kc.path}
    assert kernels.registered_kernels("Prio", "KC", plugin="/elsewhere.so") == []


def test_type_constraints_decide_matches(kc):
    typed = mine(kc.path)["TypedKernel"]
    assert typed.matches({"T": pluggable.float32, "U": pluggable.int32})
    assert typed.matches({"T": TF_DataType.TF_DOUBLE, "U": I32})       # enum and code
    assert typed.matches({"T": "float64", "U": "int32"})               # names
    assert not typed.matches({"T": pluggable.float16, "U": pluggable.int32})
    assert not typed.matches({"T": pluggable.float32})                 # U missing
    assert typed.matches({"T": [pluggable.float32, pluggable.float64], "U": I32})  # list(type)
    assert not typed.matches({"T": [pluggable.float32, pluggable.int8], "U": I32})
    assert typed.matches({"T": kernels.AttrList("type", ()), "U": I32})
    assert not typed.matches({"T": object(), "U": I32})


def test_labels_match_only_nodes_that_ask_for_them(kc):
    labelled = mine(kc.path)["LabelledKernel"]
    plain = mine(kc.path)["TypedKernel"]
    assert labelled.matches({"_kernel": "special"})
    assert not labelled.matches({})
    assert not plain.matches({"T": F32, "U": I32, "_kernel": "special"})


def test_the_highest_priority_kernel_is_chosen_and_runs(kc):
    import numpy as np

    chosen = max(kernels.registered_kernels("Prio", "KC"), key=lambda r: r.priority)
    assert chosen.kernel_name == "PrioHigh"
    with chosen.instantiate("p", {}) as kernel:
        (y,) = kernel.run(kc.executor, kc.stream, [kc.upload(np.zeros(3, np.float32))], [F32])
        assert list(kc.download(y, np.float32)) == [5.0] * 3


def test_disabling_a_registration(kc):
    low = mine(kc.path)["PrioLow"]
    low.set_enabled(False)
    try:
        assert low not in kernels.registered_kernels("Prio", "KC")  # the caller re-lists
        with pytest.raises(FailedPreconditionError, match="disabled"):
            low.instantiate("p", {})
    finally:
        low.set_enabled(True)
    assert low in kernels.registered_kernels("Prio", "KC")


def test_tf_init_kernel_runs_once_per_process(kc, private_manager, build_kernel_plugin):
    before = len(kernels.all_registrations())
    again = kernels.load_kernels(kc.platform)
    assert len(kernels.all_registrations()) == before
    assert {r.kernel_name for r in again} == set(mine(kc.path))


def test_list_plugins_records_provide_kernels(kc, private_manager):
    record = next(r for r in private_manager.records if r.path == kc.path)
    assert record.provides_kernels and record.status == "loaded"


def test_a_plugin_that_registers_nothing_is_fine(private_manager, build_kernel_plugin):
    path = build_kernel_plugin(KERNEL_C_PLUGIN, PLATFORM_NAME="KC_EMPTY", DEVICE_TYPE="KCEMPTY",
                               NO_KERNELS=True)
    private_manager.load_plugin(path)  # no warning (warnings are errors in the tests)
    assert mine(path) == {}
    record = next(r for r in private_manager.records if r.path == path)
    assert record.provides_kernels  # it exports TF_InitKernel, which did nothing


def test_unknown_device_types_are_rejected_with_one_warning_and_cpu_is_accepted(
        private_manager, build_kernel_plugin):
    path = build_kernel_plugin(KERNEL_C_PLUGIN, PLATFORM_NAME="KC_REJ", DEVICE_TYPE="KCREJ",
                               REJECTED=True)
    with pytest.warns(PluginLoadWarning) as caught:
        private_manager.load_plugin(path)
    (message,) = [str(w.message) for w in caught]  # one warning for the plugin's kernels
    assert message.startswith(f"pluggable: plugin {path}: TF_InitKernel: 1 of its ")
    assert "kernels is ignored (kernel 'ForNopeKernel' for op 'ForNope' on device type " \
           "'NOPE': no loaded plugin provides device type 'NOPE'" in message
    assert f"pluggable.config.list_refused({path!r})" in message
    refused = pluggable.config.list_refused(path)
    assert [(r.what, r.name, r.op, r.device_type) for r in refused] == [
        ("kernel", "ForNopeKernel", "ForNope", "NOPE")]
    assert refused[0].reason.startswith("no loaded plugin provides device type 'NOPE'")
    regs = mine(path)
    # A kernel for "CPU" runs on the host's CPU device, as TensorFlow runs it.
    assert not regs["ForNopeKernel"].enabled and regs["ForCpuKernel"].enabled
    assert regs["TypedKernel"].enabled
    assert kernels.registered_kernels("ForNope") == []
    assert [r.kernel_name for r in kernels.registered_kernels("ForCpu", "CPU")] == ["ForCpuKernel"]
    with pytest.raises(FailedPreconditionError):
        regs["ForNopeKernel"].instantiate("n", {})


def test_a_device_type_of_another_loaded_plugin_is_accepted(private_manager, build_test_plugin,
                                                            build_kernel_plugin):
    # The "NOPE" device type exists once a plugin provides it.
    private_manager.load_plugin(build_test_plugin(PLATFORM_NAME="NOPE_DEV", DEVICE_TYPE="NOPE"))
    path = build_kernel_plugin(KERNEL_C_PLUGIN, PLATFORM_NAME="KC_REJ_TWO",
                               DEVICE_TYPE="KCREJTWO", REJECTED=True)
    with warnings.catch_warnings():  # NOPE and CPU are both loaded device types: no warning
        warnings.simplefilter("error", PluginLoadWarning)
        private_manager.load_plugin(path)
    assert mine(path)["ForNopeKernel"].enabled and mine(path)["ForCpuKernel"].enabled


def test_a_duplicate_registration_is_accepted_as_tensorflow_does(private_manager,
                                                                   build_kernel_plugin):
    # TensorFlow's kernel registry keeps both (a multimap); only a lookup that both match
    # fails (test_dispatch_choice.py runs that).
    path = build_kernel_plugin(KERNEL_C_PLUGIN, PLATFORM_NAME="KC_DUP", DEVICE_TYPE="KCDUP",
                               DUPLICATE=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PluginLoadWarning)
        private_manager.load_plugin(path)
    lib = ctypes.CDLL(path)
    # codes: AsyncKernel, DupFirst, DupSecond
    assert [lib.kc_registration_code(i) for i in range(3)] == [0, 0, 0]
    regs = mine(path)
    assert regs["DupFirst"].enabled and regs["DupSecond"].enabled
    assert [r.kernel_name for r in kernels.registered_kernels("Dup", "KCDUP", plugin=path)] == \
        ["DupFirst", "DupSecond"]
    assert {(k.kernel_name, k.priority) for k in pluggable.config.list_kernels("Dup", "KCDUP")} == \
        {("DupFirst", 0), ("DupSecond", 0)}
    assert pluggable.config.list_refused(path) == []


def test_malformed_registrations_fail_with_a_status_and_a_warning(private_manager,
                                                                  build_kernel_plugin):
    path = build_kernel_plugin(KERNEL_C_PLUGIN, PLATFORM_NAME="KC_BAD", DEVICE_TYPE="KCBAD",
                               MALFORMED=True)
    with pytest.warns(PluginLoadWarning) as caught:
        private_manager.load_plugin(path)
    lib = ctypes.CDLL(path)
    codes = [lib.kc_registration_code(i) for i in range(6)]
    assert codes == [0, TF_Code.TF_INVALID_ARGUMENT, TF_Code.TF_INVALID_ARGUMENT,
                     TF_Code.TF_UNIMPLEMENTED, TF_Code.TF_INVALID_ARGUMENT,
                     TF_Code.TF_UNIMPLEMENTED]
    (text,) = [str(w.message) for w in caught]  # one warning, naming the first three
    assert "TF_InitKernel: 4 of its " in text and "; and 1 more)" in text
    assert "compute_func is NULL for op 'NoCompute'" in text
    assert "was set twice ('one', then 'two')" in text
    assert "serialized KernelDef is not implemented by pluggable" in text
    # the bad type constraint is only the plugin's status; the fourth is in the full list
    reasons = [r.reason for r in pluggable.config.list_refused(path)]
    assert len(reasons) == 4 and "the builder is NULL" in reasons[3]
    assert all(r.startswith("TF_RegisterKernelBuilder failed with TF_") for r in reasons)
    regs = mine(path)
    assert not any(regs[n].enabled for n in ("NoComputeKernel", "TwoLabelsKernel",
                                              "WithDefKernel", "NullBuilder"))


def test_kernels_of_the_cpp_plugin(ktest):
    (registration,) = [r for r in kernels.registered_kernels(device_type="KTEST")
                       if r.plugin == ktest.path]
    assert (registration.op, registration.kernel_name) == ("ScaleAndShift", "ScaleAndShiftOp")
    assert "ScaleAndShiftOp" in repr(registration)
