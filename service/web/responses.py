"""The response bodies of the API, each declared once, as a TypedDict: the builders that write
them (`service.web.schemas`, `service.api.views`, the use cases) return these types, so mypy
checks every key and value they write, and ``/openapi.json`` documents the same types (pydantic
reads a TypedDict as it reads a model).

Each declares its keys in the order the route answers them, so FastAPI's validation and
serialisation keep every key, its order and its value (tests/service/test_response_schemas.py
runs the builders' output through them). Two conventions keep values as the builders write
them:

* timestamps stay the strings `service.web.schemas.iso` writes (`Timestamp`: documented as
  ``date-time``; a ``datetime`` field would re-format them);
* a setting that may be an integer or a float is a `Number` (a ``float`` field would turn ``0``
  into ``0.0``).

The hot read routes (``GET /jobs/{id}``, ``GET /schedules``, ``GET /schedules/{id}``) answer
pre-serialised JSON (`service.web.fast_json`): their types document them, FastAPI does not
re-validate a returned `Response`. A key only some answers carry is `NotRequired`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, WithJsonSchema
from typing_extensions import NotRequired, TypedDict

from schedules_db.values import JobState

Timestamp = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]
Number = Annotated[int | float, WithJsonSchema({"type": "number"})]


def _job_state(value: str) -> str:
    return JobState(value).value  # a ValueError (so a 500) for a state that is not one


# A job's state as the store keeps it: a `JobState` value, a plain string in the JSON.
JobStateName = Annotated[
    str,
    AfterValidator(_job_state),
    WithJsonSchema({"type": "string", "enum": [state.value for state in JobState]}),
]


class TargetBandwidth(TypedDict):
    """GB/s a streaming kernel reached on a target's cores: in their own caches (at most
    ``cache_bytes`` moved in all), in the shared last-level cache (at most ``llc_bytes``; null
    where the machine has none) and in memory."""

    cache_gbps: float
    memory_gbps: float
    cache_bytes: int
    llc_gbps: float | None
    llc_bytes: int | None


class TargetOut(TypedDict):
    """A target: its key (hash of the canonical JSON), label, kind and the hosts' fingerprint."""

    key: str
    label: str
    kind: str
    canonical: Annotated[dict[str, Any], Field(description="the canonical TVM target JSON")]
    fingerprint: dict[str, Any]
    peak_gflops: Annotated[
        float | None,
        Field(description="the fp32 FMA peak its worker measured at start (null: none measured)"),
    ]
    bandwidth: Annotated[
        TargetBandwidth | None,
        Field(description="the bandwidth its worker measured at start (null: none measured)"),
    ]


class ServedTarget(TargetOut):
    """A target of ``GET /targets``, with whether a live worker serves it."""

    served: bool


class HostTarget(TypedDict):
    """The target "host" resolves to on the API's machine."""

    canonical: dict[str, Any]
    label: str


class TargetsOut(TypedDict):
    """``GET /targets``."""

    host: HostTarget
    targets: list[ServedTarget]


class TargetRef(TypedDict):
    """A target by id, label and key."""

    id: int
    label: str
    key: str


class WorkloadOut(TypedDict):
    """A workload: a catalog operator with parameters, or raw TIR (``operator`` null)."""

    id: int
    structural_hash: str
    operator: str | None
    params: dict[str, Any]
    flop: float
    bytes_moved: Annotated[
        int | None,
        Field(
            description="what a kernel must read and write at the least: its parameters, each once "
            "(null until a worker loaded the workload)"
        ),
    ]


class JobOperator(TypedDict):
    """The operator of a job's workload (both null/empty for raw TIR)."""

    name: str | None
    params: dict[str, Any]


class JobProgress(TypedDict):
    """How far a job's search got."""

    trials_done: int
    best_latency_us: float | None
    best_gflops: float | None


class JobOut(TypedDict):
    """A job as ``/jobs`` routes show it (and each server-sent event's data)."""

    id: int
    state: JobStateName
    operator: JobOperator
    workload: WorkloadOut
    target: TargetOut
    trials: int
    queue: str
    progress: JobProgress
    cache_hit: bool
    schedule_id: int | None
    attempt: int
    worker: str | None
    cancel_requested: bool
    error: str | None
    submitted_by: str | None
    priority: int
    transfer_cost_model: bool
    cost_model: str | None
    space: str
    waiting_for: Annotated[
        str | None,
        Field(
            description="queued jobs only (null otherwise): whether a live worker serves the target"
        ),
    ]
    created_at: Timestamp
    started_at: Timestamp | None
    finished_at: Timestamp | None
    heartbeat_at: Timestamp | None


