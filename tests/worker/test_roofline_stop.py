"""Budgets follow the gap to the roofline (issue 26): a search whose best reaches 85% of the
workload's roofline stops at the next batch, its job succeeds with the budget counted as
covered, and a later job with more trials measures nothing while the published best is there.
The target's figures are planted so low that any kernel is at its roofline; a target with no
figures, or with figures measured under load (issue 38: a worker started beside other work
measured a low peak, and searches stopped short of the real roofline), searches its whole
budget."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from schedules_db import Store
from service.worker.execution import WorkerContext, run_job
from tests.conftest import TINY, host_store
from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload
from tuning.ir import bytes_moved


def _setup(
    tmp_path: Path, figures: bool, interference: float = 0.0
) -> tuple[Store, WorkerContext, int, int, Any]:
    engine, store, row = host_store(tmp_path)
    if figures:  # a roofline far above what any kernel takes: every kernel is at it
        load = {"interference": interference}
        store.catalog.set_peak(row.id, 1e-6, **load)
        store.catalog.set_bandwidth(row.id, 1e-6, 1e-6, 1 << 20, **load)
    spec = catalog_workload("matmul", get_operator("matmul").Params(**TINY))
    workload = store.catalog.get_or_create_workload(
        spec.shash, spec.mod_json, "matmul", spec.params, spec.flop
    )
    context = WorkerContext(store=store, artifact_dir=tmp_path / "artifacts",
                            worker_name="pytest-roofline", stale_after=timedelta(seconds=60),
                            num_trials_per_iter=4)  # fmt: skip
    return store, context, workload.id, row.id, engine


def test_a_search_at_the_roofline_stops_and_a_bigger_budget_measures_nothing(
    tmp_path: Path,
) -> None:
    store, context, workload_id, target_id, engine = _setup(tmp_path, figures=True)
    job = store.jobs.create(workload_id, target_id, 16, "tunehub.test")
    assert run_job(context, job.id) == "succeeded", store.jobs.get(job.id).error
    done = store.jobs.get(job.id)
    assert done is not None and done.trials_done == 4  # one batch of 4, not 16
    assert store.records.count(target_id, workload_id) == 4
    schedule = store.schedules.best(workload_id, target_id)
    assert schedule is not None and schedule.trials == 16  # the budget counts as covered
    # The worker recorded the bytes a kernel must move: A, B and C of a 32x32x32 matmul.
    workload = store.catalog.get_workload(workload_id)
    assert workload is not None and workload.bytes_moved == 3 * 32 * 32 * 4
    spec = catalog_workload("matmul", get_operator("matmul").Params(**TINY))
    assert bytes_moved(spec.mod["main"]) == workload.bytes_moved

    again = store.jobs.create(workload_id, target_id, 64, "tunehub.test")
    assert not again.cache_hit
    assert run_job(context, again.id) == "succeeded", store.jobs.get(again.id).error
    assert store.records.count(target_id, workload_id) == 4  # nothing measured
    schedule = store.schedules.best(workload_id, target_id)
    assert schedule is not None and schedule.trials == 64
    engine.dispose()


@pytest.mark.parametrize("figures", ["none", "measured under load"])
def test_without_trusted_figures_a_search_spends_its_budget(tmp_path: Path, figures: str) -> None:
    store, context, workload_id, target_id, engine = _setup(
        tmp_path, figures=figures != "none", interference=0.5
    )
    job = store.jobs.create(workload_id, target_id, 8, "tunehub.test")
    assert run_job(context, job.id) == "succeeded", store.jobs.get(job.id).error
    done = store.jobs.get(job.id)
    assert done is not None and done.trials_done == 8
    engine.dispose()
