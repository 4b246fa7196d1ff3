"""Artifact readers: where the API processes of a deployment read artifact bytes.

Owns the ``artifact_readers`` table, one row per API process. Each `announce`s how it reads
(``marker`` names the place: the database, or a directory named by a marker file in it) until
a time it renews while it runs, and `withdraw`s on a clean stop; a worker reads the `fresh` ones
before it starts, to refuse publishing where no API would read. Rows of processes that died
stop being fresh, and are deleted a day later by the next announcement. Clocks:
``fresh_until`` is written from the announcer's clock (hosts agree on UTC, NTP).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, insert, select, update

from schedules_db.store.base import Aggregate
from schedules_db.tables import ArtifactReaderRow, utcnow

FORGET_AFTER = timedelta(days=1)  # a row this long past its freshness is deleted


@dataclass(frozen=True)
class ArtifactReader:
    """How the API process ``process`` reads artifacts: ``kind`` "database" (``path`` empty) or
    "directory" (``path`` on ``hostname``); ``marker`` names that place (a directory's marker
    file holds it)."""

    process: str
    marker: str
    kind: str
    hostname: str
    path: str


class ArtifactReaders(Aggregate):
    """The announced artifact readers of the deployment."""

    def announce(self, reader: ArtifactReader, ttl: timedelta) -> None:
        """Record (or renew) ``reader`` as fresh until ``ttl`` from now."""
        now = utcnow()
        values: dict[str, Any] = {
            "marker": reader.marker,
            "kind": reader.kind,
            "hostname": reader.hostname,
            "path": reader.path,
            "fresh_until": now + ttl,
        }
        with self._session() as s:
            s.execute(delete(ArtifactReaderRow).where(
                ArtifactReaderRow.fresh_until < now - FORGET_AFTER))  # fmt: skip
            found: Any = s.execute(
                update(ArtifactReaderRow)
                .where(ArtifactReaderRow.process == reader.process)
                .values(**values)
            )
            if found.rowcount == 0:  # the process name is its own: no other writer races it
                s.execute(insert(ArtifactReaderRow).values(process=reader.process, **values))

    def withdraw(self, process: str) -> None:
        """Forget the announcement of ``process`` (a clean stop)."""
        with self._session() as s:
            s.execute(delete(ArtifactReaderRow).where(ArtifactReaderRow.process == process))

    def fresh(self) -> list[ArtifactReader]:
        """The readers announced until a time still to come, by process."""
        with self._session() as s:
            rows = s.scalars(
                select(ArtifactReaderRow)
                .where(ArtifactReaderRow.fresh_until > utcnow())
                .order_by(ArtifactReaderRow.process)
            ).all()
            return [ArtifactReader(r.process, r.marker, r.kind, r.hostname, r.path) for r in rows]
