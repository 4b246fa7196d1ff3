"""Workers, the caller's identity and the health check (``/workers``, ``/me``, ``/healthz``)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from typing_extensions import TypedDict

from schedules_db.values import Worker
from service.app.responses.catalog import TargetRef
from service.app.responses.common import Number, Timestamp, iso


class WorkerOut(TypedDict):
    """A registered worker: ``live``, ``stale`` (silent past the stale limit) or ``stopped``."""

    name: str
    hostname: str
    pid: int
    status: Literal["live", "stale", "stopped"]
    targets: list[TargetRef]
    fingerprint: dict[str, Any]
    rpc: dict[str, Any] | None
    current_job_id: int | None
    started_at: Timestamp
    heartbeat_at: Timestamp
    heartbeat_age_s: float
    stopped_at: Timestamp | None


class Limits(TypedDict):
    """The limits that apply to an identity (0: off)."""

    write_rate_per_s: Number
    write_burst: int
    max_active_jobs: int
    max_trials: int


class MeOut(TypedDict):
    """``GET /me``: the identity, its scopes, its token and its limits."""

    identity: str
    auth: bool
    token_id: int | None
    granted: list[str]
    scopes: list[str]
    expires_at: Timestamp | None
    limits: Limits


class Health(TypedDict):
    """``GET /healthz``."""

    status: Literal["ok"]


def worker_json(
    worker: Worker, targets: dict[int, TargetRef], now: datetime, stale_after: timedelta
) -> WorkerOut:
    """A worker as ``GET /workers`` shows it: ``live``, ``stale`` or ``stopped`` by its last
    heartbeat at ``now``, its targets (``targets``: id → {id, label, key}) by name."""
    beat = (
        worker.heartbeat_at
        if worker.heartbeat_at.tzinfo
        else worker.heartbeat_at.replace(tzinfo=now.tzinfo)
    )
    age = (now - beat).total_seconds()
    status: Literal["live", "stale", "stopped"] = (
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
