"""Machinery of the ABI tests: the ctypes mirrors under test, the C compilers, probes that
make the compiler report layouts and types, and a reader for the headers' own text.

The mirrors are loaded from src/pluggable/abi by path, under a private name, so that these
tests always check the source tree's mirrors against the source tree's headers, and prove
that the abi package imports on its own (without the rest of pluggable or its runtime).
Everything compiled goes to the temporary directories pytest hands out.

tests/abi/conftest.py registers this module as ``abi_testlib`` before the tests import it.
"""
from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INCLUDE = REPO / "include"
ABI_SRC = REPO / "src" / "pluggable" / "abi"

HEADERS = sorted(p.relative_to(INCLUDE).as_posix() for p in INCLUDE.rglob("*.h"))
# Every header, in an order that compiles; the probes include them all.
PROBE_HEADERS = [
    "tensorflow/c/c_api_macros.h",
    "xla/tsl/c/tsl_status.h",
    "tensorflow/c/tf_status.h",
    "tensorflow/c/tf_datatype.h",
    "tensorflow/c/tf_buffer.h",
    "tensorflow/c/tf_tensor.h",
    "tensorflow/c/experimental/stream_executor/stream_executor.h",
    "tensorflow/c/experimental/pluggable_profiler/pluggable_profiler.h",
    "tensorflow/c/tf_attrtype.h",
    "tensorflow/core/platform/ctstring_internal.h",
    "tensorflow/core/platform/ctstring.h",
    "tensorflow/c/tf_tstring.h",
    "tensorflow/c/c_api.h",
    "tensorflow/c/kernels.h",
    "tensorflow/c/kernels_experimental.h",
    "tensorflow/c/ops.h",
    "tensorflow/c/logging.h",
    "tensorflow/c/experimental/grappler/grappler.h",
    "pluggable/plugin_ext.h",
    "pluggable/profiler_clock.h",
    "dlpack/dlpack.h",
]

C_WARNINGS = ["-Wall", "-Wextra", "-Werror", "-pedantic"]


