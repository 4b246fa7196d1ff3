"""The packed space's register micro-kernels (`tuning.search.micro_kernels`)."""

from __future__ import annotations

import json

import pytest

from tests.tuning.test_spaces import _library_matches_numpy
from tests.tuning.test_tile_seeds import _packed_context, _scheduled
from tuning.checks.trace_gate import check_trace
from tuning.ir import structural_hash
from tuning.publish.packing import split_packed
from tuning.search.micro_kernels import UNROLL_MAX, elementwise_consumers, matmul_axes
from tuning.search.pointwise_conv import PointwiseConv, pointwise_conv
from tuning.search.tile_seeds import k_tiles, micro_kernel_seeds
from tuning.traces import plain_json


def _block(mod):  # noqa: ANN001, ANN202
    """A schedule of ``mod`` and its (one) reduction block."""
    from tvm.s_tir.schedule import Schedule

    sch = Schedule(mod)
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    (reduction,) = [b for b in blocks if sch.get(b).init is not None]
    return sch, reduction


def test_matmuls_are_recognised_and_other_contractions_are_not() -> None:
    _, _, _, mod, _ = _packed_context("matmul", {"M": 32, "N": 64, "K": 48})
    sch, block = _block(mod)
    axes = matmul_axes(sch, block, 512, 28)
    assert axes is not None
    assert axes.lanes == 16 and axes.k_extent == 48 and axes.batch == 0
    assert axes.vectors == (1, 2, 4)  # 64 columns: 4 vectors of 16
    assert all(32 % r == 0 for r in axes.rows) and max(axes.rows) <= 14
    # Dense reads its weight across rows (W[N, K]); it is layout-free, so it is packed.
    _, _, _, dense, _ = _packed_context("dense", {"M": 16, "N": 32, "K": 24, "bias": True})
    sch, block = _block(dense)
    assert matmul_axes(sch, block, 512, 28) is not None
    # An NCHW convolution's output channel is not its innermost axis: not a matmul here.
    _, _, _, conv, _ = _packed_context(
        "conv2d", {"layout": "NCHW", "N": 1, "C": 8, "H": 6, "W": 8, "K": 32, "R": 3, "S": 3}
    )
    from tvm.s_tir.schedule import Schedule

    sch = Schedule(conv)
    blocks = [b for b in sch.get_child_blocks(sch.get_sblock("root"))]
    assert all(matmul_axes(sch, b, 512, 28) is None for b in blocks)
    # Columns that are not a whole number of vectors: no micro-kernel.
    _, _, _, odd, _ = _packed_context("matmul", {"M": 32, "N": 40, "K": 48})
    sch, block = _block(odd)
    assert matmul_axes(sch, block, 512, 28) is None


def test_k_tiles_keep_the_weight_block_in_cache_and_unroll_by_four() -> None:
    assert k_tiles(768, 32) == [4, 48, 4]  # 32 columns x 192 = 6,144 floats
    assert k_tiles(3072, 64) == [32, 24, 4]
    assert k_tiles(6, 16) == [1, 2, 3]  # the largest divisor of 6 up to UNROLL_MAX
    for extent, columns in [(768, 32), (3072, 64), (6, 16), (7, 8)]:
        tiles = k_tiles(extent, columns)
        assert tiles[0] * tiles[1] * tiles[2] == extent and tiles[2] <= UNROLL_MAX


