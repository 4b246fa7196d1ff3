"""Catalog rows: targets and workloads, what jobs, records and schedules are keyed by.

Owns the ``targets`` and ``workloads`` tables. Rows are created once and never changed nor
deleted by the store: a target's key and a workload's (structural hash, origin) are their
identities, and `get_or_create_target` / `get_or_create_workload` are safe against concurrent
creators in other threads and processes (the unique index decides; the loser reads the
winner's row). Durability: each creation is committed before the method returns.

Thread safety: every method runs in a session of its own and returns frozen `Target` /
`Workload` values (see `schedules_db.store.base`); one instance serves any number of threads.
"""

from __future__ import annotations

from typing import Any, Literal

from sqlalchemy import select

from schedules_db.figures import is_quiet
from schedules_db.keys import (
    canonical_json,
    target_key,
    target_labels,
)
from schedules_db.store.base import Aggregate
from schedules_db.tables import (
    TargetRow,
    WorkloadRow,
)
from schedules_db.values import CATALOG, USER, Target, Workload, value_of


class CatalogRows(Aggregate):
    """Targets and workloads: what jobs, records and schedules are keyed by."""

    def get_or_create_target(
        self, canonical: dict[str, Any], kind: str, label: str, fingerprint: dict[str, Any]
    ) -> Target:
        """Return the target of a canonical target dict, creating it on first use.

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
            found = self._get_or_create(TargetRow, Target, TargetRow.key == key, labelled)
            if found is not None:
                return found
        raise RuntimeError(f"every label derived from {label!r} is taken")

    def get_target(self, target_id: int) -> Target | None:
        """The target with this id, or None."""
        with self._session() as s:
            row = s.get(TargetRow, target_id)
            return None if row is None else value_of(Target, row)

    def find_target(self, key_or_label: str) -> Target | None:
        """The target with this key or, failing that, this label (labels are unique)."""
        with self._session() as s:
            row = s.scalar(select(TargetRow).where(TargetRow.key == key_or_label))
            if row is None:
                row = s.scalar(select(TargetRow).where(TargetRow.label == key_or_label))
            return None if row is None else value_of(Target, row)

    def set_peak(self, target_id: int, gflops: float, *, interference: float | None) -> bool:
        """Record the fp32 FMA peak a worker of this target measured, with ``interference``,
        the cores' worth of other work its cores saw meanwhile (None: not known). A quiet
        measurement (`is_quiet`) is trusted: the best quiet one is kept (a busy core only ever
        lowers a peak). One under load is kept only while no quiet one exists and no other was
        measured under less load. The row is locked while it is compared (two workers measuring
        at once). True when it changed."""
        with self._session() as s:
            row = s.scalar(select(TargetRow).where(TargetRow.id == target_id).with_for_update())
            if row is None:
                return False
            keep = _kept(row.peak_interference, interference)
            if keep == "skip" or (keep == "best" and (row.peak_gflops or 0.0) >= gflops):
                return False
            row.peak_gflops, row.peak_interference = gflops, interference
            return True

    def set_bf16_peak(
        self, target_id: int, unit: str, gflops: float, *, interference: float | None
    ) -> bool:
        """Record the bf16 peak a worker of this target measured on its fastest bf16 ``unit``
        ("amx", "avx512_bf16"), kept as `set_peak` keeps the fp32 one; a measurement of another
        unit (the machine changed) replaces it. True when it changed."""
        with self._session() as s:
            row = s.scalar(select(TargetRow).where(TargetRow.id == target_id).with_for_update())
            if row is None:
                return False
            same_unit = row.bf16_unit == unit
            keep = _kept(row.bf16_interference, interference) if same_unit else "replace"
            if keep == "skip" or (keep == "best" and (row.bf16_peak_gflops or 0.0) >= gflops):
                return False
            row.bf16_unit, row.bf16_peak_gflops, row.bf16_interference = unit, gflops, interference
            return True

    def set_bandwidth(
        self,
        target_id: int,
        cache_gbps: float,
        memory_gbps: float,
        cache_bytes: int,
        llc_gbps: float | None = None,
        llc_bytes: int | None = None,
        *,
        interference: float | None,
    ) -> bool:
        """Record the bandwidth a worker of this target measured (GB/s): in the cores' caches
        (up to ``cache_bytes`` in all), in the shared last-level cache (up to ``llc_bytes``;
        None where the machine has none) and in memory, kept as `set_peak` keeps a peak: of two
        quiet measurements, each level's best (the sizes are the machine's: the latest). True
        when the row changed."""
        with self._session() as s:
            row = s.scalar(select(TargetRow).where(TargetRow.id == target_id).with_for_update())
            if row is None:
                return False
            keep = _kept(row.bandwidth_interference, interference)
            if keep == "skip":
                return False
            if keep == "best":
                cache_gbps = max(cache_gbps, row.cache_gbps or 0.0)
                memory_gbps = max(memory_gbps, row.memory_gbps or 0.0)
                if llc_gbps is not None and row.llc_gbps is not None:
                    llc_gbps = max(llc_gbps, row.llc_gbps)
                interference = row.bandwidth_interference
            new = (cache_gbps, memory_gbps, cache_bytes, llc_gbps, llc_bytes, interference)
            old = (row.cache_gbps, row.memory_gbps, row.cache_bytes, row.llc_gbps, row.llc_bytes,
                   row.bandwidth_interference)  # fmt: skip
            if new == old:
                return False
            (row.cache_gbps, row.memory_gbps, row.cache_bytes, row.llc_gbps, row.llc_bytes,
             row.bandwidth_interference) = new  # fmt: skip
            return True

    def set_bytes_moved(self, workload_id: int, nbytes: int) -> None:
        """Record the bytes a kernel of this workload must move (its parameters, each once): a
        property of the function, written once by the first worker that loads it."""
        with self._session() as s:
            row = s.get(WorkloadRow, workload_id)
            if row is not None and row.bytes_moved is None:
                row.bytes_moved = nbytes

    def list_targets(self) -> list[Target]:
        """Every known target, oldest first."""
        with self._session() as s:
            rows = s.scalars(select(TargetRow).order_by(TargetRow.id))
            return [value_of(Target, row) for row in rows]

    def get_or_create_workload(
        self,
        shash: str,
        mod_json: str,
        operator: str | None,
        params: dict[str, Any],
        flop: float,
        owner: str | None = None,
    ) -> Workload:
        """Return the workload with this structural hash and origin, creating it on first use.

        The origin follows ``operator``: a named catalog operator is a ``catalog`` workload
        (built by the service itself); no operator means ``user`` (raw TIR or imported, parsed
        in isolation). The two are keyed apart, so a user's function never takes over a catalog
        workload's identity, reference or schedules, even when it hashes the same. A user
        workload created here gets ``owner`` (its first submitter); an existing one keeps its
        own. The caller checks structural equality against ``mod_json`` of a returned workload
        when it must be certain (a 64-bit hash collision is the only way the two can differ).
        """
        origin = CATALOG if operator is not None else USER
        found = self._get_or_create(
            WorkloadRow,
            Workload,
            (WorkloadRow.shash == shash) & (WorkloadRow.origin == origin),
            dict(shash=shash, origin=origin, mod_json=mod_json, operator=operator, params=params,
                 flop=flop, owner=owner if origin == USER else None),
        )  # fmt: skip
        if found is None:  # (shash, origin) is the only unique key: a conflict matches it
            raise RuntimeError(f"workload {shash} ({origin}) was neither found nor created")
        return found

    def get_workload(self, workload_id: int) -> Workload | None:
        """The workload with this id, or None."""
        with self._session() as s:
            row = s.get(WorkloadRow, workload_id)
            return None if row is None else value_of(Workload, row)

    def find_user_workload(self, shash: str) -> Workload | None:
        """The user workload (raw TIR, a model's task, an import) with this hash, or None."""
        with self._session() as s:
            row = s.scalar(
                select(WorkloadRow).where(WorkloadRow.shash == shash, WorkloadRow.origin == USER)
            )
            return None if row is None else value_of(Workload, row)

    def find_workload(self, shash: str) -> Workload | None:
        """The workload with this structural hash (the catalog's before a user's), or None."""
        with self._session() as s:
            row = s.scalar(
                select(WorkloadRow)
                .where(WorkloadRow.shash == shash)
                .order_by(WorkloadRow.origin)  # "catalog" < "user"
                .limit(1)
            )
            return None if row is None else value_of(Workload, row)

    def list_workloads(self, operator: str | None = None, limit: int = 100) -> list[Workload]:
        """Workloads, newest first, optionally of one operator."""
        with self._session() as s:
            query = select(WorkloadRow).order_by(WorkloadRow.id.desc()).limit(limit)
            if operator is not None:
                query = query.where(WorkloadRow.operator == operator)
            return [value_of(Workload, row) for row in s.scalars(query)]


def _kept(old: float | None, new: float | None) -> Literal["replace", "best", "skip"]:
    """How a figure measured under ``new`` interference meets the one kept, measured under
    ``old`` (None: not known, or none kept): it replaces it, the better of the two is kept
    (both quiet), or it is dropped (measured under more load than the one kept)."""
    if is_quiet(new):
        return "best" if is_quiet(old) else "replace"
    if is_quiet(old) or (old is not None and (new is None or new >= old)):
        return "skip"
    return "replace"
