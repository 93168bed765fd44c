"""The corpus of broken plugins: every variant of tests/plugins/test_plugin.c gives its
documented outcome, with an error that names the file, the step and the reason."""
from __future__ import annotations

import numpy as np
import pytest

from pluggable.abi.stream_executor import SP_PlatformFns, SP_StreamExecutor
from pluggable.errors import PluginLoadError, UnimplementedError

REQUIRED_SE = SP_StreamExecutor.required_callbacks()
REQUIRED_PLATFORM = SP_PlatformFns.required_callbacks()


def load_error(manager, path) -> PluginLoadError:
    with pytest.raises(PluginLoadError) as info:
        manager.load_plugin(path)
    error = info.value
    assert path in str(error)
    assert error.path == path
    return error


def test_required_callback_lists_match_the_abi_document():
    assert set(REQUIRED_SE) == {
        "allocate", "deallocate", "create_stream", "destroy_stream", "create_event",
        "destroy_event", "get_event_status", "record_event", "wait_for_event", "memcpy_dtoh",
        "memcpy_htod", "memcpy_dtod", "synchronize_all_activity"}
    assert set(REQUIRED_PLATFORM) == {
        "get_device_count", "create_device", "destroy_device", "create_stream_executor",
        "destroy_stream_executor"}


def test_the_unbroken_test_plugin_loads(private_manager, build_test_plugin):
    platform = private_manager.load_plugin(build_test_plugin())
    assert (platform.name, platform.device_type, platform.device_count) == ("TEST_DEV", "TEST", 1)
    assert platform.api_version == (0, 0, 1)
    assert platform.plugin_version == "test-plugin 1.0"
    record = private_manager.records[-1]
    assert record.status == "loaded" and record.step == ""


def test_missing_init_symbol(private_manager, build_test_plugin):
    error = load_error(private_manager, build_test_plugin(NO_INIT_SYMBOL=True))
    assert error.step == "symbol lookup"
    assert "SE_InitPlugin" in str(error) and "SE_InitializePlugin" in str(error)


def test_rfc_entry_point_name_is_accepted(private_manager, build_test_plugin):
    platform = private_manager.load_plugin(build_test_plugin(USE_INITIALIZE_NAME=True))
    assert platform.name == "TEST_DEV"


def test_init_sets_an_error_status(private_manager, build_test_plugin):
    error = load_error(private_manager, build_test_plugin(INIT_ERROR=True))
    assert error.step == "init"
    assert "TF_FAILED_PRECONDITION" in str(error)
    assert "test plugin: no device present" in str(error)


def test_struct_size_zero(private_manager, build_test_plugin):
    error = load_error(private_manager, build_test_plugin(PLATFORM_STRUCT_SIZE=0))
    assert error.step == "validation"
    assert "SP_Platform.struct_size at 0" in str(error)
    assert "SP_PLATFORM_STRUCT_SIZE" in str(error)


def test_struct_size_smaller_than_first_version(private_manager, build_test_plugin):
    error = load_error(private_manager, build_test_plugin(PLATFORM_STRUCT_SIZE=16))
    assert error.step == "validation"
    from pluggable.abi.stream_executor import SP_Platform
    assert "SP_Platform.struct_size to 16" in str(error)
    assert f"({SP_Platform.min_struct_size()} bytes" in str(error)


def test_struct_size_larger_than_ours_is_accepted(private_manager, build_test_plugin):
    platform = private_manager.load_plugin(build_test_plugin(PLATFORM_STRUCT_EXTRA=64))
    assert platform.name == "TEST_DEV"


@pytest.mark.parametrize("macro, field", [("NULL_NAME", "SP_Platform.name is NULL"),
                                          ("NULL_TYPE", "SP_Platform.type is NULL"),
                                          ("LOWERCASE_NAME", "'test_dev'")])
def test_bad_names(private_manager, build_test_plugin, macro, field):
    error = load_error(private_manager, build_test_plugin(**{macro: True}))
    assert error.step == "validation"
    assert field in str(error)


@pytest.mark.parametrize("callback", REQUIRED_SE)
def test_required_executor_callback_left_null(private_manager, build_test_plugin, callback):
    error = load_error(private_manager, build_test_plugin(NULL_SE_CALLBACK=callback))
    assert error.step == "validation"
    assert f"SP_StreamExecutor.{callback} is required" in str(error)


@pytest.mark.parametrize("callback", REQUIRED_PLATFORM)
def test_required_platform_callback_left_null(private_manager, build_test_plugin, callback):
    error = load_error(private_manager, build_test_plugin(NULL_PLATFORM_CALLBACK=callback))
    assert error.step == "validation"
    assert f"SP_PlatformFns.{callback} is required" in str(error)


def test_major_version_mismatch(private_manager, build_test_plugin):
    error = load_error(private_manager, build_test_plugin(MAJOR_VERSION=1))
    assert error.step == "validation"
    assert "1.0.1" in str(error) and "0.0.1" in str(error)


def test_negative_device_count(private_manager, build_test_plugin):
    error = load_error(private_manager, build_test_plugin(DEVICE_COUNT=-1))
    assert error.step == "validation"
    assert "-1 devices" in str(error)


def test_create_device_fails(private_manager, build_test_plugin):
    error = load_error(private_manager, build_test_plugin(FAIL_CREATE_DEVICE=True))
    assert error.step == "device creation"
    assert "create_device was told to fail" in str(error)


