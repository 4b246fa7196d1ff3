"""Conventions the response types share: timestamps and numbers as the builders write them,
a job's state."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, overload

from pydantic import AfterValidator, WithJsonSchema

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


@overload
def iso(value: datetime) -> str: ...
@overload
def iso(value: None) -> None: ...
@overload
def iso(value: datetime | None) -> str | None: ...
def iso(value: datetime | None) -> str | None:
    """ISO 8601 in UTC (SQLite hands back naive datetimes; they are UTC)."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.isoformat()


def gflops(flop: float, latency_us: float | None) -> float | None:
    """GFLOP/s of a kernel doing ``flop`` in ``latency_us``."""
    if not latency_us or not flop:
        return None
    return flop / (latency_us * 1e-6) / 1e9
