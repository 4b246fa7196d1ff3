"""The AVX512-BF16 micro-kernel in the packed space: offered for bf16 matmul/dense blocks on a
target with a bf16 unit (and only there), its trace passes the gate and replays, its weight is
packed by a function of its own (as an artifact ships it), it compiles to vdpbf16ps and, where
the CPU has the instruction, equals the float64 reference of the same bf16 inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tvm

from tests.tuning.bf16_jobs import operator_spaces, run_packed_job
from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload
from tuning.checks.library_check import UnsafeLibrary
from tuning.hardware.bf16 import DOT_16x2
from tuning.hardware.host import cpu_flags
from tuning.hardware.targets import resolve_target
from tuning.measure.timing import run_module
from tuning.publish.packing import PACKED_ENTRY, PackedParam, split_packed
from tuning.publish.verify import apply_trace, build_library
from tuning.search.bf16_dot import bf16_axes
from tuning.search.spaces import PACKED, space_module
from tuning.traces import trace_to_text

ZEN4 = {"kind": "llvm", "mcpu": "znver4", "num-cores": 2}
DENSE = {"M": 8, "N": 32, "K": 48, "bias": True, "dtype": "bfloat16"}


def _bf16_spaces(spaces: list) -> list:
    return [s for s in spaces if DOT_16x2 in trace_to_text(s.trace.as_json())]


def test_the_packed_space_offers_the_bf16_kernel_whose_trace_passes_and_replays() -> None:
    mod, spaces = operator_spaces("dense", DENSE, ZEN4)
    (bf16,) = _bf16_spaces(spaces)
    assert len(spaces) > 1  # the spaces that widen bf16 stay beside it
    scheduled = apply_trace(mod, trace_to_text(bf16.trace.as_json()))  # the gate, then replay
    split = split_packed(scheduled, drop_in=False)
    (param,) = split.packed
    assert (param.index, param.shape, param.packed_shape) == (1, [32, 48], [2, 24, 16, 2])
    assert param.dtype == "bfloat16" and split.entry == PACKED_ENTRY
    lib = tvm.compile(split.mod, target=ZEN4).mod
    asm = lib.inspect_source("asm").splitlines()
    assert sum("vdpbf16ps" in line for line in asm) >= 2
    assert not any("call" in line and "tunehub_dpbf16ps" in line for line in asm)

    if "avx512bf16" not in (cpu_flags() or set()):
        return  # compiled and checked above; running it needs the instruction
    lib = tvm.compile(split.mod, target=resolve_target("host").canonical).mod  # this CPU's
    op = get_operator("dense")
    params = op.Params.model_validate(DENSE)
    inputs, expected = op.make_case(params, mod["main"], np.random.default_rng(5))
    rtol, atol = op.tolerance(params)
    actual = run_module(lib, "llvm", inputs, [8, 32], "float32", split.packed)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize(
    ("operator", "params", "target"),
    [
        ("dense", {**DENSE, "dtype": "float32"}, ZEN4),  # fp32 operands
        ("dense", DENSE, {**ZEN4, "mcpu": "skylake-avx512"}),  # no bf16 unit
        ("matmul", {"M": 8, "N": 32, "K": 47, "dtype": "bfloat16"}, ZEN4),  # odd k: no pairs
        ("matmul", {"M": 8, "N": 40, "K": 48, "dtype": "bfloat16"}, ZEN4),  # 40 columns
    ],
)
def test_no_bf16_kernel_where_it_cannot_run_or_does_not_fit(
    operator: str, params: dict, target: dict
) -> None:
    _, spaces = operator_spaces(operator, params, target)
    assert spaces and not _bf16_spaces(spaces)


def test_a_matmul_weight_is_read_k_first_and_a_dense_one_j_first() -> None:
    for operator, params, k_first in (
        ("matmul", {"M": 8, "N": 32, "K": 48, "dtype": "bfloat16"}, True),
        ("dense", DENSE, False),
    ):
        op = get_operator(operator)
        spec = catalog_workload(operator, op.Params.model_validate(params))
        sch = tvm.s_tir.Schedule(space_module(spec.mod, PACKED, op.constant_operands))
        block = sch.get_sblock("C" if operator == "matmul" else "T_matmul_NT")
        found = bf16_axes(sch, block, budget=28)
        assert found is not None and found.k_first is k_first and found.weight_read == 1


def test_a_bf16_dense_job_publishes_the_vdpbf16ps_kernel(tmp_path: Path) -> None:
    """The worker's job end to end (search with the bf16 seeds first, verification in the jail,
    publication): on a CPU with AVX512-BF16 a bf16 kernel (``vdpbf16ps``, about twice the
    widened kernels' speed, or, where the CPU has AMX, the tile kernel) wins and ships with its
    pack function and no drop-in main. Where the CPU has no
    AVX512-BF16, the host target's space must not offer the kernel at all."""
    params_json = {"M": 32, "N": 256, "K": 256, "dtype": "bfloat16"}
    if "avx512bf16" not in (cpu_flags() or set()):
        _, spaces = operator_spaces("dense", params_json, resolve_target("host").canonical)
        assert spaces and not _bf16_spaces(spaces)
        return
    done = run_packed_job(tmp_path, params_json, 8)
    op, params, best = done.op, done.params, done.best
    assert ("tunehub_dpbf16ps" in best.tir or "tdpbf16ps" in best.tir) and best.packed_params
    module = done.module
    assert module.implements_function(PACKED_ENTRY) and not module.implements_function("main")
    inputs, expected = op.make_case(params, done.spec.mod["main"], np.random.default_rng(9))
    packed = [PackedParam(**p) for p in best.packed_params]
    actual = run_module(module, "llvm", inputs, [32, 256], "float32", packed)
    np.testing.assert_allclose(actual, expected, *op.tolerance(params))


def test_a_vdpbf16ps_kernel_is_never_built_for_a_target_without_it(tmp_path: Path) -> None:
    """A trace (imported, say) may tensorize any bf16 block with the intrinsic: the library
    build refuses it for a target that does not declare AVX512-BF16."""
    mod, spaces = operator_spaces("dense", DENSE, ZEN4)
    (bf16,) = _bf16_spaces(spaces)
    scheduled = split_packed(apply_trace(mod, trace_to_text(bf16.trace.as_json())), False).mod
    with pytest.raises(UnsafeLibrary, match="vdpbf16ps"):
        build_library(scheduled, {**ZEN4, "mcpu": "skylake-avx512"}, tmp_path / "k.so")
    assert build_library(scheduled, ZEN4, tmp_path / "k.so").exists()
