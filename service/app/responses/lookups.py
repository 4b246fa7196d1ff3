"""What a build reads and sends (``/lookup``, ``/top-records``, ``/tasks``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated, Any, Literal, cast

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from schedule_reads import TunedRecord, TunedSchedule
from schedules_db.values import NeighbourAnswer, Target


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


# What only a lookup with ``allow_neighbour`` answers of a verified best.
NEIGHBOUR_ONLY = ("provenance", "verified")


def tuned_schedule_json(schedule: TunedSchedule) -> TunedScheduleOut:
    """A verified best as a lookup answers it (`TunedScheduleOut`), without `NEIGHBOUR_ONLY`:
    `schedule_reads.TunedSchedule` is the shape `TunedScheduleOut` documents (their fields are
    held equal by tests/service/test_response_schemas.py)."""
    return cast(
        TunedScheduleOut,
        {k: v for k, v in asdict(schedule).items() if k not in NEIGHBOUR_ONLY},
    )


def tuned_record_json(record: TunedRecord) -> TunedRecordOut:
    """A successful record as ``/top-records`` answers it (`TunedRecordOut`, the same fields)."""
    return cast(TunedRecordOut, asdict(record))


@dataclass(frozen=True)
class TaskState:
    """What answers one sent task now (`UploadedTaskOut`, the same fields)."""

    name: str
    workload: str
    state: str
    job_id: int | None


def uploaded_task_json(state: TaskState) -> UploadedTaskOut:
    """One sent task's state as ``POST /tasks`` answers it (`UploadedTaskOut`)."""
    return cast(UploadedTaskOut, asdict(state))


def neighbour_answer_json(
    answer: NeighbourAnswer, shash: str, target: Target, series: str
) -> TunedScheduleOut:
    """A neighbour answer in the shape of a verified best (`schedule_reads.TunedSchedule`),
    marked: ``provenance`` "neighbour", ``verified`` false, the neighbour's schedule and the
    verifying job. Its ids (``schedule_id``, ``record.record_id``) are the answer's own (it has
    no artifact); its latency is the neighbour's scaled by FLOP, an estimate."""
    return {
        "schedule_id": answer.id,
        "key": {"workload_shash": shash, "target_key": target.key, "tvm_series": series},
        "latency_us": answer.latency_us,
        "space": answer.space,
        "packed_params": answer.packed_params,
        "record": {
            "record_id": answer.id,
            "trace_json": answer.trace_json,
            "run_secs": [answer.latency_us / 1e6],
            "args_info": answer.args_info,
            "mean_run_us": answer.latency_us,
            "space": answer.space,
            "tvm_version": answer.tvm_version,
        },
        "provenance": "neighbour",
        "verified": False,
        "neighbour_schedule_id": answer.neighbour_schedule_id,
        "job_id": answer.job_id,
    }
