"""Soft placement of scopes and where warnings point: under ``device("/gpu:0")`` on a host
whose plugins provide no GPU, ops run on the CPU with a `PlacementWarning` (soft placement,
on by default as in eager TensorFlow) or the scope raises (off); every warning names the
user's line, not pluggable's."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import pluggable
from pluggable import config, ops, raw_ops
from pluggable.eager import dispatch
from pluggable.errors import NotFoundError, PlacementWarning
from pluggable.tensors import placement


@pytest.fixture
def fresh_warnings(monkeypatch):
    """The said-once sets emptied for the test, so its warnings are raised again."""
    monkeypatch.setattr(placement, "_fallen_back", set())
    monkeypatch.setattr(dispatch, "_warned", set())
    yield
    config.set_soft_device_placement(True)


def test_a_scope_of_a_type_nobody_provides_runs_on_the_cpu(fresh_warnings):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pluggable.device("/gpu:0"):
            x = ops.constant([1.0, 2.0]) + 1.0
            y = ops.reduce_sum(x)
        with pluggable.device("GPU:1"):  # said once per device type
            z = ops.ones([2])
    assert x.device == y.device == z.device == "/device:CPU:0"
    assert y.numpy() == 5.0
    assert len(caught) == 1 and caught[0].category is PlacementWarning
    message = str(caught[0].message)
    assert "no plugin provides device type GPU" in message and "run on the CPU" in message
    assert caught[0].filename == __file__


def test_without_soft_placement_the_scope_raises(fresh_warnings):
    config.set_soft_device_placement(False)
    with pytest.raises(NotFoundError, match="no plugin provides device type GPU"):
        with pluggable.device("/gpu:0"):
            ops.constant(1.0)
    config.set_soft_device_placement(True)
    with pytest.raises(NotFoundError, match="numbered from 0"):  # a type that is there
        with pluggable.device("/xpu:7"):
            pass


def test_a_device_without_the_kernel_warns_at_the_users_line(fresh_warnings):
    values = np.array([0.25, 0.75], np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pluggable.device("/xpu:0"):
            first = pluggable.random.uniform([2])          # the pluggable.random path
            second = raw_ops.Sin(x=values)                 # the raw_ops path
            third = ops.cumprod(values)                    # the ops path, with attributes
            fourth = ops.cos(values)                       # the one-call path
            fifth = ~pluggable.tensor([1, 2])              # an operator of Tensor
    for op in ("RandomUniform", "Sin", "Cumprod", "Cos", "Invert"):
        assert "XPU" not in {k.device_type for k in config.list_kernels(op)}, op
    placed = [w for w in caught if w.category is PlacementWarning]
    assert [str(w.message).split(" has no")[0] for w in placed] == \
        ["RandomUniform", "Sin", "Cumprod", "Cos", "Invert"]
    for w in placed:
        assert w.filename == __file__, (w.filename, str(w.message))
    assert first.device == "/device:XPU:0"  # the random numbers are moved where asked
    np.testing.assert_allclose(second.numpy(), np.sin(values), rtol=1e-6)
    np.testing.assert_allclose(third.numpy(), np.cumprod(values), rtol=1e-6)
    np.testing.assert_allclose(fourth.numpy(), np.cos(values), rtol=1e-6)
    assert fifth.numpy().tolist() == [-2, -3]
    assert "RandomUniform has no XPU kernel for dtype=float32" in str(placed[0].message)


def test_an_op_without_type_attributes_says_so_plainly(fresh_warnings):
    assert "XPU" not in {k.device_type for k in config.list_kernels("LogicalAnd")}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pluggable.device("/xpu:0"):
            both = ops.logical_and([True, True], [True, False])
    assert both.numpy().tolist() == [True, False]
    (warning,) = caught
    assert str(warning.message).startswith("LogicalAnd has no XPU kernel; it runs on the CPU")
    assert warning.filename == __file__


def test_warnings_of_other_kinds_point_at_the_user(monkeypatch):
    from pluggable.errors import PluggableWarning

    monkeypatch.setenv("PLUGGABLE_DEADLINE", "soon")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert config.get_deadline() == 600.0
    (warning,) = caught
    assert warning.category is PluggableWarning and "not a number of seconds" in \
        str(warning.message)
    assert warning.filename == __file__
