"""Optimizers with ``tf.keras.optimizers``' names, parameters and update rules (Keras 3, as
TensorFlow 2.21 ships it): `SGD` (momentum, Nesterov), `Adam` (AMSGrad), `RMSprop`
(momentum, centered) and `Adagrad`.

``optimizer.apply_gradients(zip(grads, variables))`` updates each `pluggable.Variable` on
its own device. Where that device has a kernel for the update
(ResourceApplyGradientDescent, ResourceApplyKerasMomentum or ResourceApplyMomentum,
ResourceApplyAdam, ResourceApplyRMSProp, ResourceApplyCenteredRMSProp,
ResourceApplyAdagradV2), one op runs it, on the device's compute stream; elsewhere the same
rule runs as element-wise ops on the device, as Keras writes it. Either way the slot
variables (momentum, first and second moments, accumulators) live on the variable's device.

The learning rate is a float, or a callable: one taking a parameter is called with the
step (the number of updates done so far, as a Keras ``LearningRateSchedule`` is), one
taking none is called with nothing (as Keras calls plain callables).
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

import numpy as np

from .base.errors import InvalidArgumentError, warn
from .eager.dispatch import device as _scope, execute, has_kernel
from .kernels import registry as _registry
from .ops import maximum, sqrt, square
from .tensors.tensor import Tensor, tensor as _tensor
from .variables import Variable

__all__ = ["Optimizer", "SGD", "Adam", "RMSprop", "Adagrad"]

LearningRate = Union[float, Callable[..., Any]]


def _takes_step(schedule: Callable) -> bool:
    """Whether a learning-rate callable takes the step (else it takes nothing)."""
    try:
        parameters = inspect.signature(schedule).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
               for p in parameters)


class Optimizer:
    """What every optimizer here shares: the learning rate (a float or a schedule), the
    step count ``iterations``, the slot variables of each variable it updates, and
    `apply_gradients`.

    ``use_kernels`` (True by default) runs the device's update kernel where there is one;
    False runs the composed ops everywhere (to compare the two, or to debug a plugin's
    kernel)."""

    def __init__(self, learning_rate: LearningRate, name: str):
        if not callable(learning_rate):
            learning_rate = float(learning_rate)
            if not math.isfinite(learning_rate) or learning_rate < 0:
                raise InvalidArgumentError(
                    f"{name}: learning_rate must be a finite number >= 0, got {learning_rate}",
                    call=name)
        self._learning_rate = learning_rate
        self.name = name
        self.use_kernels = True
        self._iterations = Variable(0, trainable=False, name=f"{name}/iterations",
                                    dtype="int64", device="CPU")
        self._step = 0
        self._slots: Dict[int, Dict[str, Variable]] = {}
        self._built: Optional[List[Variable]] = None
        self._update_ops: Dict[int, Optional[str]] = {}
        self._scalars: Dict[Tuple[Any, Any, Any], Tensor] = {}
        # (op, device, dtype) -> (kernel registry generation, whether the device has the op)
        self._kernels: Dict[Tuple[Any, Any, Any], Tuple[int, bool]] = {}

    # -- what Keras' optimizers answer ---------------------------------------------------
    @property
    def iterations(self) -> Variable:
        """The number of `apply_gradients` calls so far (an int64 variable on the CPU)."""
        return self._iterations

    @property
    def learning_rate(self) -> float:
        """The learning rate of the next step (the schedule's value at this step)."""
        return self._current_learning_rate()

    @learning_rate.setter
    def learning_rate(self, value: LearningRate) -> None:
        self._learning_rate = value if callable(value) else float(value)

    @property
    def variables(self) -> List[Variable]:
        """``iterations`` and every slot variable."""
        return [self._iterations] + [slot for slots in self._slots.values()
                                     for slot in slots.values()]

    def slot(self, variable: Variable, name: str) -> Variable:
        """The slot variable ``name`` of ``variable`` (see each optimizer's slot names)."""
        slots = self._slots.get(id(variable))
        if slots is None or name not in slots:
            have = ", ".join(slots or ()) or "none"
            raise InvalidArgumentError(
                f"{self.name}: no slot {name!r} for variable {variable.name!r} (its slots: "
                f"{have}); slots are made by the first apply_gradients", call="slot")
        return slots[name]

    def update_op(self, variable: Variable) -> Optional[str]:
        """The op of the device that ran the last update of ``variable`` (e.g.
        "ResourceApplyAdam"), or None when the update ran as composed ops."""
        return self._update_ops.get(id(variable))

    # -- applying ---------------------------------------------------------------------------
    def apply_gradients(self, grads_and_vars: Iterable[Tuple[Any, Variable]]) -> Variable:
        """One step: each variable is updated with its gradient, on the variable's device.
        A gradient of None leaves its variable alone (with a warning, as Keras); all None is
        a ValueError. The first call makes the slot variables; later calls take those
        variables only. Returns ``iterations``."""
        pairs = list(grads_and_vars)
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise InvalidArgumentError(
                    f"{self.name}.apply_gradients takes (gradient, variable) pairs, e.g. "
                    f"zip(grads, variables); got {pair!r}", call="apply_gradients")
        missing = [v for g, v in pairs if g is None]
        pairs = [(g, v) for g, v in pairs if g is not None]
        if not pairs:
            raise InvalidArgumentError("No gradients provided for any variable.",
                                       call="apply_gradients")
        if missing:
            warn(f"Gradients do not exist for variables {[_name_of(v) for v in missing]} "
                 f"when minimizing the loss; they are left unchanged", UserWarning)
        variables = [v for _, v in pairs]
        self._check_variables(variables)
        if self._built is None:
            self._build([v for v in variables] + [v for v in missing
                                                   if isinstance(v, Variable)])
        else:
            unknown = [v.name for v in variables if id(v) not in self._slots]
            if unknown:
                raise InvalidArgumentError(
                    f"{self.name}: unknown variable(s) {unknown}: this optimizer was built "
                    f"for the variables of its first apply_gradients; make another optimizer "
                    f"for other variables", call="apply_gradients")
        learning_rate = self._current_learning_rate()
        for gradient, variable in pairs:
            gradient = self._gradient(gradient, variable)
            with _scope(variable._device):
                op = self._update(gradient, variable, self._slots[id(variable)],
                                  learning_rate)
            self._update_ops[id(variable)] = op
        self._iterations.assign_add(np.int64(1))
        self._step += 1
        return self._iterations

    def apply(self, grads: Iterable[Any], trainable_variables: Iterable[Variable]) -> Variable:
        """``apply_gradients(zip(grads, trainable_variables))``, as Keras 3's ``apply``."""
        return self.apply_gradients(zip(list(grads), list(trainable_variables)))

    def _check_variables(self, variables: List[Any]) -> None:
        seen = set()
        for v in variables:
            if not isinstance(v, Variable):
                raise InvalidArgumentError(
                    f"{self.name}: optimizers update pluggable.Variable objects, got "
                    f"{type(v).__name__}", call="apply_gradients")
            v._check_open("apply_gradients")
            if id(v) in seen:
                raise InvalidArgumentError(
                    f"{self.name}: variable {v.name!r} is given twice in one step; give each "
                    f"variable once (add its gradients first)", call="apply_gradients")
            seen.add(id(v))
            if not v.dtype.is_floating:
                raise InvalidArgumentError(
                    f"{self.name}: variable {v.name!r} is {v.dtype.name}; optimizers update "
                    f"floating-point variables", call="apply_gradients")

    def _build(self, variables: List[Variable]) -> None:
        for variable in variables:
            self._slots[id(variable)] = {
                name: Variable(_filled(variable, value), trainable=False,
                               name=f"{variable.name}/{name}", device=variable._device)
                for name, value in self._slot_values(variable).items()}
        self._built = variables

    def _gradient(self, gradient: Any, variable: Variable) -> Tensor:
        """The gradient as a tensor of the variable's dtype on the variable's device (moved
        there as TensorFlow moves an op's inputs), of the variable's shape."""
        if isinstance(gradient, Variable):
            gradient = gradient.read_value()
        if not isinstance(gradient, Tensor):
            gradient = _tensor(gradient, dtype=variable.dtype, device=variable._device)
        elif gradient.dtype != variable.dtype:
            with _scope(gradient._device):
                (gradient,) = execute("Cast", [gradient], {"DstT": variable.dtype})
        shape = variable.value_shape
        if gradient._shape != shape:
            raise InvalidArgumentError(
                f"{self.name}: the gradient of variable {variable.name!r} has shape "
                f"{gradient._shape}, the variable {tuple(shape)}; they must be equal",
                call="apply_gradients")
        if gradient._device is not variable._device:
            gradient = gradient.to(variable._device)
        return gradient

    def _current_learning_rate(self) -> float:
        rate = self._learning_rate
        if callable(rate):
            rate = rate(self._step) if _takes_step(rate) else rate()
            if isinstance(rate, (Tensor, Variable)):
                rate = rate.numpy()
            rate = float(rate)
        return rate

    # A few steps' worth of scalars: the hyperparameters, and the values that change with the
    # step (bias corrections, a scheduled learning rate) until the cache is refilled.
    _SCALARS_KEPT = 64

    def _scalar(self, value: Any, variable: Variable) -> Tensor:
        """``value`` as a scalar tensor of ``variable``'s dtype on its device. Tensors never
        change, so one made for a value serves every update that takes it: each step of an
        update kernel would otherwise upload its hyperparameters again (five per variable
        for Adam)."""
        key = (value, variable.dtype, variable._device)
        found = self._scalars.get(key)
        if found is None:
            if len(self._scalars) >= self._SCALARS_KEPT:
                self._scalars.clear()
            found = _tensor(np.asarray(value, variable.dtype.numpy_dtype),
                            device=variable._device)
            self._scalars[key] = found
        return found

    def _kernel(self, op: str, variable: Variable) -> bool:
        """Whether to run ``op`` for ``variable``: the variable's device has a kernel for it
        and kernels are in use. The answer is kept until the kernel registry changes (a
        lookup is about 10 µs, once per variable and step otherwise)."""
        if not self.use_kernels:
            return False
        key = (op, variable._device, variable.dtype)
        known = self._kernels.get(key)
        if known is None or known[0] != _registry.generation:
            known = (_registry.generation,
                     has_kernel(op, variable._device, {"T": variable.dtype}))
            self._kernels[key] = known
        return known[1]

    # -- what each optimizer defines -------------------------------------------------------
    def _slot_values(self, variable: Variable) -> Dict[str, float]:
        """The slots ``variable`` needs, with their initial value."""
        raise NotImplementedError

    def _update(self, gradient: Tensor, variable: Variable, slots: Dict[str, Variable],
                learning_rate: float) -> Optional[str]:
        """Enqueues the update of ``variable`` (in its device's scope); returns the op that
        ran it, or None for composed ops."""
        raise NotImplementedError

    def get_config(self) -> Dict[str, Any]:
        return {"name": self.name, "learning_rate": self._learning_rate}

    def __repr__(self) -> str:
        return f"<pluggable.optimizers.{type(self).__name__} {self.get_config()}>"


def _name_of(variable: Any) -> str:
    return getattr(variable, "name", repr(variable))


def _filled(variable: Variable, value: float) -> Tensor:
    """A tensor of ``variable``'s shape and dtype holding ``value``, on its device."""
    return _tensor(np.full(tuple(variable.value_shape), value, variable.dtype.numpy_dtype),
                   device=variable._device)


def _check_unit(name: str, what: str, value: float, low: float = 0.0,
                high: float = 1.0) -> float:
    value = float(value)
    if not low <= value <= high:
        raise InvalidArgumentError(f"{name}: {what} must be in [{low:g}, {high:g}], got "
                                   f"{value}", call=name)
    return value


class SGD(Optimizer):
    """Gradient descent, with momentum and Nesterov momentum as Keras 3:
    ``m = momentum * m - lr * g``; ``var += m`` (Nesterov: ``var += momentum * m - lr *
    g``); without momentum ``var -= lr * g``. Slot: "momentum" (with momentum)."""

    def __init__(self, learning_rate: LearningRate = 0.01, momentum: float = 0.0,
                 nesterov: bool = False, name: str = "SGD"):
        super().__init__(learning_rate, name)
        self.momentum = _check_unit(name, "momentum", momentum)
        self.nesterov = bool(nesterov)

    def _slot_values(self, variable):
        return {"momentum": 0.0} if self.momentum else {}

    def _update(self, g, var, slots, lr):
        if not self.momentum:
            if self._kernel("ResourceApplyGradientDescent", var):
                execute("ResourceApplyGradientDescent", [var, self._scalar(lr, var), g])
                return "ResourceApplyGradientDescent"
            var.assign_sub(g * self._scalar(lr, var))
            return None
        m = slots["momentum"]
        momentum, rate = self._scalar(self.momentum, var), self._scalar(lr, var)
        if self._kernel("ResourceApplyKerasMomentum", var):
            execute("ResourceApplyKerasMomentum", [var, m, rate, g, momentum],
                    {"use_nesterov": self.nesterov})
            return "ResourceApplyKerasMomentum"
        m.assign(m * momentum - g * rate)
        if self.nesterov:
            var.assign_add(m * momentum - g * rate)
        else:
            var.assign_add(m)
        return None

    def get_config(self):
        return {**super().get_config(), "momentum": self.momentum, "nesterov": self.nesterov}


class Adam(Optimizer):
    """Adam as Keras 3: ``m += (g - m) * (1 - beta_1)``, ``v += (g² - v) * (1 - beta_2)``,
    ``var -= m * lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) / (sqrt(v) + epsilon)`` (t the
    step, from 1); with ``amsgrad`` the largest ``v`` so far takes ``v``'s place. Slots:
    "m", "v" (and "v_hat" with amsgrad)."""

    def __init__(self, learning_rate: LearningRate = 0.001, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-7, amsgrad: bool = False,
                 name: str = "adam"):
        super().__init__(learning_rate, name)
        self.beta_1 = _check_unit(name, "beta_1", beta_1)
        self.beta_2 = _check_unit(name, "beta_2", beta_2)
        self.epsilon = _check_unit(name, "epsilon", epsilon, 0.0, math.inf)
        self.amsgrad = bool(amsgrad)

    def _slot_values(self, variable):
        slots = {"m": 0.0, "v": 0.0}
        if self.amsgrad:
            slots["v_hat"] = 0.0
        return slots

    def _update(self, g, var, slots, lr):
        kind = var.dtype.numpy_dtype.type
        step = kind(self._step + 1)
        beta_1_power = np.power(kind(self.beta_1), step)
        beta_2_power = np.power(kind(self.beta_2), step)
        m, v = slots["m"], slots["v"]
        if not self.amsgrad and self._kernel("ResourceApplyAdam", var):
            execute("ResourceApplyAdam", [var, m, v, self._scalar(beta_1_power, var),
                                          self._scalar(beta_2_power, var),
                                          self._scalar(lr, var), self._scalar(self.beta_1, var),
                                          self._scalar(self.beta_2, var),
                                          self._scalar(self.epsilon, var), g])
            return "ResourceApplyAdam"
        one = kind(1)
        alpha = kind(lr) * np.sqrt(one - beta_2_power) / (one - beta_1_power)
        m.assign_add((g - m) * self._scalar(1 - self.beta_1, var))
        v.assign_add((square(g) - v) * self._scalar(1 - self.beta_2, var))
        if self.amsgrad:
            v_hat = slots["v_hat"]
            v_hat.assign(maximum(v_hat, v))
            v = v_hat
        var.assign_sub((m * alpha) / (sqrt(v) + self._scalar(self.epsilon, var)))
        return None

    def get_config(self):
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon, "amsgrad": self.amsgrad}


