"""Leases: a named duty (the reaper) that exactly one process of a deployment performs.

Owns the ``leases`` table. `hold` takes the lease when it is free or expired, or renews it for
its holder, in one conditional UPDATE (or the first INSERT), so of two processes at most one
holds it at any time. A holder that dies stops renewing; once ``expires_at`` passes, the next
`hold` of another process takes it. Clocks: ``expires_at`` is written from the holder's clock,
so hosts are assumed to agree on UTC within a small part of the lease's length (NTP).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import delete, insert, or_, update
from sqlalchemy.exc import IntegrityError

from schedules_db.store.base import Aggregate
from schedules_db.tables import LeaseRow, utcnow


class Leases(Aggregate):
    """Named leases held for a while by one process each."""

    def hold(self, name: str, holder: str, ttl: timedelta) -> bool:
        """Take or renew the lease ``name`` for ``holder`` until ``ttl`` from now; whether
        ``holder`` holds it now."""
        now = utcnow()
        with self._session() as s:
            taken: Any = s.execute(
                update(LeaseRow)
                .where(
                    LeaseRow.name == name,
                    or_(LeaseRow.holder == holder, LeaseRow.expires_at < now),
                )
                .values(holder=holder, expires_at=now + ttl)
            )
        if taken.rowcount == 1:
            return True
        try:
            with self._session() as s:
                s.execute(insert(LeaseRow).values(name=name, holder=holder, expires_at=now + ttl))
        except IntegrityError:
            return False  # held by another process
        return True

    def release(self, name: str, holder: str) -> None:
        """Give the lease up (nothing unless ``holder`` holds it): another takes it at once."""
        with self._session() as s:
            s.execute(delete(LeaseRow).where(LeaseRow.name == name, LeaseRow.holder == holder))
