"""``/api/v1/workers``: the worker fleet, live and stale."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from fastapi import APIRouter

from schedules_db.values import Worker
from service.api.deps import SettingsDep, StoreDep
from service.api.models import WorkerOut
from service.auth import AnyReader
from service.schemas import iso
from service.strict_input import StrictRoute

router = APIRouter(prefix="/workers", tags=["workers"], route_class=StrictRoute)


@router.get("", response_model=list[WorkerOut])
def list_workers(who: AnyReader, store: StoreDep, settings: SettingsDep) -> list[dict[str, Any]]:
    """Every registered worker: ``live`` (heart-beating), ``stale`` (silent for longer than
    the stale limit: killed or cut off) or ``stopped`` (shut down cleanly)."""
    now = datetime.now(timezone.utc)
    stale_after = timedelta(seconds=settings.stale_after_s)
    targets = {
        t.id: {"id": t.id, "label": t.label, "key": t.key} for t in store.catalog.list_targets()
    }
    return [
        _worker_json(worker, targets, now, stale_after) for worker in store.fleet.list_workers()
    ]


def _worker_json(
    worker: Worker, targets: dict[int, dict[str, Any]], now: datetime, stale_after: timedelta
) -> dict[str, Any]:
    beat = (
        worker.heartbeat_at
        if worker.heartbeat_at.tzinfo
        else worker.heartbeat_at.replace(tzinfo=now.tzinfo)
    )
    age = (now - beat).total_seconds()
    status = (
        "stopped"
        if worker.stopped_at
        else ("live" if age <= stale_after.total_seconds() else "stale")
    )
    return {
        "name": worker.name,
        "hostname": worker.hostname,
        "pid": worker.pid,
        "status": status,
        "targets": [
            targets.get(tid, {"id": tid, "label": "?", "key": "?"}) for tid in worker.target_ids
        ],
        "fingerprint": worker.fingerprint,
        "rpc": worker.rpc,
        "current_job_id": worker.current_job_id if status == "live" else None,
        "started_at": iso(worker.started_at),
        "heartbeat_at": iso(worker.heartbeat_at),
        "heartbeat_age_s": round(age, 1),
        "stopped_at": iso(worker.stopped_at),
    }
