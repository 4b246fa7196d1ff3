"""The store's value types: what its methods take and return (no SQLAlchemy, no ORM rows)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

FAILED_RUN_SECS = 1e9  # MetaSchedule marks failed candidates with run_secs == [1e10]

CATALOG, USER = "catalog", "user"  # WorkloadRow.origin


class JobState(str, enum.Enum):
    """States of a job; `succeeded`, `failed` and `cancelled` are final."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINAL_STATES = (JobState.SUCCEEDED.value, JobState.FAILED.value, JobState.CANCELLED.value)


@dataclass(frozen=True)
class NewRecord:
    """A measured candidate as the MetaSchedule adapter hands it to the store."""

    trace_json: str
    run_secs: list[float]
    args_info: list[Any]
    tvm_version: str
    space: str = "plain"  # the search space that produced it (tuning.search.spaces)
    unverified: bool = False  # imported, not measured here (see TuningRecordRow.unverified)

    @property
    def failed(self) -> bool:
        """True when the build or the run failed (MetaSchedule's 1e10 marker)."""
        return not self.run_secs or max(self.run_secs) >= FAILED_RUN_SECS

    @property
    def mean_run_us(self) -> float | None:
        """Mean run time in microseconds, or None for a failed candidate."""
        if self.failed:
            return None
        return sum(self.run_secs) / len(self.run_secs) * 1e6


@dataclass(frozen=True)
class NewSchedule:
    """A verified best, with its exported artifact, ready to be published by `finish_job`.
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
