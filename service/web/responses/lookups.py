"""What a build reads and sends (``/lookup``, ``/top-records``, ``/tasks``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field
from typing_extensions import NotRequired, TypedDict


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
