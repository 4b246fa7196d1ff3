"""A tuning job (``/jobs``, and each server-sent event's data)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from typing_extensions import TypedDict

from service.web.responses.catalog import JobOperator, TargetOut, WorkloadOut
from service.web.responses.common import JobStateName, Timestamp


class JobProgress(TypedDict):
    """How far a job's search got."""

    trials_done: int
    best_latency_us: float | None
    best_gflops: float | None


class JobOut(TypedDict):
    """A job as ``/jobs`` routes show it (and each server-sent event's data)."""

    id: int
    state: JobStateName
    operator: JobOperator
    workload: WorkloadOut
    target: TargetOut
    trials: int
    queue: str
    progress: JobProgress
    cache_hit: bool
    schedule_id: int | None
    attempt: int
    worker: str | None
    cancel_requested: bool
    error: str | None
    submitted_by: str | None
    priority: int
    transfer_cost_model: bool
    cost_model: str | None
    space: str
    waiting_for: Annotated[
        str | None,
        Field(
            description="queued jobs only (null otherwise): whether a live worker serves the target"
        ),
    ]
    created_at: Timestamp
    started_at: Timestamp | None
    finished_at: Timestamp | None
    heartbeat_at: Timestamp | None
