"""Fuzzing op arguments, sizes and special values, on the CPU and the XPU.

- Special values (inf, -inf, NaN, -0.0, tiny, huge) in every element-wise op the XPU has:
  the XPU gives what the CPU gives, the sign of zero included, and the CPU gives NumPy's
  element-wise result however its operands broadcast.
- Scalar casts, basic indexing: the result NumPy gives, on both devices.
- Size arguments up to 2**40 in a child process under an address-space limit: every call
  either returns the right shape and values or raises ResourceExhaustedError (too large) or
  InvalidArgumentError (a bad size); nothing else, and the process goes on.

Every test runs a fixed, derandomized number of examples so the time in CI is bounded.
"""
from __future__ import annotations

import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import pluggable
from pluggable import ops
from pluggable.eager.dispatch import execute

BINARY = ["AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Pow", "FloorDiv",
          "FloorMod", "DivNoNan", "Equal", "NotEqual", "Less", "Greater", "LessEqual",
          "GreaterEqual"]
UNARY = ["Neg", "Abs", "Square", "Sqrt", "Rsqrt", "Exp", "Log", "Tanh", "Sigmoid", "Relu",
         "Relu6"]
#: Ops whose XPU kernel computes in another precision or order than NumPy: a few ulps apart.
APPROXIMATE = {"Pow", "Exp", "Log", "Tanh", "Sigmoid", "Rsqrt"}
SPECIAL = [np.inf, -np.inf, np.nan, -0.0, 0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -3.0, 6.0, 7.5,
           1e-30, -1e-30, 1e30, -1e30, 3e38, -3e38]
FIXED = settings(max_examples=120, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow])


def special_floats(dtype):
    width = 32 if dtype == np.float32 else 64
    return st.one_of(st.sampled_from(SPECIAL).map(lambda v: float(dtype(v))),
                     st.floats(width=width))


def run(op, arrays, device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pluggable.device(device):
            return execute(op, [pluggable.tensor(a, device=device) for a in arrays])[0].numpy()


def assert_same(got, want, approximate, what):
    """Equal element by element, NaN equal to NaN and -0.0 unequal to +0.0."""
    assert got.shape == want.shape and got.dtype == want.dtype, what
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    nan = np.isnan(got) & np.isnan(want)
    if approximate:
        rtol = 4e-7 if want.dtype == np.float32 else 1e-14
        tiny = np.finfo(want.dtype).tiny
        equal = np.isclose(got, want, rtol=rtol, atol=tiny)
    else:
        equal = got == want
    equal &= np.signbit(got) == np.signbit(want)
    bad = ~(nan | equal)
    assert not bad.any(), (f"{what}: at {np.argwhere(bad)[:4].tolist()} got "
                           f"{got[bad][:4]} want {want[bad][:4]}")


@FIXED
@given(st.data(), st.sampled_from(BINARY), st.sampled_from([np.float32, np.float64]),
       hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=5))
def test_binary_special_values_same_on_xpu_as_on_cpu(data, op, dtype, shapes):
    x = data.draw(hnp.arrays(dtype, shapes.input_shapes[0], elements=special_floats(dtype)))
    y = data.draw(hnp.arrays(dtype, shapes.input_shapes[1], elements=special_floats(dtype)))
    want = run(op, [x, y], "CPU")
    assert_same(run(op, [x, y], "xpu:0"), want, op in APPROXIMATE, f"{op}{x, y}")


@FIXED
@given(st.data(), st.sampled_from(UNARY), st.sampled_from([np.float32, np.float64]),
       hnp.array_shapes(min_dims=0, max_dims=3, max_side=6))
def test_unary_special_values_same_on_xpu_as_on_cpu(data, op, dtype, shape):
    x = data.draw(hnp.arrays(dtype, shape, elements=special_floats(dtype)))
    assert_same(run(op, [x], "xpu:0"), run(op, [x], "CPU"), op in APPROXIMATE, f"{op}({x})")


@FIXED
@given(st.data(), st.sampled_from([np.float32, np.float64]),
       hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=5))
def test_cpu_pow_is_numpys_element_wise_power_however_it_broadcasts(data, dtype, shapes):
    x = data.draw(hnp.arrays(dtype, shapes.input_shapes[0], elements=special_floats(dtype)))
    y = data.draw(hnp.arrays(dtype, shapes.input_shapes[1], elements=special_floats(dtype)))
    # Each operand written out at the full shape: NumPy's element-wise loop, no shortcut.
    full_x, full_y = (np.array(a) for a in np.broadcast_arrays(x, y))
    with np.errstate(all="ignore"):
        want = np.power(full_x, full_y)
    assert_same(run("Pow", [x, y], "CPU"), want, False, f"Pow{x, y}")


def test_pow_of_minus_infinity_and_minus_zero_to_one_half():
    for device in ("CPU", "xpu:0"):
        for dtype in (np.float32, np.float64):
            x = np.array([-np.inf, -0.0, np.inf, 0.0, 4.0], dtype)
            got = run("Pow", [x, dtype(0.5)], device)
            assert_same(got, np.array([np.inf, 0.0, np.inf, 0.0, 2.0], dtype), False, device)


SCALARS = st.one_of(st.booleans(), st.integers(-2**40, 2**40),
                    st.floats(allow_nan=True, allow_infinity=True))
