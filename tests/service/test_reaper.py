"""The reaper keeps the real SQLite broker in step with the job table."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.tables import utcnow
from service.entry.reaper import Reaper
from service.shared.queue import JobQueue
from service.shared.settings import Settings
from tests.waiting import eventually


def _messages(broker_db: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(broker_db) as conn:
        return conn.execute(
            "SELECT m.payload, m.visible FROM kombu_message m ORDER BY m.id"
        ).fetchall()


def test_reaper_resends_lost_and_stale_jobs_and_purges_delivered(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, stale_after_s=0.0, requeue_after_s=0.0)
    engine = make_engine(settings.store_url)
    upgrade_schema(engine)
    store = Store(engine)
    target = store.catalog.get_or_create_target({"kind": "llvm"}, "llvm", "llvm", {})
    workload = store.catalog.get_or_create_workload("1", "{}", "matmul", {}, 1.0)
    never_sent = store.jobs.create(workload.id, target.id, 8, "tunehub.q")
    crashed = store.jobs.create(workload.id, target.id, 8, "tunehub.q")
    assert store.jobs.claim(crashed.id, "dead", timedelta(seconds=90))
    # Stale (after 0 s) once the clock has moved past its last beat: polled, not slept for.
    beaten = store.jobs.get(crashed.id).heartbeat_at.replace(tzinfo=None)
    eventually(lambda: utcnow().replace(tzinfo=None) > beaten)

    queue = JobQueue(settings)
    try:
        counts = Reaper(store, queue, settings).sweep()
    finally:
        queue.close()
    assert counts["requeued_stale"] == 1 and counts["resent"] == 2
    job = store.jobs.get(crashed.id)
    assert job.state == "queued" and "dead" in job.error
    assert store.jobs.get(never_sent.id).enqueued_at is not None
    payloads = [p for p, _ in _messages(tmp_path / "broker.db")]
    assert any(f"[{never_sent.id}]" in p for p in payloads)
    assert any(f"[{crashed.id}]" in p for p in payloads)

    # Delivered messages (visible = 0) are deleted by the next sweep; pending ones stay.
    with sqlite3.connect(tmp_path / "broker.db") as conn:
        conn.execute(
            "UPDATE kombu_message SET visible = 0 WHERE id = (SELECT MIN(id) FROM kombu_message)"
        )
    from service.entry.reaper import purge_delivered_sqlite_messages

    assert purge_delivered_sqlite_messages(settings.broker) == 1
    assert all(visible for _, visible in _messages(tmp_path / "broker.db"))
    engine.dispose()
