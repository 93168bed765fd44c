"""Start-up: what plugin discovery imports, and the records that stand in for dataclasses on
its path (benchmarks/bench_startup.py measures the time)."""
from __future__ import annotations

import copy
import json
import pickle

import pytest

from pluggable import config

from pluggable.plugin import cache_files
from pluggable.base.record import record

# (importlib.metadata is left out: discovery uses it when sys.path holds an archive.)
HEAVY = ("numpy", "ml_dtypes", "dataclasses", "inspect", "typing", "re", "json", "hashlib",
         "pluggable.oplib.core", "pluggable.dtypes")


def test_discovery_imports_nothing_it_does_not_need(run_python):
    code = ("import sys, pluggable\n"
            "pluggable.config.list_physical_devices()\n"
            "before = set(sys.modules)\n"
            "pluggable.get_device('XPU:0')\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
            "print(sorted(m for m in set(sys.modules) - before))")
    run_python(code)  # probes the plugins (the probe needs json) and fills the cache
    imported, later = (json.loads(line.replace("'", '"'))
                       for line in run_python(code).stdout.splitlines()[-2:])
    assert imported == []
    assert later == ["pluggable.devices.stream"]  # a device needs its streams, nothing more


@record
class Mutable:
    name: str
    items: list = []
    size: int = 0


@record(frozen=True)
class Frozen:
    name: str
    kind: str = "x"


def test_records_behave_as_the_dataclasses_they_replace():
    a, b = Mutable("a"), Mutable("a", size=0)
    assert a == b and a != Mutable("a", size=1) and a != ("a", [], 0)
    assert repr(a) == "Mutable(name='a', items=[], size=0)"
    a.items.append(1)
    assert b.items == [] and Mutable("c").items == []  # a list default is per instance
    with pytest.raises(TypeError):
        hash(a)
    assert copy.copy(a) == a and copy.copy(a) is not a
    assert Mutable.__match_args__ == ("name", "items", "size")
    frozen = Frozen("f")
    assert frozen == Frozen(name="f", kind="x") and hash(frozen) == hash(Frozen("f"))
    assert pickle.loads(pickle.dumps(frozen)) == frozen
    with pytest.raises(AttributeError, match="cannot assign to field 'name'"):
        frozen.name = "g"
    with pytest.raises(AttributeError, match="cannot delete field 'kind'"):
        del frozen.kind


def test_records_refuse_bad_arguments_naming_them():
    with pytest.raises(TypeError, match="missing the argument 'name'"):
        Mutable()
    with pytest.raises(TypeError, match="takes 3 arguments, 4 given"):
        Mutable("a", [], 0, 1)
    with pytest.raises(TypeError, match="'colour'.*fields: name, items, size"):
        Mutable("a", colour=1)
    with pytest.raises(TypeError, match="'name'"):
        Mutable("a", name="b")


def test_physical_devices_are_frozen_values():
    cpu = config.list_physical_devices("CPU")[0]
    assert cpu == config.PhysicalDevice("/physical_device:CPU:0", "CPU", "CPU")
    assert {cpu: 1}[config.PhysicalDevice("/physical_device:CPU:0", "CPU", "CPU")] == 1
    with pytest.raises(AttributeError):
        cpu.name = "other"


@pytest.mark.parametrize("text", ['{"a": [1, 2.5, null, true, "\\u00e9"], "b": {}}', "[]",
                                  '"s"', "-0.5e3", "NaN"])
def test_the_cache_reader_parses_json_as_json_does(text):
    assert repr(cache_files.json_loads(text)) == repr(json.loads(text))


@pytest.mark.parametrize("text", ["{not json", '{"a": 1} 2', "", '{"a": 1'])
def test_the_cache_reader_refuses_what_json_refuses(text):
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        cache_files.json_loads(text)
