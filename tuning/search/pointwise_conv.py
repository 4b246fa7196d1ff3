"""Pointwise (1x1, stride 1) convolutions presented to the micro-kernel as the matmuls they are.

An NCHW 1x1 convolution ``Y[n, f, y, x] += X[n, c, y, x] * W[f, c, 0, 0]`` is ``W[F, C] @
X[C, H*W]`` per image: the output channel is the matmul's row, the image position its column
(contiguous in ``X`` and ``Y``), the input channel its reduction. Written as a convolution
(spatial ``n, f, y, x``, reductions ``c, 1, 1``) `tuning.search.micro_kernels.matmul_axes`
does not recognise it, and the channel-vector tiling it gets instead runs MobileNet-V2's short
reductions (24 -> 144 channels at 56x56) at 12-48% of their roofline. Measured on the Zen 5
development VM (2 cores, 530 GFLOPS), 24 -> 144 at 56x56 with bias and ReLU6: the micro-kernel
over the fused image axis 91 us, the published channel-vector schedule 281 us.

`as_matmul` rewrites the block in place, with schedule instructions the trace records (and the
trace gate allows): ``TransformBlockLayout`` fuses ``y, x`` into one column axis and drops the
unit reductions; the intermediate buffers of the convolution and of its elementwise epilogue
are re-laid out ``[n, f, y*W + x]`` (``TransformLayout``) and the epilogue's blocks fused alike,
so that a block of columns is one contiguous range of every buffer the epilogue reads and the
micro-kernel can compute the epilogue per column block. Inputs and outputs keep their layout:
their indices ``(v // W, v % W)`` flatten back to ``v``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuning.ir import param_buffer, uses


@dataclass(frozen=True)
class PointwiseConv:
    """A block `as_matmul` rewrites: ``spatial`` leading iter vars (batch..., channel, y, x),
    then one reduction over input channels and ``units`` reductions of extent 1."""

    spatial: int
    units: int
    width: int  # extent of x: the column axis is y * width + x


def pointwise_conv(sch: Any, block: Any) -> PointwiseConv | None:
    """``block`` as a `PointwiseConv`, or None: a reduction block whose iter vars are spatial
    ``[batch..., f, y, x]`` then reductions ``[c, 1...]`` (the rest of extent one), that writes
    ``[..., f, y, x]`` and reads an input indexed by ``c, y, x`` (stride 1: ``y`` and ``x``
    plus unit reductions) and a weight indexed by ``f, c``."""
    import tvm

    stmt = sch.get(block)
    ivs = list(stmt.iter_vars)
    kinds = [int(iv.iter_type) for iv in ivs]
    spatial = kinds.index(2) if 2 in kinds else len(kinds)
    if spatial < 3 or spatial == len(ivs) or any(k != 2 for k in kinds[spatial:]):
        return None
    if stmt.init is None or len(stmt.writes) != 1:
        return None
    f, y, x = (iv.var for iv in ivs[spatial - 3 : spatial])
    c, *units = ivs[spatial:]
    if any(int(u.dom.extent) != 1 for u in units):
        return None
    out = stmt.writes[0]
    if len(out.region) < 3 or not all(
        r.min.same_as(v) for r, v in zip(out.region[-3:], (f, y, x), strict=True)
    ):
        return None
    analyzer = tvm.sym.Analyzer()
    for unit in units:
        analyzer.bind(unit.var, unit.dom.min)

    def indexed_by(region: Any, var: Any) -> bool:
        return any(uses(rng.min, var) for rng in region.region)

    reads = [r for r in stmt.reads if not r.source.same_as(out.source)]
    data = [
        r
        for r in reads
        if len(r.region) >= 3
        and all(
            analyzer.simplify(rng.min).same_as(v)
            for rng, v in zip(r.region[-3:], (c.var, y, x), strict=True)
        )
        and not indexed_by(r, f)
    ]
    weight = [r for r in reads if indexed_by(r, f) and not (indexed_by(r, y) or indexed_by(r, x))]
    if len(reads) != 2 or len(data) != 1 or len(weight) != 1:
        return None
    return PointwiseConv(spatial, len(units), int(ivs[spatial - 1].dom.extent))


def as_matmul(sch: Any, block: Any, conv: PointwiseConv, epilogue: list[Any]) -> None:
    """Rewrite ``block`` of ``sch`` and its ``epilogue`` (the chain of elementwise blocks after
    it, in order; module docstring) so that ``block`` iterates ``[batch..., f, y * width + x,
    c]``. Raises when a block of the epilogue does not read its producer's output element for
    element (the caller then leaves the convolution as it is)."""
    from tvm.tirx import IndexMap

    width, spatial = conv.width, conv.spatial
    func = sch.mod["main"]
    params = [param_buffer(func, p) for p in func.params]
    index = str(sch.get(block).iter_vars[0].dom.extent.ty)  # the indices' integer type
    fused_buffer = IndexMap.from_func(
        lambda *i: [*i[:-2], i[-2] * width + i[-1]],
        ndim=len(sch.get(block).writes[0].region),
        index_dtype=index,
    )

    def relayout_write(target: Any) -> None:
        written = sch.get(target).writes[0].source
        if not any(written.same_as(p) for p in params):
            sch.transform_layout(target, ("write", 0), fused_buffer)

    for producer, consumer in zip([block, *epilogue], epilogue, strict=False):
        _check_elementwise(sch, producer, consumer, spatial)
    relayout_write(block)
    sch.transform_block_layout(
        block,
        IndexMap.from_func(
            lambda *i: [*i[: spatial - 2], i[spatial - 2] * width + i[spatial - 1], i[spatial]],
            ndim=spatial + 1 + conv.units,
            index_dtype=index,
        ),
    )
    for consumer in epilogue:
        relayout_write(consumer)
        sch.transform_block_layout(
            consumer,
            IndexMap.from_func(
                lambda *i: [*i[:-2], i[-2] * width + i[-1]], ndim=spatial, index_dtype=index
            ),
        )


def _check_elementwise(sch: Any, producer: Any, consumer: Any, spatial: int) -> None:
    """Raise unless ``consumer`` iterates ``spatial`` axes and reads what ``producer`` writes
    at exactly its own iteration point (no transpose, no broadcast over it)."""
    written = sch.get(producer).writes[0].source
    stmt = sch.get(consumer)
    ivs = [iv.var for iv in stmt.iter_vars]
    reads = [r for r in stmt.reads if r.source.same_as(written)]
    if len(ivs) != spatial or len(reads) != 1 or len(reads[0].region) != spatial:
        raise ValueError("an epilogue block that does not follow the convolution's output")
    if not all(r.min.same_as(v) for r, v in zip(reads[0].region, ivs, strict=True)):
        raise ValueError("an epilogue block that reads the convolution's output elsewhere")
