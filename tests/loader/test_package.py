"""What an installation provides: headers, the runtime library, the XPU plugin."""
from __future__ import annotations

import os
import subprocess

import pluggable
from pluggable.base import native as _native


def test_get_include_holds_the_headers():
    include = pluggable.get_include()
    for header in ("tensorflow/c/experimental/stream_executor/stream_executor.h",
                   "tensorflow/c/kernels.h", "tensorflow/c/tf_status.h",
                   "tensorflow/c/experimental/pluggable_profiler/pluggable_profiler.h",
                   "pluggable/plugin_ext.h", "ABI.md"):
        assert os.path.isfile(os.path.join(include, header)), header


def test_runtime_library_exports_the_status_api():
    symbols = subprocess.run(["nm", "-D", "--defined-only", _native.RUNTIME_LIBRARY_PATH],
                             capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1] for line in symbols.splitlines()}
    assert {"TF_NewStatus", "TF_DeleteStatus", "TF_SetStatus", "TF_SetPayload",
            "TF_ForEachPayload", "TF_SetStatusFromIOError", "TF_GetCode",
            "TF_Message"} <= exported


def test_xpu_plugin_is_installed_in_tensorflow_plugins():
    path = pluggable.get_platform("REF_XPU").path
    assert os.path.basename(path) == "libxpu_plugin.so"
    assert os.path.basename(os.path.dirname(path)) == "tensorflow-plugins"
    # It links nothing of ours by name: TF_* symbols stay undefined until load time.
    dynamic = subprocess.run(["readelf", "-d", path], capture_output=True, text=True,
                             check=True).stdout
    assert "pluggable" not in dynamic
    undefined = subprocess.run(["nm", "-D", "--undefined-only", path], capture_output=True,
                               text=True, check=True).stdout
    assert "TF_SetStatus" in undefined
