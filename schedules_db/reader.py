"""`SqlScheduleReader`: `schedule_reads.ScheduleReader` over the store's SQL database.

Each method is ONE statement (``lookup`` of any number of hashes included: an expanding
``IN``), on a connection without a transaction, like `schedules_db.lookups`. Failed records
(``mean_run_us`` NULL) and unverified imports never answer; a schedule whose record is one of
them (which `Schedules.publish` never writes) is left out rather than served. Thread-safe like
the store: no state besides immutable configuration, a connection per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Row, and_, bindparam, or_, select

from schedule_reads import ScheduleKey, ScheduleReader, TunedRecord, TunedSchedule
from schedules_db.store import Store
from schedules_db.tables import ScheduleRow, TargetRow, TuningRecordRow, WorkloadRow

_R = TuningRecordRow
_RECORD = (
    _R.id,
    _R.trace_json,
    _R.run_secs,
    _R.args_info,
    _R.mean_run_us,
    _R.space,
    _R.tvm_version,
)
_ANSWERS = and_(_R.mean_run_us.is_not(None), _R.unverified.is_(False))  # success, verified

_BESTS = (
    select(
        WorkloadRow.shash,
        ScheduleRow.id,
        ScheduleRow.latency_us,
        ScheduleRow.space,
        ScheduleRow.packed_params,
        *_RECORD,
    )
    .join(WorkloadRow, WorkloadRow.id == ScheduleRow.workload_id)
    .join(TargetRow, TargetRow.id == ScheduleRow.target_id)
    .outerjoin(_R, _R.id == ScheduleRow.record_id)
    .where(
        TargetRow.key == bindparam("target_key"),
        ScheduleRow.tvm_series == bindparam("series"),
        WorkloadRow.shash.in_(bindparam("hashes", expanding=True)),
        or_(ScheduleRow.record_id.is_(None), _ANSWERS),
    )
    .order_by(WorkloadRow.origin.desc())  # "user" before "catalog": the catalog's wins below
)

_TOP_K = (
    select(WorkloadRow.origin, *_RECORD)
    .join(WorkloadRow, WorkloadRow.id == _R.workload_id)
    .join(TargetRow, TargetRow.id == _R.target_id)
    .where(
        TargetRow.key == bindparam("target_key"),
        _R.tvm_series == bindparam("series"),
        WorkloadRow.shash == bindparam("shash"),
        _ANSWERS,
    )
    .order_by(WorkloadRow.origin, _R.mean_run_us, _R.id)  # "catalog" < "user"
    .limit(bindparam("k"))
)


def _record(row: Row[Any], offset: int) -> TunedRecord | None:
    """The record in ``row``'s `_RECORD` columns from ``offset`` on (None: there is none)."""
    record_id, trace, run_secs, args_info, mean_us, space, version = row[offset : offset + 7]
    if record_id is None:
        return None
    return TunedRecord(record_id, trace, list(run_secs), list(args_info), mean_us, space, version)


class SqlScheduleReader(ScheduleReader):
    """`ScheduleReader` over a `Store`'s database, bound to ``tvm_series`` (default: the
    store's own series; one of the two must be set)."""

    def __init__(self, store: Store, tvm_series: str | None = None) -> None:
        super().__init__(tvm_series or store.series or "")
        self.engine = store.engine

    def _connect(self) -> Connection:
        return self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")

    def top_k(self, workload_shash: str, target_key: str, k: int) -> list[TunedRecord]:
        if k <= 0:
            return []
        params = {"target_key": target_key, "series": self.tvm_series, "shash": workload_shash}
        with self._connect() as conn:
            rows = conn.execute(_TOP_K, {**params, "k": k}).all()
        # One workload answers: the catalog's when it has records (rows come catalog first).
        first = [row for row in rows if row.origin == rows[0].origin]
        return [record for row in first if (record := _record(row, 1)) is not None]

    def lookup(self, target_key: str, workload_shashes: Sequence[str]) -> dict[str, TunedSchedule]:
        hashes = list(dict.fromkeys(workload_shashes))
        if not hashes:
            return {}
        params = {"target_key": target_key, "series": self.tvm_series, "hashes": hashes}
        with self._connect() as conn:
            rows = conn.execute(_BESTS, params).all()
        found: dict[str, TunedSchedule] = {}
        for row in rows:  # user's first, so a catalog workload's best of the same hash wins
            shash, schedule_id, latency_us, space, packed = row[:5]
            key = ScheduleKey(shash, target_key, self.tvm_series)
            found[shash] = TunedSchedule(
                schedule_id, key, latency_us, space, packed, _record(row, 5)
            )
        return found
