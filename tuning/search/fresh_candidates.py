"""A search strategy that measures only schedules the database does not hold yet, and only
those that pass the trace gate.

MetaSchedule's evolutionary search starts each round from the database's best records and
remembers only the candidates it picked itself, so a stored schedule (a warm start's seed, an
earlier job's best, this job's measured first batch) can be picked and measured again: a trial
of the budget spent on a record that the store then drops as a duplicate. `FreshCandidates`
wraps the evolutionary search and drops such candidates before they are built. It also drops
a candidate whose trace `tuning.checks.trace_gate` refuses: the evolutionary search mutates the
database's records, some of which a user imported, so its candidates pass the same gate as
every other trace before they are built and loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy

from tuning.checks.trace_gate import UnsafeTrace, check_trace
from tuning.traces import plain_json

IsStored = Callable[[Any, Any], bool]  # (workload module, candidate trace) -> already stored?


@derived_object
class FreshCandidates(PySearchStrategy):
    """``inner``'s candidates less those ``is_stored`` reports; ``max_stale_rounds`` rounds in a
    row with nothing new end the search, as the evolutionary search's own empty rounds do."""

    def __init__(self, inner: Any, is_stored: IsStored, max_stale_rounds: int = 5) -> None:
        self.inner = inner
        self.is_stored = is_stored
        self.max_stale_rounds = max_stale_rounds
        self.mod: Any = None

    def _initialize_with_tune_context(self, context: Any) -> None:
        self.mod = context.mod
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(
        self,
        max_trials: int,
        num_trials_per_iter: int,
        design_spaces: list[Any],
        database: Any = None,
        cost_model: Any = None,
    ) -> None:
        self.inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)

    def post_tuning(self) -> None:
        self.inner.post_tuning()

    def generate_measure_candidates(self) -> list[Any] | None:
        for _ in range(self.max_stale_rounds):
            candidates = self.inner.generate_measure_candidates()
            if candidates is None:
                return None
            fresh = [
                c
                for c in candidates
                if passes_gate(c.sch.trace) and not self.is_stored(self.mod, c.sch.trace)
            ]
            if fresh:
                return fresh
        return None

    def notify_runner_results(self, measure_candidates: list[Any], results: list[Any]) -> None:
        self.inner.notify_runner_results(measure_candidates, results)

    def clone(self) -> Any:
        return FreshCandidates(self.inner.clone(), self.is_stored, self.max_stale_rounds)


def passes_gate(trace: Any) -> bool:
    """True when a candidate's trace (a `tvm.s_tir.schedule.Trace`, postprocessors included)
    passes `tuning.checks.trace_gate`."""
    try:
        check_trace(plain_json(trace.as_json(remove_postproc=False)))
    except (UnsafeTrace, TypeError):
        return False
    return True