class ScheduleKey(TypedDict):
    """What a schedule is keyed by: it is only served for this exact triple."""

    workload: Annotated[str, Field(description="the workload's structural hash")]
    target: Annotated[str, Field(description="the target's key")]
    tvm_series: str


class ArtifactRef(TypedDict):
    """A schedule's compiled library and where to download it."""

    sha256: str
    size: int
    kind: str
    url: str


class ScheduleOut(TypedDict):
    """A verified best schedule, as lists show it."""

    id: int
    workload: WorkloadOut
    target: TargetOut
    latency_us: float
    latency_spread: Annotated[
        float | None,
        Field(
            description="how far the timed runs behind latency_us spread, (slowest - fastest) / "
            "median: a few hundredths on a quiet core (null: published before it was recorded)"
        ),
    ]
    untuned_latency_us: float
    gflops: float | None
    roofline_us: Annotated[
        float | None,
        Field(
            description="the least time any kernel of the workload can take on the target: its"
            " FLOP at the measured peak or its bytes at the measured bandwidth, whichever is"
            " longer (null: neither measured)"
        ),
    ]
    of_roofline: Annotated[
        float | None,
        Field(
            description="roofline_us / latency_us, at most 1 (a kernel faster than the roofline "
            "shows figures measured low)"
        ),
    ]
    speedup_vs_untuned: float
    trials: int
    max_abs_error: float
    record_id: int | None
    plain_function: Annotated[bool, Field(description="no tuned candidate beat the plain function")]
    tvm_version: Annotated[str | None, Field(description="the record's TVM version (detail only)")]
    space: str
    packed_params: Annotated[
        list[dict[str, Any]],
        Field(
            description="weights to pack once (each with its pack function) before calling `entry`"
        ),
    ]
    entry: Literal["main", "main_packed"]
    key: ScheduleKey
    job_id: int | None
    created_at: Timestamp
    updated_at: Timestamp
    artifact: ArtifactRef


class ScheduleDetail(ScheduleOut):
    """One schedule: with its MetaSchedule trace and the scheduled TIR."""

    trace: Annotated[
        list[Any], Field(description="the MetaSchedule trace as JSON ([[], []]: none)")
    ]
    tir: str


class CurvePointOut(TypedDict):
    """One measured candidate of a tuning curve."""

    record_id: int
    job_id: Annotated[int | None, Field(description="the job that measured it (null: imported)")]
    latency_us: Annotated[float | None, Field(description="mean run time (null: it failed)")]
    failed: bool
    created_at: Timestamp


class WorkloadTarget(TypedDict):
    """A workload on one target: records measured and the verified best (if any)."""

    target: TargetOut
    records: int
    fastest_measured_us: float | None
    best: ScheduleOut | None


class WorkloadDetail(WorkloadOut):
    """One workload with its results per target (fastest first; without a best last)."""

    targets: list[WorkloadTarget]


class JobExample(TypedDict):
    """A job body for an operator (``POST /jobs``)."""

    operator: JobOperator
    target: str
    trials: int


class OperatorOut(TypedDict):
    """A catalog operator: parameter schema, dtypes and an example job body."""

    name: str
    description: str
    params_schema: Annotated[
        dict[str, Any], Field(description="JSON schema of the operator's params")
    ]
    dtypes: list[str]
    tolerance: str
    example: JobExample


class WorkerOut(TypedDict):
    """A registered worker: ``live``, ``stale`` (silent past the stale limit) or ``stopped``."""

    name: str
    hostname: str
    pid: int
    status: Literal["live", "stale", "stopped"]
    targets: list[TargetRef]
    fingerprint: dict[str, Any]
    rpc: dict[str, Any] | None
    current_job_id: int | None
    started_at: Timestamp
    heartbeat_at: Timestamp
    heartbeat_age_s: float
    stopped_at: Timestamp | None


class Limits(TypedDict):
    """The limits that apply to an identity (0: off)."""

    write_rate_per_s: Number
    write_burst: int
    max_active_jobs: int
    max_trials: int


