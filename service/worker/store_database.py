"""A MetaSchedule `Database` over the tunehub store, bound to one target (and optionally a job).

MetaSchedule's own queries ignore the target, so the adapter is created per target: every record
it commits is stored under (workload, that target), and every query answers from that target's
records only. Failed candidates (``run_secs == [FAILED_RUN_SECS]``, see
`tuning.traces`) are stored but never returned as top-k, and neither is a record whose
trace `tuning.checks.trace_gate` refuses (an import's, say): MetaSchedule replays them. A
re-measurement of a trace already stored for the (workload, target) adds no row; `is_stored`
says so beforehand (it is the search's `tuning.search.storage.StoredTraces`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import tvm
import tvm_ffi
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule import _ffi_api
from tvm.s_tir.meta_schedule.database import PyDatabase, TuningRecord, Workload

from schedules_db.store import Store
from schedules_db.values import NewRecord, Record
from tuning.checks.trace_gate import check_trace_text
from tuning.hardware.bf16 import register_named_intrinsics
from tuning.traces import (
    FAILED_RUN_SECS,
    plain_json,
    run_failed,
    trace_to_text,
)

log = logging.getLogger("tunehub.worker")


@derived_object
class StoreDatabase(PyDatabase):
    """MetaSchedule database whose records live in the tunehub store."""

    def __init__(
        self,
        store: Store,
        target_id: int,
        job_id: int | None = None,
        space: str = "plain",
        aliases: dict[str, int] | None = None,
        seeds: dict[int, list[Any]] | None = None,
    ) -> None:
        """``space``: the search space its records are stored under. ``aliases``: structural
        hash -> workload id, for a module that is a stored workload searched in another space
        (the packed space marks the weights layout-free, which changes the hash). ``seeds``:
        workload id -> extra traces (`tvm.s_tir.schedule.Trace`, already valid for that
        workload) that `get_top_k` offers after the workload's own records, as the search's
        initial population (`tuning.search.seeding`); they are never stored as records."""
        super().__init__()
        self.store = store
        self.target_id = target_id
        self.job_id = job_id
        self.space = space
        self.aliases = dict(aliases or {})
        self.seeds = dict(seeds or {})
        target_row = store.catalog.get_target(target_id)
        if target_row is None:
            raise ValueError(f"no target with id {target_id}")
        self.target_json: dict[str, Any] = json.loads(target_row.canonical_json)
        self._workloads: dict[str, tuple[int, Workload]] = {}
        self.new_records = 0  # records this adapter added (re-measurements excluded)

    # -- workloads ----------------------------------------------------------------------------
    def _lookup(self, mod: Any, create: bool) -> tuple[int, Workload] | None:
        shash = str(tvm_ffi.structural_hash(mod))
        cached = self._workloads.get(shash)
        if cached is not None:
            return cached
        alias = self.aliases.get(shash)
        row = (
            self.store.catalog.find_workload(shash)
            if alias is None
            else self.store.catalog.get_workload(alias)
        )
        if row is None:
            if not create:
                return None
            row = self.store.catalog.get_or_create_workload(
                shash, tvm.ir.save_json(mod), None, {}, 0.0
            )
        entry = (row.id, Workload(mod))
        self._workloads[shash] = entry
        return entry

    def workload_id(self, workload: Workload) -> int:
        """The store id of a MetaSchedule workload (committed on first sight)."""
        entry = self._lookup(workload.mod, create=True)
        assert entry is not None
        return entry[0]

    def has_workload(self, mod: Any) -> bool:
        return self._lookup(mod, create=False) is not None

    def commit_workload(self, mod: Any) -> Workload:
        entry = self._lookup(mod, create=True)
        assert entry is not None
        return entry[1]

    # -- records ------------------------------------------------------------------------------
    def commit_tuning_record(self, record: TuningRecord) -> None:
        raw_trace, _run_secs, _target, raw_args = _ffi_api.TuningRecordAsJSON(record)
        run_secs = [float(x) for x in record.run_secs] if record.run_secs else [FAILED_RUN_SECS]
        added = self.store.records.add(
            self.workload_id(record.workload),
            self.target_id,
            self.job_id,
            NewRecord(
                trace_json=trace_to_text(raw_trace),
                run_secs=run_secs,
                args_info=plain_json(raw_args),
                tvm_version=tvm.__version__,
                space=self.space,
                failed=run_failed(run_secs),
            ),
        )
        self.new_records += int(added)

    def is_stored(self, mod: Any, trace: Any) -> bool:
        """True if ``trace`` (a candidate's, for workload ``mod``) is already stored for this
        target: measuring it again would add no record."""
        entry = self._lookup(mod, create=False)
        if entry is None:
            return False
        raw_trace = _ffi_api.TuningRecordAsJSON(TuningRecord(trace, entry[1]))[0]
        return self.store.records.has_trace(entry[0], self.target_id, trace_to_text(raw_trace))

    def _to_record(self, row: Record, workload: Workload) -> TuningRecord | None:
        """The row as MetaSchedule's record (its trace replayed on ``workload``), or None
        when the trace gate refuses it or it does not replay here."""
        try:
            trace = check_trace_text(row.trace_json)
            register_named_intrinsics(row.trace_json)  # tunehub's own: this process may lack them
            return TuningRecord.from_json(
                [trace, row.run_secs, self.target_json, row.args_info], workload
            )
        except Exception as err:  # noqa: BLE001 - refused or not replayed: never the job's end
            log.warning("record %s is not replayed: %s", row.id, err)
            return None

    def get_top_k(self, workload: Workload, top_k: int) -> list[TuningRecord]:
        workload_id = self.workload_id(workload)
        rows = self.store.records.top_k(workload_id, self.target_id, top_k)
        records = [r for r in (self._to_record(row, workload) for row in rows) if r is not None]
        for trace in self.seeds.get(workload_id, [])[: max(0, top_k - len(records))]:
            records.append(TuningRecord(trace, workload))
        return records

    def get_all_tuning_records(self) -> list[TuningRecord]:
        records = []
        workloads: dict[int, Workload] = {}
        for row in self.store.records.list_records(self.target_id):
            if row.workload_id not in workloads:
                stored = self.store.catalog.get_workload(row.workload_id)
                if stored is None:  # a record's workload is never deleted (foreign key)
                    raise LookupError(f"no workload with id {row.workload_id}")
                workloads[row.workload_id] = self.commit_workload(tvm.ir.load_json(stored.mod_json))
            record = self._to_record(row, workloads[row.workload_id])
            if record is not None:
                records.append(record)
        return records

    def __len__(self) -> int:
        return self.store.records.count(self.target_id)
