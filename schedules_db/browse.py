"""Pages of the store for people browsing it: schedules and jobs filtered, sorted and cut into
pages with their total, the records of a tuning curve, and the overview's counts.

Every function is a few Core SELECTs on a connection of its own (as `schedules_db.lookups`), so
filtering, sorting and counting happen in the database: a page costs the same with 100 or
100,000 schedules in the store, bar the database's own sort. Sort keys and filters are closed
sets (`SCHEDULE_SORTS`, `JOB_SORTS`, `ScheduleFilter`): nothing a caller passes becomes SQL text.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, NamedTuple, TypeVar

from sqlalchemy import ColumnElement, Select, String, bindparam, case, cast, func, select

from schedules_db.figures import QUIET_CORES
from schedules_db.joins import connect, labelled_columns, split_rows
from schedules_db.lookups import JobParts, ScheduleParts
from schedules_db.store import Store
from schedules_db.tables import (
    ArtifactRow,
    JobRow,
    ScheduleRow,
    TargetRow,
    TuningRecordRow,
    WorkerRow,
    WorkloadRow,
)
from schedules_db.values import (
    Artifact,
    Job,
    JobState,
    ScheduleInfo,
    Target,
    WorkloadInfo,
    adopt,
)

T = TypeVar("T")

_GFLOPS = WorkloadRow.flop / ScheduleRow.latency_us / 1e3
SCHEDULE_SORTS: dict[str, Any] = {
    "date": ScheduleRow.updated_at,
    "gflops": _GFLOPS,
    "latency": ScheduleRow.latency_us,
    "speedup": ScheduleRow.untuned_latency_us / ScheduleRow.latency_us,
    # Only a peak measured on a quiet machine (`figures.is_quiet`): the others sort last.
    "peak": case((TargetRow.peak_interference <= QUIET_CORES, _GFLOPS / TargetRow.peak_gflops)),
    "trials": ScheduleRow.trials,
    "id": ScheduleRow.id,
}
"""What schedules sort by: name → SQL expression (ties broken by id)."""

JOB_SORTS: dict[str, Any] = {
    "id": JobRow.id,
    "created": JobRow.created_at,
    "trials": JobRow.trials,
    "best": JobRow.best_latency_us,
}
"""What jobs sort by: name → SQL expression (ties broken by id)."""


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of rows, the total that match the filters, and where the page starts."""

    rows: list[T]
    total: int
    offset: int
    limit: int


@dataclass(frozen=True)
class ScheduleFilter:
    """What a schedule list keeps (None: anything): the workload's operator, origin
    (``catalog`` / ``user``: its provenance), ``layout`` and ``dtype`` params, the schedule's
    target and search space, one workload."""

    operator: str | None = None
    target_id: int | None = None
    workload_id: int | None = None
    layout: str | None = None
    dtype: str | None = None
    space: str | None = None
    origin: str | None = None

    def conditions(self) -> list[ColumnElement[bool]]:
        """The WHERE conditions (the schedule query joins the workload)."""
        found: list[ColumnElement[bool]] = []
        for value, column in (
            (self.operator, WorkloadRow.operator),
            (self.target_id, ScheduleRow.target_id),
            (self.workload_id, ScheduleRow.workload_id),
            (self.space, ScheduleRow.space),
            (self.origin, WorkloadRow.origin),
        ):
            if value is not None:
                found.append(column == value)
        for value, name in ((self.layout, "layout"), (self.dtype, "dtype")):
            if value is not None:
                found.append(WorkloadRow.params[name].as_string() == value)
        return found


def _order(column: Any, tie: Any, descending: bool) -> list[Any]:
    """ORDER BY ``column`` then ``tie``; rows without a value (no peak measured) last."""
    if descending:
        return [column.desc().nulls_last(), tie.desc()]
    return [column.asc().nulls_last(), tie.asc()]


def _count(conn: Any, query: Select[Any]) -> int:
    return int(conn.execute(select(func.count()).select_from(query.subquery())).scalar_one())


