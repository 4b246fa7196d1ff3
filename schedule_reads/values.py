"""What a `ScheduleReader` answers with: frozen values, plain JSON inside, no ORM, no TVM."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ScheduleKey:
    """What a verified best is stored under: a workload's structural hash (decimal text), a
    target's key (`schedule_reads.keys.target_key`) and a TVM series ("0.27")."""

    workload_shash: str
    target_key: str
    tvm_series: str


@dataclass(frozen=True)
class TunedRecord:
    """A successful candidate, measured here or verified by a worker: what MetaSchedule's
    `TuningRecord` needs besides the workload and target (``trace_json`` is the trace part of
    `TuningRecord.as_json`, ``args_info`` its args info, both as plain JSON)."""

    record_id: int
    trace_json: str
    run_secs: list[float]
    args_info: list[Any]
    mean_run_us: float
    space: str  # the search space that produced it ("plain" or "packed")
    tvm_version: str


@dataclass(frozen=True)
class TunedSchedule:
    """The verified best of one key: its latency, the search space and packed parameters its
    compiled form expects, and the record whose trace to replay (None when the plain,
    unscheduled function was the fastest verified candidate: a build then uses the function as
    it is written)."""

    schedule_id: int
    key: ScheduleKey
    latency_us: float
    space: str
    packed_params: list[dict[str, Any]] | None  # tuning.publish.packing.PackedParam JSON
    record: TunedRecord | None
    # A neighbour answer (only to a reader that asked for them): another workload's verified
    # best refitted to this one, not verified on it yet ("neighbour", verified False).
    provenance: str = "tuned"
    verified: bool = True
