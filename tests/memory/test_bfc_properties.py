"""Random allocation and free traces through the BFC allocator (Hypothesis): after every step
the invariants hold, live allocations never overlap, the statistics equal the sum of the live
allocations, and running out of memory is only ever justified."""
from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pluggable.devices.allocator import BFCAllocator
from pluggable.errors import ResourceExhaustedError

KIB = 1 << 10
MIB = 1 << 20

sizes = st.one_of(
    st.integers(1, 4 * KIB),              # small tensors and temporaries
    st.integers(4 * KIB, 256 * KIB),
    st.integers(256 * KIB, 3 * MIB),      # large enough to exhaust the small limits
    st.sampled_from([256, 512, MIB, 2 * MIB]),
)
# (what, size, which): what 0-10 allocates `size` bytes, 11-18 frees the live allocation
# number `which` (modulo their count), 19 gives the free regions back.
steps = st.lists(st.tuples(st.integers(0, 19), sizes, st.integers(0, 1 << 16)),
                 min_size=5, max_size=100)


def round_up(size):
    return (size + 255) // 256 * 256


def assert_consistent(a: BFCAllocator, live: dict) -> None:
    a.check()
    starts = sorted(live)
    for start, following in zip(starts, starts[1:]):
        assert start + round_up(live[start]) <= following, "two live allocations overlap"
    stats = a.stats()
    assert stats["bytes_in_use"] == sum(round_up(size) for size in live.values())
    assert stats["bytes_reserved"] <= stats["bytes_limit"]
    in_use = {c.address: c.requested for c in a.chunks() if c.in_use}
    assert in_use == live


@settings(max_examples=500, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(trace=steps, growth=st.booleans(),
       limit=st.sampled_from([MIB, 3 * MIB + 768, 8 * MIB, 30 * MIB]))
def test_random_traces_keep_every_invariant(xpu, trace, growth, limit):
    with BFCAllocator(xpu, memory_limit=limit, allow_growth=growth) as a:
        live = {}
        for what, arg, which in trace:
            if what <= 10:
                before = a.stats()
                fits = [(c.size, c.address) for c in a.chunks()
                        if not c.in_use and c.size >= round_up(arg)]
                try:
                    address = a.allocate(arg)
                except ResourceExhaustedError:
                    event("out of memory")
                    # Justified only if no free chunk fits and no region of that size fits
                    # under the limit, even after giving back the free regions.
                    after = a.stats()
                    assert round_up(arg) > after["largest_free_block_bytes"]
                    assert round_up(arg) > after["bytes_limit"] - after["bytes_reserved"]
                    assert after["bytes_in_use"] == before["bytes_in_use"]
                    assert after["num_allocs"] == before["num_allocs"]
                else:
                    assert address % 256 == 0 and address not in live
                    if fits:  # best fit: the smallest free chunk that fits, lowest address
                        assert address == min(fits)[1]
                    live[address] = arg
            elif what <= 18 and live:
                keys = sorted(live)
                address = keys[which % len(keys)]
                a.deallocate(address)
                del live[address]
            elif what == 19:
                reserved = a.stats()["bytes_reserved"]
                released = a.release_free_regions()
                assert a.stats()["bytes_reserved"] == reserved - released
            assert_consistent(a, live)
        for address in list(live):
            a.deallocate(address)
        live.clear()
        assert_consistent(a, live)
        regions = a.regions()
        event(f"{min(len(regions), 3)}+ regions" if len(regions) >= 3 else
              f"{len(regions)} region(s)")
        chunks = a.chunks()
        assert len(chunks) == len(regions)  # every region is one free chunk again
        assert all(not c.in_use for c in chunks)
        stats = a.stats()
        assert stats["bytes_in_use"] == 0
        assert stats["largest_free_block_bytes"] == max((s for _, s in regions), default=0)
        assert a.release_free_regions() == stats["bytes_reserved"]
        assert a.stats()["bytes_reserved"] == 0 and a.chunks() == []


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(1, 64 * KIB), min_size=1, max_size=40),
       order=st.randoms(use_true_random=False))
def test_freeing_in_any_order_coalesces_back_to_one_chunk(xpu, sizes, order):
    with BFCAllocator(xpu, memory_limit=4 * MIB, allow_growth=False) as a:
        addresses = [a.allocate(size) for size in sizes]
        # Address order is allocation order in one fresh region.
        assert addresses == sorted(addresses)
        expected_end = addresses[0]
        for address, size in zip(addresses, sizes):
            assert address == expected_end
            expected_end += round_up(size)
        order.shuffle(addresses)
        for address in addresses:
            a.deallocate(address)
            a.check()
        assert [(c.size, c.in_use) for c in a.chunks()] == [(4 * MIB, False)]
