"""pluggable.config's memory functions, like tf.config.experimental's. Each case runs in a
fresh interpreter: the settings apply before a device's first use."""
from __future__ import annotations

import json
import textwrap


def run_json(run_python, code: str):
    result = run_python(textwrap.dedent(code))
    return json.loads(result.stdout.splitlines()[-1])


def test_growth_starts_small_and_limit_is_respected(run_python):
    data = run_json(run_python, """
        import json, numpy as np, pluggable
        from pluggable import config
        from pluggable.errors import ResourceExhaustedError
        xpu = config.list_physical_devices("XPU")[0]
        config.set_memory_growth(xpu, True)
        config.set_memory_limit(xpu, 64 << 20)
        t = pluggable.tensor(np.ones(1 << 20, np.uint8), device="xpu:0")
        stats = pluggable.get_device("xpu:0").executor.allocator.stats()
        try:
            pluggable.empty((80 << 20,), "uint8", device="xpu:0")
            oom = None
        except ResourceExhaustedError as e:
            oom = str(e)
        try:
            config.set_memory_growth(xpu, False)
            late = None
        except RuntimeError as e:
            late = str(e)
        print(json.dumps(dict(reserved=stats["bytes_reserved"], limit=stats["bytes_limit"],
                              growth=config.get_memory_growth(xpu), oom=oom, late=late,
                              info=config.get_memory_info("XPU:0"))))
    """)
    assert data["limit"] == 64 << 20
    assert (1 << 20) <= data["reserved"] < (64 << 20)  # grown, not the whole limit
    assert data["growth"] is True
    assert data["oom"] is not None and str(80 << 20) in data["oom"]
    assert "cannot change" in data["late"] and "already in use" in data["late"]
    assert data["info"]["current"] >= 1 << 20


def test_without_growth_the_limit_is_reserved_up_front(run_python):
    data = run_json(run_python, """
        import json, pluggable
        from pluggable import config
        config.set_memory_growth("/physical_device:XPU:1", False)
        config.set_memory_limit("/physical_device:XPU:1", 32 << 20)
        pluggable.tensor([1.0], device="xpu:1")
        print(json.dumps(pluggable.get_device("xpu:1").executor.allocator.stats()))
    """)
    assert data["bytes_reserved"] == 32 << 20


def test_default_limit_is_a_fraction_of_device_memory(run_python):
    data = run_json(run_python, """
        import json, pluggable
        from pluggable import config
        print(json.dumps([config.get_memory_limit("XPU:0"), config.get_memory_growth("XPU:0")]))
    """)
    limit, growth = data
    assert limit == int((1 << 30) * 0.9) // 256 * 256
    assert growth is False


def test_memory_info_and_reset(run_python):
    data = run_json(run_python, """
        import json, gc, pluggable
        from pluggable import config
        assert config.get_memory_info("XPU:0") == {"current": 0, "peak": 0}
        a = pluggable.empty((1 << 20,), "uint8", device="xpu:0")
        b = pluggable.empty((1 << 20,), "uint8", device="xpu:0")
        del b; gc.collect()
        first = config.get_memory_info("XPU:0")
        config.reset_memory_stats("XPU:0")
        second = config.get_memory_info("XPU:0")
        print(json.dumps([first, second]))
    """)
    first, second = data
    assert first["peak"] >= 2 << 20 and first["current"] < first["peak"]
    assert second["peak"] == second["current"] == first["current"]


def test_bad_arguments(run_python):
    run_python(textwrap.dedent("""
        import pluggable
        from pluggable import config
        from pluggable.errors import InvalidArgumentError, NotFoundError
        for call, error in [(lambda: config.set_memory_limit("XPU:0", 0), InvalidArgumentError),
                            (lambda: config.set_memory_growth("CPU:0", True), InvalidArgumentError),
                            (lambda: config.get_memory_info("GPU:0"), NotFoundError)]:
            try:
                call()
            except error:
                pass
            else:
                raise SystemExit("no error")
        try:
            config.set_memory_limit("XPU:0", "lots")
        except TypeError:
            pass
        else:
            raise SystemExit("no error")
    """))