_SCHEDULE_ROWS = (
    select(
        *labelled_columns(ScheduleRow, "s", skip=("tir",)),
        *labelled_columns(WorkloadRow, "w", skip=("mod_json",)),
        *labelled_columns(TargetRow, "t"),
        *labelled_columns(ArtifactRow, "a"),
    )
    .join(WorkloadRow, WorkloadRow.id == ScheduleRow.workload_id)
    .join(TargetRow, TargetRow.id == ScheduleRow.target_id)
    .join(ArtifactRow, ArtifactRow.id == ScheduleRow.artifact_id)
    .where(ScheduleRow.id.in_(bindparam("ids", expanding=True)))
)


def schedule_page(
    store: Store,
    where: ScheduleFilter,
    sort: str = "date",
    descending: bool = True,
    offset: int = 0,
    limit: int = 50,
    count: bool = True,
) -> Page[ScheduleParts]:
    """The verified best schedules of the store's TVM series that ``where`` keeps, sorted by
    ``sort`` (a `SCHEDULE_SORTS` key), rows ``offset`` to ``offset + limit``, and their total
    (without ``count``, -1: not counted)."""
    conditions = where.conditions()
    if store.series is not None:
        conditions.append(ScheduleRow.tvm_series == store.series)
    counted = (
        select(ScheduleRow.id)
        .join(WorkloadRow, WorkloadRow.id == ScheduleRow.workload_id)
        .where(*conditions)
    )
    # The page's ids first, sorting narrow rows (a deep offset on SQLite sorted whole joined
    # rows: 1.4 s at offset 99,950 of 100,000), then the page's rows by id.
    ids = (
        select(ScheduleRow.id)
        .join(WorkloadRow, WorkloadRow.id == ScheduleRow.workload_id)
        .join(TargetRow, TargetRow.id == ScheduleRow.target_id)
        .where(*conditions)
        .order_by(*_order(SCHEDULE_SORTS[sort], ScheduleRow.id, descending))
        .offset(offset)
        .limit(limit)
    )
    with connect(store) as conn:
        total = _count(conn, counted) if count else -1
        order = [schedule_id for (schedule_id,) in conn.execute(ids)]
        rows = split_rows(conn.execute(_SCHEDULE_ROWS, {"ids": order}), "swta") if order else []
    position = {schedule_id: n for n, schedule_id in enumerate(order)}
    rows.sort(key=lambda parts: position[parts[0]["id"]])
    parts = [
        ScheduleParts(
            adopt(ScheduleInfo, found), adopt(WorkloadInfo, workload), adopt(Target, target),
            adopt(Artifact, artifact), None,
        )
        for found, workload, target, artifact in rows
    ]  # fmt: skip
    return Page(parts, total, offset, limit)


def job_page(
    store: Store,
    state: str | None = None,
    sort: str = "id",
    descending: bool = True,
    offset: int = 0,
    limit: int = 50,
) -> Page[JobParts]:
    """Jobs (of ``state`` if given) with their workload and target, sorted by ``sort`` (a
    `JOB_SORTS` key), one page of them and their total."""
    conditions = [] if state is None else [JobRow.state == state]
    query = (
        select(
            *labelled_columns(JobRow, "j"),
            *labelled_columns(WorkloadRow, "w", skip=("mod_json",)),
            *labelled_columns(TargetRow, "t"),
        )
        .join(WorkloadRow, WorkloadRow.id == JobRow.workload_id)
        .join(TargetRow, TargetRow.id == JobRow.target_id)
        .where(*conditions)
        .order_by(*_order(JOB_SORTS[sort], JobRow.id, descending))
        .offset(offset)
        .limit(limit)
    )
    with connect(store) as conn:
        total = _count(conn, select(JobRow.id).where(*conditions))
        rows = split_rows(conn.execute(query), "jwt")
    parts = [
        JobParts(adopt(Job, job), adopt(WorkloadInfo, workload), adopt(Target, target))
        for job, workload, target in rows
    ]
    return Page(parts, total, offset, limit)


