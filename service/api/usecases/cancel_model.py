"""Cancelling a whole-model job: its unfinished task jobs and, unless compiled, the model."""

from __future__ import annotations

from schedules_db import Store
from schedules_db.values import FINAL_STATES, ModelJob
from service.api.usecases.cancel_job import cancel_job
from service.app.actors import Identity, require_owner
from service.shared.queue import JobQueue
from service.web.errors import not_found


def cancel_model(store: Store, queue: JobQueue, who: Identity, model_id: int) -> ModelJob:
    """Cancel model ``model_id`` for ``who``; the model as it is now. Its task jobs still
    queued or running are cancelled as `cancel_job` cancels them (records measured so far stay:
    a later submission continues from them); a model still tuning is `cancelled` at once, one
    compiling gets ``cancel_requested``; a final model is unchanged. 404 for an unknown model,
    403 unless ``who`` submitted it or is an admin."""
    before = store.models.get(model_id)
    if before is None:
        raise not_found("model", model_id)
    require_owner(who, before.submitted_by, f"model {model_id}", "model_id")
    model = store.models.request_cancel(model_id)
    if model is None:
        raise not_found("model", model_id)
    for task in store.models.tasks(model_id):
        if task.job.state not in FINAL_STATES:
            cancel_job(store, queue, who, task.job.id)
    return model
