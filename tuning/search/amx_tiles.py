"""The AMX tile kernel: a bf16 matmul on ``tdpbf16ps``, for the blocks `tuning.search.bf16_dot`
takes (bf16 operands, a layout-free weight, fp32 output), on targets with AMX-BF16.

`amx_tiles` packs the weight as the ``vdpbf16ps`` kernel does (`bf16_dot.pack_weight`: one B
tile is 16 contiguous rows of 64 bytes, copied once at load), splits the matmul into blocks of
``rows`` x ``cols`` (up to 2 x 2 accumulator tiles) over a k block of ``kc``, each block one call
of a `tuning.hardware.amx` intrinsic, and orders the loops ``(column tasks, k blocks, row blocks,
column blocks of a task)``: a task's row block of A is loaded once for its column blocks, the
output's init (zeros) is written for a whole column panel before the first call reads it, and
the elementwise consumers run per column task. The number of column blocks a task takes is
sampled (the search mutates it); the block shape and k block are `amx_plan`'s (an intrinsic is
named by its shape, so they cannot be a sampled variable): the biggest block the matmul's
extents divide and the longest k block up to `tuning.hardware.amx.MAX_KC` that divides k.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuning.hardware.amx import BLOCKS, MAX_KC, TILE_K, amx_intrinsic
from tuning.search.bf16_dot import AUTO_TENSORIZE, Bf16Axes, pack_weight
from tuning.search.micro_kernels import elementwise_consumers

TASK_BLOCKS = (1, 2, 4, 8)  # column blocks of a task, sampled among those dividing the columns
LANES = 16  # fp32 lanes the consumers are vectorised by


@dataclass(frozen=True)
class AmxPlan:
    """What `amx_tiles` covers with one intrinsic call: ``rows`` x ``cols`` over ``kc``."""

    rows: int
    cols: int
    kc: int


def amx_plan(rows: int, cols: int, k: int) -> AmxPlan | None:
    """The block and k block for an ``rows`` x ``cols`` output over ``k``, or None when no
    block of `BLOCKS` divides the output or 32 does not divide k."""
    block = next(((r, c) for r, c in BLOCKS if rows % r == 0 and cols % c == 0), None)
    if block is None or k % TILE_K:
        return None
    kc = max(x for x in range(TILE_K, min(k, MAX_KC) + 1, TILE_K) if k % x == 0)
    return AmxPlan(block[0], block[1], kc)


def amx_plan_of(sch: Any, block: Any) -> AmxPlan | None:
    """`amx_plan` of ``block``'s last three loops (``i``, ``j``, ``k``)."""
    extents = [sch.get(loop).extent for loop in sch.get_loops(block)[-3:]]
    if len(extents) < 3 or not all(hasattr(x, "value") for x in extents):
        return None
    return amx_plan(*(int(x.value) for x in extents))


def amx_tiles(sch: Any, block: Any, found: Bf16Axes, task: int | None = None) -> None:
    """Schedule ``block`` of ``sch`` (a copy) as the AMX tile kernel, in place (module doc);
    raises ValueError where `amx_plan_of` finds no plan. ``task``: the column blocks of a task
    chosen by the caller instead of sampled (`bench/bf16_dense.py`'s sweep)."""
    plan = amx_plan_of(sch, block)
    if plan is None:
        raise ValueError("no AMX block divides this matmul")
    name = amx_intrinsic(plan.rows, plan.cols, plan.kc)
    pack_weight(sch, block, found)
    consumers = elementwise_consumers(sch, block)  # before tensorize replaces the block
    *_, i, j, k = sch.get_loops(block)  # batch loops of extent 1 stay outside
    n_blocks = int(sch.get(j).extent.value) // plan.cols
    choices = [t for t in TASK_BLOCKS if n_blocks % t == 0]
    if task is None:
        task = sch.sample_categorical(choices, [1.0 / len(choices)] * len(choices))
    io, ii = sch.split(i, [None, plan.rows])
    jq, ji = sch.split(j, [None, plan.cols])
    jo, jn = sch.split(jq, [None, task])
    ko, ki = sch.split(k, [None, plan.kc])
    sch.reorder(jo, ko, io, jn, ii, ji, ki)
    # No parallel loop of its own: the packed space's root annotation has MetaSchedule's
    # postprocessor parallelise the outer loops, as for the vdpbf16ps kernel.
    for consumer in consumers:
        sch.reverse_compute_at(consumer, jo)
        _, lanes = sch.split(sch.get_loops(consumer)[-1], [None, LANES])
        sch.vectorize(lanes)
    # Tensorized by MetaSchedule's RewriteTensorize once RewriteReductionBlock has put the init
    # before the k blocks (over the task's whole column panel).
    sch.annotate(sch.blockize(ii), AUTO_TENSORIZE, name)
    # The intrinsic's loops over tiles must be unrolled (a tile is an immediate operand), and
    # an annotated loop keeps the postprocessor from vectorising the loops around the calls.
    sch.annotate(jn, "pragma_unroll_explicit", 1)
