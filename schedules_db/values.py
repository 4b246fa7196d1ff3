"""The store's value types: what its methods take and return (no SQLAlchemy, no ORM rows).

Every store method returns these, never an ORM row: frozen dataclasses detached from any
session, safe to share between threads, whose field names are exactly the columns' names in
`schedules_db.tables` (``job.state``, ``schedule.latency_us``). Datetimes are UTC as the
database hands them back: timezone-aware on PostgreSQL; on SQLite naive when read back (a value
just written keeps the aware time it was written with).

Two reads leave a large column out, and their types say so: `WorkloadInfo` (a workload without
its module JSON: joined reads and lists) under `Workload`, and `ScheduleInfo` (a schedule
without its TIR: lists) under `Schedule`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, ClassVar, Protocol, TypeVar

from schedules_db.figures import is_quiet

CATALOG, USER = "catalog", "user"  # WorkloadRow.origin


class JobState(str, enum.Enum):
    """States of a job; `succeeded`, `failed` and `cancelled` are final."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINAL_STATES = (JobState.SUCCEEDED.value, JobState.FAILED.value, JobState.CANCELLED.value)


class RowValue(Protocol):
    """Any of the dataclasses below (what `value_of` fills)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


_V = TypeVar("_V", bound=RowValue)


def value_of(cls: type[_V], source: Any) -> _V:
    """An instance of the value dataclass ``cls`` with each field read from the attribute of the
    same name of ``source`` (an ORM row, inside its session)."""
    return cls(**{f.name: getattr(source, f.name) for f in fields(cls)})


def adopt(cls: type[_V], columns: dict[str, Any]) -> _V:
    """An instance of ``cls`` whose attributes ARE ``columns``, a fresh dict holding exactly
    ``cls``'s fields (a joined row's columns; tests/schedules_db/test_store_types.py holds the
    fields to the columns). It skips ``__init__``, whose frozen per-field ``object.__setattr__``
    made the API's list of 100 schedules (400 values) 7 times slower to build than this; the
    instance is as frozen as any other."""
    value = object.__new__(cls)
    object.__setattr__(value, "__dict__", columns)
    return value


@dataclass(frozen=True)
class Target:
    """A hardware target (`TargetRow`): canonical TVM target JSON, its key, a unique label."""

    id: int
    key: str
    canonical_json: str
    kind: str
    label: str
    fingerprint: dict[str, Any]
    created_at: datetime
    peak_gflops: float | None
    cache_gbps: float | None
    memory_gbps: float | None
    cache_bytes: int | None
    llc_gbps: float | None
    llc_bytes: int | None
    peak_interference: float | None
    bandwidth_interference: float | None
    bf16_unit: str | None
    bf16_peak_gflops: float | None
    bf16_interference: float | None

    @property
    def peak_trusted(self) -> bool:
        """Whether the peak was measured on a quiet machine (`is_quiet`)."""
        return is_quiet(self.peak_interference)

    @property
    def bandwidth_trusted(self) -> bool:
        """Whether the bandwidth was measured on a quiet machine (`is_quiet`)."""
        return is_quiet(self.bandwidth_interference)

    @property
    def bf16_peak_trusted(self) -> bool:
        """Whether the bf16 peak was measured on a quiet machine (`is_quiet`)."""
        return is_quiet(self.bf16_interference)


@dataclass(frozen=True)
class WorkloadInfo:
    """A workload without its module JSON (`WorkloadRow` less ``mod_json``): what joined reads
    and views need."""

    id: int
    shash: str
    origin: str  # CATALOG or USER
    operator: str | None
    params: dict[str, Any]
    flop: float
    bytes_moved: int | None
    created_at: datetime
    # A user workload's first submitter: only it (or an admin) may import records for it.
    owner: str | None


@dataclass(frozen=True)
class Workload(WorkloadInfo):
    """A workload (`WorkloadRow`) with its PrimFunc as TVM JSON."""

    mod_json: str


@dataclass(frozen=True)
class Job:
    """A tuning job (`JobRow`)."""

    id: int
    workload_id: int
    target_id: int
    trials: int
    state: str  # a JobState value
    queue: str
    attempt: int
    worker: str | None
    heartbeat_at: datetime | None
    cancel_requested: bool
    trials_done: int
    best_latency_us: float | None
    cache_hit: bool
    schedule_id: int | None
    error: str | None
    submitted_by: str | None
    priority: int
    task_id: str | None
    transfer_cost_model: bool
    cost_model: str | None
    space: str
    enqueued_at: datetime | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class Record:
    """A stored tuning record (`TuningRecordRow`): one measured candidate."""

    id: int
    workload_id: int
    target_id: int
    job_id: int | None
    trace_json: str
    trace_sha256: str
    run_secs: list[float]
    mean_run_us: float | None  # None: the candidate failed to build or run
    args_info: list[Any]
    tvm_version: str
    tvm_series: str
    space: str
    unverified: bool
    created_at: datetime


@dataclass(frozen=True)
class RecordTrace:
    """What a schedule's detail shows of its record: id, TVM version and trace."""

    id: int
    tvm_version: str
    trace_json: str


