"""The store contract, on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from schedules_db.models import JobRow, ScheduleRow, TuningRecordRow
from schedules_db.store import Store
from schedules_db.values import JobState, NewRecord, NewSchedule

STALE = timedelta(seconds=60)


def _pair(store: Store, canonical: dict | None = None) -> tuple[int, int]:
    target = store.catalog.get_or_create_target(
        canonical or {"kind": "llvm", "mcpu": "x"}, "llvm", "x", {}
    )
    workload = store.catalog.get_or_create_workload("42", "{}", "matmul", {"M": 1}, 2.0e6)
    return workload.id, target.id


def _record(run_us: float | None, trace: str) -> NewRecord:
    secs = [1e10] if run_us is None else [run_us * 1e-6] * 3
    return NewRecord(
        trace_json=trace, run_secs=secs, args_info=[], tvm_version="0.27.0", failed=run_us is None
    )


def _schedule(record_id: int, latency_us: float, sha: str = "a" * 64) -> NewSchedule:
    return NewSchedule(
        record_id=record_id,
        latency_us=latency_us,
        untuned_latency_us=1000.0,
        max_abs_error=1e-6,
        tir="# tir",
        artifact_sha256=sha,
        artifact_size=10,
        artifact_path=f"{sha[:2]}/{sha}.so",
    )


def test_targets_and_workloads_are_created_once(store: Store) -> None:
    t1 = store.catalog.get_or_create_target({"kind": "llvm", "mcpu": "a"}, "llvm", "a", {})
    t2 = store.catalog.get_or_create_target({"mcpu": "a", "kind": "llvm"}, "llvm", "a", {})
    t3 = store.catalog.get_or_create_target({"kind": "llvm", "mcpu": "b"}, "llvm", "b", {})
    assert t1.id == t2.id != t3.id
    assert store.catalog.find_target(t1.key).id == t1.id
    assert store.catalog.find_target("b").id == t3.id  # by label
    w1 = store.catalog.get_or_create_workload("7", "{}", "matmul", {}, 1.0)
    assert store.catalog.get_or_create_workload("7", "{}", "matmul", {}, 1.0).id == w1.id
    assert store.catalog.find_workload("8") is None


def test_claim_is_exclusive_and_stale_jobs_can_be_reclaimed(store: Store) -> None:
    wid, tid = _pair(store)
    job = store.jobs.create(wid, tid, 16, "q")
    assert job.state == JobState.QUEUED.value
    assert store.jobs.claim(job.id, "w1", STALE)
    assert not store.jobs.claim(job.id, "w2", STALE)  # duplicate delivery exits
    # Only the owner writes progress.
    assert store.jobs.update_progress(job.id, "w1", 8, 12.5)
    assert not store.jobs.update_progress(job.id, "w2", 16, 1.0)
    assert store.jobs.get(job.id).trials_done == 8
    # A stale owner loses the job to a new claim, and then cannot write any more.
    assert store.jobs.claim(job.id, "w2", timedelta(seconds=-1))
    assert not store.jobs.heartbeat(job.id, "w1")
    assert not store.jobs.fail(job.id, "w1", "late")
    row = store.jobs.get(job.id)
    assert (row.worker, row.attempt, row.state) == ("w2", 2, "running")


def test_concurrent_claims_have_one_winner(store: Store) -> None:
    wid, tid = _pair(store)
    job = store.jobs.create(wid, tid, 16, "q")
    wins: list[str] = []
    barrier = threading.Barrier(4)

    def claim(name: str) -> None:
        barrier.wait()
        if store.jobs.claim(job.id, name, STALE):
            wins.append(name)

    threads = [threading.Thread(target=claim, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert store.jobs.get(job.id).worker == wins[0]


def test_records_dedupe_and_failed_ones_stay_out_of_top_k(store: Store) -> None:
    wid, tid = _pair(store)
    other_target = store.catalog.get_or_create_target(
        {"kind": "llvm", "mcpu": "y"}, "llvm", "y", {}
    ).id
    assert store.records.add(wid, tid, None, _record(30.0, "[3]"))
    assert store.records.add(wid, tid, None, _record(10.0, "[1]"))
    assert store.records.add(wid, tid, None, _record(None, "[f]"))
    assert not store.records.add(wid, tid, None, _record(11.0, "[1]"))  # same trace again
    assert store.records.add(wid, other_target, None, _record(1.0, "[1]"))  # other target
    assert store.records.count(tid, wid) == 3
    top = store.records.top_k(wid, tid, 5)
    assert [r.trace_json for r in top] == ["[1]", "[3]"]
    assert top[0].mean_run_us == pytest.approx(10.0)
    assert store.records.has_trace(wid, tid, "[f]") and not store.records.has_trace(
        wid, tid, "[zz]"
    )
    # Target isolation: the faster record of the other target is never returned here.
    assert all(r.target_id == tid for r in store.records.list_records(tid))


def test_finish_job_publishes_and_cache_hits_follow(store: Store) -> None:
    wid, tid = _pair(store)
    store.records.add(wid, tid, None, _record(10.0, "[1]"))
    rec = store.records.top_k(wid, tid, 1)[0]
    job = store.jobs.create(wid, tid, 16, "q")
    store.jobs.claim(job.id, "w1", STALE)
    assert store.schedules.publish(job.id, "w2", _schedule(rec.id, 10.0)) is None  # not the owner
    sid = store.schedules.publish(job.id, "w1", _schedule(rec.id, 10.0))
    assert sid is not None
    done = store.jobs.get(job.id)
    assert (done.state, done.schedule_id) == ("succeeded", sid)
    sched = store.schedules.get(sid)
    assert (sched.trials, sched.latency_us) == (16, 10.0)
    assert store.schedules.get_artifact(sched.artifact_id).sha256 == "a" * 64

    hit = store.jobs.create(wid, tid, 16, "q")
    assert (hit.state, hit.cache_hit, hit.schedule_id) == ("succeeded", True, sid)
    more = store.jobs.create(wid, tid, 32, "q")
    assert (more.state, more.cache_hit) == ("queued", False)

    # A slower new best does not replace the stored one; budgets are totals, so the best now
    # covers the bigger one.
    store.jobs.claim(more.id, "w1", STALE)
    assert store.schedules.publish(more.id, "w1", _schedule(rec.id, 50.0, "b" * 64)) == sid
    sched = store.schedules.get(sid)
    assert (sched.trials, sched.latency_us) == (32, 10.0)
    with store.session() as s:
        assert s.scalar(select(func.count(ScheduleRow.id))) == 1


def test_fail_cancel_and_requeue(store: Store) -> None:
    wid, tid = _pair(store)
    queued = store.jobs.create(wid, tid, 8, "q")
    assert store.jobs.request_cancel(queued.id).state == "cancelled"
    assert not store.jobs.claim(queued.id, "w1", STALE)  # a cancelled job is never run

    running = store.jobs.create(wid, tid, 8, "q")
    store.jobs.claim(running.id, "w1", STALE)
    row = store.jobs.request_cancel(running.id)
    assert (row.state, row.cancel_requested) == ("running", True)
    assert store.jobs.cancel_was_requested(running.id)
    assert store.jobs.cancel_running(running.id, "w1")
    assert store.jobs.get(running.id).state == "cancelled"

    failing = store.jobs.create(wid, tid, 8, "q")
    store.jobs.claim(failing.id, "w1", STALE)
    assert store.jobs.fail(failing.id, "w1", "RuntimeError: boom")
    assert store.jobs.get(failing.id).error == "RuntimeError: boom"

    stale = store.jobs.create(wid, tid, 8, "q")
    store.jobs.claim(stale.id, "w9", STALE)
    time.sleep(0.05)
    assert [j.id for j in store.jobs.requeue_stale(timedelta(seconds=0))] == [stale.id]
    row = store.jobs.get(stale.id)
    assert row.state == "queued" and "w9" in row.error
    assert store.jobs.request_cancel(10**6) is None


def test_job_rows_are_the_only_state(store: Store) -> None:
    """Nothing but the store holds a job: counts match what was created."""
    wid, tid = _pair(store)
    for _ in range(3):
        store.jobs.create(wid, tid, 8, "q")
    with store.session() as s:
        assert s.scalar(select(func.count(JobRow.id))) == 3
        assert s.scalar(select(func.count(TuningRecordRow.id))) == 0
    assert [j.id for j in store.jobs.list_jobs()] == sorted(
        (j.id for j in store.jobs.list_jobs()), reverse=True
    )


def test_a_users_workload_is_keyed_apart_from_the_catalogs(store: Store) -> None:
    catalog = store.catalog.get_or_create_workload("42", "{catalog}", "matmul", {"M": 1}, 2.0)
    user = store.catalog.get_or_create_workload("42", "{user}", None, {}, 2.0)
    assert user.id != catalog.id and (catalog.origin, user.origin) == ("catalog", "user")
    assert store.catalog.get_or_create_workload("42", "{again}", None, {}, 2.0).id == user.id
    assert store.catalog.get_workload(catalog.id).mod_json == "{catalog}"  # never taken over
    assert store.catalog.find_workload("42").id == catalog.id


def test_imported_records_stay_out_of_seeds_and_training_until_verified(store: Store) -> None:
    wid, tid = _pair(store)
    store.records.add(wid, tid, None, _record(20.0, "[measured]"))
    imported = NewRecord("[imported]", [1e-6], [], "0.27.0", unverified=True, failed=False)
    store.records.add(wid, tid, None, imported)
    assert [r.trace_json for r in store.records.top_k(wid, tid, 5)] == ["[imported]", "[measured]"]
    assert [r.trace_json for r in store.records.top_k(wid, tid, 5, verified_only=True)] == [
        "[measured]"
    ]
    assert [r.trace_json for r in store.records.list_records(tid, verified_only=True)] == [
        "[measured]"
    ]
    # A worker verifies the imported record and publishes it: from then on it counts.
    rec = store.records.top_k(wid, tid, 1)[0]
    job = store.jobs.create(wid, tid, 2, "q")
    store.jobs.claim(job.id, "w1", STALE)
    store.schedules.publish(job.id, "w1", _schedule(rec.id, 1.0))
    assert len(store.records.list_records(tid, verified_only=True)) == 2


def test_only_unverified_records_can_be_dropped(store: Store) -> None:
    wid, tid = _pair(store)
    store.records.add(wid, tid, None, _record(20.0, "[measured]"))
    store.records.add(
        wid, tid, None, NewRecord("[imported]", [1e-6], [], "0.27.0", unverified=True, failed=False)
    )
    ids = [r.id for r in store.records.list_records(tid)]
    assert store.records.drop_unverified(ids) == 1
    assert [r.trace_json for r in store.records.list_records(tid)] == ["[measured]"]