CAST_TARGETS = ["float32", "float64", "int32", "int64", "bool"]


@FIXED
@given(SCALARS, st.sampled_from(CAST_TARGETS))
def test_cast_of_a_python_scalar_is_the_cast_of_its_array(value, target):
    # A Python scalar converts as in TensorFlow (a float to float32), then casts as the
    # one-element array of that tensor does.
    source = pluggable.tensor(value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = ops.cast(value, target).numpy()
        want = ops.cast(ops.reshape(source, [1]), target).numpy()
    assert got.shape == () and got.dtype == want.dtype
    assert_same(got.reshape(1), want, False, f"cast({value!r}, {target})")
    if source.dtype.name not in ("float32", "int32", "int64"):
        return
    with pluggable.device("xpu:0"):
        on_xpu = ops.cast(pluggable.tensor(source.numpy(), device="xpu:0"), target).numpy()
    assert_same(on_xpu, got, False, f"cast({value!r}, {target}) on the XPU")


@FIXED
@given(st.data(), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
       st.sampled_from(["CPU", "xpu:0"]))
def test_basic_indexing_gives_numpys_shape_and_values(data, shape, device):
    array = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    key = data.draw(st.one_of(st.just(()), hnp.basic_indices(shape, allow_newaxis=True,
                                                             allow_ellipsis=True)))
    got = pluggable.tensor(array, device=device)[key]
    want = array[key]
    assert got.shape == want.shape, f"t[{key!r}] of shape {shape}"
    np.testing.assert_array_equal(got.numpy(), want)


def test_indexing_a_scalar_with_the_empty_tuple_keeps_it_a_scalar():
    for device in ("CPU", "xpu:0"):
        t = pluggable.tensor(np.float32(5), device=device)
        assert t[()].shape == () and t[()].numpy().shape == ()
        assert t[()].numpy() == 5


# -- sizes, in a child process under a memory limit ------------------------------------------
SIZES_CHILD = """
import resource, warnings
import numpy as np
from hypothesis import given, settings, strategies as st
import pluggable
from pluggable import ops
from pluggable.errors import InvalidArgumentError, ResourceExhaustedError

warnings.simplefilter("ignore")
for device in ("CPU", "xpu:0"):  # start the device's threads before the limit
    with pluggable.device(device):
        ops.fill([2, 2], 1.0).numpy()
with open("/proc/self/statm") as f:
    used = int(f.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (used + (160 << 20),) * 2)
outcomes = {"ok": 0, "ResourceExhaustedError": 0, "InvalidArgumentError": 0}
SIDE = st.one_of(st.integers(0, 8), st.integers(0, 2**40), st.integers(-5, -1))

def call(kind, sizes):
    if kind == "fill":
        return ops.fill(sizes, 3.0)
    if kind == "zeros":
        return ops.zeros(sizes, "int64")
    if kind == "one_hot":
        return ops.one_hot([0, 1], sizes[0])
    if kind == "tile":
        return ops.tile(np.ones((2, 1), np.float32), sizes[:2])
    if kind == "broadcast_to":
        return ops.broadcast_to(np.float32(2), sizes)
    raise AssertionError(kind)

def reference_shape(kind, sizes):
    if kind == "one_hot":
        return (2, sizes[0])
    if kind == "tile":
        return (2 * sizes[0], sizes[1])
    return tuple(sizes)

def reference(kind, sizes):
    if kind == "fill":
        return np.full(sizes, 3.0, np.float32)
    if kind == "zeros":
        return np.zeros(sizes, np.int64)
    if kind == "one_hot":
        return np.eye(2, sizes[0], dtype=np.float32)
    if kind == "tile":
        return np.tile(np.ones((2, 1), np.float32), sizes[:2])
    return np.full(sizes, 2, np.float32)

@settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True)
@given(st.sampled_from(["fill", "zeros", "one_hot", "tile", "broadcast_to"]),
       st.lists(SIDE, min_size=2, max_size=3), st.sampled_from(["CPU", "xpu:0"]))
def sizes(kind, sizes, device):
    try:
        with pluggable.device(device):
            got = call(kind, sizes)
    except ResourceExhaustedError as e:
        assert "would need" in str(e) or "out of" in str(e), str(e)
        outcomes["ResourceExhaustedError"] += 1
        return
    except InvalidArgumentError:
        outcomes["InvalidArgumentError"] += 1
        return
    if all(0 <= n <= 8 for n in sizes):
        np.testing.assert_array_equal(got.numpy(), reference(kind, sizes))
    else:
        assert got.shape == reference_shape(kind, sizes), (kind, sizes, got.shape)
    outcomes["ok"] += 1

sizes()
print(outcomes)
"""


def test_size_arguments_under_a_memory_limit(run_python):
    result = run_python(SIZES_CHILD.replace("MAX_EXAMPLES", "100"), check=False,
                        env={"XPU_MEMORY_BYTES": "64M"})
    assert result.returncode == 0, result.stdout + result.stderr
    outcomes = eval(result.stdout.strip().splitlines()[-1])  # the child's dict of counts
    assert outcomes["ok"] > 0 and outcomes["ResourceExhaustedError"] > 0, outcomes
    assert outcomes["InvalidArgumentError"] > 0, outcomes
