"""Jobs: creation (with the cache-hit answer), claims, fair share, progress, cancel, recovery.

Owns the ``jobs`` table, the source of truth of every job's state (the broker only delivers
``job_id``s), and ``job_stages``, how long each completed search and verification took.
Ownership: a worker owns a job from the `Jobs.claim` (or `Jobs.claim_next`) that returned
True/an id until the job is final or requeued; every write of the owner
(`heartbeat`, `update_progress`, `set_cost_model`, `cancel_running`, `fail` with a worker) is
one conditional UPDATE on (id, worker, state running) that matches nothing once someone else
owns the job, and says so (False; `set_cost_model` is best effort and says nothing), as does
`Schedules.publish` (a locking SELECT of the owned job, then its writes; None). A claim is one
conditional UPDATE too, so of any number of racing claimers (threads or processes) exactly
one wins; `claim_next` reads the queue in one transaction, then tries claims in order, each
its own transaction.

Durability: every write is committed before the method returns; a True from a write means the row
was changed and committed. `request_cancel` writes in one transaction and reads the job back in
another, so what it returns may already show a later writer's change. States only move forward
(queued -> running -> final), except `requeue_stale` (running -> queued, the reaper's recovery).

Thread safety: no state besides immutable configuration; each call opens its own session and
returns frozen `Job` values or plain ints/bools (see `schedules_db.store.base`). The API's
threads, the reaper and heartbeat threads share one instance.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update

from schedules_db.store.base import Aggregate, owned_by, rowcount
from schedules_db.tables import (
    JobRow,
    JobStageRow,
    ScheduleRow,
    TuningRecordRow,
    utcnow,
)
from schedules_db.values import FINAL_STATES, Job, JobState, value_of

JOB_STAGES = ("search", "verification")  # the stages `Jobs.record_stage` times


class Jobs(Aggregate):
    """Jobs: creation (with the cache-hit answer), claims, fair share, progress, cancel and
    recovery."""

    def create(
        self,
        workload_id: int,
        target_id: int,
        trials: int,
        queue: str,
        submitted_by: str | None = None,
        priority: int = 0,
        transfer_cost_model: bool = True,
        space: str = "plain",
        space_must_match: bool = True,
    ) -> Job:
        """Create a job. If a verified best already covers ``trials``, the job is born succeeded
        with ``cache_hit=True`` and no worker is involved; otherwise it is `queued`. With
        ``space_must_match`` a best found in another search space covers the job only if
        ``trials`` records were measured in the job's ``space`` too (an explicit request to
        search a space is not answered from the other one)."""
        now = utcnow()
        with self._session() as s:
            best = s.scalar(
                select(ScheduleRow).where(
                    ScheduleRow.workload_id == workload_id,
                    ScheduleRow.target_id == target_id,
                    *self._same_series(ScheduleRow),
                )
            )
            job = JobRow(
                workload_id=workload_id,
                target_id=target_id,
                trials=trials,
                queue=queue,
                submitted_by=submitted_by,
                priority=priority,
                transfer_cost_model=transfer_cost_model,
                space=space,
                created_at=now,
            )
            measured_in_space = s.scalar(
                select(func.count(TuningRecordRow.id)).where(
                    TuningRecordRow.workload_id == workload_id,
                    TuningRecordRow.target_id == target_id,
                    TuningRecordRow.space == space,
                    *self._same_series(TuningRecordRow),
                )
            )
            # A best found in another space does not answer a request to search this one.
            other_space = (
                space_must_match
                and best is not None
                and best.space != space
                and int(measured_in_space or 0) < trials
            )
            if best is not None and best.trials >= trials and not other_space:
                job.state = JobState.SUCCEEDED.value
                job.cache_hit = True
                job.schedule_id = best.id
                job.trials_done = best.trials
                job.best_latency_us = best.latency_us
                job.finished_at = now
            else:
                job.state = JobState.QUEUED.value
            s.add(job)
            s.flush()
            return value_of(Job, job)

    def unfinished(self, workload_id: int, target_id: int) -> Job | None:
        """A queued or running job of this (workload, target), if there is one."""
        with self._session() as s:
            row = s.scalar(
                select(JobRow)
                .where(
                    JobRow.workload_id == workload_id,
                    JobRow.target_id == target_id,
                    JobRow.state.in_([JobState.QUEUED.value, JobState.RUNNING.value]),
                )
                .order_by(JobRow.id)
            )
            return None if row is None else value_of(Job, row)

    def count_unfinished(self, submitted_by: str) -> int:
        """How many of this submitter's jobs are queued or running."""
        with self._session() as s:
            return int(
                s.scalar(
                    select(func.count(JobRow.id)).where(
                        JobRow.submitted_by == submitted_by,
                        JobRow.state.in_([JobState.QUEUED.value, JobState.RUNNING.value]),
                    )
                )
                or 0
            )

    def get(self, job_id: int) -> Job | None:
        """The job with this id, or None."""
        with self._session() as s:
            row = s.get(JobRow, job_id)
            return None if row is None else value_of(Job, row)

    def list_jobs(self, state: str | None = None, limit: int = 100) -> list[Job]:
        """Jobs, newest first, optionally of one state."""
        with self._session() as s:
            query = select(JobRow).order_by(JobRow.id.desc()).limit(limit)
            if state:
                query = query.where(JobRow.state == state)
            return [value_of(Job, row) for row in s.scalars(query)]

    def mark_enqueued(self, job_id: int, task_id: str | None = None) -> None:
        """Record that a message (broker task ``task_id``) for this job was handed to the broker
        now."""
        with self._session() as s:
            s.execute(
                update(JobRow)
                .where(JobRow.id == job_id)
                .values(enqueued_at=utcnow(), task_id=task_id)
            )

    def claim(self, job_id: int, worker: str, stale_after: timedelta) -> bool:
        """Atomically make ``worker`` the owner of a queued job (or of a running job whose owner
        stopped heart-beating for ``stale_after``). Returns False when someone else owns it or
        it is final: a duplicate delivery then simply exits."""
        now = utcnow()
        with self._session() as s:
            matched = rowcount(
                s,
                update(JobRow)
                .where(
                    JobRow.id == job_id,
                    (JobRow.state == JobState.QUEUED.value)
                    | (
                        (JobRow.state == JobState.RUNNING.value)
                        & (JobRow.heartbeat_at < now - stale_after)
                    ),
                )
                .values(
                    state=JobState.RUNNING.value,
                    worker=worker,
                    heartbeat_at=now,
                    attempt=JobRow.attempt + 1,
                    started_at=func.coalesce(JobRow.started_at, now),
                ),
            )
            return matched == 1

    def claim_next(self, target_ids: list[int], worker: str, stale_after: timedelta) -> int | None:
        """Claim the queued job a worker serving ``target_ids`` should run next, or None.

        The job table decides, not the broker's order (a broker message only wakes a worker):
        highest ``priority`` first; among equals, the submitter with the fewest running jobs,
        then the one served least recently, so one submitter's flood cannot starve the others;
        then the oldest job.
        """
        with self._session() as s:
            queued = s.scalars(
                select(JobRow)
                .where(JobRow.state == JobState.QUEUED.value, JobRow.target_id.in_(target_ids))
                .order_by(JobRow.priority.desc(), JobRow.id)
                .limit(200)
            ).all()
            if not queued:
                return None
            submitters = {job.submitted_by for job in queued}
            running = dict(
                s.execute(
                    select(JobRow.submitted_by, func.count(JobRow.id))
                    .where(
                        JobRow.state == JobState.RUNNING.value,
                        JobRow.submitted_by.in_([x for x in submitters if x is not None])
                        | JobRow.submitted_by.is_(None),
                    )
                    .group_by(JobRow.submitted_by)
                ).all()
            )
            last_served = dict(
                s.execute(
                    select(JobRow.submitted_by, func.max(JobRow.started_at))
                    .where(JobRow.started_at.is_not(None))
                    .group_by(JobRow.submitted_by)
                ).all()
            )
        never = datetime(1970, 1, 1)

        def order(job: JobRow) -> tuple[Any, ...]:
            served = last_served.get(job.submitted_by)
            return (
                -job.priority,
                running.get(job.submitted_by, 0),
                served.replace(tzinfo=None) if served is not None else never,
                job.id,
            )

        for job in sorted(queued, key=order):
            if self.claim(job.id, worker, stale_after):
                return job.id
        return None

    def set_cost_model(self, job_id: int, worker: str, name: str | None) -> None:
        """Record which transferred cost model the owner's search started from."""
        with self._session() as s:
            s.execute(update(JobRow).where(*owned_by(job_id, worker)).values(cost_model=name))

    def record_stage(self, job_id: int, stage: str, seconds: float) -> None:
        """Record that one of `JOB_STAGES` of the job took ``seconds`` on its worker (a row of
        `JobStageRow`, which only the metrics read: `schedules_db.gauges`); nothing for a job
        that does not exist."""
        if stage not in JOB_STAGES:
            raise ValueError(f"not a job stage: {stage!r}")
        with self._session() as s:
            target_id = s.scalar(select(JobRow.target_id).where(JobRow.id == job_id))
            if target_id is not None:
                s.add(JobStageRow(job_id=job_id, target_id=target_id, stage=stage, seconds=seconds))

    def heartbeat(self, job_id: int, worker: str) -> bool:
        """Refresh the owner's heartbeat; False if ``worker`` no longer owns the running job."""
        with self._session() as s:
            refresh = update(JobRow).where(*owned_by(job_id, worker)).values(heartbeat_at=utcnow())
            return rowcount(s, refresh) == 1

    def update_progress(
        self, job_id: int, worker: str, trials_done: int, best_latency_us: float | None
    ) -> bool:
        """Write the owner's progress (and a heartbeat). Returns False if it lost the job."""
        with self._session() as s:
            progress = (
                update(JobRow)
                .where(*owned_by(job_id, worker))
                .values(
                    trials_done=trials_done, best_latency_us=best_latency_us, heartbeat_at=utcnow()
                )
            )
            return rowcount(s, progress) == 1

    def fail(self, job_id: int, worker: str | None, error: str) -> bool:
        """Mark a job failed with a readable error (by its owner, or by anyone if worker=None)."""
        where = (
            owned_by(job_id, worker)
            if worker
            else (JobRow.id == job_id, JobRow.state.not_in(FINAL_STATES))
        )
        with self._session() as s:
            failed = (
                update(JobRow)
                .where(*where)
                .values(state=JobState.FAILED.value, error=error[:20000], finished_at=utcnow())
            )
            return rowcount(s, failed) == 1

    def request_cancel(self, job_id: int) -> Job | None:
        """Cancel a job: a queued job is cancelled at once; a running one gets
        ``cancel_requested`` and its worker stops it after the current batch; a final job is
        left as it is. Returns the job afterwards, or None if there is no such job."""
        now = utcnow()
        with self._session() as s:
            s.execute(
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.state == JobState.QUEUED.value)
                .values(state=JobState.CANCELLED.value, cancel_requested=True, finished_at=now)
            )
            s.execute(
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.state == JobState.RUNNING.value)
                .values(cancel_requested=True)
            )
        return self.get(job_id)

    def cancel_was_requested(self, job_id: int) -> bool:
        """True once `request_cancel` was called for the job."""
        with self._session() as s:
            return bool(s.scalar(select(JobRow.cancel_requested).where(JobRow.id == job_id)))

    def cancel_running(self, job_id: int, worker: str) -> bool:
        """The owner stopped its search on request: mark the job cancelled (records stay)."""
        with self._session() as s:
            cancelled = (
                update(JobRow)
                .where(*owned_by(job_id, worker))
                .values(state=JobState.CANCELLED.value, finished_at=utcnow())
            )
            return rowcount(s, cancelled) == 1

    def requeue_stale(self, stale_after: timedelta) -> list[Job]:
        """Put running jobs whose owner stopped heart-beating back to `queued` (the reaper's
        first duty). The old owner, should it wake up, no longer owns the job. Returns them as
        they were before (``state`` running, ``worker`` the old owner)."""
        cutoff = utcnow() - stale_after
        requeued: list[Job] = []
        with self._session() as s:
            stale = s.scalars(
                select(JobRow).where(
                    JobRow.state == JobState.RUNNING.value, JobRow.heartbeat_at < cutoff
                )
            ).all()
            for job in stale:
                matched = rowcount(
                    s,
                    update(JobRow)
                    .where(
                        JobRow.id == job.id,
                        JobRow.state == JobState.RUNNING.value,
                        JobRow.worker == job.worker,
                        JobRow.heartbeat_at < cutoff,
                    )
                    .values(
                        state=JobState.QUEUED.value,
                        error=f"worker {job.worker} stopped heart-beating; requeued",
                    )
                    .execution_options(synchronize_session=False),
                )
                if matched == 1:
                    requeued.append(value_of(Job, job))
        return requeued

    def queued_not_enqueued_since(self, before: datetime) -> list[Job]:
        """Queued jobs whose last broker message is older than ``before`` (or never sent)."""
        with self._session() as s:
            rows = s.scalars(
                select(JobRow).where(
                    JobRow.state == JobState.QUEUED.value,
                    (JobRow.enqueued_at.is_(None)) | (JobRow.enqueued_at < before),
                )
            )
            return [value_of(Job, row) for row in rows]
