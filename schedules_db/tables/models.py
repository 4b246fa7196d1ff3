"""Whole-model jobs, their tasks, and the unverified answers lent from tuned neighbours."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from schedules_db.tables.base import Base, utcnow


class ModelRow(Base):
    """A whole-model job: an uploaded model (ONNX or Relax TVMScript, kept as an artifact),
    tuned through one ordinary job per extracted task (`ModelTaskRow`), then compiled whole by a
    worker of its target into an exported Relax VM library. ``state``: `tuning` while task jobs
    run, `compiling` while a worker owns the compile (``worker``, ``heartbeat_at``), then
    `succeeded`, `failed` or `cancelled`."""

    __tablename__ = "models"
    __table_args__ = (Index("ix_models_state", "state"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), nullable=False)
    format: Mapped[str] = mapped_column(String(16), nullable=False)  # "onnx" | "relax"
    # "plain" (convs as written) or "blocked" (NCHW[x]c kept between layers): its tasks are
    # those of that layout, and a build fetches them only in it.
    layout: Mapped[str] = mapped_column(String(16), nullable=False, default="plain",
                                        server_default="plain")  # fmt: skip
    # "float32" (as written) or "bfloat16" (matmuls and convs on bf16 operands, float32 sums):
    # its tasks are those of that precision, and a build fetches them only in it.
    precision: Mapped[str] = mapped_column(String(16), nullable=False, default="float32",
                                           server_default="float32")  # fmt: skip
    source_artifact_id: Mapped[int] = mapped_column(ForeignKey("artifacts.id"), nullable=False)
    inputs: Mapped[list[dict[str, Any]]] = mapped_column(JSON, nullable=False)
    outputs: Mapped[list[dict[str, Any]]] = mapped_column(JSON, nullable=False)
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), nullable=False)
    trials: Mapped[int] = mapped_column(Integer, nullable=False)
    # Trials held back when the tasks' jobs were created: once they are all final, these go to
    # the tasks furthest from their roofline (weighted by how often the model runs them).
    reserve_trials: Mapped[int] = mapped_column(Integer, nullable=False, default=0,
                                                server_default="0")  # fmt: skip
    queue: Mapped[str] = mapped_column(String(128), nullable=False)
    state: Mapped[str] = mapped_column(String(16), nullable=False)
    submitted_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    attempt: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    worker: Mapped[str | None] = mapped_column(String(255), nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    woken_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # The compiled model and what its worker measured (NULL until it succeeded).
    artifact_id: Mapped[int | None] = mapped_column(ForeignKey("artifacts.id"), nullable=True)
    tasks_applied: Mapped[int | None] = mapped_column(Integer, nullable=True)
    untuned_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    tuned_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_abs_error: Mapped[float | None] = mapped_column(Float, nullable=True)
    # A reduced-precision model's lowest cosine similarity to the float32 model (NULL: float32).
    min_cosine: Mapped[float | None] = mapped_column(Float, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class ModelTaskRow(Base):
    """One task of a model: a fused function (a user workload) with its weight in the model,
    the trials it was given and the job that tunes it."""

    __tablename__ = "model_tasks"
    __table_args__ = (UniqueConstraint("model_id", "position", name="uq_model_task"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id"), nullable=False)
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    name: Mapped[str] = mapped_column(String(255), nullable=False)
    weight: Mapped[int] = mapped_column(Integer, nullable=False)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"), nullable=False)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"), nullable=False)
    trials: Mapped[int] = mapped_column(Integer, nullable=False)


class NeighbourAnswerRow(Base):
    """An unverified answer for a workload without a verified best on a target: the best trace
    of its nearest tuned neighbour (``neighbour_schedule_id``), refitted to it in the jail.
    ``state`` is ``offered`` (served to lookups that allow it), ``withdrawn`` (it failed
    verification on a worker: never offered again) or ``superseded`` (a verified best exists);
    ``job_id`` is the job that verifies it and then tunes the workload."""

    __tablename__ = "neighbour_answers"
    __table_args__ = (
        UniqueConstraint(
            "workload_id",
            "target_id",
            "tvm_series",
            "neighbour_schedule_id",
            name="uq_neighbour_answer",
        ),  # fmt: skip
        Index("ix_neighbour_answers_lookup", "target_id", "workload_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"), nullable=False)
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), nullable=False)
    tvm_series: Mapped[str] = mapped_column(String(16), nullable=False)
    neighbour_schedule_id: Mapped[int] = mapped_column(ForeignKey("schedules.id"), nullable=False)
    neighbour_workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"), nullable=False)
    trace_json: Mapped[str] = mapped_column(Text, nullable=False)
    args_info: Mapped[list[Any]] = mapped_column(JSON, nullable=False)
    latency_us: Mapped[float] = mapped_column(Float, nullable=False)  # an estimate, by FLOP
    space: Mapped[str] = mapped_column(String(16), nullable=False)
    tvm_version: Mapped[str] = mapped_column(String(32), nullable=False)  # the neighbour's record
    packed_params: Mapped[list[dict[str, Any]]] = mapped_column(JSON, nullable=False)
    state: Mapped[str] = mapped_column(String(16), nullable=False)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id"), nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)  # why it was withdrawn
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
