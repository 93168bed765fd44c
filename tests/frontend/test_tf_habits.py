"""TensorFlow habits, one table row per line of issue 13's list: what a TensorFlow user writes
first, and what TensorFlow gives. Indexing is compared with NumPy's results on the CPU and on
the XPU."""
from __future__ import annotations

import logging
import operator
import subprocess
import sys
import warnings

import numpy as np
import pytest

import pluggable
from pluggable import config, ops, raw_ops
from pluggable.oplib.core import OPS
from pluggable.kernels.plugin_ops import plugin_of
from pluggable.eager.dispatch import PlacementWarning
from pluggable.errors import InvalidArgumentError, NotFoundError

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def device_of(t):
    return t.device


# -- creation follows the scope; TensorFlow's dtypes ------------------------------------------
def _in_scope(make):
    with pluggable.device("/xpu:0"):
        return make()


CREATION = [
    ("tensor", lambda: pluggable.tensor([1.0, 2.0, 3.0])),
    ("zeros", lambda: pluggable.zeros(3)),
    ("constant", lambda: pluggable.constant([1, 2])),
    ("constant with shape", lambda: pluggable.constant(7.0, shape=[2, 2])),
    ("convert_to_tensor", lambda: pluggable.convert_to_tensor([1.0])),
    ("ones", lambda: pluggable.ones([2], "int32")),
    ("fill", lambda: pluggable.fill([2], 3.0)),
    ("empty", lambda: pluggable.empty([2])),
]


@pytest.mark.parametrize("what, make", CREATION, ids=[c[0] for c in CREATION])
def test_creation_follows_the_device_scope(what, make):
    assert _in_scope(make).device == "/device:XPU:0"
    assert make().device == "/device:CPU:0"  # outside any scope: the CPU, as before
    with pluggable.device("/xpu:0"):
        assert pluggable.tensor([1.0], device="xpu:1").device == "/device:XPU:1"  # explicit wins


DTYPES = [
    (1.0, "float32"), ([1, 2], "int32"), (True, "bool"), ([[1.5], [2]], "float32"),
    (2**40, "int64"), ([], "float32"), (1 + 2j, "complex128"),
    (np.float64(1.0), "float64"), (np.arange(3), "int64"), (np.ones(2, np.float16), "float16"),
]


@pytest.mark.parametrize("value, dtype", DTYPES, ids=[repr(v) for v, _ in DTYPES])
def test_tensorflows_dtype_inference(value, dtype):
    assert pluggable.tensor(value).dtype == dtype
    assert pluggable.constant(value).dtype == dtype


def test_constant_and_convert_to_tensor_as_tensorflows():
    assert pluggable.constant([1, 2, 3, 4], shape=[2, 2]).numpy().tolist() == [[1, 2], [3, 4]]
    assert pluggable.constant(5, dtype="float64").dtype == "float64"
    with pytest.raises(InvalidArgumentError, match="cannot fill shape"):
        pluggable.constant([1, 2, 3], shape=[2, 2])
    t = pluggable.tensor([1.0])
    assert pluggable.convert_to_tensor(t) is t
    with pytest.raises(InvalidArgumentError, match="use pluggable.ops.cast"):
        pluggable.convert_to_tensor(t, dtype="int32")
    assert pluggable.convert_to_tensor([1, 2], dtype_hint="float32").dtype == "float32"
    assert pluggable.convert_to_tensor([1.5], dtype_hint="int32").dtype == "float32"


# -- indexing, iteration ------------------------------------------------------------------------
INDEXES = [0, -1, 1, slice(1, None), (slice(None), 1), None, (None, 0), Ellipsis,
           (Ellipsis, 2), (0, Ellipsis, None), (slice(None, None, -1),), (1, slice(-1, 0, -1), 2),
           (slice(None), slice(None, None, 2), slice(3, 0, -2)), (slice(-100, 100),),
           (np.int64(1), 2), (pluggable.tensor(1),), (slice(None), None, 1, None)]


