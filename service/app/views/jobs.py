"""How a job is shown: with its workload, target and what it waits for, read from the store and
built by `service.app.responses.jobs.job_json`. Shared by the routes and the dashboard."""

from __future__ import annotations

from datetime import timedelta

from schedules_db import Store
from schedules_db.values import Job, JobState, Target, WorkloadInfo
from service.app.responses.jobs import JobOut, job_json, waiting_reason
from service.app.rows import present
from service.shared.settings import Settings


def live_target_ids(store: Store, settings: Settings) -> set[int]:
    """The targets a live worker (one that heart-beat within the stale limit) serves."""
    return store.fleet.live_target_ids(timedelta(seconds=settings.stale_after_s))


def job_view(store: Store, settings: Settings, job: Job, live: set[int] | None = None) -> JobOut:
    """A job with its workload and target (see `job_with_parts`)."""
    workload = present(store.catalog.get_workload(job.workload_id), f"workload {job.workload_id}")
    target = present(store.catalog.get_target(job.target_id), f"target {job.target_id}")
    return job_with_parts(store, settings, job, workload, target, live)


def job_with_parts(
    store: Store,
    settings: Settings,
    job: Job,
    workload: WorkloadInfo,
    target: Target,
    live: set[int] | None = None,
) -> JobOut:
    """A job as JSON; a queued job says in ``waiting_for`` whether a live worker serves its
    target (``live``: the served target ids, when the caller shows many jobs; else read here)."""
    if job.state == JobState.QUEUED.value and live is None:
        live = live_target_ids(store, settings)  # read only for a queued job
    return job_json(job, workload, target, waiting_reason(job, target, live))
