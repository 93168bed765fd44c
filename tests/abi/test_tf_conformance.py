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
VOID_PARAMETER_LISTS = {"TF_InitKernel", "TF_TensorDefaultAlignment", "TF_NewShapeHandle",
                        "TF_NewDimensionHandle"}  # () in TensorFlow

# Ours alone: the extension chain, the profiler clock, and DLPack (not part of TensorFlow's
# plugin API).
# TensorFlow's source has tensorflow/c/logging.h, but its 2.21 wheel does not ship it in
# include/: ours follows the source's declarations (checked by test_logging.py's plugin,
# which TensorFlow's own logging.h would build too).
NOT_IN_WHEEL = {"tensorflow/c/logging.h"}
TF_HEADERS = [h for h in lib.PROBE_HEADERS
              if not h.startswith(("pluggable/", "dlpack/")) and h not in NOT_IN_WHEEL]
# TensorFlow's c_api.h declares its whole client API; ours keeps what plugin headers use, so
# its functions (none today) need only be a subset of TensorFlow's.
SUBSET_HEADERS = {"tensorflow/c/c_api.h"}
# TensorFlow 2.21 keeps the TF_TString code in tsl/platform/ and forwards to it from
# tensorflow/core/platform/; ours is at the latter path.
FORWARDED = {"tensorflow/core/platform/": "tsl/platform/"}
# TensorFlow's ops.h names its opaque types without typedefs (C++ only); a C plugin adds
# them, which C11 allows to repeat. Ours declares them.
C_PRELUDE = "".join(f"typedef struct {t} {t};\n" for t in (
    "TF_DimensionHandle", "TF_OpDefinitionBuilder", "TF_ShapeHandle",
    "TF_ShapeInferenceContext"))
TF_STRUCTS = [cls for cls in lib.abi.ALL_STRUCTS if cls not in
              lib.abi.plugin_ext.STRUCTS + lib.abi.profiler_clock.STRUCTS + lib.abi.dlpack.STRUCTS]
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


def _header_of(path: str) -> str | None:
    for h in TF_HEADERS:
        candidates = [h] + [h.replace(a, b) for a, b in FORWARDED.items() if h.startswith(a)]
        if any(path.endswith("/" + c) for c in candidates):
            return h
    return None


def prototypes(tmp_path: Path, include_dirs, tag: str) -> dict[str, tuple[str, str]]:
    """``{function: (header, prototype)}``; storage words (static, inline, extern) dropped:
    TensorFlow's ctstring.h also declares its inline functions a second time."""
    source = tmp_path / f"{tag}.c"
    source.write_text(C_PRELUDE + lib._includes(TF_HEADERS))
    aux = tmp_path / f"{tag}.aux"
    lib.run([*lib.compiler("c"), "-std=c11", *[f"-I{d}" for d in include_dirs], "-c",
             "-o", str(tmp_path / f"{tag}.o"), f"-aux-info={aux}", str(source)])
    found = {}
    for line in aux.read_text().splitlines():
        m = re.match(r"/\* (\S+):\d+:\w+ \*/ (.*)$", line)
        header = m and _header_of(m.group(1))
        if header:
            prototype = re.sub(r"\b(static|inline|extern) ", "", m.group(2))
            found[re.search(r"(\w+) \(", prototype).group(1)] = (header, prototype)
    return found


def test_prototypes_match_tensorflow(tmp_path):
    theirs = prototypes(tmp_path, TF_INCLUDE, "tf")
    ours = prototypes(tmp_path, [lib.INCLUDE], "ours")
    theirs = {name: p for name, (h, p) in theirs.items()
              if h not in SUBSET_HEADERS or name in ours}
    ours = {name: p for name, (h, p) in ours.items()}
    assert set(ours) - set(theirs) == OURS_ONLY
    assert set(theirs) - set(ours) == set()
    for name in set(theirs) - VOID_PARAMETER_LISTS:
        assert ours[name] == theirs[name], name
    for name in VOID_PARAMETER_LISTS:
        assert theirs[name].replace("(/* ??? */)", "(void)") == ours[name]


def test_layouts_and_constants_match_tensorflow(tmp_path):
    source = C_PRELUDE + lib.layout_probe_source(TF_STRUCTS, TF_CONSTANTS, TF_HEADERS)
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


