"""MetaSchedule JSON databases out and in (``/export``, ``/import``)."""

from __future__ import annotations

import json
from typing import Any

from typing_extensions import TypedDict

from schedules_db.values import Target
from service.app.responses.common import JobStateName


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


def export_json(
    target: Target, series: str | None, workload_lines: list[str], record_lines: list[str]
) -> ExportOut:
    """A target's exported database (`ExportOut`): both files' text, a line each."""
    return {
        "target": {
            "key": target.key,
            "label": target.label,
            "canonical": json.loads(target.canonical_json),
        },
        "tvm_series": series,
        "workloads": len(workload_lines),
        "records": len(record_lines),
        "database_workload.json": "".join(line + "\n" for line in workload_lines),
        "database_tuning_record.json": "".join(line + "\n" for line in record_lines),
    }


def imported_job_json(job_id: int, workload_id: int, state: str) -> ImportedJob:
    """A job that will verify an imported workload's best (`ImportedJob`)."""
    return {"id": job_id, "workload_id": workload_id, "state": state}


def import_json(
    target: Target, workloads: int, added: int, known: int, jobs: list[ImportedJob]
) -> ImportOut:
    """What an import stored (`ImportOut`)."""
    return {
        "target": {"key": target.key, "label": target.label},
        "workloads": workloads,
        "records_added": added,
        "records_known": known,
        "jobs": jobs,
    }
