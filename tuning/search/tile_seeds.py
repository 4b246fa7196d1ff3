"""Register-tile seeds: the packed space's first batch, chosen the way a kernel writer would.

MetaSchedule's evolutionary search starts from random tile sizes. Most of them split the
reduction outside the register tile (the accumulators go to memory and back every few FMAs) or
put a loop between the reduction and the register tile, and a small budget often ends before
the search finds the few schedules that keep every accumulator in a register for the whole
reduction. Measured on a 2-core Zen 4 (AVX-512, 233 GFLOPS peak) on ResNet's NHWC 3×3 layer: a
64-trial search published a 200 GFLOPS kernel (4 accumulators), while the same space holds
schedules at 223-227 GFLOPS (14 accumulators, the whole reduction inside them).

`register_tile_seeds` writes such schedules into each of the packed space's design spaces:

* every reduction loop runs whole inside the register tile (``[1, extent]``);
* nothing sits between the reduction and the register tile (the third spatial level is 1);
* the register tile holds one vector of the vectorised axis (the space fixes that) times a
  block of the two innermost other spatial axes, the largest that fits the target's register
  budget (`tuning.search.spaces.register_tile_limit`), then smaller ones;
* the outer levels take enough iterations for every core (``PARALLEL_PER_CORE`` chunks each),
  the rest stays in the second level, where the tile's write-back is placed;
* a padding stage is inlined where it can be, and the unroll step is 16.

They are only seeds: the job measures a batch of them before the evolutionary search
(`tuning.search.loop.first_batch`, after a warm start's neighbour seeds), the search breeds from the
best, and every schedule is verified as before.
"""

from __future__ import annotations

import itertools
import json
import logging
from dataclasses import dataclass
from typing import Any

from tuning.hardware.amx import PREFIX as AMX_PREFIX
from tuning.hardware.bf16 import DOT_16x2
from tuning.hardware.vectors import vector_bits
from tuning.search.micro_kernels import CACHE_FLOATS, UNROLL_MAX, register_budget
from tuning.search.spaces import reads_bf16, register_tile_limit

log = logging.getLogger("tunehub.tile_seeds")

PARALLEL_PER_CORE = 8  # outer chunks per core: enough to balance, few enough to keep tiles big
UNROLL_STEP = 16  # of MetaSchedule's unroll candidates (0, 16, 64, 512)
INLINE = -2  # SampleComputeLocation's decision for "inline into the consumer"
BLOCKS_PER_SPACE = 4  # register blocks tried in each design space, largest first


@dataclass(frozen=True)
class TileLoop:
    """One ``SamplePerfectTile`` of a design space: which one, its loop's extent, its levels."""

    position: int  # among the trace's sampling instructions
    extent: int
    levels: int  # 4: a spatial loop (SSRSRS); 3: the outer part of the vector axis; 2: reduction


