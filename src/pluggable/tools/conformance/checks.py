"""The conformance checks, tier by tier (see the package's docstring). Run them through
`python -m pluggable conformance PATH.so` or `pytest --pluggable-plugin PATH.so`.

Each check exercises one part of the plugin's API and verifies it through the simplest other
parts (synchronous copies), so that one defect fails one check. Data is always compared with
what was written; sizes and offsets include the awkward ones (0 and 1 bytes, odd offsets,
64 MiB).
"""
from __future__ import annotations

import threading
import time
import warnings
from typing import Any, Dict, List

import numpy as np
import pytest

import pluggable
from pluggable import dtypes as dt
from pluggable.errors import NotFoundError, PluggableError, ResourceExhaustedError
from pluggable.oplib.samples import REDUCTIONS, Variable, generate as _generate, values as _values

MiB = 1 << 20


def _rng(seed: int):
    return np.random.default_rng(seed)


# ---- fixtures ------------------------------------------------------------------------------

def _plugin_path(config) -> str:
    path = config.getoption("pluggable_plugin")
    if not path:
        pytest.skip("no plugin given: pass --pluggable-plugin PATH.so")
    return path


_loaded: Dict[str, Any] = {}


def _load(path: str):
    """Loads the plugin once; records the warnings loading gave (TestLoading checks them)."""
    if path not in _loaded:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                platform = pluggable.load_plugin(path)
                error = None
            except PluggableError as exc:
                platform, error = None, exc
        _loaded[path] = (platform, error, [str(w.message) for w in caught])
    return _loaded[path]


@pytest.fixture(scope="session")
def plugin_path(request) -> str:
    return _plugin_path(request.config)


@pytest.fixture(scope="session")
def platform(plugin_path):
    platform, error, _ = _load(plugin_path)
    if platform is None:
        pytest.skip(f"the plugin did not load (see TestLoading): {error}")
    return platform


@pytest.fixture(scope="session")
def executor(platform):
    return platform.executor(0)


@pytest.fixture
def stream(executor):
    with executor.create_stream() as s:
        yield s


def _upload(executor, data: np.ndarray):
    memory = executor.allocate(max(data.nbytes, 1))
    if data.nbytes:
        executor.sync_memcpy_htod(memory, data)
    return memory


def _download(executor, memory, nbytes: int) -> np.ndarray:
    out = np.zeros(nbytes, np.uint8)
    if nbytes:
        executor.sync_memcpy_dtoh(out, memory, nbytes)
    return out


def _pattern(nbytes: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)


# ---- tier 1: loading -----------------------------------------------------------------------

class TestLoading:
    def test_loads_and_validates(self, plugin_path):
        platform, error, _ = _load(plugin_path)
        assert error is None, f"the plugin did not load: {error}"
        assert platform.device_type and platform.name

    def test_loads_without_warnings(self, plugin_path):
        _, _, messages = _load(plugin_path)
        assert not messages, "loading warned:\n" + "\n".join(messages)

    def test_names_follow_the_rules(self, platform):
        # TensorFlow refuses lowercase device types and platform names with spaces.
        assert platform.device_type == platform.device_type.upper()
        assert " " not in platform.name

    def test_reports_devices(self, platform):
        assert platform.device_count >= 1, "the plugin reports no devices"


# ---- tier 2: devices -----------------------------------------------------------------------

class TestDevices:
    def test_every_device_describes_itself(self, platform):
        for ordinal in range(platform.device_count):
            executor = platform.executor(ordinal)
            details = executor.details()
            assert details.get("device_name"), f"device {ordinal} has no hardware name"
            assert details.get("vendor") is not None, f"device {ordinal} has no vendor"

    def test_memory_figures_are_consistent(self, executor):
        usage = executor.memory_usage()
        if usage is None:
            pytest.skip("the plugin reports no memory usage (device_memory_usage is optional)")
        free, total = usage
        assert 0 < total, f"total memory {total} must be positive"
        assert 0 <= free <= total, f"free memory {free} outside [0, total={total}]"


# ---- tier 3: memory ------------------------------------------------------------------------