def _load_abi():
    name = "_pluggable_abi_under_test"
    spec = importlib.util.spec_from_file_location(
        name, ABI_SRC / "__init__.py", submodule_search_locations=[str(ABI_SRC)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


abi = _load_abi()
CFuncPtr = ctypes.CFUNCTYPE(None).__mro__[1]


def compiler(lang: str) -> list[str]:
    """The C (``cc``, or $CC) or C++ (``c++``, or $CXX) compiler command."""
    variable, default = ("CC", "cc") if lang == "c" else ("CXX", "c++")
    command = shlex.split(os.environ.get(variable, default))
    if shutil.which(command[0]) is None:
        pytest.fail(f"the ABI tests need a {lang} compiler: {command[0]} not found "
                    f"(set ${variable})")
    return command


def run(cmd: list[str], cwd: Path | None = None) -> str:
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if result.returncode:
        raise AssertionError(f"`{shlex.join(cmd)}` failed ({result.returncode}):\n"
                             f"{result.stdout}{result.stderr}")
    return result.stdout


# --- probes --------------------------------------------------------------------------------
def _includes(headers) -> str:
    return "".join(f'#include "{h}"\n' for h in headers)


def layout_probe_source(structs, constants, headers) -> str:
    """C11 program printing JSON: per struct its sizeof, alignment, size macro and each
    field's offset and size; then the value of each constant (enumerator or macro)."""
    lines = ["#include <stddef.h>", "#include <stdio.h>", _includes(headers),
             "int main(void) {", '  printf("{\\"structs\\": {");']
    for i, cls in enumerate(structs):
        c = cls.__name__
        macro = f"(size_t)({cls._size_macro_})" if cls._size_macro_ else "(size_t)0"
        lines.append(
            f'  printf("%s\\"{c}\\": {{\\"sizeof\\": %zu, \\"align\\": %zu, '
            f'\\"size_macro\\": %zu, \\"fields\\": [", "{"," if i else ""}", '
            f"sizeof({c}), (size_t)_Alignof({c}), {macro});")
        for j, (field, _) in enumerate(cls._fields_):
            lines.append(
                f'  printf("%s[\\"{field}\\", %zu, %zu]", "{"," if j else ""}", '
                f"offsetof({c}, {field}), sizeof((({c}*)0)->{field}));")
        lines.append('  printf("]}");')
    lines.append('  printf("}, \\"constants\\": {");')
    for i, name in enumerate(constants):
        lines.append(f'  printf("%s\\"{name}\\": %lld", "{"," if i else ""}", '
                     f"(long long)({name}));")
    lines += ['  printf("}}\\n");', "  return 0;", "}"]
    return "\n".join(lines) + "\n"


# C++17: describes types as kinds: void, bool, iN/uN (enums are signed), fN, p (any data
# pointer), fn(ret,args...) for function pointers, struct:Name for embedded structs.
_KIND_PRELUDE = r"""
#include <cstdio>
#include <cstdlib>
#include <cxxabi.h>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>

template <class T> std::string kind();
template <class F> struct FnKind;
template <class R, class... A> struct FnKind<R(A...)> {
  static std::string get() {
    std::string s = "fn(" + kind<R>();
    ((s += "," + kind<A>()), ...);
    return s + ")";
  }
};
template <std::size_t I, class F> struct ArgOf;
template <std::size_t I, class R, class... A> struct ArgOf<I, R(A...)> {
  using type = std::tuple_element_t<I, std::tuple<A...>>;
};
template <class T> std::string kind() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_void_v<U>) return "void";
  else if constexpr (std::is_same_v<U, bool>) return "bool";
  else if constexpr (std::is_enum_v<U>) return "i" + std::to_string(8 * sizeof(U));
  else if constexpr (std::is_integral_v<U>)
    return std::string(std::is_signed_v<U> ? "i" : "u") + std::to_string(8 * sizeof(U));
  else if constexpr (std::is_floating_point_v<U>) return "f" + std::to_string(8 * sizeof(U));
  else if constexpr (std::is_pointer_v<U> && std::is_function_v<std::remove_pointer_t<U>>)
    return FnKind<std::remove_pointer_t<U>>::get();
  else if constexpr (std::is_pointer_v<U>) return "p";
  else if constexpr (std::is_array_v<U>)
    return kind<std::remove_extent_t<U>>() + "[" + std::to_string(std::extent_v<U>) + "]";
  else if constexpr (std::is_class_v<U>) {
    int err = 0;
    char* name = abi::__cxa_demangle(typeid(U).name(), nullptr, nullptr, &err);
    std::string s = std::string("struct:") + (name ? name : typeid(U).name());
    std::free(name);
    return s;
  } else return "?";
}
"""


def kind_probe_source(structs, expressions, headers) -> str:
    """C++17 program printing JSON: the kind of every field of ``structs`` and of every type
    in ``expressions`` (name -> C++ type expression)."""
    lines = [_KIND_PRELUDE, _includes(headers), "int main() {",
             '  std::printf("{\\"structs\\": {");']
    for i, cls in enumerate(structs):
        c = cls.__name__
        lines.append(f'  std::printf("%s\\"{c}\\": {{", "{"," if i else ""}");')
        for j, (field, _) in enumerate(cls._fields_):
            lines.append(f'  std::printf("%s\\"{field}\\": \\"%s\\"", "{"," if j else ""}", '
                         f"kind<decltype((({c}*)nullptr)->{field})>().c_str());")
        lines.append('  std::printf("}");')
    lines.append('  std::printf("}, \\"types\\": {");')
    for i, (name, expression) in enumerate(expressions.items()):
        lines.append(f'  std::printf("%s\\"{name}\\": \\"%s\\"", "{"," if i else ""}", '
                     f"kind<{expression}>().c_str());")
    lines += ['  std::printf("}}\\n");', "  return 0;", "}"]
    return "\n".join(lines) + "\n"


def run_probe(tmp: Path, source: str, lang: str, include_dirs) -> dict:
    suffix = ".c" if lang == "c" else ".cc"
    std = "-std=c11" if lang == "c" else "-std=c++17"
    src = tmp / f"probe_{lang}{suffix}"
    exe = tmp / f"probe_{lang}"
    src.write_text(source)
    flags = [f"-I{d}" for d in include_dirs]
    run([*compiler(lang), std, "-Wall", "-Wextra", "-Werror", *flags, "-o", str(exe), str(src)])
    return json.loads(run([str(exe)]))


def py_kind(t) -> str:
    """The kind (see _KIND_PRELUDE) of a ctypes type; None is void."""
    if t is None:
        return "void"
    if issubclass(t, CFuncPtr):
        return "fn(" + ",".join([py_kind(t._restype_), *map(py_kind, t._argtypes_)]) + ")"
    if issubclass(t, ctypes._Pointer):
        return "p"
    if issubclass(t, ctypes.Array):
        return f"{py_kind(t._type_)}[{t._length_}]"
    if issubclass(t, ctypes.Structure):
        return "struct:" + t.__name__
    code = t._type_
    bits = str(8 * ctypes.sizeof(t))
    if code in ("P", "z", "Z"):
        return "p"
    if code == "?":
        return "bool"
    if code in ("f", "d", "g"):
        return "f" + bits
    if code == "c":
        return "i" + bits
    if code in "bhilq":
        return "i" + bits
    if code in "BHILQ":
        return "u" + bits
    raise TypeError(f"no kind for {t!r}")


# --- reading the headers' text -----------------------------------------------------------
_TOKEN = re.compile(r"/\*.*?\*/|//[^\n]*|;|[^;/]+|/", re.S)


def _strip_preprocessor(body: str) -> str:
    return "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("#"))


def parse_header_structs(text: str) -> dict[str, list[tuple[str, bool]]]:
    """``{struct: [(field, tagged [Optional]), ...]}`` for every ``typedef struct`` body.

    A comment belongs to the declaration after it, unless it follows a ``;`` on the same
    line, in which case it belongs to that declaration."""
    structs = {}
    for m in re.finditer(r"typedef struct\s*(\w*)\s*\{(.*?)\}\s*(\w+)\s*;", text, re.S):
        body = _strip_preprocessor(m.group(2))
        fields, declaration, comments = [], "", []
        previous_end_on_line = False  # just saw a ';' and no newline since
        for token in _TOKEN.findall(body):
            if token.startswith("/*") or token.startswith("//"):
                if previous_end_on_line and fields:
                    name, optional = fields[-1]
                    fields[-1] = (name, optional or "[Optional]" in token)
                else:
                    comments.append(token)
            elif token == ";":
                fn = re.search(r"\(\s*\*\s*(\w+)\s*\)", declaration)
                name = fn.group(1) if fn else re.findall(
                    r"\w+", re.sub(r"\[.*?\]", "", declaration))[-1]
                fields.append((name, any("[Optional]" in c for c in comments)))
                declaration, comments = "", []
                previous_end_on_line = True
            else:
                if "\n" in token:
                    previous_end_on_line = False
                declaration += token
        structs[m.group(3)] = fields
    return structs


def parse_header_enums(text: str) -> dict[str, list[str]]:
    """``{enum: [enumerator, ...]}`` for every ``typedef enum`` body."""
    enums = {}
    for m in re.finditer(r"typedef enum\s*(\w*)\s*\{(.*?)\}\s*(\w+)\s*;", text, re.S):
        body = re.sub(r"/\*.*?\*/|//[^\n]*", "", _strip_preprocessor(m.group(2)), flags=re.S)
        enums[m.group(3)] = [item.split("=")[0].strip() for item in body.split(",")
                             if item.strip()]
    return enums


def all_header_text() -> str:
    return "\n".join((INCLUDE / h).read_text() for h in HEADERS)


# --- what the mirrors claim -------------------------------------------------------------
# Enumerators and macros whose values the mirrors repeat.
def mirrored_constants() -> dict[str, int]:
    values = {}
    for enum in (abi.TF_Code, abi.TF_DataType, abi.SE_EventStatus, abi.PLUGGABLE_ExtType,
                 abi.dlpack.DLDeviceType, abi.dlpack.DLDataTypeCode, abi.grappler.TF_TriState,
                 abi.tf_tstring.TF_AttrType, abi.tf_tstring.TF_TString_Type):
        values.update({name: int(member) for name, member in enum.__members__.items()})
    se, tp, ext, dl = abi.stream_executor, abi.pluggable_profiler, abi.plugin_ext, abi.dlpack
    for module, names in (
        (se, ("SE_MAJOR", "SE_MINOR", "SE_PATCH")),
        (tp, ("TP_MAJOR", "TP_MINOR", "TP_PATCH")),
        (abi.grappler, ("GO_MAJOR", "GO_MINOR", "GO_PATCH")),
        (abi.tf_tstring, ("TF_TString_SmallCapacity",)),
        (ext, ("PLUGGABLE_EXT_MAJOR", "PLUGGABLE_EXT_MINOR", "PLUGGABLE_EXT_PATCH",
               "PLUGGABLE_EXT_TAG_MASK", "PLUGGABLE_EXT_TAG_BASE",
               "PLUGGABLE_PLATFORM_PAGEABLE_ASYNC_COPY", "PLUGGABLE_PLATFORM_PEER_DTOD",
               "PLUGGABLE_DLPACK_HOST_ADDRESSABLE")),
        (dl, ("DLPACK_MAJOR_VERSION", "DLPACK_MINOR_VERSION", "DLPACK_FLAG_BITMASK_READ_ONLY",
              "DLPACK_FLAG_BITMASK_IS_COPIED", "DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED")),
    ):
        values.update({name: getattr(module, name) for name in names})
    return values


# Function-pointer types that are not the type of a struct field: the C++ expression of the
# C type each one mirrors.
def standalone_function_types() -> dict[str, tuple[object, str]]:
    k, se, tp, st, tt = abi.kernels, abi.stream_executor, abi.pluggable_profiler, \
        abi.tf_status, abi.tf_tensor
    return {
        "SE_StatusCallbackFn": (se.SE_StatusCallbackFn, "SE_StatusCallbackFn"),
        "SE_InitPlugin_fn": (se.SE_InitPlugin_fn, "decltype(&SE_InitPlugin)"),
        "SE_InitializePlugin": (se.SE_InitPlugin_fn, "decltype(&SE_InitializePlugin)"),
        "TF_InitProfiler_fn": (tp.TF_InitProfiler_fn, "decltype(&TF_InitProfiler)"),
        "TSL_PayloadVisitor": (st.TSL_PayloadVisitor, "TSL_PayloadVisitor"),
        "TF_PayloadVisitor": (st.TF_PayloadVisitor, "TF_PayloadVisitor"),
        "TF_NewTensor_deallocator_fn": (
            tt.TF_NewTensor_deallocator_fn, "ArgOf<5, decltype(TF_NewTensor)>::type"),
        "TF_NewKernelBuilder_create_fn": (
            k.TF_NewKernelBuilder_create_fn, "ArgOf<2, decltype(TF_NewKernelBuilder)>::type"),
        "TF_NewKernelBuilder_compute_fn": (
            k.TF_NewKernelBuilder_compute_fn, "ArgOf<3, decltype(TF_NewKernelBuilder)>::type"),
        "TF_NewKernelBuilder_delete_fn": (
            k.TF_NewKernelBuilder_delete_fn, "ArgOf<4, decltype(TF_NewKernelBuilder)>::type"),
        "TF_NewAsyncKernelBuilder_create_fn": (
            k.TF_NewKernelBuilder_create_fn,
            "ArgOf<2, decltype(TF_NewAsyncKernelBuilder)>::type"),
        "TF_NewAsyncKernelBuilder_compute_async_fn": (
            k.TF_NewAsyncKernelBuilder_compute_async_fn,
            "ArgOf<3, decltype(TF_NewAsyncKernelBuilder)>::type"),
        "TF_NewAsyncKernelBuilder_delete_fn": (
            k.TF_NewKernelBuilder_delete_fn,
            "ArgOf<4, decltype(TF_NewAsyncKernelBuilder)>::type"),
        "TF_InitKernel_fn": (k.TF_InitKernel_fn, "decltype(&TF_InitKernel)"),
        "TF_InitGraph_fn": (abi.grappler.TF_InitGraph_fn, "decltype(&TF_InitGraph)"),
        "TF_RendezvousSend_Function": (k.TF_RendezvousSend_Function, "TF_RendezvousSend_Function"),
        "TF_RendezvousDoneCallback_Function": (
            k.TF_RendezvousDoneCallback_Function, "TF_RendezvousDoneCallback_Function"),
        "TF_RendezvousAsyncRecv_Function": (
            k.TF_RendezvousAsyncRecv_Function, "TF_RendezvousAsyncRecv_Function"),
        "TF_RendezvousStartAbort_Function": (
            k.TF_RendezvousStartAbort_Function, "TF_RendezvousStartAbort_Function"),
    }
