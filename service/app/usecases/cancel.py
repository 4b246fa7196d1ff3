"""Cancelling, written once for every caller: a job (at once when it is queued, after the current
batch when it runs) and a whole-model job. The API's cancel routes, the dashboard's offer of the
button (`may_cancel`), the worker (a model's second-round jobs it will not run) and the reaper
(models cancelled while compiling whose worker is gone) all come here."""

from __future__ import annotations

from datetime import timedelta

from schedules_db import Store
from schedules_db.tokens import SUBMIT
from schedules_db.values import FINAL_STATES, Job, JobState, ModelJob
from service.app.actors import Identity, require_owner
from service.app.refusals import NotFound
from service.shared.queue import JobQueue


def cancel_job(store: Store, queue: JobQueue | None, who: Identity | None, job_id: int) -> Job:
    """Cancel job ``job_id`` for ``who`` and return it as it is now.

    A queued job becomes ``cancelled`` (its message is also revoked, as a best effort, where the
    broker can broadcast); a running one gets ``cancel_requested``, read by its worker after
    every batch (works on every broker); a final one is unchanged. `NotFound` for an unknown
    job; `Forbidden` unless ``who`` submitted it or is an admin. ``who`` None: the service's own
    cancel (the worker's: no ownership to check); ``queue`` None: nothing to revoke (a job
    never sent).
    """
    before = store.jobs.get(job_id)
    if before is None:
        raise NotFound("job", job_id)
    if who is not None:
        require_owner(who, before.submitted_by, f"job {job_id}", "job_id")
    job = store.jobs.request_cancel(job_id)
    if job is None:
        raise NotFound("job", job_id)
    if (
        queue is not None
        and before.state == JobState.QUEUED.value
        and job.state == JobState.CANCELLED.value
    ):
        queue.revoke(job.task_id)
    return job


def cancel_model(store: Store, queue: JobQueue, who: Identity, model_id: int) -> ModelJob:
    """Cancel model ``model_id`` for ``who``; the model as it is now. Its task jobs still
    queued or running are cancelled as `cancel_job` cancels them (records measured so far stay:
    a later submission continues from them); a model still tuning is `cancelled` at once, one
    compiling gets ``cancel_requested``; a final model is unchanged. `NotFound` for an unknown
    model, `Forbidden` unless ``who`` submitted it or is an admin."""
    before = store.models.get(model_id)
    if before is None:
        raise NotFound("model", model_id)
    require_owner(who, before.submitted_by, f"model {model_id}", "model_id")
    model = store.models.request_cancel(model_id)
    if model is None:
        raise NotFound("model", model_id)
    for task in store.models.tasks(model_id):
        if task.job.state not in FINAL_STATES:
            cancel_job(store, queue, who, task.job.id)
    return model


def may_cancel(who: Identity, job: Job) -> bool:
    """Whether ``who`` may cancel ``job`` (what the dashboard offers): a job not final, a caller
    with ``submit`` (the route's rule) who submitted it or is an admin (`cancel_job`'s)."""
    return job.state not in FINAL_STATES and who.can(SUBMIT) and who.owns(job.submitted_by)


def cancel_abandoned_models(store: Store, stale_after: timedelta) -> list[int]:
    """Models cancelled while compiling whose worker is gone (silent for ``stale_after``):
    ``cancelled`` now; their ids (the reaper's sweep)."""
    return store.models.cancel_abandoned(stale_after)