class TestMemory:
    @pytest.mark.parametrize("size", [1, 7, 256, 4096 + 3, MiB])
    def test_allocate_and_deallocate(self, executor, size):
        memory = executor.allocate(size)
        try:
            assert memory.address != 0 and memory.size >= size
        finally:
            memory.close()

    def test_allocations_do_not_overlap(self, executor):
        blocks = [executor.allocate(4096) for _ in range(16)]
        try:
            spans = sorted((b.address, b.address + b.size) for b in blocks)
            for (_, end), (start, _) in zip(spans, spans[1:]):
                assert end <= start, "two live allocations overlap"
            for i, block in enumerate(blocks):
                executor.sync_memcpy_htod(block, np.full(4096, i, np.uint8))
            for i, block in enumerate(blocks):
                assert (_download(executor, block, 4096) == i).all(), \
                    f"allocation {i} was overwritten by another"
        finally:
            for block in blocks:
                block.close()

    def test_allocator_stats_follow_allocations(self, executor):
        before = executor.allocator_stats()
        if before is None:
            pytest.skip("the plugin reports no allocator statistics (optional)")
        memory = executor.allocate(MiB)
        try:
            during = executor.allocator_stats()
            assert during["bytes_in_use"] >= before["bytes_in_use"] + MiB, \
                f"bytes_in_use went from {before['bytes_in_use']} to " \
                f"{during['bytes_in_use']} over a 1 MiB allocation"
            assert during["peak_bytes_in_use"] >= during["bytes_in_use"]
        finally:
            memory.close()
        after = executor.allocator_stats()
        assert after["bytes_in_use"] == before["bytes_in_use"], \
            "bytes_in_use did not return to its value after the deallocation"

    def test_allocator_stats_agree_with_real_use(self, executor):
        """What get_allocator_stats reports against what was really allocated: counts, bytes
        in use (at least the sizes asked, at most one allocation granule more each), the
        peak, the largest allocation and the limit."""
        before = executor.allocator_stats()
        if before is None:
            pytest.skip("the plugin reports no allocator statistics (optional)")
        sizes = [1, 1000, MiB, 3 * MiB + 5]
        blocks = [executor.allocate(size) for size in sizes]
        try:
            during = executor.allocator_stats()
            grown = during["bytes_in_use"] - before["bytes_in_use"]
            assert sum(sizes) <= grown <= sum(sizes) + len(sizes) * 64 * 1024, \
                f"bytes_in_use grew by {grown} over allocations of {sum(sizes)} bytes"
            if "num_allocs" in during:
                assert during["num_allocs"] - before["num_allocs"] == len(sizes), \
                    f"num_allocs went from {before['num_allocs']} to {during['num_allocs']} " \
                    f"over {len(sizes)} allocations"
            assert during["peak_bytes_in_use"] >= during["bytes_in_use"]
            if during.get("largest_alloc_size"):  # 0: not tracked
                assert during["largest_alloc_size"] >= max(sizes), \
                    f"largest_alloc_size is {during['largest_alloc_size']} after allocating " \
                    f"{max(sizes)} bytes"
            if during.get("bytes_limit"):
                assert during["bytes_in_use"] <= during["bytes_limit"]
        finally:
            for block in blocks:
                block.close()
        after = executor.allocator_stats()
        assert after["bytes_in_use"] == before["bytes_in_use"], \
            f"bytes_in_use is {after['bytes_in_use']} after every allocation was freed, " \
            f"{before['bytes_in_use']} before"
        assert after["peak_bytes_in_use"] >= before["bytes_in_use"] + sum(sizes)

    def test_out_of_memory_is_reported(self, executor):
        usage = executor.memory_usage()
        total = usage[1] if usage else 1 << 40
        with pytest.raises(ResourceExhaustedError):
            memory = executor.allocate(total + (1 << 30))
            memory.close()
        memory = executor.allocate(4096)  # and the device is still usable
        memory.close()

    @pytest.mark.parametrize("size", [1, 5, 4096, MiB + 1])
    def test_mem_zero(self, executor, stream, size):
        memory = _upload(executor, _pattern(size) | 1)
        try:
            executor.mem_zero(stream, memory, size)
            stream.synchronize()
            assert not _download(executor, memory, size).any(), "mem_zero left non-zero bytes"
        finally:
            memory.close()

    @pytest.mark.parametrize("size", [1, 5, 4096, MiB + 1])
    def test_memset(self, executor, stream, size):
        memory = _upload(executor, _pattern(size))
        try:
            executor.memset(stream, memory, 0xA5, size)
            stream.synchronize()
            assert (_download(executor, memory, size) == 0xA5).all(), "memset wrote other bytes"
        finally:
            memory.close()

    @pytest.mark.parametrize("words", [1, 3, 1024, MiB // 4 + 1])
    def test_memset32(self, executor, stream, words):
        memory = _upload(executor, _pattern(words * 4))
        try:
            executor.memset32(stream, memory, 0x12345678, words * 4)
            stream.synchronize()
            got = _download(executor, memory, words * 4).view(np.uint32)
            assert (got == 0x12345678).all(), \
                f"memset32 wrote {got[:4]} ... instead of 0x12345678 in every word"
        finally:
            memory.close()


# ---- tier 4: copies ------------------------------------------------------------------------

COPY_SIZES = [0, 1, 3, 4096 + 1, 64 * MiB]


class TestCopies:
    @pytest.mark.parametrize("size", COPY_SIZES)
    def test_sync_round_trip(self, executor, size):
        data = _pattern(size, 1)
        memory = _upload(executor, data)
        try:
            assert (_download(executor, memory, size) == data).all()
        finally:
            memory.close()

    @pytest.mark.parametrize("size", COPY_SIZES)
    def test_htod_dtoh_on_a_stream(self, executor, stream, size):
        data = _pattern(size, 2)
        out = np.zeros(size, np.uint8)
        memory = executor.allocate(max(size, 1))
        try:
            if size:
                executor.memcpy_htod(stream, memory, data)
                executor.memcpy_dtoh(stream, out, memory, size)
            stream.synchronize()
            assert (out == data).all(), "the data came back different"
        finally:
            memory.close()

    @pytest.mark.parametrize("size", COPY_SIZES)
    def test_dtod(self, executor, stream, size):
        data = _pattern(size, 3)
        src = _upload(executor, data)
        dst = executor.allocate(max(size, 1))
        try:
            if size:
                executor.memcpy_dtod(stream, dst, src, size)
            stream.synchronize()
            assert (_download(executor, dst, size) == data).all(), \
                "memcpy_dtod copied other bytes"
        finally:
            src.close()
            dst.close()

    @pytest.mark.parametrize("size", [1, 4096 + 1])
    def test_sync_dtod(self, executor, size):
        data = _pattern(size, 4)
        src = _upload(executor, data)
        dst = executor.allocate(size)
        try:
            executor.sync_memcpy_dtod(dst, src, size)
            assert (_download(executor, dst, size) == data).all(), \
                "sync_memcpy_dtod copied other bytes"
        finally:
            src.close()
            dst.close()

    @pytest.mark.parametrize("offset", [1, 3, 7, 255])
    def test_unaligned_offsets(self, executor, stream, offset):
        size = 4096
        base = _upload(executor, np.zeros(size + 512, np.uint8))
        try:
            data = _pattern(size, offset)
            executor.memcpy_htod(stream, base.view(offset, size), data)
            stream.synchronize()
            got = _download(executor, base, size + 512)
            assert (got[offset:offset + size] == data).all(), "the copy landed elsewhere"
            assert not got[:offset].any() and not got[offset + size:].any(), \
                "the copy wrote outside its range"
        finally:
            base.close()


# ---- tier 5: streams, events, timers, callbacks ----------------------------------------------

class TestStreams:
    def test_work_on_a_stream_runs_in_order(self, executor, stream):
        memory = executor.allocate(4096)
        out = np.zeros(4096, np.uint8)
        try:
            for value in range(1, 33):
                executor.memcpy_htod(stream, memory, np.full(4096, value, np.uint8))
            executor.memcpy_dtoh(stream, out, memory, 4096)
            stream.synchronize()
            assert (out == 32).all(), "a later copy was overtaken by an earlier one"
        finally:
            memory.close()

    def test_events_order_work_across_streams(self, executor):
        """A slow producer (a host callback that sleeps, then a large copy) on one stream, an
        event, and a consumer on another stream that waits for it."""
        size = 16 * MiB
        data = _pattern(size, 5)
        out = np.zeros(size, np.uint8)
        with executor.create_stream() as producer, executor.create_stream() as consumer, \
                executor.create_event() as ready:
            memory = executor.allocate(size)
            try:
                producer.host_callback(lambda: time.sleep(0.05))
                executor.memcpy_htod(producer, memory, data)
                ready.record(producer)
                ready.wait(consumer)
                executor.memcpy_dtoh(consumer, out, memory, size)
                consumer.synchronize()
                assert (out == data).all(), "the consumer stream did not wait for the event"
            finally:
                producer.synchronize()
                memory.close()

    def test_stream_dependency(self, executor):
        size = 4 * MiB
        data = _pattern(size, 6)
        out = np.zeros(size, np.uint8)
        with executor.create_stream() as first, executor.create_stream() as second:
            memory = executor.allocate(size)
            try:
                first.host_callback(lambda: time.sleep(0.05))
                executor.memcpy_htod(first, memory, data)
                second.wait_for(first)
                executor.memcpy_dtoh(second, out, memory, size)
                second.synchronize()
                assert (out == data).all(), "create_stream_dependency did not order the streams"
            finally:
                first.synchronize()
                memory.close()

    def test_event_completes(self, executor, stream):
        with executor.create_event() as event:
            event.record(stream)
            event.synchronize()
            assert event.query(), "a recorded event was not complete after synchronize"

    def test_timer_measures_device_time(self, executor, stream):
        if not executor.supports_timers:
            pytest.skip("the platform has no timers (they are optional)")
        with executor.create_timer() as timer:
            timer.start(stream)
            stream.host_callback(lambda: time.sleep(0.02))
            timer.stop(stream)
            stream.synchronize()
            ns = timer.nanoseconds()
            assert 10e6 <= ns < 60e9, f"the timer measured {ns} ns around a 20 ms sleep"

    def test_host_callbacks_run_in_stream_order(self, executor, stream):
        seen: List[int] = []
        done = threading.Event()
        for i in range(8):
            stream.host_callback(lambda i=i: seen.append(i))
        stream.host_callback(done.set)
        stream.synchronize()
        assert done.wait(10), "a host callback never ran"
        assert seen == list(range(8)), f"host callbacks ran as {seen}"

    def test_synchronize_all_activity(self, executor, stream):
        size = MiB
        out = np.zeros(size, np.uint8)
        data = _pattern(size, 7)
        memory = executor.allocate(size)
        try:
            executor.memcpy_htod(stream, memory, data)
            executor.memcpy_dtoh(stream, out, memory, size)
            executor.synchronize_all_activity()
            assert (out == data).all(), "synchronize_all_activity returned before the work"
        finally:
            memory.close()


# ---- tier 5b: streams, events and copies across devices of the platform ------------------
#
# TensorFlow's copy between two devices of one plugin makes the source device's
# device-to-device stream wait for the destination device's compute stream
# (create_stream_dependency with streams of different devices), then copies on that stream
# into the other device's memory (memcpy_dtod). The host API refuses to mix devices, so these
# checks call the plugin's functions directly. Each slow producer is a host callback that
# sleeps, followed by the write it delays; the consumer's host callback reads a flag the
# producer sets only after that write.

@pytest.fixture(scope="session")
def second_executor(platform):
    if platform.device_count < 2:
        pytest.skip("the platform has one device: nothing crosses devices")
    return platform.executor(1)


def _slow_producer(executor, stream, memory, data, done: threading.Event) -> None:
    """Enqueues on ``stream``: a 100 ms sleep, a write of ``data`` into ``memory``, then a
    callback that sets ``done``."""
    stream.host_callback(lambda: time.sleep(0.1))
    executor.memcpy_htod(stream, memory, data)
    stream.host_callback(done.set)


class TestCrossDevice:
    def test_stream_dependency_across_devices(self, executor, second_executor):
        size = 4 * MiB
        done = threading.Event()
        seen: List[bool] = []
        data = _pattern(size, 8)
        memory = executor.allocate(size)
        try:
            with executor.create_stream() as first, second_executor.create_stream() as second:
                _slow_producer(executor, first, memory, data, done)
                second_executor._call("create_stream_dependency", second._handle,
                                      first._handle)
                second.host_callback(lambda: seen.append(done.is_set()))
                second.synchronize()
                first.synchronize()
            assert seen == [True], \
                "device 1's stream ran on before device 0's stream it depends on had finished"
        finally:
            memory.close()

    def test_event_wait_across_devices(self, executor, second_executor):
        size = 4 * MiB
        done = threading.Event()
        seen: List[bool] = []
        data = _pattern(size, 9)
        memory = executor.allocate(size)
        try:
            with executor.create_stream() as first, second_executor.create_stream() as second, \
                    executor.create_event() as ready:
                _slow_producer(executor, first, memory, data, done)
                ready.record(first)
                second_executor._call("wait_for_event", second._handle, ready._handle)
                second.host_callback(lambda: seen.append(done.is_set()))
                second.synchronize()
                first.synchronize()
            assert seen == [True], \
                "device 1's stream did not wait for an event of device 0"
        finally:
            memory.close()

    def test_event_record_across_devices(self, executor, second_executor):
        """An event of device 0 recorded on device 1's stream completes when that stream
        reaches it, and both devices report its state."""
        from pluggable.devices.event import EventStatus

        with second_executor.create_stream() as second, executor.create_event() as event:
            second.host_callback(lambda: time.sleep(0.2))
            second_executor._call("record_event", second._handle, event._handle)
            pending = EventStatus(second_executor.event_state(event._handle))
            second.synchronize()
            after = (EventStatus(executor.event_state(event._handle)),
                     EventStatus(second_executor.event_state(event._handle)))
        assert pending == EventStatus.PENDING, \
            f"the event was {pending.name} while the stream it is recorded on still slept"
        assert after == (EventStatus.COMPLETE, EventStatus.COMPLETE), \
            f"after the stream finished the event was {after[0].name} / {after[1].name}"

    @pytest.mark.parametrize("on", ["source_stream", "destination_stream"])
    def test_dtod_across_devices(self, platform, executor, second_executor, on):
        from pluggable.abi.plugin_ext import PLUGGABLE_PLATFORM_PEER_DTOD

        if not platform.has_capability(PLUGGABLE_PLATFORM_PEER_DTOD):
            pytest.skip("the platform offers no copies between its devices")
        size = MiB + 3
        data = _pattern(size, 10)
        src = _upload(executor, data)
        dst = second_executor.allocate(size)
        owner = executor if on == "source_stream" else second_executor
        try:
            with owner.create_stream() as stream:
                owner._call("memcpy_dtod", stream._handle, dst._ref, src._ref, size)
                stream.synchronize()
            assert (_download(second_executor, dst, size) == data).all(), \
                "memcpy_dtod between devices copied other bytes"
        finally:
            src.close()
            dst.close()


# ---- tier 6: kernels -----------------------------------------------------------------------

# TensorFlow ops pluggable's library does not define, checked against the library op that
# computes the same (TensorFlow's older names: Add and Div, which all-reduces run).
REFERENCE_OPS = {"Add": "AddV2", "Div": "RealDiv"}

# The attribute whose types a kernel check runs over: the first one a registration
# constrains (the data's type: a random op's output type before its shape's type "T"; an
# index or output type only when nothing else is).
TYPE_ATTRS = ("dtype", "T", "SrcT", "Tparams", "Tidx")


def pytest_generate_tests(metafunc):
    if "kernel_case" not in metafunc.fixturenames and \
            "gradient_case" not in metafunc.fixturenames:
        return
    path = _plugin_path(metafunc.config) if metafunc.config.getoption("pluggable_plugin") \
        else None
    platform = _load(path)[0] if path else None
    if "gradient_case" in metafunc.fixturenames:
        _gradient_cases(metafunc, platform)
        return
    cases, ids = [], []
    if platform is not None:
        from pluggable.eager import OPS

        for info in pluggable.config.list_kernels(device_type=platform.device_type):
            if info.source != platform.path:
                continue
            type_attr = next((a for a in TYPE_ATTRS if a in info.type_constraints), None)
            # A kernel without a type constraint takes any type: float32 stands for them.
            dtypes = info.type_constraints.get(type_attr, ()) if type_attr else ("float32",)
            for dtype in dtypes:
                cases.append((info.op, dtype, dict(info.type_constraints),
                              REFERENCE_OPS.get(info.op, info.op) in OPS))
                ids.append(f"{info.op}-{dtype}")
    if not cases:
        cases, ids = [None], ["no-kernels"]
    metafunc.parametrize("kernel_case", cases, ids=ids)


def _tolerance(dtype: dt.DType, op: str) -> Dict[str, float]:
    if dtype.name in ("float16", "bfloat16"):
        return {"rtol": 2e-2, "atol": 2e-2}
    if dtype.name in ("float32", "complex64"):
        loose = op in REDUCTIONS or op in ("MatMul", "BatchMatMulV2", "Softmax", "LogSoftmax")
        return {"rtol": 1e-4 if loose else 1e-5, "atol": 1e-5 if loose else 1e-6}
    return {"rtol": 1e-10, "atol": 0}


def _may_match_one_node(a, b) -> bool:
    """Whether some node matches both registrations: one label, and for every attribute both
    constrain, a type both allow (an attribute one of them leaves free matches anything)."""
    if a.label != b.label:
        return False
    return all(a.constraints[name] & b.constraints[name]
               for name in a.constraints.keys() & b.constraints.keys())


class TestRegistrations:
    def test_no_two_kernels_match_one_node_at_one_priority(self, platform):
        """TensorFlow refuses, at lookup, every node two kernels of one op and device type
        match at the same priority ("Multiple OpKernel registrations match NodeDef at the
        same priority"): the plugin would fail those calls in TensorFlow."""
        from pluggable.base.dtypes import type_names
        from pluggable.kernels.registry import registered_kernels

        groups: Dict[Any, list] = {}
        for r in registered_kernels(plugin=platform.path):
            groups.setdefault((r.op, r.device_type, r.priority), []).append(r)
        clashes = []
        for (op, device_type, priority), regs in sorted(groups.items()):
            for i, a in enumerate(regs):
                for b in regs[i + 1:]:
                    if _may_match_one_node(a, b):
                        shared = "; ".join(
                            f"{n} in {{{', '.join(type_names(a.constraints[n] & b.constraints[n]))}}}"
                            for n in sorted(a.constraints.keys() & b.constraints.keys()))
                        clashes.append(f"{op} on {device_type} at priority {priority}: "
                                       f"{a.kernel_name!r} and {b.kernel_name!r} "
                                       f"({shared or 'any type'})")
        assert not clashes, (
            f"Multiple OpKernel registrations match NodeDef at the same priority, which "
            f"TensorFlow refuses for every such call: {'; '.join(clashes)}. Give them "
            f"different priorities, type constraints or labels, or register one")

    def test_shape_ops_keep_their_int32_outputs_in_host_memory(self, platform):
        """TensorFlow keeps the int32 results of the shape ops on the host: its own kernels
        for them, on every device, declare HostMemory("output") (for every T and out_type),
        and its eager runtime refuses a Shape whose int32 output a device kernel puts in
        device memory ("has an int32 output with unexpected full type information")."""
        from pluggable.kernels.registry import registered_kernels

        wrong = []
        for r in registered_kernels(plugin=platform.path):
            if r.op not in SHAPE_OUTPUT_OPS or r.device_type == "CPU" \
                    or "output" in r.host_memory:
                continue
            allowed = r.constraints.get(SHAPE_OUTPUT_OPS[r.op])
            if SHAPE_OUTPUT_OPS[r.op] is None or allowed is None or _INT32 in allowed:
                wrong.append(f"{r.kernel_name!r} ({r.op} on {r.device_type})")
        assert not wrong, (
            f"kernels of shape ops with an int32 output in device memory: {', '.join(wrong)}. "
            f"TensorFlow keeps int32 shape tensors in host memory: every call of such a Shape "
            f"kernel fails there with InternalError 'node=Shape (op=Shape) has an int32 output "
            f"with unexpected full type information', and TensorFlow's own Shape, ShapeN, Size "
            f"and Rank kernels all keep the output on the host. Register each with "
            f"TF_KernelBuilder_HostMemory(builder, \"output\") and write the output with the "
            f"CPU during compute (TF_AllocateOutput then gives host memory), without stream "
            f"work")


# The shape ops: TensorFlow's kernels for them keep "output" in host memory on every device;
# the type attribute of the output (None: always int32).
SHAPE_OUTPUT_OPS = {"Shape": "out_type", "ShapeN": "out_type", "Size": "out_type",
                    "Rank": None}
_INT32 = int(dt.int32.tf_code)


# Ops that destroy their variable inputs: what is compared after them is that the variable
# is gone (False), not its value.
DESTROYS = {"DestroyResourceOp"}

# Ops whose outputs are resource handles: a handle is an address on its own device, so only
# its shape and type are compared.
HANDLE_OUTPUTS = {"VarHandleOp"}

# Random ops: the numbers a kernel draws are its own, so each output is checked by shape,
# type and the interval every value lies in, (low, high, whether high is included); None for
# RandomUniformInt's [minval, maxval) inputs. A stateless op's kernel must also give the same
# numbers for the same seed input (the reference's are NumPy's, not TensorFlow's stream, so
# the values themselves are not compared with it).
RANDOM_RANGES = {"RandomUniform": (0.0, 1.0, False), "StatelessRandomUniform": (0.0, 1.0, False),
                 "RandomStandardNormal": (-np.inf, np.inf, False),
                 "StatelessRandomNormal": (-np.inf, np.inf, False),
                 "TruncatedNormal": (-2.0, 2.0, True), "StatelessTruncatedNormal": (-2.0, 2.0, True),
                 "RandomUniformInt": None}
STATELESS_RANDOM = {op for op in RANDOM_RANGES if op.startswith("Stateless")}


def _check_random(op: str, inputs, got: np.ndarray, where: str) -> None:
    """Every value of a random op's output ``got`` lies in the op's interval."""
    values = got.astype(np.float64)
    if RANDOM_RANGES[op] is None:
        low, high, closed = float(inputs[1]), float(inputs[2]), False
    else:
        low, high, closed = RANDOM_RANGES[op]
    inside = (values >= low) & ((values <= high) if closed else (values < high))
    assert np.isfinite(values).all() and inside.all(), (
        f"{where}: values {values[~(inside & np.isfinite(values))][:5].tolist()} lie outside "
        f"{'[' if low > -np.inf else '('}{low}, {high}{']' if closed else ')'}")


def _outputs(op: str, inputs, attrs, device: str) -> List[np.ndarray]:
    """The op's outputs on ``device``, then the values of its variable inputs after it ran
    (for an op that destroys them, whether each still exists)."""
    from pluggable.eager import dispatch

    with pluggable.device(device):
        variables = [pluggable.Variable(x.value) if isinstance(x, Variable) else None
                     for x in inputs]
        given = [v.handle if v is not None else x for v, x in zip(variables, inputs)]
        outputs = [t.numpy() for t in dispatch.execute(op, given, attrs)]
    if op in DESTROYS:
        return outputs + [np.array(_exists(v)) for v in variables if v is not None]
    return outputs + [v.numpy() for v in variables if v is not None]


def _exists(variable) -> bool:
    try:
        variable.numpy()
    except NotFoundError:
        return False
    return True


def _kernel_outputs(platform, op: str, inputs, attrs, constraints, expected):
    """Runs the plugin's kernel of ``op`` on device 0 with one foreign call: for an op the
    library does not define, whose outputs have the types and shapes of ``expected``."""
    from pluggable.devices.memory import DeviceMemory
    from pluggable.kernels.registry import KernelInput, registered_kernels

    executor = platform.executor(0)
    dtypes = {a: dt.as_dtype(v[0]) for a, v in constraints.items() if len(v) == 1}
    registration = next(r for r in registered_kernels(op, platform.device_type,
                                                      plugin=platform.path)
                        if r.matches(dtypes))
    arrays = [np.ascontiguousarray(x) for x in inputs]
    memories = [_upload(executor, a) for a in arrays]
    try:
        with registration.instantiate(op, {**dtypes, **attrs}) as kernel, \
                executor.create_stream() as stream:
            outputs = kernel.run(executor, stream, [
                KernelInput(m.address, a.nbytes, int(dt.as_dtype(a.dtype).tf_code), a.shape)
                for m, a in zip(memories, arrays)],
                [int(dt.as_dtype(e.dtype).tf_code) for e in expected])
            stream.synchronize()
            got = []
            for out, e in zip(outputs, expected):
                data = np.zeros(out.shape, e.dtype)
                if out.nbytes:
                    executor.sync_memcpy_dtoh(data, DeviceMemory.unchecked(
                        executor, out.address, out.nbytes))
                if out.owned:
                    executor.allocator.deallocate(out.address)
                got.append(data)
            return got
    finally:
        for m in memories:
            m.close()


class TestKernels:
    SEEDS = range(4)

    def test_kernel_matches_reference(self, platform, kernel_case):
        if kernel_case is None:
            pytest.skip("the plugin registers no kernels")
        op, dtype_name, constraints, defined = kernel_case
        if not defined:
            pytest.skip(f"pluggable's library has no op {op!r} to compare against")

        dtype = dt.op_dtype(dtype_name)
        if not dt.has_tensors(dtype):
            pytest.skip(f"pluggable has no {dtype_name} tensors yet to compare with")
        device = f"/device:{platform.device_type}:0"
        previous = pluggable.config.get_soft_device_placement()
        pluggable.config.set_soft_device_placement(False)
        try:
            for seed in self.SEEDS:
                generated = _generate(op, dtype, seed, constraints)
                if generated is None:
                    pytest.skip(f"no input generator for {op} (its inputs need more than a "
                                f"shape and a dtype)")
                inputs, attrs = generated
                expected = _outputs(REFERENCE_OPS.get(op, op), inputs, attrs, "/cpu:0")
                if op in REFERENCE_OPS:  # no op of the library runs it: its kernel, directly
                    got = _kernel_outputs(platform, op, inputs, attrs, constraints, expected)
                else:
                    got = _outputs(op, inputs, attrs, device)
                assert len(got) == len(expected), f"{op}: {len(got)} outputs, expected " \
                                                  f"{len(expected)}"
                for i, (e, g) in enumerate(zip(expected, got)):
                    where = f"{op} ({dtype_name}), output {i}, seed {seed}"
                    assert g.shape == e.shape, f"{where}: shape {g.shape}, expected {e.shape}"
                    assert g.dtype == e.dtype, f"{where}: dtype {g.dtype}, expected {e.dtype}"
                    if op in HANDLE_OUTPUTS:
                        continue
                    if op in RANDOM_RANGES:
                        _check_random(op, inputs, g, where)
                        if op in STATELESS_RANDOM:
                            again = _outputs(op, inputs, attrs, device)[i]
                            np.testing.assert_array_equal(
                                again, g, err_msg=f"{where}: two calls with one seed input "
                                                  f"gave different numbers")
                        continue
                    if e.dtype.kind in "fc" or e.dtype.name == "bfloat16":
                        np.testing.assert_allclose(g.astype(np.complex128 if e.dtype.kind == "c"
                                                            else np.float64),
                                                   e.astype(np.complex128 if e.dtype.kind == "c"
                                                            else np.float64),
                                                   err_msg=where, **_tolerance(dtype, op))
                    else:
                        np.testing.assert_array_equal(g, e, err_msg=where)
        finally:
            pluggable.config.set_soft_device_placement(previous)


# ---- tier 6b: gradient kernels --------------------------------------------------------------
# Each gradient kernel against a central finite difference of its forward op: the kernel's
# output must be the gradient of sum(weights * forward(inputs)) with respect to one input.
# The forward op runs on the plugin's device when it has the kernel, else on the CPU, in
# float64 when it can (the difference is then exact to the tolerance), else in the gradient
# kernel's dtype with a wider step.

def _distinct(shape, seed: int) -> np.ndarray:
    """Values at least 0.1 apart and from zero (no tie in a max, no kink of relu)."""
    n = int(np.prod(shape))
    values = (_rng(seed).permutation(n) - n / 2 + 0.5) * 0.37
    return values.reshape(shape)


def _labels(shape, seed: int) -> np.ndarray:
    rows = _rng(seed).uniform(0.1, 1.0, shape)
    return rows / rows.sum(axis=-1, keepdims=True)


_CONV = {"strides": [1, 1, 1, 1], "padding": "SAME"}
_POOL = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}

# gradient kernel -> (forward op, builder(seed) -> (forward inputs, forward attrs, index of
# the input differentiated, weights over the forward's output used, gradient kernel inputs
# from (forward inputs, weights, forward outputs), gradient kernel attrs, which forward
# output is weighted))
GRADIENT_KERNELS = {
    "ReluGrad": ("Relu", lambda seed: (
        [_distinct((3, 4), seed)], {}, 0, _rng(seed).uniform(0.5, 1.5, (3, 4)),
        lambda x, w, out: [w, x[0]], {}, 0)),
    "BiasAddGrad": ("BiasAdd", lambda seed: (
        [_values(dt.float64, (2, 3, 4), seed), _values(dt.float64, (4,), seed + 1)], {}, 1,
        _rng(seed).uniform(0.5, 1.5, (2, 3, 4)), lambda x, w, out: [w], {}, 0)),
    "Conv2DBackpropInput": ("Conv2D", lambda seed: (
        [_values(dt.float64, (1, 4, 4, 2), seed), _values(dt.float64, (2, 2, 2, 3), seed + 1)],
        _CONV, 0, _rng(seed).uniform(0.5, 1.5, (1, 4, 4, 3)),
        lambda x, w, out: [np.array([1, 4, 4, 2], np.int32), x[1], w], _CONV, 0)),
    "Conv2DBackpropFilter": ("Conv2D", lambda seed: (
        [_values(dt.float64, (1, 4, 4, 2), seed), _values(dt.float64, (2, 2, 2, 3), seed + 1)],
        _CONV, 1, _rng(seed).uniform(0.5, 1.5, (1, 4, 4, 3)),
        lambda x, w, out: [x[0], np.array([2, 2, 2, 3], np.int32), w], _CONV, 0)),
    "MaxPoolGrad": ("MaxPool", lambda seed: (
        [_distinct((1, 4, 4, 2), seed)], _POOL, 0, _rng(seed).uniform(0.5, 1.5, (1, 2, 2, 2)),
        lambda x, w, out: [x[0], out[0], w], _POOL, 0)),
    # The backprop output of the cross-entropy ops is the gradient of the summed loss.
    "SoftmaxCrossEntropyWithLogits": ("SoftmaxCrossEntropyWithLogits", lambda seed: (
        [_values(dt.float64, (3, 5), seed), _labels((3, 5), seed + 1)], {}, 0, np.ones(3),
        None, {}, 0)),
    "SparseSoftmaxCrossEntropyWithLogits": ("SparseSoftmaxCrossEntropyWithLogits", lambda seed: (
        [_values(dt.float64, (3, 5), seed), np.array([4, 0, 2], np.int64)], {}, 0, np.ones(3),
        None, {}, 0)),
}


def _gradient_tolerance(dtype: dt.DType) -> Dict[str, float]:
    if dtype.name in ("float16", "bfloat16"):
        return {"rtol": 5e-2, "atol": 5e-2}
    if dtype.name == "float32":
        return {"rtol": 1e-3, "atol": 1e-4}
    return {"rtol": 1e-6, "atol": 1e-8}


def _kernel_types(platform, op: str) -> set:
    return {name for info in pluggable.config.list_kernels(op, device_type=platform.device_type)
            if info.source == platform.path for name in info.type_constraints.get("T", ())}


def _finite_difference(run, inputs: List[np.ndarray], index: int, weights: np.ndarray,
                       output: int, dtype, step: float) -> np.ndarray:
    """d sum(weights * run(inputs)[output]) / d inputs[index], by central differences."""
    def value(arrays):
        outs = run([a.astype(dtype.numpy_dtype) if a.dtype.kind == "f" else a
                    for a in arrays])
        return float((outs[output].astype(np.float64) * weights).sum())

    grad = np.zeros(inputs[index].shape)
    for position in np.ndindex(inputs[index].shape):
        up = [a.copy() for a in inputs]
        down = [a.copy() for a in inputs]
        up[index][position] += step
        down[index][position] -= step
        grad[position] = (value(up) - value(down)) / (2 * step)
    return grad


def _gradient_cases(metafunc, platform) -> None:
    cases, ids = [], []
    if platform is not None:
        for kernel in GRADIENT_KERNELS:
            for dtype in sorted(_kernel_types(platform, kernel)):
                if dt.as_dtype(dtype).is_floating:
                    cases.append((kernel, dtype))
                    ids.append(f"{kernel}-{dtype}")
    if not cases:
        cases, ids = [None], ["no-gradient-kernels"]
    metafunc.parametrize("gradient_case", cases, ids=ids)


class TestGradientKernels:
    SEEDS = range(2)

    def test_gradient_kernel_matches_finite_differences(self, platform, gradient_case):
        if gradient_case is None:
            pytest.skip("the plugin registers none of the gradient kernels pluggable checks "
                        f"({', '.join(GRADIENT_KERNELS)})")
        from pluggable.eager import dispatch

        kernel, dtype_name = gradient_case
        dtype = dt.as_dtype(dtype_name)
        forward_op, build = GRADIENT_KERNELS[kernel]
        device = f"/device:{platform.device_type}:0"
        forward_types = _kernel_types(platform, forward_op)
        # The forward op in float64 where it can run so, else in the kernel's dtype.
        fd_dtype = dt.float64 if "float64" in forward_types or dtype_name not in forward_types \
            else dtype
        fd_device = device if fd_dtype.name in forward_types else "/cpu:0"
        step = 1e-6 if fd_dtype == dt.float64 else (1e-2 if dtype.itemsize >= 4 else 1e-1)
        previous = pluggable.config.get_soft_device_placement()
        pluggable.config.set_soft_device_placement(False)
        try:
            for seed in self.SEEDS:
                inputs, attrs, index, weights, kernel_inputs, kernel_attrs, output = build(seed)

                def run(arrays, where=fd_device):
                    with pluggable.device(where):
                        return [t.numpy() for t in dispatch.execute(forward_op, arrays, attrs)]

                expected = _finite_difference(run, inputs, index, weights, output, fd_dtype,
                                              step)
                cast = [a.astype(dtype.numpy_dtype) if a.dtype.kind == "f" else a
                        for a in inputs]
                with pluggable.device(device):
                    if kernel_inputs is None:  # the forward op's own backprop output
                        got = dispatch.execute(kernel, cast, attrs)[1].numpy()
                    else:
                        outs = [t.numpy() for t in dispatch.execute(forward_op, cast, attrs)]
                        w = weights.astype(dtype.numpy_dtype)
                        got = dispatch.execute(kernel, kernel_inputs(cast, w, outs),
                                               kernel_attrs)[0].numpy()
                where = (f"{kernel} ({dtype_name}), seed {seed}: the gradient of "
                         f"{forward_op} with respect to its input {index}, by finite "
                         f"differences of {forward_op} on {fd_device} in {fd_dtype.name}")
                assert got.shape == expected.shape, \
                    f"{where}: shape {got.shape}, expected {expected.shape}"
                np.testing.assert_allclose(got.astype(np.float64), expected, err_msg=where,
                                           **_gradient_tolerance(dtype))
        finally:
            pluggable.config.set_soft_device_placement(previous)


# ---- tier 7: the profiler ------------------------------------------------------------------

def _profiled(path: str):
    """The plugin's profiler device type, or a skip when the library registers none."""
    record = next((r for r in pluggable.config.list_plugins() if r.path == path), None)
    if record is None or not record.provides_profiler:
        pytest.skip("the plugin exports no TF_InitProfiler (a profiler is optional)")
    if not record.profiler_type:
        pytest.fail(f"the plugin's profiler was refused: {record.profiler_reason}")
    return record.profiler_type


def _device_work(platform, executor) -> None:
    """Copies, and one run of each kernel of an op of the library, on device 0."""
    data = _pattern(4096, 9)
    memory = _upload(executor, data)
    try:
        _download(executor, memory, 4096)
    finally:
        memory.close()
    previous = pluggable.config.get_soft_device_placement()
    pluggable.config.set_soft_device_placement(False)
    try:
        for info in pluggable.config.list_kernels(device_type=platform.device_type):
            constraints = dict(info.type_constraints)
            names = next((constraints[a] for a in TYPE_ATTRS if a in constraints), ("float32",))
            dtype = dt.op_dtype(names[0])
            if not dt.has_tensors(dtype) or info.op in REFERENCE_OPS:
                continue  # no tensors of the type (qint8 ...), or no op of the library
            generated = _generate(info.op, dtype, 0, constraints)
            if info.source == platform.path and generated is not None:
                _outputs(info.op, *generated, f"/device:{platform.device_type}:0")
    finally:
        pluggable.config.set_soft_device_placement(previous)


class ProfileViewWarning(UserWarning):
    """The plugin's profile would not (fully) show in TensorBoard's profile tools (xprof)."""


def _device_planes(result, device_type: str) -> list:
    """The planes of ``result`` that record a device of ``device_type``."""
    return [plane for plane, device in result.devices.items()
            if device.startswith(f"/device:{device_type}:")]


class TestProfiler:
    def test_planes_are_what_tensorboard_shows(self, plugin_path, platform, executor,
                                               tmp_path):
        """A warning, not a failure: TensorFlow accepts any plane; xprof draws only some."""
        from pluggable import profiler
        from pluggable.profiler.result import xprof_problems

        device_type = _profiled(plugin_path)
        with profiler.Profile(str(tmp_path)) as session:
            _device_work(platform, executor)
        planes = _device_planes(session.result, device_type)
        for problem in xprof_problems(session.result, planes):
            warnings.warn(f"TensorBoard's profile tools (xprof): {problem}; see "
                          f"include/ABI.md, \"Profiles that xprof shows\"", ProfileViewWarning)

    def test_a_session_with_work_gives_the_device_plane(self, plugin_path, platform, executor,
                                                        tmp_path):
        from pluggable import profiler

        device_type = _profiled(plugin_path)
        with profiler.Profile(str(tmp_path)) as session:
            _device_work(platform, executor)
        result = session.result
        assert not result.warnings, f"collecting the profile warned: {result.warnings}"
        planes = _device_planes(result, device_type)
        assert planes, (f"no plane of a /device:{device_type}:<n> device in {result.planes} "
                        f"(a plane is the device its name says, or the one its stats "
                        f"device_type_string and device_ordinal say)")
        events = [e for p in planes for e in result.events(p)]
        assert events, f"the plugin's planes {planes} have no events after device work"
        assert all(e.duration_ns >= 0 for e in events)

    def test_sessions_restart_and_an_idle_one_is_empty(self, plugin_path, platform, executor,
                                                        tmp_path):
        from pluggable import profiler

        device_type = _profiled(plugin_path)
        for round_ in range(3):
            with profiler.Profile(str(tmp_path / str(round_))) as session:
                pass
            device_events = [e for p in _device_planes(session.result, device_type)
                             for e in session.result.events(p)]
            assert not device_events, f"an idle session has device events: {device_events[:3]}"
