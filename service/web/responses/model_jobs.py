"""Whole-model jobs (``/models``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from typing_extensions import TypedDict

from service.web.responses.catalog import TargetOut
from service.web.responses.common import JobStateName, Timestamp


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


ModelState = Literal["tuning", "compiling", "succeeded", "failed", "cancelled"]


class ModelOut(TypedDict):
    """A whole-model job as ``/models`` routes show it (``tasks`` only on one model's page)."""

    id: int
    name: str
    format: ModelFormat
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
