"""Neighbour answers: unverified, refitted schedules for workloads without a verified best.

Contract:

* An answer is keyed by (workload, target, TVM series, the neighbour's schedule): offering the
  same one twice returns the stored one, whatever its state (a withdrawn answer is never
  offered again).
* States move one way: ``offered`` → ``withdrawn`` (a worker's verification failed) or
  ``offered`` → ``superseded`` (a verified best of the workload was published). Only
  ``offered`` answers are served; `withdraw` and `supersede` touch only offered rows.
* Reads name the target and, when the store has a series, see only that series.
* `candidates` and `sources` read only verified bests whose record is a successful, verified
  one (the trace to refit), as `schedules_db.reader` serves them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Select, select, update
from sqlalchemy.exc import IntegrityError

from schedules_db.store.base import Aggregate, rowcount
from schedules_db.tables import (
    NeighbourAnswerRow,
    ScheduleRow,
    TuningRecordRow,
    WorkloadRow,
    utcnow,
)
from schedules_db.values import (
    USER,
    NeighbourAnswer,
    NeighbourCandidate,
    NeighbourSource,
    NeighbourState,
    NewNeighbourAnswer,
    Workload,
    value_of,
)

MAX_SOURCES = 500  # tuned workloads of one kind read per request (newest first)
# The columns of a NeighbourCandidate, and those a NeighbourSource adds, in field order.
_CANDIDATE = (
    WorkloadRow.id,
    WorkloadRow.shash,
    WorkloadRow.origin,
    WorkloadRow.operator,
    WorkloadRow.params,
    WorkloadRow.flop,
)
_SOURCE = (
    WorkloadRow.mod_json,
    ScheduleRow.id,
    ScheduleRow.latency_us,
    ScheduleRow.space,
    TuningRecordRow.trace_json,
    TuningRecordRow.tvm_version,
)

_N = NeighbourAnswerRow
_OFFERED = NeighbourState.OFFERED.value


class Neighbours(Aggregate):
    """The ``neighbour_answers`` aggregate (see the module's contract)."""

    def known_workloads(self, shashes: Sequence[str]) -> list[Workload]:
        """The stored workloads of these structural hashes, one per hash (the catalog's
        before a user's of the same hash)."""
        hashes = list(dict.fromkeys(shashes))
        if not hashes:
            return []
        with self._session() as s:
            rows = s.scalars(
                select(WorkloadRow)
                .where(WorkloadRow.shash.in_(hashes))
                .order_by(WorkloadRow.origin.desc(), WorkloadRow.id)  # user first: catalog wins
            ).all()
            found = {row.shash: value_of(Workload, row) for row in rows}
        return [found[h] for h in hashes if h in found]

    def candidates(
        self, target_id: int, operator: str | None, limit: int = MAX_SOURCES
    ) -> list[NeighbourCandidate]:
        """Workloads with a verified best on the target that has a record to refit: catalog
        workloads of ``operator``, or (``operator`` None) user workloads; newest first. Their
        keys only (no module or trace text: `sources` reads those for the chosen few)."""
        kind = WorkloadRow.origin == USER if operator is None else WorkloadRow.operator == operator
        query = (
            self._refittable(select(*_CANDIDATE), target_id)
            .where(kind)
            .order_by(WorkloadRow.id.desc())
            .limit(limit)
        )
        with self._session() as s:
            return [NeighbourCandidate(*row) for row in s.execute(query).all()]

    def sources(self, target_id: int, workload_ids: Sequence[int]) -> list[NeighbourSource]:
        """The workloads ``workload_ids`` (candidates, in that order) with their module and
        their best's trace on the target; one that no longer has a refittable best is left
        out."""
        if not workload_ids:
            return []
        query = self._refittable(select(*_CANDIDATE, *_SOURCE), target_id).where(
            WorkloadRow.id.in_(list(workload_ids))
        )
        with self._session() as s:
            found = {row[0]: NeighbourSource(*row) for row in s.execute(query).all()}
        return [found[i] for i in workload_ids if i in found]

    def _refittable(self, query: Select[Any], target_id: int) -> Select[Any]:
        """``query`` over workloads joined to their best on the target (in the store's series)
        whose record is successful and verified: a trace to refit."""
        series = () if self.series is None else (ScheduleRow.tvm_series == self.series,)
        return (
            query.join(ScheduleRow, ScheduleRow.workload_id == WorkloadRow.id)
            .join(TuningRecordRow, TuningRecordRow.id == ScheduleRow.record_id)
            .where(
                ScheduleRow.target_id == target_id,
                *series,
                TuningRecordRow.mean_run_us.is_not(None),
                TuningRecordRow.unverified.is_(False),
            )
        )

    def offer(self, new: NewNeighbourAnswer) -> NeighbourAnswer:
        """Store ``new`` as offered; the stored answer when the same one exists (any state)."""
        if self.series is None:
            raise ValueError("neighbour answers need a store bound to a TVM series")
        where = (
            _N.workload_id == new.workload_id,
            _N.target_id == new.target_id,
            _N.tvm_series == self.series,
            _N.neighbour_schedule_id == new.neighbour_schedule_id,
        )
        existing = self._one(*where)
        if existing is not None:
            return existing
        now = utcnow()
        try:
            with self._session() as s:
                row = _N(
                    **vars(new),
                    tvm_series=self.series,
                    state=_OFFERED,
                    created_at=now,
                    updated_at=now,
                )
                s.add(row)
                s.flush()
                return value_of(NeighbourAnswer, row)
        except IntegrityError:  # offered concurrently by another request: theirs
            stored = self._one(*where)
            if stored is None:
                raise
            return stored

    def _one(self, *where: ColumnElement[bool]) -> NeighbourAnswer | None:
        with self._session() as s:
            row = s.scalar(select(_N).where(*where))
            return None if row is None else value_of(NeighbourAnswer, row)

    def for_workloads(self, target_id: int, workload_ids: Sequence[int]) -> list[NeighbourAnswer]:
        """Every answer (any state) of these workloads on the target, oldest first."""
        ids = list(dict.fromkeys(workload_ids))
        if not ids:
            return []
        series = () if self.series is None else (_N.tvm_series == self.series,)
        with self._session() as s:
            rows = s.scalars(
                select(_N)
                .where(_N.target_id == target_id, _N.workload_id.in_(ids), *series)
                .order_by(_N.id)
            ).all()
            return [value_of(NeighbourAnswer, row) for row in rows]

    def offered(self, workload_id: int, target_id: int) -> list[NeighbourAnswer]:
        """The offered answers of a workload on a target (what a worker verifies)."""
        return [
            answer
            for answer in self.for_workloads(target_id, [workload_id])
            if answer.state == _OFFERED
        ]

    def get(self, answer_id: int) -> NeighbourAnswer | None:
        """The answer with this id, or None."""
        return self._one(_N.id == answer_id)

    def attach_job(self, answer_id: int, job_id: int) -> None:
        """Record the job that verifies the answer and tunes its workload."""
        with self._session() as s:
            s.execute(
                update(_N).where(_N.id == answer_id).values(job_id=job_id, updated_at=utcnow())
            )

    def withdraw(self, answer_id: int, reason: str) -> bool:
        """An offered answer failed verification: never offered again. False when it was
        not offered (already withdrawn or superseded)."""
        with self._session() as s:
            changed = rowcount(
                s,
                update(_N)
                .where(_N.id == answer_id, _N.state == _OFFERED)
                .values(
                    state=NeighbourState.WITHDRAWN.value,
                    reason=reason[:2000],
                    updated_at=utcnow(),
                ),
            )
        return changed == 1

    def supersede(self, workload_id: int, target_id: int) -> int:
        """A verified best of the workload was published: its offered answers on the target
        (this series) are superseded; how many."""
        series = () if self.series is None else (_N.tvm_series == self.series,)
        with self._session() as s:
            return rowcount(
                s,
                update(_N)
                .where(
                    _N.workload_id == workload_id,
                    _N.target_id == target_id,
                    _N.state == _OFFERED,
                    *series,
                )
                .values(state=NeighbourState.SUPERSEDED.value, updated_at=utcnow()),
            )
