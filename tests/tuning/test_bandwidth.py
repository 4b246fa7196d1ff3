"""The bandwidth the workers measure (`tuning.hardware.bandwidth`): which levels it measures, and
with which sizes, on this machine; and a roofline is the longer of a kernel's compute time and
its memory time. How close the figures come to an independent C loop is a comparison of speeds,
which holds on a quiet machine only: `bench/hardware_figures.py`."""

from __future__ import annotations

import pytest

from tests.tuning.fresh_process import measured_in_fresh_process
from tuning.hardware.bandwidth import LLC_GAIN, llc_slice_bytes
from tuning.hardware.host import physical_cores
from tuning.hardware.roofline import Bandwidth, roofline_seconds, share_of_roofline
from tuning.hardware.targets import resolve_target


def test_the_levels_measured_are_the_machines_own() -> None:
    """What holds however busy the machine: the shared L3 is measured in half of it (at most
    LLC_SLICE a thread and array) where that is more than a core's slice, and kept only where
    it streams LLC_GAIN times faster than memory; the cores' caches stream faster than memory
    (about 6x here, still 6x beside a CPU-bound process)."""
    threads = physical_cores()
    canonical = {**resolve_target("host").canonical, "num-cores": threads}
    run = measured_in_fresh_process(
        "tuning.hardware.bandwidth:target_bandwidth", canonical, threads
    )
    assert run["cache_gbps"] > run["memory_gbps"] > 0, run
    llc_slice = llc_slice_bytes(threads)
    if llc_slice <= run["cache_bytes"] // threads:
        assert run["llc_bytes"] is None and run["llc_gbps"] is None, run
    elif run["llc_bytes"] is not None:
        assert run["llc_bytes"] == 2 * llc_slice * threads, run
        assert run["llc_gbps"] >= LLC_GAIN * run["memory_gbps"], run


@pytest.mark.parametrize(
    ("flop", "nbytes", "expected_us"),
    [
        (2 * 128 * 768 * 768, 4 * (128 * 768 * 2 + 768 * 768), 300.0),  # dense: compute-bound
        (5 * 12 * 128 * 128, 8 * 12 * 128 * 128, 15.72864),  # softmax: in cache
        (1e6, 400e6, 20000.0),  # a 400 MB copy: in memory
        (1e6, 8e6, 160.0),  # a 4 MB max pool: past the cores' caches, in the shared one
    ],
)
def test_a_roofline_is_the_longer_of_compute_and_memory(
    flop: float, nbytes: float, expected_us: float
) -> None:
    bandwidth = Bandwidth(100.0, 20.0, cache_bytes=4 << 20, llc_gbps=50.0, llc_bytes=16 << 20)
    assert roofline_seconds(flop, nbytes, 503.316, bandwidth) * 1e6 == pytest.approx(
        expected_us, rel=1e-3
    )
    assert roofline_seconds(flop, nbytes, None, None) is None
    assert roofline_seconds(flop, None, 503.316, None) == pytest.approx(flop / 503.316e9)
    roof = expected_us * 1e-6
    assert share_of_roofline(2 * roof, roof) == pytest.approx(0.5)
    assert share_of_roofline(roof / 2, roof) == 1.0  # never above: the figures were low


def test_without_a_last_level_cache_past_the_cores_caches_is_memory() -> None:
    two_levels = Bandwidth(cache_gbps=100.0, memory_gbps=20.0, cache_bytes=4 << 20)
    assert two_levels.for_bytes(4 << 20) == 100.0
    assert two_levels.for_bytes(8e6) == 20.0
    three = Bandwidth(100.0, 20.0, cache_bytes=4 << 20, llc_gbps=50.0, llc_bytes=16 << 20)
    assert [three.for_bytes(n) for n in (4 << 20, 16 << 20, (16 << 20) + 1)] == [100, 50, 20]
