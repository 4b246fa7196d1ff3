"""Vectors over the output channel: the packed space's tiling for NCHW-like contractions.

MetaSchedule's multi-level tiling vectorises a block's innermost spatial loop. For an NCHW
convolution that is the output's W (56 in ResNet's 3×3 layers: three and a half AVX-512
vectors, and every vector reads its 16 weights as one broadcast each). oneDNN instead keeps 16
output channels in each vector register: one weight vector load feeds as many FMAs as there are
outputs in the register tile, and each activation is one broadcast.

`WeightAxisInnermost` gives the packed space that tiling, as schedule instructions (so they are
part of every trace and replay on the user's module as it is):

1. ``transform_block_layout`` splits the block's weight-indexed spatial axis ``k`` (the output
   channel; the only spatial axis the layout-free weight is read with) into ``k // lanes`` in
   its place and ``k % lanes`` as the innermost spatial axis;
2. ``cache_write`` + ``transform_layout`` make the block accumulate into a channel-blocked
   cache, ``[..., k // lanes, ..., k % lanes]``, so the accumulators are whole contiguous vectors
   (and the multi-level tiling, which vectorises the output's last dimension, picks ``k % lanes``);
3. the target's multi-level tiling (innermost tile one vector wide) tiles the block;
4. the cache is written back to the user's layout under the outer tile (``reverse_compute_at``
   after the first or the second spatial tile level: two design spaces).

The weight is packed by `RewriteLayout` as in the rest of the packed space. Blocks where the
axis is already innermost (matmul, NHWC convolution), whose other operands depend on it (group
and depthwise convolutions), or whose extent is not a whole number of vectors, get the target's
tiling unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.schedule_rule import PyScheduleRule

from tuning.ir import layout_free_buffers, uses


@dataclass(frozen=True)
class ChannelSplit:
    """Where a block's weight-indexed axis is and how wide a vector of its output is."""

    axis: int  # position of the axis among the block's iter vars
    write_dim: int  # dimension of the block's output buffer that the axis indexes
    lanes: int  # output elements per vector register