class RMSprop(Optimizer):
    """RMSprop as Keras 3: ``velocity = rho * velocity + (1 - rho) * g²``; centered, also
    ``average = rho * average + (1 - rho) * g`` and the denominator ``velocity - average² +
    epsilon`` (else ``velocity + epsilon``); the increment ``lr * g / sqrt(denominator)``
    is subtracted, or with momentum accumulated (``mom = momentum * mom + increment``) and
    ``mom`` subtracted. Slots: "velocity", "momentum" (with momentum, or where the device's
    kernel runs the step), "average_gradient" (centered)."""

    def __init__(self, learning_rate: LearningRate = 0.001, rho: float = 0.9,
                 momentum: float = 0.0, epsilon: float = 1e-7, centered: bool = False,
                 name: str = "rmsprop"):
        super().__init__(learning_rate, name)
        self.rho = _check_unit(name, "rho", rho)
        self.momentum = _check_unit(name, "momentum", momentum)
        self.epsilon = _check_unit(name, "epsilon", epsilon, 0.0, math.inf)
        self.centered = bool(centered)

    def _op(self) -> str:
        return "ResourceApplyCenteredRMSProp" if self.centered else "ResourceApplyRMSProp"

    def _slot_values(self, variable):
        slots = {"velocity": 0.0}
        if self.momentum or self._kernel(self._op(), variable):
            slots["momentum"] = 0.0  # the kernels always keep one
        if self.centered:
            slots["average_gradient"] = 0.0
        return slots

    def _update(self, g, var, slots, lr):
        velocity = slots["velocity"]
        rho = self._scalar(self.rho, var)
        epsilon = self._scalar(self.epsilon, var)
        if "momentum" in slots and self._kernel(self._op(), var):
            scalars = [self._scalar(lr, var), rho, self._scalar(self.momentum, var), epsilon,
                       g]
            if self.centered:
                execute(self._op(), [var, slots["average_gradient"], velocity,
                                     slots["momentum"], *scalars])
            else:
                execute(self._op(), [var, velocity, slots["momentum"], *scalars])
            return self._op()
        one_minus_rho = self._scalar(1 - self.rho, var)
        velocity.assign(velocity * rho + square(g) * one_minus_rho)
        if self.centered:
            average = slots["average_gradient"]
            average.assign(average * rho + g * one_minus_rho)
            denominator = velocity - square(average) + epsilon
        else:
            denominator = velocity + epsilon
        increment = (g * self._scalar(lr, var)) / sqrt(denominator)
        if self.momentum:
            momentum = slots["momentum"]
            momentum.assign(momentum * self._scalar(self.momentum, var) + increment)
            var.assign_sub(momentum)
        else:
            var.assign_sub(increment)
        return None

    def get_config(self):
        return {**super().get_config(), "rho": self.rho, "momentum": self.momentum,
                "epsilon": self.epsilon, "centered": self.centered}


