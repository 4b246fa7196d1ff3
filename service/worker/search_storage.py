"""`tuning.search.storage.SearchStorage` over the store: what a warm start reads, for one target.

The search's seeding and cost-model transfer (`tuning.search.seeding`,
`tuning.search.cost_model`) see the store only through this adapter, in `tuning`'s own value
types: the worker package is where `tuning` and `schedules_db` meet.
"""

from __future__ import annotations

from schedules_db.store import Store
from schedules_db.values import Workload
from tuning.search.storage import StoredWorkload, TrainingRecord

NEIGHBOUR_CANDIDATES = 1000  # stored workloads of an operator a warm start looks through


def stored_workload(workload: Workload) -> StoredWorkload:
    """A store workload as the search sees it."""
    return StoredWorkload(workload.id, workload.operator, workload.params, workload.mod_json)


class StoreSearchStorage:
    """The records and workloads of one target in the store (series-filtered as the store
    is), read as `tuning.search.storage.SearchStorage` asks."""

    def __init__(self, store: Store, target_id: int) -> None:
        self.store, self.target_id = store, target_id

    def workloads_of(self, operator: str) -> list[StoredWorkload]:
        rows = self.store.catalog.list_workloads(operator=operator, limit=NEIGHBOUR_CANDIDATES)
        return [stored_workload(row) for row in rows]

    def module_json(self, workload_id: int) -> str:
        workload = self.store.catalog.get_workload(workload_id)
        if workload is None:
            raise LookupError(f"no workload with id {workload_id}")
        return workload.mod_json

    def best_traces(self, workload_id: int, k: int) -> list[str]:
        records = self.store.records.top_k(workload_id, self.target_id, k, verified_only=True)
        return [record.trace_json for record in records]

    def record_count(self) -> int:
        return self.store.records.count(self.target_id)

    def training_records(self) -> list[TrainingRecord]:
        return [
            TrainingRecord(r.workload_id, r.trace_json, list(r.run_secs), r.mean_run_us)
            for r in self.store.records.list_records(self.target_id, verified_only=True)
        ]