@pytest.mark.parametrize("sources", [["plugins/xpu/*.c"], ["tests/plugins/test_plugin.c"],
                                     ["tests/plugins/tf_portable_plugin.c"]],
                         ids=["xpu", "test_plugin", "tf_portable_plugin"])
def test_plugins_build_against_tensorflow_headers(tmp_path, sources):
    """The same plugin source builds against TensorFlow's headers: TensorFlow's first on the
    include path, ours only for pluggable/plugin_ext.h."""
    files = sorted(str(p) for pattern in sources for p in lib.REPO.glob(pattern))
    assert files
    lib.run([*lib.compiler("c"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
             "-pthread", *[f"-I{d}" for d in TF_INCLUDE], f"-I{lib.INCLUDE}",
             "-o", str(tmp_path / "plugin.so"), *files])


# Every TF_TString function, through each form (small, large, view, offset), printing what a
# caller can observe: type, size, capacity and bytes.
TSTRING_PROGRAM = r"""
#include <stdio.h>
#include "tensorflow/core/platform/ctstring.h"

static void show(const char* what, const TF_TString* s) {
  printf("%s %d %zu %zu [%.*s]\n", what, (int)TF_TString_GetType(s), TF_TString_GetSize(s),
         TF_TString_GetCapacity(s), (int)TF_TString_GetSize(s), TF_TString_GetDataPointer(s));
}

int main(void) {
  TF_TString a, b, c;
  TF_TString_Init(&a); TF_TString_Init(&b); TF_TString_Init(&c);
  show("init", &a);
  TF_TString_Copy(&a, "small", 5); show("copy-small", &a);
  TF_TString_AppendN(&a, "-and-now-rather-longer", 22); show("append-large", &a);
  TF_TString_Reserve(&a, 100); show("reserve", &a);
  TF_TString_ReserveAmortized(&a, 150); show("amortized", &a);
  TF_TString_Resize(&a, 40, '*'); show("resize-grow", &a);
  TF_TString_Resize(&a, 10, '?'); show("resize-shrink", &a);
  TF_TString_ResizeUninitialized(&a, 3); show("to-small", &a);
  static const char text[] = "a view of static text";
  TF_TString_AssignView(&b, text, 6); show("view", &b);
  TF_TString_GetMutableDataPointer(&b)[0] = 'A'; show("mutable-view", &b);
  TF_TString_Assign(&c, &b); show("assign-small", &c);
  TF_TString_Copy(&b, "0123456789012345678901234567890", 31);
  TF_TString_Assign(&c, &b); show("assign-large", &c);
  TF_TString_Move(&a, &c); show("moved", &a); show("moved-from", &c);
  TF_TString_Append(&a, &b); show("append", &a);
  struct { TF_TString s; char bytes[8]; } o;
  TF_TString_Init(&o.s);
  o.s.u.offset.size = (5u << 2) | TF_TSTR_OFFSET;
  o.s.u.offset.offset = (uint32_t)sizeof(TF_TString);
  o.s.u.offset.count = 0;
  memcpy(o.bytes, "hello", 5);
  show("offset", &o.s);
  TF_TString_Assign(&c, &o.s); show("assign-offset", &c);
  TF_TString_Dealloc(&a); TF_TString_Dealloc(&b); TF_TString_Dealloc(&c);
  show("dealloc", &a);
  return 0;
}
"""


def test_tstring_behaviour_matches_tensorflow(tmp_path):
    outputs = []
    for tag, dirs in (("tf", TF_INCLUDE), ("ours", [lib.INCLUDE])):
        source = tmp_path / f"tstring_{tag}.c"
        source.write_text(TSTRING_PROGRAM)
        exe = tmp_path / f"tstring_{tag}"
        lib.run([*lib.compiler("c"), "-std=c11", "-Wall", "-Werror",
                 *[f"-I{d}" for d in dirs], "-o", str(exe), str(source)])
        outputs.append(lib.run([str(exe)]))
    assert "append-large 1 27 47 [small-and-now-rather-longer]" in outputs[1]  # a real run
    assert outputs[1] == outputs[0]
