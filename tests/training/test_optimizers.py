"""`pluggable.optimizers` against ``tf.keras.optimizers`` of TensorFlow 2.21 (Keras 3): the
same gradient sequence applied for several steps from the same initial values gives the
same variables at every step (1e-5 relative), on the CPU and on /xpu:0, through the device's
update kernel where it has one and through composed ops (``use_kernels = False``). Then the
error paths: gradients of None, shapes, dtypes, unknown and repeated variables."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from tensorflow_child import in_tensorflow

import pluggable
from pluggable import optimizers

STEPS = 5
SHAPES = [(3, 2), (4,)]
_rng = np.random.default_rng(11)
INITIAL = [_rng.standard_normal(shape).astype(np.float32) for shape in SHAPES]
GRADIENTS = [[_rng.standard_normal(shape).astype(np.float32) for shape in SHAPES]
             for _ in range(STEPS)]


def schedule(step):
    """A learning rate that decays with the step (a plain callable here, a Keras
    LearningRateSchedule in TensorFlow)."""
    return 0.1 / (1.0 + step)


# (name, pluggable's constructor and arguments, Keras' class name): the same arguments in both.
CASES = [
    ("sgd", "SGD", {"learning_rate": 0.1}),
    ("sgd-momentum", "SGD", {"learning_rate": 0.1, "momentum": 0.9}),
    ("sgd-nesterov", "SGD", {"learning_rate": 0.1, "momentum": 0.9, "nesterov": True}),
    ("sgd-schedule", "SGD", {"learning_rate": "schedule", "momentum": 0.5}),
    ("adam", "Adam", {"learning_rate": 0.01}),
    ("adam-defaults", "Adam", {}),
    ("adam-amsgrad", "Adam", {"learning_rate": 0.01, "amsgrad": True}),
    ("adam-betas", "Adam", {"learning_rate": 0.05, "beta_1": 0.8, "beta_2": 0.99,
                            "epsilon": 1e-3}),
    ("adam-schedule", "Adam", {"learning_rate": "schedule"}),
    ("rmsprop", "RMSprop", {"learning_rate": 0.01}),
    ("rmsprop-momentum", "RMSprop", {"learning_rate": 0.01, "momentum": 0.5}),
    ("rmsprop-centered", "RMSprop", {"learning_rate": 0.01, "centered": True}),
    ("rmsprop-all", "RMSprop", {"learning_rate": 0.01, "rho": 0.8, "momentum": 0.5,
                                "centered": True, "epsilon": 1e-4}),
    ("adagrad", "Adagrad", {"learning_rate": 0.1}),
    ("adagrad-options", "Adagrad", {"learning_rate": 0.1, "initial_accumulator_value": 0.5,
                                    "epsilon": 1e-3}),
    ("adagrad-from-zero", "Adagrad", {"learning_rate": 0.1,
                                      "initial_accumulator_value": 0.0}),
]

KERAS = """
class Schedule(tf.keras.optimizers.schedules.LearningRateSchedule):
    def __call__(self, step):
        return 0.1 / (1.0 + tf.cast(step, tf.float32))

results = {}
for name, cls, kwargs in CASES:
    kwargs = dict(kwargs)
    if kwargs.get("learning_rate") == "schedule":
        kwargs["learning_rate"] = Schedule()
    optimizer = getattr(tf.keras.optimizers, cls)(**kwargs)
    variables = [tf.Variable(np.array(v, np.float32)) for v in INITIAL]
    steps = []
    for grads in GRADIENTS:
        optimizer.apply_gradients(zip([tf.constant(np.array(g, np.float32)) for g in grads],
                                      variables))
        steps.append([v.numpy().tolist() for v in variables])
    results[name] = steps
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def keras_results():
    return in_tensorflow(
        f"CASES = {CASES!r}\nINITIAL = {[v.tolist() for v in INITIAL]!r}\n"
        f"GRADIENTS = {[[g.tolist() for g in step] for step in GRADIENTS]!r}\n" + KERAS)


def make(cls: str, kwargs: dict) -> optimizers.Optimizer:
    kwargs = dict(kwargs)
    if kwargs.get("learning_rate") == "schedule":
        kwargs["learning_rate"] = schedule
    return getattr(optimizers, cls)(**kwargs)


# The update op each optimizer runs where the device has its kernel.
KERNELS = {"SGD": "ResourceApplyGradientDescent", "SGD+momentum": "ResourceApplyKerasMomentum",
           "Adam": "ResourceApplyAdam", "RMSprop": "ResourceApplyRMSProp",
           "RMSprop+centered": "ResourceApplyCenteredRMSProp",
           "Adagrad": "ResourceApplyAdagradV2"}


