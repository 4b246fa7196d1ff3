"""Whole-model jobs (``/models``)."""

from __future__ import annotations

from typing import Annotated, Literal, cast

from pydantic import Field
from typing_extensions import TypedDict

from schedules_db.values import (
    FINAL_STATES,
    Artifact,
    JobState,
    ModelJob,
    ModelTaskProgress,
    Target,
)
from service.app.responses.catalog import TargetOut, target_json
from service.app.responses.common import JobStateName, Timestamp, iso


class ModelInputOut(TypedDict):
    """An input of a model: its graph name, shape and dtype."""

    name: str
    shape: list[int]
    dtype: str


class ModelOutputOut(TypedDict):
    """An output of a model: shape and dtype."""

    shape: list[int]
    dtype: str


class ModelProgress(TypedDict):
    """A model's progress, summed over its tasks' jobs."""

    tasks: int
    tasks_done: Annotated[
        int, Field(description="tasks whose job is final (succeeded, failed, cancelled)")
    ]
    tasks_cache_hit: int
    tasks_failed: int
    trials: Annotated[int, Field(description="the trials given to the tasks so far")]
    trials_done: int
    reserve_trials: Annotated[
        int,
        Field(
            description="trials held back until every task is measured, then given to the tasks "
            "furthest from their roofline (0 once spent)"
        ),
    ]


class ModelResult(TypedDict):
    """The compiled model and what its worker measured, untuned and tuned, side by side."""

    artifact_sha256: str
    artifact_size: int
    tasks_applied: Annotated[
        int | None, Field(description="tasks compiled with their tuned schedule")
    ]
    untuned_ms: float | None
    tuned_ms: float | None
    speedup_vs_untuned: float | None
    max_abs_error: Annotated[
        float | None, Field(description="tuned vs untuned output, same inputs")
    ]
    min_cosine: Annotated[
        float | None,
        Field(
            description="a bfloat16 model's lowest cosine similarity to the float32 model "
            "over the compile's seeded inputs (at least 0.999, or it is refused); null for "
            "float32"
        ),
    ]


class ModelTaskJob(TypedDict):
    """The job that tunes one task of a model."""

    id: int
    state: JobStateName
    space: str
    trials_done: int
    best_latency_us: float | None
    cache_hit: bool
    schedule_id: int | None
    error: str | None


class ModelTaskOut(TypedDict):
    """One task of a model: a fused function, its weight (calls per run), its budget."""

    position: int
    name: str
    weight: int
    trials: int
    workload_id: int
    job: ModelTaskJob


ModelFormat = Literal["onnx", "relax"]
ModelLayout = Literal["plain", "blocked"]
ModelPrecision = Literal["float32", "bfloat16"]


ModelState = Literal["tuning", "compiling", "succeeded", "failed", "cancelled"]


class ModelOut(TypedDict):
    """A whole-model job as ``/models`` routes show it (``tasks`` only on one model's page)."""

    id: int
    name: str
    format: ModelFormat
    layout: Annotated[
        ModelLayout,
        Field(description="the layout its convolutions were tuned in (a build fetches in it)"),
    ]
    precision: Annotated[
        ModelPrecision,
        Field(description="the precision of its matmuls and convolutions (a build fetches in it)"),
    ]
    state: ModelState
    target: TargetOut
    trials: int
    inputs: list[ModelInputOut]
    outputs: list[ModelOutputOut]
    progress: ModelProgress
    result: ModelResult | None
    cancel_requested: bool
    attempt: int
    worker: str | None
    error: str | None
    submitted_by: str | None
    created_at: Timestamp
    started_at: Timestamp | None
    finished_at: Timestamp | None
    tasks: list[ModelTaskOut] | None


def model_json(
    model: ModelJob,
    target: Target,
    tasks: list[ModelTaskProgress],
    artifact: Artifact | None,
    with_tasks: bool,
) -> ModelOut:
    """A model as JSON: progress summed over its ``tasks``' jobs (and the tasks themselves when
    ``with_tasks``); ``result`` once it is compiled (``artifact``)."""
    result: ModelResult | None = None
    if artifact is not None:
        tuned, untuned = model.tuned_ms, model.untuned_ms
        result = {
            "artifact_sha256": artifact.sha256,
            "artifact_size": artifact.size,
            "tasks_applied": model.tasks_applied,
            "untuned_ms": untuned,
            "tuned_ms": tuned,
            "speedup_vs_untuned": untuned / tuned if tuned and untuned else None,
            "max_abs_error": model.max_abs_error,
            "min_cosine": model.min_cosine,
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
        "layout": cast(ModelLayout, model.layout),
        "precision": cast(ModelPrecision, model.precision),
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