class Adagrad(Optimizer):
    """Adagrad as Keras 3: ``accumulator += g²``; ``var -= lr * g / sqrt(accumulator +
    epsilon)``. Slot: "accumulator", which holds Keras' accumulator plus ``epsilon`` (it
    starts at ``initial_accumulator_value + epsilon``): the update is then
    ResourceApplyAdagradV2's with an epsilon of 0, whose formula adds epsilon outside the
    square root."""

    def __init__(self, learning_rate: LearningRate = 0.001,
                 initial_accumulator_value: float = 0.1, epsilon: float = 1e-7,
                 name: str = "adagrad"):
        super().__init__(learning_rate, name)
        self.initial_accumulator_value = _check_unit(
            name, "initial_accumulator_value", initial_accumulator_value, 0.0, math.inf)
        self.epsilon = _check_unit(name, "epsilon", epsilon, 0.0, math.inf)

    def _slot_values(self, variable):
        kind = variable.dtype.numpy_dtype.type
        return {"accumulator": kind(self.initial_accumulator_value) + kind(self.epsilon)}

    def _update(self, g, var, slots, lr):
        accumulator = slots["accumulator"]
        if self._kernel("ResourceApplyAdagradV2", var):
            execute("ResourceApplyAdagradV2", [var, accumulator, self._scalar(lr, var),
                                               self._scalar(0.0, var), g])
            return "ResourceApplyAdagradV2"
        accumulator.assign_add(square(g))
        var.assign_sub((g * self._scalar(lr, var)) / sqrt(accumulator))
        return None

    def get_config(self):
        return {**super().get_config(),
                "initial_accumulator_value": self.initial_accumulator_value,
                "epsilon": self.epsilon}

