"""SQLAlchemy 2 models of the tunehub store (see the `Store` docstring for the contract)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    """Timezone-aware current time in UTC (every timestamp in the store is UTC)."""
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    """Declarative base of every tunehub table."""


class TargetRow(Base):
    """A hardware target: canonical TVM target JSON and the key derived from it, and a label for
    people that names this one target (unique; see `CatalogRows.get_or_create_target`)."""

    __tablename__ = "targets"
    __table_args__ = (Index("ix_targets_label", "label", unique=True),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    canonical_json: Mapped[str] = mapped_column(Text, nullable=False)
    kind: Mapped[str] = mapped_column(String(32), nullable=False)
    label: Mapped[str] = mapped_column(String(128), nullable=False)
    fingerprint: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # fp32 FMA GFLOPS a worker of this target measured at its start (tuning.hardware.peak);
    # NULL until one did (non-CPU targets, RPC devices).
    peak_gflops: Mapped[float | None] = mapped_column(Float, nullable=True)
    # GB/s a worker's streaming kernel reached in the cores' caches (at most cache_bytes in
    # all), in the shared last-level cache (at most llc_bytes; NULL where there is none) and in
    # memory (tuning.hardware.bandwidth); NULL until one measured them.
    cache_gbps: Mapped[float | None] = mapped_column(Float, nullable=True)
    memory_gbps: Mapped[float | None] = mapped_column(Float, nullable=True)
    cache_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    llc_gbps: Mapped[float | None] = mapped_column(Float, nullable=True)
    llc_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class WorkloadRow(Base):
    """A tunable function: the PrimFunc as TVM JSON, its structural hash and where it came from."""

    __tablename__ = "workloads"
    __table_args__ = (UniqueConstraint("shash", "origin", name="uq_workload_origin"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    shash: Mapped[str] = mapped_column(String(32), nullable=False)
    # "catalog": built by the service from the operator catalog; "user": raw TIR or imported,
    # parsed in isolation. Keyed apart, so user input never takes over a catalog identity.
    origin: Mapped[str] = mapped_column(String(16), nullable=False, server_default="catalog")
    operator: Mapped[str | None] = mapped_column(String(64), nullable=True)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False, default=dict)
    mod_json: Mapped[str] = mapped_column(Text, nullable=False)
    flop: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    # What a kernel must read and write at the least (its parameters, each once: tuning.ir.
    # bytes_moved); set by the first worker that loads the workload, NULL until then.
    bytes_moved: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # A user workload's first submitter: who may import records for it (None: the catalog's,
    # or no identity recorded).
    owner: Mapped[str | None] = mapped_column(String(128), nullable=True)


class JobRow(Base):
    """A tuning job. This table, not the broker, is the source of truth of a job's state."""

    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_state", "state"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"), nullable=False)
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), nullable=False)
    trials: Mapped[int] = mapped_column(Integer, nullable=False)
    state: Mapped[str] = mapped_column(String(16), nullable=False)
    queue: Mapped[str] = mapped_column(String(128), nullable=False)
    attempt: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    worker: Mapped[str | None] = mapped_column(String(255), nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    trials_done: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    best_latency_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    cache_hit: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    # No foreign key: schedules -> tuning_records -> jobs would form a cycle.
    schedule_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    submitted_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    priority: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    task_id: Mapped[str | None] = mapped_column(String(64), nullable=True)  # last broker message
    # Start the search from the target's transferred cost model (tuning.search.cost_model)?
    transfer_cost_model: Mapped[bool] = mapped_column(
        Boolean, nullable=False, default=True, server_default=true()
    )
    cost_model: Mapped[str | None] = mapped_column(String(255), nullable=True)  # the file used
    # The search space: "plain" (MetaSchedule's default) or "packed" (constant operands' layout
    # free, tiles for the vector width); see tuning.search.spaces.
    space: Mapped[str] = mapped_column(String(16), nullable=False, server_default="plain")
    enqueued_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class JobStageRow(Base):
    """How long one stage of a job's run took on its worker ("search" or "verification"),
    one row each time a worker completed that stage (a requeued job's second search is a
    second row). Read by the metrics (`schedules_db.gauges`); nothing else depends on it."""

    __tablename__ = "job_stages"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"), nullable=False)
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), nullable=False)
    stage: Mapped[str] = mapped_column(String(16), nullable=False)
    seconds: Mapped[float] = mapped_column(Float, nullable=False)
    finished_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TuningRecordRow(Base):
    """One measured candidate: everything MetaSchedule's `TuningRecord` holds, keyed by target."""

    __tablename__ = "tuning_records"
    __table_args__ = (
        UniqueConstraint(
            "workload_id", "target_id", "tvm_series", "trace_sha256", name="uq_record_trace"
        ),
        Index("ix_records_best", "workload_id", "target_id", "mean_run_us"),
        # The records of the last minute (the metrics' trials per second) without a scan.
        Index("ix_records_created", "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"), nullable=False)
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), nullable=False)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id"), nullable=True)
    trace_json: Mapped[str] = mapped_column(Text, nullable=False)
    trace_sha256: Mapped[str] = mapped_column(String(64), nullable=False)
    run_secs: Mapped[list[float]] = mapped_column(JSON, nullable=False)
    # Mean of run_secs in microseconds; NULL for a failed build or run (run_secs == [1e10]).
    mean_run_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    args_info: Mapped[list[Any]] = mapped_column(JSON, nullable=False)
    tvm_version: Mapped[str] = mapped_column(String(32), nullable=False)
    # major.minor of tvm_version: records of another series are never served (see store).
    tvm_series: Mapped[str] = mapped_column(String(16), nullable=False, server_default="")
    space: Mapped[str] = mapped_column(String(16), nullable=False, server_default="plain")
    # Imported from a JSON database, not measured here: never seeds a warm start nor trains
    # the transferred cost model, and becomes a best only through a worker's verification
    # (which clears the flag on the record it published).
    unverified: Mapped[bool] = mapped_column(
        Boolean, nullable=False, default=False, server_default=false()
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ArtifactRow(Base):
    """A compiled library, content-addressed by sha256 in the artifact directory."""

    __tablename__ = "artifacts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    kind: Mapped[str] = mapped_column(String(32), nullable=False)
    size: Mapped[int] = mapped_column(BigInteger, nullable=False)
    path: Mapped[str] = mapped_column(String(512), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ScheduleRow(Base):
    """The verified best schedule of one (workload, target, TVM series)."""

    __tablename__ = "schedules"
    __table_args__ = (
        UniqueConstraint("workload_id", "target_id", "tvm_series", name="uq_schedule_key"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"), nullable=False)
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), nullable=False)
    tvm_series: Mapped[str] = mapped_column(String(16), nullable=False, server_default="")
    # NULL when the plain, unscheduled function was the fastest verified candidate.
    record_id: Mapped[int | None] = mapped_column(ForeignKey("tuning_records.id"), nullable=True)
    artifact_id: Mapped[int] = mapped_column(ForeignKey("artifacts.id"), nullable=False)
    latency_us: Mapped[float] = mapped_column(Float, nullable=False)
    # (slowest - fastest) / median of the runs latency_us is the median of: how sure it is.
    latency_spread: Mapped[float | None] = mapped_column(Float, nullable=True)
    untuned_latency_us: Mapped[float] = mapped_column(Float, nullable=False)
    trials: Mapped[int] = mapped_column(Integer, nullable=False)
    max_abs_error: Mapped[float] = mapped_column(Float, nullable=False)
    tir: Mapped[str] = mapped_column(Text, nullable=False)
    job_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    space: Mapped[str] = mapped_column(String(16), nullable=False, server_default="plain")
    # Parameters the artifact's ``main_packed`` takes pre-packed (tuning.publish.packing.PackedParam
    # JSON); null or [] when the best reads every operand as the user holds it.
    packed_params: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class WorkerRow(Base):
    """A worker process: where it runs, which targets it serves, what hardware it has, and its
    heartbeat (a worker whose heartbeat is older than the stale limit is shown as stale)."""

    __tablename__ = "workers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True, nullable=False)
    hostname: Mapped[str] = mapped_column(String(255), nullable=False)
    pid: Mapped[int] = mapped_column(Integer, nullable=False)
    target_ids: Mapped[list[int]] = mapped_column(JSON, nullable=False)
    fingerprint: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False, default=dict)
    rpc: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    current_job_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    stopped_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class ApiTokenRow(Base):
    """An API token of one identity (``name``): only the sha256 of the token's text is kept
    (the text is shown once, at creation; see `schedules_db.tokens`)."""

    __tablename__ = "api_tokens"
    __table_args__ = (Index("ix_api_tokens_name", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), nullable=False)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    scopes: Mapped[list[str]] = mapped_column(JSON, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class DashboardSessionRow(Base):
    """A dashboard login: the sha256 of a random session id (the cookie's value), the token
    it was opened with (revoking the token ends it) and when it expires."""

    __tablename__ = "dashboard_sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_sha256: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    token_id: Mapped[int] = mapped_column(ForeignKey("api_tokens.id"), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


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


class BlobRow(Base):
    """A file's bytes in the database artifact store (`schedules_db.blobs.database`), by sha256;
    written in one transaction with its `BlobChunkRow` rows, so it is whole or absent."""

    __tablename__ = "blobs"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger, nullable=False)
    chunks: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class BlobChunkRow(Base):
    """One chunk (at most `schedules_db.blobs.CHUNK_BYTES`) of a blob, in order of ``seq``."""

    __tablename__ = "blob_chunks"

    sha256: Mapped[str] = mapped_column(
        ForeignKey("blobs.sha256", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)


class CostModelRow(Base):
    """A target's transferred cost model (`tuning.search.cost_model`), trained on ``records``
    stored records, its archive in the artifact store."""

    __tablename__ = "cost_models"
    __table_args__ = (UniqueConstraint("target_key", "records", name="uq_cost_model_records"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    target_key: Mapped[str] = mapped_column(String(64), nullable=False)
    records: Mapped[int] = mapped_column(Integer, nullable=False)
    sha256: Mapped[str] = mapped_column(String(64), nullable=False)
    size: Mapped[int] = mapped_column(BigInteger, nullable=False)
    path: Mapped[str] = mapped_column(String(512), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class LeaseRow(Base):
    """A named duty one process holds until ``expires_at`` (`schedules_db.store.leases`)."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(255), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


class ArtifactReaderRow(Base):
    """Where an API process reads artifacts, announced until ``fresh_until``
    (`schedules_db.store.artifact_readers`): a worker checks that it publishes there."""

    __tablename__ = "artifact_readers"

    process: Mapped[str] = mapped_column(String(255), primary_key=True)  # host:pid:nonce
    marker: Mapped[str] = mapped_column(String(64), nullable=False)  # the place it reads
    kind: Mapped[str] = mapped_column(String(16), nullable=False)  # "database" or "directory"
    hostname: Mapped[str] = mapped_column(String(255), nullable=False)
    path: Mapped[str] = mapped_column(String(1024), nullable=False)
    fresh_until: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
