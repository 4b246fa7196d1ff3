"""A real MetaSchedule search run by the worker's job runner, in this process."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from schedules_db.values import NewRecord
from service.worker.execution import run_job
from service.worker.store_database import StoreDatabase
from tests.conftest import TINY
from tuning.ir import load_mod
from tuning.publish.verify import apply_trace, compile_to_library


def test_job_succeeds_with_a_verified_exported_schedule(tuned_store: dict) -> None:
    store = tuned_store["store"]
    assert tuned_store["outcome"] == "succeeded"
    job = store.jobs.get(tuned_store["job_id"])
    assert job.state == "succeeded" and job.error is None
    assert job.trials_done == 8 and job.attempt == 1
    # Every candidate was measured, verified and timed in the job's jailed runner: no kernel
    # library the job built was ever mapped into this (the worker's) process.
    with open("/proc/self/maps") as maps:
        mapped = [line for line in maps if "tunehub-job" in line or "candidate" in line]
    assert mapped == []
    # Every measured candidate is a row (the search measured exactly the budget).
    assert store.records.count(tuned_store["target_id"], job_id=job.id) == 8
    sched = store.schedules.get(job.schedule_id)
    assert sched.trials == 8
    assert 0 <= sched.max_abs_error < 1e-4
    # The latency is the median of runs whose spread is published with it.
    assert sched.latency_spread is not None and 0 <= sched.latency_spread < 10
    # Never slower than the plain function (which is served when it wins, see test_reuse).
    assert 0 < sched.latency_us <= sched.untuned_latency_us
    assert "T.prim_func" in sched.tir
    # The served file is the one whose hash is stored.
    artifact = store.schedules.get_artifact(sched.artifact_id)
    data = (tuned_store["artifact_dir"] / artifact.path).read_bytes()
    assert hashlib.sha256(data).hexdigest() == artifact.sha256 and len(data) == artifact.size


def test_artifact_computes_the_matmul(tuned_store: dict) -> None:
    import tvm

    store = tuned_store["store"]
    sched = store.schedules.get(store.jobs.get(tuned_store["job_id"]).schedule_id)
    path = tuned_store["artifact_dir"] / store.schedules.get_artifact(sched.artifact_id).path
    module = tvm.runtime.load_module(str(path))
    rng = np.random.default_rng(7)
    a = rng.standard_normal((TINY["M"], TINY["K"])).astype("float32")
    b = rng.standard_normal((TINY["K"], TINY["N"])).astype("float32")
    out = tvm.runtime.empty((TINY["M"], TINY["N"]), "float32", tvm.cpu(0))
    module["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), out)
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_stored_trace_replays_to_the_same_schedule(tuned_store: dict, tmp_path) -> None:
    import tvm

    store = tuned_store["store"]
    sched = store.schedules.get(store.jobs.get(tuned_store["job_id"]).schedule_id)
    mod = load_mod(store.catalog.get_workload(tuned_store["workload_id"]).mod_json)
    if sched.record_id is None:  # the plain function beat the candidates: it is what is served
        assert sched.tir == mod.script()
        record = store.records.top_k(tuned_store["workload_id"], tuned_store["target_id"], 1)[0]
    else:
        record = store.records.get(sched.record_id)
    scheduled = apply_trace(mod, record.trace_json)
    if sched.record_id is not None:
        assert scheduled.script() == sched.tir
    compile_to_library(
        scheduled,
        tvm.target.Target(
            json.loads(store.catalog.get_target(tuned_store["target_id"]).canonical_json)
        ),
        tmp_path / "again.so",
    )


def test_metaschedule_database_adapter(tuned_store: dict) -> None:
    store = tuned_store["store"]
    db = StoreDatabase(store, tuned_store["target_id"])
    mod = load_mod(store.catalog.get_workload(tuned_store["workload_id"]).mod_json)
    assert db.has_workload(mod)
    workload = db.commit_workload(mod)
    top = db.get_top_k(workload, 3)
    assert len(top) == 3
    secs = [float(np.mean([float(x) for x in r.run_secs])) for r in top]
    assert secs == sorted(secs)
    assert len(db) == store.records.count(tuned_store["target_id"])
    # A failed candidate is stored but never returned as top-k.
    store.records.add(
        tuned_store["workload_id"],
        tuned_store["target_id"],
        None,
        NewRecord('["failed"]', [1e10], [], "x", failed=True),
    )
    assert len(db) == store.records.count(tuned_store["target_id"])
    assert all(min(float(x) for x in r.run_secs) < 1 for r in db.get_top_k(workload, 100))
    # Another target's adapter sees none of these records.
    other = store.catalog.get_or_create_target(
        {"kind": "llvm", "mcpu": "other"}, "llvm", "other", {}
    )
    assert StoreDatabase(store, other.id).get_top_k(workload, 5) == []


def test_a_job_owned_elsewhere_is_not_run_twice(tuned_store: dict) -> None:
    store = tuned_store["store"]
    # The finished job cannot be claimed again (a duplicate delivery exits at once).
    assert run_job(tuned_store["context"], tuned_store["job_id"]) == "not-claimed"
    assert store.jobs.get(tuned_store["job_id"]).attempt == 1


def test_job_failure_is_recorded_readably(tuned_store: dict) -> None:
    """A job whose (user) workload cannot be loaded fails with a readable error, not a hang:
    the worker loads it in a jail first, so TVM's loader fails there, not in the worker."""
    store = tuned_store["store"]
    broken = store.catalog.get_or_create_workload("broken", '{"not": "tvm json"}', None, {}, 0.0)
    job = store.jobs.create(broken.id, tuned_store["target_id"], 4, "q")
    assert run_job(tuned_store["context"], job.id) == "failed"
    row = store.jobs.get(job.id)
    assert row.state == "failed" and row.finished_at is not None
    assert row.error.startswith("TirRejected: ") and "JSON" in row.error, row.error


