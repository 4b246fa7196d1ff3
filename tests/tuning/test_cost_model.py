"""Cost-model transfer: a per-target XGBoost model trained on every stored record of the target,
refreshed as records arrive, used by new jobs unless they opt out."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.blobs import DatabaseBlobs
from service.worker.execution import WorkerContext, run_job
from service.worker.search_storage import StoreSearchStorage
from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload
from tuning.hardware.host import current_tvm_series
from tuning.hardware.targets import resolve_target
from tuning.ir import load_mod
from tuning.search.cost_model import MIN_RECORDS, newest_model, refresh, train


def _workload(store: Store, m: int, n: int, k: int) -> int:
    spec = catalog_workload("matmul", get_operator("matmul").Params(M=m, N=n, K=k))
    return store.catalog.get_or_create_workload(
        spec.shash, spec.mod_json, "matmul", spec.params, 1.0
    ).id


def test_transfer_trains_on_all_workloads_of_the_target_and_jobs_start_from_it(
    tmp_path: Path,
) -> None:
    import tvm

    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    upgrade_schema(engine)
    store = Store(engine, tvm_series=current_tvm_series())
    host = resolve_target("host")
    target_row = store.catalog.get_or_create_target(host.canonical, host.kind, host.label, {})
    target = tvm.target.Target(host.canonical)
    artifacts = tmp_path / "artifacts"
    blobs = DatabaseBlobs(engine)  # the artifact store of a fleet: no shared disk
    context = WorkerContext(store=store, artifact_dir=artifacts, worker_name="pytest",
                            num_trials_per_iter=8, blobs=blobs)  # fmt: skip
    storage = StoreSearchStorage(store, target_row.id)
    # Two workloads tuned without transfer: too few records for a model before them.
    assert refresh(storage, target_row.key, target, artifacts, 2) is None
    for shape in ((32, 32, 32), (48, 32, 16)):
        job = store.jobs.create(_workload(store, *shape), target_row.id, 16, "q",
                               transfer_cost_model=False)  # fmt: skip
        assert run_job(context, job.id) == "succeeded"
        assert store.jobs.get(job.id).cost_model is None
    assert store.records.count(target_row.id) >= MIN_RECORDS

    # The model learns from both workloads and ranks a third one's candidates.
    model, seen = train(storage, target, 2)
    assert seen >= MIN_RECORDS and len(model.data) == 2
    path = refresh(storage, target_row.key, target, artifacts, 2)
    assert path is not None and newest_model(artifacts, target_row.key) == (
        path,
        store.records.count(target_row.id),
    )
    assert refresh(storage, target_row.key, target, artifacts, 2) == path  # fresh

    # A new job starts from it (and says so); one that opts out does not.
    warm = store.jobs.create(_workload(store, 40, 24, 32), target_row.id, 8, "q")
    assert run_job(context, warm.id) == "succeeded"
    assert store.jobs.get(warm.id).cost_model == path.name
    shared = store.cost_models.newest(target_row.key)  # stored for every worker of the target
    assert shared is not None and shared.records == store.records.count(target_row.id) - 8
    # A worker on another host (its own folder, the same database) downloads that model, then
    # retrains it (the store now holds 25% more records) and shares the new one.
    other_host = tmp_path / "other-host"
    elsewhere = WorkerContext(store, other_host, "pytest-2", num_trials_per_iter=8, blobs=blobs)
    remote = store.jobs.create(_workload(store, 40, 24, 16), target_row.id, 8, "q")
    assert run_job(elsewhere, remote.id) == "succeeded"
    folder = other_host / "cost_models" / target_row.key
    assert (folder / path.name).read_bytes() == path.read_bytes()
    retrained = store.jobs.get(remote.id).cost_model
    newest = store.cost_models.newest(target_row.key)
    assert newest is not None and retrained == f"records-{newest.records}.tar" != path.name
    cold = store.jobs.create(_workload(store, 24, 40, 32), target_row.id, 8, "q",
                            transfer_cost_model=False)  # fmt: skip
    assert run_job(context, cold.id) == "succeeded"
    assert store.jobs.get(cold.id).cost_model is None

    # The saved model loads and predicts finite scores for unseen candidates.
    from tvm.s_tir.meta_schedule import TuneContext
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.s_tir.meta_schedule.cost_model import XGBModel
    from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate
    from tvm.s_tir.schedule import Schedule

    loaded = XGBModel(num_tuning_cores=2)
    loaded.load(str(path))
    mod = load_mod(store.catalog.get_workload(_workload(store, 40, 24, 32)).mod_json)
    scores = loaded.predict(
        TuneContext(mod=mod, target=target, task_name="main"),
        [MeasureCandidate(Schedule(mod), ArgInfo.from_prim_func(mod["main"]))],
    )
    assert np.isfinite(scores).all()
    engine.dispose()
