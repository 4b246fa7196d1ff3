"""Handing a queued job to the broker: the one place a job id is sent and its message recorded.

The job table is the source of truth, so a job the broker cannot take now is not lost: it stays
``queued`` without ``enqueued_at`` and the reaper (`service.entry.reaper`) sends it after
``Settings.requeue_after_s``. The use cases behind the routes use `dispatch_or_defer` (the request
succeeds either way); the reaper uses `dispatch` (a broker that is down ends its sweep; the next
sweep retries).
"""

from __future__ import annotations

import logging

from schedules_db import Store
from schedules_db.values import Job, ModelJob
from service.shared.queue import JobQueue

log = logging.getLogger("tunehub.api")


def dispatch(store: Store, queue: JobQueue, job: Job) -> None:
    """Send ``job`` on its queue and record the message's task id (``enqueued_at`` now).
    Raises what the broker raises."""
    task_id = queue.enqueue(job.id, job.queue)
    store.jobs.mark_enqueued(job.id, task_id)


def dispatch_or_defer(store: Store, queue: JobQueue, job: Job) -> bool:
    """`dispatch`, or, when the broker refuses, log it and leave the job to the reaper.
    Returns whether the job was sent."""
    try:
        dispatch(store, queue, job)
    except Exception:  # the broker is down: the job is recorded; the reaper sends it later
        log.exception("could not enqueue job %s; the reaper will retry", job.id)
        return False
    return True


def wake_compile(store: Store, queue: JobQueue, model: ModelJob) -> None:
    """Wake a worker of the model's target to compile it (a message without a job of its own:
    `service.worker.execution.run_next` claims ready compiles first) and record it. Raises what
    the broker raises."""
    queue.enqueue(0, model.queue)
    store.models.mark_woken(model.id)


def wake_compile_or_defer(store: Store, queue: JobQueue, model: ModelJob) -> bool:
    """`wake_compile`, or, when the broker refuses, leave it to the reaper."""
    try:
        wake_compile(store, queue, model)
    except Exception:  # the model is recorded; the reaper wakes a worker later
        log.exception("could not wake a worker for model %s; the reaper will retry", model.id)
        return False
    return True
