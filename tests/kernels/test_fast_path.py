"""The per-op path in C (pluggable._compiled): a repeated op is one call that runs its remembered
plan, builds the output tensors and gives dropped outputs back to the allocator; closing
what a plan uses makes it check again; the host tracer's records come from it too."""
from __future__ import annotations

import gc
import threading
import warnings

import numpy as np
import pytest

import pluggable
from pluggable import _compiled, ops, profiler, raw_ops
from pluggable.eager import dispatch
from pluggable.kernels import registry as kernels
from pluggable.errors import InternalError
from pluggable.profiler import ProfilerOptions
from pluggable.profiler.host_tracer import FREE, OP


def _xpu(values, dtype=np.float32):
    return pluggable.tensor(np.asarray(values, dtype), device="xpu:0")


def _in_use(device="xpu:0"):
    pluggable.get_device(device).synchronize()
    return pluggable.get_device(device).executor.allocator.stats()["bytes_in_use"]


def test_a_repeated_op_runs_its_plan_in_one_call():
    x, y = _xpu([1, 2, 3]), _xpu([10, 20, 30])
    dispatch._plans.pop(_compiled.plan_key("Sub", (x, y)), None)
    assert _compiled.execute("Sub", (x, y)) is None  # no plan yet
    first = ops.subtract(x, y)  # the slow path leaves a plan
    outputs = _compiled.execute("Sub", (x, y))
    assert outputs is not None and len(outputs) == 1
    out = outputs[0]
    assert type(out) is pluggable.Tensor and out.shape == (3,) and out.dtype == "float32"
    assert out.device == "/device:XPU:0"
    assert out.numpy().tolist() == first.numpy().tolist() == [-9, -18, -27]
    assert out._buffer.address != first._buffer.address and out._buffer.nbytes == 12
    # Every front end reaches the same plan.
    assert (x - y).numpy().tolist() == raw_ops.Sub(x=x, y=y).numpy().tolist() == [-9, -18, -27]


def test_no_plan_means_none_not_an_error():
    x = _xpu([1.0])
    assert _compiled.execute("NoSuchOp", (x, x)) is None
    assert _compiled.execute("AddV2", (x, 1.0)) is None  # not all tensors: the slow path's job
    assert _compiled.execute("AddV2", 5) is None  # not a sequence of tensors
    assert _compiled.plan_key("AddV2", (x, "x")) is None
    with pytest.raises(TypeError, match="execute"):
        _compiled.execute("AddV2")


def test_dropped_outputs_go_back_to_the_allocator():
    x = _xpu(np.ones(1000))
    ops.add(x, x)
    before = _in_use()
    outputs = [ops.add(x, x) for _ in range(50)]
    assert _in_use() >= before + 50 * 4000
    del outputs
    gc.collect()
    assert _in_use() == before


def test_closed_kernels_make_plans_check_again():
    x = _xpu([1, 2])
    ops.maximum(x, x)
    assert _compiled.execute("Maximum", (x, x)) is not None
    kernels.close_all()
    assert _compiled.execute("Maximum", (x, x)) is None  # stale: the slow path runs next
    assert ops.maximum(x, _xpu([0, 5])).numpy().tolist() == [1, 5]
    assert _compiled.execute("Maximum", (x, x)) is not None  # a new plan


def test_a_failing_kernel_raises_and_frees_nothing_twice(faults):
    x = _xpu([1.0, 2.0])
    ops.exp(x)
    before = _in_use()
    faults("kernel:1")
    with pytest.raises(InternalError, match="injected fault"):
        ops.exp(x)
    faults("")
    assert _in_use() == before
    assert ops.exp(x).numpy().tolist() == pytest.approx(np.exp([1.0, 2.0]).tolist())


def test_threads_share_a_plan(in_threads):
    x = _xpu(np.arange(64))
    ops.multiply(x, x)
    expected = (np.arange(64, dtype=np.float32) ** 2).tolist()

    def work(_):
        for _ in range(300):
            out = x * x
        assert out.numpy().tolist() == expected

    in_threads(work, 4)


def test_a_plan_rejects_inputs_that_are_not_its_kind():
    x = _xpu([1.0, 2.0])
    ops.add(x, x)
    plan = dispatch._plans[dispatch._plan_key("AddV2", (x, x))]
    assert plan.run((x,)) is None  # one input for two
    assert plan.run((x, np.ones(2, np.float32))) is None  # not a tensor
    assert plan.run((x, x))[0].numpy().tolist() == [2.0, 4.0]
    with pytest.raises(TypeError):
        plan.run(5)


