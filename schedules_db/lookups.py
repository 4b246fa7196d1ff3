"""Joined reads for the API's hot lookups: one query each instead of one per row.

`Store`'s getters load one ORM row per call, so showing a schedule took five queries (schedule,
workload, target, artifact, record) and a list of N took 4N+1. These functions answer the same
questions with one Core ``SELECT ... JOIN`` and hand back plain attribute objects (named like
the rows' columns, detached from any session), leaving out what the API never shows (a
workload's module JSON; a schedule's TIR and trace in lists). Readers see committed data only,
as with `Store`.

What each returns is typed by what it leaves out: a workload is a `WorkloadInfo` (no
``mod_json``), a listed schedule a `ScheduleInfo` (no ``tir``), the one-schedule read a
`Schedule` with its `RecordTrace`. Each lookup is one statement on a connection of its own, so
they are as thread-safe as the store (see `schedules_db.store.base`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

from sqlalchemy import Select, bindparam, select

from schedules_db.joins import connect, labelled_columns, split_rows
from schedules_db.store import Store
from schedules_db.tables import (
    ArtifactRow,
    JobRow,
    ScheduleRow,
    TargetRow,
    TuningRecordRow,
    WorkloadRow,
)
from schedules_db.values import (
    Artifact,
    Job,
    RecordTrace,
    Schedule,
    ScheduleInfo,
    Target,
    WorkloadInfo,
    adopt,
)


class ScheduleParts(NamedTuple):
    """A listed schedule (no TIR) with its workload, target and artifact (``record`` is None:
    lists leave it out)."""

    schedule: ScheduleInfo
    workload: WorkloadInfo
    target: Target
    artifact: Artifact
    record: RecordTrace | None


class ScheduleDetail(NamedTuple):
    """One schedule with its TIR, workload, target, artifact and record (None when the plain
    function won)."""

    schedule: Schedule
    workload: WorkloadInfo
    target: Target
    artifact: Artifact
    record: RecordTrace | None


class JobParts(NamedTuple):
    """A job with its workload and target."""

    job: Job
    workload: WorkloadInfo
    target: Target


def _schedule_query(detail: bool) -> Select[Any]:
    columns = [
        *labelled_columns(ScheduleRow, "s", skip=() if detail else ("tir",)),
        *labelled_columns(WorkloadRow, "w", skip=("mod_json",)),
        *labelled_columns(TargetRow, "t"),
        *labelled_columns(ArtifactRow, "a"),
    ]
    if detail:
        columns += [
            TuningRecordRow.id.label("r__id"),
            TuningRecordRow.tvm_version.label("r__tvm_version"),
            TuningRecordRow.trace_json.label("r__trace_json"),
        ]
    query = (
        select(*columns)
        .join(WorkloadRow, WorkloadRow.id == ScheduleRow.workload_id)
        .join(TargetRow, TargetRow.id == ScheduleRow.target_id)
        .join(ArtifactRow, ArtifactRow.id == ScheduleRow.artifact_id)
    )
    if detail:
        query = query.outerjoin(TuningRecordRow, TuningRecordRow.id == ScheduleRow.record_id)
    return query


_SCHEDULE = _schedule_query(True).where(ScheduleRow.id == bindparam("id"))
_JOB = (
    select(
        *labelled_columns(JobRow, "j"),
        *labelled_columns(WorkloadRow, "w", skip=("mod_json",)),
        *labelled_columns(TargetRow, "t"),
    )
    .join(WorkloadRow, WorkloadRow.id == JobRow.workload_id)
    .join(TargetRow, TargetRow.id == JobRow.target_id)
    .where(JobRow.id == bindparam("id"))
)


@lru_cache(maxsize=16)
def _list_query(series: bool, operator: bool, target: bool, workload: bool) -> Select[Any]:
    """The list query for one combination of filters (built once: building costs more than
    running it), every value a bound parameter."""
    query = _schedule_query(False).order_by(ScheduleRow.id.desc()).limit(bindparam("limit"))
    for wanted, column, name in (
        (series, ScheduleRow.tvm_series, "series"),
        (operator, WorkloadRow.operator, "operator"),
        (target, ScheduleRow.target_id, "target_id"),
        (workload, ScheduleRow.workload_id, "workload_id"),
    ):
        if wanted:
            query = query.where(column == bindparam(name))
    return query


def schedule(store: Store, schedule_id: int) -> ScheduleDetail | None:
    """One schedule, its TIR and its record's trace included; None if there is none."""
    with connect(store) as conn:
        rows = split_rows(conn.execute(_SCHEDULE, {"id": schedule_id}), "swtar")
    if not rows:
        return None
    found, workload, target, artifact, record = rows[0]
    return ScheduleDetail(
        adopt(Schedule, found),
        adopt(WorkloadInfo, workload),
        adopt(Target, target),
        adopt(Artifact, artifact),
        adopt(RecordTrace, record) if record["id"] else None,
    )


def schedules(
    store: Store,
    operator: str | None = None,
    target_id: int | None = None,
    workload_id: int | None = None,
    limit: int = 100,
) -> list[ScheduleParts]:
    """What `Schedules.list_schedules` returns (newest first, the store's TVM series), with each
    schedule's parts, without TIR or record."""
    values = {
        "series": store.series,
        "operator": operator,
        "target_id": target_id,
        "workload_id": workload_id,
    }
    query = _list_query(*(value is not None for value in values.values()))
    params = {k: v for k, v in values.items() if v is not None}
    with connect(store) as conn:
        rows = split_rows(conn.execute(query, {**params, "limit": limit}), "swta")
    return [
        ScheduleParts(
            adopt(ScheduleInfo, found), adopt(WorkloadInfo, workload), adopt(Target, target),
            adopt(Artifact, artifact), None,
        )
        for found, workload, target, artifact in rows
    ]  # fmt: skip


def job(store: Store, job_id: int) -> JobParts | None:
    """One job with its workload and target; None if there is none."""
    with connect(store) as conn:
        rows = split_rows(conn.execute(_JOB, {"id": job_id}), "jwt")
    if not rows:
        return None
    found, workload, target = rows[0]
    return JobParts(adopt(Job, found), adopt(WorkloadInfo, workload), adopt(Target, target))


_ARTIFACT = (
    select(*labelled_columns(ArtifactRow, "a"))
    .join(ScheduleRow, ScheduleRow.artifact_id == ArtifactRow.id)
    .where(ScheduleRow.id == bindparam("id"))
)


def artifact(store: Store, schedule_id: int) -> Artifact | None:
    """The artifact of a schedule; None if there is no schedule."""
    with connect(store) as conn:
        rows = split_rows(conn.execute(_ARTIFACT, {"id": schedule_id}), "a")
    return adopt(Artifact, rows[0][0]) if rows else None
