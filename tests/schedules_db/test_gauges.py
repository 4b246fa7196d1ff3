"""`schedules_db.gauges.read_fleet` and `Jobs.record_stage` on SQLite and PostgreSQL: what the
metrics read of the store when they are scraped."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update

from schedules_db.gauges import DURATION_BUCKETS_S, read_fleet
from schedules_db.store import Store
from schedules_db.tables import TuningRecordRow, WorkerRow, utcnow
from tests.schedules_db.store_data import STALE, pair, record, target

MINUTE, HOUR = timedelta(minutes=1), timedelta(hours=1)


def test_jobs_by_state_and_target_and_every_target_named(store: Store) -> None:
    workload, x = pair(store)
    y = target(store, "y")
    for _ in range(2):
        store.jobs.create(workload, x, 8, "q")
    running = store.jobs.create(workload, y, 8, "q")
    assert store.jobs.claim(running.id, "w", STALE)
    counts = read_fleet(store, MINUTE, HOUR)
    assert sorted(counts.targets) == ["x", "y"]
    assert counts.jobs == {("queued", "x"): 2, ("running", "y"): 1}


def test_records_of_the_window_count_and_imports_do_not(store: Store) -> None:
    workload, x = pair(store)
    job = store.jobs.create(workload, x, 8, "q")
    for n in range(3):
        assert store.records.add(workload, x, job.id, record(10.0 + n, f"[{n}]"))
    assert store.records.add(workload, x, job.id, record(None, "[failed]"))  # tried: counts
    assert store.records.add(workload, x, None, record(5.0, "[imported]", unverified=True))
    old = store.records.add(workload, x, job.id, record(9.0, "[old]"))
    assert old
    with store.session() as s:
        s.execute(
            update(TuningRecordRow)
            .where(TuningRecordRow.trace_json == "[old]")
            .values(created_at=utcnow() - timedelta(minutes=5))
        )
    assert read_fleet(store, MINUTE, HOUR).recent_records == {"x": 4}


def test_workers_within_the_horizon_with_their_targets_and_age(store: Store) -> None:
    _, x = pair(store)
    y = target(store, "y")
    store.fleet.register("fresh", "h", 1, [x, y], {})
    store.fleet.register("stopped", "h", 2, [x], {})
    store.fleet.stopped("stopped")
    store.fleet.register("stale", "h", 3, [y], {})
    store.fleet.register("gone", "h", 4, [y], {})
    with store.session() as s:
        for name, age in (("stale", timedelta(minutes=10)), ("gone", timedelta(hours=2))):
            s.execute(
                update(WorkerRow).where(WorkerRow.name == name).values(heartbeat_at=utcnow() - age)
            )
    workers = {w.name: w for w in read_fleet(store, MINUTE, HOUR).workers}
    assert set(workers) == {"fresh", "stopped", "stale"}
    assert workers["fresh"].targets == ("x", "y") and not workers["fresh"].stopped
    assert workers["fresh"].heartbeat_age_s < 60
    assert workers["stopped"].stopped
    assert 590 < workers["stale"].heartbeat_age_s < 700


def test_stage_times_are_cumulative_bucket_counts(store: Store) -> None:
    workload, x = pair(store)
    job = store.jobs.create(workload, x, 8, "q")
    for seconds in (0.5, 42.0, 42.0, 100000.0):
        store.jobs.record_stage(job.id, "search", seconds)
    store.jobs.record_stage(job.id, "verification", 3.0)
    store.jobs.record_stage(999, "search", 1.0)  # no such job: nothing
    with pytest.raises(ValueError, match="not a job stage"):
        store.jobs.record_stage(job.id, "compile", 1.0)
    stages = read_fleet(store, MINUTE, HOUR).stages
    assert set(stages) == {("search", "x"), ("verification", "x")}
    search = stages[("search", "x")]
    assert search.count == 4 and search.total_s == pytest.approx(100084.5)
    expected = tuple(sum(s <= b for s in (0.5, 42.0, 42.0, 100000.0)) for b in DURATION_BUCKETS_S)
    assert search.at_most == expected  # 1 under a second, 3 under a minute, the last past a day
    assert search.at_most[0] == 1 and search.at_most[-1] == 3
    verification = stages[("verification", "x")]
    assert verification.count == 1 and verification.at_most[0] == 0 and verification.at_most[1] == 1
