"""Platforms by name and device types by priority: which plugin serves a device type."""
from __future__ import annotations

import pytest

from pluggable.errors import NotFoundError, PluginLoadError, PluginLoadWarning


def records_by_name(manager):
    return {r.platform_name: r for r in manager.records}


def test_duplicate_platform_name_is_rejected(private_manager, build_test_plugin):
    first = build_test_plugin(PLATFORM_NAME="SAME_NAME", DEVICE_TYPE="DUPA")
    second = build_test_plugin(PLATFORM_NAME="SAME_NAME", DEVICE_TYPE="DUPB")
    private_manager.load_plugin(first)
    with pytest.raises(PluginLoadError) as info:
        private_manager.load_plugin(second)
    assert info.value.step == "registration"
    assert "'SAME_NAME' is already registered by " + first in str(info.value)
    # The first plugin still serves its devices.
    assert private_manager.devices.get("DUPA:0").platform.path == first


def test_higher_priority_is_enabled(private_manager, build_test_plugin):
    low = build_test_plugin(PLATFORM_NAME="LOW_PRIO", DEVICE_TYPE="PRIO")
    high = build_test_plugin(PLATFORM_NAME="HIGH_PRIO", DEVICE_TYPE="PRIO")
    private_manager.load_plugin(low, priority=1)
    private_manager.load_plugin(high, priority=5)
    records = records_by_name(private_manager)
    assert records["HIGH_PRIO"].status == "loaded"
    assert records["LOW_PRIO"].status == "disabled"
    assert "higher priority (5 > 1)" in records["LOW_PRIO"].reason
    assert private_manager.devices.get("PRIO:0").subdevice_type == "HIGH_PRIO"


def test_lower_priority_loaded_later_is_disabled(private_manager, build_test_plugin):
    high = build_test_plugin(PLATFORM_NAME="FIRST_HIGH", DEVICE_TYPE="ORDER")
    low = build_test_plugin(PLATFORM_NAME="SECOND_LOW", DEVICE_TYPE="ORDER")
    private_manager.load_plugin(high, priority=3)
    private_manager.load_plugin(low, priority=-2)
    records = records_by_name(private_manager)
    assert (records["FIRST_HIGH"].status, records["SECOND_LOW"].status) == ("loaded", "disabled")


def test_declared_priority_is_used_when_the_user_gives_none(private_manager,
                                                           build_test_plugin):
    plain = build_test_plugin(PLATFORM_NAME="PLAIN_ONE", DEVICE_TYPE="DECL")
    declared = build_test_plugin(PLATFORM_NAME="DECLARED_ONE", DEVICE_TYPE="DECL",
                                 DEFAULT_PRIORITY=4)
    private_manager.load_plugin(plain)
    private_manager.load_plugin(declared)
    assert private_manager.devices.enabled_platform("DECL").name == "DECLARED_ONE"


def test_equal_priority_first_wins_with_a_warning(private_manager, build_test_plugin):
    first = build_test_plugin(PLATFORM_NAME="EQUAL_A", DEVICE_TYPE="EQUAL")
    second = build_test_plugin(PLATFORM_NAME="EQUAL_B", DEVICE_TYPE="EQUAL")
    private_manager.load_plugin(first)
    with pytest.warns(PluginLoadWarning) as caught:
        private_manager.load_plugin(second)
    message = str(caught[0].message)
    assert first in message and second in message
    assert "set_subdevice_mapping('EQUAL', 'EQUAL_B')" in message
    records = records_by_name(private_manager)
    assert (records["EQUAL_A"].status, records["EQUAL_B"].status) == ("loaded", "disabled")