def divisors(n: int) -> list[int]:
    """The divisors of ``n``, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]


def register_blocks(inner: int, outer: int, budget: int, count: int) -> list[tuple[int, int]]:
    """Up to ``count`` register blocks ``(outer_factor, inner_factor)`` over two spatial loops of
    extents ``outer`` and ``inner``: factors that divide them, at most ``budget`` accumulators,
    one block per accumulator count, the most accumulators first, each with the longest inner
    run (whose inputs are contiguous) of its count."""
    best: dict[int, tuple[int, int]] = {}  # accumulators -> the block with the longest run
    for i in divisors(inner):
        for o in divisors(outer):
            size = o * i
            if i <= budget and 1 < size <= budget and (size not in best or i > best[size][1]):
                best[size] = (o, i)
    return [best[size] for size in sorted(best, reverse=True)][:count]


def _split_outer(extents: list[int], parallel: int) -> list[int]:
    """Outer-level factors for loops of ``extents`` (outermost first): whole loops until their
    product reaches ``parallel``, then the smallest divisor that gets there, then 1."""
    factors, product = [], 1
    for extent in extents:
        if product >= parallel:
            factors.append(1)
            continue
        need = -(-parallel // product)
        factor = next((d for d in divisors(extent) if d >= need), extent)
        factors.append(factor)
        product *= factor
    return factors


def block_loops(loops: list[TileLoop]) -> list[TileLoop]:
    """The loops a register block spans: the two innermost non-unit 4-level (spatial) ones."""
    return [loop for loop in loops if loop.levels == 4 and loop.extent > 1][-2:]


def plan_decisions(
    loops: list[TileLoop], block: tuple[int, int], parallel: int
) -> dict[int, list[int]]:
    """Tile decisions (by sampling position) for one register ``block`` over ``loops``: the
    block's factors on the two innermost 4-level loops, the reductions whole inside it, the
    outer level split for ``parallel`` chunks, the rest in the second level."""
    spatial = [loop for loop in loops if loop.levels in (3, 4)]
    inner4 = block_loops(loops)
    register = {loop.position: 1 for loop in spatial}
    if len(inner4) == 2:
        register[inner4[0].position], register[inner4[1].position] = block
    elif len(inner4) == 1:
        register[inner4[0].position] = block[0] * block[1]
    rest = {loop.position: loop.extent // register[loop.position] for loop in spatial}
    outer = _split_outer([rest[loop.position] for loop in spatial], parallel)
    decisions: dict[int, list[int]] = {}
    for loop, first in zip(spatial, outer, strict=True):
        second = rest[loop.position] // first
        if loop.levels == 4:
            decisions[loop.position] = [first, second, 1, register[loop.position]]
        else:
            decisions[loop.position] = [first, second, 1]
    for loop in loops:
        if loop.levels == 2:
            decisions[loop.position] = [1, loop.extent]
    return decisions


def _tile_loops(mod: Any, trace: Any) -> list[TileLoop] | None:
    """The ``SamplePerfectTile`` loops of a design space's trace, or None when it has a tile
    the plan does not know (levels other than 2, 3, 4)."""
    from tvm.s_tir.schedule import Schedule

    sch = Schedule(mod)
    loops: list[TileLoop] = []
    position = -1

    def record(inst: Any, inputs: list[Any], attrs: list[Any], decision: Any) -> Any:
        nonlocal position
        if inst.kind.name.startswith("Sample"):
            position += 1
            if inst.kind.name == "SamplePerfectTile":
                loops.append(TileLoop(position, int(sch.get(inputs[0]).extent), int(attrs[0])))
        return decision

    trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=record)
    return loops if all(loop.levels in (2, 3, 4) for loop in loops) else None


def apply_decisions(mod: Any, trace: Any, tiles: dict[int, Any], postprocs: list[Any]) -> Any:
    """``trace`` replayed on ``mod`` with ``tiles`` (decisions by sampling position), an unroll
    step of `UNROLL_STEP` and padding inlined where it can be, postprocessed; None when it does
    not apply."""
    from tvm.s_tir.schedule import Schedule

    def attempt(inline: bool) -> Any:
        sch = Schedule(mod)
        position = -1

        def decide(inst: Any, _inputs: list[Any], _attrs: list[Any], decision: Any) -> Any:
            nonlocal position
            if not inst.kind.name.startswith("Sample"):
                return decision
            position += 1
            if position in tiles:
                return tiles[position]
            if inst.kind.name == "SampleCategorical":  # the unroll step, in the CPU spaces
                candidates = [int(c) for c in inst.attrs[0]]
                if UNROLL_STEP in candidates:
                    return candidates.index(UNROLL_STEP)
            if inst.kind.name == "SampleComputeLocation" and inline:
                return INLINE
            return decision

        trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=decide)
        sch.enter_postproc()
        return sch.trace if all(p.apply(sch) for p in postprocs) else None

    for inline in (True, False):
        try:
            result = attempt(inline)
        except Exception:  # noqa: BLE001 - a decision the space refuses: try without, or skip
            continue
        if result is not None:
            return result
    return None


def register_tile_seeds(context: Any, cores: int, limit: int = 16) -> list[Any]:
    """Seed traces for an initialised packed-space `TuneContext` (its module, design spaces,
    postprocessors and target's register budget): for each register block (largest first) and
    each design space, the schedule `plan_decisions` makes; at most ``limit``, distinct, in
    that order."""
    mod = context.mod
    postprocs = list(context.space_generator.postprocs)
    register_budget = register_tile_limit(context.target)
    design_spaces = context.generate_design_space()
    seeds = []
    plans = []
    for space in design_spaces:
        loops = _tile_loops(mod, space.trace)
        if not loops:
            continue
        inner4 = block_loops(loops)
        if not inner4:
            continue
        outer_extent = inner4[0].extent if len(inner4) == 2 else 1
        blocks = register_blocks(
            inner4[-1].extent, outer_extent, register_budget, count=BLOCKS_PER_SPACE
        )
        plans.append((space.trace, loops, blocks))
    for rank in range(BLOCKS_PER_SPACE):
        for trace, loops, blocks in plans:
            if rank >= len(blocks):
                continue
            tiles = plan_decisions(loops, blocks[rank], PARALLEL_PER_CORE * cores)
            seeds.append(apply_decisions(mod, trace, tiles, postprocs))
    # Distinct by their decisions, in the order of first occurrence (a dict keeps key order).
    by_key = {json.dumps(s.as_json(remove_postproc=True), default=str): s for s in seeds if s}
    distinct = list(by_key.values())
    log.info("%d register-tile seed(s)", len(distinct))
    return distinct[:limit]


def _seed_blocks(rows: list[int], vectors: list[int], budget: int) -> list[tuple[int, int]]:
    """Register blocks ``(rows, vectors)`` within ``budget`` accumulators, the most first
    (more vectors first among equals: each broadcast feeds more FMAs)."""
    blocks = [(r, v) for r in rows for v in vectors if r * v <= budget]
    return sorted(blocks, key=lambda b: (b[0] * b[1], b[1]), reverse=True)


def k_tiles(extent: int, columns: int) -> list[int]:
    """``[blocks, inner, unrolled]`` for a reduction of ``extent``: the largest block whose
    packed weights (``columns`` x block floats) fit `CACHE_FLOATS`, unrolled by `UNROLL_MAX`
    or the largest divisor of the block below it."""
    fits = [d for d in divisors(extent) if d * columns <= CACHE_FLOATS] or [1]
    block = fits[-1]
    unroll = max(d for d in divisors(block) if d <= UNROLL_MAX)
    return [extent // block, block // unroll, unroll]


def _micro_kernel_positions(trace: Any) -> tuple[int, list[int], list[int], int] | None:
    """Where a design space's micro-kernel decisions are: the position (among sampling
    instructions) of its ``rows`` categorical (``vectors`` and ``k`` follow it), the two
    candidate lists and the reduction extent; None for a space without one."""
    sampling = [inst for inst in trace.insts if inst.kind.name.startswith("Sample")]
    for at in range(len(sampling) - 2):
        first, second, third = sampling[at : at + 3]
        if (
            first.kind.name == "SampleCategorical"
            and second.kind.name == "SampleCategorical"
            and third.kind.name == "SamplePerfectTile"
            and int(third.attrs[0]) == 3
            and int(third.attrs[1]) == UNROLL_MAX
        ):
            decision = trace.decisions.get(third)
            if decision is None:
                return None
            extent = 1
            for factor in decision:
                extent *= int(factor)
            rows = [int(c) for c in first.attrs[0]]
            vectors = [int(c) for c in second.attrs[0]]
            return at, rows, vectors, extent
    return None


def micro_kernel_seeds(context: Any, limit: int = 6) -> list[Any]:
    """Seed traces for an initialised packed-space `TuneContext`: in each design space with a
    micro-kernel, its register blocks (largest first, `_seed_blocks`) with `k_tiles`; at most
    ``limit``."""
    budget = register_budget(register_tile_limit(context.target))
    postprocs = list(context.space_generator.postprocs)
    lanes = vector_bits(context.target) // 32  # fp32 columns: the cache estimate's unit
    seeds = []
    for space in context.generate_design_space():
        found = _micro_kernel_positions(space.trace)
        if found is None:
            continue
        at, rows, vectors, extent = found
        for r, v in _seed_blocks(rows, vectors, budget):
            decisions = {
                at: rows.index(r),
                at + 1: vectors.index(v),
                at + 2: k_tiles(extent, v * lanes),
            }
            trace = apply_decisions(context.mod, space.trace, decisions, postprocs)
            if trace is not None:
                seeds.append(trace)
            if len(seeds) >= limit:
                break
    log.info("%d micro-kernel seed(s)", len(seeds))
    return seeds[:limit]


SEED_ROWS = (4, 8)  # register blocks that led the sweep (bench/bf16_dense.py), best first
SEED_VECTORS = (4, 2)
SEED_PAIRS = (128, 64)  # k blocks of 256 and 128


def bf16_seeds(context: Any, limit: int = 4, tile_limit: int = 3) -> list[Any]:
    """Seed traces for an initialised packed-space `TuneContext`: in a design space of
    `Bf16MicroKernelOr`, the register and k blocks that led `bench/bf16_dense.py`'s sweep (at
    most ``limit``), and in its AMX tile space the first ``tile_limit`` choices of column
    blocks a task, so that the first batch measures the bf16 kernels beside the fp32-style
    seeds (the cost model has nothing to rank them by before)."""
    if not reads_bf16(context.mod):
        return []  # no bf16 operand: no space of it (and no design spaces generated again)
    postprocs = list(context.space_generator.postprocs)
    spaces = list(context.generate_design_space())
    tiles = []
    for space in spaces:
        found = _amx_position(space.trace)
        if found is None:
            continue
        at, choices = found
        for choice in range(min(tile_limit, choices)):
            trace = apply_decisions(context.mod, space.trace, {at: choice}, postprocs)
            if trace is not None:
                tiles.append(trace)
    log.info("%d AMX tile seed(s)", len(tiles))
    return _dot_seeds(context, spaces, postprocs, limit) + tiles


def _amx_position(trace: Any) -> tuple[int, int] | None:
    """Where `tuning.search.amx_tiles`' one decision (column blocks a task) is among the
    trace's sampling instructions, and how many choices it has; None for a space without the
    AMX tile kernel."""
    position, sampled = -1, None
    for inst in trace.insts:
        if inst.kind.name.startswith("Sample"):
            position += 1
            categorical = inst.kind.name == "SampleCategorical"
            sampled = (position, len(inst.attrs[0])) if categorical else None
        elif inst.kind.name == "Annotate" and AMX_PREFIX in str(inst.inputs[-1]):
            return sampled
    return None


def _dot_seeds(context: Any, spaces: list[Any], postprocs: list[Any], limit: int) -> list[Any]:
    """`bf16_seeds`' ``vdpbf16ps`` seeds (at most ``limit``) in ``spaces``."""
    seeds = []
    for space in spaces:
        if DOT_16x2 not in str(space.trace):
            continue
        found = _bf16_positions(space.trace)
        if found is None:
            continue
        at, rows, vectors, pairs = found
        picks = (
            _seeded(SEED_ROWS, rows),
            _seeded(SEED_VECTORS, vectors),
            _seeded(SEED_PAIRS, pairs),
        )
        for r, v, p in itertools.product(*picks):
            decisions = {at: rows.index(r), at + 1: vectors.index(v), at + 2: pairs.index(p)}
            trace = apply_decisions(context.mod, space.trace, decisions, postprocs)
            if trace is not None:
                seeds.append(trace)
            if len(seeds) >= limit:
                break
    log.info("%d bf16 micro-kernel seed(s)", len(seeds))
    return seeds[:limit]