def channel_split(func: Any, block: Any, vector_bits: int) -> ChannelSplit | None:
    """The split `WeightAxisInnermost` makes of ``block`` in ``func``, or None when it keeps the
    block as it is (see the module docstring for when)."""
    import tvm

    weights = {buffer.same_as for buffer in layout_free_buffers(func)}
    if not weights or len(block.writes) != 1 or block.init is None:
        return None
    spatial = [iv for iv in block.iter_vars if iv.iter_type == 0]
    if not spatial or any(iv.iter_type != 0 for iv in block.iter_vars[: len(spatial)]):
        return None  # not "spatial axes, then reductions"
    weight_reads = [r for r in block.reads if any(same(r.source) for same in weights)]
    other_reads = [r for r in block.reads if r not in weight_reads]
    if len(weight_reads) != 1:
        return None
    indexing = [
        iv for iv in spatial if any(uses(rng.min, iv.var) for rng in weight_reads[0].region)
    ]
    if len(indexing) != 1 or indexing[0].same_as(spatial[-1]):
        return None
    axis_var = indexing[0]
    if any(uses(rng.min, axis_var.var) for r in other_reads for rng in r.region):
        return None
    write = block.writes[0]
    dims = [d for d, rng in enumerate(write.region) if uses(rng.min, axis_var.var)]
    if len(dims) != 1 or not write.region[dims[0]].min.same_as(axis_var.var):
        return None
    lanes = max(1, vector_bits // tvm.DataType(str(write.source.dtype)).bits)
    extent = int(axis_var.dom.extent)
    if lanes == 1 or extent % lanes:
        return None
    return ChannelSplit(list(block.iter_vars).index(axis_var), dims[0], lanes)


def _block_map(n_vars: int, split: ChannelSplit, n_spatial: int) -> Any:
    """(v0, ..., vk, ..., vn) -> (..., vk // lanes, ..., [last spatial], vk % lanes, reductions)."""
    from tvm.tirx import IndexMap

    def mapping(*v: Any) -> list[Any]:
        out = list(v)
        out[split.axis] = v[split.axis] // split.lanes
        out.insert(n_spatial, v[split.axis] % split.lanes)
        return out

    return IndexMap.from_func(mapping, ndim=n_vars, index_dtype="int32")


def _buffer_map(ndim: int, split: ChannelSplit) -> Any:
    """(d0, ..., dk, ..., dn) -> (..., dk // lanes, ..., dn, dk % lanes)."""
    from tvm.tirx import IndexMap

    def mapping(*d: Any) -> list[Any]:
        out = list(d)
        out[split.write_dim] = d[split.write_dim] // split.lanes
        return [*out, d[split.write_dim] % split.lanes]

    return IndexMap.from_func(mapping, ndim=ndim, index_dtype="int32")


@derived_object
class WeightAxisInnermost(PyScheduleRule):
    """Multi-level tiling with the output channel in the vector lanes (module docstring):
    ``split_rule`` (innermost tile one vector wide) tiles the blocks whose channel axis is
    split, ``other_rule`` every other block."""

    write_back_levels = (1, 2)  # after the first or the second spatial tile level (SSRSRS)

    def __init__(self, split_rule: Any, other_rule: Any, vector_bits: int) -> None:
        super().__init__()
        self.split_rule = split_rule
        self.other_rule = other_rule
        self.vector_bits = vector_bits

    def _initialize_with_tune_context(self, context: Any) -> None:
        for rule in (self.split_rule, self.other_rule):
            rule._initialize_with_tune_context(context)  # noqa: SLF001 - delegating

    def apply(self, sch: Any, block: Any) -> list[Any]:
        """The tiled schedules of ``block``, with the channel axis split when it applies."""
        stmt = sch.get(block)
        split = channel_split(sch.mod["main"], stmt, self.vector_bits)
        if split is None:
            return list(self.other_rule.apply(sch, block))
        n_spatial = sum(1 for iv in stmt.iter_vars if iv.iter_type == 0) + 1
        ndim = len(stmt.writes[0].region)
        sch.transform_block_layout(block, _block_map(len(stmt.iter_vars), split, n_spatial - 1))
        # The accumulators live in a channel-blocked cache, so the multi-level tiling (which
        # vectorises the axis in the output's last dimension) puts k % lanes in the vectors.
        write_back = sch.cache_write(block, 0, "global")
        sch.transform_layout(block, ("write", 0), _buffer_map(ndim, split))
        results = []
        for tiled in self.split_rule.apply(sch, block):
            _lanes_innermost(tiled, block)
            loops = tiled.get_loops(block)
            for level in self.write_back_levels:
                # The cache is written back to the user's layout under the outer tile.
                placed = tiled.copy()
                placed.reverse_compute_at(write_back, loops[level * n_spatial - 1])
                results.append(placed)
        return results

    def clone(self) -> WeightAxisInnermost:
        """A copy with its own inner rules."""
        return WeightAxisInnermost(
            self.split_rule.clone(), self.other_rule.clone(), self.vector_bits
        )


def _lanes_innermost(sch: Any, block: Any) -> None:
    """Move loops of one that the tiling left inside the vector loop out of it. A 1x1 kernel's
    ``ry`` and ``rx`` become spatial iterators of extent 1 after the lanes, and the vectoriser,
    which looks at the innermost loop, then finds nothing to vectorise (measured: ResNet-18's
    1x1 stride-2 convolutions at 11 GFLOPS)."""
    loops = list(sch.get_loops(block))
    units: list[Any] = []
    while len(loops) > 1 and _loop_extent(sch, loops[-1]) == 1:
        units.insert(0, loops.pop())
    if units and (_loop_extent(sch, loops[-1]) or 0) > 1:
        sch.reorder(*units, loops[-1])


def _loop_extent(sch: Any, loop: Any) -> int | None:
    value = getattr(sch.get(loop).extent, "value", None)
    return int(value) if value is not None else None
