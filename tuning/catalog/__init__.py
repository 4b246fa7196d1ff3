"""The operator catalog: a registry of `Operator` instances by name."""

from __future__ import annotations

from typing import Any

from tuning.catalog import conv, elementwise, linalg, pool_norm
from tuning.catalog.base import Operator, OpParams
from tuning.catalog.matmul import Matmul

REGISTRY: dict[str, Operator[Any]] = {}


def register(op: Operator[Any]) -> Operator[Any]:
    """Add an operator to the catalog (names are unique)."""
    if op.name in REGISTRY:
        raise ValueError(f"operator {op.name!r} registered twice")
    REGISTRY[op.name] = op
    return op


def get_operator(name: str) -> Operator[Any] | None:
    """The operator of this name, or None."""
    return REGISTRY.get(name)


def list_operators() -> list[Operator[Any]]:
    """Every operator, sorted by name."""
    return [REGISTRY[name] for name in sorted(REGISTRY)]


for _op in [
    Matmul(),
    *elementwise.OPERATORS,
    *linalg.OPERATORS,
    *conv.OPERATORS,
    *pool_norm.OPERATORS,
]:
    register(_op)

__all__ = ["Operator", "OpParams", "get_operator", "list_operators", "register"]
