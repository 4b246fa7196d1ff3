"""How much other work shared the cores while something was measured (issue 38: a worker
started beside a client's work measured a peak 16% low and trusted it). Beside processes that
spin on every core the other work is far above what counts as quiet, and the figures measured
meanwhile are not trusted; what is counted is other processes' ticks, not this one's, and only
beyond the CPUs a measurement leaves free."""

from __future__ import annotations

import os
import time

import pytest

from schedules_db.figures import QUIET_CORES, is_quiet
from tests.cpu_hogs import cpu_hogs
from tuning.hardware.figures import measure_figures
from tuning.hardware.interference import CpuTicks, Interference, others_cores, read_ticks
from tuning.hardware.targets import resolve_target


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_other_work_is_counted_in_cores_beyond_the_free_ones() -> None:
    before = CpuTicks(busy=1000, total=4000, own=300)
    after = CpuTicks(busy=1300, total=4400, own=500)  # 100 ticks of others over 2 CPUs' 400
    assert others_cores(before, after, cpus=2, threads=2) == pytest.approx(0.5)
    assert others_cores(before, after, cpus=2, threads=1) == 0.0  # on the CPU left free
    assert others_cores(before, after, cpus=8, threads=2) == 0.0  # 2 cores' worth, 6 free
    own_more = CpuTicks(busy=1200, total=4400, own=500)
    assert others_cores(before, own_more, cpus=2, threads=2) == 0.0
    assert others_cores(before, before, cpus=2, threads=2) is None  # no tick passed
    assert others_cores(None, before, cpus=2, threads=2) is None
    ticks = read_ticks()
    assert ticks is not None and 0 <= ticks.busy <= ticks.total and ticks.own > 0


def test_a_measurement_beside_busy_cores_is_not_quiet() -> None:
    threads = len(os.sched_getaffinity(0))
    with cpu_hogs(), Interference(threads) as load:
        _spin(0.5)
    assert load.cores is not None and load.cores > 2 * QUIET_CORES, load.cores
    assert not is_quiet(load.cores)


def test_figures_measured_beside_busy_cores_are_not_trusted() -> None:
    canonical = resolve_target("host").canonical
    with cpu_hogs():
        figures = measure_figures(canonical)
    assert figures is not None and figures.peak_gflops > 0 and figures.bandwidth.cache_gbps > 0
    assert not is_quiet(figures.peak_interference), figures
    assert not is_quiet(figures.bandwidth_interference), figures
    if figures.bf16_unit is not None:  # a host with AVX512-BF16 or AMX
        assert figures.bf16_peak_gflops and not is_quiet(figures.bf16_interference), figures
