"""A worker measures its target's figures again before a job while the store holds none
measured on a quiet machine (issue 38), at most once per interval; figures measured quietly
are left alone; a roofline comes only from quiet figures."""

from __future__ import annotations

from pathlib import Path

from service.worker.figures import FiguresKeeper
from tests.conftest import host_store
from tuning.hardware.roofline import QUIET_SHARE, roofline_us
from tuning.hardware.targets import resolve_target

FLOP, NBYTES = 2e9, 1e6


def _plant(store, target_id: int, gflops: float, interference: float) -> None:  # type: ignore[no-untyped-def]
    load = {"interference": interference, "quiet_at_most": QUIET_SHARE}
    store.catalog.set_peak(target_id, gflops, **load)
    store.catalog.set_bandwidth(target_id, 100.0, 10.0, 1 << 20, **load)


def test_loaded_figures_are_measured_again_before_a_job_and_quiet_ones_are_kept(
    tmp_path: Path,
) -> None:
    engine, store, row = host_store(tmp_path)
    canonical = resolve_target("host").canonical
    # As measured by a worker whose cores others held all the time: the most load there is.
    _plant(store, row.id, 1.0, interference=1.0)
    loaded = store.catalog.get_target(row.id)
    assert roofline_us(FLOP, NBYTES, loaded) is None  # no roofline from a loaded figure

    keeper = FiguresKeeper(store, every_s=3600)
    fresh = keeper.refresh(loaded, canonical)
    # Measured again, under less load than "all of it" however busy this machine is.
    assert fresh.peak_interference is not None and fresh.peak_interference < 1.0
    assert fresh.peak_gflops is not None and fresh.peak_gflops > 1.0
    assert fresh == store.catalog.get_target(row.id)
    assert fresh.bandwidth_interference is not None and fresh.cache_gbps != 100.0
    if fresh.peak_interference > QUIET_SHARE:  # still loaded: not again within the interval
        _plant(store, row.id, 1.0, interference=1.0)
        again = store.catalog.get_target(row.id)
        assert keeper.refresh(again, canonical) == again

    quiet_store_engine, quiet_store, quiet_row = host_store(tmp_path / "quiet")
    _plant(quiet_store, quiet_row.id, 123.0, interference=0.0)
    quiet = quiet_store.catalog.get_target(quiet_row.id)
    assert roofline_us(FLOP, NBYTES, quiet) == max(FLOP / 123e9, NBYTES / 100e9) * 1e6
    assert FiguresKeeper(quiet_store, every_s=0).refresh(quiet, canonical) == quiet  # kept
    assert quiet_store.catalog.get_target(quiet_row.id) == quiet
    engine.dispose()
    quiet_store_engine.dispose()
