"""Mirror of tensorflow/c/experimental/grappler/grappler.h: a plugin's graph optimizer
(TF_InitGraph). Same conventions as stream_executor.py."""

from __future__ import annotations

import enum
from ctypes import CFUNCTYPE, POINTER, c_int, c_int32, c_size_t, c_void_p

from ._struct import ABIStruct

GO_MAJOR = 0
GO_MINOR = 0
GO_PATCH = 1


class TF_TriState(enum.IntEnum):
    TF_TriState_Default = 0
    TF_TriState_Off = 1
    TF_TriState_On = 2


# The optimizers TP_OptimizerConfigs turns on or off, in field order.
OPTIMIZER_CONFIG_FIELDS = (
    "disable_model_pruning", "implementation_selector", "function_optimization",
    "common_subgraph_elimination", "arithmetic_optimization", "debug_stripper",
    "constant_folding", "shape_optimization", "auto_mixed_precision",
    "auto_mixed_precision_onednn_bfloat16", "auto_mixed_precision_mkl",
    "pin_to_host_optimization", "layout_optimizer", "remapping", "loop_optimization",
    "dependency_optimization", "auto_parallel", "memory_optimization",
    "scoped_allocator_optimization",
)


class TP_OptimizerConfigs(ABIStruct):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p)] + [
        (name, c_int) for name in OPTIMIZER_CONFIG_FIELDS]  # TF_TriState
    _last_field_ = "scoped_allocator_optimization"
    _size_macro_ = "TP_OPTIMIZER_CONFIGS_STRUCT_SIZE"


# void* (*create_func)(void);
TP_Optimizer_create_func_fn = CFUNCTYPE(c_void_p)
# void (*optimize_func)(void*, const TF_Buffer*, const TF_GrapplerItem*, TF_Buffer*,
#                       TF_Status*);
TP_Optimizer_optimize_func_fn = CFUNCTYPE(None, c_void_p, c_void_p, c_void_p, c_void_p,
                                          c_void_p)
# void (*destroy_func)(void*);
TP_Optimizer_destroy_func_fn = CFUNCTYPE(None, c_void_p)


class TP_Optimizer(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ext", c_void_p),
        ("create_func", TP_Optimizer_create_func_fn),
        ("optimize_func", TP_Optimizer_optimize_func_fn),
        ("destroy_func", TP_Optimizer_destroy_func_fn),
    ]
    _last_field_ = "destroy_func"
    _optional_ = ("create_func", "destroy_func")
    _size_macro_ = "TP_OPTIMIZER_STRUCT_SIZE"


class TP_OptimizerRegistrationParams(ABIStruct):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ext", c_void_p),
        ("major_version", c_int32),
        ("minor_version", c_int32),
        ("patch_version", c_int32),
        ("device_type", c_void_p),  # const char*, set by the plugin
        ("optimizer_configs", POINTER(TP_OptimizerConfigs)),
        ("optimizer", POINTER(TP_Optimizer)),
    ]
    _last_field_ = "optimizer"
    _size_macro_ = "TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE"


# void TF_InitGraph(TP_OptimizerRegistrationParams* params, TF_Status* status);
TF_InitGraph_fn = CFUNCTYPE(None, c_void_p, c_void_p)

TP_OPTIMIZER_CONFIGS_STRUCT_SIZE = TP_OptimizerConfigs.struct_size()
TP_OPTIMIZER_STRUCT_SIZE = TP_Optimizer.struct_size()
TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE = TP_OptimizerRegistrationParams.struct_size()

STRUCTS = (TP_OptimizerConfigs, TP_Optimizer, TP_OptimizerRegistrationParams)
