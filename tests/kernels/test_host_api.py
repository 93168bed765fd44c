"""The host-facing kernel API of the runtime (runtime_internal.h) against its Python mirrors:
the C compiler reports the struct layouts and the request/output word indices, and
pluggable.kernels.registry must agree."""
from __future__ import annotations

import ctypes
import json
import os
import subprocess

import pytest

import pluggable
from pluggable.kernels import registry as kernels

RUNTIME_SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "src", "pluggable", "_runtime")

CONSTANTS = ["PG_RUN_KERNEL", "PG_RUN_DEVICE", "PG_RUN_STREAM_EXECUTOR", "PG_RUN_STREAM",
             "PG_RUN_ALLOCATOR", "PG_RUN_DEVICE_ID", "PG_RUN_STEP_ID", "PG_RUN_NUM_INPUTS",
             "PG_RUN_NUM_OUTPUTS", "PG_RUN_OUT", "PG_RUN_OUT_CAPACITY", "PG_RUN_STATUS",
             "PG_RUN_HEADER_WORDS", "PG_RUN_OUTPUT_HOST_MEMORY", "PG_OUT_HEADER_WORDS",
             "PG_OUT_OWNED", "PG_OUT_HOST_MEMORY", "PG_MAX_OUTPUT_DIMS", "PG_ATTR_INT",
             "PG_ATTR_FLOAT", "PG_ATTR_BOOL", "PG_ATTR_TYPE", "PG_ATTR_STRING",
             "PG_KERNEL_INFO_STRUCT_SIZE"]


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """What the C compiler says: sizes, offsets and constants, as JSON."""
    if not os.path.isdir(RUNTIME_SRC):
        pytest.skip("the runtime's sources are not here (an installed copy)")
    lines = []
    for struct, mirror in (("PG_KernelInfo", kernels.PG_KernelInfo),
                           ("PG_Attr", kernels.PG_Attr)):
        lines.append(f'  printf("\\"sizeof {struct}\\": %zu,\\n", sizeof({struct}));')
        for name, _ in mirror._fields_:
            lines.append(f'  printf("\\"{struct}.{name}\\": %zu,\\n", '
                         f'offsetof({struct}, {name}));')
    for name in CONSTANTS:
        lines.append(f'  printf("\\"{name}\\": %lld,\\n", (long long)({name}));')
    source = ("#include <stddef.h>\n#include <stdio.h>\n#include \"runtime_internal.h\"\n"
              "int main(void) {\n  printf(\"{\\n\");\n" + "\n".join(lines) +
              '\n  printf("\\"end\\": 0}\\n");\n  return 0;\n}\n')
    tmp = tmp_path_factory.mktemp("host_api")
    (tmp / "probe.c").write_text(source)
    exe = tmp / "probe"
    subprocess.run([os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Werror", "-I",
                    pluggable.get_include(), "-I", RUNTIME_SRC, "-o", str(exe),
                    str(tmp / "probe.c")], check=True, capture_output=True, text=True)
    return json.loads(subprocess.run([str(exe)], check=True, capture_output=True,
                                     text=True).stdout)


@pytest.mark.parametrize("struct, mirror", [("PG_KernelInfo", kernels.PG_KernelInfo),
                                            ("PG_Attr", kernels.PG_Attr)])
def test_struct_mirrors_match_the_compiler(reported, struct, mirror):
    assert ctypes.sizeof(mirror) == reported[f"sizeof {struct}"]
    for name, _ in mirror._fields_:
        assert getattr(mirror, name).offset == reported[f"{struct}.{name}"], name


def test_run_layout_matches_the_compiler(reported):
    # The extension publishes the layout Python builds requests and reads outputs with.
    published = ["PG_RUN_KERNEL", "PG_RUN_STEP_ID", "PG_RUN_OUT", "PG_RUN_OUT_CAPACITY",
                 "PG_RUN_STATUS", "PG_RUN_HEADER_WORDS", "PG_RUN_OUTPUT_HOST_MEMORY",
                 "PG_OUT_HEADER_WORDS", "PG_OUT_OWNED", "PG_OUT_HOST_MEMORY",
                 "PG_MAX_OUTPUT_DIMS"]
    assert {n: getattr(kernels._compiled, n) for n in published} == \
        {n: reported[n] for n in published}
    assert kernels._OUT_HEADER_WORDS == reported["PG_OUT_HEADER_WORDS"] == 6
    # kernels._request_header builds the header in this order.
    order = ["PG_RUN_KERNEL", "PG_RUN_DEVICE", "PG_RUN_STREAM_EXECUTOR", "PG_RUN_STREAM",
             "PG_RUN_ALLOCATOR", "PG_RUN_DEVICE_ID", "PG_RUN_STEP_ID", "PG_RUN_NUM_INPUTS",
             "PG_RUN_NUM_OUTPUTS", "PG_RUN_OUT", "PG_RUN_OUT_CAPACITY", "PG_RUN_STATUS"]
    assert [reported[name] for name in order] == list(range(len(order)))
    assert {k: reported[f"PG_ATTR_{k.upper()}"] for k in kernels._ATTR_KINDS} == \
        kernels._ATTR_KINDS
    assert reported["PG_KERNEL_INFO_STRUCT_SIZE"] <= ctypes.sizeof(kernels.PG_KernelInfo)
