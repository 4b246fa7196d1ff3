"""The SQL helpers of the joined reads (`schedules_db.lookups`, `schedules_db.browse`): columns
labelled by table, joined rows split back into one dict per table, and a connection outside
any transaction."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, CursorResult, Label

from schedules_db.store import Store
from schedules_db.tables import Base


def labelled_columns(model: type[Base], prefix: str, skip: Iterable[str] = ()) -> list[Label[Any]]:
    """``model``'s columns (but ``skip``) labelled ``<prefix>__<column>``."""
    return [c.label(f"{prefix}__{c.name}") for c in model.__table__.c if c.name not in skip]


def split_rows(result: CursorResult[Any], prefixes: str) -> list[list[dict[str, Any]]]:
    """Split each joined row's ``prefix__column`` values into one dict per table."""
    keys = result.keys()
    names = [key.partition("__") for key in keys]
    rows = []
    for row in result:
        values: dict[str, dict[str, Any]] = {prefix: {} for prefix in prefixes}
        for (prefix, _, name), value in zip(names, row, strict=True):
            values[prefix][name] = value
        rows.append([values[prefix] for prefix in prefixes])
    return rows


def connect(store: Store) -> Connection:
    """A connection without a transaction: each lookup is one SELECT, consistent by itself,
    and BEGIN/ROLLBACK would cost two more round trips on PostgreSQL."""
    return store.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