class CurvePoint(NamedTuple):
    """One measured candidate of a tuning curve: its record id, the job that measured it (None
    for imports), its mean latency (None: it failed to build or run), when it was stored."""

    record_id: int
    job_id: int | None
    latency_us: float | None
    created_at: datetime


def curve(
    store: Store, workload_id: int, target_id: int, space: str | None = None, limit: int = 20000
) -> list[CurvePoint]:
    """Every record of a (workload, target) in the store's TVM series (of one search space
    when ``space`` is given), in measurement order (record id), at most ``limit``."""
    conditions = [
        TuningRecordRow.workload_id == workload_id,
        TuningRecordRow.target_id == target_id,
    ]
    if store.series is not None:
        conditions.append(TuningRecordRow.tvm_series == store.series)
    if space is not None:
        conditions.append(TuningRecordRow.space == space)
    query = (
        select(
            TuningRecordRow.id,
            TuningRecordRow.job_id,
            TuningRecordRow.mean_run_us,
            TuningRecordRow.created_at,
        )
        .where(*conditions)
        .order_by(TuningRecordRow.id)
        .limit(limit)
    )
    with connect(store) as conn:
        return [CurvePoint(*row) for row in conn.execute(query)]


def other_targets(store: Store, workload_id: int) -> list[ScheduleParts]:
    """The verified best of one workload on every target (of the store's TVM series), fastest
    first."""
    return schedule_page(
        store, ScheduleFilter(workload_id=workload_id), "latency", False, 0, 1000, count=False
    ).rows


class Counts(NamedTuple):
    """The overview's counts."""

    targets: int
    workloads: int
    schedules: int
    queued: int
    running: int
    workers: int


def counts(store: Store, live_since: datetime) -> Counts:
    """How many targets, workloads and schedules (of the store's series) the store holds,
    jobs queued and running, and workers that heart-beat since ``live_since``."""
    series = [] if store.series is None else [ScheduleRow.tvm_series == store.series]
    states = (
        select(JobRow.state, func.count())
        .where(JobRow.state.in_([JobState.QUEUED.value, JobState.RUNNING.value]))
        .group_by(JobRow.state)
    )
    with connect(store) as conn:
        by_state = {state: count for state, count in conn.execute(states)}
        return Counts(
            targets=_scalar(conn, select(func.count(TargetRow.id))),
            workloads=_scalar(conn, select(func.count(WorkloadRow.id))),
            schedules=_scalar(conn, select(func.count(ScheduleRow.id)).where(*series)),
            queued=int(by_state.get(JobState.QUEUED.value, 0)),
            running=int(by_state.get(JobState.RUNNING.value, 0)),
            workers=_scalar(
                conn,
                select(func.count(WorkerRow.id)).where(
                    WorkerRow.stopped_at.is_(None), WorkerRow.heartbeat_at >= live_since
                ),
            ),
        )


def _scalar(conn: Any, query: Select[Any]) -> int:
    return int(conn.execute(query).scalar_one())


def fastest_per_target(store: Store, per_target: int = 5) -> dict[int, list[ScheduleParts]]:
    """The ``per_target`` schedules of highest GFLOPS on each target (target id → list)."""
    targets = [t.id for t in store.catalog.list_targets()]
    return {
        target_id: rows
        for target_id in targets
        if (
            rows := schedule_page(
                store, ScheduleFilter(target_id=target_id), "gflops", True, 0, per_target, False
            ).rows
        )
    }


def distinct_values(store: Store) -> dict[str, list[str]]:
    """What the schedule filters can take, for their menus: operators, spaces, origins,
    layouts and dtypes that occur among workloads and schedules."""
    with connect(store) as conn:

        def values(column: Any) -> list[str]:
            found = conn.execute(select(column).distinct().where(column.is_not(None)))
            return sorted({str(v) for (v,) in found if v not in (None, "")})

        return {
            "operator": values(WorkloadRow.operator),
            "space": values(ScheduleRow.space),
            "origin": values(WorkloadRow.origin),
            "layout": values(cast(WorkloadRow.params["layout"].as_string(), String)),
            "dtype": values(cast(WorkloadRow.params["dtype"].as_string(), String)),
        }
