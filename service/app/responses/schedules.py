"""Published schedules and a workload's page of them (``/schedules``, ``/workloads/{id}``)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field
from typing_extensions import TypedDict

from schedules_db.values import (
    Artifact,
    Record,
    RecordTrace,
    Schedule,
    ScheduleInfo,
    Target,
    WorkloadInfo,
)
from service.app.responses.catalog import TargetOut, WorkloadOut, target_json, workload_json
from service.app.responses.common import Timestamp, gflops, iso
from tuning.catalog.dtypes import BFLOAT16
from tuning.hardware.roofline import roofline_us, share_of_roofline


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


def schedule_json(
    schedule: ScheduleInfo,
    workload: WorkloadInfo,
    target: Target,
    artifact: Artifact,
    record: RecordTrace | Record | None = None,
) -> ScheduleOut:
    """A schedule as lists show it (`ScheduleOut`); ``tvm_version`` is the ``record``'s (None
    without one)."""
    return {
        "id": schedule.id,
        "workload": workload_json(workload),
        "target": target_json(target),
        "latency_us": schedule.latency_us,
        "latency_spread": schedule.latency_spread,
        "untuned_latency_us": schedule.untuned_latency_us,
        "gflops": gflops(workload.flop, schedule.latency_us),
        "roofline_us": (
            roof := roofline_us(
                workload.flop,
                workload.bytes_moved,
                target,
                workload.params.get("dtype") == BFLOAT16,
            )
        ),  # fmt: skip
        "of_roofline": share_of_roofline(schedule.latency_us * 1e-6, roof and roof * 1e-6),
        "speedup_vs_untuned": schedule.untuned_latency_us / schedule.latency_us,
        "trials": schedule.trials,
        "max_abs_error": schedule.max_abs_error,
        "record_id": schedule.record_id,
        # True when no tuned candidate beat the plain (unscheduled) function: it is served.
        "plain_function": schedule.record_id is None,
        "tvm_version": record.tvm_version if record else None,
        # The space that found it, and how to call its artifact: with packed_params, call each
        # pack function once on that weight, then "entry" per inference ("main" also works with
        # the weights as they are, packing inside every call).
        "space": schedule.space,
        "packed_params": schedule.packed_params or [],
        "entry": "main_packed" if schedule.packed_params else "main",
        # What the schedule is keyed by: it is only ever served for this exact triple.
        "key": {
            "workload": workload.shash,
            "target": target.key,
            "tvm_series": schedule.tvm_series,
        },
        "job_id": schedule.job_id,
        "created_at": iso(schedule.created_at),
        "updated_at": iso(schedule.updated_at),
        "artifact": {
            "sha256": artifact.sha256,
            "size": artifact.size,
            "kind": artifact.kind,
            "url": f"/api/v1/schedules/{schedule.id}/artifact",
        },
    }


def schedule_detail_json(
    schedule: Schedule,
    workload: WorkloadInfo,
    target: Target,
    artifact: Artifact,
    record: RecordTrace | Record | None,
) -> ScheduleDetail:
    """One schedule (`ScheduleDetail`): `schedule_json` with the record's trace (``[[], []]``
    without a record) and the scheduled TIR. ``GET /schedules/{id}`` writes the same JSON
    without parsing the trace (`service.api.schedules.schedule_detail_bytes`)."""
    return {
        **schedule_json(schedule, workload, target, artifact, record),
        "trace": json.loads(record.trace_json) if record else [[], []],
        "tir": schedule.tir,
    }
