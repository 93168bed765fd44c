"""ctypes mirrors of the C structs, enums and function-pointer types in ``include/``.

One module per header, keeping the C names (``SP_StreamExecutor``, ``host_callback``,
``SP_STREAMEXECUTOR_STRUCT_SIZE``) so that grep finds both sides:

=======================  ==============================================================
``tf_status``            tensorflow/c/tf_status.h (+ xla/tsl/c/tsl_status.h): TF_Code
``tf_datatype``          tensorflow/c/tf_datatype.h: TF_DataType
``tf_buffer``            tensorflow/c/tf_buffer.h: TF_Buffer
``tf_tensor``            tensorflow/c/tf_tensor.h: TF_AllocatorAttributes, deallocator
``stream_executor``      tensorflow/c/experimental/stream_executor/stream_executor.h
``pluggable_profiler``   tensorflow/c/experimental/pluggable_profiler/pluggable_profiler.h
``kernels``              tensorflow/c/kernels.h
``plugin_ext``           pluggable/plugin_ext.h (the project's extension chain)
``profiler_clock``       pluggable/profiler_clock.h (a cheap profiler clock, header-only)
``dlpack``               dlpack/dlpack.h (DLPack 1.1, for tensor exchange)
``grappler``             tensorflow/c/experimental/grappler/grappler.h: graph optimizers
``tf_tstring``           tensorflow/c/tf_tstring.h, the TF_TString layout, TF_AttrType
=======================  ==============================================================

Struct sizes and field presence are computed in one place, :class:`ABIStruct`. Opaque
handles are ``c_void_p``. This package depends on nothing but ctypes, so it imports on its
own. tests/abi checks every mirror against the C compiler.
"""

# The mirrors are imported on first use (``abi.SP_Platform``, ``from pluggable.abi import
# TF_Code``, ``abi.stream_executor``): loading a plugin needs a few headers' mirrors, not all.
_SUBMODULES = ("dlpack", "grappler", "kernels", "pluggable_profiler", "plugin_ext",
               "profiler_clock", "stream_executor", "tf_buffer", "tf_datatype", "tf_status", "tf_tensor",
               "tf_tstring")
_HOME = {
    "ABIStruct": "_struct", "TF_Bool": "_struct", "walk_ext_chain": "plugin_ext",
    "TF_Code": "tf_status", "TF_DataType": "tf_datatype", "TF_Buffer": "tf_buffer",
    "TF_AllocatorAttributes": "tf_tensor",
}
_HOME.update(dict.fromkeys((
    "TF_StringView", "TF_InputRange_Args", "TFDevice_AllocatorAttributes",
    "TF_RendezvousArgsStruct", "TF_RendezvousParsedKey", "TF_RendezvousSend_Params",
    "TF_RendezvousDoneCallback_Params", "TF_RendezvousDoneCallbackImpl",
    "TF_RendezvousAsyncRecv_Params", "TF_RendezvousThunk"), "kernels"))
_HOME.update(dict.fromkeys(
    ("TP_Optimizer", "TP_OptimizerConfigs", "TP_OptimizerRegistrationParams"), "grappler"))
_HOME.update(dict.fromkeys(
    ("TF_ProfilerRegistrationParams", "TP_Profiler", "TP_ProfilerFns"), "pluggable_profiler"))
_HOME.update(dict.fromkeys((
    "PLUGGABLE_ExtHeader", "PLUGGABLE_ExtType", "PLUGGABLE_LiveHandles",
    "PLUGGABLE_LiveHandlesExt", "PLUGGABLE_DLPackDeviceExt", "PLUGGABLE_PlatformInfoExt",
    "PLUGGABLE_StreamNamesExt", "PLUGGABLE_ProfilerContextExt"), "plugin_ext"))
_HOME["PG_ClockPair"] = "profiler_clock"
_HOME.update(dict.fromkeys((
    "DLDataType", "DLDevice", "DLManagedTensor", "DLManagedTensorVersioned", "DLPackVersion",
    "DLTensor"), "dlpack"))
_HOME.update(dict.fromkeys((
    "SE_CreateDeviceFnsParams", "SE_CreateDeviceParams", "SE_CreateStreamExecutorParams",
    "SE_EventStatus", "SE_PlatformRegistrationParams", "SP_AllocatorStats", "SP_Device",
    "SP_DeviceFns", "SP_DeviceMemoryBase", "SP_Platform", "SP_PlatformFns",
    "SP_StreamExecutor", "SP_TimerFns"), "stream_executor"))
_HOME.update(dict.fromkeys((
    "TF_TString", "TF_TString_Large", "TF_TString_Offset", "TF_TString_Raw",
    "TF_TString_Small", "TF_TString_View", "TStringOwnerCApi"), "tf_tstring"))


def _all_structs() -> tuple:
    """Every mirrored struct; tests/abi compares each with the C compiler's layout."""
    from . import (dlpack, grappler, kernels, pluggable_profiler, plugin_ext, profiler_clock,
                   stream_executor, tf_buffer, tf_tensor, tf_tstring)

    return (tf_buffer.TF_Buffer, tf_tensor.TF_AllocatorAttributes, *stream_executor.STRUCTS,
            *pluggable_profiler.STRUCTS, *kernels.STRUCTS, *plugin_ext.STRUCTS,
            *profiler_clock.STRUCTS, *dlpack.STRUCTS, *grappler.STRUCTS, *tf_tstring.STRUCTS)


def _submodule(name: str):
    import sys

    __import__(f"{__name__}.{name}")  # importlib.import_module, without importing importlib
    return sys.modules[f"{__name__}.{name}"]


def __getattr__(name: str):
    if name == "ALL_STRUCTS":
        value = _all_structs()
    elif name in _SUBMODULES:
        value = _submodule(name)
    elif name in _HOME:
        value = getattr(_submodule(_HOME[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(_SUBMODULES))


__all__ = ["ALL_STRUCTS", *_HOME]  # every name this package gives, each from its module
