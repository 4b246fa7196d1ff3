"""The store API: the one interface the REST service and the workers use to read and write.

Contract (what every caller may rely on):

* **Jobs.** The `jobs` table, not the broker, is the source of truth. A job is created `queued`
  (or directly `succeeded` with ``cache_hit`` when a verified best already covers its budget).
  A worker owns a job only after `claim_job` returned True: the claim is one conditional
  ``UPDATE ... WHERE state='queued' OR (state='running' AND heartbeat_at < stale)``, so of two
  deliveries of the same message at most one wins. Only the owner writes progress, heartbeats and
  the final state; `fail_job`/`finish_job` are ignored when the caller is no longer the owner.
* **Durability order.** A tuning record is committed in its own transaction as soon as it is
  measured, before the progress that counts it (`update_progress`) is written. An artifact file is
  written and fsynced into the artifact directory, then its row, the schedule row that points to it
  and the job's `succeeded` state are committed in one transaction: a reader that sees a schedule
  can always download its artifact, and a succeeded job always has its schedule.
* **Keys.** Records and schedules are keyed by (workload, target). A record of one target is
  never returned for another: every record query names both. A target's label names that one
  target: labels are unique, and the first target to take a label keeps it.
* **Failed candidates** are stored (they teach the cost model) with ``mean_run_us = NULL`` and are
  never returned as best or top-k.
* **Readers** see committed data only; a schedule row, once present, is always verified against
  the reference (only `finish_job` writes schedules, after verification).
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from schedules_db.models import (
    ArtifactRow,
    JobRow,
    ScheduleRow,
    TargetRow,
    TuningRecordRow,
    WorkerRow,
    WorkloadRow,
    utcnow,
)

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


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: the one spelling that keys are hashed from."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def sha256_hex(text: str) -> str:
    """Hex sha256 of a UTF-8 string."""
    return hashlib.sha256(text.encode()).hexdigest()


def tvm_series(version: str) -> str:
    """The compatibility series of a TVM version: major.minor ("0.27.0.post1" -> "0.27").
    Traces are only replayed within a series."""
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return f"{match.group(1)}.{match.group(2)}" if match else (version or "")


def target_key(canonical: dict[str, Any]) -> str:
    """The key of a canonical target dict: the first 32 hex digits of its JSON's sha256."""
    return sha256_hex(canonical_json(canonical))[:32]


TARGET_LABEL_LENGTH = 128  # TargetRow.label


def target_labels(label: str, key: str) -> list[str]:
    """The labels a new target with key ``key`` may take, in order of preference: ``label``
    itself, then ``label`` with a suffix of the key's first 8, 12, 16, 24 or 32 hex digits (the
    label cut to fit the column)."""
    fits = [label] if len(label) <= TARGET_LABEL_LENGTH else []
    return fits + [f"{label[: TARGET_LABEL_LENGTH - n - 1]}-{key[:n]}" for n in (8, 12, 16, 24, 32)]


@dataclass(frozen=True)
class NewRecord:
    """A measured candidate as the MetaSchedule adapter hands it to the store."""

    trace_json: str
    run_secs: list[float]
    args_info: list[Any]
    tvm_version: str
    space: str = "plain"  # the search space that produced it (tuning.spaces)
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


