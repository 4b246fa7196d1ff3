"""Published schedules and a workload's page of them (``/schedules``, ``/workloads/{id}``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field
from typing_extensions import TypedDict

from service.web.responses.catalog import TargetOut, WorkloadOut
from service.web.responses.common import Timestamp


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
