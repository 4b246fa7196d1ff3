"""The fleet: the worker registry (who runs, on which targets and hardware, with a heartbeat).

Owns the ``workers`` table, one row per worker name (a restarted worker replaces its row). The
registry is informational and for routing: which targets have a live worker (the API's
``waiting_for``, which targets a job may name), never who owns a job (that is the ``jobs``
row's ``worker``, see `schedules_db.store.jobs`). Durability: each write is committed before
it returns; a heartbeat of an unknown name changes nothing.

Thread safety: no state besides immutable configuration; each call opens its own session and
returns frozen `Worker` values or sets of ints (see `schedules_db.store.base`). The worker's
heartbeat thread and the API's threads share one instance.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select, update

from schedules_db.store.base import Aggregate
from schedules_db.tables import (
    WorkerRow,
    utcnow,
)
from schedules_db.values import Worker, value_of


class Fleet(Aggregate):
    """The worker registry: who runs, on which targets and hardware, with a heartbeat."""

    def register(
        self,
        name: str,
        hostname: str,
        pid: int,
        target_ids: list[int],
        fingerprint: dict[str, Any],
        rpc: dict[str, Any] | None = None,
    ) -> Worker:
        """Record a worker that starts (a restarted worker of the same name replaces its row)."""
        now = utcnow()
        values = {
            "hostname": hostname,
            "pid": pid,
            "target_ids": list(target_ids),
            "fingerprint": fingerprint,
            "rpc": rpc,
            "current_job_id": None,
            "started_at": now,
            "heartbeat_at": now,
            "stopped_at": None,
        }
        with self._session() as s:
            row = s.scalar(select(WorkerRow).where(WorkerRow.name == name))
            if row is None:
                row = WorkerRow(name=name, **values)
                s.add(row)
            else:
                for key, value in values.items():
                    setattr(row, key, value)
            s.flush()
            return value_of(Worker, row)

    def heartbeat(self, name: str, current_job_id: int | None) -> None:
        """A live worker's periodic sign of life, with the job it is running."""
        with self._session() as s:
            s.execute(
                update(WorkerRow)
                .where(WorkerRow.name == name)
                .values(heartbeat_at=utcnow(), current_job_id=current_job_id, stopped_at=None)
            )

    def stopped(self, name: str) -> None:
        """A worker that shuts down cleanly says so (a killed one just goes stale)."""
        with self._session() as s:
            s.execute(
                update(WorkerRow)
                .where(WorkerRow.name == name)
                .values(stopped_at=utcnow(), current_job_id=None)
            )

    def list_workers(self) -> list[Worker]:
        """Every worker ever registered, most recent heartbeat first."""
        with self._session() as s:
            rows = s.scalars(select(WorkerRow).order_by(WorkerRow.heartbeat_at.desc()))
            return [value_of(Worker, row) for row in rows]

    def live_target_ids(self, stale_after: timedelta) -> set[int]:
        """Targets served by at least one worker that heart-beat within ``stale_after``."""
        cutoff = utcnow() - stale_after
        with self._session() as s:
            rows = s.scalars(
                select(WorkerRow).where(
                    WorkerRow.stopped_at.is_(None), WorkerRow.heartbeat_at >= cutoff
                )
            ).all()
        return {target_id for row in rows for target_id in row.target_ids}

    def registered_target_ids(self) -> set[int]:
        """Targets some worker ever registered for, live or not (the targets a job may name
        without the admin scope)."""
        with self._session() as s:
            lists = s.scalars(select(WorkerRow.target_ids)).all()
        return {target_id for ids in lists for target_id in ids}