@pytest.mark.parametrize(
    "operator,params",
    [
        ("matmul", {"M": 32, "N": 64, "K": 48}),
        ("dense", {"M": 16, "N": 32, "K": 24, "bias": True}),
    ],
)
def test_micro_kernel_seeds_pass_the_gate_and_match_numpy(
    operator: str, params: dict, tmp_path
) -> None:
    op, spec, target, mod, context = _packed_context(operator, params)
    seeds = micro_kernel_seeds(context)
    assert len(seeds) >= 2
    for trace in seeds:
        check_trace(json.loads(json.dumps(plain_json(trace.as_json(remove_postproc=False)))))
    assert len({structural_hash(_scheduled(mod, t)) for t in seeds}) == len(seeds)
    scheduled = _scheduled(mod, seeds[0])
    text = scheduled.script()
    assert "T.parallel" in text and "T.unroll" in text and "T.vectorized" in text
    if params.get("bias"):
        # The bias is added per column block, under the parallel loop: no second pass.
        from tvm.s_tir.schedule import Schedule
        from tvm.tirx import ForKind

        sch = Schedule(scheduled)
        (epilogue,) = elementwise_consumers(sch, sch.get_sblock("T_matmul_NT_update"))
        kinds = [sch.get(loop).kind for loop in sch.get_loops(epilogue)]
        assert kinds[0] == ForKind.PARALLEL and kinds[-1] == ForKind.VECTORIZED
    split = split_packed(scheduled)
    _library_matches_numpy(op, spec, target, split, params, tmp_path, seed=4)


@pytest.mark.parametrize(
    "operator,params",
    [
        ("conv2d", {"layout": "NCHW", "N": 1, "C": 8, "H": 6, "W": 8, "K": 24, "R": 1, "S": 1}),
        (
            "conv2d_bias_relu",
            {"layout": "NCHW", "N": 1, "C": 12, "H": 4, "W": 12, "K": 16, "R": 1, "S": 1},
        ),
    ],
)
def test_pointwise_convolutions_get_the_micro_kernel_over_their_image_axis(
    operator: str, params: dict, tmp_path
) -> None:
    """A 1x1 NCHW convolution is W[K, C] @ X[C, H*W]: its seeds are micro-kernels whose
    columns are the fused image axis, the epilogue computed per column block, and the
    library matches numpy with and without the packed weight."""
    from tvm.s_tir.schedule import Schedule
    from tvm.tirx import ForKind

    op, spec, target, mod, context = _packed_context(operator, params)
    sch, block = _block(mod)
    assert matmul_axes(sch, block, 512, 28) is None  # as written, a convolution
    seeds = micro_kernel_seeds(context)
    assert len(seeds) >= 2
    for trace in seeds:
        as_json = plain_json(trace.as_json(remove_postproc=False))
        check_trace(json.loads(json.dumps(as_json)))
        kinds = {inst[0] for inst in as_json[0]}
        assert "TransformBlockLayout" in kinds
    scheduled = _scheduled(mod, seeds[0])
    sch = Schedule(scheduled)
    conv = sch.get_sblock("conv2d_nchw_update")  # the reduction, its init decomposed
    columns = params["H"] * params["W"]
    assert [int(iv.dom.extent) for iv in sch.get(conv).iter_vars][-2:] == [columns, params["C"]]
    for epilogue in elementwise_consumers(sch, conv):
        kinds = [sch.get(loop).kind for loop in sch.get_loops(epilogue)]
        assert kinds[0] == ForKind.PARALLEL and kinds[-1] == ForKind.VECTORIZED
    split = split_packed(scheduled)
    _library_matches_numpy(op, spec, target, split, params, tmp_path, seed=5)


def test_only_stride_one_pointwise_convolutions_are_presented_as_matmuls() -> None:
    """1x1 at stride 1 reads its input at the output's own positions: the image axis fuses
    into contiguous columns. A 3x3, a strided 1x1 or a depthwise 1x1 does not."""
    base = {"layout": "NCHW", "N": 1, "C": 8, "H": 6, "W": 8, "K": 16, "R": 1, "S": 1}
    cases = [
        ("conv2d", base, PointwiseConv(spatial=4, units=2, width=8)),
        ("conv2d", {**base, "R": 3, "S": 3, "padding": 1}, None),
        ("conv2d", {**base, "stride": 2}, None),
        ("conv2d", {**base, "K": 8, "groups": 8}, None),
        (
            "depthwise_conv2d",
            {"layout": "NCHW", "N": 1, "C": 8, "H": 6, "W": 8, "R": 1, "S": 1},
            None,
        ),
    ]
    for operator, params, expected in cases:
        _, _, _, mod, _ = _packed_context(operator, params)
        sch, block = _block(mod)
        assert pointwise_conv(sch, block) == expected, (operator, params)
