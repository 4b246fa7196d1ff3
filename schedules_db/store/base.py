"""What every aggregate of the store shares: one engine, one session factory, one TVM series.

Thread safety: an aggregate holds only immutable configuration (the engine, the sessionmaker,
the series). Every method opens its own session in its own transaction (`Aggregate._session`)
and closes it before it returns, so no session, connection or ORM row is ever shared between
threads; what it returns are frozen values copied from the rows inside that session
(`schedules_db.values.value_of`). The engine's connection pool is thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, CursorResult, Engine, Executable, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from schedules_db.tables import Base, JobRow, ScheduleRow, TuningRecordRow
from schedules_db.values import JobState, RowValue, value_of

V = TypeVar("V", bound=RowValue)


class Aggregate:
    """Base of the store's aggregates: sessions over the shared engine, the series filter."""

    def __init__(self, engine: Engine, sessions: sessionmaker[Session], series: str | None) -> None:
        self.engine = engine
        self.series = series
        self._sessions = sessions

    def _same_series(
        self, model: type[ScheduleRow] | type[TuningRecordRow]
    ) -> tuple[ColumnElement[bool], ...]:
        return () if self.series is None else (model.tvm_series == self.series,)

    @contextmanager
    def _session(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on error."""
        with self._sessions.begin() as session:
            yield session

    def _get_or_create(
        self,
        model: type[Base],
        value: type[V],
        where: ColumnElement[bool],
        values: dict[str, Any],
    ) -> V | None:
        """The row matching ``where`` (as a ``value``), else a new one from ``values``; when
        the insert conflicts, the row a concurrent creator made (None if the conflict was on
        another unique column, so that nothing matches ``where``)."""
        with self._session() as s:
            row = s.scalar(select(model).where(where))
            if row is not None:
                return value_of(value, row)
        try:
            with self._session() as s:
                row = model(**values)
                s.add(row)
                s.flush()
                return value_of(value, row)
        except IntegrityError:  # created concurrently by another process: read theirs
            with self._session() as s:
                row = s.scalar(select(model).where(where))
                return None if row is None else value_of(value, row)


def rowcount(session: Session, statement: Executable) -> int:
    """Execute an UPDATE or DELETE; how many rows it matched."""
    result = session.execute(statement)
    assert isinstance(result, CursorResult)  # DML always answers with a cursor result
    return result.rowcount


def owned_by(job_id: int, worker: str) -> tuple[ColumnElement[bool], ...]:
    """The conditions under which ``worker`` owns job ``job_id``: it claimed it and it runs."""
    return (
        JobRow.id == job_id,
        JobRow.worker == worker,
        JobRow.state == JobState.RUNNING.value,
    )
