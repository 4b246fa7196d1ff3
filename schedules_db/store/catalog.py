"""Targets and workloads: what jobs, records and schedules are keyed by."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from schedules_db.keys import (
    canonical_json,
    target_key,
    target_labels,
)
from schedules_db.models import (
    TargetRow,
    WorkloadRow,
)
from schedules_db.store.base import Aggregate
from schedules_db.values import CATALOG, USER


class CatalogRows(Aggregate):
    """Targets and workloads: what jobs, records and schedules are keyed by."""

    def get_or_create_target(
        self, canonical: dict[str, Any], kind: str, label: str, fingerprint: dict[str, Any]
    ) -> TargetRow:
        """Return the target row of a canonical target dict, creating it on first use.

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
            row = self._get_or_create(TargetRow, TargetRow.key == key, labelled)
            if row is not None:
                return row
        raise RuntimeError(f"every label derived from {label!r} is taken")

    def get_target(self, target_id: int) -> TargetRow | None:
        """The target row with this id, or None."""
        with self.session() as s:
            return s.get(TargetRow, target_id)

    def find_target(self, key_or_label: str) -> TargetRow | None:
        """The target with this key or, failing that, this label (labels are unique)."""
        with self.session() as s:
            row = s.scalar(select(TargetRow).where(TargetRow.key == key_or_label))
            if row is None:
                row = s.scalar(select(TargetRow).where(TargetRow.label == key_or_label))
            return row

    def list_targets(self) -> list[TargetRow]:
        """Every known target, oldest first."""
        with self.session() as s:
            return list(s.scalars(select(TargetRow).order_by(TargetRow.id)))

    def get_or_create_workload(
        self, shash: str, mod_json: str, operator: str | None, params: dict[str, Any], flop: float
    ) -> WorkloadRow:
        """Return the workload with this structural hash and origin, creating it on first use.

        The origin follows ``operator``: a named catalog operator is a ``catalog`` workload
        (built by the service itself); no operator means ``user`` (raw TIR or imported, parsed
        in isolation). The two are keyed apart, so a user's function never takes over a catalog
        workload's identity, reference or schedules, even when it hashes the same. The caller
        checks structural equality against ``mod_json`` of a returned row when it must be
        certain (a 64-bit hash collision is the only way the two can differ).
        """
        origin = CATALOG if operator is not None else USER
        return self._get_or_create(
            WorkloadRow,
            (WorkloadRow.shash == shash) & (WorkloadRow.origin == origin),
            dict(shash=shash, origin=origin, mod_json=mod_json, operator=operator, params=params,
                 flop=flop),
        )  # fmt: skip

    def get_workload(self, workload_id: int) -> WorkloadRow | None:
        """The workload row with this id, or None."""
        with self.session() as s:
            return s.get(WorkloadRow, workload_id)

    def find_workload(self, shash: str) -> WorkloadRow | None:
        """The workload with this structural hash (the catalog's before a user's), or None."""
        with self.session() as s:
            return s.scalar(
                select(WorkloadRow)
                .where(WorkloadRow.shash == shash)
                .order_by(WorkloadRow.origin)  # "catalog" < "user"
                .limit(1)
            )

    def list_workloads(self, operator: str | None = None, limit: int = 100) -> list[WorkloadRow]:
        """Workloads, newest first, optionally of one operator."""
        with self.session() as s:
            query = select(WorkloadRow).order_by(WorkloadRow.id.desc()).limit(limit)
            if operator is not None:
                query = query.where(WorkloadRow.operator == operator)
            return list(s.scalars(query))