@pytest.mark.parametrize("key", INDEXES, ids=[repr(k) for k in INDEXES])
@pytest.mark.parametrize("where", ["cpu", "xpu:0"])
def test_indexing_matches_numpy(key, where):
    t = pluggable.tensor(X, device=where)
    numpy_key = tuple(int(k) if isinstance(k, pluggable.Tensor) else k for k in key) \
        if isinstance(key, tuple) else key
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlacementWarning)  # until the XPU has StridedSlice
        got = t[key]
    want = X[numpy_key]
    assert got.shape == want.shape and got.dtype == "float32"
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("where", ["cpu", "xpu:0"])
def test_boolean_masks_as_tf_boolean_mask(where):
    t = pluggable.tensor(X, device=where)
    for mask in (X > 10, (X > 10)[..., 0], np.array([True, False])):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PlacementWarning)
            got = t[pluggable.tensor(mask)]
            from_list = t[mask.tolist()]
        np.testing.assert_array_equal(got.numpy(), X[mask])
        np.testing.assert_array_equal(from_list.numpy(), X[mask])
        assert got.device == t.device
    with pytest.raises(ValueError, match="must match the leading dimensions"):
        t[np.array([True, False, True])]


def test_indexing_a_tensor_runs_one_op(caplog):
    t = pluggable.tensor(X, device="xpu:0")
    config.set_log_device_placement(True)
    try:
        with caplog.at_level(logging.INFO, logger="pluggable.placement"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PlacementWarning)
                t[1:, 0, ::2]
    finally:
        config.set_log_device_placement(False)
    executed = [r.getMessage() for r in caplog.records if r.name == "pluggable.placement"]
    assert len(executed) == 1 and executed[0].startswith("Executing op StridedSlice")


@pytest.mark.parametrize("key, error, match", [
    ([0, 1], TypeError, "gather takes index lists"),
    ((0, 1.5), TypeError, "float 1.5 is not an index"),
    (True, TypeError, "a Python bool is not an index"),
    ((0, 0, 0, 0), InvalidArgumentError, "the index has 4 dimensions"),
    (5, InvalidArgumentError, "index 5 is out of bounds for dimension 0 of size 2"),
    (slice(None, None, 0), ValueError, "slice step cannot be zero"),
    ((Ellipsis, Ellipsis), InvalidArgumentError, "one ellipsis"),
    ((np.array([True, False]), 0), TypeError, "boolean mask must be the only index"),
])
def test_bad_indexes_say_what_is_valid(key, error, match):
    with pytest.raises(error, match=match):
        pluggable.tensor(X)[key]
    assert pluggable.tensor(X)[1, 2, 3].numpy() == 23  # the host stays usable


def test_iteration_and_len():
    t = pluggable.tensor([[1, 2], [3, 4]])
    assert [row.numpy().tolist() for row in t] == [[1, 2], [3, 4]]
    assert [r.numpy().tolist() for r in list(t)] == [[1, 2], [3, 4]] and len(t) == 2
    with pytest.raises(TypeError, match="cannot iterate over a scalar"):
        iter(pluggable.tensor(1)).__next__()
    with pytest.raises(TypeError, match="len\\(\\) of a scalar"):
        len(pluggable.tensor(1))


