"""What the bf16 kernel tests share: a module's packed design spaces, and a catalog job
run by the worker's own code on this host."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tvm

from schedules_db import Store, make_engine, upgrade_schema
from service.worker.execution import WorkerContext, run_job
from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload
from tuning.hardware.targets import resolve_target
from tuning.search.spaces import PACKED


@dataclass
class PackedJob:
    """A finished job: its store and ids, the operator's params and workload, the published
    best schedule and its library loaded in this process."""

    store: Store
    target_id: int
    workload_id: int
    job_id: int
    op: Any
    params: Any
    spec: Any
    best: Any
    module: Any


def packed_spaces(mod: Any, target: dict[str, Any]) -> list[Any]:
    """The packed space's design spaces of ``mod`` on ``target``, each through the space's
    postprocessors (as a measured candidate is)."""
    from tvm.s_tir.meta_schedule import TuneContext

    from tuning.hardware.intrinsics import load_tensor_intrinsics
    from tuning.search.spaces import space_generator

    load_tensor_intrinsics([target])  # x86's alone, as a worker does (all of TVM's: ~30 s)
    tvm_target = tvm.target.Target(target)
    context = TuneContext(
        mod=mod, target=tvm_target, space_generator=space_generator(PACKED, tvm_target, mod)
    )
    spaces = []
    for space in context.generate_design_space():
        sch = space.copy()
        assert all(p.apply(sch) for p in context.space_generator.postprocs), space.trace
        spaces.append(sch)
    return spaces


def operator_spaces(operator: str, params: dict[str, Any], target: dict[str, Any]) -> tuple:
    """The catalog ``operator``'s module with ``params`` in the packed space, and its design
    spaces on ``target`` (`packed_spaces`)."""
    from tuning.search.spaces import space_module

    op = get_operator(operator)
    spec = catalog_workload(operator, op.Params.model_validate(params))
    mod = space_module(spec.mod, PACKED, op.constant_operands)
    return mod, packed_spaces(mod, target)


def run_packed_job(
    tmp_path: Path, params_json: dict[str, Any], trials: int, operator: str = "dense"
) -> PackedJob:
    """Run a packed-space job of ``trials`` for the catalog's ``operator`` on the host target in
    a fresh SQLite store under ``tmp_path`` (asserting it succeeds); its engine is disposed of
    after."""
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    upgrade_schema(engine)
    store = Store(engine)
    context = WorkerContext(
        store=store, artifact_dir=tmp_path / "a", worker_name="pytest", num_trials_per_iter=8
    )
    op = get_operator(operator)
    params = op.Params.model_validate(params_json)
    spec = catalog_workload(operator, params)
    target = resolve_target("host")
    row = store.catalog.get_or_create_target(target.canonical, target.kind, target.label, {})
    workload = store.catalog.get_or_create_workload(
        spec.shash, spec.mod_json, operator, spec.params, spec.flop
    )
    job = store.jobs.create(workload.id, row.id, trials, "q", space=PACKED)
    try:
        assert run_job(context, job.id) == "succeeded", store.jobs.get(job.id).error
        best = store.schedules.get(store.jobs.get(job.id).schedule_id)
        module = tvm.runtime.load_module(
            str(context.artifact_dir / store.schedules.get_artifact(best.artifact_id).path)
        )
        return PackedJob(store, row.id, workload.id, job.id, op, params, spec, best, module)
    finally:
        engine.dispose()