class MeOut(TypedDict):
    """``GET /me``: the identity, its scopes, its token and its limits."""

    identity: str
    auth: bool
    token_id: int | None
    granted: list[str]
    scopes: list[str]
    expires_at: Timestamp | None
    limits: Limits


class ExportTarget(TypedDict):
    """The exported target."""

    key: str
    label: str
    canonical: dict[str, Any]


# Two keys are file names, not identifiers: the functional form declares them as they are.
ExportOut = TypedDict(
    "ExportOut",
    {
        "target": ExportTarget,
        "tvm_series": str | None,
        "workloads": int,
        "records": int,
        "database_workload.json": str,
        "database_tuning_record.json": str,
    },
)
ExportOut.__doc__ = (
    "A target's successful records as the two files of a MetaSchedule JSON database."
)


class ImportTarget(TypedDict):
    """The target a database was imported for."""

    key: str
    label: str


class ImportedJob(TypedDict):
    """A verification job of an imported workload (new, or one already pending)."""

    id: int
    workload_id: int
    state: JobStateName


class ImportOut(TypedDict):
    """What an import stored and the jobs that verify it."""

    target: ImportTarget
    workloads: int
    records_added: int
    records_known: int
    jobs: list[ImportedJob]


class Health(TypedDict):
    """``GET /healthz``."""

    status: Literal["ok"]


class ScheduleKeyOut(TypedDict):
    """What a verified best is stored under (`schedule_reads.ScheduleKey`)."""

    workload_shash: str
    target_key: str
    tvm_series: str


class TunedRecordOut(TypedDict):
    """A successful record as a TVM ``Database`` replays it (`schedule_reads.TunedRecord`)."""

    record_id: int
    trace_json: str
    run_secs: list[float]
    args_info: list[Any]
    mean_run_us: float
    space: str
    tvm_version: str


class TunedScheduleOut(TypedDict):
    """A verified best as a build needs it (`schedule_reads.TunedSchedule`); ``record`` null:
    the plain, unscheduled function was the fastest verified candidate."""

    schedule_id: int
    key: ScheduleKeyOut
    latency_us: float
    space: str
    packed_params: list[dict[str, Any]] | None
    record: TunedRecordOut | None
    # Only in answers to lookups with ``allow_neighbour`` (absent otherwise):
    provenance: NotRequired[
        Annotated[
            Literal["tuned", "neighbour"] | None,
            Field(description='"tuned": a verified best; "neighbour": a neighbour\'s, refitted'),
        ]
    ]
    verified: NotRequired[bool | None]
    neighbour_schedule_id: NotRequired[
        Annotated[
            int | None,
            Field(description="the tuned neighbour's schedule a neighbour answer comes from"),
        ]
    ]
    job_id: NotRequired[
        Annotated[
            int | None, Field(description="the job verifying a neighbour answer, then tuning it")
        ]
    ]


class LookupTargetOut(TypedDict):
    """The target a lookup was answered for: its key, and its label when the store knows it."""

    key: str
    label: str | None


class LookupOut(TypedDict):
    """``POST /lookup``: the verified bests found, by workload hash, and the hashes without one."""

    target: LookupTargetOut
    tvm_series: str
    schedules: dict[str, TunedScheduleOut]
    missing: list[str]
    withdrawn: NotRequired[
        Annotated[
            list[str] | None,
            Field(
                description="with allow_neighbour: hashes whose neighbour answer failed"
                " verification (drop cached copies); absent otherwise"
            ),
        ]
    ]


class UploadedTaskOut(TypedDict):
    """What became of one task a build sent: its workload hash (as the service parsed it:
    the build's own hash, or the build and the service disagree) and what now answers it."""

    name: str
    workload: str
    state: Annotated[
        Literal["tuned", "neighbour", "tuning", "queued"],
        Field(
            description="tuned: a verified best exists; neighbour: an unverified neighbour answer "
            "now exists (its job verifies it, then tunes); tuning: a job for it was already "
            "queued or running; queued: a tuning job of the caller's was queued now (no neighbour "
            "to answer with, or its answer was withdrawn)"
        ),
    ]
    job_id: int | None


class TaskUploadOut(TypedDict):
    """``POST /tasks``: the target the tasks were stored for, and each task's state."""

    target: LookupTargetOut
    tasks: list[UploadedTaskOut]


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
