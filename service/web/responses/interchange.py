"""MetaSchedule JSON databases out and in (``/export``, ``/import``)."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

from service.web.responses.common import JobStateName


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
