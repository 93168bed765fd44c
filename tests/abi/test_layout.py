"""The ctypes mirrors agree with the C compiler, field by field, for every struct in
include/: offsets, sizes, alignment, *_STRUCT_SIZE macros, field types (function-pointer
prototypes included), enum values and version macros. Also the headers' text agrees with the
mirrors on which fields exist and which callbacks are [Optional]."""
from __future__ import annotations

import ctypes
import json
import inspect
import re

import abi_testlib as lib
import pytest

abi = lib.abi


def test_every_header_struct_is_mirrored():
    in_headers = set(lib.parse_header_structs(lib.all_header_text()))
    mirrored = {cls.__name__ for cls in abi.ALL_STRUCTS}
    assert in_headers == mirrored


def test_every_mirror_is_in_all_structs():
    defined = set()
    for module in (abi.tf_buffer, abi.tf_tensor, abi.stream_executor, abi.pluggable_profiler,
                   abi.kernels, abi.plugin_ext, abi.profiler_clock, abi.dlpack, abi.grappler,
                   abi.tf_tstring):
        defined |= {obj for _, obj in inspect.getmembers(module, inspect.isclass)
                    if issubclass(obj, abi.ABIStruct) and obj is not abi.ABIStruct}
    # TF_TString (a struct around an anonymous union) is checked by the test below.
    assert defined == set(abi.ALL_STRUCTS) | {abi.tf_tstring.TF_TString}


def test_tstring_layout(tmp_path):
    """TF_TString's size and its union members at offset 0, as the compiler lays them out."""
    source = ("#include <stddef.h>\n#include <stdio.h>\n"
              '#include "tensorflow/c/tf_tstring.h"\n'
              "int main(void) { TF_TString s; printf(\"[%zu, %zu, %zu, %zu]\", sizeof s,"
              " _Alignof(TF_TString), sizeof s.u.smll.str, (size_t)((char*)&s.u.view.owner_ref"
              " - (char*)&s)); return 0; }\n")
    src = tmp_path / "tstring.c"
    src.write_text(source)
    lib.run([*lib.compiler("c"), "-std=c11", f"-I{lib.INCLUDE}", "-o", str(tmp_path / "t"),
             str(src)])
    t = abi.tf_tstring.TF_TString
    expected = [ctypes.sizeof(t), ctypes.alignment(t),
                ctypes.sizeof(abi.tf_tstring.TF_TString_Small.str.size and
                              abi.tf_tstring.TF_TString_Small._fields_[1][1]),
                abi.tf_tstring.TF_TString_View.owner_ref.offset]
    assert json.loads(lib.run([str(tmp_path / "t")])) == expected == [24, 8, 23, 16]


def test_fields_match_header_text(struct):
    declared = lib.parse_header_structs(lib.all_header_text())[struct.__name__]
    assert [name for name, _ in declared] == [name for name, _ in struct._fields_]


def test_layout_matches_compiler(struct, layout):
    c = layout["structs"][struct.__name__]
    mirrored = [[name, struct._cfield(name).offset, ctypes.sizeof(ctype)]
                for name, ctype in struct._fields_]
    assert mirrored == c["fields"]
    assert ctypes.sizeof(struct) == c["sizeof"]
    assert ctypes.alignment(struct) == c["align"]
    # field_end() must agree with the compiler for every field (struct_size included).
    for name, offset, size in c["fields"]:
        assert struct.field_end(name) == offset + size, name


def test_struct_size_matches_macro(struct, layout):
    c = layout["structs"][struct.__name__]
    if struct._size_macro_ is None:
        assert not struct.has_struct_size(), "a versioned struct needs its *_STRUCT_SIZE"
        assert struct.struct_size() == c["fields"][-1][1] + c["fields"][-1][2]
        return
    assert struct.has_struct_size()
    assert struct._last_field_ == struct._fields_[-1][0], "the size macro names the last field"
    assert struct.struct_size() == c["size_macro"]
    module = inspect.getmodule(struct)
    assert getattr(module, struct._size_macro_) == c["size_macro"]


def test_field_types_match_compiler(struct, kinds):
    c = kinds["structs"][struct.__name__]
    mirrored = {name: lib.py_kind(ctype) for name, ctype in struct._fields_}
    assert mirrored == c


def test_standalone_function_types_match_compiler(kinds):
    for name, (fn_type, _) in lib.standalone_function_types().items():
        assert lib.py_kind(fn_type) == kinds["types"][name], name


def test_every_function_type_is_checked():
    """Each CFUNCTYPE the mirrors declare is a struct field's type or in the standalone
    table, so the probes above cover it."""
    checked = {ctype for cls in abi.ALL_STRUCTS for _, ctype in cls._fields_}
    checked |= {fn for fn, _ in lib.standalone_function_types().values()}
    declared = {}
    for module in (abi.tf_status, abi.tf_buffer, abi.tf_tensor, abi.stream_executor,
                   abi.pluggable_profiler, abi.kernels, abi.plugin_ext, abi.dlpack):
        for name, obj in vars(module).items():
            if isinstance(obj, type) and issubclass(obj, lib.CFuncPtr):
                declared[f"{module.__name__}.{name}"] = obj
    unchecked = sorted(name for name, fn in declared.items() if fn not in checked)
    assert not unchecked


def test_constants_match_compiler(layout):
    assert lib.mirrored_constants() == layout["constants"]


