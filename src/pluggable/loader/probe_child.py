"""The child-process probe's child: `child_main` ([PLUGIN, REPORT]), started by
`pluggable.plugin.probe` through a program on its standard input.

It loads the plugin with the host's own loading steps (`PluginLibrary`, `Platform`,
`load_kernels`), then makes the calls a user makes next (`exercise`, `exercise_profiler`),
appending one JSON line to ``REPORT`` before each step, so that the parent knows the last
step reached when the child dies. A crash here is the child's, never the user's process.
"""
from __future__ import annotations

import ctypes
import os
import sys
import warnings

import numpy as np

from ..abi.stream_executor import SP_PlatformFns, SP_StreamExecutor
from ..base import limits
from ..base import native as _native
from ..base.errors import PluggableError
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
        if library.profiler_init is not None:
            report["profiler_error"] = exercise_profiler(library, step)
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
    accepted = _kernels(platform, report, {platform.device_type})
    if platform.device_count:
        executor = platform._create_executor(0)
        report["exercised"] = exercise(executor, accepted, step)
    step("profiler")
    report["profiler"] = library.profiler_init is not None
    if library.profiler_init is not None:
        report["profiler_error"] = exercise_profiler(library, step)
    step("shutdown")
    kernel_registry.close_all()
    platform.destroy()
    return report


def exercise(executor, registrations, step: Callable[[str], None]) -> Dict[str, Any]:
    """What a user does right after loading, each as a step of its own: a stream and an event
    made and destroyed, memory allocated, copies both ways (the values must come back), an
    event recorded and waited for, and each kernel in ``registrations`` run once on device 0.
    Returns what was run, what was skipped and what failed with an error status, and why.
    A crash or a hang ends the child in its step; an error of the API steps raises."""
    step("stream")
    stream = executor.create_stream()
    stream.close()
    step("event")
    event = executor.create_event()
    event.close()
    step("memory")
    sent = np.arange(256, dtype=np.uint32) * np.uint32(2654435761)
    memory = executor.allocate(sent.nbytes)
    step("copies")
    executor.sync_memcpy_htod(memory, sent)
    back = np.zeros_like(sent)
    executor.sync_memcpy_dtoh(back, memory)
    if not np.array_equal(back, sent):
        wrong = int(np.argmax(back != sent))
        raise PluginCallError("copies", f"a copy to device 0 and back changed the data: word "
                                        f"{wrong} went out as {int(sent[wrong]):#x} and came "
                                        f"back as {int(back[wrong]):#x}")
    step("event record")
    stream = executor.create_stream()
    event = executor.create_event()
    executor.memcpy_htod(stream, memory, sent)
    event.record(stream)
    event.synchronize()
    stream.synchronize()
    event.close()
    memory.close()
    ran, skipped, failed = [], {}, {}
    for registration in registrations:
        try:
            why = _run_once(executor, stream, registration, step)
        except PluggableError as exc:
            # An error status is the kernel's own answer, not a broken plugin: doctor names
            # it, loading goes on. The stream it failed on is replaced.
            failed[registration.kernel_name] = limits.safe_text(str(exc))
            stream.close()
            stream = executor.create_stream()
            continue
        if why:
            skipped[registration.kernel_name] = why
        else:
            ran.append(registration.kernel_name)
    stream.close()
    return {"kernels_run": ran, "kernels_skipped": skipped, "kernels_failed": failed}


