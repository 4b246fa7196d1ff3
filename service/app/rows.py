"""A row another row points to, read from the store: `present` it, or `MissingRow` (the schema's
foreign keys forbid a missing one: not a refusal of the request, a 500)."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


class MissingRow(LookupError):
    """A row another row points to is gone (the schema's foreign keys forbid it: a 500)."""


def present(value: T | None, what: str) -> T:
    """``value``, or `MissingRow` naming ``what`` when the store found nothing."""
    if value is None:
        raise MissingRow(f"{what} not found")
    return value
