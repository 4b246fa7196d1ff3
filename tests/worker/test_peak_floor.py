"""A verified kernel faster than its target's measured peak shows the peak was measured too
low: publishing it raises the peak to what the kernel reached, so no schedule shows as more
than 100% of its target's peak (issue 26: the dashboard showed a matmul at 104% and a
convolution at 139% of an under-measured peak)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from service.dashboard.formatting import share_of_peak
from service.worker.execution import WorkerContext, run_job
from tests.conftest import TINY, host_store
from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload


def test_a_kernel_above_the_measured_peak_raises_it(tmp_path: Path) -> None:
    engine, store, row = host_store(tmp_path)
    store.catalog.set_peak(row.id, 0.001)  # far below anything a kernel reaches
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
    peak = store.catalog.get_target(row.id).peak_gflops
    assert peak is not None and abs(peak - gflops) < 1e-6 * gflops
    assert share_of_peak(gflops, peak) == 100.0
    assert share_of_peak(2 * gflops, peak) == 100.0  # never above, whatever an old row holds
    engine.dispose()
