"""How the routes show a whole-model job: its tasks with their jobs' progress, its compile and
what it measured (the JSON `service.web.responses.ModelOut` documents)."""

from __future__ import annotations

from typing import cast

from schedules_db import Store
from schedules_db.values import FINAL_STATES, JobState, ModelJob
from service.api.views import present
from service.web.builders import iso, target_json
from service.web.responses import (
    ModelFormat,
    ModelInputOut,
    ModelOut,
    ModelOutputOut,
    ModelResult,
    ModelState,
    ModelTaskOut,
)


def model_view(store: Store, model: ModelJob, with_tasks: bool = True) -> ModelOut:
    """A model as JSON: progress summed over its tasks' jobs (and the tasks themselves when
    ``with_tasks``); ``result`` once it is compiled."""
    target = present(store.catalog.get_target(model.target_id), f"target {model.target_id}")
    tasks = store.models.tasks(model.id)
    result: ModelResult | None = None
    if model.artifact_id is not None:
        artifact = present(store.schedules.get_artifact(model.artifact_id), "artifact")
        tuned, untuned = model.tuned_ms, model.untuned_ms
        result = {
            "artifact_sha256": artifact.sha256,
            "artifact_size": artifact.size,
            "tasks_applied": model.tasks_applied,
            "untuned_ms": untuned,
            "tuned_ms": tuned,
            "speedup_vs_untuned": untuned / tuned if tuned and untuned else None,
            "max_abs_error": model.max_abs_error,
        }
    task_list: list[ModelTaskOut] | None = (
        [
            {
                "position": t.task.position,
                "name": t.task.name,
                "weight": t.task.weight,
                "trials": t.task.trials,
                "workload_id": t.task.workload_id,
                "job": {
                    "id": t.job.id,
                    "state": t.job.state,
                    "space": t.job.space,
                    "trials_done": t.job.trials_done,
                    "best_latency_us": t.job.best_latency_us,
                    "cache_hit": t.job.cache_hit,
                    "schedule_id": t.job.schedule_id,
                    "error": t.job.error,
                },
            }
            for t in tasks
        ]
        if with_tasks
        else None
    )
    # The store keeps what the model's parser wrote: the shapes these types declare.
    inputs = cast(list[ModelInputOut], model.inputs)
    outputs = cast(list[ModelOutputOut], model.outputs)
    return {
        "id": model.id,
        "name": model.name,
        "format": cast(ModelFormat, model.format),
        "state": cast(ModelState, model.state),
        "target": target_json(target),
        "trials": model.trials,
        "inputs": inputs,
        "outputs": outputs,
        "progress": {
            "tasks": len(tasks),
            "tasks_done": sum(t.job.state in FINAL_STATES for t in tasks),
            "tasks_cache_hit": sum(t.job.cache_hit for t in tasks),
            "tasks_failed": sum(t.job.state == JobState.FAILED.value for t in tasks),
            "trials": sum(t.task.trials for t in tasks),
            "trials_done": sum(min(t.job.trials_done, t.task.trials) for t in tasks),
            "reserve_trials": model.reserve_trials,
        },
        "result": result,
        "cancel_requested": model.cancel_requested,
        "attempt": model.attempt,
        "worker": model.worker,
        "error": model.error,
        "submitted_by": model.submitted_by,
        "created_at": iso(model.created_at),
        "started_at": iso(model.started_at),
        "finished_at": iso(model.finished_at),
        "tasks": task_list,
    }
