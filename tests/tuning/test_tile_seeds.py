"""Register-tile seeds: the packed space's first batch keeps every accumulator in a register for
the whole reduction, computes what numpy does, and is what a packed job measures first."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tuning.test_spaces import _library_matches_numpy
from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload
from tuning.hardware.targets import resolve_target
from tuning.ir import structural_hash
from tuning.publish.packing import split_packed
from tuning.search.spaces import PACKED, register_tile_limit, space_generator, space_module
from tuning.search.tile_seeds import TileLoop, plan_decisions, register_blocks, register_tile_seeds


def test_register_blocks_fill_the_budget_with_divisors() -> None:
    # 56 x 56 (a ResNet layer's OH x OW): 16 accumulators as 2 x 8, then 14 as one run of 14...
    assert register_blocks(56, 56, 16, 4) == [(2, 8), (1, 14), (1, 8), (1, 7)]
    # ... and with AVX2's budget, runs of at most 8.
    assert register_blocks(56, 56, 8, 4) == [(1, 8), (1, 7), (1, 4), (1, 2)]
    # One loop only (matmul's rows): blocks of it alone.
    assert register_blocks(512, 1, 16, 3) == [(1, 16), (1, 8), (1, 4)]
    # A prime extent above the budget has no block but its unit.
    assert register_blocks(17, 1, 16, 4) == []


def test_plan_keeps_the_reduction_inside_the_register_tile() -> None:
    # The packed space's NHWC 3x3 conv on 56 x 56 x 64: N, OH, OW (4 levels each), the outer
    # part of the vectorised K (3 levels), then RH, RW, RC (2 levels each).
    loops = [
        TileLoop(0, 1, 4),
        TileLoop(1, 56, 4),
        TileLoop(2, 56, 4),
        TileLoop(3, 4, 3),
        TileLoop(4, 3, 2),
        TileLoop(5, 3, 2),
        TileLoop(6, 64, 2),
    ]
    plan = plan_decisions(loops, (1, 14), parallel=16)
    assert plan == {
        0: [1, 1, 1, 1],
        1: [28, 2, 1, 1],  # 28 rows of outer chunks: >= 16 for the cores
        2: [1, 4, 1, 14],  # 14 outputs in registers
        3: [1, 4, 1],
        4: [1, 3],
        5: [1, 3],
        6: [1, 64],
    }
    for loop in loops:
        assert int(np.prod(plan[loop.position])) == loop.extent
        assert len(plan[loop.position]) == loop.levels


def _packed_context(operator: str, params: dict):  # noqa: ANN202
    import tvm
    from tvm.s_tir.meta_schedule import TuneContext

    op = get_operator(operator)
    spec = catalog_workload(operator, op.Params(**params))
    target = tvm.target.Target(resolve_target("host").canonical)
    mod = space_module(spec.mod, PACKED, op.constant_operands)
    context = TuneContext(
        mod=mod, target=target, space_generator=space_generator(PACKED, target, mod)
    ).clone()
    return op, spec, target, mod, context


def _tile_decisions(trace) -> list[list[int]]:  # noqa: ANN001
    return [
        [int(x) for x in trace.decisions[inst]]
        for inst in trace.insts
        if inst.kind.name == "SamplePerfectTile"
    ]


@pytest.mark.parametrize(
    "operator,params",
    [
        ("matmul", {"M": 32, "N": 64, "K": 48}),
        ("conv2d", {"layout": "NHWC", "N": 1, "C": 16, "H": 8, "W": 8, "K": 32, "R": 3, "S": 3}),
        ("conv2d", {"layout": "NCHW", "N": 1, "C": 8, "H": 6, "W": 8, "K": 32, "R": 3, "S": 3}),
    ],
)
def test_seeds_hold_whole_reductions_and_match_numpy(operator: str, params: dict, tmp_path) -> None:
    op, spec, target, mod, context = _packed_context(operator, params)
    budget = register_tile_limit(target)
    seeds = register_tile_seeds(context, cores=2)
    assert len(seeds) >= 2
    for trace in seeds:
        tiles = _tile_decisions(trace)
        reductions = [t for t in tiles if len(t) == 2]
        assert reductions and all(t[0] == 1 for t in reductions)  # whole, inside the tile
        spatial = [t for t in tiles if len(t) == 4]
        assert all(t[2] == 1 for t in spatial)  # nothing between reduction and register tile
        accumulators = int(np.prod([t[3] for t in spatial]))
        assert 1 < accumulators <= budget
    assert len({structural_hash(_scheduled(mod, t)) for t in seeds}) == len(seeds)
    # Through main and through pack_1 + main_packed, against numpy.
    split = split_packed(_scheduled(mod, seeds[0]))
    _library_matches_numpy(op, spec, target, split, params, tmp_path, seed=2)


def _scheduled(mod, trace):  # noqa: ANN001, ANN202
    from tvm.s_tir.schedule import Schedule

    sch = Schedule(mod)
    trace.apply_to_schedule(sch, remove_postproc=False)
    return sch.mod


def test_a_packed_job_measures_its_seeds_first(tmp_path) -> None:
    """A packed job's first batch is its seeds (stored, counted, measured), and
    a later job of the workload would not measure them again."""
    from schedules_db import Store, make_engine, upgrade_schema
    from service.worker.execution import WorkerContext, run_job
    from service.worker.store_database import StoreDatabase
    from tests.tuning.store_rows import host_and_workload
    from tuning.publish.verify import apply_trace
    from tuning.search.loop import first_batch
    from tuning.search.tile_seeds import micro_kernel_seeds

    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    upgrade_schema(engine)
    store = Store(engine)
    op, spec, target, mod, context = _packed_context("matmul", {"M": 64, "N": 32, "K": 64})
    # The micro-kernels' seeds, then the multi-level tiling's (tuning.search.loop.first_batch).
    seeds = micro_kernel_seeds(context) + register_tile_seeds(context, cores=2)
    target_id, workload_id = host_and_workload(store, spec)
    worker = WorkerContext(store, tmp_path / "artifacts", "pytest", num_trials_per_iter=4, seed=3)
    job = store.jobs.create(workload_id, target_id, 4, "tunehub.test", space=PACKED)
    assert run_job(worker, job.id) == "succeeded", store.jobs.get(job.id).error
    records = store.records.list_records(target_id, workload_id, job.id)
    assert store.jobs.get(job.id).trials_done == len(records) == 4
    measured = [structural_hash(apply_trace(mod, r.trace_json)) for r in records]
    assert measured == [structural_hash(_scheduled(mod, t)) for t in seeds[:4]]
    assert all(r.mean_run_us is not None for r in records)
    # What a later job of the same workload would measure first: the seeds not stored yet.
    database = StoreDatabase(store, target_id, None, PACKED, {structural_hash(mod): workload_id})
    generator = space_generator(PACKED, target, mod)
    later = first_batch(mod, target, generator, database, PACKED, 2, [], 4)
    assert [structural_hash(_scheduled(mod, t)) for t in later] == [
        structural_hash(_scheduled(mod, t)) for t in seeds[4:8]
    ]
    # A warm start's seed that is also a register-tile seed is measured once, first.
    warm = first_batch(mod, target, generator, database, PACKED, 2, [seeds[5]], 4)
    assert [structural_hash(_scheduled(mod, t)) for t in warm] == [
        structural_hash(_scheduled(mod, t)) for t in (seeds[5], seeds[4], seeds[6], seeds[7])
    ]
    engine.dispose()


def test_bf16_seeds_take_the_preferred_blocks_or_the_nearest_smaller_choice() -> None:
    """A dense layer's categoricals have the sweep's blocks; a convolution's rows divide its
    width (7 for a 7- or 28-wide row) and its k blocks its channels (32 pairs for 64)."""
    from tuning.search.tile_seeds import SEED_PAIRS, SEED_ROWS, _seeded

    assert _seeded(SEED_ROWS, [2, 4, 8]) == [4, 8]
    assert _seeded(SEED_ROWS, [7, 14, 28]) == [7]
    assert _seeded(SEED_ROWS, [14, 28]) == [14]  # none fits: the smallest
    assert _seeded(SEED_PAIRS, [16, 32]) == [32]