def test_create_stream_executor_fails(private_manager, build_test_plugin):
    error = load_error(private_manager, build_test_plugin(FAIL_CREATE_STREAM_EXECUTOR=True))
    assert error.step == "device creation"
    assert "create_stream_executor was told to fail" in str(error)


def test_unknown_extension_is_skipped(private_manager, build_test_plugin):
    platform = private_manager.load_plugin(build_test_plugin(UNKNOWN_EXT=True,
                                                             DEFAULT_PRIORITY=7))
    # The PLATFORM_INFO extension behind the unknown one was still read.
    assert platform.default_priority == 7
    assert platform.plugin_version == "test-plugin 1.0"


def test_failed_load_is_remembered_and_raised_again(private_manager, build_test_plugin):
    path = build_test_plugin(INIT_ERROR=True)
    first = load_error(private_manager, path)
    second = load_error(private_manager, path)
    assert str(first) == str(second)
    assert [r.status for r in private_manager.records] == ["skipped"]


class TestOlderPlugin:
    """SP_StreamExecutor ends before mem_zero: the plugin loads, and the host falls back."""

    @pytest.fixture
    def executor(self, private_manager, build_test_plugin):
        platform = private_manager.load_plugin(
            build_test_plugin(SE_STRUCT_SIZE_BEFORE_MEM_ZERO=True))
        return platform.executor(0)

    def test_absent_fields_read_as_null(self, executor):
        for name in ("mem_zero", "memset", "memset32", "host_callback"):
            assert executor._fns[name] is None

    def test_memset_falls_back_to_a_staged_copy(self, executor):
        stream = executor.create_stream()
        memory = executor.allocate(64)
        executor.memset(stream, memory, 0xAB)
        executor.memset32(stream, memory.view(0, 16), 0x01020304)
        executor.mem_zero(stream, memory.view(60, 4))
        out = bytearray(64)
        executor.memcpy_dtoh(stream, out, memory)
        stream.synchronize()
        expected = np.full(64, 0xAB, np.uint8)
        expected[:16] = np.frombuffer(np.full(4, 0x01020304, "<u4").tobytes(), np.uint8)
        expected[60:] = 0
        assert bytes(out) == expected.tobytes()
        memory.close()
        stream.close()

    def test_host_callback_is_unimplemented(self, executor):
        stream = executor.create_stream()
        with pytest.raises(UnimplementedError, match="host_callback"):
            stream.host_callback(lambda: None)
        stream.close()


class TestNullHandles:
    """The test plugin uses NULL for every stream, event and timer: valid handle values."""

    def test_streams_events_and_timers_work(self, private_manager, build_test_plugin):
        executor = private_manager.load_plugin(build_test_plugin()).executor(0)
        stream = executor.create_stream()
        event = executor.create_event()
        timer = executor.create_timer()
        assert stream.handle is None and event.handle is None and timer.handle is None
        timer.start(stream)
        event.record(stream)
        timer.stop(stream)
        event.synchronize()
        assert event.query()
        assert timer.nanoseconds() == 42
        ran = []
        stream.host_callback(lambda: ran.append(1))
        stream.synchronize()
        assert ran == [1]
        for handle in (timer, event, stream):
            handle.close()
            handle.close()  # idempotent
            assert handle.is_closed


def test_half_of_a_callback_pair_is_rejected(private_manager, build_test_plugin):
    error = load_error(private_manager,
                       build_test_plugin(NULL_SE_CALLBACK="host_memory_deallocate"))
    assert error.step == "validation"
    assert "sets host_memory_allocate but not host_memory_deallocate" in str(error)


def test_half_of_the_timer_group_is_rejected(private_manager, build_test_plugin):
    error = load_error(private_manager, build_test_plugin(NULL_SE_CALLBACK="stop_timer"))
    assert "but not stop_timer" in str(error)


def test_unterminated_name_is_rejected(private_manager, build_test_plugin):
    error = load_error(private_manager, build_test_plugin(UNTERMINATED_NAME=True))
    assert error.step == "validation"
    assert "SP_Platform.name is not NUL-terminated within 256 bytes" in str(error)


def test_a_plugin_without_timers(private_manager, build_test_plugin):
    executor = private_manager.load_plugin(build_test_plugin(NO_TIMERS=True)).executor(0)
    assert not executor.supports_timers
    with pytest.raises(UnimplementedError, match="does not implement timers"):
        executor.create_timer()


@pytest.mark.parametrize("callback", ["create_stream_dependency", "get_stream_status",
                                      "block_host_for_event", "block_host_until_done",
                                      "sync_memcpy_htod", "sync_memcpy_dtoh",
                                      "sync_memcpy_dtod", "host_memory_allocate",
                                      "get_allocator_stats", "device_memory_usage"])
def test_optional_callback_left_null_loads(private_manager, build_test_plugin, callback):
    macros = {"NULL_SE_CALLBACK": callback}
    if callback == "host_memory_allocate":
        macros = {"NULL_SE_CALLBACK": callback, "NULL_SE_CALLBACK2": "host_memory_deallocate"}
    executor = private_manager.load_plugin(build_test_plugin(**macros)).executor(0)
    assert executor._fns[callback] is None
