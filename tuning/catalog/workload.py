"""Workloads of the catalog: an operator with validated parameters turned into the IRModule
MetaSchedule tunes, with its structural hash (the workload's identity) and its TVM JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuning.catalog import OpParams, get_operator
from tuning.ir import normalize, structural_hash


@dataclass(frozen=True)
class WorkloadSpec:
    """A tunable IRModule with its identity."""

    mod: Any  # tvm.IRModule with one PrimFunc "main"
    shash: str  # tvm_ffi.structural_hash(mod), decimal (MetaSchedule's Workload JSON spelling)
    mod_json: str  # tvm.ir.save_json(mod)
    operator: str | None
    params: dict[str, Any]
    flop: float


def catalog_workload(name: str, params: OpParams) -> WorkloadSpec:
    """The workload of a catalog operator with validated parameters."""
    import tvm

    op = get_operator(name)
    if op is None:
        raise KeyError(name)
    mod = normalize(op.build(params))
    return WorkloadSpec(
        mod=mod,
        shash=structural_hash(mod),
        mod_json=tvm.ir.save_json(mod),
        operator=name,
        params=params.model_dump(),
        flop=op.flop(params),
    )
