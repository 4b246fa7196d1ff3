"""A verified kernel faster than its target's measured peak leaves the peak as measured (issue
38: raising the peak to a kernel's speed made a kernel at 84% of the real peak the new 100%, and
every later kernel's share and the searches' stop followed it), and what the dashboard shows of
it is capped at 100%; a peak measured under load shows no share at all."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from service.dashboard.formatting import share_of_peak
from service.worker.execution import WorkerContext, run_job
from tests.conftest import TINY, host_store
from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload


def test_a_kernel_above_the_measured_peak_leaves_it_and_shows_at_most_100(
    tmp_path: Path,
) -> None:
    engine, store, row = host_store(tmp_path)
    # Far below anything a kernel reaches, as if measured on a quiet machine.
    store.catalog.set_peak(row.id, 0.001, interference=0.0)
    spec = catalog_workload("matmul", get_operator("matmul").Params(**TINY))
    workload = store.catalog.get_or_create_workload(
        spec.shash, spec.mod_json, "matmul", spec.params, spec.flop
    )
    job = store.jobs.create(workload.id, row.id, 2, "tunehub.test")
    context = WorkerContext(store=store, artifact_dir=tmp_path / "artifacts",
                            worker_name="pytest-peak", stale_after=timedelta(seconds=60),
                            num_trials_per_iter=2)  # fmt: skip
    assert run_job(context, job.id) == "succeeded", store.jobs.get(job.id).error
    schedule = store.schedules.best(workload.id, row.id)
    gflops = spec.flop / (schedule.latency_us * 1e3)
    assert gflops > 0.001
    assert store.catalog.get_target(row.id).peak_gflops == 0.001  # not raised to the kernel
    assert share_of_peak(gflops, 0.001, 0.0) == 100.0
    assert share_of_peak(gflops / 2, 2 * gflops, 0.0) == 25.0
    assert share_of_peak(gflops / 2, 2 * gflops, 0.5) is None  # measured under load
    assert share_of_peak(gflops / 2, 2 * gflops, None) is None  # load not known
    engine.dispose()
