"""Seeding a new workload's search with the best schedules of its stored neighbours.

A workload tuned for the first time has no records of its own, so MetaSchedule's evolutionary
search starts from random samples. Its neighbours (the same operator, layout and dtype on the same
target, with other sizes) usually want the same schedule structure: the same loop order, the same
register tile, the same unroll and vectorisation choices. `neighbour_seeds` replays their fastest
traces on the new workload, refitting every tile decision (``SamplePerfectTile``) to the new loop
extents, and keeps the ones that still apply and pass the space's postprocessors. The job
measures the first batch of them before the evolutionary search starts (`tuning.search.loop`
``measure_first``), and the search's population starts from what they measured (the worker's
MetaSchedule `Database` offers the rest as its top-k). They are starting points only: measured
before anything is believed, and verification is unchanged. The stored neighbours are read
through `tuning.search.storage.SearchStorage`.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from tuning.checks.trace_gate import check_trace_text
from tuning.hardware.bf16 import register_named_intrinsics
from tuning.ir import load_mod
from tuning.search.storage import SearchStorage, StoredWorkload

log = logging.getLogger("tunehub.seeding")

NEIGHBOURS = 4  # nearest stored workloads to borrow from
PER_NEIGHBOUR = 4  # their fastest records tried each


def refit_tiles(factors: list[int], extent: int) -> list[int]:
    """Tile factors for a loop of ``extent`` that keep as much of ``factors`` as divides it,
    innermost first (the register tile matters most); the remainder goes to the outermost."""
    new = [1] * len(factors)
    rest = extent
    for i in range(len(factors) - 1, 0, -1):
        new[i] = math.gcd(int(factors[i]), rest)
        rest //= new[i]
    new[0] = rest
    return new


def _size_distance(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """How far two parameter sets are apart (sum of |log ratio| over integer sizes), or None
    when a non-size parameter (layout, dtype, a flag) differs or the keys differ."""
    if a.keys() != b.keys():
        return None
    distance = 0.0
    for key, value in a.items():
        other = b[key]
        is_size = isinstance(value, int) and not isinstance(value, bool)
        if is_size and isinstance(other, int) and not isinstance(other, bool):
            if value <= 0 or other <= 0:
                if value != other:
                    return None
                continue
            distance += abs(math.log(value / other))
        elif value != other:
            return None
    return distance


def neighbours(
    storage: SearchStorage, workload: StoredWorkload, limit: int = NEIGHBOURS
) -> list[StoredWorkload]:
    """Stored catalog workloads of the same operator whose non-size parameters are equal,
    nearest first."""
    if not workload.operator:
        return []
    scored = []
    for row in storage.workloads_of(workload.operator):
        if row.id == workload.id:
            continue
        distance = _size_distance(workload.params, row.params)
        if distance is not None:
            scored.append((distance, row.id, row))
    return [row for _, _, row in sorted(scored, key=lambda item: item[:2])[:limit]]


def refit_trace(source_mod: Any, trace_json: str, target_mod: Any, postprocs: list[Any]) -> Any:
    """The trace of ``trace_json`` (recorded on ``source_mod``) replayed on ``target_mod`` with
    refitted tiles and the postprocessors applied, or None when it does not fit
    (`tuning.checks.trace_gate.UnsafeTrace` when the gate refuses it)."""
    from tvm.s_tir.schedule import Schedule, Trace

    source = Schedule(source_mod)
    trace = check_trace_text(trace_json)
    register_named_intrinsics(trace_json)  # tunehub's own intrinsics it may name
    Trace.apply_json_to_schedule(trace, source)
    sch = Schedule(target_mod)

    def decide(inst: Any, inputs: list[Any], _attrs: list[Any], decision: Any) -> Any:
        if inst.kind.name == "SamplePerfectTile" and decision is not None:
            extent = int(sch.get(inputs[0]).extent)
            return refit_tiles([int(x) for x in decision], extent)
        return decision

    source.trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=decide)
    sch.enter_postproc()
    if not all(postproc.apply(sch) for postproc in postprocs):
        return None
    return sch.trace


def neighbour_seeds(
    storage: SearchStorage,
    workload: StoredWorkload,
    search_mod: Any,
    postprocs: list[Any],
    limit: int = 16,
) -> list[Any]:
    """Traces (TVM `Trace` objects) for ``search_mod`` adapted from the fastest verified records
    of the workload's nearest stored neighbours on the storage's target; at most ``limit``, in
    rounds: every neighbour's fastest (nearest neighbour first), then every neighbour's second,
    and so on, so that a first batch cut from the front is as varied as the neighbours are.
    Traces that fail to apply are skipped (a different structure, e.g. a padding stage one of
    them lacks)."""
    seen: set[str] = set()
    per_neighbour: list[list[Any]] = []
    for row in neighbours(storage, workload):
        source_mod = load_mod(row.mod_json)
        adapted = []
        for trace_json in storage.best_traces(row.id, PER_NEIGHBOUR):
            try:
                trace = refit_trace(source_mod, trace_json, search_mod, postprocs)
            except Exception:  # noqa: BLE001 - a trace that does not fit is simply not a seed
                continue
            if trace is None:
                continue
            key = json.dumps(trace.as_json(remove_postproc=True), default=str)
            if key not in seen:
                seen.add(key)
                adapted.append(trace)
        per_neighbour.append(adapted)
    seeds = [
        traces[rank]
        for rank in range(PER_NEIGHBOUR)
        for traces in per_neighbour
        if rank < len(traces)
    ][:limit]
    log.info("workload %s: %d seed trace(s) from its neighbours", workload.id, len(seeds))
    return seeds
