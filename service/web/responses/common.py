"""Conventions the response types share: timestamps and numbers as the builders write them,
a job's state."""

from __future__ import annotations

from typing import Annotated

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
