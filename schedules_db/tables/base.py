"""The declarative base of every tunehub table, and the clock every stored time comes from."""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy.orm import DeclarativeBase


def utcnow() -> datetime:
    """Timezone-aware current time in UTC (every timestamp in the store is UTC)."""
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    """Declarative base of every tunehub table."""
