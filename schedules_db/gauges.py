"""What the service's metrics read of the store when they are scraped (`read_fleet`): jobs by
state and target, the records stored in the last window, the workers heard from lately, and
the durations of the jobs' searches and verifications as cumulative bucket counts.

Five SELECTs on a connection of its own (as `schedules_db.lookups`), each an aggregate the
database computes: the counts stay a few rows whatever the size of the store. The window's
records are found through ``ix_records_created``; the job and stage counts read their whole
tables (a group-by, no rows returned). Every replica reads the same numbers: they are the
store's, not a process's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import case, func, select

from schedules_db.joins import connect
from schedules_db.store import Store
from schedules_db.tables import JobRow, JobStageRow, TargetRow, TuningRecordRow, WorkerRow

# Bounds (seconds) of the duration buckets: a tiny job's verification to a day-long search.
DURATION_BUCKETS_S = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
                      7200.0, 21600.0, 86400.0)  # fmt: skip


@dataclass(frozen=True)
class WorkerBeat:
    """A worker heard from lately: its targets' labels and its last heartbeat's age."""

    name: str
    targets: tuple[str, ...]
    heartbeat_age_s: float
    stopped: bool


@dataclass(frozen=True)
class StageTimes:
    """The completed runs of one stage on one target: how many, their total seconds, and how
    many took at most each bound of `DURATION_BUCKETS_S` (cumulative, as Prometheus counts)."""

    count: int
    total_s: float
    at_most: tuple[int, ...]


@dataclass(frozen=True)
class FleetCounts:
    """One reading of the store (see the module docstring); targets are named by label."""

    targets: tuple[str, ...]  # every target the store knows
    jobs: dict[tuple[str, str], int]  # (state, target) -> jobs
    recent_records: dict[str, int]  # target -> records stored within the window
    workers: tuple[WorkerBeat, ...]  # heard from within the horizon, most recent first
    stages: dict[tuple[str, str], StageTimes]  # (stage, target) -> its runs


def read_fleet(
    store: Store,
    window: timedelta,
    horizon: timedelta,
    buckets: Sequence[float] = DURATION_BUCKETS_S,
) -> FleetCounts:
    """The store's counts now: records stored within ``window`` (measured ones: imported
    records are left out), workers whose last heartbeat is within ``horizon``."""
    now = datetime.now(timezone.utc)
    with connect(store) as conn:
        labels = dict(conn.execute(select(TargetRow.id, TargetRow.label)).all())
        jobs = conn.execute(
            select(JobRow.state, JobRow.target_id, func.count()).group_by(
                JobRow.state, JobRow.target_id
            )
        ).all()
        job_counts = {(state, labels.get(target, str(target))): n for state, target, n in jobs}
        records = conn.execute(
            select(TuningRecordRow.target_id, func.count())
            .where(
                TuningRecordRow.created_at >= now - window, TuningRecordRow.unverified.is_(False)
            )
            .group_by(TuningRecordRow.target_id)
        ).all()
        recent = {labels.get(target, str(target)): n for target, n in records}
        beats = conn.execute(
            select(
                WorkerRow.name, WorkerRow.target_ids, WorkerRow.heartbeat_at, WorkerRow.stopped_at
            )
            .where(WorkerRow.heartbeat_at >= now - horizon)
            .order_by(WorkerRow.heartbeat_at.desc())
        ).all()
        workers = tuple(
            WorkerBeat(
                name,
                tuple(labels.get(t, str(t)) for t in target_ids),
                max(0.0, (now - _utc(beat)).total_seconds()),
                stopped is not None,
            )
            for name, target_ids, beat, stopped in beats
        )
        under = [func.sum(case((JobStageRow.seconds <= bound, 1), else_=0)) for bound in buckets]
        stages = conn.execute(
            select(
                JobStageRow.stage,
                JobStageRow.target_id,
                func.count(),
                func.sum(JobStageRow.seconds),
                *under,
            ).group_by(JobStageRow.stage, JobStageRow.target_id)
        ).all()
        stage_times = {
            (row[0], labels.get(row[1], str(row[1]))): StageTimes(
                int(row[2]), float(row[3] or 0.0), tuple(int(n or 0) for n in row[4:])
            )
            for row in stages
        }
    return FleetCounts(tuple(labels.values()), job_counts, recent, workers, stage_times)


def _utc(moment: datetime) -> datetime:
    """A stored time as UTC (SQLite gives it back without its zone)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
