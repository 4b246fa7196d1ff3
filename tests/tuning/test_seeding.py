"""Warm start from neighbours: the best traces of a stored workload, refitted to a new shape of
the same operator, seed the new search and still compute the right thing."""

from __future__ import annotations

import numpy as np

from service.worker.search_storage import StoreSearchStorage, stored_workload
from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload
from tuning.hardware.targets import resolve_target
from tuning.ir import arg_specs, structural_hash
from tuning.measure.timing import run_module
from tuning.publish.verify import check_close, compile_to_library
from tuning.search.seeding import _size_distance, neighbour_seeds, neighbours, refit_tiles
from tuning.search.spaces import PLAIN, space_generator


def test_refit_keeps_the_inner_tiles_that_divide() -> None:
    assert refit_tiles([4, 2, 1, 16], 128) == [4, 2, 1, 16]
    assert refit_tiles([4, 2, 1, 16], 96) == [3, 2, 1, 16]
    assert refit_tiles([2, 8, 4, 4], 48) == [3, 1, 4, 4]
    assert refit_tiles([1, 1, 7], 12) == [12, 1, 1]
    for factors, extent in (([8, 4, 2, 8], 100), ([3, 5, 7], 210), ([16, 16], 17)):
        assert int(np.prod(refit_tiles(factors, extent))) == extent


def test_only_same_layout_and_dtype_are_neighbours() -> None:
    base = {"M": 64, "N": 64, "K": 64, "dtype": "float32"}
    assert _size_distance(base, {**base, "M": 128}) > 0
    assert _size_distance(base, base) == 0
    assert _size_distance(base, {**base, "dtype": "float16"}) is None
    assert _size_distance({**base, "bias": True}, {**base, "bias": False}) is None


def test_neighbour_traces_seed_a_new_shape_and_compute_it(tuned_store: dict, tmp_path) -> None:
    import tvm
    from tvm.s_tir.meta_schedule import TuneContext
    from tvm.s_tir.schedule import Schedule

    store = tuned_store["store"]
    op = get_operator("matmul")
    params = op.Params(M=48, N=32, K=64)
    spec = catalog_workload("matmul", params)
    row = store.catalog.get_or_create_workload(
        spec.shash, spec.mod_json, "matmul", spec.params, spec.flop
    )
    # The session's store holds other matmuls too (other tests add them); all are neighbours.
    storage = StoreSearchStorage(store, tuned_store["target_id"])
    found = neighbours(storage, stored_workload(row))
    assert tuned_store["workload_id"] in [n.id for n in found]
    assert {(n.operator, n.params["dtype"]) for n in found} == {("matmul", "float32")}
    target = tvm.target.Target(resolve_target("host").canonical)
    context = TuneContext(
        mod=spec.mod, target=target, space_generator=space_generator(PLAIN, target)
    ).clone()
    postprocs = list(context.space_generator.postprocs)
    seeds = neighbour_seeds(storage, stored_workload(row), spec.mod, postprocs)
    assert seeds, "no stored trace of the 32^3 matmul could be refitted to 48x32x64"
    func = spec.mod["main"]
    inputs, expected = op.make_case(params, func, np.random.default_rng(3))
    out_shape, out_dtype = arg_specs(func)[-1]
    for i, trace in enumerate(seeds[:2]):  # compiling each costs ~1 s; two make the point
        sch = Schedule(spec.mod)
        trace.apply_to_schedule(sch, remove_postproc=False)
        module = compile_to_library(sch.mod, target, tmp_path / f"seed{i}.so")
        actual = run_module(module, "llvm", inputs, out_shape, out_dtype)
        check_close(actual, expected, *op.tolerance(params))


def test_a_warm_job_measures_its_neighbours_seeds_first(tuned_store: dict) -> None:
    """The seeds are the job's first measured batch (MetaSchedule alone would measure only the
    ones its cost model ranks above their own mutants), and they count against the budget."""
    import tvm
    from tvm.s_tir.meta_schedule import TuneContext
    from tvm.s_tir.schedule import Schedule

    from service.worker.execution import run_job
    from tuning.publish.verify import apply_trace

    store, tid = tuned_store["store"], tuned_store["target_id"]
    params = get_operator("matmul").Params(M=40, N=32, K=24)
    spec = catalog_workload("matmul", params)
    row = store.catalog.get_or_create_workload(
        spec.shash, spec.mod_json, "matmul", spec.params, spec.flop
    )
    target = tvm.target.Target(resolve_target("host").canonical)
    context = TuneContext(
        mod=spec.mod, target=target, space_generator=space_generator(PLAIN, target)
    ).clone()
    storage = StoreSearchStorage(store, tid)
    postprocs = list(context.space_generator.postprocs)
    seeds = neighbour_seeds(storage, stored_workload(row), spec.mod, postprocs)
    assert len(seeds) >= 4

    def scheduled(trace) -> str:  # noqa: ANN001
        sch = Schedule(spec.mod)
        trace.apply_to_schedule(sch, remove_postproc=False)
        return structural_hash(sch.mod)

    # A budget of one batch (the context measures batches of 4): the seeds are the whole job.
    job = store.jobs.create(row.id, tid, 4, "q", transfer_cost_model=True)
    assert run_job(tuned_store["context"], job.id) == "succeeded", store.jobs.get(job.id).error
    records = store.records.list_records(tid, row.id, job.id)
    first = len(seeds[:4])
    assert store.jobs.get(job.id).trials_done == len(records) == first
    measured_first = [structural_hash(apply_trace(spec.mod, r.trace_json)) for r in records]
    assert measured_first[:first] == [scheduled(t) for t in seeds[:first]]
    assert all(r.mean_run_us is not None for r in records[:first])
