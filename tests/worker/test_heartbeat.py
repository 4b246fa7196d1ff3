"""The worker's one heartbeat thread, against a real store: it beats the registry row (with the
job being run) and the running job, and reports a job another worker reclaimed."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from sqlalchemy import update

from schedules_db.store import Store
from schedules_db.tables import JobRow, utcnow
from service.worker.heartbeat import Heartbeat
from tests.waiting import eventually

EVERY_S = 0.05


def _job(store: Store) -> int:
    target = store.catalog.get_or_create_target({"kind": "llvm"}, "llvm", "cpu", {})
    workload = store.catalog.get_or_create_workload("shash", "{}", None, {}, 0.0)
    return store.jobs.create(workload.id, target.id, 8, "q").id


def _age(store: Store, job_id: int) -> None:
    """Make the job's heartbeat an hour old."""
    with store.session() as s:
        s.execute(
            update(JobRow)
            .where(JobRow.id == job_id)
            .values(heartbeat_at=utcnow() - timedelta(hours=1))
        )


def _heartbeat_threads() -> int:
    return sum(t.name == "tunehub-heartbeat" for t in threading.enumerate())


def test_one_thread_beats_the_registry_row_and_the_running_job(store: Store) -> None:
    job_id = _job(store)
    store.fleet.register("w1", "host", 1, [], {}, None)
    assert store.jobs.claim(job_id, "w1", timedelta(seconds=90))
    heartbeat = Heartbeat(store, "w1", EVERY_S)
    heartbeat.start_registry()
    try:
        with heartbeat.beating(job_id) as beat:
            assert _heartbeat_threads() == 1
            eventually(lambda: store.fleet.list_workers()[0].current_job_id == job_id)
            _age(store, job_id)  # beaten fresh again by the thread
            stale = utcnow() - timedelta(minutes=1)
            eventually(lambda: _beaten_since(store, job_id, stale))
            assert not beat.lost
        eventually(lambda: store.fleet.list_workers()[0].current_job_id is None)
        assert _heartbeat_threads() == 1  # the registry row is still beaten
    finally:
        heartbeat.stop()
    eventually(lambda: _heartbeat_threads() == 0)


def _beaten_since(store: Store, job_id: int, since: datetime) -> bool:
    job = store.jobs.get(job_id)
    assert job is not None and job.heartbeat_at is not None
    return job.heartbeat_at.replace(tzinfo=None) > since.replace(tzinfo=None)  # UTC both


def test_a_reclaimed_job_is_reported_lost_and_beaten_no_more(store: Store) -> None:
    job_id = _job(store)
    assert store.jobs.claim(job_id, "w1", timedelta(seconds=90))
    # Slower beats: the takeover below mostly happens before the thread's first beat.
    heartbeat = Heartbeat(store, "w1", 0.5)
    with heartbeat.beating(job_id) as beat:
        # w1 stopped beating for too long (as far as w2 can tell) and w2 takes the job over;
        # should w1's beat land between the two steps (a busy machine), w2 tries again.
        takeover = timedelta(seconds=90)
        eventually(lambda: _age(store, job_id) or store.jobs.claim(job_id, "w2", takeover))
        eventually(lambda: beat.lost)
        job = store.jobs.get(job_id)
        assert job is not None and job.worker == "w2"
    # Without a registry row to beat, the thread ends with the job.
    eventually(lambda: _heartbeat_threads() == 0)
