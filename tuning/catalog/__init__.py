"""The operator catalog: every operator a job may name, registered here by name. `base` says
what an operator is (a pydantic parameter model, a TE definition, a numpy reference, a FLOP
count), `dtypes` the precisions they come in and how each is checked, one module per family
holds the operators (`matmul`, `linalg`, `elementwise`, `conv`, `pool_norm`), and `workload`
turns an operator with its parameters into the IRModule that is tuned and its identity (the
structural hash). TVM is imported only when a kernel is built: the API lists and validates
operators without it."""

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
