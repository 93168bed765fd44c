"""The conformance suite's input generators: every op of the op library gets inputs for every
element type its definition allows, and the CPU reference runs on them."""
from __future__ import annotations

import numpy as np
import pytest

import pluggable
from pluggable.base import dtypes as dt
from pluggable.eager import OPS
from pluggable.oplib import samples
from pluggable.tools.conformance.checks import TYPE_ATTRS, _outputs

SEEDS = (0, 1, 2, 3)
# Types an op's definition allows (TensorFlow's definitions too) that its reference does not
# compute yet: TensorFlow registers no kernel for them, and the reference fails with NumPy's
# error instead of saying so.
KNOWN_GAPS = {
    ("AssignSubVariableOp", "bool"): pytest.mark.xfail(
        raises=TypeError, strict=True,
        reason="the reference subtracts booleans with NumPy, which refuses it"),
}


def _cases():
    """(op, dtype, constraints) for every op of the library and every type with tensors
    that its first type attribute (in the suite's order) allows."""
    cases = []
    for name, op in sorted(OPS.items()):
        if op.missing:
            continue
        types = {a.name: a.allowed for a in op.attrs if a.kind == "type"}
        attr = next((a for a in TYPE_ATTRS if a in types), None)
        allowed = types[attr] if attr is not None and types[attr] else (dt.float32,)
        for dtype in allowed:
            if dt.has_tensors(dtype):
                marks = KNOWN_GAPS.get((name, dtype.name), ())
                cases.append(pytest.param(name, dtype, {attr: (dtype.name,)} if attr else {},
                                          id=f"{name}-{dtype.name}", marks=marks))
    return cases


@pytest.mark.parametrize("op, dtype, constraints", _cases())
def test_every_op_gets_inputs_the_reference_runs_on(op, dtype, constraints):
    for seed in SEEDS:
        generated = samples.generate(op, dtype, seed, constraints)
        assert generated is not None, f"no input generator for {op} ({dtype.name})"
        inputs, attrs = generated
        with np.errstate(all="ignore"):
            outputs = _outputs(op, inputs, attrs, "/cpu:0")
        assert len(outputs) == len(OPS[op].flat_outputs(attrs)) + sum(
            isinstance(x, samples.Variable) for x in inputs), op
        # The same seed gives the same inputs (the suite runs a case on two devices).
        again, again_attrs = samples.generate(op, dtype, seed, constraints)
        assert again_attrs == attrs
        assert _bytes(inputs) == _bytes(again)


def _bytes(inputs):
    """The inputs' types, shapes and bytes (NaN included), list inputs and variables too."""
    out = []
    for x in inputs:
        for a in (x if isinstance(x, list) else [x]):
            a = a.value if isinstance(a, samples.Variable) else np.asarray(a)
            out.append((a.dtype.name, a.shape, a.tobytes()))
    return out


def test_every_op_of_the_library_has_a_case():
    covered = {p.values[0] for p in _cases()}
    assert sorted(name for name, op in OPS.items() if not op.missing and name not in covered) \
        == []
    assert len(covered) > 140


@pytest.mark.parametrize("op", sorted(samples.UNARY_DOMAINS))
def test_functions_with_a_domain_get_inputs_inside_it(op):
    low, high = samples.UNARY_DOMAINS[op]
    for seed in SEEDS:
        (x,), _ = samples.generate(op, dt.float64, seed, {})
        assert x.dtype == np.float64 and ((x >= low) & (x <= high)).all()
        out = _outputs(op, [x], {}, "/cpu:0")[0]
        assert np.isfinite(out).all()


def test_reciprocal_inputs_stay_away_from_zero():
    for dtype in (dt.float32, dt.int32):
        (x,), _ = samples.generate("Reciprocal", dtype, 3, {})
        assert (np.abs(x) >= 0.5).all()


def test_the_predicates_see_infinities_and_nans():
    for op in sorted(samples.PREDICATES):
        seen = np.zeros(3, bool)
        for seed in SEEDS:
            (x,), _ = samples.generate(op, dt.float32, seed, {})
            seen |= (np.isposinf(x).any(), np.isneginf(x).any(), np.isnan(x).any())
            assert np.isfinite(x).any()
        assert seen.all(), op


def test_shift_counts_are_small_and_not_negative():
    for seed in SEEDS:
        (x, counts), _ = samples.generate("LeftShift", dt.int8, seed, {})
        assert counts.dtype == np.int8 and ((counts >= 0) & (counts < 8)).all()


def test_logical_ops_get_bool_inputs_whatever_the_type_asked():
    for op in ("LogicalAnd", "LogicalOr", "LogicalNot", "All", "Any"):
        inputs, _ = samples.generate(op, dt.float32, 1, {})
        assert inputs[0].dtype == np.bool_


def test_cast_takes_the_registrations_target_or_a_default_one():
    _, attrs = samples.generate("Cast", dt.float32, 2, {"DstT": ("int64",)})
    assert attrs["DstT"] == dt.int64
    targets = {samples.generate("Cast", dt.float32, s, {})[1]["DstT"].name for s in SEEDS}
    assert targets == set(samples.CAST_TARGETS)


def test_random_ops_follow_the_registrations_types():
    inputs, attrs = samples.generate("RandomUniform", dt.int64, 0,
                                     {"T": ("int64",), "dtype": ("float16",)})
    assert inputs[0].dtype == np.int64 and attrs["dtype"] == dt.float16
    inputs, attrs = samples.generate("StatelessRandomNormal", dt.int32, 1,
                                     {"T": ("int32",), "Tseed": ("int64",)})
    assert inputs[1].dtype == np.int64 and inputs[1].shape == (2,)
    # The stateless reference is a function of the seed input.
    first = _outputs("StatelessRandomNormal", inputs, attrs, "/cpu:0")[0]
    second = _outputs("StatelessRandomNormal", inputs, attrs, "/cpu:0")[0]
    np.testing.assert_array_equal(first, second)


def test_variable_ops_get_variables():
    (var,), attrs = samples.generate("ReadVariableOp", dt.float64, 0, {})
    assert isinstance(var, samples.Variable) and attrs["dtype"] == dt.float64
    value, after = _outputs("ReadVariableOp", [var], attrs, "/cpu:0")
    np.testing.assert_array_equal(value, var.value)
    np.testing.assert_array_equal(after, var.value)


def test_an_op_the_generators_do_not_know_gets_none():
    assert samples.generate("NoSuchOp", dt.float32, 0, {}) is None


def test_the_reference_runs_under_the_cpu_device():
    with pluggable.device("/cpu:0"):
        assert pluggable.constant(np.ones(2, np.float32)).device.endswith("CPU:0")
