"""The schedules aggregate (verified bests, artifacts, publishing), on SQLite and on
PostgreSQL."""

from __future__ import annotations

from sqlalchemy import func, select

from schedules_db.store import Store
from schedules_db.tables import ScheduleRow
from schedules_db.values import Artifact, Schedule
from tests.schedules_db.store_data import STALE, pair, record, schedule


def test_publish_makes_the_job_succeed_and_cache_hits_follow(store: Store) -> None:
    wid, tid = pair(store)
    store.records.add(wid, tid, None, record(10.0, "[1]"))
    rec = store.records.top_k(wid, tid, 1)[0]
    job = store.jobs.create(wid, tid, 16, "q")
    store.jobs.claim(job.id, "w1", STALE)
    assert store.schedules.publish(job.id, "w2", schedule(rec.id, 10.0)) is None  # not the owner
    assert store.schedules.best(wid, tid) is None  # ...and nothing was written
    sid = store.schedules.publish(job.id, "w1", schedule(rec.id, 10.0))
    assert sid is not None
    done = store.jobs.get(job.id)
    assert (done.state, done.schedule_id, done.error) == ("succeeded", sid, None)
    sched = store.schedules.get(sid)
    assert isinstance(sched, Schedule) and (sched.trials, sched.latency_us) == (16, 10.0)
    assert (sched.record_id, sched.tir, sched.tvm_series) == (rec.id, "# tir", "0.27")
    assert store.schedules.best(wid, tid).id == sid
    artifact = store.schedules.get_artifact(sched.artifact_id)
    assert isinstance(artifact, Artifact) and artifact.sha256 == "a" * 64
    assert store.schedules.get(10**6) is None and store.schedules.get_artifact(10**6) is None

    hit = store.jobs.create(wid, tid, 16, "q")
    assert (hit.state, hit.cache_hit, hit.schedule_id) == ("succeeded", True, sid)
    more = store.jobs.create(wid, tid, 32, "q")
    assert (more.state, more.cache_hit) == ("queued", False)

    # A slower new best does not replace the stored one; budgets are totals, so the best now
    # covers the bigger one.
    store.jobs.claim(more.id, "w1", STALE)
    assert store.schedules.publish(more.id, "w1", schedule(rec.id, 50.0, "b" * 64)) == sid
    sched = store.schedules.get(sid)
    assert (sched.trials, sched.latency_us) == (32, 10.0)
    with store.session() as s:
        assert s.scalar(select(func.count(ScheduleRow.id))) == 1


def test_a_faster_best_replaces_the_stored_one_and_none_keeps_it(store: Store) -> None:
    wid, tid = pair(store)
    store.records.add(wid, tid, None, record(10.0, "[1]"))
    store.records.add(wid, tid, None, record(5.0, "[2]"))
    slow, fast = sorted(store.records.top_k(wid, tid, 2), key=lambda r: -r.mean_run_us)
    first = store.jobs.create(wid, tid, 2, "q")
    store.jobs.claim(first.id, "w", STALE)
    sid = store.schedules.publish(first.id, "w", schedule(slow.id, 10.0))
    second = store.jobs.create(wid, tid, 4, "q")
    store.jobs.claim(second.id, "w", STALE)
    assert store.schedules.publish(second.id, "w", schedule(fast.id, 5.0, "c" * 64)) == sid
    best = store.schedules.get(sid)
    assert (best.record_id, best.latency_us, best.trials) == (fast.id, 5.0, 4)
    third = store.jobs.create(wid, tid, 8, "q")
    store.jobs.claim(third.id, "w", STALE)
    # Nothing beat it: the stored best of the store's series stands.
    assert Store(store.engine, tvm_series="0.27").schedules.publish(third.id, "w", None) == sid
    assert store.schedules.get(sid).trials == 8


def test_a_plain_best_is_keyed_by_its_series_and_lists_filter(store: Store) -> None:
    wid, tid = pair(store)
    job = store.jobs.create(wid, tid, 1, "q")
    store.jobs.claim(job.id, "w", STALE)
    sid = store.schedules.publish(job.id, "w", schedule(None, 3.0))
    assert store.schedules.get(sid).record_id is None
    assert [s.id for s in store.schedules.list_schedules()] == [sid]
    assert [s.id for s in store.schedules.list_schedules(operator="matmul")] == [sid]
    assert store.schedules.list_schedules(operator="softmax") == []
    assert store.schedules.list_schedules(target_id=tid + 1) == []
    assert Store(store.engine, tvm_series="0.99").schedules.best(wid, tid) is None