def test_plans_refuse_a_malformed_prepared_run():
    x = _xpu([1.0])
    ops.add(x, x)
    plan = dispatch._plans[dispatch._plan_key("AddV2", (x, x))]
    with pytest.raises(ValueError, match="output descriptions"):
        dispatch._Plan(plan.device, plan.prepared, [], 0)
    with pytest.raises(TypeError):
        dispatch._Plan(plan.device, plan.prepared, [("not a shape", None, 4)], 0)


def test_the_host_tracer_records_fast_path_ops_and_frees(tmp_path):
    x = _xpu([1.0, 2.0])
    ops.add(x, x)
    profiler.start(tmp_path, ProfilerOptions(device_tracer_level=0))
    try:
        assert _compiled.get_tracer() is not None
        for _ in range(3):
            out = ops.add(x, x)
        del out
        records = dispatch._tracer.records
    finally:
        result = profiler.stop()
    assert _compiled.get_tracer() is None
    op_records = [r for r in records if r[0] == OP and r[4] == "AddV2"]
    assert len(op_records) == 3
    for kind, ident, start, end, name, plan, fresh, correlation_id in op_records:
        assert ident == threading.get_ident() and 0 < start <= end
        assert plan.kernel_name and fresh == ((x._buffer.executor, 8),)
    ids = [r[7] for r in op_records]  # each launch its own correlation id, in order
    assert ids == sorted(set(ids)) and ids[0] > 0
    frees = [r for r in records if r[0] == FREE]
    assert len(frees) >= 2 and all(r[4] == 8 and r[3] is x._buffer.executor.allocator
                                   for r in frees)
    assert sum(1 for e in result.events(plane="/host:CPU") if e.name == "AddV2:AddV2") == 3


def test_raw_ops_take_the_plan_with_their_inputs_in_any_order():
    x, y = _xpu([5.0, 7.0]), _xpu([1.0, 2.0])
    ops.subtract(x, y)
    assert type(raw_ops.Sub).__name__ == "RawOp" and raw_ops.Sub.__name__ == "Sub"
    assert raw_ops.Sub(x=x, y=y).numpy().tolist() == [4.0, 5.0]
    assert raw_ops.Sub(y=y, x=x).numpy().tolist() == [4.0, 5.0]
    assert raw_ops.Sub(x=x, y=y, name="n").numpy().tolist() == [4.0, 5.0]  # the slow path
    with pytest.raises(TypeError, match="keyword arguments only"):
        raw_ops.Sub(x, y)
    with pytest.raises(Exception, match="missing input"):
        raw_ops.Sub(x=x, z=y)
    logits = _xpu([[0.0, 0.0], [0.0, 0.0]])
    labels = pluggable.tensor(np.array([0, 1], np.int32), device="xpu:0")
    raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=logits, labels=labels)
    loss, backprop = raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=logits, labels=labels)
    assert loss.numpy() == pytest.approx([np.log(2)] * 2)  # two outputs: a tuple
    assert backprop.numpy().tolist() == [[-0.5, 0.5], [0.5, -0.5]]


def test_matmul_without_options_and_the_operator_take_the_plan(monkeypatch):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    batch = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x, y, z = _xpu(a), _xpu(b), _xpu(batch)
    want = (a @ b).tolist()
    assert ops.matmul(x, y).numpy().tolist() == want  # the general path leaves the plans
    assert ops.matmul(x, z).numpy().tolist() == (a @ batch).tolist()
    general = dispatch._execute

    def refused(op_name, inputs, attrs, key, record=None, **kwargs):
        if not attrs:
            raise AssertionError(f"{op_name} took the general path")
        return general(op_name, inputs, attrs, key, record, **kwargs)

    monkeypatch.setattr(dispatch, "_execute", refused)
    assert ops.matmul(x, y).numpy().tolist() == want
    assert (x @ y).numpy().tolist() == want
    assert ops.matmul(x, z).numpy().tolist() == (a @ batch).tolist()  # BatchMatMulV2
    assert (x @ z).numpy().tolist() == (a @ batch).tolist()
    # An option is an attribute: the general path, with its result.
    assert ops.matmul(y, x, transpose_a=True, transpose_b=True).numpy().tolist() == \
        (b.T @ a.T).tolist()
    with pytest.raises(AssertionError, match="general path"):
        ops.matmul(x, _xpu(np.ones((3, 5))))  # no plan yet for these shapes