def expected_op(cls: str, kwargs: dict):
    if kwargs.get("amsgrad"):
        return None  # no kernel has AMSGrad: composed ops
    if kwargs.get("momentum") and cls == "SGD":
        return KERNELS["SGD+momentum"]
    if kwargs.get("centered"):
        return KERNELS["RMSprop+centered"]
    return KERNELS[cls]


@pytest.mark.parametrize("use_kernels", [True, False], ids=["kernel", "composed"])
@pytest.mark.parametrize("where", ["CPU", "/xpu:0"])
@pytest.mark.parametrize("name, cls, kwargs", CASES, ids=[c[0] for c in CASES])
def test_steps_equal_keras(keras_results, name, cls, kwargs, where, use_kernels):
    optimizer = make(cls, kwargs)
    optimizer.use_kernels = use_kernels
    variables = [pluggable.Variable(v, device=where) for v in INITIAL]
    for step, grads in enumerate(GRADIENTS):
        returned = optimizer.apply_gradients(zip(grads, variables))
        assert returned is optimizer.iterations and int(returned.numpy()) == step + 1
        for variable, reference in zip(variables, keras_results[name][step]):
            # 1e-5 relative; 1e-6 absolute for values near 0: ResourceApplyAdam computes
            # 1 - beta_2 in float32 (1 - 0.999f), Keras 3 in double then rounds it, 1.3e-5
            # apart, which moves a step by up to 7e-6 of its size.
            np.testing.assert_allclose(variable.numpy(), np.asarray(reference, np.float32),
                                       rtol=1e-5, atol=1e-6,
                                       err_msg=f"{name} step {step + 1} on {where}")
    op = expected_op(cls, kwargs) if use_kernels else None
    for variable in variables:
        assert variable.device == pluggable.tensor(0.0, device=where).device
        if op is not None and where != "CPU" and not _device_has(op, where):
            op = None  # this device has no kernel for it: composed ops, as documented
        assert optimizer.update_op(variable) == op
        for slot in optimizer._slots[id(variable)].values():
            assert slot.device == variable.device  # slots live with their variable


def _device_has(op: str, where: str) -> bool:
    return any(k.device_type == "XPU" for k in pluggable.config.list_kernels(op))


def test_every_xpu_kernel_path_is_covered():
    """The XPU has a kernel for every update: the kernel runs are really tested there."""
    for op in KERNELS.values():
        assert _device_has(op, "/xpu:0"), op


def test_float64_variables_take_the_same_rules():
    grads = [np.array([0.5, -1.0]), np.array([0.25, 2.0])]
    results = []
    for use_kernels in (True, False):
        optimizer = optimizers.Adam(0.1)
        optimizer.use_kernels = use_kernels
        v = pluggable.Variable(np.array([1.0, 2.0]), device="/xpu:0")
        for g in grads:
            optimizer.apply_gradients([(g, v)])
        assert v.dtype == pluggable.float64
        results.append(v.numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)


def test_learning_rate_schedules_and_iterations():
    steps_seen = []

    def decay(step):
        steps_seen.append(step)
        return 1.0 / (1 + step)

    optimizer = optimizers.SGD(decay)
    v = pluggable.Variable([0.0])
    for _ in range(3):
        optimizer.apply_gradients([([1.0], v)])
    assert steps_seen == [0, 1, 2] and int(optimizer.iterations.numpy()) == 3
    np.testing.assert_allclose(v.numpy(), [-(1 + 1 / 2 + 1 / 3)], rtol=1e-6)
    constant = optimizers.SGD(lambda: 0.5)  # no parameter: called with nothing, as Keras
    w = pluggable.Variable([0.0])
    constant.apply_gradients([([1.0], w)])
    assert w.numpy().tolist() == [-0.5] and constant.learning_rate == 0.5
    assert optimizer.learning_rate == 0.25  # the next step's


def test_a_gradient_of_none_leaves_its_variable_alone():
    optimizer = optimizers.SGD(0.5)
    a, b = pluggable.Variable([1.0], name="a"), pluggable.Variable([2.0], name="b")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimizer.apply_gradients([([1.0], a), (None, b)])
    assert a.numpy().tolist() == [0.5] and b.numpy().tolist() == [2.0]
    (warning,) = caught
    assert "Gradients do not exist for variables ['b']" in str(warning.message)
    assert warning.filename == __file__
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        optimizer.apply_gradients([(None, a), (None, b)])
    optimizer.apply_gradients([([1.0], a), ([1.0], b)])  # b was built too: it is known
    assert b.numpy().tolist() == [1.5]


