"""``/api/v1/workers``: the worker fleet, live and stale."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Request

from schedules_db.models import utcnow
from service.auth import AnyReader
from service.schemas import iso
from service.strict_input import StrictRoute

router = APIRouter(prefix="/workers", tags=["workers"], route_class=StrictRoute)


@router.get("")
def list_workers(request: Request, who: AnyReader) -> list[dict[str, Any]]:
    """Every registered worker: ``live`` (heart-beating), ``stale`` (silent for longer than
    the stale limit: killed or cut off) or ``stopped`` (shut down cleanly)."""
    store = request.app.state.store
    stale_after = timedelta(seconds=request.app.state.settings.stale_after_s)
    now = utcnow()
    targets = {
        t.id: {"id": t.id, "label": t.label, "key": t.key} for t in store.catalog.list_targets()
    }
    workers = []
    for row in store.fleet.list_workers():
        beat = (
            row.heartbeat_at
            if row.heartbeat_at.tzinfo
            else row.heartbeat_at.replace(tzinfo=now.tzinfo)
        )
        age = (now - beat).total_seconds()
        status = (
            "stopped"
            if row.stopped_at
            else ("live" if age <= stale_after.total_seconds() else "stale")
        )
        workers.append(
            {
                "name": row.name,
                "hostname": row.hostname,
                "pid": row.pid,
                "status": status,
                "targets": [
                    targets.get(tid, {"id": tid, "label": "?", "key": "?"})
                    for tid in row.target_ids
                ],
                "fingerprint": row.fingerprint,
                "rpc": row.rpc,
                "current_job_id": row.current_job_id if status == "live" else None,
                "started_at": iso(row.started_at),
                "heartbeat_at": iso(row.heartbeat_at),
                "heartbeat_age_s": round(age, 1),
                "stopped_at": iso(row.stopped_at),
            }
        )
    return workers
