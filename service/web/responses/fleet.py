"""Workers, the caller's identity and the health check (``/workers``, ``/me``, ``/healthz``)."""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import TypedDict

from service.web.responses.catalog import TargetRef
from service.web.responses.common import Number, Timestamp


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
