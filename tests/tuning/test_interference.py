"""How busy other processes kept the cores while something was measured (issue 38: a worker
started beside a client's work measured a peak 16% low and trusted it). Under processes that
spin on every core, the share is far above what counts as quiet, and the figures measured meanwhile
are not trusted; the share itself is the other processes' ticks, not this one's."""

from __future__ import annotations

import time

from tests.cpu_hogs import cpu_hogs
from tuning.hardware.figures import measure_figures
from tuning.hardware.interference import CpuTicks, Interference, others_share, read_ticks
from tuning.hardware.roofline import QUIET_SHARE, is_quiet
from tuning.hardware.targets import resolve_target


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_the_share_counts_others_ticks_not_this_process() -> None:
    before = CpuTicks(busy=1000, total=4000, own=300)
    assert others_share(before, CpuTicks(busy=1300, total=4400, own=500)) == 0.25
    assert others_share(before, CpuTicks(busy=1200, total=4400, own=500)) == 0.0  # own > busy
    assert others_share(before, before) is None  # no tick passed
    assert others_share(None, before) is None
    ticks = read_ticks()
    assert ticks is not None and 0 <= ticks.busy <= ticks.total and ticks.own > 0


def test_a_measurement_beside_busy_cores_is_not_quiet() -> None:
    with cpu_hogs(), Interference() as load:
        _spin(0.5)
    assert load.share is not None and load.share > 2 * QUIET_SHARE, load.share
    assert not is_quiet(load.share)


def test_figures_measured_beside_busy_cores_are_not_trusted() -> None:
    canonical = resolve_target("host").canonical
    with cpu_hogs():
        figures = measure_figures(canonical)
    assert figures is not None and figures.peak_gflops > 0 and figures.bandwidth.cache_gbps > 0
    assert not figures.quiet
    assert figures.peak_interference is not None and figures.peak_interference > QUIET_SHARE
