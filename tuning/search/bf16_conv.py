"""bf16 NHWC convolutions on the ``vdpbf16ps`` micro-kernel, as sums of shifted matmuls.

An NHWC convolution ``Y[n, y, x, f] += P[n, y*s + r*d, x*s + q*d, c] * W[r, q, c, f]`` (``P``
the padded input, ``W`` HWIO) is, for one output row ``y`` and one window tap ``(r, q)``, the
matmul of that row's pixels (``x``: the matmul's rows, each with its channels ``c`` together)
with the tap's weight ``W[r, q]`` (``[c, f]``): the kernel `tuning.search.bf16_dot` runs on
dense layers, with the taps and the channel blocks as its k blocks. ``vdpbf16ps`` broadcasts
one pixel's pair of channels ``P[..., c:c+2]`` (any stride, any dilation) against 16 output
channels' pairs of ``W``, which must lie together: the weight is packed once at load into
``[f / 16, r, q, c / 2, 16, 2]``, as a dense layer's is.

`conv_axes` recognises such a block (the catalog's NHWC ``conv2d``, a bf16 model's
convolutions once they are NHWC: `tuning.models.bf16_layout`); `bf16_conv_tiles` schedules it:
loops ``[n, y, f blocks]`` (parallelised by the packed space's postprocessor) / taps and
channel blocks / ``x`` blocks / channel pairs / unrolled register block of ``rows`` pixels x
``vectors`` of 16 channels / `DOT_16x2`, the epilogue (bias, ReLU, residual, the bf16 cast of
the next layer's input) per output row and block of channels while it is in cache. ``rows``,
``vectors`` and the channel block are sampled, so the search mutates them, and are the three
categoricals `tile_seeds.bf16_seeds` seeds as it seeds a dense layer's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuning.hardware.bf16 import LANES, PAIR, register_bf16_intrinsics
from tuning.ir import layout_free_buffers, param_buffer, uses
from tuning.search.bf16_dot import K_PAIRS, PREPROC, register_block
from tuning.search.micro_kernels import VECTORS, elementwise_consumers

SPATIAL, REDUCE = 0, 2  # IterVar kinds


@dataclass(frozen=True)
class ConvAxes:
    """A block `bf16_conv_tiles` tiles: the index of its weight among its reads and the
    candidates of its three sampled decisions."""

    weight_read: int
    rows: tuple[int, ...]  # pixels of an output row per register block (divisors of its width)
    vectors: tuple[int, ...]  # 16-channel vectors of output per register block
    k_pairs: tuple[int, ...]  # pairs of input channels per k block


def conv_axes(sch: Any, block: Any, budget: int) -> ConvAxes | None:
    """How `bf16_conv_tiles` would tile ``block``, or None: loops that are exactly its iter
    vars, spatial ``[n, y, x, f]`` then reductions ``[r, q, c]``; an fp32 output ``[n, y, x, f]``
    with ``f`` whole 16-lane vectors; two bf16 reads, the input (a parameter: a padded copy in
    the function is an fp32 buffer once TVM legalises bf16) indexed ``[n, .. y .. r, .. x .. q,
    c]`` and a layout-free weight ``[r, q, c, f]``; an even channel count ``c``.
    ``budget``: accumulator registers a register block may hold."""
    stmt = sch.get(block)
    ivs = list(stmt.iter_vars)
    loops = sch.get_loops(block)
    kinds = [int(iv.iter_type) for iv in ivs]
    if kinds != [SPATIAL] * 4 + [REDUCE] * 3 or len(loops) != len(ivs) or stmt.init is None:
        return None
    try:
        extents = [int(sch.get(loop).extent) for loop in loops]
    except TypeError:
        return None
    if [int(iv.dom.extent) for iv in ivs] != extents or len(stmt.writes) != 1:
        return None
    n, y, x, f, r, q, c = (iv.var for iv in ivs)
    out = stmt.writes[0]
    if not _indexed(out, (n, y, x, f)) or str(out.source.dtype) != "float32":
        return None
    reads = [read for read in stmt.reads if not read.source.same_as(out.source)]
    if len(reads) != 2 or any(str(read.source.dtype) != "bfloat16" for read in reads):
        return None
    func = sch.mod["main"]
    weights = layout_free_buffers(func)
    weight = [i for i, read in enumerate(stmt.reads) if _indexed(read, (r, q, c, f))]
    if len(weight) != 1 or not any(stmt.reads[weight[0]].source.same_as(w) for w in weights):
        return None
    data = next(read for read in reads if not read.source.same_as(stmt.reads[weight[0]].source))
    params = [param_buffer(func, p) for p in func.params]
    if not any(data.source.same_as(b) for b in params):
        return None  # a padded copy: TVM's bf16 legalisation widens such buffers to fp32
    if not _reads_window(data, (n, y, x, c), (r, q), f):
        return None
    width, channels, out_channels = extents[2], extents[6], extents[3]
    if out_channels % LANES or channels % PAIR:
        return None
    vectors = tuple(v for v in VECTORS if (out_channels // LANES) % v == 0)
    most_rows = budget // min(2, max(vectors))  # bigger blocks are left to the search
    rows = tuple(d for d in range(1, most_rows + 1) if width % d == 0)[-3:]
    pairs = tuple(p for p in K_PAIRS if (channels // PAIR) % p == 0) or (channels // PAIR,)
    return ConvAxes(weight[0], rows, vectors, pairs)


def _indexed(region: Any, variables: tuple[Any, ...]) -> bool:
    """Whether ``region`` is the buffer's element ``[variables...]``, one index each."""
    mins = [rng.min for rng in region.region]
    return len(mins) == len(variables) and all(
        m.same_as(v) for m, v in zip(mins, variables, strict=True)
    )