@dataclass(frozen=True)
class ScheduleInfo:
    """A verified best (`ScheduleRow`) without its TIR: what lists show."""

    id: int
    workload_id: int
    target_id: int
    tvm_series: str
    record_id: int | None  # None: the plain, unscheduled function won
    artifact_id: int
    latency_us: float
    latency_spread: float | None  # its timed runs' (slowest - fastest) / median; None: older
    untuned_latency_us: float
    trials: int
    max_abs_error: float
    job_id: int | None
    space: str
    packed_params: list[dict[str, Any]] | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Schedule(ScheduleInfo):
    """A verified best (`ScheduleRow`) with its scheduled TIR."""

    tir: str


@dataclass(frozen=True)
class Artifact:
    """A compiled library (`ArtifactRow`), content-addressed by sha256."""

    id: int
    sha256: str
    kind: str
    size: int
    path: str  # relative to the artifact directory
    created_at: datetime


@dataclass(frozen=True)
class Worker:
    """A registered worker process (`WorkerRow`)."""

    id: int
    name: str
    hostname: str
    pid: int
    target_ids: list[int]
    fingerprint: dict[str, Any]
    rpc: dict[str, Any] | None
    current_job_id: int | None
    started_at: datetime
    heartbeat_at: datetime
    stopped_at: datetime | None


@dataclass(frozen=True)
class NewRecord:
    """A measured candidate as the MetaSchedule adapter (or an import) hands it to the store.

    ``failed`` (keyword only) says whether the candidate failed to build or run: whoever builds
    the record decides it (`tuning.traces.run_failed`); the store knows no marker. A
    failed record is stored with ``mean_run_us`` NULL."""

    trace_json: str
    run_secs: list[float]
    args_info: list[Any]
    tvm_version: str
    space: str = "plain"  # the search space that produced it (tuning.search.spaces)
    unverified: bool = False  # imported, not measured here (see TuningRecordRow.unverified)
    failed: bool = field(kw_only=True)

    @property
    def mean_run_us(self) -> float | None:
        """Mean run time in microseconds, or None for a failed candidate."""
        if self.failed:
            return None
        return sum(self.run_secs) / len(self.run_secs) * 1e6


@dataclass(frozen=True)
class NewSchedule:
    """A verified best, with its exported artifact, ready to be published by `Schedules.publish`.
    ``record_id`` None: the plain (unscheduled) function won; ``tvm_series`` then keys it."""

    record_id: int | None
    latency_us: float
    untuned_latency_us: float
    max_abs_error: float
    tir: str
    artifact_sha256: str
    artifact_size: int
    artifact_path: str
    artifact_kind: str = "shared-library"
    tvm_series: str = ""
    space: str = "plain"  # the space of the winning record ("plain" for the plain function)
    packed_params: list[dict[str, Any]] | None = None  # see ScheduleRow.packed_params
    latency_spread: float | None = None  # how far its timed runs spread (of their median)


