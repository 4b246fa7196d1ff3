"""Workloads: a catalog operator with parameters (or a PrimFunc) turned into the IRModule that
MetaSchedule tunes, with its structural hash (the workload's identity) and its TVM JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuning.catalog import OpParams, get_operator


@dataclass(frozen=True)
class WorkloadSpec:
    """A tunable IRModule with its identity."""

    mod: Any  # tvm.IRModule with one PrimFunc "main"
    shash: str  # tvm_ffi.structural_hash(mod), decimal (MetaSchedule's Workload JSON spelling)
    mod_json: str  # tvm.ir.save_json(mod)
    operator: str | None
    params: dict[str, Any]
    flop: float


def normalize(func: Any) -> Any:
    """The IRModule MetaSchedule tunes for a PrimFunc: one function "main"."""
    import tvm

    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


def structural_hash(mod: Any) -> str:
    """Structural hash of an IRModule, as MetaSchedule's Workload JSON writes it."""
    import tvm_ffi

    return str(tvm_ffi.structural_hash(mod))


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


def load_mod(mod_json: str) -> Any:
    """The IRModule stored in a workload row."""
    import tvm

    return tvm.ir.load_json(mod_json)


def param_buffer(func: Any, param: Any) -> Any:
    """The buffer behind a PrimFunc parameter (TVM 0.27's parameters are buffers already)."""
    buffer_map = getattr(func, "buffer_map", None)
    return buffer_map[param] if buffer_map is not None else param


def arg_specs(func: Any) -> list[tuple[list[int], str]]:
    """(shape, dtype) of every parameter buffer of a PrimFunc, in call order."""
    specs = []
    for param in func.params:
        buf = param_buffer(func, param)
        specs.append(([int(x) for x in buf.shape], str(buf.dtype)))
    return specs