def _reads_window(region: Any, spatial: tuple[Any, ...], taps: tuple[Any, Any], f: Any) -> bool:
    """Whether ``region`` is an NHWC input read through the window: ``[n, (y, r), (x, q), c]``,
    the last index the channel itself (a pair of channels lies together) and ``f`` nowhere."""
    n, y, x, c = spatial
    mins = [rng.min for rng in region.region]
    if len(mins) != 4 or not mins[0].same_as(n) or not mins[3].same_as(c):
        return False
    rows_ok = uses(mins[1], y) and uses(mins[1], taps[0]) and not uses(mins[1], x)
    cols_ok = uses(mins[2], x) and uses(mins[2], taps[1]) and not uses(mins[2], y)
    return rows_ok and cols_ok and not any(uses(m, f) for m in mins)


def pack_conv_weight(sch: Any, block: Any, found: ConvAxes) -> None:
    """Have ``block`` read its weight from a copy in ``[f / 16, r, q, c / 2, 16, 2]`` (a tap's
    16 output channels' pairs of input channels together), made by a block marked to run once
    at load (`PREPROC`)."""
    copy = sch.cache_read(block, found.weight_read, "global")
    sch.transform_layout(
        copy,
        ("write", 0),
        lambda r, q, c, f: (f // LANES, r, q, c // PAIR, f % LANES, c % PAIR),
    )
    sch.annotate(copy, PREPROC, True)


def bf16_conv_tiles(
    sch: Any, block: Any, found: ConvAxes, fixed: tuple[int, int, int] | None = None
) -> None:
    """Schedule ``block`` of ``sch`` (a copy) as the bf16 convolution kernel (module
    docstring), in place. ``fixed``: (rows, vectors, k pairs) chosen by the caller instead of
    sampled (a benchmark's sweep)."""
    register_bf16_intrinsics()
    pack_conv_weight(sch, block, found)
    consumers = elementwise_consumers(sch, block)  # before tensorize replaces the block
    n, y, x, f, r, q, c = sch.get_loops(block)
    rows, vecs, pairs = fixed or (
        sch.sample_categorical(list(choices), [1.0 / len(choices)] * len(choices))
        for choices in (found.rows, found.vectors, found.k_pairs)
    )
    xo, xi = sch.split(x, [None, rows])
    fq, fl = sch.split(f, [None, LANES])
    fo, fv = sch.split(fq, [None, vecs])
    co, c2, cp = sch.split(c, [None, pairs, PAIR])
    sch.reorder(n, y, fo, r, q, co, xo, c2, xi, fv, fl, cp)
    register_block(sch, consumers, fo, (xi, fv, fl))
