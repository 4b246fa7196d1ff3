"""Register micro-kernels: the packed space's matmul tiling, written the way BLAS kernels are.

MetaSchedule's multi-level tiling (``SSRSRS``, innermost tile one vector) holds a register tile
of one vector of outputs times up to 16 rows. Measured on this project's 2-core Xeon (AVX-512,
C FMA loop 213 GFLOPS a core, 417 on both) for BERT's 128x768 @ 768x768 dense: its best register
tiles reach 258-286 GFLOPS; a BLIS-style kernel in the same TIR reaches 336-349 (80-83% of the
C loop's peak): a few rows times two vectors of accumulators (8 x 32 outputs: 16 zmm
registers), the reduction unrolled by four, each thread's block of packed weight columns reused
from L1 for every row block, and the epilogue (bias, GELU, residual) applied to a column
block while it is in cache.

`MicroKernelOr` adds that schedule to the packed space as one more design space of every block
`matmul_axes` recognises (spatial axes ``[batch..., i, j]``, one reduction ``k``, the output's
last axis ``j`` read contiguously or from a layout-free weight), keeping the wrapped rule's
spaces too. Its decisions are ordinary sampling instructions, so the search mutates them:

* ``rows`` (a categorical over divisors of ``i``) and ``vectors`` (1, 2 or 4 vectors of ``j``):
  the register block, ``rows x vectors`` accumulators;
* ``k`` in three (``SamplePerfectTile``): the cache block, its inner part, and the unrolled
  innermost part (at most `UNROLL_MAX`).

Loop order: ``[batch, j blocks]`` (parallel) / ``k blocks`` / ``i blocks`` / ``k`` / unrolled
``k`` / unrolled rows / unrolled vectors / vector lanes. `RewriteLayout` packs the weight in that
order (``[j block, k, lanes...]``, contiguous), as it does for the rest of the packed space;
elementwise consumers are computed per column block (``reverse_compute_at`` under the parallel
loop), their innermost loop vectorised.

A stride-1 1x1 NCHW convolution is rewritten into the matmul it is first
(`tuning.search.pointwise_conv`), so it gets the micro-kernel too.

`tuning.search.tile_seeds.micro_kernel_seeds` writes the largest register blocks with a
cache-sized ``k`` block into the first batch (`tuning.search.loop.first_batch`), before the
multi-level tiling's seeds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.schedule_rule import PyScheduleRule

from tuning.ir import layout_free_buffers, uses
from tuning.search.pointwise_conv import as_matmul, pointwise_conv

log = logging.getLogger("tunehub.micro_kernels")

UNROLL_MAX = 4  # innermost reduction steps unrolled
# Vectors of j per register row. MetaSchedule's vectorize postprocessor fuses them with the
# lanes into one vector loop, and LLVM splits a vector of 2 or 4 registers well but one of 3
# into shuffles (measured: 8 x 48 outputs at 27 GFLOPS, 8 x 32 at 336).
VECTORS = (1, 2, 4)
CACHE_FLOATS = 6 * 1024  # a k block of packed weights in L1: vectors x lanes x kc <= this


@dataclass(frozen=True)
class MatmulAxes:
    """A block `MicroKernelOr` tiles: its loop extents and its register block candidates."""

    batch: int  # spatial loops before i
    rows: tuple[int, ...]  # candidate row counts (divisors of i)
    vectors: tuple[int, ...]  # candidate vectors of j per row
    lanes: int
    k_extent: int


def register_budget(tile_limit: int) -> int:
    """Accumulator registers a micro-kernel may hold, for a target whose multi-level tiling
    caps its register tile at ``tile_limit`` (16: 32 vector registers, AVX-512 and AArch64;
    else 16 registers): the file less room for the weight vectors and the broadcast row."""
    return 28 if tile_limit >= 16 else 12


def matmul_axes(sch: Any, block: Any, vector_bits: int, budget: int) -> MatmulAxes | None:
    """How `micro_kernel` would tile ``block``, or None when it is not a matmul it handles:
    loops that are exactly the block's iter vars, spatial ``[batch..., i, j]`` then one
    reduction ``k``; output ``[..., i, j]``; two reads, ``A`` indexed by ``i`` and ``k`` but not
    ``j``, ``B`` by ``k`` and ``j`` but not ``i``, with ``j`` B's last index unless B is a
    layout-free weight (then it is packed); ``j`` a whole number of vectors."""
    import tvm

    stmt = sch.get(block)
    ivs = list(stmt.iter_vars)
    loops = sch.get_loops(block)
    if len(ivs) < 3 or len(loops) != len(ivs) or stmt.init is None or len(stmt.writes) != 1:
        return None
    if [iv.iter_type for iv in ivs[:-1]] != [0] * (len(ivs) - 1) or ivs[-1].iter_type != 2:
        return None
    try:
        extents = [int(sch.get(loop).extent) for loop in loops]
    except TypeError:
        return None
    if [int(iv.dom.extent) for iv in ivs] != extents:
        return None
    i, j, k = ivs[-3], ivs[-2], ivs[-1]
    out = stmt.writes[0]
    columns = column_dims(out, j.var)
    if not columns or len(out.region) <= columns:
        return None
    if not out.region[-1 - columns].min.same_as(i.var):
        return None
    a_reads = [r for r in stmt.reads if not r.source.same_as(out.source)]
    if len(a_reads) != 2:
        return None

    def indexed_by(region: Any, var: Any) -> bool:
        return any(uses(rng.min, var) for rng in region)

    lhs = [r for r in a_reads if indexed_by(r.region, i.var) and not indexed_by(r.region, j.var)]
    rhs = [r for r in a_reads if indexed_by(r.region, j.var) and not indexed_by(r.region, i.var)]
    if len(lhs) != 1 or len(rhs) != 1 or not all(indexed_by(r.region, k.var) for r in a_reads):
        return None
    func = sch.mod["main"]
    weight = any(buffer.same_as(rhs[0].source) for buffer in layout_free_buffers(func))
    if not weight and not column_dims(rhs[0], j.var):
        return None  # B read across its rows: every vector would be a gather
    lanes = max(1, vector_bits // tvm.DataType(str(out.source.dtype)).bits)
    j_extent, i_extent = int(j.dom.extent), int(i.dom.extent)
    if lanes == 1 or j_extent % lanes:
        return None
    vectors = tuple(v for v in VECTORS if (j_extent // lanes) % v == 0)
    most_rows = budget // min(2, max(vectors))  # combinations over budget are left to the search
    rows = tuple(d for d in range(2, most_rows + 1) if i_extent % d == 0)
    if not rows:
        return None
    return MatmulAxes(len(ivs) - 3, rows[-3:], vectors, lanes, int(k.dom.extent))


def column_dims(region: Any, j: Any) -> int:
    """How many trailing dimensions of the buffer ``region`` the column axis ``j`` runs along
    contiguously: 1 when the last index is ``j``, 2 when the last two are ``(j // W, j % W)``
    for the buffer's last extent ``W`` (a pointwise convolution's fused image axis,
    `tuning.search.pointwise_conv`), else 0."""
    import tvm

    mins = [rng.min for rng in region.region]
    if mins and mins[-1].same_as(j):
        return 1
    if len(mins) < 2:
        return 0
    flat = tvm.sym.Analyzer().simplify(mins[-2] * region.source.shape[-1] + mins[-1])
    return 2 if flat.same_as(j) else 0


def elementwise_consumers(sch: Any, block: Any) -> list[Any]:
    """The chain of single-consumer blocks after ``block`` (its epilogue), in order."""
    chain: list[Any] = []
    current = block
    while True:
        consumers = list(sch.get_consumers(current))
        if len(consumers) != 1:
            return chain
        stmt = sch.get(consumers[0])
        if any(iv.iter_type != 0 for iv in stmt.iter_vars):
            return chain
        chain.append(consumers[0])
        current = consumers[0]


def micro_kernel(sch: Any, block: Any, axes: MatmulAxes) -> None:
    """Tile ``block`` of ``sch`` into the micro-kernel (module docstring), in place."""
    *batch, i, j, k = sch.get_loops(block)
    rows = sch.sample_categorical(list(axes.rows), [1.0 / len(axes.rows)] * len(axes.rows))
    vecs = sch.sample_categorical(list(axes.vectors), [1.0 / len(axes.vectors)] * len(axes.vectors))
    io, ii = sch.split(i, [None, rows])
    jq, jl = sch.split(j, [None, axes.lanes])
    jo, jv = sch.split(jq, [None, vecs])
    ko, ki, ku = sch.split(k, sch.sample_perfect_tile(k, n=3, max_innermost_factor=UNROLL_MAX))
    sch.reorder(*batch, jo, ko, io, ki, ku, ii, jv, jl)
    outer = sch.fuse(*batch, jo) if batch else jo
    sch.parallel(outer)
    sch.unroll(ku)
    sch.unroll(ii)
    sch.unroll(jv)
    sch.vectorize(jl)
    for consumer in elementwise_consumers(sch, block):
        sch.reverse_compute_at(consumer, outer)
        _, lanes = sch.split(sch.get_loops(consumer)[-1], [None, axes.lanes])
        sch.vectorize(lanes)


def inner_and_tiled(
    inner: Any, sch: Any, block: Any, tiled: Any, tile: Callable[[Any, Any, Any], None], how: Any
) -> list[Any]:
    """``inner``'s schedules of ``block``, then ``tiled`` (a copy of ``sch``) once
    ``tile(tiled, block, how)`` scheduled it; ``inner``'s alone when the tiling refuses it."""
    return [*inner.apply(sch, block), *tiled_space(tiled, block, tile, how)]


