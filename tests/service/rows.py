"""Row counts of an embedded (SQLite) store: what a test compares to show nothing was written."""

from __future__ import annotations

import sqlite3
from pathlib import Path

WRITTEN_BY_JOBS = ("jobs", "workloads", "targets")


def row_counts(data_dir: Path, tables: tuple[str, ...] = WRITTEN_BY_JOBS) -> tuple[int, ...]:
    """COUNT(*) of each table of ``data_dir``'s store, in order."""
    with sqlite3.connect(data_dir / "tunehub.db") as conn:
        return tuple(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables)