def _run_once(executor, stream, registration, step: Callable[[str], None]) -> str:
    """Runs ``registration``'s kernel once on inputs from `samples.generate`; returns why it
    was not run ("" when it was). A failing kernel raises (the step names it)."""
    from ..base import dtypes as dt
    from ..kernels.registry import KernelInput, free_host_output
    from ..oplib import OPS, REQUIRED, samples

    op = OPS.get(registration.op)
    if op is None or op.missing:
        return f"pluggable has no usable op {registration.op!r}"
    constraints = registration.constraints
    attr = next((a for a in ("T", "SrcT") if a in constraints), None)
    codes = sorted(constraints.get(attr, ())) if attr else [int(dt.float32.tf_code)]
    dtype = next((d for d in map(dt.from_code, codes) if dt.has_tensors(d)), None) \
        if codes else None
    if dtype is None:
        return "no type of its constraints has tensors here"
    generated = samples.generate(op.name, dtype, 0, {
        name: dt.type_names(types) for name, types in constraints.items()})
    if generated is None:
        return f"no input generator for {op.name}"
    arrays, attrs = generated
    if any(isinstance(a, (list, samples.Variable)) for a in arrays):
        return "its inputs are a list or a resource variable (conformance runs it)"
    attrs = dict(attrs)
    for arg, array in zip(op.inputs, arrays):
        if arg.type_attr and arg.type_attr not in attrs:
            attrs[arg.type_attr] = dt.as_dtype(np.asarray(array).dtype)
    for spec in op.attrs:
        if spec.name not in attrs:
            if spec.default is REQUIRED:
                return f"its attribute {spec.name} has no default"
            attrs[spec.name] = spec.default
    if not registration.matches(attrs):
        return "the generated inputs do not match its constraints"
    step(f"kernel {registration.kernel_name}")
    inputs, keep = [], []
    for arg, array in zip(op.flat_inputs(attrs), arrays):
        array = np.asarray(array, order="C")  # (ascontiguousarray would make a scalar 1-d)
        code = int(dt.as_dtype(array.dtype).tf_code)
        if arg.host or arg.name in registration.host_memory:
            keep.append(array)
            inputs.append(KernelInput(array.ctypes.data, array.nbytes, code, array.shape, True))
        else:
            memory = executor.allocate(max(1, array.nbytes))
            if array.nbytes:
                executor.sync_memcpy_htod(memory, array)
            keep.append(memory)
            inputs.append(KernelInput(memory.address, array.nbytes, code, array.shape))
    out_args = op.flat_outputs(attrs)
    out_dtypes = [int((arg.dtype or attrs[arg.type_attr]).tf_code) for arg in out_args]
    kernel = registration.instantiate(op.name, attrs)
    try:
        outputs = kernel.run(executor, stream, inputs, out_dtypes, output_host_memory=(
            registration.host_memory_outputs([arg.name for arg in out_args])))
        stream.synchronize()
    finally:
        kernel.close()
    for output in outputs:
        if output.owned and output.host_memory:
            free_host_output(output.address)
        elif output.owned:
            executor.allocator.deallocate(output.address)
    for held in keep:
        if not isinstance(held, np.ndarray):
            held.close()
    return ""


def exercise_profiler(library, step: Callable[[str], None]) -> str:
    """The profiler started and stopped and its data collected, as a profiling session
    would. A profiler that fails its checks or returns an error status is no load failure
    (the devices still work, a session leaves it out with a warning): returns its error, ""
    when it worked. A crash or a hang ends the child in its step."""
    from ..plugin.profiler import ProfilerLoadError, load_profiler

    try:
        profiler = load_profiler(library.path, library.profiler_init)
    except ProfilerLoadError as exc:
        return limits.safe_text(f"{exc.step}: {exc.reason}")
    try:
        step("profiler start")
        profiler.start()
        step("profiler stop")
        profiler.stop()
        profiler.collect()
    except PluggableError as exc:
        return limits.safe_text(str(exc))
    finally:
        profiler.destroy()
    return ""


def _kernels(source, report: Dict[str, Any], device_types) -> list:
    """Runs the TF_InitKernel of ``source`` (a platform, or a library without a device),
    fills in what it registered, what was refused and the warnings, and returns the accepted
    registrations."""
    kernels, accepted = [], []
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
    return accepted


def _present(view, name: str) -> bool:
    return optional_callback(type(view), view, name) is not None


def child_main(argv: List[str]) -> int:
    """``child_main([PLUGIN, REPORT])``: the child's whole life."""
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
