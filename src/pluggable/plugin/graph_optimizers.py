"""Graph optimizers of plugins (tensorflow/c/experimental/grappler/grappler.h).

A plugin may export TF_InitGraph to register a graph optimizer for its device type, which
TensorFlow runs on the graphs it builds (``tf.function``). pluggable builds no graphs: it
calls TF_InitGraph when the plugin loads, checks what the plugin filled as it checks every
other entry point (struct sizes, the required optimize_func, the device type), and records
the optimizer so that ``python -m pluggable plugins`` lists it. It never calls
create_func, optimize_func or destroy_func. A refused registration is a `PluginLoadWarning`;
the plugin's devices and kernels stay usable, as the optimizer would never run here anyway.
"""
from __future__ import annotations

import ctypes

TYPE_CHECKING = False  # typing's constant, without importing typing while plugins load
if TYPE_CHECKING:
    from typing import Dict, Optional

from ..base import native as _native
from ..base.record import record
from ..abi.grappler import (GO_MAJOR, GO_MINOR, GO_PATCH, OPTIMIZER_CONFIG_FIELDS,
                           TF_InitGraph_fn, TF_TriState, TP_Optimizer, TP_OptimizerConfigs,
                           TP_OptimizerRegistrationParams)
from .validation import (ValidationError, alloc_struct, negotiate, read_name,
                         require_callbacks)


@record(frozen=True)
class GraphOptimizer:
    """What a plugin's TF_InitGraph registered."""

    device_type: str
    has_create: bool
    has_destroy: bool
    # TensorFlow's own optimizers the plugin turns on or off ("remapping": "off", ...)
    configs: Dict[str, str]

    def describe(self) -> str:
        changed = ", ".join(f"{k}={v}" for k, v in self.configs.items())
        return (f"for {self.device_type}" + (f" ({changed})" if changed else "")
                + "; not run: pluggable builds no graphs")


def init_graph(symbol: int, path: str, device_type: Optional[str]) -> GraphOptimizer:
    """Calls the plugin's TF_InitGraph at ``symbol`` and validates the result; raises
    `ValidationError` (with the reason) when the plugin fails or breaks a rule.
    ``device_type`` is the plugin's own device type, which the optimizer must be for; None
    for a library without a device, whose optimizer may be for any (ITEX's CPU library
    registers one for "CPU")."""
    params = alloc_struct(TP_OptimizerRegistrationParams)
    configs = alloc_struct(TP_OptimizerConfigs)
    optimizer = alloc_struct(TP_Optimizer)
    params.major_version, params.minor_version, params.patch_version = \
        GO_MAJOR, GO_MINOR, GO_PATCH
    params.optimizer_configs = ctypes.pointer(configs)
    params.optimizer = ctypes.pointer(optimizer)
    status = _native.acquire_status()
    try:
        TF_InitGraph_fn(symbol)(ctypes.addressof(params), status.address)
        if not status.ok:
            raise ValidationError(f"TF_InitGraph failed: {status.message or '(no message)'}")
    finally:
        _native.release_status(status)
    where = "TF_InitGraph"
    optimizer_view = negotiate(TP_Optimizer, optimizer, where)
    require_callbacks(TP_Optimizer, optimizer_view, ["optimize_func"], where)
    configs_view = negotiate(TP_OptimizerConfigs, configs, where)
    registered = read_name(params.device_type or 0,
                           "TP_OptimizerRegistrationParams.device_type")
    if device_type is not None and registered != device_type:
        raise ValidationError(
            f"TF_InitGraph registered an optimizer for device type {registered!r}, but the "
            f"plugin provides {device_type!r}; a plugin optimizes graphs for its own device")
    chosen = {}
    for name in OPTIMIZER_CONFIG_FIELDS:
        if not TP_OptimizerConfigs.field_present(name, int(configs_view.struct_size)):
            continue
        value = getattr(configs_view, name)
        if value not in (TF_TriState.TF_TriState_Default, TF_TriState.TF_TriState_Off,
                         TF_TriState.TF_TriState_On):
            raise ValidationError(f"TF_InitGraph set TP_OptimizerConfigs.{name} to {value}, "
                                  f"which is not a TF_TriState (0 default, 1 off, 2 on)")
        if value != TF_TriState.TF_TriState_Default:
            chosen[name] = "off" if value == TF_TriState.TF_TriState_Off else "on"
    return GraphOptimizer(registered, bool(optimizer_view.create_func),
                          bool(optimizer_view.destroy_func), chosen)


def describe(optimizer: Optional[GraphOptimizer], error: str = "") -> str:
    if error:
        return f"refused: {error}"
    return optimizer.describe() if optimizer else ""
