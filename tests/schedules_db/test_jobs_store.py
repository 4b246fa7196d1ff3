"""The jobs aggregate: creation, claims, fair share, progress, cancel and recovery; on SQLite and
on PostgreSQL."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from sqlalchemy import func, select

from schedules_db.store import Store
from schedules_db.tables import JobRow, TuningRecordRow
from schedules_db.tables import utcnow as now
from schedules_db.values import Job, JobState
from tests.schedules_db.store_data import STALE, pair, target
from tests.waiting import eventually


def test_claim_is_exclusive_and_stale_jobs_can_be_reclaimed(store: Store) -> None:
    wid, tid = pair(store)
    job = store.jobs.create(wid, tid, 16, "q")
    assert isinstance(job, Job) and job.state == JobState.QUEUED.value
    assert store.jobs.claim(job.id, "w1", STALE)
    assert not store.jobs.claim(job.id, "w2", STALE)  # duplicate delivery exits
    # Only the owner writes progress.
    assert store.jobs.update_progress(job.id, "w1", 8, 12.5)
    assert not store.jobs.update_progress(job.id, "w2", 16, 1.0)
    assert (store.jobs.get(job.id).trials_done, store.jobs.get(job.id).best_latency_us) == (8, 12.5)
    store.jobs.set_cost_model(job.id, "w1", "llvm-x.json")
    store.jobs.set_cost_model(job.id, "w2", "theirs.json")  # not the owner: ignored
    assert store.jobs.get(job.id).cost_model == "llvm-x.json"
    # A stale owner loses the job to a new claim, and then cannot write any more.
    assert store.jobs.claim(job.id, "w2", timedelta(seconds=-1))
    assert not store.jobs.heartbeat(job.id, "w1") and store.jobs.heartbeat(job.id, "w2")
    assert not store.jobs.fail(job.id, "w1", "late")
    row = store.jobs.get(job.id)
    assert (row.worker, row.attempt, row.state) == ("w2", 2, "running")
    assert store.jobs.get(10**6) is None


def test_concurrent_claims_have_one_winner(store: Store) -> None:
    wid, tid = pair(store)
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


def test_fail_cancel_and_requeue(store: Store) -> None:
    wid, tid = pair(store)
    queued = store.jobs.create(wid, tid, 8, "q")
    assert store.jobs.request_cancel(queued.id).state == "cancelled"
    assert not store.jobs.claim(queued.id, "w1", STALE)  # a cancelled job is never run

    running = store.jobs.create(wid, tid, 8, "q")
    store.jobs.claim(running.id, "w1", STALE)
    row = store.jobs.request_cancel(running.id)
    assert (row.state, row.cancel_requested) == ("running", True)
    assert store.jobs.cancel_was_requested(running.id)
    assert not store.jobs.cancel_running(running.id, "w2")  # only the owner stops it
    assert store.jobs.cancel_running(running.id, "w1")
    assert store.jobs.get(running.id).state == "cancelled"
    assert store.jobs.request_cancel(running.id).state == "cancelled"  # final: left as it is

    failing = store.jobs.create(wid, tid, 8, "q")
    store.jobs.claim(failing.id, "w1", STALE)
    assert store.jobs.fail(failing.id, "w1", "RuntimeError: boom")
    assert store.jobs.get(failing.id).error == "RuntimeError: boom"
    orphan = store.jobs.create(wid, tid, 8, "q")
    assert store.jobs.fail(orphan.id, None, "no worker")  # anyone may fail an unfinished job
    assert not store.jobs.fail(orphan.id, None, "twice")  # ...once

    stale = store.jobs.create(wid, tid, 8, "q")
    store.jobs.claim(stale.id, "w9", STALE)
    # Stale after 0 s once the clock has moved past its claim: polled, not slept for.
    requeued = eventually(lambda: store.jobs.requeue_stale(timedelta(seconds=0)))
    assert [(j.id, j.worker, j.state) for j in requeued] == [(stale.id, "w9", "running")]
    row = store.jobs.get(stale.id)
    assert row.state == "queued" and "w9" in row.error
    assert not store.jobs.heartbeat(stale.id, "w9")  # the old owner no longer owns it
    assert store.jobs.request_cancel(10**6) is None


def test_unfinished_jobs_and_enqueue_marks(store: Store) -> None:
    wid, tid = pair(store)
    assert store.jobs.unfinished(wid, tid) is None
    first = store.jobs.create(wid, tid, 8, "q", "alice")
    store.jobs.create(wid, tid, 8, "q", "alice")
    assert store.jobs.unfinished(wid, tid).id == first.id  # the oldest
    assert store.jobs.count_unfinished("alice") == 2 and store.jobs.count_unfinished("bob") == 0
    assert len(store.jobs.queued_not_enqueued_since(now())) == 2  # never sent
    store.jobs.mark_enqueued(first.id, "task-1")
    assert store.jobs.get(first.id).task_id == "task-1"
    pending = store.jobs.queued_not_enqueued_since(now() - timedelta(seconds=60))
    assert [j.id for j in pending] == [first.id + 1]
    assert [j.id for j in store.jobs.list_jobs("queued", limit=1)] == [first.id + 1]


def test_job_rows_are_the_only_state(store: Store) -> None:
    """Nothing but the store holds a job: counts match what was created."""
    wid, tid = pair(store)
    for _ in range(3):
        store.jobs.create(wid, tid, 8, "q")
    with store.session() as s:
        assert s.scalar(select(func.count(JobRow.id))) == 3
        assert s.scalar(select(func.count(TuningRecordRow.id))) == 0
    assert [j.id for j in store.jobs.list_jobs()] == sorted(
        (j.id for j in store.jobs.list_jobs()), reverse=True
    )


def _finish(store: Store, job_id: int, worker: str) -> None:
    assert store.jobs.fail(job_id, worker, "done for the test")


def test_priority_then_fair_share_then_age(store: Store) -> None:
    tid = target(store, "a")
    wid = store.catalog.get_or_create_workload("1", "{}", "matmul", {}, 1.0).id
    # alice floods the queue first; bob and carol submit one job each afterwards.
    flood = [store.jobs.create(wid, tid, 8, "q", "alice").id for _ in range(5)]
    bob = store.jobs.create(wid, tid, 8, "q", "bob").id
    carol = store.jobs.create(wid, tid, 8, "q", "carol").id
    urgent = store.jobs.create(wid, tid, 8, "q", "alice", priority=5).id

    order = []
    for _ in range(8):
        job_id = store.jobs.claim_next([tid], "w1", STALE)
        assert job_id is not None
        assert store.jobs.get(job_id).state == JobState.RUNNING.value
        order.append(job_id)
        _finish(store, job_id, "w1")
        time.sleep(0.01)  # distinct started_at per claim
    # Highest priority first; then whoever was served least recently: bob and carol (never
    # served) before any more of alice's flood, although all of it is older.
    assert order == [urgent, bob, carol, *flood]
    assert store.jobs.claim_next([tid], "w1", STALE) is None


def test_running_jobs_count_against_their_submitter(store: Store) -> None:
    tid = target(store, "a")
    wid = store.catalog.get_or_create_workload("1", "{}", "matmul", {}, 1.0).id
    a1 = store.jobs.create(wid, tid, 8, "q", "alice").id
    a2 = store.jobs.create(wid, tid, 8, "q", "alice").id
    b1 = store.jobs.create(wid, tid, 8, "q", "bob").id
    assert store.jobs.claim_next([tid], "w1", STALE) == a1  # oldest, nobody served yet
    # alice has a running job: a second worker serves bob before alice's next one.
    assert store.jobs.claim_next([tid], "w2", STALE) == b1
    assert store.jobs.claim_next([tid], "w3", STALE) == a2


def test_claim_next_only_takes_jobs_of_its_targets(store: Store) -> None:
    ta, tb = target(store, "a"), target(store, "b")
    wid = store.catalog.get_or_create_workload("1", "{}", "matmul", {}, 1.0).id
    job_b = store.jobs.create(wid, tb, 8, "q").id
    assert store.jobs.claim_next([ta], "wa", STALE) is None
    assert store.jobs.get(job_b).state == JobState.QUEUED.value
    assert store.jobs.claim_next([ta, tb], "wab", STALE) == job_b
