"""Schedules: the verified best of each (workload, target, TVM series), its artifact, and
publishing one as a job finishes.

Owns the ``schedules`` and ``artifacts`` tables. Only `Schedules.publish` writes them, and
only for the job's owner: a schedule row is always a verified best, and is replaced only by a
faster one. Artifacts are content-addressed (sha256, unique) and shared by schedules.

Durability: the caller writes and fsyncs the artifact file first; `publish` then commits the
artifact row, the schedule row that points to it, the published record's cleared
``unverified`` flag and the job's ``succeeded`` state in ONE transaction, so a reader that sees
a schedule can download its artifact, and a succeeded job always has its schedule.

Thread safety: no state besides immutable configuration; each call opens its own session and
returns frozen `Schedule` / `Artifact` values (see `schedules_db.store.base`); `publish` locks
the job and the schedule rows (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite serialises
writers) so concurrent publishers of one key do not lose an update once its row exists; two
first publishers of one key race on ``uq_schedule_key`` and the loser's job fails (as before).
"""

from __future__ import annotations

from sqlalchemy import func, select

from schedules_db.store.base import Aggregate, owned_by
from schedules_db.tables import (
    ArtifactRow,
    JobRow,
    ScheduleRow,
    TuningRecordRow,
    WorkloadRow,
    utcnow,
)
from schedules_db.values import Artifact, JobState, NewSchedule, Schedule, value_of


class Schedules(Aggregate):
    """Verified best schedules and their artifacts, and publishing one as a job finishes."""

    def get(self, schedule_id: int) -> Schedule | None:
        """The schedule with this id, or None."""
        with self._session() as s:
            row = s.get(ScheduleRow, schedule_id)
            return None if row is None else value_of(Schedule, row)

    def best(self, workload_id: int, target_id: int) -> Schedule | None:
        """The verified best of one (workload, target), or None."""
        with self._session() as s:
            row = s.scalar(
                select(ScheduleRow).where(
                    ScheduleRow.workload_id == workload_id,
                    ScheduleRow.target_id == target_id,
                    *self._same_series(ScheduleRow),
                )
            )
            return None if row is None else value_of(Schedule, row)

    def list_schedules(
        self,
        operator: str | None = None,
        target_id: int | None = None,
        workload_id: int | None = None,
        limit: int = 100,
    ) -> list[Schedule]:
        """Verified best schedules, newest first, filtered by operator, target or workload."""
        with self._session() as s:
            query = (
                select(ScheduleRow)
                .where(*self._same_series(ScheduleRow))
                .order_by(ScheduleRow.id.desc())
                .limit(limit)
            )
            if operator is not None:
                query = query.join(WorkloadRow, WorkloadRow.id == ScheduleRow.workload_id).where(
                    WorkloadRow.operator == operator
                )
            if target_id is not None:
                query = query.where(ScheduleRow.target_id == target_id)
            if workload_id is not None:
                query = query.where(ScheduleRow.workload_id == workload_id)
            return [value_of(Schedule, row) for row in s.scalars(query)]

    def get_artifact(self, artifact_id: int) -> Artifact | None:
        """The artifact with this id, or None."""
        with self._session() as s:
            row = s.get(ArtifactRow, artifact_id)
            return None if row is None else value_of(Artifact, row)

    def all_artifacts(self) -> list[Artifact]:
        """Every artifact row (schedule libraries, model sources and compiled models)."""
        with self._session() as s:
            return [value_of(Artifact, r) for r in s.scalars(select(ArtifactRow).order_by("id"))]

    def publish(self, job_id: int, worker: str, new: NewSchedule | None) -> int | None:
        """Publish a verified schedule and mark the job succeeded, in one transaction.

        ``new`` replaces the stored best of the (workload, target, series) only when it is
        faster; the best's trial count becomes the job's budget or the number of stored records,
        whichever is larger (budgets are totals: a bigger one continues from the records).
        With ``new=None`` (no candidate beat the stored best) the job succeeds with the stored
        best. Returns the schedule id, or None if the caller no longer owns the job (nothing is
        written then).
        """
        now = utcnow()
        with self._session() as s:
            job = s.scalar(select(JobRow).where(*owned_by(job_id, worker)).with_for_update())
            if job is None:
                return None
            if new is not None and new.record_id is not None:
                published = s.get(TuningRecordRow, new.record_id)
                if published is None:
                    raise ValueError(f"publish: no record {new.record_id}")
                series = published.tvm_series
                published.unverified = False  # the worker has just verified it
            else:
                series = (new.tvm_series if new is not None else "") or self.series or ""
            best = s.scalar(
                select(ScheduleRow)
                .where(
                    ScheduleRow.workload_id == job.workload_id,
                    ScheduleRow.target_id == job.target_id,
                    ScheduleRow.tvm_series == series,
                )
                .with_for_update()
            )
            if new is not None and (best is None or new.latency_us < best.latency_us):
                artifact = s.scalar(
                    select(ArtifactRow).where(ArtifactRow.sha256 == new.artifact_sha256)
                )
                if artifact is None:
                    artifact = ArtifactRow(
                        sha256=new.artifact_sha256,
                        kind=new.artifact_kind,
                        size=new.artifact_size,
                        path=new.artifact_path,
                    )
                    s.add(artifact)
                    s.flush()
                if best is None:
                    best = ScheduleRow(
                        workload_id=job.workload_id,
                        target_id=job.target_id,
                        tvm_series=series,
                        trials=0,
                    )
                    s.add(best)
                best.record_id = new.record_id
                best.artifact_id = artifact.id
                best.latency_us = new.latency_us
                best.latency_spread = new.latency_spread
                best.untuned_latency_us = new.untuned_latency_us
                best.max_abs_error = new.max_abs_error
                best.tir = new.tir
                best.job_id = job.id
                best.space = new.space
                best.packed_params = new.packed_params
                best.updated_at = now
            if best is None:
                raise ValueError("publish without a schedule: no verified best exists")
            # Budgets are totals per (workload, target, series): a job asking for more trials
            # continues from the stored records, so the best covers all that were measured.
            measured = s.scalar(
                select(func.count(TuningRecordRow.id)).where(
                    TuningRecordRow.workload_id == job.workload_id,
                    TuningRecordRow.target_id == job.target_id,
                    TuningRecordRow.tvm_series == series,
                )
            )
            best.trials = max(best.trials or 0, job.trials, int(measured or 0))
            s.flush()
            job.state = JobState.SUCCEEDED.value
            job.schedule_id = best.id
            job.finished_at = now
            job.error = None
            return best.id
