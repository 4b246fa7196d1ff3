"""What the search needs from storage, stated here so that `tuning` imports no store.

Two protocols, both implemented by the worker over the tunehub store (`service.worker`):

* `StoredTraces`: "is this candidate already stored?", asked by the search loop so that a
  trace the store holds is never measured again (the worker's MetaSchedule `Database`
  answers it).
* `SearchStorage`: the reads of a warm start, bound to one target: its stored workloads of an
  operator and their modules (`tuning.search.seeding` borrows the fastest verified traces of
  the nearest ones), and every verified record of the target (`tuning.search.cost_model`
  trains on them).

Records are written by MetaSchedule itself, through the `Database` the search is given; the
values here are plain dataclasses of `tuning`, never the store's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class StoredWorkload:
    """A stored workload as a warm start sees it: its id in the storage, its catalog operator
    (None: raw TIR), that operator's parameters and its IRModule."""

    id: int
    operator: str | None
    params: dict[str, Any]
    mod_json: str  # `tvm.ir.save_json` text


@dataclass(frozen=True)
class TrainingRecord:
    """A measured candidate of the target, as the cost model learns from it."""

    workload_id: int
    trace_json: str  # `tuning.traces.trace_to_text`'s form
    run_secs: list[float]
    mean_run_us: float | None  # None: it failed to build or run


class StoredTraces(Protocol):
    """Whether a candidate is stored already (measuring it again would add no record)."""

    def is_stored(self, mod: Any, trace: Any) -> bool:
        """True if ``trace`` (a `tvm.s_tir.schedule.Trace` of a candidate for the IRModule
        ``mod``) is stored for the search's target."""
        ...


class SearchStorage(Protocol):
    """The stored records and workloads of one target that a warm start reads."""

    def workloads_of(self, operator: str) -> list[StoredWorkload]:
        """Stored catalog workloads of ``operator`` (at most 1000), in the storage's order."""
        ...

    def module_json(self, workload_id: int) -> str:
        """The stored workload's IRModule as `tvm.ir.save_json` text."""
        ...

    def best_traces(self, workload_id: int, k: int) -> list[str]:
        """The traces of the workload's ``k`` fastest verified records on the target, fastest
        first (failed candidates never)."""
        ...

    def record_count(self) -> int:
        """How many records the target holds (every workload, failed ones included)."""
        ...

    def training_records(self) -> list[TrainingRecord]:
        """Every verified record of the target (imported, unverified ones left out)."""
        ...
