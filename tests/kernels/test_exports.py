"""The runtime library exports every function the plugin-facing headers declare, so that no
plugin meets a missing symbol: the kernel API, tensors, data types, buffers and statuses."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

import pluggable
from pluggable.base import native as _native

HEADERS = ["tensorflow/c/kernels.h", "tensorflow/c/tf_tensor.h", "tensorflow/c/tf_datatype.h",
           "tensorflow/c/tf_buffer.h", "tensorflow/c/tf_status.h",
           "tensorflow/c/kernels_experimental.h", "tensorflow/c/ops.h",
           "tensorflow/c/tf_tstring.h", "tensorflow/c/experimental/grappler/grappler.h"]
# Declared for the plugin to define, not for the host to export.
PLUGIN_ENTRY_POINTS = {"TF_InitKernel", "TF_InitGraph"}


def declared(header: str) -> set:
    """Names of the functions a header declares with TF_CAPI_EXPORT."""
    with open(os.path.join(pluggable.get_include(), header)) as f:
        text = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)
    text = re.sub(r"\s+", " ", text)
    return set(re.findall(r"TF_CAPI_EXPORT\b[^;{}]*?\b(TF_\w+)\s*\(", text))


def exported() -> set:
    result = subprocess.run(["nm", "-D", "--defined-only", _native.RUNTIME_LIBRARY_PATH],
                            capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in result.stdout.splitlines() if line.strip()}


@pytest.mark.parametrize("header", HEADERS)
def test_every_declared_function_is_exported(header):
    names = declared(header) - PLUGIN_ENTRY_POINTS
    assert names, f"found no declarations in {header}"
    missing = sorted(names - exported())
    assert not missing, f"{header} declares functions the runtime does not export: {missing}"


def test_the_declaration_scan_finds_them_all(tmp_path):
    """Cross-checks the scan with the C compiler's own list (gcc's -aux-info)."""
    names = set().union(*(declared(h) for h in HEADERS))
    assert len(names) >= 80 and {"TF_NewKernelBuilder", "TF_GetStream", "TF_AllocateOutput",
                                 "TF_NewTensor", "TF_DataTypeSize", "TF_NewBuffer",
                                 "TF_SetStatus"} <= names
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip("no C compiler")
    source = tmp_path / "all.c"
    source.write_text("".join(f'#include "{h}"\n' for h in HEADERS))
    aux = tmp_path / "all.aux"
    result = subprocess.run([cc, "-std=c99", "-I", pluggable.get_include(), "-c", "-o",
                             str(tmp_path / "all.o"), f"-aux-info={aux}", str(source)],
                            capture_output=True, text=True)
    if result.returncode or not aux.exists():
        pytest.skip("the C compiler has no -aux-info (gcc only)")
    compiler = set()
    for line in aux.read_text().splitlines():
        m = re.match(r"/\* (\S+):\d+:\w+ \*/ .*?\b((?:TF|TSL)_\w+) \(", line)
        if m and any(m.group(1).endswith(h) for h in HEADERS) and ":NF" not in line:
            compiler.add(m.group(2))
    assert compiler - PLUGIN_ENTRY_POINTS == names - PLUGIN_ENTRY_POINTS


def test_the_runtime_exports_nothing_it_does_not_mean_to():
    """Exactly the TF_ API, TSL-free, and the pluggable_ host functions."""
    names = {n for n in exported() if not n.startswith(("_", "TF_", "pluggable_"))}
    assert names <= {"edata", "end", "bss_start"}, names


# Functions of TensorFlow's client API (c_api.h, c_api_experimental.h) that include/ does not
# declare but plugins built against TensorFlow import (Intel's extension): the runtime
# exports them (include/ABI.md, "Functions of TensorFlow's client API").
CLIENT_API = {"TF_Version", "TF_GetAllOpList", "TF_GetRegisteredKernelsForOp",
              "TF_GetAllRegisteredKernels", "TF_OpIsStateful", "TF_GetXlaAutoJitEnabled",
              "TF_TensorFromProto"}


def test_the_client_api_functions_plugins_import_are_exported():
    assert sorted(CLIENT_API - exported()) == []


def test_the_functions_said_to_be_missing_are_not_exported():
    """Every family the load message explains as not provided is absent from the runtime,
    and no exported function falls in one of them."""
    from pluggable.plugin.dependencies import UNPROVIDED

    for name in exported():
        assert not any(belongs(name) for belongs, _ in UNPROVIDED), name
    for name in ("TFE_NewOp", "TFE_Execute", "TF_CreatePjRtBuffer", "TF_GetPjRtCClient",
                 "TF_NewGraph", "TF_SessionRun"):
        assert any(belongs(name) for belongs, _ in UNPROVIDED), name
        assert name not in exported()
