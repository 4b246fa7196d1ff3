"""The fleet aggregate (the worker registry and which targets have a live worker), on SQLite
and on PostgreSQL. Who runs next (priority, fair share) is the jobs aggregate's:
test_jobs_store.py."""

from __future__ import annotations

from datetime import timedelta

from schedules_db.store import Store
from schedules_db.values import Worker
from tests.schedules_db.store_data import STALE, target
from tests.waiting import eventually


def test_worker_registry_and_live_targets(store: Store) -> None:
    ta, tb = target(store, "a"), target(store, "b")
    fingerprint = {"cpu_model": "test cpu", "physical_cores": 2, "tvm_version": "0.27"}
    registered = store.fleet.register("w-a", "host1", 123, [ta], fingerprint)
    assert isinstance(registered, Worker) and registered.target_ids == [ta]
    store.fleet.register("w-b", "host2", 456, [tb], fingerprint, {"tracker": "h:9190", "key": "k"})
    assert store.fleet.live_target_ids(STALE) == {ta, tb}
    store.fleet.heartbeat("w-a", 77)
    rows = {row.name: row for row in store.fleet.list_workers()}
    assert rows["w-a"].current_job_id == 77 and rows["w-a"].pid == 123
    assert rows["w-b"].rpc == {"tracker": "h:9190", "key": "k"}
    store.fleet.stopped("w-b")
    assert store.fleet.live_target_ids(STALE) == {ta}
    silent = timedelta(milliseconds=100)  # w-a goes silent: no beat within the last 0.1 s
    eventually(lambda: store.fleet.live_target_ids(silent) == set(), what="w-a still live")
    assert store.fleet.registered_target_ids() == {ta, tb}  # live or not
    # A restarted worker of the same name replaces its row.
    store.fleet.register("w-b", "host2", 789, [ta, tb], fingerprint)
    rows = {row.name: row for row in store.fleet.list_workers()}
    assert len(rows) == 2 and rows["w-b"].pid == 789 and rows["w-b"].stopped_at is None
    assert store.fleet.live_target_ids(STALE) == {ta, tb}
    store.fleet.heartbeat("nobody", None)  # an unknown name changes nothing
    assert len(store.fleet.list_workers()) == 2
