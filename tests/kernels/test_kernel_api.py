"""The kernel C API as plugins see it: attributes reach create_func, inputs, outputs,
temporaries and the stream reach compute_func, and every failure becomes the right error
with nothing leaked (the fixtures check the device allocator is empty after each test)."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import pluggable
from pluggable.abi.tf_datatype import TF_DataType
from pluggable.errors import (FailedPreconditionError, InternalError, InvalidArgumentError,
                              OutOfRangeError, UnimplementedError)
from pluggable.kernels.registry import AttrList, KernelInput, free_host_output

F32, F64, I32, I64 = (int(TF_DataType.TF_FLOAT), int(TF_DataType.TF_DOUBLE),
                      int(TF_DataType.TF_INT32), int(TF_DataType.TF_INT64))


# -- the C++ plugin: ScaleAndShift ------------------------------------------------------------
SCALE_ATTRS = {"scale": 2.5, "shifts": [1, 2, 3], "T": pluggable.float32}


def test_attributes_reach_the_kernel_and_the_output_proves_it(ktest):
    registration = ktest.kernel("ScaleAndShift")
    assert registration.constraints == {"T": frozenset({F32})}
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with registration.instantiate("scale_and_shift", SCALE_ATTRS) as kernel:
        (y,) = kernel.run(ktest.executor, ktest.stream, [ktest.upload(x)], [F32])
        assert (y.dtype, y.shape, y.nbytes, y.owned, y.aliased_input) == (F32, (3, 4), 48, True,
                                                                          -1)
        np.testing.assert_allclose(ktest.download(y, np.float32), x * 2.5 + 6)


def test_the_kernel_gets_the_stream_the_host_passes(ktest):
    ktest.lib.ktest_last_stream.restype = ctypes.c_void_p
    other = ktest.executor.create_stream()
    try:
        with ktest.kernel("ScaleAndShift").instantiate("n", SCALE_ATTRS) as kernel:
            for stream in (ktest.stream, other, ktest.stream):
                (y,) = kernel.run(ktest.executor, stream, [ktest.upload(np.ones(2, np.float32))],
                                  [F32])
                ktest.download(y, np.float32)
                assert ktest.lib.ktest_last_stream() == stream.handle
    finally:
        other.close()


def test_missing_attribute_fails_construction_naming_it(ktest):
    ktest.lib.ktest_kernels_alive.restype = ctypes.c_int64
    registration = ktest.kernel("ScaleAndShift")
    with pytest.raises(InvalidArgumentError) as info:
        registration.instantiate("no_shifts", {"scale": 2.5, "T": pluggable.float32})
    message = str(info.value)
    assert "Operation 'no_shifts' has no attr named 'shifts'" in message
    assert ktest.path in message and "ScaleAndShiftOp" in message
    assert info.value.plugin_message == "Operation 'no_shifts' has no attr named 'shifts'."
    # An attribute of the wrong type names it too.
    with pytest.raises(InvalidArgumentError,
                       match=r"'list\(float\)' when 'list\(int\)' expected.*'shifts'"):
        registration.instantiate("n", {**SCALE_ATTRS, "shifts": [1.5, 2.0]})
    with pytest.raises(InvalidArgumentError, match="'int' when 'float' expected.*'scale'"):
        registration.instantiate("n", {**SCALE_ATTRS, "scale": 3})
    assert ktest.lib.ktest_kernels_alive() == 0  # delete_func ran for each failed one


def test_close_calls_delete_once_and_a_closed_kernel_refuses_to_run(ktest):
    ktest.lib.ktest_kernels_alive.restype = ctypes.c_int64
    kernel = ktest.kernel("ScaleAndShift").instantiate("n", SCALE_ATTRS)
    assert ktest.lib.ktest_kernels_alive() == 1
    kernel.close()
    kernel.close()
    assert kernel.is_closed and ktest.lib.ktest_kernels_alive() == 0
    with pytest.raises(FailedPreconditionError, match="closed"):
        kernel.run(ktest.executor, ktest.stream, [], [F32])


def test_a_dropped_kernel_is_deleted_at_the_next_safe_point(ktest):
    import gc

    ktest.lib.ktest_kernels_alive.restype = ctypes.c_int64
    registration = ktest.kernel("ScaleAndShift")
    registration.instantiate("dropped", SCALE_ATTRS)
    gc.collect()
    registration.instantiate("another", SCALE_ATTRS).close()  # a safe point
    assert ktest.lib.ktest_kernels_alive() == 0


def test_many_runs_reuse_memory(ktest):
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    inputs = [ktest.upload(x)]
    with ktest.kernel("ScaleAndShift").instantiate("n", {**SCALE_ATTRS, "shifts": []}) as kernel:
        for _ in range(200):
            (y,) = kernel.run(ktest.executor, ktest.stream, inputs, [F32])
            ktest.executor.allocator.deallocate(y.address)
        assert ktest.executor.allocator.stats()["num_allocs"] >= 200
        (y,) = kernel.run(ktest.executor, ktest.stream, inputs, [F32])
        np.testing.assert_allclose(ktest.download(y, np.float32), x * 2.5)


def test_inputs_given_as_dtypes_and_numpy_integers_work(ktest):
    x = np.arange(4, dtype=np.float32)
    raw = ktest.upload(x)
    inputs = [(np.uint64(raw.address), np.int64(raw.nbytes), pluggable.float32,
               (np.int64(4),), False)]
    with ktest.kernel("ScaleAndShift").instantiate("n", SCALE_ATTRS) as kernel:
        (y,) = kernel.run(ktest.executor, ktest.stream, inputs, [TF_DataType.TF_FLOAT])
        np.testing.assert_allclose(ktest.download(y, np.float32), x * 2.5 + 6)


def test_malformed_inputs_are_refused_before_the_kernel_runs(ktest):
    raw = ktest.upload(np.ones(4, np.float32))
    with ktest.kernel("ScaleAndShift").instantiate("n", SCALE_ATTRS) as kernel:
        for bad in (raw._replace(nbytes=12), raw._replace(shape=(-1,)), raw._replace(dtype=0)):
            with pytest.raises(InvalidArgumentError, match="input 0 is malformed"):
                kernel.run(ktest.executor, ktest.stream, [bad], [F32])
        with pytest.raises(TypeError, match="not an integer"):
            kernel.run(ktest.executor, ktest.stream, [raw._replace(address="x")], [F32])


# -- the C plugin: what is not implemented ---------------------------------------------------
@pytest.mark.parametrize("which, function", [
    ("config_proto", "TF_GetSerializedConfigProto"),
    ("function_library", "TF_GetSerializedFunctionDefLibrary"),
    ("resource_handle", "TF_GetSerializedResourceHandleProto"),
    ("input_range", "TF_InputRange"),
    ("graph_def_version", "TF_GetGraphDefVersion"),           # no status: fails the run
    ("rendezvous", "TF_GetRendezvous"),
    ("requested_input", "TF_GetOpKernelRequestedInput"),
    ("container", "TF_GetResourceMgrDefaultContainerName"),
    ("deferred_ops", "TF_IncNumDeferredOps"),
])
def test_unimplemented_functions_fail_the_run_naming_themselves(kc, which, function):
    x = kc.upload(np.ones(3, np.float32))
    with kc.kernel("Unimplemented").instantiate("u", {"which": which}) as kernel:
        with pytest.raises(UnimplementedError) as info:
            kernel.run(kc.executor, kc.stream, [x], [F32])
    assert info.value.plugin_message == f"{function} is not implemented by pluggable"
    assert str(info.value) == (f"{kc.platform.label}, device 0: kernel UnimplementedKernel for "
                               f"Unimplemented failed: {function} is not implemented by "
                               f"pluggable")
    # The output the kernel allocated before failing was freed (the fixture checks).


@pytest.mark.parametrize("which, function", [
    ("tensor", "TF_OpKernelConstruction_GetAttrTensor"),
    ("function", "TF_OpKernelConstruction_GetAttrFunction"),
    ("node_def", "TF_OpKernelConstruction_GetNodeDef"),
])
def test_unimplemented_construction_functions_fail_instantiate(kc, which, function):
    kc.lib.kc_kernels_alive.restype = ctypes.c_int64
    with pytest.raises(UnimplementedError, match=f"{function} is not implemented by pluggable"):
        kc.kernel("UnimplementedAttr").instantiate("c", {"which": which})
    assert kc.lib.kc_kernels_alive() == 0


def test_async_kernels_register_but_do_not_run(kc):
    registration = kc.kernel("Async")
    assert registration.is_async
    with registration.instantiate("a", {}) as kernel:
        with pytest.raises(UnimplementedError, match="asynchronous"):
            kernel.run(kc.executor, kc.stream, [], [])


# -- failures ---------------------------------------------------------------------------------
def test_context_failure_raises_the_kernels_code_and_message(kc):
    with kc.kernel("Fails").instantiate("f", {}) as kernel:
        with pytest.raises(FailedPreconditionError) as info:
            kernel.run(kc.executor, kc.stream, [kc.upload(np.ones(8, np.float32))], [F32])
    assert str(info.value).endswith("kernel FailsKernel for Fails failed: the kernel says no")
    assert info.value.plugin == kc.platform.label


def test_an_output_never_set_is_an_error_naming_it(kc):
    with kc.kernel("Forgets").instantiate("f", {}) as kernel:
        with pytest.raises(InternalError, match="did not set output 1 \\(of 2\\)"):
            kernel.run(kc.executor, kc.stream, [kc.upload(np.ones(8, np.float32))], [F32, F32])
    # output 0 was allocated and is freed again: the fixture finds nothing in use


@pytest.mark.parametrize("mode, error, text", [
    (0, InvalidArgumentError, "len is 7 bytes, but 6 elements of type float take 24"),
    (1, InvalidArgumentError, "output 0 must be of type float, not double"),
    (2, InvalidArgumentError, "dimension 1 is -3"),
    (3, OutOfRangeError, "output index out of range"),
])
def test_allocate_output_checks_its_arguments(kc, mode, error, text):
    with kc.kernel("BadAlloc").instantiate("b", {"mode": mode}) as kernel:
        with pytest.raises(error, match=text):
            kernel.run(kc.executor, kc.stream, [], [F32])


def test_out_of_device_memory_is_resource_exhausted(kc):
    big = np.zeros(1, np.float32)
    raw = kc.upload(big)
    # A shape far beyond the test device's memory (its allocator's limit is below 1 MiB).
    huge = raw._replace(shape=(1 << 20,), nbytes=4 << 20)
    with kc.kernel("Prio").instantiate("p", {}) as kernel:
        with pytest.raises(pluggable.errors.ResourceExhaustedError, match="out of device memory"):
            kernel.run(kc.executor, kc.stream, [huge], [F32])


# -- memory: temporaries, forwarding, aliases, copies ----------------------------------------
def test_temporaries_on_device_and_host_are_freed_with_their_tensors(kc):
    allocator = kc.executor.allocator
    allocator.reset_peak()
    x = np.arange(100, dtype=np.float32)
    with kc.kernel("UsesTemp").instantiate("t", {}) as kernel:
        (y,) = kernel.run(kc.executor, kc.stream, [kc.upload(x)], [F32])
        stats = allocator.stats()
        assert stats["bytes_in_use"] == 512          # only the output (400 rounded to 256s)
        assert stats["peak_bytes_in_use"] == 1024    # the device temporary was there too
        np.testing.assert_array_equal(kc.download(y, np.float32), x + 1)


def test_forward_input_or_allocate_output_allocates(kc):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with kc.kernel("Forward").instantiate("f", {}) as kernel:
        (y,) = kernel.run(kc.executor, kc.stream, [kc.upload(x)], [F32])
        assert y.owned and y.aliased_input == -1 and y.shape == (2, 3)
        np.testing.assert_array_equal(kc.download(y, np.float32), 2 * x)


def test_set_output_with_an_input_makes_an_alias(kc):
    first, second = kc.upload(np.ones(4, np.float32)), kc.upload(np.arange(5, dtype=np.float32))
    with kc.kernel("Identity").instantiate("i", {}) as kernel:
        (y,) = kernel.run(kc.executor, kc.stream, [second, first], [F32])
    assert (y.address, y.nbytes, y.shape, y.owned, y.aliased_input) == (
        second.address, 20, (5,), False, 0)


def test_a_bitcast_input_is_an_alias_with_the_new_type(kc):
    x = np.array([1.0, -2.0], np.float32)
    raw = kc.upload(x)
    with kc.kernel("BitcastToInt").instantiate("b", {}) as kernel:
        (y,) = kernel.run(kc.executor, kc.stream, [raw], [I32])
    assert (y.dtype, y.shape, y.address, y.aliased_input, y.owned) == (I32, (2,), raw.address,
                                                                       0, False)
    assert list(kc.download(y, np.int32)) == list(x.view(np.int32))


def test_empty_outputs_are_neither_owned_nor_aliases(kc):
    with kc.kernel("Identity").instantiate("i", {}) as kernel:
        (y,) = kernel.run(kc.executor, kc.stream, [kc.upload(np.ones((0, 3), np.float32))],
                          [F32])
    assert (y.address, y.nbytes, y.shape, y.owned, y.aliased_input) == (0, 0, (0, 3), False, -1)


def test_an_output_the_kernel_keeps_is_copied(kc):
    kc.lib.kc_kernels_alive.restype = ctypes.c_int64
    allocator = kc.executor.allocator
    with kc.kernel("Cached").instantiate("c", {}) as kernel:
        outputs = [kernel.run(kc.executor, kc.stream, [], [F32])[0] for _ in range(2)]
        assert outputs[0].address != outputs[1].address  # two copies, the caller's own
        for y in outputs:
            assert y.owned and y.shape == (4,)
            np.testing.assert_array_equal(kc.download(y, np.float32), [7.0] * 4)
        assert allocator.stats()["bytes_in_use"] == 256  # the kernel's own tensor
    assert allocator.stats()["bytes_in_use"] == 0        # delete_func freed it
    assert kc.lib.kc_kernels_alive() == 0


def test_an_output_over_the_kernels_own_memory_is_copied_and_released(kc):
    kc.lib.kc_deallocations.restype = ctypes.c_int64
    before = kc.lib.kc_deallocations()
    with kc.kernel("Wraps").instantiate("w", {}) as kernel:
        (y,) = kernel.run(kc.executor, kc.stream, [], [F32])
    assert kc.lib.kc_deallocations() == before + 1   # the deallocator ran once
    assert y.owned
    np.testing.assert_array_equal(kc.download(y, np.float32), [3.0] * 3)


# -- host memory ------------------------------------------------------------------------------
def test_host_memory_arguments(kc):
    registration = kc.kernel("HostArgs")
    assert registration.host_memory == frozenset({"shape", "count"})
    x = kc.upload(np.ones(2, np.float32))
    shape = np.array([2, 3, 4], np.int64)
    host = KernelInput(shape.ctypes.data, shape.nbytes, I64, (3,), True)
    with registration.instantiate("h", {}) as kernel:
        (count,) = kernel.run(kc.executor, kc.stream, [x, host], [I64], output_host_memory=[True])
        assert count.owned and count.host_memory and count.shape == (4,)
        values = np.ctypeslib.as_array((ctypes.c_int64 * 4).from_address(count.address)).copy()
        free_host_output(count.address)
        assert list(values) == [0, 1, 1, 9]
        # Without the flag the output is device memory, as the host said.
        (count,) = kernel.run(kc.executor, kc.stream, [x, host], [I64])
        assert not count.host_memory
        assert list(kc.download(count, np.int64)) == [0, 1, 0, 9]


# -- the context and attributes, as the plugin reports them -----------------------------------
def test_the_context_reports_what_the_host_passed(kc):
    kc.lib.kc_report.restype = ctypes.c_char_p
    x = kc.upload(np.arange(3, dtype=np.float32))
    y = kc.upload(np.arange(3, dtype=np.int32))
    with kc.kernel("Introspect").instantiate("my_node", {}) as kernel:
        (out,) = kernel.run(kc.executor, kc.stream, [x, y], [F32], step_id=42)
    report = kc.lib.kc_report().decode()
    assert report == (
        "stream=(nil)/0 inputs=2 outputs=1 types=1,3 out=1 step=42/42 frame=0 iter=0 "
        "device_id=0 device=/job:localhost/replica:0/task:0/device:KC:0 name=my_node "
        "input2=11 unset=9 mutable=0,1 setoob=11 alias=0 wrongtype=3")
    # The last good TF_SetOutput made output 0 an alias of input 0; the allocated one is gone.
    assert (out.aliased_input, out.owned, out.address) == (0, False, x.address)


def test_every_attribute_getter(kc):
    kc.lib.kc_report.restype = ctypes.c_char_p
    attrs = {
        "b": True, "s": "hello", "f": 2.5, "i": 7, "big": 1 << 40, "t": pluggable.float64,
        "tl": [pluggable.int32, TF_DataType.TF_HALF], "fl": [0.5, 1.5],
        "bl": (True, False, True), "il": [4, 5, 6], "sl": ["ab", "cde"],
        "empty": AttrList("type", ()),
    }
    with kc.kernel("Attrs").instantiate("attr_node", attrs):
        pass
    report = kc.lib.kc_report().decode()
    expected = [
        "b=1/0", "s=hello(-1,5)/0", "f=2.5/0", "i=7/0", "i32=7/0",
        "big=3:Attr big has value 1099511627776 out of range for an int32",
        "t=2/0", "tl=3,19(2,-1)/0", "fl=0.5,1.5/0", "bl=1,0,1/0", "il=4,5,0/0",
        "sl=ab,cde(2,5)/0", "sl_small=3", "empty=(0,-1)/0", "fsize=(-1,-1)",
        "wrong=3:AttrValue had value with type 'int' when 'float' expected, for attr 'i' of "
        "operation 'attr_node'",
        "notlist=3:Value for 'i' is not a list (it is a int) in operation 'attr_node'.",
        "wronglist=3",
        "missing=-1,-1,3:Operation 'attr_node' has no attr named 'missing'.",
        "has=10", "name=attr_node",
    ]
    for item in expected:
        assert item in report, f"{item!r} not in {report!r}"


@pytest.mark.parametrize("attrs, text", [
    ({"x": None}, "is not a kernel attribute value"),
    ({"x": [1, "a"]}, "mixes int, string"),
    ({"x": 1 << 70}, "cannot be passed as int"),
    ({"x": AttrList("shape", ())}, "AttrList kind must be one of"),
])
def test_bad_attribute_values_are_refused(kc, attrs, text):
    with pytest.raises(InvalidArgumentError, match=text):
        kc.kernel("Prio").instantiate("p", attrs)


def test_threads_run_one_kernel_at_once(ktest):
    import threading

    streams = [ktest.executor.create_stream() for _ in range(4)]
    inputs = [[ktest.upload(np.full(64, i, np.float32))] for i in range(4)]
    errors = []
    with ktest.kernel("ScaleAndShift").instantiate("n", SCALE_ATTRS) as kernel:
        def work(i):
            try:
                for _ in range(300):
                    (y,) = kernel.run(ktest.executor, streams[i], inputs[i], [F32])
                    value = ktest.download(y, np.float32)
                    assert (value == i * 2.5 + 6).all(), value
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for s in streams:
        s.close()
    assert not errors, errors[0]


def test_close_all_runs_every_delete_func(kc):
    kc.lib.kc_kernels_alive.restype = ctypes.c_int64
    from pluggable.kernels import registry as kernels

    kept = [kc.kernel("Cached").instantiate(f"c{i}", {}) for i in range(3)]
    for kernel in kept:
        (copy,) = kernel.run(kc.executor, kc.stream, [], [F32])
        kc.executor.allocator.deallocate(copy.address)
    assert kc.executor.allocator.stats()["bytes_in_use"] == 3 * 256  # the kernels' own
    kernels.close_all()
    assert all(k.is_closed for k in kept) and kc.lib.kc_kernels_alive() == 0