class Store:
    """Repository functions over one SQLAlchemy engine (SQLite or PostgreSQL)."""

    def __init__(self, engine: Engine, tvm_series: str | None = None) -> None:
        """``tvm_series`` (e.g. "0.27", see `tvm_series`): records and schedules of any other
        TVM series are invisible to this store's lookups (the service and the workers set it;
        None sees every series)."""
        self.engine = engine
        self.series = tvm_series
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def _same_series(self, model: Any) -> tuple[Any, ...]:
        return () if self.series is None else (model.tvm_series == self.series,)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on error."""
        with self._sessions.begin() as session:
            yield session

    # ---------------------------------------------------------------- targets and workloads
    def get_or_create_target(
        self, canonical: dict[str, Any], kind: str, label: str, fingerprint: dict[str, Any]
    ) -> TargetRow:
        """Return the target row of a canonical target dict, creating it on first use.

        Labels are unique (index ``ix_targets_label``): a new target whose ``label`` another
        target holds gets the first free one of `target_labels` (``znver4-2c-1a2b3c4d``), so a
        label keeps naming the target that took it first. Safe with concurrent creators (other
        processes, SQLite or PostgreSQL): an insert that loses to the same target returns the
        winner's row; one that loses the label to another target tries the next label.
        """
        key = target_key(canonical)
        values = dict(key=key, canonical_json=canonical_json(canonical), kind=kind,
                      fingerprint=fingerprint)  # fmt: skip
        for candidate in target_labels(label, key):
            # None: the insert lost on the label (another target holds it), not on the key.
            labelled = {**values, "label": candidate}
            row = self._get_or_create(TargetRow, TargetRow.key == key, labelled)
            if row is not None:
                return row
        raise RuntimeError(f"every label derived from {label!r} is taken")

    def get_target(self, target_id: int) -> TargetRow | None:
        """The target row with this id, or None."""
        with self.session() as s:
            return s.get(TargetRow, target_id)

    def find_target(self, key_or_label: str) -> TargetRow | None:
        """The target with this key or, failing that, this label (labels are unique)."""
        with self.session() as s:
            row = s.scalar(select(TargetRow).where(TargetRow.key == key_or_label))
            if row is None:
                row = s.scalar(select(TargetRow).where(TargetRow.label == key_or_label))
            return row

    def list_targets(self) -> list[TargetRow]:
        """Every known target, oldest first."""
        with self.session() as s:
            return list(s.scalars(select(TargetRow).order_by(TargetRow.id)))

    def get_or_create_workload(
        self, shash: str, mod_json: str, operator: str | None, params: dict[str, Any], flop: float
    ) -> WorkloadRow:
        """Return the workload with this structural hash and origin, creating it on first use.

        The origin follows ``operator``: a named catalog operator is a ``catalog`` workload
        (built by the service itself); no operator means ``user`` (raw TIR or imported, parsed
        in isolation). The two are keyed apart, so a user's function never takes over a catalog
        workload's identity, reference or schedules, even when it hashes the same. The caller
        checks structural equality against ``mod_json`` of a returned row when it must be
        certain (a 64-bit hash collision is the only way the two can differ).
        """
        origin = CATALOG if operator is not None else USER
        return self._get_or_create(
            WorkloadRow,
            (WorkloadRow.shash == shash) & (WorkloadRow.origin == origin),
            dict(shash=shash, origin=origin, mod_json=mod_json, operator=operator, params=params,
                 flop=flop),
        )  # fmt: skip

    def get_workload(self, workload_id: int) -> WorkloadRow | None:
        """The workload row with this id, or None."""
        with self.session() as s:
            return s.get(WorkloadRow, workload_id)

    def find_workload(self, shash: str) -> WorkloadRow | None:
        """The workload with this structural hash (the catalog's before a user's), or None."""
        with self.session() as s:
            return s.scalar(
                select(WorkloadRow)
                .where(WorkloadRow.shash == shash)
                .order_by(WorkloadRow.origin)  # "catalog" < "user"
                .limit(1)
            )

    def _get_or_create(self, model: type, where: Any, values: dict[str, Any]) -> Any:
        """The row matching ``where``, else a new one from ``values``; when the insert
        conflicts, the row a concurrent creator made (None if the conflict was on another
        unique column, so that nothing matches ``where``)."""
        with self.session() as s:
            row = s.scalar(select(model).where(where))
            if row is not None:
                return row
        try:
            with self.session() as s:
                row = model(**values)
                s.add(row)
                s.flush()
                return row
        except IntegrityError:  # created concurrently by another process: read theirs
            with self.session() as s:
                return s.scalar(select(model).where(where))

    # ---------------------------------------------------------------- jobs
    def create_job(
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
    ) -> JobRow:
        """Create a job. If a verified best already covers ``trials``, the job is born succeeded
        with ``cache_hit=True`` and no worker is involved; otherwise it is `queued`. With
        ``space_must_match`` a best found in another search space covers the job only if
        ``trials`` records were measured in the job's ``space`` too (an explicit request to
        search a space is not answered from the other one)."""
        now = utcnow()
        with self.session() as s:
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
            covered = best is not None and best.trials >= trials
            # A best found in another space does not answer a request to search this one.
            if (
                covered
                and space_must_match
                and best.space != space
                and int(measured_in_space or 0) < trials
            ):
                covered = False
            if covered:
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
            return job

    def unfinished_job(self, workload_id: int, target_id: int) -> JobRow | None:
        """A queued or running job of this (workload, target), if there is one."""
        with self.session() as s:
            return s.scalar(
                select(JobRow)
                .where(
                    JobRow.workload_id == workload_id,
                    JobRow.target_id == target_id,
                    JobRow.state.in_([JobState.QUEUED.value, JobState.RUNNING.value]),
                )
                .order_by(JobRow.id)
            )

    def count_unfinished_jobs(self, submitted_by: str) -> int:
        """How many of this submitter's jobs are queued or running."""
        with self.session() as s:
            return int(
                s.scalar(
                    select(func.count(JobRow.id)).where(
                        JobRow.submitted_by == submitted_by,
                        JobRow.state.in_([JobState.QUEUED.value, JobState.RUNNING.value]),
                    )
                )
                or 0
            )

    def get_job(self, job_id: int) -> JobRow | None:
        """The job row with this id, or None."""
        with self.session() as s:
            return s.get(JobRow, job_id)

    def list_jobs(self, state: str | None = None, limit: int = 100) -> list[JobRow]:
        """Jobs, newest first, optionally of one state."""
        with self.session() as s:
            query = select(JobRow).order_by(JobRow.id.desc()).limit(limit)
            if state:
                query = query.where(JobRow.state == state)
            return list(s.scalars(query))

    def mark_enqueued(self, job_id: int, task_id: str | None = None) -> None:
        """Record that a message (broker task ``task_id``) for this job was handed to the broker
        now."""
        with self.session() as s:
            s.execute(
                update(JobRow)
                .where(JobRow.id == job_id)
                .values(enqueued_at=utcnow(), task_id=task_id)
            )

    def claim_job(self, job_id: int, worker: str, stale_after: timedelta) -> bool:
        """Atomically make ``worker`` the owner of a queued job (or of a running job whose owner
        stopped heart-beating for ``stale_after``). Returns False when someone else owns it or
        it is final: a duplicate delivery then simply exits."""
        now = utcnow()
        with self.session() as s:
            result = s.execute(
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
                )
            )
            return result.rowcount == 1

    def claim_next(self, target_ids: list[int], worker: str, stale_after: timedelta) -> int | None:
        """Claim the queued job a worker serving ``target_ids`` should run next, or None.

        The job table decides, not the broker's order (a broker message only wakes a worker):
        highest ``priority`` first; among equals, the submitter with the fewest running jobs,
        then the one served least recently, so one submitter's flood cannot starve the others;
        then the oldest job.
        """
        with self.session() as s:
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
            if self.claim_job(job.id, worker, stale_after):
                return job.id
        return None

    # -- workers --------------------------------------------------------------------------
    def register_worker(
        self,
        name: str,
        hostname: str,
        pid: int,
        target_ids: list[int],
        fingerprint: dict[str, Any],
        rpc: dict[str, Any] | None = None,
    ) -> WorkerRow:
        """Record a worker that starts (a restarted worker of the same name replaces its row)."""
        now = utcnow()
        values = {
            "hostname": hostname,
            "pid": pid,
            "target_ids": list(target_ids),
            "fingerprint": fingerprint,
            "rpc": rpc,
            "current_job_id": None,
            "started_at": now,
            "heartbeat_at": now,
            "stopped_at": None,
        }
        with self.session() as s:
            row = s.scalar(select(WorkerRow).where(WorkerRow.name == name))
            if row is None:
                row = WorkerRow(name=name, **values)
                s.add(row)
            else:
                for key, value in values.items():
                    setattr(row, key, value)
            s.flush()
            return row

    def worker_heartbeat(self, name: str, current_job_id: int | None) -> None:
        """A live worker's periodic sign of life, with the job it is running."""
        with self.session() as s:
            s.execute(
                update(WorkerRow)
                .where(WorkerRow.name == name)
                .values(heartbeat_at=utcnow(), current_job_id=current_job_id, stopped_at=None)
            )

    def worker_stopped(self, name: str) -> None:
        """A worker that shuts down cleanly says so (a killed one just goes stale)."""
        with self.session() as s:
            s.execute(
                update(WorkerRow)
                .where(WorkerRow.name == name)
                .values(stopped_at=utcnow(), current_job_id=None)
            )

    def list_workers(self) -> list[WorkerRow]:
        """Every worker ever registered, most recent heartbeat first."""
        with self.session() as s:
            return list(s.scalars(select(WorkerRow).order_by(WorkerRow.heartbeat_at.desc())))

    def live_target_ids(self, stale_after: timedelta) -> set[int]:
        """Targets served by at least one worker that heart-beat within ``stale_after``."""
        cutoff = utcnow() - stale_after
        with self.session() as s:
            rows = s.scalars(
                select(WorkerRow).where(
                    WorkerRow.stopped_at.is_(None), WorkerRow.heartbeat_at >= cutoff
                )
            ).all()
        return {target_id for row in rows for target_id in row.target_ids}

    def registered_target_ids(self) -> set[int]:
        """Targets some worker ever registered for, live or not (the targets a job may name
        without the admin scope)."""
        with self.session() as s:
            lists = s.scalars(select(WorkerRow.target_ids)).all()
        return {target_id for ids in lists for target_id in ids}

    def set_cost_model(self, job_id: int, worker: str, name: str | None) -> None:
        """Record which transferred cost model the owner's search started from."""
        with self.session() as s:
            s.execute(update(JobRow).where(*self._owned(job_id, worker)).values(cost_model=name))

    def heartbeat(self, job_id: int, worker: str) -> bool:
        """Refresh the owner's heartbeat; False if ``worker`` no longer owns the running job."""
        with self.session() as s:
            result = s.execute(
                update(JobRow).where(*self._owned(job_id, worker)).values(heartbeat_at=utcnow())
            )
            return result.rowcount == 1

    def update_progress(
        self, job_id: int, worker: str, trials_done: int, best_latency_us: float | None
    ) -> bool:
        """Write the owner's progress (and a heartbeat). Returns False if it lost the job."""
        with self.session() as s:
            result = s.execute(
                update(JobRow)
                .where(*self._owned(job_id, worker))
                .values(
                    trials_done=trials_done, best_latency_us=best_latency_us, heartbeat_at=utcnow()
                )
            )
            return result.rowcount == 1

    def fail_job(self, job_id: int, worker: str | None, error: str) -> bool:
        """Mark a job failed with a readable error (by its owner, or by anyone if worker=None)."""
        where = (
            self._owned(job_id, worker)
            if worker
            else (JobRow.id == job_id, JobRow.state.not_in(FINAL_STATES))
        )
        with self.session() as s:
            result = s.execute(
                update(JobRow)
                .where(*where)
                .values(state=JobState.FAILED.value, error=error[:20000], finished_at=utcnow())
            )
            return result.rowcount == 1

    def finish_job(self, job_id: int, worker: str, new: NewSchedule | None) -> int | None:
        """Publish a verified schedule and mark the job succeeded, in one transaction.

        ``new`` replaces the stored best of the (workload, target, series) only when it is
        faster; the best's trial count becomes the job's budget or the number of stored records,
        whichever is larger (budgets are totals: a bigger one continues from the records).
        With ``new=None`` (no candidate beat the stored best) the job succeeds with the stored
        best. Returns the schedule id, or None if the caller no longer owns the job (nothing is
        written then).
        """
        now = utcnow()
        with self.session() as s:
            job = s.scalar(select(JobRow).where(*self._owned(job_id, worker)).with_for_update())
            if job is None:
                return None
            if new is not None and new.record_id is not None:
                published = s.get(TuningRecordRow, new.record_id)
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
                best.untuned_latency_us = new.untuned_latency_us
                best.max_abs_error = new.max_abs_error
                best.tir = new.tir
                best.job_id = job.id
                best.space = new.space
                best.packed_params = new.packed_params
                best.updated_at = now
            if best is None:
                raise ValueError("finish_job without a schedule: no verified best exists")
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

    def request_cancel(self, job_id: int) -> JobRow | None:
        """Cancel a job: a queued job is cancelled at once; a running one gets
        ``cancel_requested`` and its worker stops it after the current batch; a final job is
        left as it is. Returns the job afterwards, or None if there is no such job."""
        now = utcnow()
        with self.session() as s:
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
        return self.get_job(job_id)

    def cancel_was_requested(self, job_id: int) -> bool:
        """True once `request_cancel` was called for the job."""
        with self.session() as s:
            return bool(s.scalar(select(JobRow.cancel_requested).where(JobRow.id == job_id)))

    def cancel_running(self, job_id: int, worker: str) -> bool:
        """The owner stopped its search on request: mark the job cancelled (records stay)."""
        with self.session() as s:
            result = s.execute(
                update(JobRow)
                .where(*self._owned(job_id, worker))
                .values(state=JobState.CANCELLED.value, finished_at=utcnow())
            )
            return result.rowcount == 1

    def requeue_stale(self, stale_after: timedelta) -> list[JobRow]:
        """Put running jobs whose owner stopped heart-beating back to `queued` (the reaper's
        first duty). The old owner, should it wake up, no longer owns the job. Returns them."""
        cutoff = utcnow() - stale_after
        requeued = []
        with self.session() as s:
            stale = s.scalars(
                select(JobRow).where(
                    JobRow.state == JobState.RUNNING.value, JobRow.heartbeat_at < cutoff
                )
            ).all()
            for job in stale:
                result = s.execute(
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
                    .execution_options(synchronize_session=False)
                )
                if result.rowcount == 1:
                    requeued.append(job)
        return requeued

    def queued_not_enqueued_since(self, before: datetime) -> list[JobRow]:
        """Queued jobs whose last broker message is older than ``before`` (or never sent)."""
        with self.session() as s:
            return list(
                s.scalars(
                    select(JobRow).where(
                        JobRow.state == JobState.QUEUED.value,
                        (JobRow.enqueued_at.is_(None)) | (JobRow.enqueued_at < before),
                    )
                )
            )

    @staticmethod
    def _owned(job_id: int, worker: str) -> tuple[Any, ...]:
        return (
            JobRow.id == job_id,
            JobRow.worker == worker,
            JobRow.state == JobState.RUNNING.value,
        )

    # ---------------------------------------------------------------- tuning records
    def add_record(
        self, workload_id: int, target_id: int, job_id: int | None, record: NewRecord
    ) -> bool:
        """Store a measured candidate; returns False if this exact trace was already stored
        for the (workload, target) (a re-measurement of a known schedule is not a new record)."""
        trace_sha = sha256_hex(record.trace_json)
        try:
            with self.session() as s:
                s.add(
                    TuningRecordRow(
                        workload_id=workload_id,
                        target_id=target_id,
                        job_id=job_id,
                        trace_json=record.trace_json,
                        trace_sha256=trace_sha,
                        run_secs=list(record.run_secs),
                        mean_run_us=record.mean_run_us,
                        args_info=record.args_info,
                        tvm_version=record.tvm_version,
                        tvm_series=tvm_series(record.tvm_version),
                        space=record.space,
                        unverified=record.unverified,
                    )
                )
            return True
        except IntegrityError:
            return False

    def drop_unverified(self, record_ids: list[int]) -> int:
        """Delete these records if they are still unverified imports; how many went."""
        with self.session() as s:
            result = s.execute(
                delete(TuningRecordRow).where(
                    TuningRecordRow.id.in_(record_ids), TuningRecordRow.unverified.is_(True)
                )
            )
            return result.rowcount

    def has_trace(self, workload_id: int, target_id: int, trace_json: str) -> bool:
        """True if this exact trace is already stored for the (workload, target)."""
        with self.session() as s:
            return (
                s.scalar(
                    select(TuningRecordRow.id).where(
                        TuningRecordRow.workload_id == workload_id,
                        TuningRecordRow.target_id == target_id,
                        TuningRecordRow.trace_sha256 == sha256_hex(trace_json),
                        *self._same_series(TuningRecordRow),
                    )
                )
                is not None
            )

    def top_k_records(
        self, workload_id: int, target_id: int, k: int, verified_only: bool = False
    ) -> list[TuningRecordRow]:
        """The k fastest successful records of one (workload, target), fastest first
        (``verified_only``: leave out imported records no worker has verified)."""
        with self.session() as s:
            return list(
                s.scalars(
                    select(TuningRecordRow)
                    .where(
                        TuningRecordRow.workload_id == workload_id,
                        TuningRecordRow.target_id == target_id,
                        TuningRecordRow.mean_run_us.is_not(None),
                        *self._same_series(TuningRecordRow),
                        *((TuningRecordRow.unverified.is_(False),) if verified_only else ()),
                    )
                    .order_by(TuningRecordRow.mean_run_us, TuningRecordRow.id)
                    .limit(k)
                )
            )

    def records(
        self,
        target_id: int,
        workload_id: int | None = None,
        job_id: int | None = None,
        verified_only: bool = False,
    ) -> list[TuningRecordRow]:
        """Every record of a target (optionally of one workload or job), oldest first
        (``verified_only``: leave out imported records no worker has verified)."""
        with self.session() as s:
            query = select(TuningRecordRow).where(
                TuningRecordRow.target_id == target_id, *self._same_series(TuningRecordRow)
            )
            if verified_only:
                query = query.where(TuningRecordRow.unverified.is_(False))
            if workload_id is not None:
                query = query.where(TuningRecordRow.workload_id == workload_id)
            if job_id is not None:
                query = query.where(TuningRecordRow.job_id == job_id)
            return list(s.scalars(query.order_by(TuningRecordRow.id)))

    def count_records(
        self,
        target_id: int,
        workload_id: int | None = None,
        job_id: int | None = None,
        space: str | None = None,
    ) -> int:
        """How many records `records` would return (``space``: only those of that space)."""
        with self.session() as s:
            query = select(func.count(TuningRecordRow.id)).where(
                TuningRecordRow.target_id == target_id, *self._same_series(TuningRecordRow)
            )
            if workload_id is not None:
                query = query.where(TuningRecordRow.workload_id == workload_id)
            if job_id is not None:
                query = query.where(TuningRecordRow.job_id == job_id)
            if space is not None:
                query = query.where(TuningRecordRow.space == space)
            return int(s.scalar(query) or 0)

    def record_stats_by_target(self, workload_id: int) -> dict[int, tuple[int, float | None]]:
        """For one workload: target id -> (records, fastest successful mean in us)."""
        with self.session() as s:
            rows = s.execute(
                select(
                    TuningRecordRow.target_id,
                    func.count(TuningRecordRow.id),
                    func.min(TuningRecordRow.mean_run_us),
                )
                .where(
                    TuningRecordRow.workload_id == workload_id,
                    *self._same_series(TuningRecordRow),
                )
                .group_by(TuningRecordRow.target_id)
            ).all()
        return {int(t): (int(n), best) for t, n, best in rows}

    def list_workloads(self, operator: str | None = None, limit: int = 100) -> list[WorkloadRow]:
        """Workloads, newest first, optionally of one operator."""
        with self.session() as s:
            query = select(WorkloadRow).order_by(WorkloadRow.id.desc()).limit(limit)
            if operator is not None:
                query = query.where(WorkloadRow.operator == operator)
            return list(s.scalars(query))

    def get_record(self, record_id: int) -> TuningRecordRow | None:
        """The record with this id, or None."""
        with self.session() as s:
            return s.get(TuningRecordRow, record_id)

    # ---------------------------------------------------------------- schedules and artifacts
    def get_schedule(self, schedule_id: int) -> ScheduleRow | None:
        """The schedule row with this id, or None."""
        with self.session() as s:
            return s.get(ScheduleRow, schedule_id)

    def best_schedule(self, workload_id: int, target_id: int) -> ScheduleRow | None:
        """The verified best of one (workload, target), or None."""
        with self.session() as s:
            return s.scalar(
                select(ScheduleRow).where(
                    ScheduleRow.workload_id == workload_id,
                    ScheduleRow.target_id == target_id,
                    *self._same_series(ScheduleRow),
                )
            )

    def list_schedules(
        self,
        operator: str | None = None,
        target_id: int | None = None,
        workload_id: int | None = None,
        limit: int = 100,
    ) -> list[ScheduleRow]:
        """Verified best schedules, newest first, filtered by operator, target or workload."""
        with self.session() as s:
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
            return list(s.scalars(query))

    def get_artifact(self, artifact_id: int) -> ArtifactRow | None:
        """The artifact row with this id, or None."""
        with self.session() as s:
            return s.get(ArtifactRow, artifact_id)
