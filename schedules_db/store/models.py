"""Whole-model jobs: a model, its tasks (each tuned by an ordinary job), its compile.

Owns the ``models`` and ``model_tasks`` tables. A model is created `tuning` with its tasks, whose
jobs exist already (`Jobs.create`); it is *ready* once every task's job is final. A worker
serving the model's target then claims its compile (`claim_compile`: one conditional UPDATE
from `tuning`, or from `compiling` whose heartbeat is older than the stale limit, so of racing
claimers exactly one wins and a compile whose worker died is taken over), heart-beats it, and
ends it: `finish` (the compiled library's artifact row and the `succeeded` state in one
transaction, the file written and fsynced before) or `fail`. Like jobs, every owner's write is
one conditional UPDATE on (id, worker, state compiling) that matches nothing once another
worker owns the compile. `request_cancel` stops a model that is not compiled yet; its task
jobs are the caller's to cancel (`Jobs.request_cancel`).

Thread safety and values: as every aggregate (`schedules_db.store.base`).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import false, func, or_, select, update

from schedules_db.store.base import Aggregate, rowcount
from schedules_db.tables import ArtifactRow, JobRow, ModelRow, ModelTaskRow, utcnow
from schedules_db.values import (
    FINAL_STATES,
    Artifact,
    Job,
    ModelJob,
    ModelState,
    ModelTask,
    ModelTaskProgress,
    NewModelTask,
    PublishedModel,
    value_of,
)


class Models(Aggregate):
    """Whole-model jobs: creation with their tasks, progress, compile claims, cancel."""

    def create_source(self, sha256: str, size: int, path: str, kind: str) -> Artifact:
        """The artifact row of an uploaded file already written into the artifact directory
        (the existing row when that content is stored already)."""
        artifact = self._get_or_create(
            ArtifactRow,
            Artifact,
            ArtifactRow.sha256 == sha256,
            {"sha256": sha256, "kind": kind, "size": size, "path": path},
        )
        assert artifact is not None, "artifacts are unique on sha256 only"
        return artifact

    def create(
        self,
        *,
        name: str,
        fmt: str,
        source_artifact_id: int,
        inputs: list[dict[str, Any]],
        outputs: list[dict[str, Any]],
        target_id: int,
        trials: int,
        queue: str,
        submitted_by: str | None,
        tasks: list[NewModelTask],
        reserve_trials: int = 0,
        layout: str = "plain",
        precision: str = "float32",
    ) -> ModelJob:
        """Record a model (`tuning`) and its tasks in one transaction; ``reserve_trials`` of
        its ``trials`` are held back for a second round (`continue_tasks`)."""
        with self._session() as s:
            row = ModelRow(
                name=name,
                format=fmt,
                layout=layout,
                precision=precision,
                source_artifact_id=source_artifact_id,
                inputs=inputs,
                outputs=outputs,
                target_id=target_id,
                trials=trials,
                reserve_trials=reserve_trials,
                queue=queue,
                state=ModelState.TUNING.value,
                submitted_by=submitted_by,
                cancel_requested=False,
                attempt=0,
            )
            s.add(row)
            s.flush()
            for position, task in enumerate(tasks):
                s.add(
                    ModelTaskRow(
                        model_id=row.id,
                        position=position,
                        name=task.name,
                        weight=task.weight,
                        workload_id=task.workload_id,
                        job_id=task.job_id,
                        trials=task.trials,
                    )
                )
            s.flush()
            return value_of(ModelJob, row)

    def get(self, model_id: int) -> ModelJob | None:
        """The model with this id, or None."""
        with self._session() as s:
            row = s.get(ModelRow, model_id)
            return None if row is None else value_of(ModelJob, row)

    def list_models(self, limit: int = 100) -> list[ModelJob]:
        """Models, newest first."""
        with self._session() as s:
            rows = s.scalars(select(ModelRow).order_by(ModelRow.id.desc()).limit(limit))
            return [value_of(ModelJob, row) for row in rows]

    def tasks(self, model_id: int) -> list[ModelTaskProgress]:
        """The model's tasks in extraction order, each with its job as it is now."""
        with self._session() as s:
            rows = s.execute(
                select(ModelTaskRow, JobRow)
                .join(JobRow, JobRow.id == ModelTaskRow.job_id)
                .where(ModelTaskRow.model_id == model_id)
                .order_by(ModelTaskRow.position)
            ).all()
            return [
                ModelTaskProgress(task=value_of(ModelTask, task), job=value_of(Job, job))
                for task, job in rows
            ]

    def ready(self, target_ids: list[int], stale_after: timedelta) -> list[ModelJob]:
        """Models on ``target_ids`` whose compile a worker may claim now: `tuning` with every
        task's job final, or `compiling` with a heartbeat older than ``stale_after``, and not
        cancelled; oldest first."""
        cutoff = utcnow() - stale_after
        unfinished = (
            select(ModelTaskRow.id)
            .join(JobRow, JobRow.id == ModelTaskRow.job_id)
            .where(ModelTaskRow.model_id == ModelRow.id, JobRow.state.not_in(FINAL_STATES))
            .exists()
        )
        with self._session() as s:
            rows = s.scalars(
                select(ModelRow)
                .where(
                    ModelRow.target_id.in_(target_ids),
                    ModelRow.cancel_requested.is_(False),
                    ((ModelRow.state == ModelState.TUNING.value) & ~unfinished)
                    | (
                        (ModelRow.state == ModelState.COMPILING.value)
                        & (ModelRow.heartbeat_at < cutoff)
                    ),
                )
                .order_by(ModelRow.id)
            )
            return [value_of(ModelJob, row) for row in rows]

    def claim_compile(self, model_id: int, worker: str, stale_after: timedelta) -> bool:
        """Atomically make ``worker`` the owner of the model's compile (see the module
        docstring); False when it is not ready, final, or owned by a live worker."""
        now = utcnow()
        with self._session() as s:
            unfinished = s.scalar(
                select(func.count(ModelTaskRow.id))
                .join(JobRow, JobRow.id == ModelTaskRow.job_id)
                .where(ModelTaskRow.model_id == model_id, JobRow.state.not_in(FINAL_STATES))
            )
            tuning_done = (ModelRow.state == ModelState.TUNING.value) if not unfinished else false()
            matched = rowcount(
                s,
                update(ModelRow)
                .where(
                    ModelRow.id == model_id,
                    ModelRow.cancel_requested.is_(False),
                    or_(
                        tuning_done,
                        (ModelRow.state == ModelState.COMPILING.value)
                        & (ModelRow.heartbeat_at < now - stale_after),
                    ),
                )
                .values(
                    state=ModelState.COMPILING.value,
                    worker=worker,
                    heartbeat_at=now,
                    attempt=ModelRow.attempt + 1,
                    started_at=func.coalesce(ModelRow.started_at, now),
                ),
            )
            return matched == 1

    def continue_tasks(self, model_id: int, worker: str, jobs: dict[int, tuple[int, int]]) -> bool:
        """Spend the reserve of a model whose compile ``worker`` owns, in one transaction: each
        task in ``jobs`` (task id: (the job that continues it, its extra trials)) is tuned by
        that job now and has those trials more, the reserve becomes 0, and, when ``jobs`` names
        any task, the model goes back to `tuning` unowned (with none, the compile stays
        ``worker``'s). False, writing nothing, when ``worker`` does not own the compile or no
        reserve is left."""
        with self._session() as s:
            model = s.scalar(select(ModelRow).where(*_owned(model_id, worker)).with_for_update())
            if model is None or model.reserve_trials <= 0:
                return False
            for task in s.scalars(select(ModelTaskRow).where(ModelTaskRow.model_id == model_id)):
                if task.id in jobs:
                    job_id, more = jobs[task.id]
                    task.job_id, task.trials = job_id, task.trials + more
            model.reserve_trials = 0
            if jobs:
                model.state, model.worker, model.heartbeat_at = ModelState.TUNING.value, None, None
            return True

    def heartbeat(self, model_id: int, worker: str) -> bool:
        """The owner of a compile is alive; False when it no longer owns it."""
        with self._session() as s:
            beat = update(ModelRow).where(*_owned(model_id, worker)).values(heartbeat_at=utcnow())
            return rowcount(s, beat) == 1

    def finish(self, model_id: int, worker: str, compiled: PublishedModel) -> bool:
        """The owner's compiled model: its artifact row (the file is in place already) and the
        `succeeded` state with the figures, in one transaction; False when not the owner."""
        with self._session() as s:
            row = s.scalar(select(ModelRow).where(*_owned(model_id, worker)).with_for_update())
            if row is None:
                return False
            artifact = s.scalar(
                select(ArtifactRow).where(ArtifactRow.sha256 == compiled.artifact_sha256)
            )
            if artifact is None:
                artifact = ArtifactRow(
                    sha256=compiled.artifact_sha256,
                    kind="relax-vm-library",
                    size=compiled.artifact_size,
                    path=compiled.artifact_path,
                )
                s.add(artifact)
                s.flush()
            row.artifact_id = artifact.id
            row.tasks_applied = compiled.tasks_applied
            row.untuned_ms = compiled.untuned_ms
            row.tuned_ms = compiled.tuned_ms
            row.max_abs_error = compiled.max_abs_error
            row.min_cosine = compiled.min_cosine
            row.state = ModelState.SUCCEEDED.value
            row.error = None
            row.finished_at = utcnow()
            return True

    def fail(self, model_id: int, worker: str, error: str) -> bool:
        """The owner's compile failed (``error`` says why); False when not the owner."""
        with self._session() as s:
            failed = (
                update(ModelRow)
                .where(*_owned(model_id, worker))
                .values(state=ModelState.FAILED.value, error=error[:4000], finished_at=utcnow())
            )
            return rowcount(s, failed) == 1

    def request_cancel(self, model_id: int) -> ModelJob | None:
        """Cancel a model still tuning (`cancelled` at once; its compile will not start) or
        compiling (``cancel_requested``: the owner drops its result); a final model stays as
        it is. Returns the model afterwards, or None if there is none."""
        now = utcnow()
        with self._session() as s:
            s.execute(
                update(ModelRow)
                .where(ModelRow.id == model_id, ModelRow.state == ModelState.TUNING.value)
                .values(state=ModelState.CANCELLED.value, cancel_requested=True, finished_at=now)
            )
            s.execute(
                update(ModelRow)
                .where(ModelRow.id == model_id, ModelRow.state == ModelState.COMPILING.value)
                .values(cancel_requested=True)
            )
        return self.get(model_id)

    def cancel_compiling(self, model_id: int, worker: str) -> bool:
        """The owner stopped a compile on request: mark the model cancelled."""
        with self._session() as s:
            cancelled = (
                update(ModelRow)
                .where(*_owned(model_id, worker))
                .values(state=ModelState.CANCELLED.value, finished_at=utcnow())
            )
            return rowcount(s, cancelled) == 1

    def cancel_abandoned(self, stale_after: timedelta) -> list[int]:
        """Models cancelled while compiling whose worker stopped heart-beating: `cancelled`
        now (no one compiles them again; the reaper's). Returns their ids."""
        cutoff = utcnow() - stale_after
        with self._session() as s:
            ids = list(
                s.scalars(
                    update(ModelRow)
                    .where(
                        ModelRow.state == ModelState.COMPILING.value,
                        ModelRow.cancel_requested.is_(True),
                        ModelRow.heartbeat_at < cutoff,
                    )
                    .values(state=ModelState.CANCELLED.value, finished_at=utcnow())
                    .returning(ModelRow.id)
                )
            )
        return ids

    def mark_woken(self, model_id: int) -> None:
        """Record that a wake-up message for the model's compile was sent now."""
        with self._session() as s:
            s.execute(update(ModelRow).where(ModelRow.id == model_id).values(woken_at=utcnow()))

    def not_woken_since(self, before: datetime, stale_after: timedelta) -> list[ModelJob]:
        """Models ready to compile (`ready`) on any target whose last wake-up message is older
        than ``before`` (or was never sent): the reaper's to send."""
        with self._session() as s:
            targets = list(s.scalars(select(ModelRow.target_id).distinct()))
        return [
            model
            for model in self.ready(targets, stale_after)
            if model.woken_at is None or _aware(model.woken_at) < before
        ]


def _aware(moment: datetime) -> datetime:
    """SQLite hands naive UTC datetimes back: make them comparable with `utcnow`."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _owned(model_id: int, worker: str) -> tuple[Any, ...]:
    return (
        ModelRow.id == model_id,
        ModelRow.worker == worker,
        ModelRow.state == ModelState.COMPILING.value,
    )