def _seeded(preferred: tuple[int, ...], choices: list[int]) -> list[int]:
    """The ``preferred`` values among ``choices`` (best first) or, where none is, the largest
    choice no bigger than the largest preferred one (a convolution's rows divide its width:
    7 where a dense layer's seed is 8), else the smallest choice."""
    found = [value for value in preferred if value in choices]
    if found:
        return found
    fitting = [value for value in choices if value <= max(preferred)]
    return [max(fitting) if fitting else min(choices)]


def _bf16_positions(trace: Any) -> tuple[int, list[int], list[int], list[int]] | None:
    """Where `bf16_tiles`' (or `bf16_conv.bf16_conv_tiles`') decisions are: the position
    (among sampling instructions) of its ``rows`` categorical (``vectors`` and the k pairs
    follow it), the last three categoricals before the block it marks for `DOT_16x2`, and
    their candidate lists; None for a space without them."""
    position = -1
    window: list[Any] = []
    for inst in trace.insts:
        if inst.kind.name.startswith("Sample"):
            position += 1
            window = [*window, inst][-3:] if inst.kind.name == "SampleCategorical" else []
        elif inst.kind.name == "Annotate" and DOT_16x2 in str(inst.inputs[-1]):
            if len(window) < 3:
                return None
            rows, vectors, pairs = ([int(c) for c in w.attrs[0]] for w in window)
            return position - 2, rows, vectors, pairs
    return None