def tiled_space(
    tiled: Any, block: Any, tile: Callable[[Any, Any, Any], None], how: Any
) -> list[Any]:
    """``[tiled]`` once ``tile(tiled, block, how)`` scheduled it in place, or ``[]`` when the
    tiling refuses the block (the other spaces stay)."""
    try:
        tile(tiled, block, how)
    except Exception:  # noqa: BLE001 - a block the tiling refuses keeps the other spaces
        log.debug("%s refused the block", tile.__name__, exc_info=True)
        return []
    return [tiled]


@derived_object
class MicroKernelOr(PyScheduleRule):
    """``inner``'s schedules of a block, plus the micro-kernel's where `matmul_axes` applies."""

    def __init__(self, inner: Any, vector_bits: int, budget: int) -> None:
        super().__init__()
        self.inner = inner
        self.vector_bits = vector_bits
        self.budget = budget

    def _initialize_with_tune_context(self, context: Any) -> None:
        self.inner._initialize_with_tune_context(context)  # noqa: SLF001 - delegating

    def apply(self, sch: Any, block: Any) -> list[Any]:
        """The wrapped rule's schedules of ``block``, then the micro-kernel's (when it fits)."""
        axes = matmul_axes(sch, block, self.vector_bits, self.budget)
        found = (sch.copy(), axes) if axes is not None else self._as_matmul(sch, block)
        if found is None:
            return list(self.inner.apply(sch, block))
        tiled, axes = found
        return inner_and_tiled(self.inner, sch, block, tiled, micro_kernel, axes)

    def _as_matmul(self, sch: Any, block: Any) -> tuple[Any, MatmulAxes] | None:
        """A copy of ``sch`` whose pointwise convolution ``block`` is rewritten as the matmul it
        is (`tuning.search.pointwise_conv`), and its axes; None (``sch`` untouched, nothing
        copied) for any other block, or one whose columns are not whole vectors."""
        conv = pointwise_conv(sch, block)
        if conv is None:
            return None
        rewritten = sch.copy()
        try:
            as_matmul(rewritten, block, conv, elementwise_consumers(rewritten, block))
        except Exception:  # noqa: BLE001 - an epilogue that cannot follow: no micro-kernel
            log.debug("pointwise convolution kept as it is", exc_info=True)
            return None
        axes = matmul_axes(rewritten, block, self.vector_bits, self.budget)
        return None if axes is None else (rewritten, axes)

    def clone(self) -> MicroKernelOr:
        """A copy with its own inner rule."""
        return MicroKernelOr(self.inner.clone(), self.vector_bits, self.budget)
