"""The tuning data: targets, workloads, jobs (and how long each stage took), measured records,
artifacts and verified schedules."""

from __future__ import annotations

from datetime import datetime
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
    String,
    Text,
    UniqueConstraint,
    false,
    true,
)
from sqlalchemy.orm import Mapped, mapped_column

from schedules_db.tables.base import Base, utcnow


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
    # The other work, in cores' worth beyond the CPUs a measurement left free, that the cores
    # saw while the peak and the bandwidth above were measured (tuning.hardware.interference);
    # NULL: not known (rows measured before it was recorded). Over figures.QUIET_CORES the
    # figure was measured under load and yields no roofline.
    peak_interference: Mapped[float | None] = mapped_column(Float, nullable=True)
    bandwidth_interference: Mapped[float | None] = mapped_column(Float, nullable=True)
    # The bf16 peak (bf16 products, fp32 sums) of the target's fastest bf16 unit ("amx",
    # "avx512_bf16"), with its interference as above; NULL: none measured or none to measure.
    bf16_unit: Mapped[str | None] = mapped_column(String(16), nullable=True)
    bf16_peak_gflops: Mapped[float | None] = mapped_column(Float, nullable=True)
    bf16_interference: Mapped[float | None] = mapped_column(Float, nullable=True)


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