# -- operators ------------------------------------------------------------------------------
A = np.array([-7.0, -1.5, 0.0, 2.0, 9.0], np.float32)
N = np.array([7, -7, 5, -5, 0], np.int32)
OPERATORS = [
    (">=", lambda t: t >= 0, lambda a: a >= 0),
    ("<=", lambda t: t <= 0, lambda a: a <= 0),
    ("//", lambda t: t // 2, lambda a: a // 2),
    ("%", lambda t: t % 2, lambda a: a % 2),
    ("**", lambda t: t ** 2, lambda a: a ** 2),
    ("rfloordiv", lambda t: 10 // (t + 10), lambda a: 10 // (a + 10)),
    ("rmod", lambda t: 7 % (t + 10), lambda a: 7 % (a + 10)),
    ("rpow", lambda t: 2 ** t, lambda a: 2 ** a),
    ("!=", lambda t: t != 2, lambda a: a != 2),
    ("==", lambda t: t == 2, lambda a: a == 2),
    ("neg abs", lambda t: abs(-t), lambda a: abs(-a)),
    ("rsub rtruediv", lambda t: 1 - 2 / (t + 10), lambda a: 1 - 2 / (a + 10)),
    ("ndarray + tensor", lambda t: np.ones(5, np.float32) + t, lambda a: 1 + a),
    ("ndarray * tensor", lambda t: np.full(5, 2.0) * t, lambda a: 2 * a),
    ("ndarray < tensor", lambda t: np.zeros(5) < t, lambda a: 0 < a),
    ("ndarray == tensor", lambda t: A == t, lambda a: A == a),
    ("round", lambda t: round(t), lambda a: np.round(a)),
]


@pytest.mark.parametrize("what, op, numpy_op", OPERATORS, ids=[o[0] for o in OPERATORS])
def test_operators_on_floats(what, op, numpy_op):
    result = op(pluggable.tensor(A))
    assert isinstance(result, pluggable.Tensor)
    want = numpy_op(A)
    np.testing.assert_allclose(result.numpy(), want, rtol=1e-6)
    assert result.dtype == ("bool" if want.dtype == bool else "float32")


INT_OPERATORS = [
    ("// floors", lambda t: t // 2, [3, -4, 2, -3, 0]),
    ("% takes the divisor's sign", lambda t: t % -3, [-2, -1, -1, -2, 0]),
    ("/ is true division in float64", lambda t: t / 2, [3.5, -3.5, 2.5, -2.5, 0.0]),
    ("rtruediv", lambda t: 1 / (t + 8), [1 / 15, 1.0, 1 / 13, 1 / 3, 1 / 8]),
    ("&", lambda t: t & 3, [3, 1, 1, 3, 0]),
    ("|", lambda t: t | 8, [15, -7, 13, -5, 8]),
    ("^", lambda t: 1 ^ t, [6, -8, 4, -6, 1]),
    ("~", lambda t: ~t, [-8, 6, -6, 4, -1]),
    ("**", lambda t: t ** 2, [49, 49, 25, 25, 0]),
]


@pytest.mark.parametrize("what, op, expected", INT_OPERATORS, ids=[o[0] for o in INT_OPERATORS])
def test_operators_on_integers(what, op, expected):
    result = op(pluggable.tensor(N))
    np.testing.assert_allclose(result.numpy(), expected)
    assert result.dtype == ("float64" if "true division" in what or what == "rtruediv"
                            else "int32")


def test_bool_operators_are_logical():
    p, q = pluggable.tensor([True, True, False]), np.array([True, False, False])
    assert (p & q).numpy().tolist() == [True, False, False]
    assert (p | q).numpy().tolist() == [True, True, False]
    assert (p ^ q).numpy().tolist() == [False, True, False]
    assert (~p).numpy().tolist() == [False, False, True]
    assert (q & p).numpy().tolist() == [True, False, False]


def test_equality_with_non_tensors_as_tensorflow():
    t = pluggable.tensor([1.0, 2.0, 3.0])
    assert (t == None) is False and (t != None) is True  # noqa: E711
    assert (t == "text") is False and (t != object()) is True
    one = pluggable.tensor([5])
    assert isinstance(one != 2, pluggable.Tensor) and (one != 2).numpy().tolist() == [True]
    mismatch = t == pluggable.tensor([1.0, 2.0])
    assert mismatch.shape == () and mismatch.numpy() == np.False_
    assert (t != np.ones(2)).numpy() == np.True_
    with pytest.raises(TypeError, match="unhashable"):
        hash(t)


SCALARS = [
    (float, [1.0, 2.0, 3.0], TypeError, r"only a scalar \(0-d\) tensor converts to a Python float; this one has shape \(3,\)"),
    (int, [[1]], TypeError, r"converts to a Python int; this one has shape \(1, 1\)"),
    (operator.index, 2.0, TypeError, "only an integer tensor can be an index"),
    (int, 1 + 1j, TypeError, "complex tensor does not convert to int"),
    (bool, [True, False], ValueError, "truth value of a tensor of 2 elements is ambiguous"),
]


@pytest.mark.parametrize("convert, value, error, match", SCALARS,
                         ids=[f"{c.__name__}-{v!r}" for c, v, _, _ in SCALARS])
def test_scalar_conversions_say_what_is_wrong(convert, value, error, match):
    with pytest.raises(error, match=match):
        convert(pluggable.tensor(value))


def test_scalar_conversions_of_scalars():
    assert float(pluggable.tensor(2.5)) == 2.5 and int(pluggable.tensor(7)) == 7
    assert complex(pluggable.tensor(1 + 2j)) == 1 + 2j
    assert [10, 20, 30][pluggable.tensor(1)] == 20
    assert bool(pluggable.tensor([True]))


def test_numpy_ufuncs_without_an_op_give_ndarrays():
    t = pluggable.tensor([1.0, 4.0])
    result = np.log2(t)
    assert isinstance(result, np.ndarray) and result.tolist() == [0, 2]
    with pytest.raises(TypeError, match="immutable"):
        np.add(t, t, out=t)


# -- raw_ops with tf.raw_ops' names ------------------------------------------------------------
def test_raw_ops_take_tf_raw_ops_names():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert raw_ops.Sum(input=x, axis=0).numpy().tolist() == [3, 5, 7]
    assert raw_ops.Select(condition=np.array([True, False]), x=x, y=x * 0).numpy().sum() == 3
    assert raw_ops.MatMul(a=x, b=x, transpose_b=True, grad_a=False, grad_b=False).shape == (2, 2)


# -- the functions a TensorFlow user reaches for ---------------------------------------------------
M = np.arange(6, dtype=np.float32).reshape(2, 3)
FUNCTIONS = [
    ("ones", lambda: pluggable.ones([2, 2]), np.ones((2, 2), np.float32)),
    ("ones_like", lambda: pluggable.ones_like(M), np.ones_like(M)),
    ("zeros_like", lambda: pluggable.zeros_like(M, dtype="int32"), np.zeros((2, 3), np.int32)),
    ("fill", lambda: pluggable.fill([2], 7), np.int32([7, 7])),
    ("range(5)", lambda: pluggable.range(5), np.arange(5, dtype=np.int32)),
    ("range(1, 2, 0.25)", lambda: pluggable.range(1, 2, 0.25), np.float32([1, 1.25, 1.5, 1.75])),
    ("range dtype", lambda: pluggable.range(3, dtype="int64"), np.arange(3)),
    ("concat", lambda: ops.concat([M, M], axis=1), np.concatenate([M, M], 1)),
    ("concat one", lambda: ops.concat([M], 0), M),
    ("stack", lambda: ops.stack([M, M], axis=-1), np.stack([M, M], -1)),
    ("split", lambda: ops.split(M, 3, axis=1)[2], M[:, 2:]),
    ("split sizes", lambda: ops.split(M, [1, -1], axis=1)[1], M[:, 1:]),
    ("unstack", lambda: ops.unstack(M)[1], M[1]),
    ("pad", lambda: ops.pad(M, [[1, 0], [0, 1]]), np.pad(M, ((1, 0), (0, 1)))),
    ("pad constant", lambda: ops.pad(M, [[0, 0], [1, 1]], constant_values=9),
     np.pad(M, ((0, 0), (1, 1)), constant_values=9)),
    ("squeeze", lambda: ops.squeeze(M[None, :, None]), M),
    ("squeeze axis", lambda: ops.squeeze(M[None], axis=0), M),
    ("expand_dims", lambda: ops.expand_dims(M, 1), M[:, None]),
    ("tile", lambda: ops.tile(M, [2, 1]), np.tile(M, (2, 1))),
    ("gather", lambda: ops.gather(M, [2, 0], axis=1), M[:, [2, 0]]),
    ("gather rows", lambda: ops.gather(M, [1, 1]), M[[1, 1]]),
    ("gather_nd", lambda: ops.gather_nd(M, [[1, 2], [0, 0]]), np.float32([5, 0])),
    ("one_hot", lambda: ops.one_hot([0, 2], 3), np.float32([[1, 0, 0], [0, 0, 1]])),
    ("one_hot values", lambda: ops.one_hot([1], 2, on_value=5, off_value=-1),
     np.int32([[-1, 5]])),
    ("clip_by_value", lambda: ops.clip_by_value(M, 1.0, 4.0), np.clip(M, 1, 4)),
    ("where(condition)", lambda: ops.where(M > 3), np.argwhere(M > 3)),
    ("where(condition, x, y)", lambda: ops.where(M > 3, M, -1.0), np.where(M > 3, M, -1)),
    ("reduce_sum", lambda: ops.reduce_sum(input_tensor=M, axis=1, keepdims=True),
     M.sum(1, keepdims=True)),
    ("reduce_any", lambda: ops.reduce_any(M > 4), np.True_),
    ("softmax axis 0", lambda: ops.softmax(np.float32([[0, 0], [0, 0]]), axis=0),
     np.full((2, 2), 0.5, np.float32)),
    ("boolean_mask", lambda: ops.boolean_mask(M, [True, False]), M[:1]),
    ("reverse", lambda: ops.reverse(M, [1]), M[:, ::-1]),
    ("shape", lambda: ops.shape(M), np.int32([2, 3])),
    ("cumsum", lambda: ops.cumsum(M, axis=1), np.cumsum(M, 1)),
    ("logical_xor", lambda: ops.logical_xor([True, False], [True, True]),
     np.array([False, True])),
    ("divide ints", lambda: ops.divide(np.int32([3]), np.int32([2])), np.float64([1.5])),
    ("broadcast_to", lambda: ops.broadcast_to([1, 2], [2, 2]), np.int32([[1, 2], [1, 2]])),
    ("strided_slice", lambda: ops.strided_slice(M, [0, 2], [2, 0], [1, -1]), M[0:2, 2:0:-1]),
]


@pytest.mark.parametrize("what, call, expected", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_functions(what, call, expected):
    result = call()
    expected = np.asarray(expected)
    assert result.shape == expected.shape and result.dtype == expected.dtype
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-6)


def test_random_with_seeds():
    pluggable.random.set_seed(5)
    a = pluggable.random.uniform([3], seed=1).numpy()
    b = pluggable.random.uniform([3], seed=1).numpy()
    pluggable.random.set_seed(5)
    again = pluggable.random.uniform([3], seed=1).numpy()
    assert a.dtype == np.float32 and (a == again).all() and not (a == b).all()
    normal = pluggable.random.normal([2000], mean=10.0, stddev=2.0, seed=3).numpy()
    assert abs(normal.mean() - 10) < 0.3 and abs(normal.std() - 2) < 0.3
    ints = pluggable.random.uniform([50], minval=5, maxval=8, dtype="int64").numpy()
    assert ints.dtype == np.int64 and set(ints) <= {5, 6, 7}
    s1 = pluggable.random.stateless_uniform([4], seed=[1, 2], minval=-1.0, maxval=1.0).numpy()
    s2 = pluggable.random.stateless_uniform([4], seed=[1, 2], minval=-1.0, maxval=1.0).numpy()
    assert (s1 == s2).all() and (np.abs(s1) <= 1).all()
    assert pluggable.random.stateless_normal([3], seed=[4, 4]).numpy().tolist() == \
        pluggable.random.stateless_normal([3], seed=[4, 4]).numpy().tolist()
    with pytest.raises(InvalidArgumentError, match="integer dtype needs maxval"):
        pluggable.random.uniform([2], dtype="int32")
    with pytest.raises(InvalidArgumentError, match="alg 'threefry' is not supported"):
        pluggable.random.stateless_uniform([2], seed=[1, 1], alg="threefry")
    pluggable.random.set_seed(None)


# -- config, the command line, help and dir ------------------------------------------------------
def test_logical_devices_and_experimental_aliases():
    assert [d.name for d in config.list_logical_devices()] == [
        "/device:CPU:0", "/device:XPU:0", "/device:XPU:1"]
    assert [d.device_type for d in config.list_logical_devices("xpu")] == ["XPU", "XPU"]
    assert config.get_visible_devices() == config.list_physical_devices()
    assert config.experimental.get_memory_info is config.get_memory_info
    assert config.experimental.set_memory_growth is config.set_memory_growth
    assert config.experimental.set_visible_devices is config.set_visible_devices


def _python(code: str) -> subprocess.CompletedProcess:
    code = "import warnings\nwarnings.simplefilter('error')\n" + code
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


def test_hidden_devices_get_no_streams_or_memory():
    result = _python("""
import pluggable
from pluggable import config
xpus = config.list_physical_devices("XPU")
config.set_visible_devices(xpus[1:], "XPU")
print([d.name for d in config.get_visible_devices()])
print([d.name for d in config.list_logical_devices()])
manager = pluggable.loader.manager()
with pluggable.device("xpu:1"):
    t = pluggable.tensor([1.0])
print(t.device)
for call in (lambda: pluggable.tensor([1.0], device="xpu:0"),
             lambda: config.get_memory_info("XPU:0")):
    try:
        call()
    except pluggable.errors.NotFoundError as e:
        print("hidden:", "hidden by pluggable.config.set_visible_devices" in str(e))
print(sorted(k for k in manager.devices._devices))
platform = manager.devices.enabled_platform("XPU")
print(platform.executor(1).allocator_created, platform.executor(0).allocator_created)
try:
    config.set_visible_devices(xpus[:1], "XPU")  # would hide XPU:1, in use
except RuntimeError as e:
    print("late:", "cannot be modified after being initialized" in str(e))
try:
    config.set_visible_devices(xpus)
except pluggable.errors.InvalidArgumentError as e:
    print("cpu:", "the CPU cannot be hidden" in str(e))
""")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:8] == [
        "['/physical_device:CPU:0', '/physical_device:XPU:1']",
        "['/device:CPU:0', '/device:XPU:1']", "/device:XPU:1", "hidden: True", "hidden: True",
        "[('XPU', 1)]", "True False", "late: True"]
    assert "cpu: True" in result.stdout


def test_version_and_kernels_command():
    version = subprocess.run([sys.executable, "-m", "pluggable", "--version"],
                             capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.strip() == \
        f"pluggable {pluggable.__version__}"
    kernels = subprocess.run([sys.executable, "-m", "pluggable", "kernels", "--device", "xpu"],
                             capture_output=True, text=True, timeout=120)
    assert kernels.returncode == 0, kernels.stderr
    lines = kernels.stdout.splitlines()
    assert lines[0].split() == ["op", "XPU"]
    row = next(line for line in lines if line.startswith("AddV2 "))
    assert row.split(None, 1)[1] == "int32, int64, float32, float64"
    assert next(line for line in lines if line.startswith("Acos ")).split()[1] == "-"
    covered = sum(1 for r in config.kernel_coverage("XPU").values() if r.get("XPU"))
    assert lines[-1] == f"XPU: kernels for {covered} of {len(pluggable.oplib.core.OPS)} ops"


def test_kernel_coverage_matrix():
    matrix = config.kernel_coverage()
    assert len(matrix) >= 100
    # A NumPy kernel for every op of the library (not for ops that plugins of tests that ran
    # before registered with tensorflow/c/ops.h, nor for their kernels of unknown ops).
    library = [op for op in matrix if op in OPS and plugin_of(OPS[op]) is None]
    assert len(library) >= 100
    assert [op for op in library if "CPU" not in matrix[op]] == []
    assert matrix["AddV2"]["XPU"] == ("int32", "int64", "float32", "float64")
    assert matrix["All"]["CPU"] == ("bool",)
    assert matrix["Shape"]["CPU"][0] == "bool" and "complex128" in matrix["Shape"]["CPU"]


def test_help_and_dir_see_the_public_names_while_loading_stays_lazy():
    result = _python("""
import sys, pydoc, pluggable
names = dir(pluggable)
print(all(n in names for n in ("tensor", "ops", "raw_ops", "float32", "constant", "random")))
print("numpy" in sys.modules)
text = pydoc.render_doc(pluggable, renderer=pydoc.plaintext)
print(all(w in text for w in ("tensor(data", "raw_ops", "float32", "ops", "constant(")))
""")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False", "True"]


def test_unknown_devices_in_scopes_still_raise():
    with pytest.raises(NotFoundError):
        with pluggable.device("xpu:7"):
            pass


@pytest.mark.parametrize("name", ["constant", "convert_to_tensor", "ones", "ones_like",
                                  "zeros_like", "fill", "range", "concat", "stack", "split",
                                  "pad", "squeeze", "expand_dims", "tile", "gather", "one_hot",
                                  "clip_by_value", "where"])
def test_tensorflows_top_level_functions_are_there(name):
    assert getattr(pluggable, name) is getattr(ops, name)
    assert name in pluggable.__all__ and name in dir(pluggable)
