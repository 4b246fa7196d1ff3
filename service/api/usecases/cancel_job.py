"""Cancelling a job: at once when it is queued, after the current batch when it runs."""

from __future__ import annotations

from schedules_db import Store
from schedules_db.values import Job, JobState
from service.app.actors import Identity, require_owner
from service.shared.queue import JobQueue
from service.web.errors import not_found


def cancel_job(store: Store, queue: JobQueue, who: Identity, job_id: int) -> Job:
    """Cancel job ``job_id`` for ``who`` and return it as it is now.

    A queued job becomes ``cancelled`` (its message is also revoked, as a best effort, where the
    broker can broadcast); a running one gets ``cancel_requested``, read by its worker after
    every batch (works on every broker); a final one is unchanged. 404 for an unknown job; 403
    unless ``who`` submitted it or is an admin.
    """
    before = store.jobs.get(job_id)
    if before is None:
        raise not_found("job", job_id)
    require_owner(who, before.submitted_by, f"job {job_id}", "job_id")
    job = store.jobs.request_cancel(job_id)
    if job is None:
        raise not_found("job", job_id)
    if before.state == JobState.QUEUED.value and job.state == JobState.CANCELLED.value:
        queue.revoke(job.task_id)
    return job
