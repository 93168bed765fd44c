"""The child-process probe's child: ``python -m pluggable.loader.probe_child PLUGIN REPORT``.

It loads the plugin with the host's own loading steps (`PluginLibrary`, `Platform`,
`load_kernels`), appending one JSON line to ``REPORT`` before each step, so that the parent
(`pluggable.plugin.probe`) knows the last step reached when the child dies. A crash here is
the child's, never the user's process.
"""
from __future__ import annotations

import ctypes
import os
import sys
import warnings

from ..abi.stream_executor import SP_PlatformFns, SP_StreamExecutor
from ..base import limits
from ..base import native as _native
from ..devices.platform import Platform
from ..kernels import registry as kernel_registry
from ..kernels.registry import load_kernels
from ..plugin import dependencies
from ..plugin.library import ENTRY_POINTS, PluginCallError, PluginLibrary
from ..plugin.validation import optional_callback

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional


def inspect(path: str, step: Callable[[str], None],
            report: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Loads ``path`` in this process, step by step (``step(name)`` is told each step before
    it starts), and returns what ``doctor`` reports, filled into ``report`` as it goes (so
    that a failed step leaves what was found before it). Raises `PluginCallError` on a
    failed step. Only the probe child calls it: a crash here is the child's."""

    report = {} if report is None else report
    report["path"] = path
    # The whole dependency tree, read before anything of it runs: what a failed dlopen would
    # name only the first of.
    tree = dependencies.tree_of(path)
    report["libraries"] = [[lib.name, lib.path, lib.needed_by and os.path.basename(lib.needed_by)]
                           for lib in tree.libraries[1:]]
    report["missing_libraries"] = [[lib.name, os.path.basename(lib.needed_by)]
                                   for lib in tree.missing]
    users = {name: used_by for name, used_by in tree.missing_symbols(()).items()
             if not hasattr(_native.lib, name)}
    report["missing_symbols"] = sorted(users)
    report["missing_symbols_users"] = users
    if tree.tensorflow:
        report["tensorflow"] = dependencies.tensorflow_build(tree)
    step("dlopen")
    library = PluginLibrary(path)
    report["exports"] = {name: library._symbol(name) is not None for name in ENTRY_POINTS}
    if library.init_fn is None:  # kernels, an optimizer or a profiler and no device, as TF allows
        step("kernels")
        _kernels(library, report, set())
        step("profiler")
        report["profiler"] = library.profiler_init is not None
        step("shutdown")
        kernel_registry.close_all()
        return report
    platform = Platform(library, library.init_fn, library.init_symbol, progress=step)
    report.update(
        platform=platform.name, device_type=platform.device_type,
        api_version=".".join(map(str, platform.api_version)),
        plugin_version=platform.plugin_version, priority=platform.default_priority,
        device_count=platform.device_count)
    sizes = {}
    for name, view, cls in (("SP_Platform", platform._platform_view, None),
                            ("SP_PlatformFns", platform._platform_fns, SP_PlatformFns)):
        sizes[name] = {"plugin": int(view.struct_size), "host": type(view).struct_size()}
    if platform._timer_fns is not None:
        sizes["SP_TimerFns"] = {"plugin": int(platform._timer_fns.struct_size),
                                "host": type(platform._timer_fns).struct_size()}
    required = set(SP_PlatformFns.required_callbacks())
    callbacks = {f"SP_PlatformFns.{n}": {"required": n in required,
                                          "present": bool(_present(platform._platform_fns, n))}
                 for n in SP_PlatformFns.callbacks()}
    devices = []
    for ordinal in range(platform.device_count):
        executor = platform._create_executor(ordinal)
        device = {"ordinal": ordinal, "details": executor.details()}
        devices.append(device)
        if ordinal == 0:
            sizes["SP_Device"] = {"plugin": int(executor._device.struct_size),
                                  "host": ctypes.sizeof(type(executor._device))}
            sizes["SP_StreamExecutor"] = {"plugin": int(executor._se.struct_size),
                                          "host": SP_StreamExecutor.struct_size()}
            se_required = set(SP_StreamExecutor.required_callbacks())
            callbacks.update({f"SP_StreamExecutor.{n}": {"required": n in se_required,
                                                         "present": executor._fns.get(n)
                                                         is not None}
                              for n in SP_StreamExecutor.callbacks()})
    report.update(struct_sizes=sizes, callbacks=callbacks, devices=devices)
    step("kernels")
    _kernels(platform, report, {platform.device_type})
    step("profiler")
    report["profiler"] = library.profiler_init is not None
    step("shutdown")
    kernel_registry.close_all()
    platform.destroy()
    return report


def _kernels(source, report: Dict[str, Any], device_types) -> None:
    """Runs the TF_InitKernel of ``source`` (a platform, or a library without a device) and
    fills in what it registered, what was refused and the warnings."""
    kernels = []
    library = getattr(source, "library", source)
    if library.kernel_init is not None:
        from ..base.dtypes import type_names  # NumPy: only for a plugin with kernels

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            accepted = load_kernels(source, device_types)
        kernels = [{"op": r.op, "device_type": r.device_type, "kernel": r.kernel_name,
                    "types": {a: type_names(c) for a, c in sorted(r.constraints.items())}}
                   for r in accepted]
        report["kernel_warnings"] = [limits.safe_text(str(w.message)) for w in caught]
        report["refused"] = [limits.safe_text(str(r))
                             for r in kernel_registry.refusals(source.path)]
    report["kernels"] = kernels


def _present(view, name: str) -> bool:
    return optional_callback(type(view), view, name) is not None


def child_main(argv: List[str]) -> int:
    """``python -m pluggable.loader.probe_child PLUGIN REPORT``: the child's whole life."""
    import json

    path, report_path = argv
    fd = os.open(report_path, os.O_WRONLY | os.O_APPEND)

    def write(entry: Dict[str, Any]) -> None:
        os.write(fd, (json.dumps(entry, default=str) + "\n").encode("utf-8"))

    reached = ["start"]

    def step(name: str) -> None:
        reached.append(name)
        write({"step": name})

    report: Dict[str, Any] = {}
    try:
        inspect(path, step, report)
    except PluginCallError as exc:
        write({"error": {"step": exc.step, "reason": exc.reason}, "report": report,
               "done": True})
        return 0
    except Exception as exc:  # a host error class raised while checking the plugin
        write({"error": {"step": reached[-1], "reason": limits.safe_text(
            f"{type(exc).__name__}: {exc}")}, "report": report, "done": True})
        return 0
    write({"report": report, "done": True})
    return 0


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
