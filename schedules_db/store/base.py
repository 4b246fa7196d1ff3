"""What every aggregate of the store shares: one engine, one session factory, one TVM series."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from schedules_db.models import JobRow
from schedules_db.values import JobState


class Aggregate:
    """Base of the store's aggregates: sessions over the shared engine, the series filter."""

    def __init__(self, engine: Engine, sessions: sessionmaker[Session], series: str | None) -> None:
        self.engine = engine
        self.series = series
        self._sessions = sessions

    def _same_series(self, model: Any) -> tuple[Any, ...]:
        return () if self.series is None else (model.tvm_series == self.series,)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on error."""
        with self._sessions.begin() as session:
            yield session

    def _get_or_create(self, model: type, where: Any, values: dict[str, Any]) -> Any:
        """The row matching ``where``, else a new one from ``values``; when the insert
        conflicts, the row a concurrent creator made (None if the conflict was on another
        unique column, so that nothing matches ``where``)."""
        with self.session() as s:
            row = s.scalar(select(model).where(where))
            if row is not None:
                return row
        try:
            with self.session() as s:
                row = model(**values)
                s.add(row)
                s.flush()
                return row
        except IntegrityError:  # created concurrently by another process: read theirs
            with self.session() as s:
                return s.scalar(select(model).where(where))


def owned_by(job_id: int, worker: str) -> tuple[Any, ...]:
    """The conditions under which ``worker`` owns job ``job_id``: it claimed it and it runs."""
    return (
        JobRow.id == job_id,
        JobRow.worker == worker,
        JobRow.state == JobState.RUNNING.value,
    )
