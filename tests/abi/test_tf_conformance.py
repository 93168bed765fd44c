"""Our headers against TensorFlow's own (2.21): same prototypes, layouts, field types and
constants. Runs only where TensorFlow's headers are available: $PLUGGABLE_TF_INCLUDE (one or
more directories, separated by os.pathsep), or the include/ directory of an installed
tensorflow package. It never imports tensorflow."""
from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import abi_testlib as lib
import pytest

# The deliberate differences, each explained in include/ABI.md ("Deviations").
OURS_ONLY = {"SE_InitializePlugin"}
VOID_PARAMETER_LISTS = {"TF_InitKernel", "TF_TensorDefaultAlignment"}  # () in TensorFlow

# Ours alone: the extension chain, and DLPack (not part of TensorFlow's plugin API).
TF_HEADERS = [h for h in lib.PROBE_HEADERS if not h.startswith(("pluggable/", "dlpack/"))]
TF_STRUCTS = [cls for cls in lib.abi.ALL_STRUCTS
              if cls not in lib.abi.plugin_ext.STRUCTS + lib.abi.dlpack.STRUCTS]
TF_CONSTANTS = [name for name in lib.mirrored_constants()
                if not name.startswith(("PLUGGABLE_", "DLPACK_", "kDL"))]


def tensorflow_include_dirs() -> list[str]:
    configured = os.environ.get("PLUGGABLE_TF_INCLUDE")
    if configured:
        return [d for d in configured.split(os.pathsep) if d]
    spec = importlib.util.find_spec("tensorflow")
    if spec and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / "include"
            if (candidate / "tensorflow/c/kernels.h").exists():
                return [str(candidate)]
    return []


TF_INCLUDE = tensorflow_include_dirs()
pytestmark = pytest.mark.skipif(
    not TF_INCLUDE, reason="TensorFlow's headers not found (set PLUGGABLE_TF_INCLUDE)")


def prototypes(tmp_path: Path, include_dirs, tag: str) -> dict[str, str]:
    source = tmp_path / f"{tag}.c"
    source.write_text(lib._includes(TF_HEADERS))
    aux = tmp_path / f"{tag}.aux"
    lib.run([*lib.compiler("c"), "-std=c11", *[f"-I{d}" for d in include_dirs], "-c",
             "-o", str(tmp_path / f"{tag}.o"), f"-aux-info={aux}", str(source)])
    found = {}
    for line in aux.read_text().splitlines():
        m = re.match(r"/\* (\S+):\d+:\w+ \*/ (.*)$", line)
        if m and any(m.group(1).endswith("/" + h) for h in TF_HEADERS):
            found[re.search(r"(\w+) \(", m.group(2)).group(1)] = m.group(2)
    return found


def test_prototypes_match_tensorflow(tmp_path):
    theirs = prototypes(tmp_path, TF_INCLUDE, "tf")
    ours = prototypes(tmp_path, [lib.INCLUDE], "ours")
    assert set(ours) - set(theirs) == OURS_ONLY
    assert set(theirs) - set(ours) == set()
    for name in set(theirs) - VOID_PARAMETER_LISTS:
        assert ours[name] == theirs[name], name
    for name in VOID_PARAMETER_LISTS:
        assert theirs[name].replace("(/* ??? */)", "(void)") == ours[name]


def test_layouts_and_constants_match_tensorflow(tmp_path):
    source = lib.layout_probe_source(TF_STRUCTS, TF_CONSTANTS, TF_HEADERS)
    (tmp_path / "tf").mkdir()
    (tmp_path / "ours").mkdir()
    assert lib.run_probe(tmp_path / "ours", source, "c", [lib.INCLUDE]) == \
        lib.run_probe(tmp_path / "tf", source, "c", TF_INCLUDE)


def test_field_and_function_types_match_tensorflow(tmp_path):
    expressions = {name: expr for name, (_, expr) in lib.standalone_function_types().items()
                   if name not in OURS_ONLY}
    source = lib.kind_probe_source(TF_STRUCTS, expressions, TF_HEADERS)
    (tmp_path / "tf").mkdir()
    (tmp_path / "ours").mkdir()
    assert lib.run_probe(tmp_path / "ours", source, "c++", [lib.INCLUDE]) == \
        lib.run_probe(tmp_path / "tf", source, "c++", TF_INCLUDE)


@pytest.mark.parametrize("sources", [["plugins/xpu/*.c"], ["tests/plugins/test_plugin.c"]],
                         ids=["xpu", "test_plugin"])
def test_plugins_build_against_tensorflow_headers(tmp_path, sources):
    """The same plugin source builds against TensorFlow's headers: TensorFlow's first on the
    include path, ours only for pluggable/plugin_ext.h."""
    files = sorted(str(p) for pattern in sources for p in lib.REPO.glob(pattern))
    assert files
    lib.run([*lib.compiler("c"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
             "-pthread", *[f"-I{d}" for d in TF_INCLUDE], f"-I{lib.INCLUDE}",
             "-o", str(tmp_path / "plugin.so"), *files])
