"""How a whole-model job is shown: its tasks with their jobs' progress, its compile and what it
measured, read from the store and built by `service.app.responses.model_jobs.model_json`."""

from __future__ import annotations

from schedules_db import Store
from schedules_db.values import ModelJob
from service.app.responses.model_jobs import ModelOut, model_json
from service.app.rows import present


def model_view(store: Store, model: ModelJob, with_tasks: bool = True) -> ModelOut:
    """A model as JSON: progress summed over its tasks' jobs (and the tasks themselves when
    ``with_tasks``); ``result`` once it is compiled."""
    target = present(store.catalog.get_target(model.target_id), f"target {model.target_id}")
    tasks = store.models.tasks(model.id)
    artifact = (
        present(store.schedules.get_artifact(model.artifact_id), "artifact")
        if model.artifact_id is not None
        else None
    )
    return model_json(model, target, tasks, artifact, with_tasks)
