"""The broker's consumer on a worker: Celery's task handler that a message (one per job,
carrying only its id) wakes; the store picks the job it runs (`service.worker.execution`)."""

from __future__ import annotations

import logging

from celery import Celery

from service.shared.queue import CELERY_TASK_NAME
from service.worker.execution import WorkerContext, run_next

log = logging.getLogger("tunehub.worker")


def register_consumer(app: Celery, context: WorkerContext) -> None:
    """Register the handler of `CELERY_TASK_NAME` on ``app``, bound to this worker's
    ``context``.

    A message only wakes the worker: it runs the job the store says comes next on its targets
    (priority, fair share, age; see the jobs aggregate's ``claim_next``), which is usually but
    not always the message's job id. Every queued job has a message, so every one gets its
    turn."""

    def tune_job(job_id: int) -> str:
        log.debug("woken by job %s", job_id)
        return run_next(context)

    app.task(name=CELERY_TASK_NAME, bind=False, acks_late=True)(tune_job)