def test_calls_with_attributes_or_host_values_take_a_remembered_plan(monkeypatch):
    h = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = _xpu(h)
    calls = {
        "sum axis 0": (lambda: ops.reduce_sum(x, axis=0), h.sum(axis=0)),
        "sum axis 1 kept": (lambda: ops.reduce_sum(x, axis=1, keepdims=True),
                            h.sum(axis=1, keepdims=True)),
        "transpose": (lambda: ops.transpose(x), h.T),
        "reshape": (lambda: ops.reshape(x, [2, 6]), h.reshape(2, 6)),
        "cast": (lambda: ops.cast(x, pluggable.int32), h.astype(np.int32)),
        "matmul transposed": (lambda: ops.matmul(x, x, transpose_b=True), h @ h.T),
    }
    for name, (call, want) in calls.items():  # the general path, which leaves the plans
        np.testing.assert_array_equal(call().numpy(), want, err_msg=name)

    def refused(op_name, *args, **kwargs):
        raise AssertionError(f"{op_name} took the general path")

    monkeypatch.setattr(dispatch, "_execute", refused)
    for name, (call, want) in calls.items():
        got = call()
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_array_equal(got.numpy(), want, err_msg=name)
    # Another attribute value or another host value is another key, not the old plan.
    with pytest.raises(AssertionError, match="Sum took the general path"):
        ops.reduce_sum(x, axis=1)  # keepdims not set
    with pytest.raises(AssertionError, match="Reshape took the general path"):
        ops.reshape(x, [6, 2])
    with pytest.raises(AssertionError, match="Cast took the general path"):
        ops.cast(x, pluggable.float64)


def test_a_call_that_cannot_keep_a_plan_is_not_tried_again(monkeypatch):
    host = pluggable.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device="cpu")
    tries = []
    remember = dispatch._serves_constant_calls
    monkeypatch.setattr(dispatch, "_serves_constant_calls",
                        lambda *args: tries.append(args[0]) or remember(*args))
    dispatch._unplannable.clear()
    for _ in range(3):  # on the CPU: NumPy's kernel, no plan to keep
        assert ops.reduce_sum(host, axis=1).numpy().tolist() == [3.0, 12.0]
    assert tries == []  # only plugin devices get plans
    x = _xpu([[1.0, 2.0], [3.0, 4.0]])
    for _ in range(3):  # AddN takes a list: no key at all, the general path every time
        assert ops.add_n([x, x]).numpy().tolist() == [[2.0, 4.0], [6.0, 8.0]]
    assert dispatch._constant_plan_key("Sum", [host, np.array(1, np.int32)],
                                       {"keep_dims": False}) is None  # CPU tensors: no key
    # A key whose first run left no plan is remembered as such: an op placed on XPU:1 whose
    # input lives on XPU:0 (a plan needs its inputs on its device).
    with pluggable.device("/xpu:1"):
        for _ in range(3):
            assert ops.reduce_sum(x, axis=1).numpy().tolist() == [3.0, 7.0]
        key = dispatch._constant_plan_key("Sum", [x, np.array(1, np.int32)],
                                          {"keep_dims": False})
    assert len(tries) == 1  # tried once, then known
    assert key in dispatch._unplannable
    assert dispatch._constant_plan_key("AddN", [[x, x]], {}) is None
    assert dispatch._constant_plan_key("Reshape", [x, x], {}) is None  # a host input as a tensor
    assert dispatch._constant_plan_key("Sum", [x, np.arange(1000)], {}) is None  # too large
    assert dispatch._constant_plan_key("Cast", [x], {"DstT": float("nan")}) is None


