"""The store's side of the worker fleet: who runs next (priority, fair share), the worker
registry and which targets have a live worker; on SQLite and on PostgreSQL."""

from __future__ import annotations

import time
from datetime import timedelta

from schedules_db.store import Store
from schedules_db.values import JobState

STALE = timedelta(seconds=60)


def _target(store: Store, mcpu: str) -> int:
    return store.catalog.get_or_create_target({"kind": "llvm", "mcpu": mcpu}, "llvm", mcpu, {}).id


def _finish(store: Store, job_id: int, worker: str) -> None:
    assert store.jobs.fail(job_id, worker, "done for the test")


def test_priority_then_fair_share_then_age(store: Store) -> None:
    tid = _target(store, "a")
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
    tid = _target(store, "a")
    wid = store.catalog.get_or_create_workload("1", "{}", "matmul", {}, 1.0).id
    a1 = store.jobs.create(wid, tid, 8, "q", "alice").id
    a2 = store.jobs.create(wid, tid, 8, "q", "alice").id
    b1 = store.jobs.create(wid, tid, 8, "q", "bob").id
    assert store.jobs.claim_next([tid], "w1", STALE) == a1  # oldest, nobody served yet
    # alice has a running job: a second worker serves bob before alice's next one.
    assert store.jobs.claim_next([tid], "w2", STALE) == b1
    assert store.jobs.claim_next([tid], "w3", STALE) == a2


def test_claim_next_only_takes_jobs_of_its_targets(store: Store) -> None:
    ta, tb = _target(store, "a"), _target(store, "b")
    wid = store.catalog.get_or_create_workload("1", "{}", "matmul", {}, 1.0).id
    job_b = store.jobs.create(wid, tb, 8, "q").id
    assert store.jobs.claim_next([ta], "wa", STALE) is None
    assert store.jobs.get(job_b).state == JobState.QUEUED.value
    assert store.jobs.claim_next([ta, tb], "wab", STALE) == job_b


def test_worker_registry_and_live_targets(store: Store) -> None:
    ta, tb = _target(store, "a"), _target(store, "b")
    fingerprint = {"cpu_model": "test cpu", "physical_cores": 2, "tvm_version": "0.27"}
    store.fleet.register("w-a", "host1", 123, [ta], fingerprint)
    store.fleet.register("w-b", "host2", 456, [tb], fingerprint, {"tracker": "h:9190", "key": "k"})
    assert store.fleet.live_target_ids(STALE) == {ta, tb}
    store.fleet.heartbeat("w-a", 77)
    rows = {row.name: row for row in store.fleet.list_workers()}
    assert rows["w-a"].current_job_id == 77 and rows["w-a"].pid == 123
    assert rows["w-b"].rpc == {"tracker": "h:9190", "key": "k"}
    store.fleet.stopped("w-b")
    assert store.fleet.live_target_ids(STALE) == {ta}
    time.sleep(1.1)
    assert store.fleet.live_target_ids(timedelta(seconds=1)) == set()  # w-a went silent
    # A restarted worker of the same name replaces its row.
    store.fleet.register("w-b", "host2", 789, [ta, tb], fingerprint)
    rows = {row.name: row for row in store.fleet.list_workers()}
    assert len(rows) == 2 and rows["w-b"].pid == 789 and rows["w-b"].stopped_at is None
    assert store.fleet.live_target_ids(STALE) == {ta, tb}