class ModelState(str, enum.Enum):
    """States of a whole-model job (`ModelRow`); `succeeded`, `failed`, `cancelled` are final."""

    TUNING = "tuning"
    COMPILING = "compiling"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


MODEL_FINAL_STATES = (
    ModelState.SUCCEEDED.value,
    ModelState.FAILED.value,
    ModelState.CANCELLED.value,
)


@dataclass(frozen=True)
class ModelJob:
    """A whole-model job (`ModelRow`)."""

    id: int
    name: str
    format: str
    layout: str  # "plain" or "blocked" (tuning.models.blocked_layout)
    precision: str  # "float32" or "bfloat16" (tuning.models.precision)
    source_artifact_id: int
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    target_id: int
    trials: int
    reserve_trials: int  # held back for the tasks furthest from their roofline (0: spent)
    queue: str
    state: str
    submitted_by: str | None
    cancel_requested: bool
    attempt: int
    worker: str | None
    heartbeat_at: datetime | None
    woken_at: datetime | None
    artifact_id: int | None
    tasks_applied: int | None
    untuned_ms: float | None
    tuned_ms: float | None
    max_abs_error: float | None
    min_cosine: float | None  # a bf16 model's lowest cosine to float32 (None: float32)
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class ModelTask:
    """One task of a model (`ModelTaskRow`)."""

    id: int
    model_id: int
    position: int
    name: str
    weight: int
    workload_id: int
    job_id: int
    trials: int


@dataclass(frozen=True)
class ModelTaskProgress:
    """A task with the job that tunes it (as `Jobs.get` reads it)."""

    task: ModelTask
    job: Job


@dataclass(frozen=True)
class NewModelTask:
    """A task to record with its model: its workload and the job already created for it."""

    name: str
    weight: int
    workload_id: int
    job_id: int
    trials: int


@dataclass(frozen=True)
class PublishedModel:
    """What a worker publishes for a compiled model (the artifact written first, see
    `Models.finish`)."""

    artifact_sha256: str
    artifact_size: int
    artifact_path: str
    tasks_applied: int
    untuned_ms: float
    tuned_ms: float
    max_abs_error: float
    min_cosine: float | None = None


class NeighbourState(str, enum.Enum):
    """States of a neighbour answer: only `offered` ones are served."""

    OFFERED = "offered"
    WITHDRAWN = "withdrawn"  # failed verification: never offered again
    SUPERSEDED = "superseded"  # a verified best of the workload exists


@dataclass(frozen=True)
class NeighbourAnswer:
    """An unverified answer for an untuned workload (`NeighbourAnswerRow`): its nearest tuned
    neighbour's best trace refitted to it; ``latency_us`` is an estimate (the neighbour's
    latency scaled by FLOP), not a measurement."""

    id: int
    workload_id: int
    target_id: int
    tvm_series: str
    neighbour_schedule_id: int
    neighbour_workload_id: int
    trace_json: str
    args_info: list[Any]
    latency_us: float
    space: str
    tvm_version: str
    packed_params: list[dict[str, Any]]  # tuning.publish.packing.PackedParam JSON ([]: none)
    state: str  # a NeighbourState value
    job_id: int | None
    reason: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class NewNeighbourAnswer:
    """A neighbour answer to offer (`Neighbours.offer`)."""

    workload_id: int
    target_id: int
    neighbour_schedule_id: int
    neighbour_workload_id: int
    trace_json: str
    args_info: list[Any]
    latency_us: float
    space: str
    tvm_version: str
    packed_params: list[dict[str, Any]]


@dataclass(frozen=True)
class NeighbourCandidate:
    """A workload that may be a neighbour (it has a refittable verified best): its keys only."""

    id: int
    shash: str
    origin: str
    operator: str | None
    params: dict[str, Any]
    flop: float


@dataclass(frozen=True)
class NeighbourSource(NeighbourCandidate):
    """A candidate with what refitting it needs: its module (``mod_json``), its best's
    ``schedule_id``, ``latency_us`` and ``space``, and its record's ``trace_json`` and
    ``tvm_version``."""

    mod_json: str
    schedule_id: int
    latency_us: float
    space: str
    trace_json: str
    tvm_version: str
