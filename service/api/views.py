"""How the routes show the store's values: a job with its workload, target and what it waits
for; a schedule with its parts. Shared by the route modules and the use cases (route modules
never import one another).

Each view reads what it needs from the store and returns the JSON of `service.web.schemas` (whose
shapes `service.web.responses` documents).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import TypeVar

from schedules_db import Store, lookups
from schedules_db.values import Job, JobState, ScheduleInfo, Target, WorkloadInfo
from service.app.responses.catalog import TargetRef
from service.app.responses.fleet import WorkerOut, worker_json
from service.app.responses.jobs import JobOut, job_json, waiting_reason
from service.app.responses.schedules import ScheduleOut, schedule_json
from service.shared.settings import Settings
from service.web.fast_json import compact_json, with_raw_fields

T = TypeVar("T")


class MissingRow(LookupError):
    """A row another row points to is gone (the schema's foreign keys forbid it: a 500)."""


def present(value: T | None, what: str) -> T:
    """``value``, or `MissingRow` naming ``what`` when the store found nothing."""
    if value is None:
        raise MissingRow(f"{what} not found")
    return value


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


def schedule_view(store: Store, schedule: ScheduleInfo) -> ScheduleOut:
    """A schedule as lists show it, its parts read from the store (no record: ``tvm_version``
    is null, as in ``GET /schedules``)."""
    return schedule_json(
        schedule,
        present(store.catalog.get_workload(schedule.workload_id), "workload"),
        present(store.catalog.get_target(schedule.target_id), "target"),
        present(store.schedules.get_artifact(schedule.artifact_id), "artifact"),
    )


def schedule_detail_bytes(parts: lookups.ScheduleDetail) -> bytes:
    """A schedule as `service.web.builders.schedule_detail_json` shows it, as JSON bytes: the stored
    trace text goes in as it is (compacted once per text), not parsed and re-serialised."""
    body = schedule_json(*parts)
    trace = compact_json(parts.record.trace_json) if parts.record else "[[],[]]"
    return with_raw_fields(body, {"trace": trace, "tir": json.dumps(parts.schedule.tir)})


def workers_view(store: Store, settings: Settings) -> list[WorkerOut]:
    """Every registered worker as ``GET /workers`` shows it (see `worker_view`)."""
    now = datetime.now(timezone.utc)
    stale_after = timedelta(seconds=settings.stale_after_s)
    targets: dict[int, TargetRef] = {
        t.id: {"id": t.id, "label": t.label, "key": t.key} for t in store.catalog.list_targets()
    }
    return [worker_json(worker, targets, now, stale_after) for worker in store.fleet.list_workers()]
