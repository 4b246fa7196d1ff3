"""The AMX tile kernel in the packed space: offered for bf16 matmul/dense blocks (a model's batch
axis of 1 included) on a target with AMX-BF16 and only there, its trace passes the gate and
replays, it compiles to tile instructions, a library with them is never
built for a target without tiles, and where this CPU grants the tile state a job publishes a
kernel that equals the float64 reference of the same bf16 inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tvm

from tests.tuning.bf16_jobs import packed_spaces, run_packed_job
from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload
from tuning.checks.library_check import UnsafeLibrary
from tuning.checks.trace_gate import TENSOR_INTRINSICS
from tuning.hardware.amx import BLOCKS, MAX_KC, PREFIX, TILE_K, amx_intrinsic
from tuning.hardware.bf16 import AMX, bf16_unit
from tuning.hardware.targets import resolve_target
from tuning.measure.timing import run_module
from tuning.publish.packing import PACKED_ENTRY, PackedParam, split_packed
from tuning.publish.verify import apply_trace, build_library
from tuning.search.amx_tiles import amx_plan
from tuning.search.spaces import PACKED, space_module
from tuning.traces import trace_to_text

SAPPHIRE = {"kind": "llvm", "mcpu": "sapphirerapids", "num-cores": 2}
ZEN4 = {"kind": "llvm", "mcpu": "znver4", "num-cores": 2}  # AVX512-BF16, no tiles
DENSE = {"M": 32, "N": 64, "K": 96, "bias": True, "dtype": "bfloat16"}


def _spaces(mod: object, target: dict) -> list:
    return packed_spaces(mod, target)


def _dense(params: dict) -> object:
    op = get_operator("dense")
    spec = catalog_workload("dense", op.Params.model_validate(params))
    return space_module(spec.mod, PACKED, op.constant_operands)


def _amx(spaces: list) -> list:
    return [s for s in spaces if PREFIX in trace_to_text(s.trace.as_json())]


def _host_has_tiles() -> bool:
    return bf16_unit(tvm.target.Target(resolve_target("host").canonical)) == AMX


def test_the_plan_is_the_biggest_block_and_longest_k_block_that_divide() -> None:
    plan = amx_plan(128, 768, 3072)
    assert plan is not None and (plan.rows, plan.cols, plan.kc) == (32, 32, 3072)
    plan = amx_plan(16, 48, 64)
    assert plan is not None and (plan.rows, plan.cols, plan.kc) == (16, 16, 64)
    plan = amx_plan(32, 32, 2 * MAX_KC + 32 * 3)  # 8288 = 32 x 7 x 37: 37 x 32 = 1184 divides
    assert plan is not None and plan.kc == 1184
    assert amx_plan(8, 32, 64) is None  # fewer rows than a tile
    assert amx_plan(32, 32, 48) is None  # k not whole A tile rows


def test_the_gate_admits_every_amx_intrinsic_and_nothing_else_of_that_name() -> None:
    possible = {
        f"{PREFIX}{r}x{c}x{k}" for r, c in BLOCKS for k in range(TILE_K, MAX_KC + 1, TILE_K)
    }
    assert {n for n in TENSOR_INTRINSICS if n.startswith(PREFIX)} == possible
    with pytest.raises(ValueError, match="no AMX intrinsic"):
        amx_intrinsic(64, 32, 64)


def test_the_packed_space_offers_the_amx_kernel_whose_trace_replays_and_compiles() -> None:
    mod = _dense(DENSE)
    spaces = _spaces(mod, SAPPHIRE)
    (amx,) = _amx(spaces)
    assert len(spaces) > 2  # the widening spaces and the vdpbf16ps kernel stay beside it
    scheduled = apply_trace(mod, trace_to_text(amx.trace.as_json()))  # the gate, then replay
    split = split_packed(scheduled, drop_in=False)
    (param,) = split.packed
    assert (param.packed_shape, param.dtype) == ([4, 48, 16, 2], "bfloat16")
    asm = tvm.compile(split.mod, target=SAPPHIRE).mod.inspect_source("asm")
    assert asm.count("tdpbf16ps") >= 4 and "ldtilecfg" in asm and "tilestored" in asm
    if not _host_has_tiles():
        return  # compiled and checked above; running it needs AMX and the tile state
    lib = tvm.compile(split.mod, target=resolve_target("host").canonical).mod
    op = get_operator("dense")
    params = op.Params.model_validate(DENSE)
    inputs, expected = op.make_case(params, mod["main"], np.random.default_rng(3))
    actual = run_module(lib, "llvm", inputs, [32, 64], "float32", split.packed)
    np.testing.assert_allclose(actual, expected, *op.tolerance(params))


def test_a_model_matmul_with_a_batch_axis_of_one_gets_the_kernel() -> None:
    """A Relax model's dense is ``[1, seq, hidden] x [hidden, out]``: the batch loop of 1 stays
    outside the tiles."""
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def main(
        x: T.Buffer((1, 32, 64), "bfloat16"),
        w: T.Buffer((64, 32), "bfloat16"),
        y: T.Buffer((1, 32, 32), "float32"),
    ) -> None:
        T.func_attr({"layout_free_buffers": [1], "tirx.noalias": True})
        for b, i, j, k in T.grid(1, 32, 32, 64):
            with T.sblock("matmul"):
                vb, vi, vj, vk = T.axis.remap("SSSR", [b, i, j, k])
                with T.init():
                    y[vb, vi, vj] = T.float32(0)
                y[vb, vi, vj] = y[vb, vi, vj] + T.Cast("float32", x[vb, vi, vk]) * T.Cast(
                    "float32", w[vk, vj]
                )

    mod = tvm.IRModule({"main": main})
    (amx,) = _amx(_spaces(mod, SAPPHIRE))
    split = split_packed(apply_trace(mod, trace_to_text(amx.trace.as_json())), drop_in=False)
    assert "tdpbf16ps" in tvm.compile(split.mod, target=SAPPHIRE).mod.inspect_source("asm")


def test_no_amx_kernel_for_a_target_without_tiles_and_never_built_for_one(
    tmp_path: Path,
) -> None:
    mod = _dense(DENSE)
    assert not _amx(_spaces(mod, ZEN4))  # vdpbf16ps alone there
    (amx,) = _amx(_spaces(mod, SAPPHIRE))
    scheduled = split_packed(apply_trace(mod, trace_to_text(amx.trace.as_json())), False).mod
    with pytest.raises(UnsafeLibrary, match="AMX"):
        build_library(scheduled, ZEN4, tmp_path / "k.so")
    assert build_library(scheduled, SAPPHIRE, tmp_path / "k.so").exists()


def test_a_bf16_dense_job_on_a_cpu_with_tiles_publishes_a_verified_kernel(tmp_path: Path) -> None:
    """The worker's job end to end on this CPU: search, verification in the jail (whose
    runner asks for the tile state), publication. On a CPU without AMX (or whose OS refuses
    the tile state) the host target's space offers no tile kernel at all."""
    params_json = {"M": 64, "N": 256, "K": 512, "dtype": "bfloat16"}
    if not _host_has_tiles():
        assert not _amx(_spaces(_dense(params_json), resolve_target("host").canonical))
        return
    done = run_packed_job(tmp_path, params_json, 16)
    op, params, best = done.op, done.params, done.best
    assert best.packed_params and done.module.implements_function(PACKED_ENTRY)
    inputs, expected = op.make_case(params, done.spec.mod["main"], np.random.default_rng(9))
    packed = [PackedParam(**p) for p in best.packed_params]
    actual = run_module(done.module, "llvm", inputs, [64, 256], "float32", packed)
    np.testing.assert_allclose(actual, expected, *op.tolerance(params))
    # The tile kernel ran in the jail's runner (the tile state granted there), whichever won.
    records = done.store.records.list_records(done.target_id, done.workload_id, done.job_id)
    timed = [r for r in records if PREFIX in r.trace_json and r.mean_run_us is not None]
    tried = [r.mean_run_us for r in records if PREFIX in r.trace_json]
    assert timed, f"no tile kernel among {len(records)} measured candidates ran: {tried}"
    tiles = split_packed(apply_trace(_dense(params_json), timed[0].trace_json), drop_in=False)
    lib = tvm.compile(tiles.mod, target=resolve_target("host").canonical).mod
    actual = run_module(lib, "llvm", inputs, [64, 256], "float32", tiles.packed)
    np.testing.assert_allclose(actual, expected, *op.tolerance(params))
