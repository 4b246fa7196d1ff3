# TVMScript's buffer annotations are calls, not types: mypy cannot read its kernels.
# mypy: disable-error-code="valid-type,untyped-decorator"
"""The AVX512-BF16 micro-kernel: a bf16 matmul on ``vdpbf16ps``, bf16 products summed in fp32.

``vdpbf16ps`` adds, in each of 16 fp32 lanes, the products of a pair of bf16 from each operand:
for a matmul ``C[i, j] += A[i, k] * B[k, j]`` that is one row's pair ``A[i, k:k+2]`` broadcast
against 16 columns' pairs of B, which must lie together: B packed as ``[j / 16, k / 2, 16, 2]``
(the VNNI layout). `tuning.hardware.bf16.DOT_16x2` is the tensor intrinsic for it (TVM's x86
file has only the u8·i8 VNNI ones); its body calls `tuning.hardware.bf16.DPBF16PS`, always
inlined.

`tuning.search.bf16_rule.Bf16MicroKernelOr` adds it to the packed space (on targets with a bf16
unit) for every catalog ``matmul``/``dense`` block on bf16 operands with a layout-free weight
(`bf16_axes`), beside the wrapped rule's spaces (which widen bf16 to fp32 as they load it) and,
on targets with AMX, the AMX tile kernel's (`tuning.search.amx_tiles`): the search measures them
all.
`bf16_tiles` copies the weight into the packed layout in a block marked as MetaSchedule's
layout-rewrite preproc, so it runs once at load (the artifact's ``pack_<i>``,
`tuning.publish.packing`), and tiles the matmul the way `tuning.search.micro_kernels` tiles
fp32: a register block of ``rows`` x ``vectors`` accumulators over a k block of the packed
weight, the column blocks in parallel, the epilogue per column block; the three are sampled.
Measured (`bench/bf16_dense.py`) against the bf16 peak (`tuning.hardware.peak_bf16`).

Such a kernel has no drop-in ``main`` (``split_packed(..., drop_in=False)``): there the weight's
copy is a buffer of the kernel's own, which TVM's bf16 legalisation widens to fp32, while the
intrinsic reads bf16 bits. Its artifact has the per-call kernel and the pack function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuning.hardware.bf16 import LANES, PAIR, DOT_16x2, register_bf16_intrinsics
from tuning.ir import layout_free_buffers
from tuning.search.micro_kernels import (
    MatmulAxes,
    elementwise_consumers,
    matmul_axes,
)

PREPROC = "meta_schedule.layout_rewrite_preproc"
AUTO_TENSORIZE = "meta_schedule.auto_tensorize"
K_PAIRS = (16, 32, 64, 128)  # k blocks the rule samples, in pairs (32 to 256 bf16)


@dataclass(frozen=True)
class Bf16Axes:
    """A block `Bf16MicroKernelOr` tiles: `matmul_axes`'s candidates, which read is the weight
    and whether the weight is indexed ``[k, j]`` (matmul) or ``[j, k]`` (dense)."""

    axes: MatmulAxes
    weight_read: int
    k_first: bool
    k_pairs: tuple[int, ...]


def bf16_axes(sch: Any, block: Any, budget: int) -> Bf16Axes | None:
    """How `bf16_tiles` would tile ``block``, or None: a `matmul_axes` block whose batch axes
    (if any) are of extent 1 (a model's ``[1, seq, hidden]`` activations), whose two operands
    are bfloat16, the weight a layout-free parameter read ``[k, j]``
    or ``[j, k]``, an fp32 output of 16-column vectors and an even ``k``."""
    axes = matmul_axes(sch, block, 512, budget)
    if axes is None or axes.lanes != LANES or axes.k_extent % PAIR:
        return None
    if any(int(sch.get(loop).extent) != 1 for loop in sch.get_loops(block)[: axes.batch]):
        return None
    stmt = sch.get(block)
    out = stmt.writes[0].source
    reads = [r for r in stmt.reads if not r.source.same_as(out)]
    if str(out.dtype) != "float32" or any(str(r.source.dtype) != "bfloat16" for r in reads):
        return None
    func = sch.mod["main"]
    weights = layout_free_buffers(func)
    j, k = stmt.iter_vars[-2].var, stmt.iter_vars[-1].var
    for index, read in enumerate(stmt.reads):
        mins = [rng.min for rng in read.region]
        if not any(read.source.same_as(w) for w in weights) or len(mins) != 2:
            continue
        if mins[0].same_as(k) and mins[1].same_as(j):
            k_first = True
        elif mins[0].same_as(j) and mins[1].same_as(k):
            k_first = False
        else:
            return None
        pairs = tuple(p for p in K_PAIRS if (axes.k_extent // PAIR) % p == 0)
        return Bf16Axes(axes, index, k_first, pairs or (axes.k_extent // PAIR,))
    return None


def pack_weight(sch: Any, block: Any, found: Bf16Axes) -> None:
    """Have ``block`` read its weight from a copy in ``[j / 16, k / 2, 16, 2]`` (16 columns'
    pairs of k together, the VNNI layout ``vdpbf16ps`` and AMX B tiles read), made by a block
    marked to run once at load (`PREPROC`)."""
    copy = sch.cache_read(block, found.weight_read, "global")

    def packed(kk: Any, jj: Any) -> tuple[Any, ...]:
        return (jj // LANES, kk // PAIR, jj % LANES, kk % PAIR)

    sch.transform_layout(
        copy, ("write", 0), packed if found.k_first else (lambda jj, kk: packed(kk, jj))
    )
    sch.annotate(copy, PREPROC, True)


def bf16_tiles(
    sch: Any, block: Any, found: Bf16Axes, fixed: tuple[int, int, int] | None = None
) -> None:
    """Schedule ``block`` of ``sch`` (a copy) as the bf16 micro-kernel, in place: the weight
    copied into ``[j / 16, k / 2, 16, 2]`` by a block run once at load (`PREPROC`), register
    block, k block and column split sampled (the search mutates them), each (row, 16 columns,
    pair) a `DOT_16x2`, elementwise consumers per column block. ``fixed``: (rows, vectors, k
    pairs) chosen by the caller instead of sampled (`bench/bf16_dense.py`'s sweep)."""
    register_bf16_intrinsics()
    axes = found.axes
    pack_weight(sch, block, found)
    consumers = elementwise_consumers(sch, block)  # before tensorize replaces the block
    *_, i, j, k = sch.get_loops(block)  # batch loops of extent 1 stay outside
    rows, vecs, pairs = fixed or (
        sch.sample_categorical(list(c), [1.0 / len(c)] * len(c))
        for c in (axes.rows, axes.vectors, found.k_pairs)
    )
    io, ii = sch.split(i, [None, rows])
    jq, jl = sch.split(j, [None, LANES])
    jo, jv = sch.split(jq, [None, vecs])
    ko, k2, kp = sch.split(k, [None, pairs, PAIR])
    sch.reorder(jo, ko, io, k2, ii, jv, jl, kp)
    register_block(sch, consumers, jo, (ii, jv, jl))


def register_block(sch: Any, consumers: list[Any], panel: Any, loops: tuple[Any, Any, Any]) -> None:
    """Finish a ``vdpbf16ps`` tiling: ``consumers`` (the epilogue) computed per ``panel`` (the
    column block's loop), their innermost loop in vectors; ``loops`` (rows, vectors, lanes of
    the register block, innermost) made one unrolled block of `DOT_16x2` calls.

    No parallel loop of its own: the packed space's root annotation has MetaSchedule's
    postprocessor parallelise the outer loops (a loop already parallel makes it refuse)."""
    rows, vectors, lanes = loops
    for consumer in consumers:
        sch.reverse_compute_at(consumer, panel)
        _, vector = sch.split(sch.get_loops(consumer)[-1], [None, LANES])
        sch.vectorize(vector)
    # Tensorized by MetaSchedule's RewriteTensorize after RewriteReductionBlock splits the init
    # off (`space_generator` adds it to the packed space's postprocessors).
    sch.annotate(sch.blockize(lanes), AUTO_TENSORIZE, DOT_16x2)
    sch.unroll(vectors)
    sch.unroll(rows)
    # An annotated loop stops MetaSchedule's postprocessor from vectorising the loops above a
    # tensorized block (it would make the 16-lane body 32 or 64 lanes wide).
    sch.annotate(vectors, "pragma_unroll_explicit", 1)
