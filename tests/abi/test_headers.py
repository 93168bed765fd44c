"""Every header in include/ compiles on its own, as C99 and as C++17, without warnings, and
declares its functions with C linkage."""
from __future__ import annotations

import re

import abi_testlib as lib
import pytest

LANGUAGES = {
    "c99": ("c", ["-std=c99", "-x", "c"]),
    "c++17": ("c++", ["-std=c++17", "-x", "c++"]),
}


@pytest.mark.parametrize("language", LANGUAGES)
def test_header_compiles_alone(header, language):
    lang, flags = LANGUAGES[language]
    lib.run([*lib.compiler(lang), *flags, *lib.C_WARNINGS, "-fsyntax-only",
             f"-I{lib.INCLUDE}", str(lib.INCLUDE / header)])


@pytest.mark.parametrize("language", LANGUAGES)
def test_header_included_twice(header, language, tmp_path):
    lang, flags = LANGUAGES[language]
    source = tmp_path / ("twice.c" if lang == "c" else "twice.cc")
    source.write_text(f'#include "{header}"\n#include "{header}"\nint main(void) {{ return 0; }}\n')
    lib.run([*lib.compiler(lang), *flags[:1], *lib.C_WARNINGS, f"-I{lib.INCLUDE}", "-c",
             "-o", str(tmp_path / "twice.o"), str(source)])


def declared_functions(tmp_path) -> dict[str, str]:
    """``{name: prototype}`` of every function the headers declare, as gcc's -aux-info
    prints them (C)."""
    source = tmp_path / "all.c"
    source.write_text(lib._includes(lib.PROBE_HEADERS))
    aux = tmp_path / "all.aux"
    lib.run([*lib.compiler("c"), "-std=c99", f"-I{lib.INCLUDE}", "-c", "-o",
             str(tmp_path / "all.o"), f"-aux-info={aux}", str(source)])
    functions = {}
    for line in aux.read_text().splitlines():
        m = re.match(r"/\* (\S+):\d+:(\w+) \*/ (.*)$", line)
        # The inline TF_TString functions the headers define (and declare) are not symbols.
        if (m and m.group(1).startswith(str(lib.INCLUDE)) and "F" not in m.group(2)
                and not re.search(r"\bTF_TString_\w+ \(", m.group(3))):
            functions[re.search(r"(\w+) \(", m.group(3)).group(1)] = m.group(3)
    return functions


def test_functions_have_c_linkage(tmp_path):
    """A C++ plugin that calls or defines these functions must produce unmangled symbols."""
    try:
        functions = declared_functions(tmp_path)
    except AssertionError as exc:
        if "aux-info" in str(exc):
            pytest.skip("the C compiler does not support -aux-info (gcc only)")
        raise
    assert {"TF_NewStatus", "SE_InitPlugin", "SE_InitializePlugin", "TF_InitProfiler",
            "TF_InitKernel", "TF_GetStream", "TF_AllocateOutput"} <= set(functions)
    refs = ",\n".join(f"  reinterpret_cast<void (*)()>(&{name})" for name in sorted(functions))
    source = tmp_path / "linkage.cc"
    source.write_text(lib._includes(lib.PROBE_HEADERS)
                      + f"void (*const refs[])() = {{\n{refs}\n}};\n"
                      + "void* use() { return reinterpret_cast<void*>(refs[0]); }\n")
    obj = tmp_path / "linkage.o"
    lib.run([*lib.compiler("c++"), "-std=c++17", f"-I{lib.INCLUDE}", "-c", "-o", str(obj),
             str(source)])
    undefined = lib.run(["nm", "-u", str(obj)]).split()
    assert sorted(functions) == sorted(set(undefined) & set(functions))
    mangled = [s for s in undefined if s.startswith("_Z") and any(n in s for n in functions)]
    assert not mangled


def test_entry_points_are_declared_with_tensorflow_signature(tmp_path):
    functions = declared_functions(tmp_path)
    params = "(SE_PlatformRegistrationParams *, TF_Status *);"
    assert functions["SE_InitPlugin"] == "extern void SE_InitPlugin " + params
    assert functions["SE_InitializePlugin"] == "extern void SE_InitializePlugin " + params
    assert functions["TF_InitProfiler"] == \
        "extern void TF_InitProfiler (TF_ProfilerRegistrationParams *, TF_Status *);"
    assert functions["TF_InitKernel"] == "extern void TF_InitKernel (void);"
