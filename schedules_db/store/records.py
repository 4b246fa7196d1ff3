"""Tuning records: every measured candidate of a (workload, target, TVM series).

Owns the ``tuning_records`` table. A record is added once per (workload, target, series,
trace): `Records.add` of a trace already stored answers False and changes nothing. Records are
never changed afterwards, except that publishing one clears its ``unverified`` flag
(`Schedules.publish`) and `drop_unverified` deletes imports that no longer replay. Failed
candidates (``NewRecord.failed``, decided by whoever measured them) are stored with
``mean_run_us`` NULL and never returned by `top_k`. Keys: every read names the target, and
with the store's series set, sees only records of that TVM series.

Durability: `add` commits the record in its own transaction before it returns, so the owner
writes the progress that counts it only after it is durable.

Thread safety: no state besides immutable configuration; each call opens its own session and
returns frozen `Record` values or plain ints/bools/dicts (see `schedules_db.store.base`).
"""

from __future__ import annotations

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError

from schedules_db.keys import (
    sha256_hex,
    tvm_series,
)
from schedules_db.store.base import Aggregate, rowcount
from schedules_db.tables import (
    TuningRecordRow,
)
from schedules_db.values import NewRecord, Record, value_of


class Records(Aggregate):
    """Tuning records: every measured candidate of a (workload, target, TVM series)."""

    def add(self, workload_id: int, target_id: int, job_id: int | None, record: NewRecord) -> bool:
        """Store a measured candidate; returns False if this exact trace was already stored
        for the (workload, target) (a re-measurement of a known schedule is not a new record)."""
        trace_sha = sha256_hex(record.trace_json)
        try:
            with self._session() as s:
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
        with self._session() as s:
            return rowcount(
                s,
                delete(TuningRecordRow).where(
                    TuningRecordRow.id.in_(record_ids), TuningRecordRow.unverified.is_(True)
                ),
            )

    def has_trace(self, workload_id: int, target_id: int, trace_json: str) -> bool:
        """True if this exact trace is already stored for the (workload, target)."""
        with self._session() as s:
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

    def top_k(
        self, workload_id: int, target_id: int, k: int, verified_only: bool = False
    ) -> list[Record]:
        """The k fastest successful records of one (workload, target), fastest first
        (``verified_only``: leave out imported records no worker has verified)."""
        with self._session() as s:
            return [
                value_of(Record, row)
                for row in s.scalars(
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
            ]

    def list_records(
        self,
        target_id: int,
        workload_id: int | None = None,
        job_id: int | None = None,
        verified_only: bool = False,
    ) -> list[Record]:
        """Every record of a target (optionally of one workload or job), oldest first
        (``verified_only``: leave out imported records no worker has verified)."""
        with self._session() as s:
            query = select(TuningRecordRow).where(
                TuningRecordRow.target_id == target_id, *self._same_series(TuningRecordRow)
            )
            if verified_only:
                query = query.where(TuningRecordRow.unverified.is_(False))
            if workload_id is not None:
                query = query.where(TuningRecordRow.workload_id == workload_id)
            if job_id is not None:
                query = query.where(TuningRecordRow.job_id == job_id)
            rows = s.scalars(query.order_by(TuningRecordRow.id))
            return [value_of(Record, row) for row in rows]

    def count(
        self,
        target_id: int,
        workload_id: int | None = None,
        job_id: int | None = None,
        space: str | None = None,
    ) -> int:
        """How many records `list_records` would return (``space``: only those of that space)."""
        with self._session() as s:
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

    def stats_by_target(self, workload_id: int) -> dict[int, tuple[int, float | None]]:
        """For one workload: target id -> (records, fastest successful mean in us)."""
        with self._session() as s:
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

    def get(self, record_id: int) -> Record | None:
        """The record with this id, or None."""
        with self._session() as s:
            row = s.get(TuningRecordRow, record_id)
            return None if row is None else value_of(Record, row)