def test_keys_of_calls_with_attributes_tell_values_and_their_types_apart():
    x = _xpu([[1.0, 2.0], [3.0, 4.0]])

    def key(axis, **attrs):
        return dispatch._constant_plan_key("Sum", [x, axis], attrs)

    axis = np.array(1, np.int32)
    assert key(axis, keep_dims=False) == key(np.array(1, np.int32), keep_dims=False)
    distinct = [key(axis, keep_dims=False), key(axis, keep_dims=0), key(axis, keep_dims=0.0),
                key(axis, keep_dims=True), key(np.array(1, np.int64), keep_dims=False),
                key(np.array([1], np.int32), keep_dims=False), key(np.array(0, np.int32)),
                key(np.array(1, np.int32).astype(">i4"), keep_dims=False),  # byte order
                key(axis, keep_dims=[1, 2]), key(axis, keep_dims=(1, 2)), key(axis),
                key(axis, keep_dims=False, other="a")]
    assert None not in distinct and len(set(distinct)) == len(distinct)
    with pluggable.device("/xpu:1"):  # the device scope is part of the key
        assert key(axis, keep_dims=False) != distinct[0]
    # Keyless: the general path every time.
    keyless = [key(np.arange(65, dtype=np.int32)),              # more than 64 values
               key(np.arange(8, dtype=np.int32)[::2]),          # not contiguous
               key(np.array([1], dtype=object)),                # objects
               key(axis, keep_dims=[1, [float("nan")]]),        # NaN, however deep
               key(axis, keep_dims=np.float32("nan")),          # NaN of NumPy's
               key(axis, keep_dims={"a": 1}),                   # unhashable
               key(axis, keep_dims=[[[[[[[[[1]]]]]]]]]),        # nested too deep
               key(axis, keep_dims=x),                          # a tensor (== is an op)
               dispatch._constant_plan_key("Sum", [x, axis], {1: 2, "a": 3})]  # unsortable
    assert keyless == [None] * len(keyless)
    assert key(np.arange(64, dtype=np.int32)) is not None
    # Neither attributes nor host inputs: the plain plan's call, no key with constants.
    assert dispatch._constant_plan_key("AddV2", [x, x], {}) is None
    assert dispatch._constant_plan_key("AddV2", [x, x], {"T": "float32"}) is not None


def test_a_call_runs_its_plan_with_constants_in_one_c_call(monkeypatch):
    h = np.arange(12, dtype=np.float32).reshape(3, 4)
    x, shape = _xpu(h), np.array([2, 6], np.int64)
    dispatch._plans.pop(dispatch._constant_plan_key("Reshape", [x, shape], {}), None)
    dispatch._host_inputs.pop("Reshape")  # as in a fresh process: C asks dispatch about the op
    assert _compiled.execute_constants("Reshape", [x, shape], {}) == \
        dispatch._constant_plan_key("Reshape", [x, shape], {})  # no plan yet: its key
    assert dispatch._host_inputs["Reshape"] == (False, True)
    assert _compiled.execute_constants("NoSuchOp", [x], {}) is None  # an op it was not told of
    assert dispatch.execute("Reshape", [x, shape])[0].shape == (2, 6)  # leaves the plan
    (out,) = _compiled.execute_constants("Reshape", [x, shape], {})
    assert out.shape == (2, 6) and out.numpy().tolist() == h.reshape(2, 6).tolist()
    assert type(_compiled.execute_constants("Reshape", [x, [2, 6]], {})) is tuple  # another key
    assert _compiled.execute_constants("Reshape", [x, x], {}) is None  # keyless: a host tensor
    # A host value changed in place is another key: never the old plan.
    shape[:] = [6, 2]
    monkeypatch.setattr(dispatch, "_execute", lambda *a, **k: pytest.fail("general path"))
    with pytest.raises(pytest.fail.Exception, match="general path"):
        dispatch.execute("Reshape", [x, shape])
    monkeypatch.undo()
    assert dispatch.execute("Reshape", [x, shape])[0].shape == (6, 2)


def test_a_plan_checked_while_its_kernel_is_being_disabled_is_not_kept(monkeypatch):
    # Whatever makes plans stale changes its state before telling the plans: an op run by
    # another thread right after the telling (here: inside it) sees the new state.
    x = _xpu([1.0, 2.0])
    ops.add(x, x)
    registration = next(r for r in kernels.registered_kernels("AddV2", "XPU")
                        if r.matches({"T": x.dtype}))
    invalidate = _compiled.invalidate

    def invalidate_then_run():
        invalidate()
        ops.add(x, x)  # as another thread could, between the change and what follows

    monkeypatch.setattr(_compiled, "invalidate", invalidate_then_run)
    try:
        with warnings.catch_warnings():  # soft placement onto the CPU is said once
            warnings.simplefilter("ignore", dispatch.PlacementWarning)
            registration.set_enabled(False)
            monkeypatch.setattr(_compiled, "invalidate", invalidate)
            out = ops.add(x, x)
        assert out.device == "/device:CPU:0" and out.numpy().tolist() == [2.0, 4.0]
    finally:
        monkeypatch.setattr(_compiled, "invalidate", invalidate)
        registration.set_enabled(True)
    assert ops.add(x, x).device == "/device:XPU:0"
