"""A worker measures its target's figures again before a job while the store holds none
measured on a quiet machine (issue 38), at most once per interval; figures measured quietly
are left alone; a roofline comes only from quiet figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tvm
from sqlalchemy import update

from schedules_db.tables import TargetRow
from service.worker.figures import FiguresKeeper
from tests.conftest import host_store
from tuning.hardware.bf16 import bf16_unit
from tuning.hardware.roofline import roofline_us
from tuning.hardware.targets import resolve_target

FLOP, NBYTES = 2e9, 1e6


def _plant(engine: Any, target_id: int, gflops: float, interference: float) -> None:
    """Figures as a worker would have measured them under ``interference``."""
    with engine.begin() as conn:
        conn.execute(
            update(TargetRow).where(TargetRow.id == target_id).values(
                peak_gflops=gflops, peak_interference=interference, cache_gbps=100.0,
                memory_gbps=10.0, cache_bytes=1 << 20, bandwidth_interference=interference,
                bf16_unit="avx512_bf16", bf16_peak_gflops=gflops, bf16_interference=interference,
            )
        )  # fmt: skip


def test_loaded_figures_are_measured_again_before_a_job_and_quiet_ones_are_kept(
    tmp_path: Path,
) -> None:
    engine, store, row = host_store(tmp_path)
    canonical = resolve_target("host").canonical
    unit = bf16_unit(tvm.target.Target(canonical))
    # As measured under more load than any machine here can see.
    _plant(engine, row.id, 1.0, interference=1e9)
    loaded = store.catalog.get_target(row.id)
    assert not loaded.peak_trusted and roofline_us(FLOP, NBYTES, loaded) is None

    keeper = FiguresKeeper(store, every_s=3600)
    fresh = keeper.refresh(loaded, canonical)
    # Measured again, under less load than that however busy this machine is.
    assert fresh.peak_interference is not None and fresh.peak_interference < 1e9
    assert fresh.peak_gflops is not None and fresh.peak_gflops > 1.0
    assert fresh == store.catalog.get_target(row.id)
    assert fresh.bandwidth_interference is not None and fresh.cache_gbps != 100.0
    if unit is not None:  # this host's bf16 peak, measured again with the others
        assert fresh.bf16_unit == unit and fresh.bf16_peak_gflops != 1.0
    # Not again within the interval, loaded or not.
    _plant(engine, row.id, 1.0, interference=1e9)
    again = store.catalog.get_target(row.id)
    assert keeper.refresh(again, canonical) == again == store.catalog.get_target(row.id)

    _plant(engine, row.id, 123.0, interference=0.0)
    quiet = store.catalog.get_target(row.id)
    assert quiet.peak_trusted and quiet.bandwidth_trusted and quiet.bf16_peak_trusted
    assert roofline_us(FLOP, NBYTES, quiet) == max(FLOP / 123e9, NBYTES / 100e9) * 1e6
    assert FiguresKeeper(store, every_s=0).refresh(quiet, canonical) == quiet  # kept as it is
    assert store.catalog.get_target(row.id) == quiet
    engine.dispose()