def test_subdevice_mapping_enables_another_plugin(private_manager, build_test_plugin):
    first = build_test_plugin(PLATFORM_NAME="MAP_A", DEVICE_TYPE="MAPPED")
    second = build_test_plugin(PLATFORM_NAME="MAP_B", DEVICE_TYPE="MAPPED")
    private_manager.load_plugin(first, priority=2)
    private_manager.load_plugin(second, priority=1)
    private_manager.devices.set_subdevice_mapping("MAPPED", "MAP_B")
    records = records_by_name(private_manager)
    assert (records["MAP_A"].status, records["MAP_B"].status) == ("disabled", "loaded")
    device = private_manager.devices.get("/device:MAPPED:0")
    assert device.subdevice_type == "MAP_B"
    # Once a device of the type exists, the mapping is fixed.
    with pytest.raises(RuntimeError, match="already exist on MAP_B"):
        private_manager.devices.set_subdevice_mapping("MAPPED", "MAP_A")
    # Setting the mapping it already has is fine.
    private_manager.devices.set_subdevice_mapping("MAPPED", "MAP_B")


def test_subdevice_mapping_errors(private_manager, build_test_plugin):
    private_manager.load_plugin(build_test_plugin(PLATFORM_NAME="ONLY_ONE", DEVICE_TYPE="SOLO"))
    with pytest.raises(NotFoundError, match="no plugin provides device type 'NOPE'"):
        private_manager.devices.set_subdevice_mapping("NOPE", "ONLY_ONE")
    with pytest.raises(NotFoundError, match="available: ONLY_ONE"):
        private_manager.devices.set_subdevice_mapping("SOLO", "OTHER")


def test_a_plugin_may_register_gpu(private_manager, build_test_plugin):
    private_manager.load_plugin(build_test_plugin(PLATFORM_NAME="MY_GPU", DEVICE_TYPE="GPU"))
    device = private_manager.devices.get("gpu:0")
    assert (device.device_type, device.subdevice_type, device.name) == ("GPU", "MY_GPU",
                                                                          "/device:GPU:0")


def test_unknown_device_names(private_manager, build_test_plugin):
    private_manager.load_plugin(build_test_plugin(PLATFORM_NAME="NAMED", DEVICE_TYPE="NAMES"))
    with pytest.raises(NotFoundError, match="has 1 NAMES device"):
        private_manager.devices.get("NAMES:3")
    with pytest.raises(NotFoundError, match="no plugin provides device type ZZZ"):
        private_manager.devices.get("/device:ZZZ:0")
    with pytest.raises(ValueError, match="cannot parse device name"):
        private_manager.devices.get("NAMES:x")


@pytest.mark.parametrize("spec, parsed", [
    ("/device:XPU:1", ("XPU", 1)),
    ("/physical_device:XPU:1", ("XPU", 1)),
    ("xpu:1", ("XPU", 1)),
    ("XPU", ("XPU", 0)),
    ("/job:localhost/replica:0/task:0/device:XPU:1", ("XPU", 1)),
    # A device type may contain "device": only a whole "device:" component is a prefix.
    ("/my_device:0", ("MY_DEVICE", 0)),
    ("my_device", ("MY_DEVICE", 0)),
    ("/device:MY_DEVICE:2", ("MY_DEVICE", 2)),
    ("/physical_device:SUBDEVICE:3", ("SUBDEVICE", 3)),
])
def test_device_names_parse(spec, parsed):
    from pluggable.devices.device import parse_device_name

    assert parse_device_name(spec) == parsed


@pytest.mark.parametrize("spec", ["", "  ", "XPU:x", "XPU:-1", "a:b:c", "/device:"])
def test_bad_device_names_say_how_to_write_them(spec):
    from pluggable.devices.device import parse_device_name

    with pytest.raises(ValueError, match="non-empty string|cannot parse device name"):
        parse_device_name(spec)


def test_a_device_creation_failure_gives_its_advice(build_test_plugin, private_manager):
    from pluggable.errors import PluginLoadError

    with pytest.raises(PluginLoadError, match="device creation.*failed to create its devices"):
        private_manager.load_plugin(build_test_plugin(FAIL_CREATE_DEVICE=True))
