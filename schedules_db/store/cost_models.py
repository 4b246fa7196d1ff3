"""Transferred cost models: which archive in the artifact store is a target's model, trained on
how many records.

Owns the ``cost_models`` table. A worker stores the archive's blob first, then `add`s its row
(the blob before the row that names it, as for artifacts); two workers adding the same
(target, records) keep the first. Each call commits before it returns.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from schedules_db.store.base import Aggregate
from schedules_db.tables import CostModelRow


@dataclass(frozen=True)
class CostModel:
    """One stored cost model: its archive (a blob) and the record count it was trained on."""

    target_key: str
    records: int
    sha256: str
    size: int
    path: str


class CostModels(Aggregate):
    """The index of cost-model archives by target."""

    def newest(self, target_key: str) -> CostModel | None:
        """The target's model trained on the most records, or None."""
        with self._session() as s:
            row = s.scalars(
                select(CostModelRow)
                .where(CostModelRow.target_key == target_key)
                .order_by(CostModelRow.records.desc())
                .limit(1)
            ).first()
            if row is None:
                return None
            return CostModel(row.target_key, row.records, row.sha256, row.size, row.path)

    def add(self, model: CostModel) -> None:
        """Name ``model``'s stored blob as the target's model for its record count."""
        try:
            with self._session() as s:
                s.add(
                    CostModelRow(
                        target_key=model.target_key,
                        records=model.records,
                        sha256=model.sha256,
                        size=model.size,
                        path=model.path,
                    )
                )
        except IntegrityError:
            pass  # another worker trained at the same count first: its model stands