def test_errors_say_what_is_wrong():
    optimizer = optimizers.Adam(0.1)
    v = pluggable.Variable(np.zeros((2, 2), np.float32), name="kernel", device="/xpu:0")
    with pytest.raises(ValueError, match=r"gradient of variable 'kernel' has shape \(4,\), "
                                         r"the variable \(2, 2\)"):
        optimizer.apply_gradients([(np.zeros(4, np.float32), v)])
    with pytest.raises(ValueError, match="'kernel' is given twice"):
        optimizer.apply_gradients([(np.ones((2, 2)), v), (np.ones((2, 2)), v)])
    optimizer.apply_gradients([(np.ones((2, 2)), v)])
    other = pluggable.Variable(np.zeros(2, np.float32), name="bias", device="/xpu:1")
    with pytest.raises(ValueError, match=r"unknown variable\(s\) \['bias'\]"):
        optimizer.apply_gradients([(np.ones(2), other)])
    with pytest.raises(ValueError, match="int32; optimizers update floating-point"):
        optimizers.SGD().apply_gradients([([1], pluggable.Variable([1]))])
    with pytest.raises(ValueError, match="pairs"):
        optimizers.SGD().apply_gradients([np.ones(2)])
    with pytest.raises(ValueError, match="momentum must be in"):
        optimizers.SGD(momentum=1.5)
    with pytest.raises(ValueError, match="learning_rate must be a finite number"):
        optimizers.Adam(float("nan"))
    with pytest.raises(ValueError, match="no slot 'velocity'"):
        optimizer.slot(v, "velocity")
    v.close()
    with pytest.raises(pluggable.errors.FailedPreconditionError, match="closed"):
        optimizer.apply_gradients([(np.ones((2, 2)), v)])


def test_a_gradient_on_another_device_is_moved_to_the_variable():
    optimizer = optimizers.SGD(0.5, momentum=0.5)
    v = pluggable.Variable([1.0, 1.0], device="/xpu:1")
    for grad_device in ("CPU", "/xpu:0", "/xpu:1"):
        optimizer.apply_gradients([(pluggable.constant([1.0, 2.0], device=grad_device), v)])
    assert optimizer.slot(v, "momentum").device == "/device:XPU:1"
    # m: -0.5, -1 | -0.75, -1.5 | -0.875, -1.75; var: 1 + sum(m)
    np.testing.assert_allclose(v.numpy(), [1 - 2.125, 1 - 4.25], rtol=1e-6)


def test_variables_on_two_devices_in_one_step():
    """Each variable is updated on its own device, with its slots there: one step may span
    devices, as in TensorFlow."""
    optimizer = optimizers.Adam(0.1)
    on_cpu = pluggable.Variable([1.0, 2.0], name="on_cpu")
    on_one = pluggable.Variable([1.0, 2.0], name="on_one", device="/xpu:1")
    for _ in range(2):
        optimizer.apply_gradients([([0.5, -0.5], on_cpu), ([0.5, -0.5], on_one)])
    assert optimizer.slot(on_cpu, "m").device == "/device:CPU:0"
    assert optimizer.slot(on_one, "v").device == "/device:XPU:1"
    assert optimizer.update_op(on_one) == "ResourceApplyAdam"
    np.testing.assert_allclose(on_one.numpy(), on_cpu.numpy(), rtol=1e-6)
    np.testing.assert_allclose(on_cpu.numpy(), [0.8, 2.2], rtol=1e-5)


def test_the_update_follows_kernels_disabled_and_enabled_between_steps():
    """Whether the device has the update's kernel is remembered until the kernel registry
    changes: a disabled kernel makes the next step composed, enabling it brings it back."""
    from pluggable.kernels.registry import registered_kernels

    optimizer = optimizers.Adam(0.1)
    v = pluggable.Variable([1.0, 2.0], device="/xpu:0")
    kernels = registered_kernels("ResourceApplyAdam", "XPU")
    seen = []
    for enabled in (True, False, True):
        for r in kernels:
            r.set_enabled(enabled)
        try:
            optimizer.apply_gradients([([0.5, -0.5], v)])
        finally:
            for r in kernels:
                r.set_enabled(True)
        seen.append(optimizer.update_op(v))
    assert seen == ["ResourceApplyAdam", None, "ResourceApplyAdam"]
    np.testing.assert_allclose(v.numpy(), [0.7, 2.3], rtol=1e-5)


def test_a_slow_device_gives_the_same_steps(stream_delay):
    """With the XPU's streams slowed down, updates and reads stay ordered."""
    results = []
    for delay in (0, 300):
        stream_delay(delay)
        optimizer = optimizers.RMSprop(0.01, momentum=0.5, centered=True)
        variables = [pluggable.Variable(v, device="/xpu:0") for v in INITIAL]
        for grads in GRADIENTS:
            optimizer.apply_gradients(zip(grads, variables))
        results.append([v.numpy() for v in variables])
    for fast, slow in zip(*results):
        np.testing.assert_array_equal(fast, slow)