def test_a_job_taken_over_from_a_dead_worker_resumes_from_its_records(tuned_store: dict) -> None:
    """A worker died after measuring 6 of 10 candidates: the next one measures only 4 more."""
    from datetime import timedelta

    from sqlalchemy import update

    from schedules_db.tables import JobRow, TuningRecordRow, utcnow

    store = tuned_store["store"]
    tid = tuned_store["target_id"]
    wid = _fresh_matmul(store, M=24, N=16, K=8)
    # What the dead worker had measured: six stored candidates, attributed to its job below.
    measured = store.jobs.create(wid, tid, 6, "q")
    assert run_job(tuned_store["context"], measured.id) == "succeeded"
    job = store.jobs.create(wid, tid, 10, "q")
    assert job.state == "queued"
    assert store.jobs.claim(job.id, "dead-worker", timedelta(seconds=90))
    with store.session() as s:
        s.execute(
            update(TuningRecordRow)
            .where(TuningRecordRow.job_id == measured.id)
            .values(job_id=job.id)
        )
        s.execute(
            update(JobRow)
            .where(JobRow.id == job.id)
            .values(heartbeat_at=utcnow() - timedelta(hours=1))
        )
    assert run_job(tuned_store["context"], job.id) == "succeeded"
    row = store.jobs.get(job.id)
    assert (row.attempt, row.worker, row.trials_done) == (2, "pytest", 10)
    assert store.records.count(tid, wid, job_id=job.id) == 10  # 6 resumed + 4 new, no repeats


def _fresh_matmul(store, **shape: int) -> int:  # noqa: ANN001
    """A matmul workload of its own, so budgets (totals per workload) start from zero."""
    from tuning.catalog import get_operator
    from tuning.catalog.workload import catalog_workload

    spec = catalog_workload("matmul", get_operator("matmul").Params(**shape))
    return store.catalog.get_or_create_workload(
        spec.shash, spec.mod_json, "matmul", spec.params, 1.0
    ).id


def test_raw_tir_job_is_verified_against_the_plainly_compiled_function(tuned_store: dict) -> None:
    """No numpy reference exists for raw TIR: the unscheduled function compiled plainly is it."""
    from tests.service.test_tir_jobs import HANDWRITTEN
    from tuning.untrusted.user_tir import parse_untrusted

    store = tuned_store["store"]
    parsed = parse_untrusted("tvmscript", HANDWRITTEN)
    workload = store.catalog.get_or_create_workload(
        parsed.shash, parsed.mod_json, None, {}, parsed.flop
    )
    job = store.jobs.create(workload.id, tuned_store["target_id"], 2, "q")
    assert run_job(tuned_store["context"], job.id) == "succeeded", store.jobs.get(job.id).error
    sched = store.schedules.get(store.jobs.get(job.id).schedule_id)
    assert sched.max_abs_error < 1e-6  # 2x + 1 is exact in fp32 for these inputs' magnitude

    import tvm

    module = tvm.runtime.load_module(
        str(tuned_store["artifact_dir"] / store.schedules.get_artifact(sched.artifact_id).path)
    )
    a = np.random.default_rng(5).standard_normal((16, 16)).astype("float32")
    out = tvm.runtime.empty((16, 16), "float32", tvm.cpu(0))
    module["main"](tvm.runtime.tensor(a), out)
    np.testing.assert_allclose(out.numpy(), a * 2 + 1, rtol=1e-6)


def test_cancel_stops_the_search_after_one_batch_and_keeps_its_records(
    tuned_store: dict,
) -> None:
    from sqlalchemy import update

    from schedules_db.tables import JobRow

    store = tuned_store["store"]
    tid = tuned_store["target_id"]
    wid = _fresh_matmul(store, M=40, N=24, K=16)
    job = store.jobs.create(wid, tid, 64, "q")
    with store.session() as s:  # cancel asked for while the job is (about to be) running
        s.execute(update(JobRow).where(JobRow.id == job.id).values(cancel_requested=True))
    assert run_job(tuned_store["context"], job.id) == "cancelled"
    row = store.jobs.get(job.id)
    assert row.state == "cancelled" and row.schedule_id is None and row.finished_at
    batch = tuned_store["context"].num_trials_per_iter
    assert row.trials_done == batch
    assert 1 <= store.records.count(tid, wid, job_id=job.id) <= batch