def test_enums_complete():
    """Every enumerator of the headers is mirrored (values are checked above)."""
    enums = lib.parse_header_enums(lib.all_header_text())
    assert enums["TF_DataType"] == list(abi.TF_DataType.__members__)
    assert enums["SE_EventStatus"] == list(abi.SE_EventStatus.__members__)
    assert enums["PLUGGABLE_ExtType"] == list(abi.PLUGGABLE_ExtType.__members__)
    assert enums["DLDeviceType"] == list(abi.dlpack.DLDeviceType.__members__)
    assert enums["DLDataTypeCode"] == list(abi.dlpack.DLDataTypeCode.__members__)
    tf_codes = ["TF_" + name[len("TSL_"):] for name in enums["TSL_Code"]]
    assert tf_codes == list(abi.TF_Code.__members__)
    for name in tf_codes:  # the TF_* aliases exist as macros too
        assert f"#define {name} TSL_" in (lib.INCLUDE / "tensorflow/c/tf_status.h").read_text()


def test_tf_code_module_constants():
    for name, member in abi.TF_Code.__members__.items():
        assert getattr(abi.tf_status, name) is member


def test_optional_tags_match_mirrors(struct):
    """Callbacks tagged [Optional] in the header are exactly the mirror's optional ones."""
    declared = lib.parse_header_structs(lib.all_header_text())[struct.__name__]
    tagged = {name for name, optional in declared if optional} & set(struct.callbacks())
    assert tagged == set(struct._optional_) & set(struct.callbacks())
    assert set(struct._optional_) <= {name for name, _ in struct._fields_}


# --- versions and field presence ---------------------------------------------------------
def test_stream_executor_first_version_ends_at_synchronize_all_activity(layout):
    se = abi.SP_StreamExecutor
    c_fields = layout["structs"]["SP_StreamExecutor"]["fields"]
    fields = {name: (offset, size) for name, offset, size in c_fields}
    offset, size = fields["synchronize_all_activity"]
    assert se.min_struct_size() == offset + size
    assert se.min_struct_size() < se.struct_size()
    assert se.struct_size() == abi.stream_executor.SP_STREAMEXECUTOR_STRUCT_SIZE
    minimum = se.min_struct_size()
    for late in ("mem_zero", "memset", "memset32", "host_callback"):
        assert not se.field_present(late, minimum)
        assert se.field_present(late, se.struct_size())
    assert se.field_present("synchronize_all_activity", minimum)
    assert not se.field_present("synchronize_all_activity", minimum - 1)
    # A newer plugin's larger struct: every field the host knows is present.
    assert all(se.field_present(name, se.struct_size() + 64) for name, _ in se._fields_)


def test_first_version_is_the_full_struct_except_stream_executor(struct):
    if struct is abi.SP_StreamExecutor:  # the one struct with later additions
        assert struct.min_struct_size() < struct.struct_size()
    else:
        assert struct.min_struct_size() == struct.struct_size()


def test_field_present_unknown_field_raises():
    with pytest.raises(AttributeError, match="SP_Device has no field 'nope'"):
        abi.SP_Device.field_present("nope", 100)


def test_struct_size_is_classmethod_on_class_and_field_on_instance():
    device = abi.SP_Device(struct_size=3)
    assert device.struct_size == 3
    assert abi.SP_Device.struct_size() == abi.stream_executor.SP_DEVICE_STRUCT_SIZE
    device.struct_size = 7
    assert ctypes.c_size_t.from_buffer(device).value == 7
    assert abi.SP_Device.new().struct_size == abi.SP_Device.struct_size()
    assert abi.SP_Device.new(ordinal=2).ordinal == 2
    assert abi.SP_Platform.new(struct_size=1).struct_size == 1
    # Unversioned structs have no field of that name; the classmethod still answers.
    assert abi.TF_Buffer.struct_size() == ctypes.sizeof(abi.TF_Buffer)
    assert abi.TF_Buffer.new().length == 0


def test_required_callbacks_of_stream_executor():
    assert abi.SP_StreamExecutor.required_callbacks() == (
        "allocate", "deallocate", "create_stream", "destroy_stream", "create_event",
        "destroy_event", "get_event_status", "record_event", "wait_for_event", "memcpy_dtoh",
        "memcpy_htod", "memcpy_dtod", "synchronize_all_activity")
    assert abi.SP_PlatformFns.required_callbacks() == (
        "get_device_count", "create_device", "destroy_device", "create_stream_executor",
        "destroy_stream_executor")
    assert abi.SP_DeviceFns.required_callbacks() == ()
    assert abi.TP_ProfilerFns.required_callbacks() == ("start", "stop", "collect_data_xspace")


def test_abi_md_size_table_matches_mirrors():
    """include/ABI.md's table of first published versions is the mirrors' (on LP64)."""
    if ctypes.sizeof(ctypes.c_void_p) != 8 or ctypes.sizeof(ctypes.c_long) != 8:
        pytest.skip("the table gives LP64 sizes")
    text = (lib.INCLUDE / "ABI.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| `(\w+)` \| (\d+) \| (\d+) \| `(\w+)` \|$", text, re.M)
    documented = {name: (first, int(minimum), int(current), macro)
                  for name, first, minimum, current, macro in rows}
    expected = {cls.__name__: (cls._first_version_last_field_ or cls._last_field_,
                               cls.min_struct_size(), cls.struct_size(), cls._size_macro_)
                for cls in abi.ALL_STRUCTS if cls.has_struct_size()}
    assert documented == expected


def test_package_exports():
    assert {cls.__name__ for cls in abi.ALL_STRUCTS} <= set(abi.__all__)
    assert all(hasattr(abi, name) for name in abi.__all__)
