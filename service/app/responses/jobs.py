"""A tuning job (``/jobs``, and each server-sent event's data)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from typing_extensions import TypedDict

from schedules_db.values import Job, JobState, Target, WorkloadInfo
from service.app.responses.catalog import (
    JobOperator,
    TargetOut,
    WorkloadOut,
    target_json,
    workload_json,
)
from service.app.responses.common import JobStateName, Timestamp, gflops, iso


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


def job_json(
    job: Job, workload: WorkloadInfo, target: Target, waiting_for: str | None = None
) -> JobOut:
    """A job as the API shows it (`JobOut`); ``waiting_for`` is what a queued job waits for
    (`waiting_reason`; `service.app.views.jobs.job_with_parts` reads what it needs)."""
    return {
        "id": job.id,
        "state": job.state,
        "operator": {"name": workload.operator, "params": workload.params},
        "workload": workload_json(workload),
        "target": target_json(target),
        "trials": job.trials,
        "queue": job.queue,
        "progress": {
            "trials_done": job.trials_done,
            "best_latency_us": job.best_latency_us,
            "best_gflops": gflops(workload.flop, job.best_latency_us),
        },
        "cache_hit": job.cache_hit,
        "schedule_id": job.schedule_id,
        "attempt": job.attempt,
        "worker": job.worker,
        "cancel_requested": job.cancel_requested,
        "error": job.error,
        "submitted_by": job.submitted_by,
        "priority": job.priority,
        "transfer_cost_model": job.transfer_cost_model,
        "cost_model": job.cost_model,
        "space": job.space,
        "waiting_for": waiting_for,
        "created_at": iso(job.created_at),
        "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at),
        "heartbeat_at": iso(job.heartbeat_at),
    }


def waiting_reason(job: Job, target: Target, live: set[int] | None) -> str | None:
    """What a queued job waits for (None for any other): ``live``, the targets a live worker
    serves (read for a queued job only)."""
    if job.state != JobState.QUEUED.value:
        return None
    assert live is not None
    if job.target_id not in live:
        return f"no live worker serves target {target.label} ({target.key})"
    return "a free worker of this target"
