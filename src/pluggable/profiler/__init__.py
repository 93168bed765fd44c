"""The host side of the pluggable profiler, shaped like ``tf.profiler.experimental``.

    with pluggable.profiler.Profile(logdir) as p:
        ...                                   # ops, copies, Trace("step", step_num=1) spans
    print(p.result.summary())                 # a table per op and device
    p.result.export_chrome_trace("t.json.gz") # for Perfetto / chrome://tracing
    # tensorboard --logdir logdir             # the profile plugin reads the saved XSpace

Modules: `session` (options, start/stop, Profile, Trace), `host_tracer` (the /host:CPU
plane), `xspace` (protobuf, imported lazily), `result` (ProfileResult, summary, Chrome
trace, load). The plugins' profilers are loaded by the loader (`pluggable.plugin.profiler`).
"""
from .result import ProfileResult, load
from .session import (
    Profile, ProfilerOptions, ProfilerWarning, Trace, is_running, start, stop)

__all__ = ["ProfilerOptions", "ProfilerWarning", "Profile", "ProfileResult", "Trace", "start",
           "stop", "load", "is_running"]
