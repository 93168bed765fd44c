"""TensorFlow's names: ``pluggable.<name>`` for every function of `pluggable.ops` that
TensorFlow has at its top level, and the ``pluggable.nn`` and ``pluggable.math``
namespaces. With TensorFlow installed, every name offered is checked against TensorFlow's
own namespace: the name exists there and takes the same parameters, in the same order, with
the same defaults (pluggable's keyword-only ``device=`` aside)."""
from __future__ import annotations

import numpy as np
import pytest
from tensorflow_child import in_tensorflow
from tf_record import parameters

import pluggable
from pluggable import math, nn, ops

OFFERED = {"tf": {name: getattr(pluggable, name) for name in pluggable._TF_FUNCTIONS},
           "tf.nn": {name: getattr(nn, name) for name in nn.__all__},
           "tf.math": {name: getattr(math, name) for name in math.__all__}}

SIGNATURES = """
import inspect
def described(function):
    out = []
    for p in inspect.signature(function).parameters.values():
        if p.default is p.empty:
            out.append({"name": p.name, "required": True})
        elif isinstance(p.default, tf.dtypes.DType):
            out.append({"name": p.name, "dtype": p.default.name})
        else:
            out.append({"name": p.name, "value": p.default})
    return out
found = {}
for space, names in OFFERED.items():
    module = eval(space)
    public = sorted(n for n in dir(module) if not n.startswith("_")
                    and callable(getattr(module, n)) and not isinstance(getattr(module, n), type))
    found[space] = {"signatures": {n: described(getattr(module, n)) if n in public else None
                                   for n in names},
                    "public": public}
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def tensorflows():
    names = {space: sorted(functions) for space, functions in OFFERED.items()}
    return in_tensorflow(f"OFFERED = {names!r}\n" + SIGNATURES)


@pytest.mark.parametrize("space", sorted(OFFERED))
def test_every_name_offered_is_tensorflows(tensorflows, space):
    theirs = tensorflows[space]["signatures"]
    missing = sorted(name for name in OFFERED[space] if theirs[name] is None)
    assert not missing, f"{space} has no {missing}"
    different = {name: (parameters(function), theirs[name])
                 for name, function in OFFERED[space].items()
                 if parameters(function) != theirs[name]}
    assert not different


@pytest.mark.parametrize("space", sorted(OFFERED))
def test_what_tensorflow_has_and_we_lack_is_listed(tensorflows, space, capsys):
    lacking = sorted(set(tensorflows[space]["public"]) - set(OFFERED[space]))
    with capsys.disabled():  # information, not a failure: shown with pytest -s or -rA
        print(f"\n{space}: {len(OFFERED[space])} names offered, "
              f"{len(lacking)} of TensorFlow's not: {' '.join(lacking)}")
    assert len(OFFERED[space]) + len(lacking) >= len(tensorflows[space]["public"])


def test_the_names_are_ops_functions():
    for space in OFFERED.values():
        for name, function in space.items():
            assert function is getattr(ops, name)
    assert pluggable.reduce_sum([[1.0, 2.0], [3.0, 4.0]], axis=0).numpy().tolist() == [4, 6]
    assert pluggable.add(1, 2).numpy() == 3 and pluggable.zeros([2]).numpy().tolist() == [0, 0]
    assert nn.relu([-1.0, 2.0]).numpy().tolist() == [0.0, 2.0]
    assert math.reduce_sum([1, 2, 3]).numpy() == 6
    assert {"nn", "math", "reduce_sum", "add"} <= set(pluggable.__all__) <= set(dir(pluggable))


@pytest.mark.parametrize("where, device_name", [("CPU", "/device:CPU:0"),
                                                ("/xpu:0", "/device:XPU:0")])
def test_nn_pooling_and_cross_entropy(where, device_name):
    rng = np.random.default_rng(3)
    images = rng.standard_normal((2, 4, 4, 3)).astype(np.float32)
    logits = rng.standard_normal((5, 3)).astype(np.float32)
    classes = np.array([0, 1, 2, 0, 1])
    expected = -np.log(np.exp(logits) / np.exp(logits).sum(1, keepdims=True))[range(5), classes]
    with pluggable.device(where):
        pooled = nn.max_pool2d(images, 2, 2, "VALID")
        same = nn.max_pool(images, [2, 2], [1, 1], "SAME")
        dense = nn.softmax_cross_entropy_with_logits(np.eye(3, dtype=np.float32)[classes],
                                                     logits)
        sparse = nn.sparse_softmax_cross_entropy_with_logits(classes.astype(np.int32), logits)
        batched = nn.sparse_softmax_cross_entropy_with_logits(classes.reshape(5, 1),
                                                              logits.reshape(5, 1, 3))
        along_0 = nn.softmax_cross_entropy_with_logits(np.eye(3, dtype=np.float32)[classes].T,
                                                       logits.T, axis=0)
    assert pooled.device == sparse.device == device_name and pooled.shape == (2, 2, 2, 3)
    np.testing.assert_allclose(pooled.numpy(),
                               images.reshape(2, 2, 2, 2, 2, 3).max(axis=(2, 4)))
    assert same.shape == (2, 4, 4, 3)
    for loss in (dense, sparse, along_0):
        np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-5)
    assert batched.shape == (5, 1)
    np.testing.assert_allclose(batched.numpy()[:, 0], expected, rtol=1e-5)
    with pytest.raises(pluggable.errors.UnimplementedError, match="only 2-D pooling"):
        nn.max_pool(np.zeros((1, 4, 3), np.float32), 2, 2, "VALID")


def test_cross_entropy_and_pooling_match_tensorflow():
    rng = np.random.default_rng(5)
    images = rng.standard_normal((1, 5, 5, 2)).astype(np.float32)
    logits = rng.standard_normal((4, 3)).astype(np.float32)
    labels = rng.random((4, 3)).astype(np.float32)
    theirs = in_tensorflow(f"""
images = np.array({images.tolist()!r}, np.float32)
logits = np.array({logits.tolist()!r}, np.float32)
labels = np.array({labels.tolist()!r}, np.float32)
print(json.dumps([tf.nn.max_pool2d(images, 3, 2, "SAME").numpy().tolist(),
                  tf.nn.softmax_cross_entropy_with_logits(labels, logits).numpy().tolist(),
                  tf.nn.sparse_softmax_cross_entropy_with_logits([2, 0, 1, 1],
                                                                 logits).numpy().tolist()]))
""")
    with pluggable.device("/xpu:0"):
        ours = [nn.max_pool2d(images, 3, 2, "SAME"),
                nn.softmax_cross_entropy_with_logits(labels, logits),
                nn.sparse_softmax_cross_entropy_with_logits(np.array([2, 0, 1, 1], np.int32),
                                                            logits)]
    for mine, reference in zip(ours, theirs):
        np.testing.assert_allclose(mine.numpy(), np.asarray(reference), rtol=1e-5)
